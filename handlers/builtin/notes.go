package builtin

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// The demo set's two stores and their limits.
//
// Notes (note_write, mem://notes/{name}) belong to the session that wrote
// them: another session neither reads, lists nor overwrites them, and they
// are freed when the session closes. A note's update notice goes to its own
// session only. Every session starts out seeing the note "todo", which it
// may overwrite with its own.
//
// The board (board_write, mem://board/{name}) is shared by every session:
// each write tells every session subscribed to the entry's URI.
//
// Over a limit, the write is refused with a tool error (a result with
// isError, naming the limit); nothing already stored changes. Bytes are
// counted as the lengths of names plus texts; overwriting an entry counts
// the difference.
const (
	MaxNotesPerSession     = 64       // notes one session keeps
	MaxNoteBytesPerSession = 1 << 20  // bytes of one session's notes
	MaxBoardEntries        = 1024     // entries on the board
	MaxBoardBytes          = 16 << 20 // bytes on the board
)

// defaultNotes are seen by every session until it writes its own under
// the same name. They count against no limit.
var defaultNotes = map[string]string{"todo": "- try mcpedge\n"}

type nameIn struct {
	Name string `json:"name" jsonschema:"the entry's name"`
	Text string `json:"text" jsonschema:"the entry's text"`
}

func checkName(name string) *mcp.CallToolResult {
	if name == "" || strings.ContainsAny(name, "/?#") {
		return mcp.ErrorResult("a name is non-empty and holds no '/', '?' or '#'")
	}
	return nil
}

// capped is a map of texts bounded in entries and bytes. Its caller locks.
type capped struct {
	m     map[string]string
	bytes int
}

// fits explains why storing text under name would take the map over
// maxCount entries or maxBytes bytes, or returns "".
func (c *capped) fits(name, text string, maxCount, maxBytes int) string {
	old, had := c.m[name]
	grow := len(text) - len(old)
	if !had {
		grow += len(name)
		if len(c.m) >= maxCount {
			return fmt.Sprintf("holds %d entries already, the most it keeps", len(c.m))
		}
	}
	if c.bytes+grow > maxBytes {
		return fmt.Sprintf("would hold %d bytes, over its limit of %d", c.bytes+grow, maxBytes)
	}
	return ""
}

// put stores text under name unless that takes the map over maxCount
// entries or maxBytes bytes; it returns an explanation when it refuses.
func (c *capped) put(name, text string, maxCount, maxBytes int) string {
	if why := c.fits(name, text, maxCount, maxBytes); why != "" {
		return why
	}
	old, had := c.m[name]
	grow := len(text) - len(old)
	if !had {
		grow += len(name)
	}
	if c.m == nil {
		c.m = map[string]string{}
	}
	// Copies: a tool's arguments alias the request's buffer, which the
	// engine reuses once the handler returns. The name is copied even when
	// the entry exists: assigning to an existing string key of a map
	// stores the new key too.
	c.m[strings.Clone(name)] = strings.Clone(text)
	c.bytes += grow
	return ""
}

func (c *capped) names(prefix string, into map[string]bool) {
	for k := range c.m {
		if strings.HasPrefix(k, prefix) {
			into[k] = true
		}
	}
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// noteStore holds each session's notes, by session id.
type noteStore struct {
	mu sync.Mutex
	m  map[string]*capped
}

// sessionNotes returns the notes of p's session, creating them (and the
// hook that frees them) on first use when create is set.
func (n *noteStore) sessionNotes(p handlers.Peer, create bool) *capped {
	id := p.SessionID()
	n.mu.Lock()
	c := n.m[id]
	fresh := false
	if c == nil && create {
		c = &capped{}
		n.m[id] = c
		fresh = true
		noteSessions.Add(1)
	}
	n.mu.Unlock()
	if fresh {
		if sc, ok := p.(handlers.SessionScope); ok {
			// Outside the lock: on a session already closed the hook
			// runs at once.
			sc.OnSessionClose(func() { n.drop(id, c) })
		}
	}
	return c
}

func (n *noteStore) drop(id string, c *capped) {
	n.mu.Lock()
	if n.m[id] == c {
		delete(n.m, id)
		noteSessions.Add(-1)
	}
	n.mu.Unlock()
}

// noteSessions counts the sessions holding notes, in every store (for
// tests).
var noteSessions atomic.Int64

func addNotes(r *handlers.Registry) error {
	notes := &noteStore{m: map[string]*capped{}}

	if err := handlers.AddTool(r, &mcp.Tool{
		Name: "note_write",
		Description: fmt.Sprintf("Stores a note of this session under a name; read it back as the resource mem://notes/{name}. "+
			"Notes are private to the session and end with it; a session keeps at most %d notes and %d bytes of them.",
			MaxNotesPerSession, MaxNoteBytesPerSession),
	}, func(_ context.Context, req *handlers.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
		if bad := checkName(in.Name); bad != nil {
			return bad, nil, nil
		}
		if req.Peer == nil || req.Peer.SessionID() == "" {
			return mcp.ErrorResult("notes need a session"), nil, nil
		}
		c := notes.sessionNotes(req.Peer, true)
		notes.mu.Lock()
		why := c.put(in.Name, in.Text, MaxNotesPerSession, MaxNoteBytesPerSession)
		notes.mu.Unlock()
		if why != "" {
			return mcp.ErrorResult("note limit reached: this session's notes " + why), nil, nil
		}
		uri := "mem://notes/" + in.Name
		if sc, ok := req.Peer.(handlers.SessionScope); ok {
			_ = sc.NotifyResourceUpdated(uri)
		}
		return mcp.TextResult("stored " + uri), nil, nil
	}); err != nil {
		return err
	}

	if err := r.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: "mem://notes/{name}",
		Name:        "notes",
		Description: "This session's notes, stored with the note_write tool.",
		MimeType:    "text/markdown",
	}, func(_ context.Context, req *handlers.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		name := req.Vars["name"]
		var text string
		ok := false
		if req.Peer != nil {
			if c := notes.sessionNotes(req.Peer, false); c != nil {
				notes.mu.Lock()
				text, ok = c.m[name]
				notes.mu.Unlock()
			}
		}
		if !ok {
			text, ok = defaultNotes[name]
		}
		if !ok {
			return nil, &codec.Error{Code: codec.CodeResourceNotFound, Message: "resource not found: " + req.Params.URI}
		}
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.Params.URI, MimeType: "text/markdown", Text: text}}}, nil
	}); err != nil {
		return err
	}
	if err := r.AddTemplateCompletion("mem://notes/{name}", "name", func(_ context.Context, req *handlers.CompleteRequest) (*mcp.CompleteResult, error) {
		prefix := req.Params.Argument.Value
		set := map[string]bool{}
		for k := range defaultNotes {
			if strings.HasPrefix(k, prefix) {
				set[k] = true
			}
		}
		if req.Peer != nil {
			if c := notes.sessionNotes(req.Peer, false); c != nil {
				notes.mu.Lock()
				c.names(prefix, set)
				notes.mu.Unlock()
			}
		}
		return &mcp.CompleteResult{Completion: mcp.Completion{Values: sorted(set)}}, nil
	}); err != nil {
		return err
	}
	return nil
}

// TopicBoard is the bus topic of board writes: with a bus (Env.Publish),
// a write is applied by every node's subscriber, its own included, so
// that the board reads the same on every node of a cluster. The payload
// is {"name":…,"text":…}.
const TopicBoard = "builtin/board"

type boardWrite struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

func addBoard(r *handlers.Registry, env Env) error {
	var (
		mu    sync.Mutex
		board capped
	)
	shared := env.Publish != nil && env.Subscribe != nil
	if shared {
		// Writes of every node, this one's among them, in bus order. A
		// write another node accepted is applied here too; it is refused
		// only if this node's copy is over a limit the writer's was not,
		// which the writer's check makes rare, and logged nowhere: the
		// entry stays as it was here.
		env.Subscribe(TopicBoard, func(_ string, payload []byte) {
			var w boardWrite
			if codec.Unmarshal(payload, &w) != nil || checkName(w.Name) != nil {
				return
			}
			mu.Lock()
			board.put(w.Name, w.Text, MaxBoardEntries, MaxBoardBytes)
			mu.Unlock()
		})
	}
	if err := handlers.AddTool(r, &mcp.Tool{
		Name: "board_write",
		Description: fmt.Sprintf("Pins a text under a name on the board that every session shares; read it as mem://board/{name}, "+
			"subscribe to it to hear of changes. The board keeps at most %d entries and %d bytes.", MaxBoardEntries, MaxBoardBytes),
	}, func(_ context.Context, _ *handlers.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
		if bad := checkName(in.Name); bad != nil {
			return bad, nil, nil
		}
		mu.Lock()
		var why string
		if shared {
			why = board.fits(in.Name, in.Text, MaxBoardEntries, MaxBoardBytes)
		} else {
			why = board.put(in.Name, in.Text, MaxBoardEntries, MaxBoardBytes)
		}
		mu.Unlock()
		if why != "" {
			return mcp.ErrorResult("board limit reached: the board " + why), nil, nil
		}
		if shared {
			payload, err := codec.Marshal(boardWrite(in))
			if err != nil {
				return nil, nil, err
			}
			env.Publish(TopicBoard, payload) // applied here by the subscriber, before Publish returns
		}
		uri := "mem://board/" + in.Name
		env.updated(uri)
		return mcp.TextResult("stored " + uri), nil, nil
	}); err != nil {
		return err
	}
	if err := r.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: "mem://board/{name}",
		Name:        "board",
		Description: "The board every session shares, written with the board_write tool.",
		MimeType:    "text/markdown",
	}, func(_ context.Context, req *handlers.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		mu.Lock()
		text, ok := board.m[req.Vars["name"]]
		mu.Unlock()
		if !ok {
			return nil, &codec.Error{Code: codec.CodeResourceNotFound, Message: "resource not found: " + req.Params.URI}
		}
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.Params.URI, MimeType: "text/markdown", Text: text}}}, nil
	}); err != nil {
		return err
	}
	if err := r.AddTemplateCompletion("mem://board/{name}", "name", func(_ context.Context, req *handlers.CompleteRequest) (*mcp.CompleteResult, error) {
		set := map[string]bool{}
		mu.Lock()
		board.names(req.Params.Argument.Value, set)
		mu.Unlock()
		return &mcp.CompleteResult{Completion: mcp.Completion{Values: sorted(set)}}, nil
	}); err != nil {
		return err
	}
	return nil
}
