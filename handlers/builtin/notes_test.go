package builtin_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/client"
	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/internal/testserver"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readText(r *handlers.Registry, p handlers.Peer, uri string) (string, error) {
	rr, err := r.ReadResource(context.Background(), &handlers.ReadResourceRequest{Peer: p, Params: &mcp.ReadResourceParams{URI: uri}})
	if err != nil {
		return "", err
	}
	return rr.Contents[0].Text, nil
}

func notFound(t *testing.T, err error) {
	t.Helper()
	var ce *codec.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codec.CodeResourceNotFound, ce.Code)
}

func TestNotesArePerSession(t *testing.T) {
	r := install(t, "demo", builtin.Env{})
	a, b := newSessPeer("A"), newSessPeer("B")
	require.False(t, callTool(t, r, a, "note_write", `{"name":"secret","text":"a's"}`).IsError)

	_, err := readText(r, b, "mem://notes/secret")
	notFound(t, err)
	assert.Empty(t, complete(t, r, b, "mem://notes/{name}", "s"), "b lists none of a's notes")

	// b's own note of the same name does not overwrite a's.
	require.False(t, callTool(t, r, b, "note_write", `{"name":"secret","text":"b's"}`).IsError)
	got, err := readText(r, a, "mem://notes/secret")
	require.NoError(t, err)
	assert.Equal(t, "a's", got)
	got, err = readText(r, b, "mem://notes/secret")
	require.NoError(t, err)
	assert.Equal(t, "b's", got)

	// Overwriting the default note is one session's business too.
	require.False(t, callTool(t, r, a, "note_write", `{"name":"todo","text":"mine"}`).IsError)
	got, err = readText(r, b, "mem://notes/todo")
	require.NoError(t, err)
	assert.Contains(t, got, "mcpedge")

	// A peer without a session cannot keep notes.
	assert.True(t, callTool(t, r, newSessPeer(""), "note_write", `{"name":"x","text":"y"}`).IsError)
}

func TestNoteLimits(t *testing.T) {
	r := install(t, "demo", builtin.Env{})
	p := newSessPeer("limits")
	for i := range builtin.MaxNotesPerSession {
		res := callTool(t, r, p, "note_write", fmt.Sprintf(`{"name":"n%d","text":"x"}`, i))
		require.False(t, res.IsError, text(t, res))
	}
	res := callTool(t, r, p, "note_write", `{"name":"one-more","text":"x"}`)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "note limit reached")
	// Overwriting an existing note is still allowed at the count limit.
	assert.False(t, callTool(t, r, p, "note_write", `{"name":"n0","text":"y"}`).IsError)
	// Another session has a budget of its own.
	assert.False(t, callTool(t, r, newSessPeer("other"), "note_write", `{"name":"one-more","text":"x"}`).IsError)

	// Bytes: one session's notes hold at most MaxNoteBytesPerSession.
	q := newSessPeer("bytes")
	big := strings.Repeat("b", builtin.MaxNoteBytesPerSession/2)
	require.False(t, callTool(t, r, q, "note_write", `{"name":"a","text":"`+big+`"}`).IsError)
	res = callTool(t, r, q, "note_write", `{"name":"b","text":"`+big+`"}`)
	require.True(t, res.IsError, "over the byte limit")
	assert.Contains(t, text(t, res), "note limit reached")
	_, err := readText(r, q, "mem://notes/b")
	notFound(t, err)
	// Shrinking a note makes room.
	require.False(t, callTool(t, r, q, "note_write", `{"name":"a","text":"small"}`).IsError)
	assert.False(t, callTool(t, r, q, "note_write", `{"name":"b","text":"`+big+`"}`).IsError)
}

func TestNotesFreedOnClose(t *testing.T) {
	r := install(t, "demo", builtin.Env{})
	before := builtin.NoteSessions()
	peers := make([]*sessPeer, 10)
	for i := range peers {
		peers[i] = newSessPeer(fmt.Sprint("close-", i))
		require.False(t, callTool(t, r, peers[i], "note_write", `{"name":"n","text":"x"}`).IsError)
	}
	assert.Equal(t, before+10, builtin.NoteSessions())
	for _, p := range peers {
		p.close()
	}
	assert.Equal(t, before, builtin.NoteSessions())
	_, err := readText(r, peers[0], "mem://notes/n")
	notFound(t, err)

	// A write from a session that closed meanwhile frees at once.
	p := newSessPeer("late")
	p.close()
	require.False(t, callTool(t, r, p, "note_write", `{"name":"n","text":"x"}`).IsError)
	assert.Equal(t, before, builtin.NoteSessions())
}

func TestBoard(t *testing.T) {
	var mu sync.Mutex
	var updated []string
	r := install(t, "demo", builtin.Env{ResourceUpdated: func(uri string) {
		mu.Lock()
		updated = append(updated, uri)
		mu.Unlock()
	}})
	a, b := newSessPeer("A"), newSessPeer("B")
	require.False(t, callTool(t, r, a, "board_write", `{"name":"news","text":"hello"}`).IsError)
	got, err := readText(r, b, "mem://board/news")
	require.NoError(t, err, "the board is shared")
	assert.Equal(t, "hello", got)
	require.False(t, callTool(t, r, b, "board_write", `{"name":"news","text":"bye"}`).IsError)
	got, err = readText(r, a, "mem://board/news")
	require.NoError(t, err)
	assert.Equal(t, "bye", got)
	mu.Lock()
	assert.Equal(t, []string{"mem://board/news", "mem://board/news"}, updated, "every write is announced to all")
	mu.Unlock()
	assert.Equal(t, []string{"news"}, complete(t, r, b, "mem://board/{name}", "n"))
	_, err = readText(r, a, "mem://board/absent")
	notFound(t, err)
	assert.True(t, callTool(t, r, a, "board_write", `{"name":"a/b","text":"x"}`).IsError)

	// Entries: at most MaxBoardEntries.
	for i := 1; i < builtin.MaxBoardEntries; i++ {
		res := callTool(t, r, a, "board_write", fmt.Sprintf(`{"name":"e%d","text":""}`, i))
		require.False(t, res.IsError, text(t, res))
	}
	res := callTool(t, r, b, "board_write", `{"name":"one-more","text":""}`)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "board limit reached")

	// Bytes: at most MaxBoardBytes, on a fresh board.
	r = install(t, "demo", builtin.Env{})
	chunk := strings.Repeat("c", 1<<20)
	for i := range builtin.MaxBoardBytes>>20 - 1 {
		require.False(t, callTool(t, r, a, "board_write", fmt.Sprintf(`{"name":"big%d","text":"%s"}`, i, chunk)).IsError)
	}
	res = callTool(t, r, a, "board_write", `{"name":"last","text":"`+chunk+`"}`)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "board limit reached")
}

// TestNotesOverTCP checks the same through the engine: two connections are
// two sessions, and closing one frees its notes.
func TestNotesOverTCP(t *testing.T) {
	srv := testserver.Engine(t, "demo", engine.Options{})
	addr, _ := testserver.TCP(t, srv, tcp.Options{Loops: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := func() *client.Client {
		c, err := client.Dial(ctx, &client.TCPTransport{Addr: addr}, client.Options{Era: client.EraLegacy}) // notes belong to a session
		require.NoError(t, err)
		return c
	}
	before := builtin.NoteSessions()
	a, b := dial(), dial()
	defer b.Close()

	updates := make(chan string, 4)
	require.NoError(t, a.Subscribe(ctx, "mem://notes/secret", func(u string) { updates <- u }))
	require.NoError(t, b.Subscribe(ctx, "mem://notes/secret", func(u string) { updates <- "b:" + u }))
	_, err := a.CallTool(ctx, "note_write", map[string]any{"name": "secret", "text": "a's"})
	require.NoError(t, err)
	select {
	case u := <-updates:
		assert.Equal(t, "mem://notes/secret", u, "only the writer hears of its note")
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/resources/updated for the writer")
	}
	rr, err := a.ReadResource(ctx, "mem://notes/secret")
	require.NoError(t, err)
	assert.Equal(t, "a's", rr.Contents[0].Text)
	_, err = b.ReadResource(ctx, "mem://notes/secret")
	notFound(t, err)
	assert.Equal(t, before+1, builtin.NoteSessions())

	require.NoError(t, a.Close())
	// The server notices the close on its own side of a real socket.
	assert.Eventually(t, func() bool { return builtin.NoteSessions() == before }, 5*time.Second, time.Millisecond,
		"a's notes are freed when its connection closes")
	select {
	case u := <-updates:
		t.Fatalf("unexpected notice %s", u)
	default:
	}
}

// TestOverwriteKeepsItsName: overwriting an entry must not leave the map
// keyed by the request's bytes, which the engine reuses (assigning to an
// existing string key of a Go map replaces the key too). Found by the Go
// client interop tests over stdio.
func TestOverwriteKeepsItsName(t *testing.T) {
	r := install(t, "demo", builtin.Env{})
	a := newSessPeer("A")
	for _, tc := range []struct{ tool, uri string }{
		{"board_write", "mem://board/reused"},
		{"note_write", "mem://notes/reused"},
	} {
		for _, text := range []string{"first", "second"} {
			args := []byte(`{"name":"reused","text":"` + text + `"}`)
			res, err := r.CallTool(context.Background(), &handlers.CallToolRequest{Peer: a, Params: &mcp.CallToolParams{Name: tc.tool, Arguments: codec.RawJSON(args)}})
			require.NoError(t, err)
			require.False(t, res.IsError, tc.tool)
			for i := range args { // the engine reuses the request's buffer
				args[i] = 'x'
			}
		}
		got, err := readText(r, a, tc.uri)
		require.NoError(t, err, tc.tool)
		assert.Equal(t, "second", got, tc.tool)
	}
}
