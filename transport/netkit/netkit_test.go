package netkit

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/transport/netlimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListenBindError: a port in use is a *BindError naming the network,
// the address and the cause, which errors.Is finds.
func TestListenBindError(t *testing.T) {
	ln, err := Listen(net.ListenConfig{}, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	addr := ln.Addr().String()
	_, err = Listen(net.ListenConfig{}, "tcp", addr)
	var be *BindError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "tcp", be.Network)
	assert.Equal(t, addr, be.Addr)
	assert.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.Equal(t, "listen tcp "+addr+": address already in use", err.Error())

	_, err = Listen(net.ListenConfig{}, "tcp", "127.0.0.1:http-nope")
	require.ErrorAs(t, err, &be, "an address that does not resolve")
	assert.Contains(t, err.Error(), "listen tcp 127.0.0.1:http-nope: ")
}

// fakeListener hands out the errors, then the connections, queued on it.
type fakeListener struct {
	mu     sync.Mutex
	errs   []error
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	calls  int
}

func newFakeListener(errs ...error) *fakeListener {
	return &fakeListener{errs: errs, conns: make(chan net.Conn, 8), closed: make(chan struct{})}
}

func (l *fakeListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.calls++
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: net.ErrClosed}
	}
}

func (l *fakeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7400} }

func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// remoteConn is one end of a pipe that says it comes from ip.
type remoteConn struct {
	net.Conn
	ip string
}

func (c remoteConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.ParseIP(c.ip), Port: 5000} }

func pipeFrom(t *testing.T, ip string) net.Conn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return remoteConn{a, ip}
}

// logBuffer is a log destination safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAcceptorBacksOff: errors a later accept may not have are retried
// after a pause, 5 ms doubling, and logged once a second; the connection
// that follows is returned.
func TestAcceptorBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl := newFakeListener(acceptErr(syscall.EMFILE), acceptErr(syscall.ENFILE), acceptErr(syscall.ECONNABORTED),
			acceptErr(syscall.ENOBUFS), acceptErr(syscall.EMFILE))
		fl.conns <- pipeFrom(t, "127.0.0.2")
		var lb logBuffer
		a := NewAcceptor(fl, AcceptConfig{Transport: "tcp", Log: slog.New(slog.NewTextHandler(&lb, nil))})
		start := time.Now()
		c, ip, err := a.Accept()
		require.NoError(t, err)
		assert.NotNil(t, c)
		assert.Equal(t, netip.MustParseAddr("127.0.0.2"), ip)
		assert.Equal(t, 5*time.Millisecond+10*time.Millisecond+20*time.Millisecond+40*time.Millisecond+80*time.Millisecond,
			time.Since(start), "back-off of five failures")
		assert.Equal(t, 1, strings.Count(lb.String(), "accept failed; retrying"), "once a second:\n%s", lb.String())
		assert.Contains(t, lb.String(), "too many open files")
		assert.Contains(t, lb.String(), "transport=tcp")
	})
}

// TestAcceptorPermanentError: an error no later accept can recover from
// is returned, and so is net.ErrClosed once closed.
func TestAcceptorPermanentError(t *testing.T) {
	fl := newFakeListener(acceptErr(syscall.EINVAL))
	a := NewAcceptor(fl, AcceptConfig{})
	_, _, err := a.Accept()
	require.ErrorIs(t, err, syscall.EINVAL)
	require.NoError(t, a.Close())
	_, _, err = a.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
}

// TestAcceptorCloseEndsBackoff: closing an Acceptor in the middle of a
// back-off ends it at once.
func TestAcceptorCloseEndsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errs := make([]error, 20) // 5 ms doubling to 1 s: about 15 s of failures
		for i := range errs {
			errs[i] = acceptErr(syscall.EMFILE)
		}
		a := NewAcceptor(newFakeListener(errs...), AcceptConfig{})
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, _, err := a.Accept()
			done <- err
		}()
		time.Sleep(time.Second)
		require.NoError(t, a.Close())
		require.ErrorIs(t, <-done, net.ErrClosed)
		assert.Equal(t, time.Second, time.Since(start))
	})
}

type refusals struct {
	mu      sync.Mutex
	reasons []error
}

func (r *refusals) ConnRefused(transport string, reason error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

// TestAcceptorAdmits: connections over the limit are counted, answered by
// the transport's Refuse and never returned; the others are, with the
// address they were admitted under.
func TestAcceptorAdmits(t *testing.T) {
	fl := newFakeListener()
	for _, ip := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.3"} {
		fl.conns <- pipeFrom(t, ip)
	}
	lim := netlimit.New(0, 1)
	var obs refusals
	var refused []net.Conn
	a := NewAcceptor(fl, AcceptConfig{Transport: "http", Conns: lim, Observer: &obs,
		Refuse: func(c net.Conn, cause error) {
			refused = append(refused, c)
			assert.ErrorIs(t, cause, netlimit.ErrTooManyConnsPerIP)
			_ = c.Close()
		}})
	_, ip, err := a.Accept()
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("127.0.0.2"), ip)
	_, ip, err = a.Accept()
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("127.0.0.3"), ip, "the second from 127.0.0.2 was refused")
	assert.Len(t, refused, 1)
	require.Len(t, obs.reasons, 1)
	assert.Equal(t, codec.ReasonMaxConnsPerIP, codec.ReasonOf(obs.reasons[0]))
	assert.EqualValues(t, 2, lim.Open(), "the caller releases what it was given")
}

// TestTransient sorts accept errors.
func TestTransient(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED, syscall.ENOBUFS, syscall.EINTR,
		syscall.EPROTO, syscall.EHOSTUNREACH, syscall.ENETDOWN, syscall.EPERM} {
		assert.True(t, Transient(acceptErr(errno)), errno.Error())
	}
	for _, errno := range []syscall.Errno{syscall.EINVAL, syscall.EBADF, syscall.ENOTSOCK} {
		assert.False(t, Transient(acceptErr(errno)), errno.Error())
	}
	assert.False(t, Transient(&net.OpError{Op: "accept", Err: net.ErrClosed}))
	assert.True(t, Transient(errors.New("mystery")), "retried: only a listener known unusable stops")
}

// TestDrainer: a drain closes idle connections every DrainTick until its
// transport stops, and begins once.
func TestDrainer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var d Drainer
		assert.False(t, d.Draining())
		var calls atomic.Int64
		closeIdle := func(max int) int {
			assert.Equal(t, -1, max)
			calls.Add(1)
			return 0
		}
		stop := make(chan struct{})
		d.Start(stop, closeIdle)
		d.Start(stop, closeIdle) // begun already
		assert.True(t, d.Draining())
		time.Sleep(5*DrainTick + DrainTick/2)
		assert.EqualValues(t, 5, calls.Load())
		close(stop)
		d.Wait()
		time.Sleep(10 * DrainTick)
		assert.EqualValues(t, 5, calls.Load(), "stopped with its transport")

		var idle Drainer
		idle.Start(nil, closeIdle)
		assert.True(t, idle.Draining(), "marked although nothing serves")
		idle.Wait()
	})
}

// TestUnread: the idle check sees a byte waiting in the socket, and
// consumes nothing.
func TestUnread(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	server, err := ln.Accept()
	require.NoError(t, err)
	defer server.Close()
	require.NoError(t, server.SetReadDeadline(time.Now().Add(5*time.Second)))

	assert.False(t, UnreadConn(server), "nothing sent")
	_, err = client.Write([]byte("ab")) // one write: one segment on loopback
	require.NoError(t, err)
	var b [1]byte
	_, err = server.Read(b[:])
	require.NoError(t, err)
	assert.True(t, UnreadConn(server), "b waits")
	assert.True(t, UnreadConn(server), "and still does: a peek consumes nothing")
	_, err = server.Read(b[:])
	require.NoError(t, err)
	assert.Equal(t, byte('b'), b[0])
	assert.False(t, UnreadConn(server))
	assert.False(t, UnreadConn(remoteConn{}), "no socket")
}
