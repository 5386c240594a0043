package session

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nopSink drops everything it is sent.
type nopSink struct{}

func (nopSink) Send(b *codec.Buffer) error { codec.PutBuffer(b); return nil }

func initParams(v string) *mcp.InitializeParams {
	return &mcp.InitializeParams{
		ProtocolVersion: v,
		ClientInfo:      mcp.Implementation{Name: "test-client", Version: "1.2.3"},
		Capabilities:    mcp.ClientCapabilities{Roots: &mcp.RootsCapability{ListChanged: true}},
	}
}

func TestLifecycle(t *testing.T) {
	s := New(context.Background(), nopSink{})
	require.Equal(t, StateNew, s.State())
	assert.False(t, s.Initialized())
	assert.False(t, s.MarkReady(), "notifications/initialized before initialize must not make the session ready")
	assert.Equal(t, "", s.Version())

	v, err := s.Initialize(initParams(mcp.Version20250618))
	require.NoError(t, err)
	assert.Equal(t, mcp.Version20250618, v)
	assert.Equal(t, mcp.Version20250618, s.Version())
	assert.Equal(t, StateInitializing, s.State())
	assert.True(t, s.Initialized())
	assert.Equal(t, "test-client", s.ClientInfo().Name)
	require.NotNil(t, s.ClientCapabilities().Roots)
	assert.True(t, s.ClientCapabilities().Roots.ListChanged)

	_, err = s.Initialize(initParams(mcp.Version20251125))
	require.ErrorIs(t, err, ErrAlreadyInitialize)
	assert.Equal(t, mcp.Version20250618, s.Version(), "a refused initialize must not change the version")

	assert.True(t, s.MarkReady())
	assert.Equal(t, StateReady, s.State())
	assert.True(t, s.Initialized())
	assert.False(t, s.MarkReady(), "a second notifications/initialized changes nothing")

	_, err = s.Initialize(initParams(mcp.Version20251125))
	require.ErrorIs(t, err, ErrAlreadyInitialize)

	assert.True(t, s.Close(nil))
	assert.Equal(t, StateClosed, s.State())
	assert.False(t, s.Initialized())
	assert.False(t, s.Close(nil), "Close is idempotent")
	_, err = s.Initialize(initParams(mcp.Version20251125))
	require.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, context.Cause(s.Context()), ErrClosed)
}

func TestStateString(t *testing.T) {
	for st, want := range map[State]string{StateNew: "new", StateInitializing: "initializing", StateReady: "ready", StateClosed: "closed"} {
		assert.Equal(t, want, st.String())
	}
}

func TestInitializeConcurrent(t *testing.T) {
	// Exactly one of many racing initialize calls wins.
	s := New(context.Background(), nopSink{})
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Initialize(initParams(mcp.Version20251125)); err == nil {
				wins.Add(1)
			} else {
				assert.ErrorIs(t, err, ErrAlreadyInitialize)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load())
}

func TestNegotiateVersion(t *testing.T) {
	for _, tc := range []struct{ requested, want string }{
		{mcp.Version20241105, mcp.Version20241105},
		{mcp.Version20250326, mcp.Version20250326},
		{mcp.Version20250618, mcp.Version20250618},
		{mcp.Version20251125, mcp.Version20251125},
		{"2023-01-01", mcp.LatestVersion},
		{"2099-12-31", mcp.LatestVersion},
		{"", mcp.LatestVersion},
		{"2025-11-25 ", mcp.LatestVersion},
	} {
		t.Run(tc.requested, func(t *testing.T) {
			assert.Equal(t, tc.want, negotiateVersion(tc.requested))
			s := New(context.Background(), nopSink{})
			v, err := s.Initialize(initParams(tc.requested))
			require.NoError(t, err)
			assert.Equal(t, tc.want, v)
		})
	}
	assert.Equal(t, mcp.Version20251125, mcp.LatestVersion)
}

func TestSetVersion(t *testing.T) {
	s := New(context.Background(), nopSink{})
	caps := &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}
	s.SetVersion(mcp.Version20250326, caps, &mcp.Implementation{Name: "stateless"})
	assert.Equal(t, StateReady, s.State())
	assert.Equal(t, mcp.Version20250326, s.Version())
	assert.NotNil(t, s.ClientCapabilities().Sampling)
	assert.Equal(t, "stateless", s.ClientInfo().Name)
}

func TestNewID(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		id := NewID()
		require.Len(t, id, 32)
		for _, c := range id {
			require.True(t, (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'), "id %q is not lower-case hex", id)
		}
		require.False(t, seen[id], "duplicate id %q", id)
		seen[id] = true
	}
	s := New(context.Background(), nopSink{})
	assert.Len(t, s.ID(), 32)
}

func TestLogLevel(t *testing.T) {
	s := New(context.Background(), nopSink{})
	assert.Equal(t, -1, s.LogLevel())
	for i := 0; i < 8; i++ {
		assert.True(t, s.LogEnabled(i), "every level passes before logging/setLevel")
	}
	warning := mcp.LogLevelIndex("warning")
	require.GreaterOrEqual(t, warning, 0)
	s.SetLogLevel(warning)
	assert.Equal(t, warning, s.LogLevel())
	assert.False(t, s.LogEnabled(mcp.LogLevelIndex("debug")))
	assert.False(t, s.LogEnabled(mcp.LogLevelIndex("info")))
	assert.True(t, s.LogEnabled(warning))
	assert.True(t, s.LogEnabled(mcp.LogLevelIndex("error")))
	assert.True(t, s.LogEnabled(mcp.LogLevelIndex("emergency")))
}

func TestTouch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(context.Background(), nopSink{})
		first := s.IdleSince()
		assert.WithinDuration(t, time.Now(), first, 0, "the bubble's clock stands still")
		time.Sleep(2 * time.Millisecond) // on the bubble's clock: exactly 2 ms pass
		s.Touch()
		assert.True(t, s.IdleSince().After(first))
		assert.Equal(t, 2*time.Millisecond, s.IdleSince().Sub(first))
	})
}

// cancelRec is a Canceler that records its cause.
type cancelRec struct{ cause error }

func (c *cancelRec) Cancel(cause error) {
	if c.cause == nil {
		c.cause = cause
	}
}

func TestTrackCancelRequest(t *testing.T) {
	s := New(context.Background(), nopSink{})
	var c1, c2, dup cancelRec
	require.NoError(t, s.Track([]byte(`1`), &c1, 0))
	require.NoError(t, s.Track([]byte(`"1"`), &c2, 0))
	assert.Equal(t, 2, s.InFlight())
	assert.ErrorIs(t, s.Track([]byte(`1`), &dup, 0), ErrDuplicateID)

	assert.True(t, s.CancelRequest([]byte(`"1"`), nil))
	assert.ErrorIs(t, c2.cause, ErrCancelledByClient)
	assert.NoError(t, c1.cause, "the number id 1 and the string id \"1\" are distinct requests")
	gone := errors.New("client gone")
	assert.True(t, s.CancelRequest([]byte(`1`), gone))
	assert.ErrorIs(t, c1.cause, gone)

	assert.False(t, s.CancelRequest([]byte(`2`), nil), "unknown id")

	s.Done([]byte(`1`), &dup) // not the tracked request: nothing happens
	assert.Equal(t, 2, s.InFlight())
	s.Done([]byte(`"1"`), &c2)
	s.Done([]byte(`1`), &c1)
	assert.NoError(t, s.Track([]byte(`1`), &dup, 0), "a finished request's id may be reused")
	s.Done([]byte(`1`), &dup)
	assert.Equal(t, 3, s.InFlight(), "counted until answered")
	s.Answered()
	s.Answered()
	s.Answered()
	assert.Equal(t, 0, s.InFlight())
	assert.False(t, s.CancelRequest([]byte(`1`), nil), "a finished request cannot be cancelled")
}

func TestTrackLimit(t *testing.T) {
	s := New(context.Background(), nopSink{})
	var a, b, c cancelRec
	require.NoError(t, s.Track([]byte(`1`), &a, 2))
	require.NoError(t, s.Track([]byte(`2`), &b, 2))
	assert.ErrorIs(t, s.Track([]byte(`3`), &c, 2), ErrInflightLimit)
	s.Done([]byte(`1`), &a)
	assert.NoError(t, s.Track([]byte(`3`), &c, 2))
	s.Close(nil)
	assert.ErrorIs(t, s.Track([]byte(`4`), &a, 0), ErrClosed)
}

func TestTrackAllocs(t *testing.T) {
	s := New(context.Background(), nopSink{})
	var c cancelRec
	id := []byte(`12345`)
	require.NoError(t, s.Track(id, &c, 0)) // the set is made
	s.Done(id, &c)
	allocs := testing.AllocsPerRun(100, func() {
		if s.Track(id, &c, 0) != nil {
			t.Fatal("not tracked")
		}
		s.Done(id, &c)
	})
	assert.Zero(t, allocs)
}

func TestCloseCancelsInFlight(t *testing.T) {
	s := New(context.Background(), nopSink{})
	var c cancelRec
	require.NoError(t, s.Track([]byte(`7`), &c, 0))
	defer s.Done([]byte(`7`), &c)
	cause := errors.New("connection reset")
	require.True(t, s.Close(cause))
	assert.ErrorIs(t, c.cause, cause)
	assert.ErrorIs(t, context.Cause(s.Context()), cause)
}

func TestParentContextBoundsSession(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	s := New(parent, nopSink{})
	cancel()
	<-s.Context().Done()
}

func TestCloseFailsPendingClientRequests(t *testing.T) {
	s := New(context.Background(), nopSink{})
	c, err := s.Tracker.Start()
	require.NoError(t, err)
	cause := errors.New("gone")
	s.Close(cause)
	_, err = s.Tracker.Wait(context.Background(), c, time.Second)
	assert.ErrorIs(t, err, cause)
	_, err = s.Tracker.Start()
	assert.ErrorIs(t, err, cause)
}

func TestSubscriptions(t *testing.T) {
	s := New(context.Background(), nopSink{})
	var calls [4]atomic.Int32
	unsub := func(i int) func() { return func() { calls[i].Add(1) } }

	assert.NoError(t, s.Subscribe("mem://a", unsub(0), 0))
	assert.NoError(t, s.Subscribe("mem://b", unsub(1), 0))
	assert.NoError(t, s.Subscribe("mem://a", unsub(2), 0), "a repeated subscription succeeds")
	assert.Equal(t, int32(1), calls[2].Load(), "the repeated subscription's unsub runs at once")
	assert.Equal(t, 2, s.Subscriptions())
	assert.True(t, s.Subscribed("mem://a"))
	assert.False(t, s.Subscribed("mem://c"))

	assert.True(t, s.Unsubscribe("mem://a"))
	assert.Equal(t, int32(1), calls[0].Load())
	assert.False(t, s.Unsubscribe("mem://a"))
	assert.Equal(t, int32(1), calls[0].Load(), "unsub runs once")
	assert.Equal(t, 1, s.Subscriptions())

	s.Close(nil)
	assert.Equal(t, int32(1), calls[1].Load(), "Close ends the remaining subscriptions")
	assert.Equal(t, 0, s.Subscriptions())

	assert.ErrorIs(t, s.Subscribe("mem://d", unsub(3), 0), ErrClosed)
	assert.Equal(t, int32(1), calls[3].Load(), "a subscription on a closed session is undone at once")
	assert.Equal(t, 0, s.Subscriptions())
	assert.False(t, s.ReserveSubscriptions(1, 1, 0), "a closed session reserves nothing")
}

// TestSubscriptionLimit: resource subscriptions and reserved ones (listen
// URIs) share one limit per session, in count and in URI bytes; a
// repeated subscription costs nothing, and a refused one is undone at
// once.
func TestSubscriptionLimit(t *testing.T) {
	s := New(context.Background(), nopSink{})
	var undone atomic.Int32
	unsub := func() { undone.Add(1) }
	const max = 3
	require.NoError(t, s.Subscribe("mem://a", unsub, max))
	require.True(t, s.ReserveSubscriptions(1, 7, max))
	assert.False(t, s.ReserveSubscriptions(2, 14, max), "two more do not fit")
	assert.True(t, s.CanSubscribe("mem://b", max))
	require.NoError(t, s.Subscribe("mem://b", unsub, max))
	assert.Equal(t, max, s.Subscriptions())

	assert.True(t, s.CanSubscribe("mem://a", max), "one held already")
	assert.NoError(t, s.Subscribe("mem://a", unsub, max))
	assert.False(t, s.CanSubscribe("mem://c", max))
	assert.ErrorIs(t, s.Subscribe("mem://c", unsub, max), ErrSubscriptionLimit)
	assert.Equal(t, int32(2), undone.Load(), "the repeat and the refused subscription are undone")
	assert.False(t, s.Subscribed("mem://c"))

	s.ReleaseSubscriptions(1, 7)
	assert.NoError(t, s.Subscribe("mem://c", unsub, max), "a released place is free again")
	assert.NoError(t, s.Subscribe("mem://d", unsub, 0), "no limit")
	assert.Equal(t, 4, s.Subscriptions())

	// URIs: max*URIBudget bytes in all, a long one among short ones.
	u := New(context.Background(), nopSink{})
	long := strings.Repeat("x", 2*URIBudget)
	require.NoError(t, u.Subscribe(long, unsub, max))
	assert.False(t, u.CanSubscribe(long+"y", max), "a second one as long does not fit")
	assert.ErrorIs(t, u.Subscribe(long+"y", unsub, max), ErrSubscriptionLimit)
	assert.False(t, u.ReserveSubscriptions(1, URIBudget+1, max))
	require.True(t, u.ReserveSubscriptions(1, URIBudget, max), "exactly the budget")
	u.ReleaseSubscriptions(1, URIBudget)
	assert.True(t, u.Unsubscribe(long))
	require.NoError(t, u.Subscribe(long+"y", unsub, max), "its bytes are free again")
}

func TestOnClose(t *testing.T) {
	s := New(context.Background(), nopSink{})
	var order []int
	s.OnClose(func() { order = append(order, 1) })
	s.OnClose(func() { order = append(order, 2) })
	s.Close(nil)
	s.Close(nil)
	assert.Equal(t, []int{1, 2}, order, "hooks run once, in order")
	ran := false
	s.OnClose(func() { ran = true })
	assert.True(t, ran, "a hook registered after Close runs at once")
}

func TestCloseConcurrent(t *testing.T) {
	s := New(context.Background(), nopSink{})
	var hooks atomic.Int32
	s.OnClose(func() { hooks.Add(1) })
	var closed atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if s.Close(nil) {
				closed.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			_ = s.Subscribe("mem://x", func() {}, 0)
			var c cancelRec
			if s.Track([]byte(`1`), &c, 0) == nil {
				s.Done([]byte(`1`), &c)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), closed.Load())
	assert.Equal(t, int32(1), hooks.Load())
	assert.Equal(t, 0, s.Subscriptions())
}
