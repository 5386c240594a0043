package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
)

// ErrListenEnded reports a listen stream the server ended.
var ErrListenEnded = errors.New("client: the server ended the listen stream")

// subscriptionBuffer is how many notifications a Subscription holds for a
// reader that falls behind; more are dropped (the client's callbacks still
// see them).
const subscriptionBuffer = 256

// Subscription is an open subscriptions/listen stream (2026-07-28). Its
// notifications go to the client's callbacks (OnToolListChanged,
// OnResourceUpdated, ...) as every notification does, and to
// Notifications. After a reconnection the stream is opened again.
type Subscription struct {
	c      *Client
	params []byte
	cancel context.CancelFunc

	ch    chan Notification
	acked chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	filter mcp.SubscriptionFilter
	ackSet bool
	closed bool
	err    error
}

func (s *Subscription) closeCh() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	s.mu.Unlock()
}

// Listen opens a subscriptions/listen stream for the notifications filter
// names and returns once the server acknowledged it (Filter then says
// what it agreed to). The stream lasts until ctx ends or Close is called
// (on HTTP its response stream is closed; on TCP and stdio
// notifications/cancelled is sent), the server ends it, or the client
// closes.
func (c *Client) Listen(ctx context.Context, filter mcp.SubscriptionFilter) (*Subscription, error) {
	if _, err := c.readyLink(); err != nil {
		return nil, fmt.Errorf("%s: %w", mcp.MethodSubscriptionsListen, err)
	}
	if !c.Modern() {
		return nil, fmt.Errorf("%s: %w", mcp.MethodSubscriptionsListen, ErrModernOnly)
	}
	p, err := codec.Marshal(struct {
		Notifications *mcp.SubscriptionFilter `json:"notifications"`
	}{&filter})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	s := &Subscription{
		c: c, params: p,
		cancel: func() { stop(); cancel() },
		ch:     make(chan Notification, subscriptionBuffer),
		acked:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	go s.run(sctx)
	select {
	case <-s.acked:
		return s, nil
	case <-s.done:
		s.cancel()
		if err := s.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", mcp.MethodSubscriptionsListen, err)
		}
		return nil, fmt.Errorf("%s: %w", mcp.MethodSubscriptionsListen, ErrListenEnded)
	case <-ctx.Done():
		s.cancel()
		<-s.done
		return nil, fmt.Errorf("%s: %w", mcp.MethodSubscriptionsListen, context.Cause(ctx))
	}
}

// Notifications returns the stream's notifications (the acknowledgement
// excepted). The channel is closed when the stream ends.
func (s *Subscription) Notifications() <-chan Notification { return s.ch }

// Filter returns the notifications the server agreed to send (its latest
// acknowledgement).
func (s *Subscription) Filter() mcp.SubscriptionFilter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.filter
}

// Done is closed when the stream ended for good.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err says why the stream ended: nil when it was closed by Close or its
// context, ErrListenEnded when the server ended it.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the stream and waits for it to end.
func (s *Subscription) Close() {
	s.cancel()
	<-s.done
}

// run keeps the stream open: on the current connection, and again on the
// next one after a reconnection.
func (s *Subscription) run(ctx context.Context) {
	defer func() {
		// Behind the notifications queued, or at once if the client
		// stopped.
		select {
		case s.c.notes <- s.closeCh:
		case <-s.c.bgCtx.Done():
			s.closeCh()
		}
		close(s.done)
	}()
	for {
		l, err := s.c.waitReady(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.setErr(err)
			}
			return
		}
		var id int64 = -1
		_, err = l.callx(ctx, mcp.MethodSubscriptionsListen, s.params, nil, 0, func(n int64) {
			id = n
			l.listens.Store(n, s)
		})
		if id >= 0 {
			l.listens.Delete(id)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			s.setErr(ErrListenEnded)
			return
		case l.dead.Load() && s.c.opts.Reconnect != nil:
			s.c.log.Debug("listen stream lost with its connection; reopening", "err", err)
			continue
		}
		s.setErr(err)
		return
	}
}

func (s *Subscription) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// deliver hands a notification of the stream to the subscription; it runs
// on the dispatch goroutine.
func (s *Subscription) deliver(method string, params []byte) {
	if method == mcp.NotificationSubscriptionsAcked {
		var p struct {
			Notifications mcp.SubscriptionFilter `json:"notifications"`
		}
		if err := codec.Unmarshal(params, &p); err != nil {
			s.c.log.Debug("bad subscriptions acknowledgement", "err", err)
		}
		s.mu.Lock()
		s.filter = p.Notifications
		first := !s.ackSet
		s.ackSet = true
		s.mu.Unlock()
		if first {
			close(s.acked)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.ch <- Notification{Method: method, Params: params}:
	default:
		s.c.log.Warn("listen notification dropped: the reader is behind", "method", method)
	}
}

var subscriptionIDKey = []byte(mcp.MetaSubscriptionID)

// subscription returns the open listen stream a notification belongs to
// (by its _meta subscriptionId), or nil.
func (l *link) subscription(params []byte) *Subscription {
	if l.listens.Size() == 0 || !bytes.Contains(params, subscriptionIDKey) {
		return nil
	}
	meta, ok, err := codec.ObjectField(params, "_meta")
	if err != nil || !ok {
		return nil
	}
	raw, ok, err := codec.ObjectField(meta, mcp.MetaSubscriptionID)
	if err != nil || !ok {
		return nil
	}
	id, err := strconv.ParseInt(string(trimQuotes(raw)), 10, 64)
	if err != nil {
		return nil
	}
	s, _ := l.listens.Load(id)
	return s
}

// waitReady waits until the client is ready (after a reconnection) and
// returns its connection.
func (c *Client) waitReady(ctx context.Context) (*link, error) {
	for {
		l, err := c.readyLink()
		if err == nil {
			return l, nil
		}
		if errors.Is(err, ErrClientClosed) {
			return nil, err
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return nil, context.Cause(ctx)
		}
	}
}
