package engine

import (
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/bytesconv"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// An Observer is told how requests end, for metrics (package admin
// implements it). Set it as Options.Observer; nil costs one nil check per
// request. Its methods run on the path of every request (the event loop
// included): they must be cheap and must not block.
type Observer interface {
	// RequestDone is called once per request answered: method as the
	// client sent it (it aliases the message: do not keep it), code 0 for
	// a result or the JSON-RPC error code, d the time from the request's
	// arrival to its answer being handed to its transport, or -1 when the
	// request was not timed: answers given at once (on the event loop,
	// sub-microsecond) are timed one in 16, since reading
	// the clock twice would cost more than some of them; requests served by
	// handlers on the worker pool are all timed. A request
	// refused by a limit that its reply sink answered in its own terms
	// (an HTTP 429 or 503, engine.Refuser) has code CodeServerBusy.
	// sess.Transport names the transport.
	RequestDone(sess *session.Session, method string, code int, d time.Duration)
	// Refused is called for each request refused by a limit, with the
	// LimitError's Limit (one of the Limit* names).
	Refused(sess *session.Session, limit string)
	// SessionClosed is called once when a session ends, with its cause
	// (the transports' typed reasons: tcp.ErrIdleTimeout,
	// mcphttp.ErrSessionIdle, ...; codec.ReasonOf(cause) is its label).
	SessionClosed(sess *session.Session, cause error)
}

// A ToolObserver is an Observer told, besides, the tool of each
// tools/call: an Options.Observer that implements it is found once, at New
// (package admin's Metrics does, for its per-tool series).
type ToolObserver interface {
	// ToolDone is called once per tools/call answered, right after
	// RequestDone with the same code and d, when the engine knows the
	// tool's name: tool as the client sent it (it aliases the message: do
	// not keep it), toolError true when the tool answered a result with
	// isError set (code 0). A call refused before its tool ran (a limit,
	// authorization) has the refusal's code; one the engine made a task
	// is told when it is answered with the task. Calls whose params the
	// engine's scanner cannot read (a name with escapes, malformed
	// params) are told to RequestDone only. Like RequestDone, it runs on
	// the path of every tools/call: cheap, and never blocking.
	ToolDone(sess *session.Session, tool string, code int, toolError bool, d time.Duration)
}

func toolObserver(o Observer) ToolObserver {
	t, _ := o.(ToolObserver)
	return t
}

// A ConnObserver is told of the connections a transport opens and closes
// and of the bytes it moves. A transport finds it with
// Server.ConnObserver: the Options.Observer when it implements this
// interface too, else nil (and the transport pays one nil check).
// transport is "tcp", "http" or "stdio". Its methods must be cheap and must
// not block.
type ConnObserver interface {
	// ConnOpened is called when a connection is accepted and served.
	ConnOpened(transport string)
	// ConnClosed is called once when a served connection closes, with the
	// transport's typed reason (nil when it has none to give;
	// codec.ReasonOf(reason) is its label).
	ConnClosed(transport string, reason error)
	// ConnRefused is called when a connection is refused at accept (a
	// connection limit), with the reason.
	ConnRefused(transport string, reason error)
	// Bytes counts bytes read from (in) and written to (out) clients.
	Bytes(transport string, in, out int)
	// SlowConsumer is called when a client is cut off for not reading
	// (an SSE stream over its buffer; a TCP connection closes with
	// tcp.ErrSlowConsumer as its reason instead).
	SlowConsumer(transport string)
}

// ConnObserver returns the ConnObserver of Options.Observer, or nil.
func (s *Server) ConnObserver() ConnObserver {
	o, _ := s.opts.Observer.(ConnObserver)
	return o
}

// PoolStats returns the worker pool's busy workers and the requests
// waiting for one in the fair scheduler's queues.
func (s *Server) PoolStats() (running, waiting int) {
	return s.sched.stats()
}

// inlineTimingSample: about one in this many requests answered at once is
// timed for Observer.RequestDone (a power of two).
const inlineTimingSample = 16

// handleObserved is handleMessage with a request's end told to s.obs, and
// traced (s.tracer, trace.go), when it is answered at once (a queued
// request's is told and traced by run, which times every one: enqueue
// reads the clock).
//
// The arrival time is the one handleNonRequest recorded (Session.Touch),
// so no clock is read at the start; its low bits, clock jitter, pick the
// requests timed, so the clock is read at the end for about one in
// inlineTimingSample. On an event loop, which serves a session alone, it
// is this message's; where a session's messages arrive on several
// goroutines at once (HTTP), a later one's at worst.
//
// A tools/call answered at once (a NonBlocking tool, a refusal) is told to
// the ToolObserver with the name the dispatch scanned, and isError as the
// inline tool left it in f; a refusal decided before the params were
// scanned (-rate) scans them here, on that path only.
func (s *Server) handleObserved(sess *session.Session, m *codec.Message, frame, out []byte, reply session.Sink) (res []byte, queued bool) {
	start := len(out)
	var f toolFields
	var code int
	res, code, queued = s.route(sess, m, frame, out, reply, nil, &f)
	if !queued && len(res) >= start {
		code = observedCode(res[start:], code)
		if s.obs != nil {
			d := time.Duration(-1)
			if t0 := sess.IdleSince().UnixNano(); t0&(inlineTimingSample-1) == 0 {
				if d = time.Duration(time.Now().UnixNano() - t0); d < 0 { // the wall clock stepped back
					d = -1
				}
			}
			s.observeNow(sess, m, code, d, &f)
		}
		if s.tracer != nil {
			s.traceNow(sess, m, reply, code, &f, sess.IdleSince())
		}
	}
	return res, queued
}

// observeNow tells the Observer (and the ToolObserver, for a tools/call)
// how m, a request answered at once, ended with code; f holds its
// tools/call fields, as far as its path scanned them.
func (s *Server) observeNow(sess *session.Session, m *codec.Message, code int, d time.Duration, f *toolFields) {
	s.obs.RequestDone(sess, m.Method, code, d)
	if s.tobs != nil && m.Method == mcp.MethodToolsCall && (f.ok || f.scan(m.Params)) {
		s.tobs.ToolDone(sess, bytesconv.B2S(f.name), code, f.isError && code == 0, d)
	}
}

// observeQueued tells the Observer (and the ToolObserver) how r, a
// request served on the worker pool, ended with code.
func (s *Server) observeQueued(r *request, code int) {
	d := s.monotonic() - r.obsStart
	s.obs.RequestDone(r.sess, r.msg.Method, code, d)
	if s.tobs != nil && r.params.Name != "" {
		s.tobs.ToolDone(r.sess, r.params.Name, code, r.toolErr && code == 0, d)
	}
}

// monotonic is the time since the server was made, read from the
// monotonic clock alone (time.Now also reads the wall clock): what
// queued requests are timed with, from enqueue to run's end.
func (s *Server) monotonic() time.Duration { return time.Since(s.epoch) }

// refuse is the package's refuse, told to s.obs.
func (s *Server) refuse(sess *session.Session, out []byte, reply session.Sink, id []byte, err *LimitError) []byte {
	if s.obs != nil {
		s.obs.Refused(sess, err.Limit)
	}
	return refuse(out, reply, id, err)
}

// observedCode is what Observer.RequestDone is told of an answer given
// at once, ans, whose code is code: an empty answer (the reply sink
// answered a refusal itself) is CodeServerBusy.
func observedCode(ans []byte, code int) int {
	if len(ans) == 0 {
		return codec.CodeServerBusy
	}
	return code
}
