#!/usr/bin/env bash
# ab.sh OLD_MCPEDGE NEW_MCPEDGE [ROUNDS]: server CPU per tools/call of echo
# for two mcpedge binaries, -handlers bench, 64 connections, TCP and HTTP,
# rounds alternating which binary goes first; prints one line per point.
# Needs bin/mcpload (make build) and python3. Both servers run at once on
# free loopback ports and are stopped at the end.
set -euo pipefail
old=$1 new=$2 rounds=${3:-8}
here=$(cd "$(dirname "$0")/.." && pwd)
mcpload=$here/bin/mcpload
port() { python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"; }
declare -A T H P
for v in old new; do
	bin=$old; [ $v = new ] && bin=$new
	T[$v]=$(port) H[$v]=$(port)
	# -admin "": both binaries alike (the second cannot have the default port)
	"$bin" -handlers bench -log-level warn -tcp 127.0.0.1:${T[$v]} -http 127.0.0.1:${H[$v]} -admin "" &
	P[$v]=$!
done
trap 'kill ${P[old]} ${P[new]} 2>/dev/null || true' EXIT
sleep 1
out=$(mktemp)
for r in $(seq 1 "$rounds"); do
	order="old new"; [ $((r % 2)) = 0 ] && order="new old"
	for tr in tcp http; do
		for v in $order; do
			if [ $tr = tcp ]; then tgt=tcp://127.0.0.1:${T[$v]}; else tgt=http://127.0.0.1:${H[$v]}/mcp; fi
			"$mcpload" -c 64 -duration 3s -warmup 1s -timeout 10s -q -pid ${P[$v]} -json "$out" "$tgt" >/dev/null
			python3 -c "
import json; r=json.load(open('$out')); s=r.get('server') or {}
print('$tr', '$v', 'round', $r, round(r['throughput_rps']), 'req/s', 'cpu_us_per_req', round(s.get('cpu_per_request_us', 0), 2), 'errors', r['errors'])"
		done
	done
done
rm -f "$out"
