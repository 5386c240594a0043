package stdio_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/session"
	"github.com/mcpedge/mcpedge/transport/stdio"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

const wait = 10 * time.Second

var bigText = strings.Repeat("0123456789abcdef", 4096) // 64 KiB

// newEngine serves the bench workload, pecho (echo on the worker pool), a
// tool that sleeps delayMs and the 64 KiB resource mem://big.
func newEngine(t *testing.T, opts engine.Options) *engine.Server {
	t.Helper()
	eng := engine.New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = eng.Shutdown(ctx)
	})
	r := eng.Registry()
	require.NoError(t, builtin.Install("bench", r, builtin.Env{}))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "pecho", InputSchema: codec.RawJSON(builtin.EchoSchema)},
		func(_ context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Text string `json:"text"`
			}
			if err := codec.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return mcp.TextResult(in.Text), nil
		}))
	require.NoError(t, r.AddTool(&mcp.Tool{Name: "sleep"}, func(ctx context.Context, req *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			DelayMs int `json:"delayMs"`
		}
		_ = codec.Unmarshal(req.Params.Arguments, &in)
		select {
		case <-time.After(time.Duration(in.DelayMs) * time.Millisecond):
			return mcp.TextResult("slept " + strconv.Itoa(in.DelayMs)), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}))
	require.NoError(t, r.AddStaticResource(&mcp.Resource{URI: "mem://big", Name: "big"}, mcp.ResourceContents{URI: "mem://big", Text: bigText}))
	return eng
}

// pipe is a client of Serve over two io.Pipes.
type pipe struct {
	in     *io.PipeWriter // the client's requests
	inR    *io.PipeReader
	lines  chan []byte // the server's output, frame by frame; closed at EOF
	served chan error  // Serve's result
	cancel context.CancelFunc
}

func serve(t *testing.T, eng *engine.Server, opts stdio.Options) *pipe {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	p := &pipe{in: inW, inR: inR, lines: make(chan []byte, 1<<16), served: make(chan error, 1), cancel: cancel}
	go func() {
		err := stdio.Serve(ctx, eng, inR, outW, opts)
		outW.Close()
		p.served <- err
	}()
	f := opts.Framer
	if f == nil {
		f = codec.NewlineFramer{}
	}
	go func() {
		defer close(p.lines)
		var buf []byte
		chunk := make([]byte, 64<<10)
		for {
			n, err := outR.Read(chunk)
			buf = append(buf, chunk[:n]...)
			for {
				frame, k, ferr := f.Next(buf)
				if ferr != nil || k == 0 {
					break
				}
				p.lines <- append([]byte(nil), frame...)
				buf = buf[k:]
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		inR.Close()
		outR.Close()
	})
	return p
}

type msg struct {
	ID     codec.RawJSON `json:"id"`
	Method string        `json:"method"`
	Result codec.RawJSON `json:"result"`
	Error  *codec.Error  `json:"error"`
}

func (m msg) text(t *testing.T) string {
	t.Helper()
	require.Nil(t, m.Error, "error answer %+v", m.Error)
	var r mcp.CallToolResult
	require.NoError(t, codec.Unmarshal(m.Result, &r))
	require.NotEmpty(t, r.Content)
	return r.Content[0].Text
}

func (p *pipe) write(t *testing.T, s string) {
	t.Helper()
	_, err := io.WriteString(p.in, s)
	require.NoError(t, err)
}

func (p *pipe) next(t *testing.T) msg {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		require.True(t, ok, "output ended")
		var m msg
		require.NoError(t, codec.Unmarshal(line, &m), "line %q", line)
		return m
	case <-time.After(wait):
		t.Fatal("no output")
	}
	return msg{}
}

// end waits for Serve to return and the output to end.
func (p *pipe) end(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.served:
		for range p.lines {
		}
		return err
	case <-time.After(wait):
		t.Fatal("Serve did not return")
	}
	return nil
}

const initLine = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stdio-test","version":"1"}}}` + "\n" +
	`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"

func (p *pipe) init(t *testing.T) {
	t.Helper()
	p.write(t, initLine)
	m := p.next(t)
	require.Equal(t, `"init"`, string(m.ID))
	require.Nil(t, m.Error)
}

func call(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`+"\n", id, tool, args)
}

func TestManyMessages(t *testing.T) {
	// Room for every pooled call at once: a full pool, or a session over
	// its in-flight share, answers "busy".
	eng := newEngine(t, engine.Options{Workers: 4096, MaxInflight: -1})
	p := serve(t, eng, stdio.Options{})
	p.init(t)
	const n = 3000
	want := make(map[string]string, n)
	var sb strings.Builder
	for i := 1; i <= n; i++ {
		text := fmt.Sprintf("message %d", i)
		switch i % 3 {
		case 0:
			sb.WriteString(call(i, "echo", `{"text":"`+text+`"}`))
		case 1:
			sb.WriteString(call(i, "pecho", `{"text":"`+text+`"}`))
		case 2:
			sb.WriteString(call(i, "add", `{"a":`+strconv.Itoa(i)+`,"b":0.5}`))
			text = strconv.Itoa(i) + ".5"
		}
		want[strconv.Itoa(i)] = text
	}
	go io.WriteString(p.in, sb.String()) // the pipe delivers it as the server reads
	for len(want) > 0 {
		m := p.next(t)
		exp, ok := want[string(m.ID)]
		require.True(t, ok, "unexpected id %s", m.ID)
		delete(want, string(m.ID))
		require.Equal(t, exp, m.text(t))
	}
	require.NoError(t, p.in.Close())
	require.NoError(t, p.end(t))
}

// TestPartialWrites splits the stream at odd points, down to single bytes
// and inside "\r\n".
func TestPartialWrites(t *testing.T) {
	eng := newEngine(t, engine.Options{})
	p := serve(t, eng, stdio.Options{})
	stream := initLine + strings.ReplaceAll(call(1, "echo", `{"text":"héllo wörld"}`), "\n", "\r\n") + "\n\n" + call(2, "pecho", `{"text":"x"}`) + call(3, "add", `{"a":2,"b":3}`)
	go func() {
		for i, n := 0, 1; i < len(stream); n = n%7 + 1 {
			end := min(i+n, len(stream))
			if _, err := io.WriteString(p.in, stream[i:end]); err != nil {
				return
			}
			i = end
		}
	}()
	want := map[string]string{`"init"`: "", "1": "héllo wörld", "2": "x", "3": "5"}
	for len(want) > 0 {
		m := p.next(t)
		exp, ok := want[string(m.ID)]
		require.True(t, ok, "unexpected id %s", m.ID)
		delete(want, string(m.ID))
		if exp != "" {
			assert.Equal(t, exp, m.text(t))
		}
	}
}

// TestEOFDrainsInFlight: the input ends while calls run; their answers are
// still written before Serve returns, and nothing is left running. In a
// synctest bubble, the calls are certain to run when EOF is read.
func TestEOFDrainsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		eng := engine.New(engine.Options{})
		defer eng.Shutdown(context.Background())
		require.NoError(t, builtin.Install("bench", eng.Registry(), builtin.Env{}))
		require.NoError(t, eng.Registry().AddTool(&mcp.Tool{Name: "sleep"}, func(ctx context.Context, _ *handlers.CallToolRequest) (*mcp.CallToolResult, error) {
			time.Sleep(100 * time.Millisecond) // on the bubble's clock: it ends once Serve has read EOF and waits
			return mcp.TextResult("slept"), nil
		}))
		inR, inW := io.Pipe()
		var out strings.Builder
		done := make(chan error, 1)
		go func() { done <- stdio.Serve(context.Background(), eng, inR, &lockedWriter{w: &out}, stdio.Options{}) }()
		_, err := io.WriteString(inW, initLine+call(1, "sleep", `{}`)+call(2, "sleep", `{}`)+call(3, "echo", `{"text":"fast"}`))
		require.NoError(t, err)
		require.NoError(t, inW.Close())
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(wait):
			t.Fatal("Serve did not return")
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		require.Len(t, lines, 4, "output %q", out.String())
		got := map[string]string{}
		for _, l := range lines {
			var m msg
			require.NoError(t, codec.Unmarshal([]byte(l), &m))
			if string(m.ID) != `"init"` {
				got[string(m.ID)] = m.text(t)
			}
		}
		assert.Equal(t, map[string]string{"1": "slept", "2": "slept", "3": "fast"}, got)
		assert.Equal(t, 0, eng.Sessions().Len())
		require.NoError(t, eng.Shutdown(context.Background()))
	})
}

// lockedWriter is an io.Writer that records what Serve's writer goroutine
// writes; the test reads it only after Serve returned.
type lockedWriter struct{ w io.Writer }

func (l *lockedWriter) Write(p []byte) (int, error) { return l.w.Write(p) }

func TestFinalLineWithoutNewline(t *testing.T) {
	eng := newEngine(t, engine.Options{})
	p := serve(t, eng, stdio.Options{})
	p.write(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	require.NoError(t, p.in.Close())
	m := p.next(t)
	assert.Equal(t, "1", string(m.ID))
	assert.Nil(t, m.Error)
	require.NoError(t, p.end(t))
}

func TestOversizedMessage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		framer codec.Framer
		input  string
	}{
		{"newline", nil, strings.Repeat("x", 5000)},
		{"newline complete line", nil, call(2, "echo", `{"text":"`+strings.Repeat("y", 2000)+`"}`)},
		{"content-length", codec.ContentLengthFramer{MaxSize: 1024}, "Content-Length: 2000\r\n\r\n{"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newEngine(t, engine.Options{MaxMessage: 1024})
			p := serve(t, eng, stdio.Options{Framer: tc.framer})
			if tc.framer == nil {
				p.init(t)
			}
			go io.WriteString(p.in, tc.input)
			m := p.next(t)
			require.NotNil(t, m.Error)
			assert.Equal(t, codec.CodeParseError, m.Error.Code)
			assert.Equal(t, "null", string(m.ID))
			require.ErrorIs(t, p.end(t), stdio.ErrTooLarge)
			assert.Equal(t, 0, eng.Sessions().Len())
		})
	}
}

func TestMalformedFrameHeader(t *testing.T) {
	eng := newEngine(t, engine.Options{})
	p := serve(t, eng, stdio.Options{Framer: codec.ContentLengthFramer{}})
	go io.WriteString(p.in, "Content-Length: abc\r\n\r\n{}")
	m := p.next(t)
	require.NotNil(t, m.Error)
	assert.Equal(t, codec.CodeParseError, m.Error.Code)
	require.ErrorIs(t, p.end(t), stdio.ErrFraming)
}

func TestContentLength(t *testing.T) {
	eng := newEngine(t, engine.Options{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	defer inR.Close()
	defer outR.Close()
	f := codec.ContentLengthFramer{}
	done := make(chan error, 1)
	go func() {
		done <- stdio.Serve(context.Background(), eng, inR, outW, stdio.Options{Framer: f})
		outW.Close()
	}()
	var in []byte
	in = f.AppendFrame(in, []byte(strings.Split(initLine, "\n")[0]))
	in = f.AppendFrame(in, []byte(strings.TrimSpace(call(1, "echo", `{"text":"a\nb"}`))))
	go func() {
		inW.Write(in)
		inW.Close()
	}()
	all, err := io.ReadAll(outR)
	require.NoError(t, err)
	require.NoError(t, <-done)
	var got []msg
	for rest := all; len(rest) > 0; {
		frame, n, err := f.Next(rest)
		require.NoError(t, err)
		require.NotZero(t, n, "truncated output %q", rest)
		var m msg
		require.NoError(t, codec.Unmarshal(frame, &m))
		got = append(got, m)
		rest = rest[n:]
	}
	require.Len(t, got, 2)
	assert.Equal(t, "a\nb", got[1].text(t))
}

// TestSlowReader: a reader that stops draining the output is dropped once
// MaxOutbound bytes wait; Serve returns at once although the write on the
// output is blocked.
func TestSlowReader(t *testing.T) {
	eng := newEngine(t, engine.Options{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe() // nobody reads outR
	defer outR.Close()
	done := make(chan error, 1)
	go func() {
		done <- stdio.Serve(context.Background(), eng, inR, outW, stdio.Options{MaxOutbound: 256 << 10})
	}()
	go func() {
		io.WriteString(inW, initLine)
		req := `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"mem://big"}}` + "\n"
		for range 1000 {
			if _, err := io.WriteString(inW, req); err != nil {
				return
			}
		}
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, session.ErrSlowConsumer)
	case <-time.After(wait):
		t.Fatal("slow reader not dropped")
	}
	// The output was closed to unblock the writer.
	_, err := outW.Write([]byte("x"))
	assert.ErrorIs(t, err, io.ErrClosedPipe)
	inR.Close()
	assert.Equal(t, 0, eng.Sessions().Len())
}

func TestContextCancel(t *testing.T) {
	eng := newEngine(t, engine.Options{})
	p := serve(t, eng, stdio.Options{})
	p.init(t)
	p.cancel()
	require.ErrorIs(t, p.end(t), context.Canceled)
	assert.Equal(t, 0, eng.Sessions().Len())
}

// TestDrainTimeout: a handler that outlives DrainTimeout after EOF is
// cancelled (its session closes) and Serve returns.
func TestDrainTimeout(t *testing.T) {
	eng := newEngine(t, engine.Options{})
	p := serve(t, eng, stdio.Options{DrainTimeout: 50 * time.Millisecond})
	p.init(t)
	p.write(t, call(1, "sleep", `{"delayMs":5000}`))
	require.Eventually(t, func() bool { return eng.Active() == 1 }, wait, time.Millisecond)
	start := time.Now()
	require.NoError(t, p.in.Close())
	require.NoError(t, p.end(t))
	assert.Less(t, time.Since(start), 2*time.Second)
	require.Eventually(t, func() bool { return eng.Active() == 0 }, wait, time.Millisecond)
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestWriteError(t *testing.T) {
	eng := newEngine(t, engine.Options{})
	inR, inW := io.Pipe()
	defer inR.Close()
	done := make(chan error, 1)
	go func() { done <- stdio.Serve(context.Background(), eng, inR, failWriter{}, stdio.Options{}) }()
	go io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "disk on fire")
	case <-time.After(wait):
		t.Fatal("Serve did not return")
	}
}

// TestReadTimeout: a message left half-written for the read timeout ends
// the session with a -32000 error naming the limit; silence between whole
// messages does not. In a synctest bubble: the timeout is on its clock.
func TestReadTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rt = 150 * time.Millisecond
		eng := newEngine(t, engine.Options{})
		p := serve(t, eng, stdio.Options{ReadTimeout: rt})
		p.init(t)
		time.Sleep(3 * rt) // silent between messages, on the bubble's clock: fine
		p.write(t, call(1, "echo", `{"text":"after a pause"}`))
		assert.Equal(t, "after a pause", p.next(t).text(t))

		began := time.Now()
		p.write(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call"`) // and nothing more
		m := p.next(t)
		require.NotNil(t, m.Error)
		assert.Equal(t, codec.CodeServerBusy, m.Error.Code)
		assert.JSONEq(t, `{"limit":"read-timeout"}`, string(m.Error.Data))
		assert.GreaterOrEqual(t, time.Since(began), rt)
		assert.LessOrEqual(t, time.Since(began), rt+rt/4, "ended within a tick of the timeout")
		require.ErrorIs(t, p.end(t), stdio.ErrReadTimeout)
		assert.Equal(t, 0, eng.Sessions().Len())
	})
}

// TestBatch: a session at 2025-03-26 may send a JSON-RPC batch, answered
// with one array line; later revisions have it refused.
func TestBatch(t *testing.T) {
	for _, tc := range []struct {
		version string
		ok      bool
	}{{mcp.Version20250326, true}, {mcp.Version20251125, false}} {
		t.Run(tc.version, func(t *testing.T) {
			eng := newEngine(t, engine.Options{})
			p := serve(t, eng, stdio.Options{})
			p.write(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"`+tc.version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
			require.Equal(t, `"init"`, string(p.next(t).ID))
			p.write(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			p.write(t, "["+strings.TrimSuffix(call(1, "pecho", `{"text":"a"}`), "\n")+`,{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`+"\n")
			var line []byte
			select {
			case line = <-p.lines:
			case <-time.After(wait):
				t.Fatal("no output")
			}
			if !tc.ok {
				var m msg
				require.NoError(t, codec.Unmarshal(line, &m), "line %s", line)
				require.NotNil(t, m.Error)
				require.Equal(t, codec.CodeInvalidRequest, m.Error.Code)
				return
			}
			var ms []msg
			require.NoError(t, codec.Unmarshal(line, &ms), "line %s", line)
			require.Len(t, ms, 2)
			ids := map[string]bool{string(ms[0].ID): true, string(ms[1].ID): true}
			require.Equal(t, map[string]bool{"1": true, "2": true}, ids)
			// An all-notification batch is not answered: the next line is the ping's.
			p.write(t, `[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}]`+"\n"+`{"jsonrpc":"2.0","id":3,"method":"ping"}`+"\n")
			require.Equal(t, "3", string(p.next(t).ID))
		})
	}
}
