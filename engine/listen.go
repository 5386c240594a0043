package engine

import (
	"bytes"
	"slices"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
)

// subscriptions/listen (2026-07-28) is a request that stays open: the
// engine acknowledges it first (notifications/subscriptions/acknowledged,
// with the subset of the client's filter it honours), then sends on the
// request's stream the notifications the client opted into, each tagged
// with io.modelcontextprotocol/subscriptionId, the request's id. They come
// from the same bus as the older revisions' subscriptions and list
// changes. The stream ends when the client cancels the request (closes its
// HTTP stream, or sends notifications/cancelled on TCP and stdio; no answer
// is due then), when its connection ends, or when the server shuts down,
// which answers it with an empty result first.

// listenInline is the largest params of a subscriptions/listen served
// where it arrives (an event loop, on TCP): a bigger one, with more URIs
// to parse, deduplicate and subscribe, is handed to the worker pool, so
// that it never stalls the other connections of that loop.
const listenInline = 1 << 10

// listener is one open subscriptions/listen stream. It is the session's
// Canceler for the request's id.
type listener struct {
	s     *Server
	sess  *session.Session
	reply session.Sink
	id    []byte         // the request's id, owned
	class handlers.Class // the caller's policy class: the URIs it may subscribe
	kinds [4]bool
	since int64 // UnixNano when it opened: older changes are not its

	// mu orders the stream: the acknowledgement is sent under it, before
	// any notification, though the stream is registered before it.
	mu       sync.Mutex
	subs     []func() // bus subscriptions, by resource URI; under mu
	reserved int      // subscriptions reserved on sess for them; under mu
	resBytes int      // and the bytes of their URIs; under mu
	ended    bool     // under mu: end ran, nothing opens any more

	once sync.Once
}

// listeners is the server's set of open listen streams.
type listeners struct {
	mu  sync.Mutex
	set map[*listener]struct{}
}

func (ls *listeners) add(l *listener) {
	ls.mu.Lock()
	if ls.set == nil {
		ls.set = make(map[*listener]struct{})
	}
	ls.set[l] = struct{}{}
	ls.mu.Unlock()
}

func (ls *listeners) remove(l *listener) {
	ls.mu.Lock()
	delete(ls.set, l)
	ls.mu.Unlock()
}

// each calls fn for every open stream; fn must not block.
func (ls *listeners) each(fn func(*listener)) {
	ls.mu.Lock()
	all := make([]*listener, 0, len(ls.set))
	for l := range ls.set {
		all = append(all, l)
	}
	ls.mu.Unlock()
	for _, l := range all {
		fn(l)
	}
}

// listenParams are subscriptions/listen's params.
type listenParams struct {
	Notifications *mcp.SubscriptionFilter `json:"notifications"`
}

// listen opens a subscriptions/listen stream for m on reply, as
// handleStateless: a request refused is answered at once (queued false: its
// error appended to out, or handed to reply's Refuse, and its code
// returned); otherwise the request is open (queued) until it ends, and
// reply gets its Final.
//
// A listen whose params are small is served here. A bigger one is only
// admitted here (the drain, the session's in-flight set); its filter is
// read, and its URIs subscribed, on the worker pool (openListen), after
// waiting its turn in the fair scheduler as any request; a refusal there
// (its client's queue or every queue full) is the stream's final answer.
func (s *Server) listen(sess *session.Session, m *codec.Message, mm *statelessMeta, out []byte, reply session.Sink) (res []byte, code int, queued, handled bool) {
	const busy = codec.CodeServerBusy
	inline := len(m.Params) <= listenInline
	class := s.class(mm.caller)
	var agreed mcp.SubscriptionFilter
	if inline {
		var le *LimitError
		var e *codec.Error
		if agreed, e, le = s.listenFilter(m.Params, int(s.maxSubs.Load()), class); e != nil {
			reject(reply, e.Code)
			return codec.AppendErrorObject(out, m.ID, e), e.Code, false, true
		} else if le != nil {
			return s.refuse(sess, out, reply, m.ID, le), busy, false, true
		}
	}
	l := &listener{s: s, sess: sess, reply: reply, id: bytes.Clone(m.ID), since: time.Now().UnixNano(), class: class}
	if !s.adm.admit() {
		return s.refuse(sess, out, reply, m.ID, errShutdown), busy, false, true
	}
	s.adm.done() // a stream does not hold the drain up: Shutdown ends it
	switch err := sess.Track(l.id, l, int(s.maxInflight.Load())); err {
	case nil:
	case session.ErrInflightLimit:
		return s.refuse(sess, out, reply, m.ID, errInflight), busy, false, true
	case session.ErrDuplicateID:
		out, code = errAnswer(out, m.ID, codec.CodeInvalidRequest, errDuplicateID)
		return out, code, false, true
	default:
		out, code = errAnswer(out, m.ID, codec.CodeInvalidRequest, errSessionClosed)
		return out, code, false, true
	}
	n, size := len(agreed.ResourceSubscriptions), uriBytes(agreed.ResourceSubscriptions)
	if inline && !sess.ReserveSubscriptions(n, size, int(s.maxSubs.Load())) {
		sess.Done(l.id, l)
		sess.Answered()
		return s.refuse(sess, out, reply, m.ID, errSubs), busy, false, true
	}
	// A stream is no answer a transport waits for before it closes its
	// session (session.InFlight): the session's end ends the stream.
	sess.Answered()
	sess.StreamOpened() // ended in end
	if inline {
		l.start(&agreed, n, size)
		return out, 0, true, true
	}
	job := s.newRequest(sess, reply)
	job.buf = append(job.buf[:0], m.Params...)
	job.lis = l
	// Its filter is read on a worker, which it waits for in its client's
	// queue as the client's other requests do (the stream is already
	// admitted and tracked: no in-flight count of the scheduler's).
	if le := s.sched.submit(job, s.flowKey(sess, mm.caller), false, 0); le != nil {
		s.release(job)
		l.refuse(le)
	}
	return out, 0, true, true
}

// listenFilter reads the filter of subscriptions/listen params: the
// notifications the server serves among those asked for, the resource
// URIs deduplicated, less those class c (nil: none) may not read, hidden
// or served by nothing alike, so that the acknowledgement tells nothing
// of a hidden resource. Its strings alias params. It fails with -32602,
// or with the subscriptions limit when the distinct URIs are more than
// max (max <= 0: no limit).
func (s *Server) listenFilter(params []byte, max int, c handlers.Class) (mcp.SubscriptionFilter, *codec.Error, *LimitError) {
	var p listenParams
	if err := codec.UnmarshalNoCopy(params, &p); err != nil || p.Notifications == nil {
		return mcp.SubscriptionFilter{}, codec.NewError(codec.CodeInvalidParams, "invalid params: subscriptions/listen needs a notifications filter"), nil
	}
	caps := s.Capabilities()
	agreed := mcp.SubscriptionFilter{
		ToolsListChanged:     p.Notifications.ToolsListChanged && caps.Tools != nil,
		PromptsListChanged:   p.Notifications.PromptsListChanged && caps.Prompts != nil,
		ResourcesListChanged: p.Notifications.ResourcesListChanged && caps.Resources != nil,
	}
	if caps.Resources == nil {
		return agreed, nil, nil
	}
	uris, over := dedupe(p.Notifications.ResourceSubscriptions, max)
	if over {
		return mcp.SubscriptionFilter{}, nil, errSubs
	}
	for _, uri := range uris {
		if len(uri) > maxSubscriptionURI {
			return mcp.SubscriptionFilter{}, codec.NewError(codec.CodeInvalidParams, errLongURI), nil
		}
	}
	if c != nil {
		uris = slices.DeleteFunc(uris, func(uri string) bool { return s.reg.CheckRead(c, uri) != nil })
	}
	agreed.ResourceSubscriptions = uris
	return agreed, nil, nil
}

// dedupe drops the repeats of uris in place, keeping the first of each
// in order; it stops, reporting over, once more than max are distinct
// (max <= 0: no limit), so its work is bounded by the input and its
// memory by max.
func dedupe(uris []string, max int) (out []string, over bool) {
	out = uris[:0]
	if len(uris) <= 16 {
		for _, u := range uris {
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
		return out, max > 0 && len(out) > max
	}
	seen := make(map[string]struct{})
	for _, u := range uris {
		if _, dup := seen[u]; dup {
			continue
		}
		if max > 0 && len(out) == max {
			return out, true
		}
		seen[u] = struct{}{}
		out = append(out, u)
	}
	return out, false
}

// openListen serves on a worker a listen too big for where it arrived
// (listen): r.buf holds its params.
func (s *Server) openListen(r *request) {
	l := r.lis
	defer func() {
		if p := recover(); p != nil {
			s.recovered(p, "subscriptions/listen", l.sess, mcp.MethodSubscriptionsListen)
			b := codec.GetBuffer()
			b.B = codec.AppendError(b.B, l.id, codec.CodeInternalError, "internal error", nil)
			l.finish(false, b)
		}
	}()
	max := int(s.maxSubs.Load())
	agreed, e, le := s.listenFilter(r.buf, max, l.class)
	switch {
	case e != nil:
		reject(l.reply, e.Code)
		b := codec.GetBuffer()
		b.B = codec.AppendErrorObject(b.B, l.id, e)
		l.finish(false, b)
	case le != nil:
		l.refuse(le)
	default:
		n, size := len(agreed.ResourceSubscriptions), uriBytes(agreed.ResourceSubscriptions)
		if !l.sess.ReserveSubscriptions(n, size, max) {
			l.refuse(errSubs)
			return
		}
		l.start(&agreed, n, size)
	}
}

// uriBytes is the bytes of uris.
func uriBytes(uris []string) int {
	n := 0
	for _, u := range uris {
		n += len(u)
	}
	return n
}

// start subscribes the stream to what agreed asks for, n subscriptions
// (size bytes of URI) being reserved on its session for its URIs, and
// acknowledges it. A stream that ended meanwhile (cancelled) only gives
// the reservation back.
func (l *listener) start(agreed *mcp.SubscriptionFilter, n, size int) {
	s := l.s
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		l.sess.ReleaseSubscriptions(n, size)
		return
	}
	l.reserved, l.resBytes = n, size
	l.kinds[handlers.ListTools] = agreed.ToolsListChanged
	l.kinds[handlers.ListPrompts] = agreed.PromptsListChanged
	l.kinds[handlers.ListResources] = agreed.ResourcesListChanged
	// Registered first, so that no change after the acknowledgement is
	// missed; the acknowledgement is still the stream's first message, as
	// notifications wait for l.mu.
	s.listeners.add(l)
	l.subs = slices.Grow(l.subs, n)
	for _, uri := range agreed.ResourceSubscriptions {
		l.subs = append(l.subs, s.bus.Subscribe(session.TopicResourceUpdated+uri, func(_ string, uriJSON []byte) {
			b := codec.GetBuffer()
			b.B = append(b.B, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":`...)
			b.B = append(b.B, uriJSON...)
			b.B = l.appendTag(b.B)
			b.B = append(b.B, "}}"...)
			l.send(mcp.NotificationResourceUpdated, b)
		}))
	}
	ack, _ := codec.Marshal(agreed)
	b := codec.GetBuffer()
	b.B = append(b.B, `{"jsonrpc":"2.0","method":"`+mcp.NotificationSubscriptionsAcked+`","params":{"notifications":`...)
	b.B = append(b.B, ack...)
	b.B = l.appendTag(b.B)
	b.B = append(b.B, "}}"...)
	err := l.reply.Send(b)
	l.mu.Unlock()
	switch {
	case err != nil:
		l.end(false) // Final(nil)
	case s.adm.closing():
		l.end(true) // opened on a worker after Shutdown ended the streams
	}
}

// refuse ends the stream with the refusal err, in reply's terms (a
// Refuser answers it itself).
func (l *listener) refuse(err *LimitError) {
	b := codec.GetBuffer()
	b.B = l.s.refuse(l.sess, b.B, l.reply, l.id, err)
	if len(b.B) == 0 {
		codec.PutBuffer(b)
		b = nil
	}
	l.finish(false, b)
}

// appendTag appends ,"_meta":{subscriptionId} inside a params object.
func (l *listener) appendTag(dst []byte) []byte {
	dst = append(dst, `,"_meta":{"`+mcp.MetaSubscriptionID+`":`...)
	dst = append(dst, l.id...)
	return append(dst, '}')
}

func (l *listener) send(method string, b *codec.Buffer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.s.send(l.sess.Context(), l.sess, l.reply, method, b); err != nil {
		go l.end(false)
	}
}

// listChanged sends a list-changed notice of kind k for a change at
// changed (UnixNano), if the stream carries it and opened before it.
func (l *listener) listChanged(k handlers.ListKind, changed int64) {
	if int(k) >= len(l.kinds) || !l.kinds[k] || changed < l.since {
		return
	}
	method := listNotification(k)
	b := codec.GetBuffer()
	b.B = append(b.B, `{"jsonrpc":"2.0","method":`...)
	b.B = codec.AppendString(b.B, method)
	b.B = append(b.B, `,"params":{"_meta":{"`+mcp.MetaSubscriptionID+`":`...)
	b.B = append(b.B, l.id...)
	b.B = append(b.B, "}}}"...)
	l.send(method, b)
}

// Cancel implements session.Canceler: the client cancelled the stream, or
// its session closed. It is called with the session's lock held.
func (l *listener) Cancel(error) { go l.end(false) }

// end closes the stream once: gracefully (an empty result, when the server
// ends it), or not (the client is gone or cancelled).
func (l *listener) end(graceful bool) { l.finish(graceful, nil) }

// finish ends the stream once, with ans as its final answer when not nil
// (an error; finish takes ownership of it), else an empty result when
// graceful, else none.
func (l *listener) finish(graceful bool, ans *codec.Buffer) {
	done := false
	l.once.Do(func() {
		done = true
		l.mu.Lock()
		l.ended = true
		subs, n, size := l.subs, l.reserved, l.resBytes
		l.subs, l.reserved, l.resBytes = nil, 0, 0
		l.mu.Unlock()
		l.s.listeners.remove(l)
		for _, unsub := range subs {
			unsub()
		}
		l.sess.ReleaseSubscriptions(n, size)
		l.sess.Done(l.id, l)
		defer l.sess.StreamEnded() // once the final answer is handed over
		b := ans
		if b != nil && l.sess.State() == session.StateClosed {
			codec.PutBuffer(b)
			b = nil
		}
		if b == nil && graceful && l.sess.State() != session.StateClosed {
			b = codec.GetBuffer()
			b.B = codec.AppendResultStart(b.B, l.id)
			b.B = append(b.B, `{"resultType":"complete","_meta":{"`+mcp.MetaSubscriptionID+`":`...)
			b.B = append(b.B, l.id...)
			b.B = append(b.B, "}}}"...)
		}
		if f, ok := l.reply.(Replier); ok {
			f.Final(b)
		} else if b != nil {
			_ = l.reply.Send(b)
		}
	})
	if !done && ans != nil {
		codec.PutBuffer(ans)
	}
}

// endListeners ends every listen stream gracefully (Shutdown).
func (s *Server) endListeners() {
	s.listeners.each(func(l *listener) { l.end(true) })
}
