#!/bin/bash
# cluster.sh: mcpedge alone against a cluster of three nodes on one machine,
# measured with mcpload (docs/benchmarks.md, "Cluster"):
#
#   http-1     one node (no cluster), HTTP, -c 64 sessions
#   http-3loc  three nodes, every request sent to the node that owns its session
#   http-3rr   three nodes, each request to the next node (round-robin, per
#              request): two requests in three are forwarded to their owner
#   tcp-1      one node, TCP pipelined (-c 16 -inflight 16)
#   tcp-3      three nodes, TCP connections spread over them (sessions are
#              bound to their connection: nothing is forwarded)
#   http26-1   one node, HTTP at protocol 2026-07-28 (stateless), -c 64
#   http26-3rr three nodes, 2026-07-28, each request to the next node: nothing
#              to forward
#   fanout-1   one node: 300 subscribers, 100 board writes, notification delay
#   fanout-3   three nodes: subscribers spread over them, the writer on the first
#   gw-1       one gateway node (no cluster) fronting a shared upstream: one
#              mcpedge -tcp -handlers bench, [upstream.x] share = "pool:4" over
#              TCP; HTTP, -c 64 sessions
#   gw-3rr     three gateway nodes of a cluster fronting that one upstream
#              (each with its own pool:4), each request to the next node: a
#              proxied call is served where it lands (nothing forwarded)
#
# Server CPU per call is summed over every node's process (mcpload -pids);
# for gw-*, over the gateway nodes (the upstream's own CPU is left out: the
# same in both).
# ROUNDS rounds (default 3) of DURATION (default 5s) points; the summary is
# the median of the rounds. CORES="0-3 4-7 8-11" pins each node to its cores
# with taskset and LOADCORES the load generator (16-core runs); empty: no
# pinning. Needs $M/mcpedge and $M/mcpload (go build -o ...) and python3;
# ports 17400-17460 free.
set -u
M=${M:-/tmp/m}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CORES=${CORES:-}
LOADCORES=${LOADCORES:-}
cd "$M"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > state.key; echo >> state.key
OUT="$M/cluster-results.txt"; : > "$OUT"

pin() { # index: the taskset prefix for node index
  [ -z "$CORES" ] && return
  local a=($CORES); echo "taskset -c ${a[$1]}"
}
loadpin() { [ -n "$LOADCORES" ] && echo "taskset -c $LOADCORES"; }

PIDS=()
start() { # n [handlers]: start n nodes (1: no cluster) serving the handler set (bench), or (gw) the upstream of gw.toml
  PIDS=()
  local n=$1 set=${2:-bench} i
  for ((i=1; i<=n; i++)); do
    local args=(-tcp 127.0.0.1:174${i}0 -http 127.0.0.1:174${i}1 -admin "" -log-level warn -max-inflight 0 -state-key-file state.key)
    if [ "$set" = gw ]; then args+=(-config gw.toml -workers 4096); else args+=(-handlers $set); fi
    if [ "$n" -gt 1 ]; then
      local routes="" j
      for ((j=1; j<=n; j++)); do [ $j != $i ] && routes="$routes,nats-route://127.0.0.1:174${j}2"; done
      args+=(-node n$i -cluster-embed 127.0.0.1:174${i}2 -cluster-routes "${routes#,}" -cluster-link 127.0.0.1:174${i}3)
    fi
    $(pin $((i-1))) ./mcpedge "${args[@]}" 2>>"$M/cluster-srv.log" &
    PIDS+=($!)
  done
  sleep 1.5 # routes up
}
stop() { kill "${PIDS[@]}" 2>/dev/null; wait "${PIDS[@]}" 2>/dev/null; }
UPID=
upstream() { # the gateway rows' shared upstream, on 17450 (pinned to the last node's cores)
  $(pin 2) ./mcpedge -tcp 127.0.0.1:17450 -http "" -admin "" -handlers bench -log-level warn -max-inflight 0 2>>"$M/cluster-srv.log" &
  UPID=$!
  sleep 0.5
}
printf '[upstream.x]\nurl = "tcp://127.0.0.1:17450"\nshare = "pool:4"\n' > gw.toml
pids() { local IFS=,; echo "${PIDS[*]}"; }

load() { # name targets flags...
  local name=$1 targets=$2; shift 2
  $(loadpin) ./mcpload -q -duration "$DURATION" -warmup 1s -pids "$(pids)" -json "$M/r.json" "$@" $targets >/dev/null 2>>"$M/cluster-load.log"
  python3 - "$name" "$M/r.json" >>"$OUT" <<'PY'
import json,sys
d=json.load(open(sys.argv[2])); s=d.get("server") or {}
print("%s rps=%.0f us_per_call=%.2f requests=%d errors=%d p50_us=%.0f p99_us=%.0f" % (sys.argv[1], d["throughput_rps"], s.get("cpu_per_request_us",0), d["requests"], d["errors"], d["latency_us"]["p50"], d["latency_us"]["p99"]))
PY
  tail -1 "$OUT"
}

fanout() { # name targets
  local name=$1 targets=$2
  $(loadpin) ./mcpload -q -mode fanout -subscribers 300 -updates 100 -interval 20ms -json "$M/r.json" $targets >/dev/null 2>>"$M/cluster-load.log"
  python3 - "$name" "$M/r.json" >>"$OUT" <<'PY'
import json,sys
d=json.load(open(sys.argv[2]))["fanout"]; l=d.get("delay_us") or {}
print("%s subscribed=%d delivered=%d lost=%d p50_us=%.0f p99_us=%.0f max_us=%.0f" % (sys.argv[1], d["subscribed"], d["delivered"], d["lost"], l.get("p50",0), l.get("p99",0), l.get("max",0)))
PY
  tail -1 "$OUT"
}

H1=http://127.0.0.1:17411/mcp; H2=http://127.0.0.1:17421/mcp; H3=http://127.0.0.1:17431/mcp
for ((r=1; r<=ROUNDS; r++)); do
  echo "round $r" | tee -a "$OUT"
  start 1
  load http-1 "$H1" -c 64
  load tcp-1 tcp://127.0.0.1:17410 -c 16 -inflight 16
  load http26-1 "$H1" -c 64 -protocol 2026-07-28
  stop
  start 1 demo
  fanout fanout-1 "$H1"
  stop
  start 3
  load http-3loc "$H1" -c 64
  load http-3rr "$H1,$H2,$H3" -c 64
  load tcp-3 tcp://127.0.0.1:17410,tcp://127.0.0.1:17420,tcp://127.0.0.1:17430 -c 16 -inflight 16
  load http26-3rr "$H1,$H2,$H3" -c 64 -protocol 2026-07-28
  stop
  start 3 demo
  fanout fanout-3 "$H1,$H2,$H3"
  stop
  upstream
  start 1 gw
  load gw-1 "$H1" -c 64
  stop
  start 3 gw
  load gw-3rr "$H1,$H2,$H3" -c 64
  stop
  kill $UPID; wait $UPID 2>/dev/null
done

python3 - "$OUT" <<'PY'
import re,sys,statistics as st
rows={}
for line in open(sys.argv[1]):
    f=line.split()
    if len(f)<2 or "=" not in f[1]: continue
    rows.setdefault(f[0],[]).append({k:float(v) for k,v in (x.split("=") for x in f[1:])})
def med(name,key): return st.median(r[key] for r in rows[name])
print("\nmedians of %d rounds" % len(rows["http-1"]))
for name in ["http-1","http-3loc","http-3rr","tcp-1","tcp-3","http26-1","http26-3rr"]:
    print("%-10s %8.0f req/s  %6.2f us/call  errors %d" % (name, med(name,"rps"), med(name,"us_per_call"), sum(r["errors"] for r in rows[name])))
loc, rr = med("http-3loc","us_per_call"), med("http-3rr","us_per_call")
print("forwarded call: %.1f us more server CPU than a local one ((3rr - 3loc) x 3/2)" % ((rr-loc)*1.5))
print("3 nodes / 1 node, CPU per call: http local %.2fx, http round-robin %.2fx, tcp %.2fx, 2026-07-28 round-robin %.2fx" % (loc/med("http-1","us_per_call"), rr/med("http-1","us_per_call"), med("tcp-3","us_per_call")/med("tcp-1","us_per_call"), med("http26-3rr","us_per_call")/med("http26-1","us_per_call")))
for name in ["gw-1","gw-3rr"]:
    print("%-10s %8.0f req/s  %6.2f us/call  errors %d" % (name, med(name,"rps"), med(name,"us_per_call"), sum(r["errors"] for r in rows[name])))
print("gateway, 3 nodes round-robin / 1 node, CPU per call: %.2fx" % (med("gw-3rr","us_per_call")/med("gw-1","us_per_call")))
for name in ["fanout-1","fanout-3"]:
    print("%-10s delay p50 %6.0f us  p99 %6.0f us  lost %d" % (name, med(name,"p50_us"), med(name,"p99_us"), sum(r["lost"] for r in rows[name])))
PY
