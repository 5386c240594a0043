package client

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestNotificationOutlivesReadBuffer: a notification's method and params
// alias the reader's buffer, which the next read overwrites, while its
// callback runs later on the dispatch goroutine. The callback must still
// see the message as it arrived.
func TestNotificationOutlivesReadBuffer(t *testing.T) {
	got := make(chan string, 1)
	c := New(&PipeTransport{}, Options{Era: EraLegacy, OnResourceUpdated: func(uri string) { got <- uri }})
	c.bg.Add(1)
	go c.dispatch()
	defer c.terminate(nil)

	release := make(chan struct{})
	c.enqueue(func() { <-release }) // hold the dispatcher

	buf := []byte(`notifications/resources/updated{"uri":"mem://a"}`)
	method := unsafe.String(&buf[0], len("notifications/resources/updated"))
	params := buf[len(method):]
	newLink(c).notification(method, params)
	for i := range buf { // the reader's next read
		buf[i] = 'x'
	}
	close(release)
	select {
	case uri := <-got:
		require.Equal(t, "mem://a", uri)
	case <-time.After(5 * time.Second):
		t.Fatal("the notification was lost with its buffer")
	}
}
