package loadtest

import (
	"context"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSoakMode(t *testing.T) {
	tcpSpec, httpSpec := serveMcpedge(t)
	gr := httptest.NewServer(pprof.Handler("goroutine"))
	defer gr.Close()
	for _, spec := range []string{tcpSpec, httpSpec} {
		t.Run(spec, func(t *testing.T) {
			target, err := ParseTarget(spec)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			t0 := time.Now()
			res, err := RunSoak(ctx, SoakConfig{
				Target: target, Connections: 60, Duration: 2 * time.Second, Every: 250 * time.Millisecond,
				PID: os.Getpid(), SampleEvery: 500 * time.Millisecond, GoroutinesURL: gr.URL + "?debug=1",
				Settle: 100 * time.Millisecond, Timeout: 5 * time.Second,
			})
			require.NoError(t, err)
			assert.Less(t, time.Since(t0), 2*time.Second+5*time.Second+time.Second, "bounded by the duration")
			s := res.Soak
			require.NotNil(t, s)
			assert.Equal(t, "soak", res.Mode)
			assert.Equal(t, 60, s.Opened, s.FirstError)
			assert.Zero(t, s.SetupFailed)
			assert.Zero(t, res.Errors, "%v %v", res.ErrorsByKind, res.ErrorSamples)
			// Each connection calls about every 250 ms for 2 s.
			assert.Greater(t, res.Requests, int64(60*4))
			assert.Equal(t, res.Requests, s.Requests)
			require.NotNil(t, s.Start)
			require.NotNil(t, s.Middle)
			require.NotNil(t, s.End)
			require.NotNil(t, s.After)
			assert.Zero(t, s.Start.Open)
			assert.Equal(t, 60, s.End.Open)
			assert.Positive(t, s.End.RSSBytes)
			assert.Positive(t, s.End.Threads)
			assert.Positive(t, s.End.FDs)
			assert.Positive(t, s.End.Goroutines, s.End.Error)
			assert.Empty(t, s.End.Error)
			assert.GreaterOrEqual(t, len(s.Samples), 4)
			if target.Transport == "tcp" {
				// Each held connection is two descriptors in this process
				// (client and server side).
				assert.Greater(t, s.End.FDs, s.Start.FDs+60)
				assert.Less(t, s.After.FDs, s.End.FDs-60, "the descriptors are given back")
			}
			var b strings.Builder
			require.NoError(t, res.WriteText(&b))
			t.Log("\n" + b.String())
			assert.Contains(t, b.String(), "soak mode")
			assert.Contains(t, b.String(), "middle")
		})
	}
	_, err := RunSoak(context.Background(), SoakConfig{Target: Target{Transport: "stdio", Command: []string{"x"}}})
	assert.ErrorIs(t, err, ErrConfig)
}

func TestParseGoroutines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"goroutine profile: total 42\n5 @ 0x1 0x2\n", 42, true},
		{"17\n", 17, true},
		{`{"goroutines": 9, "other": 1}`, 9, true},
		{"goroutine 1 [running]:\nmain.main()\n\ngoroutine 7 [select]:\nx()\n", 2, true},
		{"<html>", 0, false},
		{`{"x":1}`, 0, false},
	} {
		n, ok := parseGoroutines([]byte(tc.in))
		assert.Equal(t, tc.ok, ok, tc.in)
		assert.Equal(t, tc.want, n, tc.in)
	}
}
