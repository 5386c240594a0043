package client_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/internal/testserver"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/transport/stdio"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/require"
)

// newEngine returns an engine serving the named builtin handler set.
func newEngine(t testing.TB, set string, opts engine.Options) *engine.Server {
	t.Helper()
	return testserver.Engine(t, set, opts)
}

// serveTCP serves srv over TCP on a loopback port and returns the address.
func serveTCP(t testing.TB, srv *engine.Server) (string, *tcp.Server) {
	t.Helper()
	return testserver.TCP(t, srv, tcp.Options{Loops: 2})
}

// pipeTransport serves srv with stdio.Serve over in-process pipes.
func pipeTransport(t testing.TB, srv *engine.Server) *client.PipeTransport {
	t.Helper()
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = stdio.Serve(context.Background(), srv, c2sR, s2cW, stdio.Options{DrainTimeout: time.Second})
		s2cW.Close()
		c2sR.Close()
	}()
	t.Cleanup(func() {
		c2sW.Close()
		s2cR.Close()
		<-done
	})
	return &client.PipeTransport{Reader: s2cR, Writer: c2sW}
}

func dial(t testing.TB, tr client.Transport, opts client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, tr, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakeServer accepts one TCP connection at a time and hands it to fn.
func fakeServer(t testing.TB, fn func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fn(c)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// newTCPFramed serves srv over TCP with Content-Length framing.
func newTCPFramed(t testing.TB, srv *engine.Server) string {
	t.Helper()
	addr, _ := testserver.TCP(t, srv, tcp.Options{Loops: 1, Framer: codec.ContentLengthFramer{}})
	return addr
}

// countingHandler counts log records.
type countingHandler struct{ n *atomic.Int64 }

func (h countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h countingHandler) WithGroup(string) slog.Handler             { return h }

func newCountingLogger(n *atomic.Int64) *slog.Logger { return slog.New(countingHandler{n}) }
