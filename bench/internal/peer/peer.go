// Package peer holds what the benchmark's peer servers share: the bench
// workload's schemas and a net/http serving loop that stops on a context.
package peer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/mcpedge/mcpedge/handlers/builtin"
)

// The bench workload's input schemas, the very ones mcpedge serves.
const (
	EchoSchema = builtin.EchoSchema
	AddSchema  = builtin.AddSchema
)

// Schema returns s as a raw JSON value for an SDK's schema field.
func Schema(s string) json.RawMessage { return json.RawMessage(s) }

// ServeHTTP serves hs until ctx ends, then shuts it down within 5 s.
func ServeHTTP(ctx context.Context, hs *http.Server) error {
	errc := make(chan error, 1)
	go func() { errc <- hs.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
