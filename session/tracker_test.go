package session

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTrackerResolve(t *testing.T) {
	tr := NewTracker()
	c1, err := tr.Start()
	require.NoError(t, err)
	c2, err := tr.Start()
	require.NoError(t, err)
	assert.NotEqual(t, c1.ID, c2.ID)
	assert.Equal(t, 2, tr.Pending())
	assert.Equal(t, strconv.FormatInt(c2.ID, 10), string(c2.AppendID(nil)))

	got, ok := tr.Lookup(c1.AppendID(nil))
	require.True(t, ok)
	assert.Same(t, c1, got)

	result := []byte(`{"model":"m","role":"assistant"}`)
	require.NoError(t, tr.Resolve(c1.AppendID(nil), result, nil))
	result[2] = 'X' // the reply holds a copy
	r, err := tr.Wait(context.Background(), c1, time.Second)
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","role":"assistant"}`, string(r.Result))
	assert.Nil(t, r.Err)

	// A quoted id resolves the same call (ids we mint are numbers).
	quoted := []byte(`"` + strconv.FormatInt(c2.ID, 10) + `"`)
	require.NoError(t, tr.Resolve(quoted, nil, []byte(`{"code":-32042,"message":"needs url","data":{"x":1}}`)))
	r, err = tr.Wait(context.Background(), c2, time.Second)
	require.NoError(t, err)
	require.NotNil(t, r.Err)
	assert.Equal(t, -32042, r.Err.Code)
	assert.Equal(t, "needs url", r.Err.Message)
	assert.JSONEq(t, `{"x":1}`, string(r.Err.Data))
	assert.Equal(t, 0, tr.Pending())
}

func TestTrackerMalformedErrorObject(t *testing.T) {
	tr := NewTracker()
	c, err := tr.Start()
	require.NoError(t, err)
	require.NoError(t, tr.Resolve(c.AppendID(nil), nil, []byte(`{"code":"x"}`)))
	r, err := tr.Wait(context.Background(), c, time.Second)
	require.NoError(t, err)
	require.NotNil(t, r.Err)
	assert.Equal(t, codec.CodeInternalError, r.Err.Code)
}

func TestTrackerUnknownID(t *testing.T) {
	tr := NewTracker()
	c, err := tr.Start()
	require.NoError(t, err)
	for _, id := range []string{`999`, `"abc"`, `-1`, `1.5`, `null`, ``, `"`, `12345678901234567890`} {
		t.Run(id, func(t *testing.T) {
			assert.ErrorIs(t, tr.Resolve([]byte(id), []byte(`{}`), nil), ErrUnknownID)
			_, ok := tr.Lookup([]byte(id))
			assert.False(t, ok)
		})
	}
	assert.Equal(t, 1, tr.Pending(), "an unknown id disturbs no pending call")
	require.NoError(t, tr.Resolve(c.AppendID(nil), []byte(`{}`), nil))
	assert.ErrorIs(t, tr.Resolve(c.AppendID(nil), []byte(`{}`), nil), ErrUnknownID, "a duplicate answer is unknown")
}

func TestTrackerTimeout(t *testing.T) {
	tr := NewTracker()
	c, err := tr.Start()
	require.NoError(t, err)
	start := time.Now()
	_, err = tr.Wait(context.Background(), c, 30*time.Millisecond)
	require.ErrorIs(t, err, ErrTimeout)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
	assert.Equal(t, 0, tr.Pending(), "a timed-out call is forgotten")
	assert.ErrorIs(t, tr.Resolve(c.AppendID(nil), []byte(`{}`), nil), ErrUnknownID, "a late answer is unknown")
}

func TestTrackerContext(t *testing.T) {
	tr := NewTracker()
	c, err := tr.Start()
	require.NoError(t, err)
	cause := errors.New("handler gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(10*time.Millisecond, func() { cancel(cause) })
	_, err = tr.Wait(ctx, c, 0)
	require.ErrorIs(t, err, cause)
	assert.Equal(t, 0, tr.Pending())
}

func TestTrackerForget(t *testing.T) {
	tr := NewTracker()
	c, err := tr.Start()
	require.NoError(t, err)
	tr.Forget(c)
	assert.Equal(t, 0, tr.Pending())
	assert.ErrorIs(t, tr.Resolve(c.AppendID(nil), []byte(`{}`), nil), ErrUnknownID)
}

func TestTrackerFailAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTracker()
		const n = 10
		calls := make([]*Call, n)
		for i := range calls {
			var err error
			calls[i], err = tr.Start()
			require.NoError(t, err)
		}
		cause := errors.New("connection lost")
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = tr.Wait(context.Background(), c, 5*time.Second)
			}()
		}
		synctest.Wait() // every waiter is blocked in Wait
		tr.FailAll(cause)
		tr.FailAll(errors.New("second cause loses"))
		wg.Wait()
		for _, err := range errs {
			assert.ErrorIs(t, err, cause)
		}
		assert.Equal(t, 0, tr.Pending())
		_, err := tr.Start()
		assert.ErrorIs(t, err, cause, "Start fails after FailAll")

		tr2 := NewTracker()
		tr2.FailAll(nil)
		_, err = tr2.Start()
		assert.ErrorIs(t, err, ErrTrackerClosed)
	})
}

func TestTrackerConcurrent(t *testing.T) {
	tr := NewTracker()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				c, err := tr.Start()
				if !assert.NoError(t, err) {
					return
				}
				want := `{"g":` + strconv.Itoa(g) + `,"i":` + strconv.Itoa(i) + `}`
				go func() { assert.NoError(t, tr.Resolve(c.AppendID(nil), []byte(want), nil)) }()
				r, err := tr.Wait(context.Background(), c, 5*time.Second)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, want, string(r.Result))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 0, tr.Pending())
}

func TestTrackerFailAllRacesStart(t *testing.T) {
	// Every call either fails to start or is failed by FailAll: none is left
	// pending forever.
	for range 50 {
		tr := NewTracker()
		var wg sync.WaitGroup
		results := make(chan error, 64)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := tr.Start()
				if err != nil {
					results <- nil
					return
				}
				_, err = tr.Wait(context.Background(), c, 5*time.Second)
				results <- err
			}()
		}
		tr.FailAll(ErrClosed)
		wg.Wait()
		close(results)
		for err := range results {
			if err != nil {
				assert.ErrorIs(t, err, ErrClosed)
			}
		}
	}
}
