package engine

import (
	"sync"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// JSON-RPC batches. Revision 2025-03-26 alone lets a client send several
// messages as one JSON array (2025-06-18 removed it): the server serves
// each and answers with one array of the answers, in any order, or with
// nothing when no answer is due (every element a notification or a
// response). A session negotiated at any other revision, or not yet
// initialized, has a batch refused as any frame that is not a message
// (-32600), as is an empty array.

// batchAllowed reports whether sess may send batches.
func batchAllowed(sess *session.Session) bool {
	return !sess.Stateless() && sess.Version() == mcp.Version20250326
}

// HandleBatch serves frame, a JSON-RPC batch (a JSON array of messages),
// when the session may send batches (it negotiated 2025-03-26); it
// reports false, having done nothing, when frame is not a non-empty JSON
// array or the session may not: the caller then answers the frame as
// today (codec.Decode refuses it with -32600).
//
// Every element is served as HandleMessage serves a message. done is
// called once, with the JSON array of the answers (done owns the
// buffer), or with nil when no answer is due: at once, on the calling
// goroutine, when every element was answered at once, else on the worker
// that answered the last queued request. What the requests send before
// their answers (progress, logs, server-to-client requests) goes to sink,
// nil meaning the session's Out. HandleBatch does not block on handlers
// and does not retain frame.
func (c Conn) HandleBatch(frame []byte, sink session.Sink, done func(*codec.Buffer)) bool {
	ans, ok, now := c.s.handleBatch(c.sess, frame, sink, done)
	if now {
		done(ans)
	}
	return ok
}

// handleBatch serves a batch; now reports that every answer was given at
// once: ans is the array then (nil if none is due), and done is not
// called.
func (s *Server) handleBatch(sess *session.Session, frame []byte, sink session.Sink, done func(*codec.Buffer)) (ans *codec.Buffer, ok, now bool) {
	if !batchAllowed(sess) {
		return nil, false, false
	}
	var elems []codec.RawJSON
	if err := codec.Unmarshal(frame, &elems); err != nil || len(elems) == 0 {
		return nil, false, false
	}
	if sink == nil {
		sink = sess.Out
	}
	b := &batch{sink: sink, done: done, pending: 1}
	m := messages.Get().(*codec.Message)
	defer messages.Put(m)
	var out []byte
	for _, elem := range elems {
		out = out[:0]
		if err := s.decode(sess, elem, m); err != nil {
			out = codec.AppendDecodeError(out, m, err)
		} else {
			b.mu.Lock()
			b.pending++
			b.mu.Unlock()
			var queued bool
			out, queued = s.handleMessage(sess, m, elem, out, b)
			if !queued {
				b.release(false)
			}
		}
		if len(out) > 0 {
			b.add(out)
		}
	}
	ans, now = b.release(true)
	return ans, true, now
}

// batch collects the answers of a batch's requests; it is their reply
// sink.
type batch struct {
	sink session.Sink
	done func(*codec.Buffer)

	mu      sync.Mutex
	answers *codec.Buffer // "[a,b,..." so far; nil before the first
	pending int           // queued requests unanswered, +1 while elements are served
}

// Send implements session.Sink: a request's messages other than its
// answer go on to the batch's sink.
func (b *batch) Send(buf *codec.Buffer) error { return b.sink.Send(buf) }

// Final implements Replier: a queued request's answer joins the array.
func (b *batch) Final(buf *codec.Buffer) {
	if buf != nil {
		if len(buf.B) > 0 {
			b.add(buf.B)
		}
		codec.PutBuffer(buf)
	}
	b.release(false)
}

func (b *batch) add(answer []byte) {
	b.mu.Lock()
	if b.answers == nil {
		b.answers = codec.GetBuffer()
		b.answers.B = append(b.answers.B, '[')
	} else {
		b.answers.B = append(b.answers.B, ',')
	}
	b.answers.B = append(b.answers.B, answer...)
	b.mu.Unlock()
}

// release ends one pending answer. The last closes the array: it hands it
// to done, or, when keep is set (the serving loop's own release), returns
// it with last set instead.
func (b *batch) release(keep bool) (ans *codec.Buffer, last bool) {
	b.mu.Lock()
	b.pending--
	last = b.pending == 0
	ans = b.answers
	b.mu.Unlock()
	if !last {
		return nil, false
	}
	if ans != nil {
		ans.B = append(ans.B, ']')
	}
	if keep {
		return ans, true
	}
	b.done(ans)
	return nil, true
}

// handleBatchFrame serves a batch frame from an event loop: the array is
// appended to out when every element was answered at once, else sent to
// the session's Out once the last queued request is answered. ok is false
// when frame is not a batch the session may send.
func (s *Server) handleBatchFrame(sess *session.Session, frame, out []byte) (res []byte, ok bool) {
	if !codec.IsBatch(frame) {
		return out, false
	}
	ans, ok, now := s.handleBatch(sess, frame, nil, func(ans *codec.Buffer) {
		if ans != nil {
			sendNonEmpty(sess.Out, ans)
		}
	})
	if now && ans != nil {
		out = append(out, ans.B...)
		codec.PutBuffer(ans)
	}
	return out, ok
}
