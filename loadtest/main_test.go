package loadtest

import (
	"context"
	"os"
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/handlers/builtin"
	"github.com/mcpedge/mcpedge/transport/stdio"
)

// stdioServerEnv makes the test binary serve the bench set on its stdio,
// so that stdio targets are tested without building anything.
const stdioServerEnv = "LOADTEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) == "1" {
		srv := engine.New(engine.Options{})
		if err := builtin.Install("bench", srv.Registry(), builtin.Env{}); err != nil {
			os.Exit(3)
		}
		err := stdio.Serve(context.Background(), srv, os.Stdin, os.Stdout, stdio.Options{})
		_ = srv.Shutdown(context.Background())
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
