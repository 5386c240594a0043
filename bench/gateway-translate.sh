#!/bin/bash
# gateway-translate.sh: the CPU a call translated between eras costs the
# gateway, against the same call in one era (docs/benchmarks.md, "Era
# translation"). Every point is tools/call of echo (handler set bench),
# mcpload over Streamable HTTP with -c sessions to mcpedge as a gateway,
# whose upstream is mcpedge -tcp -handlers bench (pipelined):
#
#   2025-pass   a session client, an upstream of both eras (initialize; passes through)
#   2026-pass   a 2026-07-28 client, an upstream of both eras (stateless; passes through)
#   2026-down   a 2026-07-28 client, an upstream of -versions 2025-11-25 (translated down)
#   2025-up     a session client, an upstream of -versions 2026-07-28 (translated up)
#
# us_per_call is the gateway process's CPU per call (mcpload -pids), the
# upstream's not counted. ROUNDS rounds (default 3) of DURATION (default
# 5s); the summary is the median. Needs $M/mcpedge and $M/mcpload,
# python3; ports 17540-17549 free.
set -u
M=${M:-/tmp/m}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
C=${C:-64}
cd "$M"
OUT="$M/translate-results.txt"; : > "$OUT"
LOG="$M/translate-bench.log"; : > "$LOG"

PIDS=()
spawn() { "$@" 2>>"$LOG" & PIDS+=($!); }
stop() { kill "${PIDS[@]}" 2>/dev/null; wait "${PIDS[@]}" 2>/dev/null; PIDS=(); }
waitport() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 not up" >&2; }

load() { # name pid url protocol
  local name=$1 pid=$2 url=$3 proto=$4
  ./mcpload -q -duration "$DURATION" -warmup 1s -pids "$pid" -json "$M/r.json" -c "$C" -protocol "$proto" "$url" >/dev/null 2>>"$LOG"
  python3 - "$name" "$M/r.json" >>"$OUT" <<'PY'
import json,sys
d=json.load(open(sys.argv[2])); s=d.get("server") or {}
print("%s rps=%.0f us_per_call=%.2f requests=%d errors=%d p50_us=%.0f p99_us=%.0f" % (sys.argv[1], d["throughput_rps"], s.get("cpu_per_request_us",0), d["requests"], d["errors"], d["latency_us"]["p50"], d["latency_us"]["p99"]))
PY
  tail -1 "$OUT"
}

upstream_args=(-http "" -admin "" -handlers bench -log-level warn -max-inflight 0)
gw_args=(-tcp "" -admin "" -log-level warn -max-inflight 0 -workers 4096)

point() { # name protocol (mcpload -protocol) upstream-versions
  spawn ./mcpedge -tcp 127.0.0.1:17541 "${upstream_args[@]}" ${3:+-versions $3}; waitport 17541
  spawn ./mcpedge -http 127.0.0.1:17542 "${gw_args[@]}" -upstream "x=tcp://127.0.0.1:17541"; waitport 17542
  load "$1" "${PIDS[1]}" http://127.0.0.1:17542/mcp "$2"
  stop
}

for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r" >&2
  point 2025-pass 2025-11-25 ""
  point 2026-pass 2026-07-28 ""
  point 2026-down 2026-07-28 2025-11-25
  point 2025-up 2025-11-25 2026-07-28
done

python3 - "$OUT" <<'PY'
import sys,statistics
rows={}
for line in open(sys.argv[1]):
    f=line.split()
    d=dict(kv.split("=") for kv in f[1:])
    rows.setdefault(f[0],[]).append(d)
med=lambda ds,k: statistics.median(float(d[k]) for d in ds)
print("\nmedians over %d rounds (gateway CPU per call; the upstream's not counted):" % max(len(v) for v in rows.values()))
base={"2026-down":"2026-pass","2025-up":"2025-pass"}
for name,ds in rows.items():
    ratio=""
    if name in base and base[name] in rows:
        ratio=" (%.2fx %s)" % (med(ds,"us_per_call")/med(rows[base[name]],"us_per_call"), base[name])
    print("%-10s rps=%8.0f  us_per_call=%6.2f%s  p50_us=%6.0f  p99_us=%7.0f  errors=%d" % (name, med(ds,"rps"), med(ds,"us_per_call"), ratio, med(ds,"p50_us"), med(ds,"p99_us"), sum(int(d["errors"]) for d in ds)))
PY
