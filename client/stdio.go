package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mcpedge/mcpedge/codec"
)

// StdioTransport runs an MCP server as a subprocess and speaks
// newline-delimited JSON-RPC on its stdin and stdout. Each Connect starts a
// new process. Closing the connection closes the server's stdin, then
// sends SIGTERM and finally SIGKILL if it does not exit, as the spec's
// shutdown sequence says. The zero value is not usable: Command is
// required. A StdioTransport is safe for concurrent use.
type StdioTransport struct {
	// Command is the program to run; Args its arguments.
	Command string
	Args    []string
	// Env is added to the client's environment (KEY=value entries).
	Env []string
	// Dir is the working directory; empty means the client's.
	Dir string
	// Stderr receives the server's stderr, one Info record per line with
	// the line under "stderr"; nil discards it. Per the spec, stderr is
	// logging, never an error signal.
	Stderr *slog.Logger
	// Framer frames messages; nil means newline-delimited JSON.
	Framer codec.Framer
	// MaxMessage bounds one inbound message; <= 0 means 4 MiB.
	MaxMessage int
	// MaxOutbound bounds the bytes queued for the server; <= 0 means 8 MiB.
	MaxOutbound int
	// StopTimeout is how long Close waits after closing stdin, and again
	// after SIGTERM, before escalating; <= 0 means 2 s.
	StopTimeout time.Duration
}

// Connect implements Transport.
func (t *StdioTransport) Connect(_ context.Context, in Inbound) (Conn, error) {
	if t.Command == "" {
		return nil, errors.New("client: StdioTransport: no command")
	}
	cmd := exec.Command(t.Command, t.Args...)
	cmd.Dir = t.Dir
	if len(t.Env) > 0 {
		cmd.Env = append(os.Environ(), t.Env...)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("client: stdio: %w", err)
	}
	// Own pipes for stdout and stderr, so that cmd.Wait (run as soon as the
	// process exits) never races with the readers.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("client: stdio: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("client: stdio: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, fmt.Errorf("client: stdio: start %s: %w", t.Command, err)
	}
	outW.Close()
	errW.Close()

	p := &process{cmd: cmd, stdin: stdin, stdout: outR, stderr: errR, exited: make(chan struct{}), logged: make(chan struct{}), stop: t.StopTimeout}
	if p.stop <= 0 {
		p.stop = 2 * time.Second
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	go p.logStderr(t.Stderr)
	f := t.Framer
	if f == nil {
		f = codec.NewlineFramer{MaxSize: t.MaxMessage}
	}
	return newStreamConn(outR, stdin, p.close, f, in, t.MaxOutbound), nil
}

// process is a running server.
type process struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *os.File
	stderr  *os.File
	exited  chan struct{}
	waitErr error
	logged  chan struct{}
	stop    time.Duration
}

// close stops the process: stdin closed, then SIGTERM, then SIGKILL.
func (p *process) close() error {
	p.stdin.Close()
	if !p.waitExit() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if !p.waitExit() {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	// A grandchild may still hold the pipes open: close our ends.
	p.stdout.Close()
	select {
	case <-p.logged:
	case <-time.After(p.stop):
		p.stderr.Close()
		<-p.logged
	}
	return nil
}

func (p *process) waitExit() bool {
	t := time.NewTimer(p.stop)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

func (p *process) logStderr(log *slog.Logger) {
	defer close(p.logged)
	defer p.stderr.Close()
	r := bufio.NewReaderSize(p.stderr, 4096)
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 && log != nil {
			if n := len(line); line[n-1] == '\n' {
				line = line[:n-1]
			}
			log.Info("server stderr", "stderr", string(line))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// PipeTransport speaks framed JSON-RPC over a pair of streams the caller
// already has: an in-process server on io.Pipe, or a subprocess started by
// other means. It connects once; a second Connect fails. It is safe for
// concurrent use.
type PipeTransport struct {
	// Reader carries the server's messages; Writer carries the client's.
	// Both are closed when the connection closes.
	Reader io.ReadCloser
	Writer io.WriteCloser
	// Framer frames messages; nil means newline-delimited JSON.
	Framer codec.Framer
	// MaxMessage bounds one inbound message; <= 0 means 4 MiB.
	MaxMessage int

	mu   sync.Mutex
	used bool
}

// ErrTransportUsed is returned by a one-shot transport's second Connect.
var ErrTransportUsed = errors.New("client: transport already connected once")

// Connect implements Transport.
func (t *PipeTransport) Connect(_ context.Context, in Inbound) (Conn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.used {
		return nil, ErrTransportUsed
	}
	t.used = true
	f := t.Framer
	if f == nil {
		f = codec.NewlineFramer{MaxSize: t.MaxMessage}
	}
	closer := func() error {
		t.Writer.Close()
		return t.Reader.Close()
	}
	return newStreamConn(t.Reader, t.Writer, closer, f, in, 0), nil
}

// TCPTransport speaks framed JSON-RPC over TCP (mcpedge's -tcp
// transport): newline-delimited by default, or Content-Length framed. It is
// safe for concurrent use.
type TCPTransport struct {
	// Addr is host:port.
	Addr string
	// Framer frames messages; nil means newline-delimited JSON.
	Framer codec.Framer
	// MaxMessage bounds one inbound message; <= 0 means 4 MiB.
	MaxMessage int
	// MaxOutbound bounds the bytes queued for the server; <= 0 means 8 MiB.
	MaxOutbound int
	// Dialer dials; nil means a net.Dialer with a 10 s timeout.
	Dialer *net.Dialer
	// TLS, when set, speaks TLS over the connection (an mcpedge server's
	// -tls-cert: tcps://): the server's certificate is verified against
	// TLS.RootCAs (nil: the system's) for TLS.ServerName (empty: Addr's
	// host), and TLS.Certificates hold the client's for mutual TLS.
	TLS *tls.Config
}

// Connect implements Transport.
func (t *TCPTransport) Connect(ctx context.Context, in Inbound) (Conn, error) {
	d := t.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: 10 * time.Second}
	}
	nc, err := d.DialContext(ctx, "tcp", t.Addr)
	if err != nil {
		return nil, fmt.Errorf("client: tcp: %w", err)
	}
	if t.TLS != nil {
		cfg := t.TLS
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(t.Addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("client: tcps: %w", err)
		}
		nc = tc
	}
	f := t.Framer
	if f == nil {
		f = codec.NewlineFramer{MaxSize: t.MaxMessage}
	}
	return newStreamConn(nc, nc, nc.Close, f, in, t.MaxOutbound), nil
}
