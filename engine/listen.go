package engine

import (
	"bytes"
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

// listener is one open subscriptions/listen stream. It is the session's
// Canceler for the request's id.
type listener struct {
	s     *Server
	sess  *session.Session
	reply session.Sink
	id    []byte // the request's id, owned
	kinds [4]bool
	subs  []func() // bus subscriptions, by resource URI
	since int64    // UnixNano when it opened: older changes are not its

	// mu orders the stream: the acknowledgement is sent under it, before
	// any notification, though the stream is registered before it.
	mu sync.Mutex

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
// handleModern: a request refused is answered at once (queued false: its
// error appended to out, or handed to reply's Refuse); otherwise the
// request is open (queued) until it ends, and reply gets its Final.
func (s *Server) listen(sess *session.Session, m *codec.Message, _ *modernMeta, _ []byte, out []byte, reply session.Sink) (res []byte, queued, handled bool) {
	var p listenParams
	if err := codec.Unmarshal(m.Params, &p); err != nil || p.Notifications == nil {
		reject(reply, codec.CodeInvalidParams)
		return codec.AppendError(out, m.ID, codec.CodeInvalidParams, "invalid params: subscriptions/listen needs a notifications filter", nil), false, true
	}
	caps := s.Capabilities()
	agreed := mcp.SubscriptionFilter{
		ToolsListChanged:     p.Notifications.ToolsListChanged && caps.Tools != nil,
		PromptsListChanged:   p.Notifications.PromptsListChanged && caps.Prompts != nil,
		ResourcesListChanged: p.Notifications.ResourcesListChanged && caps.Resources != nil,
	}
	if caps.Resources != nil {
		agreed.ResourceSubscriptions = p.Notifications.ResourceSubscriptions
	}
	l := &listener{s: s, sess: sess, reply: reply, id: bytes.Clone(m.ID), since: time.Now().UnixNano()}
	l.kinds[handlers.ListTools] = agreed.ToolsListChanged
	l.kinds[handlers.ListPrompts] = agreed.PromptsListChanged
	l.kinds[handlers.ListResources] = agreed.ResourcesListChanged
	if !s.adm.admit() {
		return s.refuse(sess, out, reply, m.ID, errShutdown), false, true
	}
	s.adm.done() // a stream does not hold the drain up: Shutdown ends it
	switch err := sess.Track(l.id, l, int(s.maxInflight.Load())); err {
	case nil:
	case session.ErrInflightLimit:
		return s.refuse(sess, out, reply, m.ID, errInflight), false, true
	case session.ErrDuplicateID:
		return codec.AppendError(out, m.ID, codec.CodeInvalidRequest, "invalid request: a request with this id is in flight", nil), false, true
	default:
		return codec.AppendError(out, m.ID, codec.CodeInvalidRequest, "session closed", nil), false, true
	}
	// A stream is no answer a transport waits for before it closes its
	// session (session.InFlight): the session's end ends the stream.
	sess.Answered()
	sess.StreamOpened() // ended in end
	// Registered first, so that no change after the acknowledgement is
	// missed; the acknowledgement is still the stream's first message, as
	// notifications wait for l.mu.
	l.mu.Lock()
	s.listeners.add(l)
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
	ack, _ := codec.Marshal(&agreed)
	b := codec.GetBuffer()
	b.B = append(b.B, `{"jsonrpc":"2.0","method":"`+mcp.NotificationSubscriptionsAcked+`","params":{"notifications":`...)
	b.B = append(b.B, ack...)
	b.B = l.appendTag(b.B)
	b.B = append(b.B, "}}"...)
	err := reply.Send(b)
	l.mu.Unlock()
	if err != nil {
		l.end(false) // Final(nil)
	}
	return out, true, true
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
func (l *listener) end(graceful bool) {
	l.once.Do(func() {
		l.s.listeners.remove(l)
		l.mu.Lock()
		subs := l.subs
		l.subs = nil
		l.mu.Unlock()
		for _, unsub := range subs {
			unsub()
		}
		l.sess.Done(l.id, l)
		defer l.sess.StreamEnded() // once the final answer is handed over
		var b *codec.Buffer
		if graceful && l.sess.State() != session.StateClosed {
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
}

// endListeners ends every listen stream gracefully (Shutdown).
func (s *Server) endListeners() {
	s.listeners.each(func(l *listener) { l.end(true) })
}
