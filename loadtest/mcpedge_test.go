package loadtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/mcpedge/mcpedge/internal/testserver"

	"github.com/mcpedge/mcpedge/engine"
	mcphttp "github.com/mcpedge/mcpedge/transport/http"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveMcpedge serves the demo set in process over TCP and Streamable HTTP
// on loopback ports and returns the two target specs.
func serveMcpedge(t *testing.T) (tcpSpec, httpSpec string) {
	t.Helper()
	srv := testserver.Engine(t, "demo", engine.Options{})
	tcpAddr, _ := testserver.TCP(t, srv, tcp.Options{Loops: 2})
	base, _ := testserver.HTTP(t, srv, mcphttp.Options{})
	return "tcp://" + tcpAddr, base + "/mcp"
}

func TestAgainstMcpedge(t *testing.T) {
	tcpSpec, httpSpec := serveMcpedge(t)
	steps, err := ParseMix("echo=4,add=2,read=1,greet=1,tools/list=1,resources/list=1,prompts/list=1,ping=1")
	require.NoError(t, err)
	for _, tc := range []struct {
		spec   string
		client bool
	}{{tcpSpec, false}, {httpSpec, false}, {tcpSpec, true}, {httpSpec, true}} {
		name := tc.spec
		if tc.client {
			name += " via client pool"
		}
		t.Run(name, func(t *testing.T) {
			target, err := ParseTarget(tc.spec)
			require.NoError(t, err)
			res := runBounded(t, Config{
				Target: target, Connections: 4, InFlight: 2, Requests: 2000, Steps: steps,
				Timeout: 5 * time.Second, PID: os.Getpid(), Client: tc.client,
			}, 30*time.Second)
			assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
			assert.Equal(t, int64(2000), res.OK)
			assert.Equal(t, 4, res.Connections)
			assert.Equal(t, 2, res.InFlight)
			require.NotNil(t, res.Server)
			assert.Positive(t, res.Server.RSSBytes)
			for _, s := range res.Steps {
				assert.Positive(t, s.Requests, s.Name)
			}
		})
	}
}

func TestSessionsMode(t *testing.T) {
	tcpSpec, httpSpec := serveMcpedge(t)
	for _, spec := range []string{tcpSpec, httpSpec} {
		t.Run(spec, func(t *testing.T) {
			target, err := ParseTarget(spec)
			require.NoError(t, err)
			res, err := RunSessions(context.Background(), SessionsConfig{
				Target: target, Sessions: 200, PID: os.Getpid(), Settle: 50 * time.Millisecond,
			})
			require.NoError(t, err)
			s := res.Sessions
			assert.Equal(t, 200, s.Opened)
			assert.Zero(t, s.Failed)
			assert.Positive(t, s.RSSBefore)
			assert.Positive(t, s.RSSAfter)
		})
	}
	_, err := RunSessions(context.Background(), SessionsConfig{Target: Target{Transport: "stdio", Command: []string{"x"}}})
	assert.ErrorIs(t, err, ErrConfig)
}

func TestFanoutMode(t *testing.T) {
	tcpSpec, httpSpec := serveMcpedge(t)
	for _, spec := range []string{tcpSpec, httpSpec} {
		t.Run(spec, func(t *testing.T) {
			target, err := ParseTarget(spec)
			require.NoError(t, err)
			res, err := RunFanout(context.Background(), FanoutConfig{
				Target: target, Subscribers: 20, Updates: 10, Interval: 5 * time.Millisecond,
				Drain: 500 * time.Millisecond,
			})
			require.NoError(t, err)
			f := res.Fanout
			assert.Equal(t, 20, f.Subscribed, f.FirstError)
			assert.Zero(t, f.UpdateErrors, f.FirstError)
			assert.Equal(t, int64(200), f.Expected)
			assert.Equal(t, int64(200), f.Delivered)
			assert.Zero(t, f.Lost)
			require.NotNil(t, f.Delay)
			assert.Equal(t, int64(200), f.Delay.Count)
			assert.Positive(t, f.PerSecond)
		})
	}
	target, err := ParseTarget(tcpSpec)
	require.NoError(t, err)
	_, err = RunFanout(context.Background(), FanoutConfig{Target: target, URI: "mem://notes/x"})
	assert.ErrorIs(t, err, ErrConfig, "notes are per session: no default tool fans them out")
}

func TestStdioTarget(t *testing.T) {
	// The test binary itself is the stdio server: see TestMain.
	exe, err := os.Executable()
	require.NoError(t, err)
	target := Target{Transport: "stdio", Command: []string{exe}}
	t.Setenv(stdioServerEnv, "1")
	res := runBounded(t, Config{Target: target, Connections: 4, Requests: 500, Steps: echoStep(), Timeout: 5 * time.Second}, 30*time.Second)
	assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
	assert.Equal(t, int64(500), res.OK)
	assert.Equal(t, 1, res.Connections)
	assert.Equal(t, 4, res.InFlight)
	require.NotNil(t, res.Server, "the stdio child is measured")
	assert.Positive(t, res.Server.PID)
	assert.Positive(t, res.Server.RSSBytes, "the child is read before it is stopped")
}
