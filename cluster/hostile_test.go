package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/cluster"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// The hostile clients of the cluster's subjects: a local process that
// finds the embedded server's client port, and a publisher on the
// subjects that does not run mcpedge's code.

// TestLocalNATSClientRefused: a process on the host that connects to the
// embedded server's client port, with no credentials or with any it
// might guess (the route secret included), is refused: it can neither
// read forwarded requests (bearer tokens and all) nor answer them.
func TestLocalNATSClientRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	a := startNode(t, "a", nil)
	defer a.kill(t)
	b := startNode(t, "b", []string{routeOf(a)})
	defer b.kill(t)
	waitMesh(t, a, b)
	for _, nd := range []*node{a, b} {
		for _, tc := range []struct {
			name string
			opts []nats.Option
		}{
			{"no credentials", nil},
			{"the node's user", []nats.Option{nats.UserInfo("mcpedge-node", "")}},
			{"the route secret", []nats.Option{nats.UserInfo("mcpedge", routeSecret)}},
			{"a token", []nats.Option{nats.Token(routeSecret)}},
		} {
			t.Run(nd.name+" "+tc.name, func(t *testing.T) {
				opts := append([]nats.Option{nats.NoReconnect(), nats.Timeout(5 * time.Second)}, tc.opts...)
				nc, err := nats.Connect(nd.n.ClientURL(), opts...)
				if err == nil {
					defer nc.Close()
					t.Fatalf("a local client connected to %s: %s", nd.n.ClientURL(), eavesdrop(t, nc, a, b))
				}
				require.ErrorIs(t, err, nats.ErrAuthorization)
			})
		}
	}
	// The node's own connection is in process, and works.
	call(t, b, initialize(t, a, `{}`), "ping", `{}`)
}

// eavesdrop is what a local client that got in would do: read a forwarded
// request with its bearer token, and answer it before its owner.
func eavesdrop(t *testing.T, nc *nats.Conn, a, b *node) string {
	t.Helper()
	got := make(chan *nats.Msg, 16)
	_, err := nc.ChanSubscribe("mcpedge.http.>", got)
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	time.Sleep(100 * time.Millisecond) // the interest reaches the routes
	sid := initialize(t, a, `{}`)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", v)
		req.Header.Set("Authorization", "Bearer stolen-token")
		if resp, err := httpc.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case m := <-got:
		forged := nc.Publish(m.Reply, forgedAnswer(`{"jsonrpc":"2.0","id":1,"result":{"forged":true}}`))
		return fmt.Sprintf("it read a forwarded request (bearer token seen: %v) and answered it (%v)", bytes.Contains(m.Data, []byte("stolen-token")), forged)
	case <-time.After(5 * time.Second):
		return "it read nothing in 5 s"
	}
}

// forgedAnswer is a whole-answer reply frame ('R', sequence 0, status 200,
// a JSON body), as a publisher that knows the wire format forges it.
func forgedAnswer(body string) []byte {
	b := []byte{'R', 0}
	b = binary.AppendUvarint(b, 200)
	for _, s := range []string{"Content-Type", "application/json"} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = append(b, 0)
	return append(b, body...)
}

// TestForgedAnswersMissed: a publisher on the cluster's subjects that
// cannot read the forwarded requests (a client of a shared NATS
// deployment allowed to publish there) guesses reply subjects while a
// call is forwarded: it hits none, and the client gets its owner's answer.
func TestForgedAnswersMissed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	a := startNode(t, "a", nil)
	defer a.kill(t)
	b := startNode(t, "b", []string{routeOf(a)})
	defer b.kill(t)
	waitMesh(t, a, b)
	rogue, err := nats.Connect("", nats.InProcessServer(b.n))
	require.NoError(t, err)
	defer rogue.Close()
	sid := initialize(t, a, `{}`)
	forged := forgedAnswer(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"forged"}]}}`)
	for round := range 3 {
		stop := make(chan struct{})
		var flood sync.WaitGroup
		flood.Add(1)
		go func() {
			defer flood.Done()
			for {
				for tok := uint64(0); tok < 4096; tok++ {
					select {
					case <-stop:
						return
					default:
					}
					_ = rogue.Publish("mcpedge.reply.b."+strconv.FormatUint(tok, 36), forged)
				}
			}
		}()
		// bake answers after 100 ms: the flood runs while it is in flight.
		res := call(t, b, sid, "tools/call", `{"name":"bake","arguments":{}}`)
		close(stop)
		flood.Wait()
		require.Contains(t, fmt.Sprint(res["content"]), "baked by a", "round %d: %v", round, res)
	}
}

// TestBusInjection: a publisher on the bus subject cannot make a node send
// its clients anything but the notifications its topics carry: a payload
// that is not JSON, is JSON of the wrong shape, or would splice a request
// (sampling/createMessage) after a resource update is dropped and
// counted; the genuine update that follows arrives, once.
func TestBusInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	a := startNode(t, "a", nil)
	defer a.kill(t)
	rogue, err := nats.Connect("", nats.InProcessServer(a.n))
	require.NoError(t, err)
	defer rogue.Close()

	const uri = "mem://board/injected"
	sid := initialize(t, a, `{}`)
	call(t, a, sid, "resources/subscribe", `{"uri":"`+uri+`"}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", v)
	resp, err := (&http.Client{}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	time.Sleep(50 * time.Millisecond) // the GET reaches the session

	topic := "resources/updated/" + uri
	request := `{"jsonrpc":"2.0","id":99,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1,"x":{"y":"z"`
	bad := []struct{ topic, payload string }{
		{topic, `"` + uri + `"}}` + "\n" + request},
		{topic, `"` + uri + `"}},` + request},
		{topic, `"` + uri + `"}}` + "\r\n\r\ndata: " + request},
		{topic, `{"jsonrpc":"2.0","id":99,"method":"sampling/createMessage"}`},
		{topic, `"mem://board/other"`},
		{topic, `not json`},
		{topic, ""},
		{"list_changed/tools", `{"jsonrpc":"2.0","id":99,"method":"sampling/createMessage"}`},
	}
	before := a.n.Stats().BadMessages
	for _, m := range bad {
		require.NoError(t, rogue.Publish("mcpedge.bus", busMessage(m.topic, m.payload)))
	}
	require.NoError(t, rogue.Publish("mcpedge.bus", busMessage(topic, `"`+uri+`"`)))
	require.NoError(t, rogue.Flush())

	// The messages of one publisher arrive in order: once the genuine
	// update is on the stream, everything before it was delivered or
	// dropped.
	updates := 0
	timeout := time.After(5 * time.Second)
	for updates == 0 || len(lines) > 0 {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the stream ended")
			require.NotContains(t, l, "sampling/createMessage", "a request was injected into the session's stream")
			if strings.HasPrefix(l, "data: ") && strings.Contains(l, "notifications/resources/updated") {
				require.Equal(t, `data: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"`+uri+`"}}`, l)
				updates++
			}
		case <-timeout:
			t.Fatalf("%d updates", updates)
		}
	}
	require.Equal(t, 1, updates)
	require.Equal(t, before+uint64(len(bad)), a.n.Stats().BadMessages)
}

// busMessage is the wire form of a bus message: the topic's length, the
// topic, the payload.
func busMessage(topic, payload string) []byte {
	b := binary.AppendUvarint(nil, uint64(len(topic)))
	return append(append(b, topic...), payload...)
}

// countingWriter counts the lines and bytes written to it.
type countingWriter struct {
	mu           sync.Mutex
	lines, bytes int
	cluster      int // lines about dropped messages
	natsLines    int // lines of the embedded server
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines += bytes.Count(p, []byte("\n"))
	w.bytes += len(p)
	if bytes.Contains(p, []byte("does not parse")) {
		w.cluster++
	}
	if bytes.Contains(p, []byte(`msg="nats: `)) {
		w.natsLines++
	}
	return len(p), nil
}

func (w *countingWriter) counts() (lines, bytes, cluster, natsLines int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines, w.bytes, w.cluster, w.natsLines
}

// TestGarbageLogBounded: garbage on every subject of a node, and local
// clients knocking at its client port, cost counters and a bounded log:
// a few lines at once, then about one a second, whatever the flood.
func TestGarbageLogBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	w := new(countingWriter)
	logger := slog.New(slog.NewTextHandler(w, nil))
	a := startNode(t, "a", nil, func(o *cluster.Options) { o.Logger = logger })
	defer a.kill(t)
	rogue, err := nats.Connect("", nats.InProcessServer(a.n))
	require.NoError(t, err)
	defer rogue.Close()

	_, bytes0, _, nats0 := w.counts()
	start := time.Now()
	const rounds = 500
	var refused atomic.Int64
	knock := make(chan struct{})
	go func() {
		defer close(knock)
		for range 50 {
			if nc, err := nats.Connect(a.n.ClientURL(), nats.NoReconnect()); err == nil {
				nc.Close()
			} else {
				refused.Add(1)
			}
		}
	}()
	before := a.n.Stats().BadMessages
	sent := 0
	for i := range rounds {
		for _, m := range []struct {
			subj  string
			reply string
			data  []byte
		}{
			{"mcpedge.bus", "", []byte{0xff, 0xff, 0xff}},
			{"mcpedge.bus", "", busMessage("resources/updated/x", "garbage "+strconv.Itoa(i))},
			{"mcpedge.bus", "", busMessage("list_changed/tools", `{"x":1}`)},
			{"mcpedge.reply.a.!!" + strconv.Itoa(i), "", []byte("x")},
			{"mcpedge.http.a", "_INBOX.rogue", []byte("nonsense " + strconv.Itoa(i))},
			{"mcpedge.http.a", "", []byte("no reply subject")},
		} {
			if m.reply != "" {
				require.NoError(t, rogue.PublishRequest(m.subj, m.reply, m.data))
			} else {
				require.NoError(t, rogue.Publish(m.subj, m.data))
			}
			sent++
		}
		// Unknown reply tokens are late answers: dropped, not logged.
		require.NoError(t, rogue.Publish("mcpedge.reply.a."+strconv.Itoa(i), []byte{'R', 0}))
		// Cancels of unknown requests: ignored.
		require.NoError(t, rogue.Publish("mcpedge.cancel.a", []byte("mcpedge.reply.b."+strconv.Itoa(i))))
	}
	require.NoError(t, rogue.Flush())
	// Wait until every message is counted (or 10 s, for code that does not
	// count them all: then the log's bound is what the test reports).
	for i := 0; i < 1000 && a.n.Stats().BadMessages < before+uint64(sent); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	<-knock
	elapsed := time.Since(start)
	lines, bytesN, cluster, natsN := w.counts()
	perSecond := int(elapsed/time.Second) + 2
	t.Logf("%d bad messages and 50 refused clients in %v: %d log lines (%d about dropped messages, %d of the embedded server), %d bytes",
		sent, elapsed, lines, cluster, natsN-nats0, bytesN-bytes0)
	require.LessOrEqual(t, cluster, 5+perSecond, "lines about dropped messages")
	require.LessOrEqual(t, natsN-nats0, 32+perSecond, "lines of the embedded server")
	require.Less(t, bytesN-bytes0, 500*(5+32+2*perSecond), "log bytes")
	require.Equal(t, before+uint64(sent), a.n.Stats().BadMessages, "every bad message is counted")
	require.Equal(t, int64(50), refused.Load(), "a local client connected")
}

// TestRelayedStreamsChecked: the checks pass everything an owner sends.
// Relayed streams that are not compressed are checked event by event (a
// client that admits gzip gets them compressed, and unchecked: see
// bodyType), so this client asks for none: an elicitation on a call's
// stream, the standalone stream's notifications, and their resumption.
func TestRelayedStreamsChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	a := startNode(t, "a", nil)
	defer a.kill(t)
	b := startNode(t, "b", []string{routeOf(a)})
	defer b.kill(t)
	waitMesh(t, a, b)
	sid := initialize(t, a, `{"elicitation":{}}`)
	identity := func(req *http.Request) *http.Response {
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Accept-Encoding", "identity")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", v)
		resp, err := (&http.Client{}).Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Empty(t, resp.Header.Get("Content-Encoding"))
		return resp
	}
	before := b.n.Stats()

	req, _ := http.NewRequest(http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ask","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	resp := identity(req)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	msgs := sse(resp.Body)
	first := <-msgs
	require.Equal(t, "elicitation/create", first["method"], first)
	id, _ := json.Marshal(first["id"])
	st, _, _ := post(t, b.url, v, sid, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"action":"accept","content":{"name":"ada"}}}`)
	require.Equal(t, http.StatusAccepted, st)
	require.Contains(t, fmt.Sprint((<-msgs)["result"]), "ada")

	const uri = "mem://board/checked"
	call(t, b, sid, "resources/subscribe", `{"uri":"`+uri+`"}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, b.url, nil)
	resp = identity(req)
	defer resp.Body.Close()
	stream := sse(resp.Body)
	time.Sleep(50 * time.Millisecond) // the GET reaches the session
	for range 3 {
		a.srv.ResourceUpdated(uri)
		select {
		case m := <-stream:
			require.Equal(t, "notifications/resources/updated", m["method"], m)
		case <-time.After(5 * time.Second):
			t.Fatal("no update on the relayed stream")
		}
	}
	after := b.n.Stats()
	require.Equal(t, before.BadMessages, after.BadMessages)
	require.Equal(t, before.StreamsCut, after.StreamsCut)
}
