package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/mcpedge/mcpedge/internal/testserver"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpedge/mcpedge/engine"
	"github.com/mcpedge/mcpedge/loadtest"
	"github.com/mcpedge/mcpedge/transport/tcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func serve(t *testing.T) string {
	t.Helper()
	addr, _ := testserver.TCP(t, testserver.Engine(t, "bench", engine.Options{}), tcp.Options{Loops: 1})
	return "tcp://" + addr
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-nope"},
		{"udp://x:1"},
		{"-mode", "other", "tcp://127.0.0.1:1"},
		{"-mix", "nope", "tcp://127.0.0.1:1"},
		{"-client", "-strategy", "nope", "tcp://127.0.0.1:1"},
	} {
		var out, errb bytes.Buffer
		assert.Equal(t, 2, run(context.Background(), args, &out, &errb, false), "%v: %s", args, errb.String())
	}
	var out, errb bytes.Buffer
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, &out, &errb, false))
}

func TestRunWritesReports(t *testing.T) {
	target := serve(t)
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-n", "300", "-warmup", "0", "-c", "2", "-mix", "echo=2,add=1,ping=1",
		"-json", jsonPath, "-html", htmlPath, "-max-error-rate", "0.001", target}, &out, &errb, false)
	require.Equal(t, 0, code, "%s%s", out.String(), errb.String())
	assert.Contains(t, out.String(), "throughput")
	assert.Contains(t, out.String(), "thresholds passed")

	data, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var res loadtest.Result
	require.NoError(t, json.Unmarshal(data, &res))
	assert.Equal(t, loadtest.SchemaVersion, res.Schema)
	assert.Equal(t, int64(300), res.OK)
	require.NotNil(t, res.Latency)
	assert.Positive(t, res.Latency.P99)

	html, err := os.ReadFile(htmlPath)
	require.NoError(t, err)
	assert.Contains(t, string(html), "Latency by percentile")
}

func TestJSONToStdout(t *testing.T) {
	target := serve(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-n", "50", "-warmup", "0", "-json", "-", target}, &out, &errb, true)
	require.Equal(t, 0, code, errb.String())
	var res loadtest.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, int64(50), res.OK)
}

func TestThresholdsFail(t *testing.T) {
	target := serve(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-n", "50", "-warmup", "0", "-max-p99", "1ns", target}, &out, &errb, false)
	assert.Equal(t, 1, code)
	assert.Contains(t, out.String(), "FAIL")
	assert.Contains(t, out.String(), "-max-p99")
}

func TestProgressOnTerminal(t *testing.T) {
	target := serve(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-duration", "700ms", "-warmup", "0", target}, &out, &errb, true)
	require.Equal(t, 0, code, errb.String())
	// The bar draws with carriage returns; the summary follows it.
	assert.Contains(t, out.String(), "\r")
	assert.Contains(t, out.String(), "throughput")

	out.Reset()
	code = run(context.Background(), []string{"-duration", "300ms", "-warmup", "0", target}, &out, &errb, false)
	require.Equal(t, 0, code)
	assert.False(t, strings.Contains(out.String(), "\r"), "no bar when stdout is not a terminal")
}

func TestDeadServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	var out, errb bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), []string{"-n", "1", "-timeout", "1s", "tcp://" + addr}, &out, &errb, false))
	assert.Contains(t, errb.String(), "connect")
}
