package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type ctxKey struct{}

func TestReqCtx(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	defer cancelParent()
	var c reqCtx

	t.Run("cancel with a cause", func(t *testing.T) {
		c.reset(parent)
		require.NoError(t, c.Err())
		assert.Equal(t, "v", c.Value(ctxKey{}), "values come from the session's context")
		child, stop := context.WithTimeout(&c, time.Hour)
		defer stop()
		done := c.Done()
		gone := errors.New("client gone")
		c.Cancel(gone)
		<-done
		<-child.Done()
		assert.ErrorIs(t, c.Err(), context.Canceled)
		assert.ErrorIs(t, context.Cause(&c), gone)
		assert.ErrorIs(t, context.Cause(child), gone, "a derived context sees the cause")
		assert.Equal(t, "v", c.Value(ctxKey{}))
		assert.ErrorIs(t, c.cause(), gone)
		c.Cancel(errors.New("later")) // the first cause stays
		assert.ErrorIs(t, context.Cause(&c), gone)
	})
	t.Run("cancelled before Done is asked", func(t *testing.T) {
		c.reset(parent)
		c.Cancel(nil)
		<-c.Done()
		assert.ErrorIs(t, context.Cause(&c), context.Canceled)
	})
	t.Run("finish ends what was derived", func(t *testing.T) {
		c.reset(parent)
		child, stop := context.WithCancel(&c)
		defer stop()
		c.finish()
		<-child.Done()
		assert.NoError(t, c.cause(), "a finished request was not cancelled")
	})
	t.Run("derived contexts register, not watch", func(t *testing.T) {
		c.reset(parent)
		child, stop := context.WithCancel(&c)
		require.Len(t, c.afters, 1, "the standard library used AfterFunc")
		stop()
		assert.Empty(t, c.afters, "a derived context cancelled first unregisters")
		child2, stop2 := context.WithCancel(&c)
		defer stop2()
		c.Cancel(errors.New("bye"))
		<-child2.Done()
		assert.EqualError(t, context.Cause(child2), "bye")
		<-child.Done()
	})
	t.Run("parent ended", func(t *testing.T) {
		p, cancel := context.WithCancel(context.Background())
		c.reset(p)
		cancel()
		assert.ErrorIs(t, c.Err(), context.Canceled)
	})
	t.Run("no allocation unless asked", func(t *testing.T) {
		allocs := testing.AllocsPerRun(100, func() {
			c.reset(parent)
			_ = c.Err()
			c.finish()
		})
		assert.Zero(t, allocs)
	})
}
