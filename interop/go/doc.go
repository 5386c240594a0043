// Package interop holds interoperability tests of mcpedge against Go MCP
// client libraries that mcpedge's authors did not write: the official
// github.com/modelcontextprotocol/go-sdk and github.com/mark3labs/mcp-go.
//
// The tests drive the mcpedge binary as a subprocess, over stdio and over
// Streamable HTTP on 127.0.0.1, in both protocol eras: 2025-11-25 (sessions:
// initialize, server-to-client requests, resources/subscribe) and
// 2026-07-28 (stateless: server/discover, per-request _meta,
// subscriptions/listen, multi round-trip requests).
//
// This directory is a Go module of its own so that the client libraries
// stay out of mcpedge's go.mod. Run it with `make interop-go` from the
// repository root, or `go test ./...` here: TestMain builds
// ../../cmd/mcpedge unless MCPEDGE_BIN names a binary.
//
// Test names say what they cover: Test<Library>_<Transport>_<Era>, with a
// subtest per feature (for example TestGoSDK_HTTP_2026/mrtr).
package interop
