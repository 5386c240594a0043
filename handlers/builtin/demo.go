package builtin

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
	"time"

	"github.com/mcpedge/mcpedge/handlers"
	"github.com/mcpedge/mcpedge/mcp"
)

// Demo installs the demo set: the bench workload plus tools time, hash,
// count (with progress), note_write and board_write; the templates
// mem://notes/{name}, each session's own notes, and mem://board/{name}, a
// board that every session shares, with completion of names; and the
// prompt summarize. See notes.go for their limits.
func Demo(r *handlers.Registry, env Env) error {
	if err := Bench(r, env); err != nil {
		return err
	}
	if err := handlers.AddTool(r, &mcp.Tool{
		Name:        "time",
		Title:       "Current time",
		Description: "Returns the current time in an IANA time zone (default UTC), RFC 3339.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ptr(true)},
	}, func(_ context.Context, _ *handlers.CallToolRequest, in timeIn) (*mcp.CallToolResult, timeOut, error) {
		zone := in.Zone
		if zone == "" {
			zone = "UTC"
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return mcp.ErrorResult("unknown time zone: " + zone), timeOut{}, nil
		}
		now := time.Now().In(loc)
		out := timeOut{Time: now.Format(time.RFC3339), Zone: zone, Unix: now.Unix()}
		return nil, out, nil
	}); err != nil {
		return err
	}

	if err := handlers.AddTool(r, &mcp.Tool{
		Name:        "hash",
		Description: "Hashes text with md5, sha1, sha256 (default) or sha512 and returns the hex digest.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ptr(true), IdempotentHint: ptr(true)},
	}, func(_ context.Context, _ *handlers.CallToolRequest, in hashIn) (*mcp.CallToolResult, any, error) {
		var h hash.Hash
		switch strings.ToLower(in.Algorithm) {
		case "", "sha256":
			h = sha256.New()
		case "sha512":
			h = sha512.New()
		case "sha1":
			h = sha1.New()
		case "md5":
			h = md5.New()
		default:
			return mcp.ErrorResult("unknown algorithm: " + in.Algorithm + " (md5, sha1, sha256, sha512)"), nil, nil
		}
		h.Write([]byte(in.Text))
		return mcp.TextResult(hex.EncodeToString(h.Sum(nil))), nil, nil
	}); err != nil {
		return err
	}

	if err := handlers.AddTool(r, &mcp.Tool{
		Name:        "count",
		Description: "Counts from 1 to n (at most 100), one step every delayMs milliseconds (at most 1000), reporting progress at each step.",
	}, func(ctx context.Context, req *handlers.CallToolRequest, in countIn) (*mcp.CallToolResult, any, error) {
		if in.N < 1 || in.N > 100 {
			return mcp.ErrorResult("n must be between 1 and 100"), nil, nil
		}
		if in.DelayMs < 0 || in.DelayMs > 1000 {
			return mcp.ErrorResult("delayMs must be between 0 and 1000"), nil, nil
		}
		for i := 1; i <= in.N; i++ {
			select {
			case <-ctx.Done():
				return nil, nil, context.Cause(ctx)
			case <-time.After(time.Duration(in.DelayMs) * time.Millisecond):
			}
			if err := req.Peer.Progress(float64(i), float64(in.N), fmt.Sprintf("step %d of %d", i, in.N)); err != nil {
				return nil, nil, err
			}
		}
		return mcp.TextResult(fmt.Sprintf("counted to %d", in.N)), nil, nil
	}); err != nil {
		return err
	}

	if err := addNotes(r); err != nil {
		return err
	}
	if err := addBoard(r, env); err != nil {
		return err
	}

	return r.AddPrompt(&mcp.Prompt{
		Name:        "summarize",
		Description: "Asks the model to summarize a text in a given style.",
		Arguments: []mcp.PromptArgument{
			{Name: "text", Description: "The text to summarize", Required: true},
			{Name: "style", Description: "brief, detailed or bullet"},
		},
	}, func(_ context.Context, req *handlers.GetPromptRequest) (*mcp.GetPromptResult, error) {
		style := req.Params.Arguments["style"]
		if style == "" {
			style = "brief"
		}
		return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{{
			Role:    "user",
			Content: mcp.Content{Type: mcp.ContentText, Text: "Summarize the following text (" + style + "):\n\n" + req.Params.Arguments["text"]},
		}}}, nil
	})
}

type timeIn struct {
	Zone string `json:"zone,omitempty" jsonschema:"IANA time zone such as Europe/Paris; default UTC"`
}

type timeOut struct {
	Time string `json:"time"`
	Zone string `json:"zone"`
	Unix int64  `json:"unix"`
}

type hashIn struct {
	Text      string `json:"text" jsonschema:"the text to hash"`
	Algorithm string `json:"algorithm,omitempty" jsonschema:"md5, sha1, sha256 (default) or sha512"`
}

type countIn struct {
	N       int `json:"n" jsonschema:"count up to n (1..100)"`
	DelayMs int `json:"delayMs,omitempty" jsonschema:"milliseconds between steps (0..1000)"`
}

func ptr[T any](v T) *T { return &v }
