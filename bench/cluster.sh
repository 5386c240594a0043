#!/bin/bash
# cluster.sh: mcpedge alone against a cluster of three nodes on one machine,
# measured with mcpload (docs/benchmarks.md, "Cluster"):
#
#   http-1     one node (no cluster), HTTP, -c 64 sessions
#   http-3loc  three nodes, every request sent to the node that owns its session
#   http-3sticky three nodes, the sessions spread over them, each session's
#              requests to the node it was opened on (mcpload -sticky)
#   http-3rr   three nodes, each request to the next node (round-robin, per
#              request): served where it lands, from the session's record
#   http-3alone three nodes that are no cluster, sessions spread as in
#              http-3sticky: what three processes cost on this machine, the
#              floor of the rows above
#   tcp-1      one node, TCP pipelined (-c 16 -inflight 16)
#   tcp-3      three nodes, TCP connections spread over them (sessions are
#              bound to their connection: nothing is forwarded)
#   lvl-3sticky three nodes, sessions spread, each session's requests to
#              its own node, each request a logging/setLevel to the level
#              the session has (a request its home must serve, which
#              changes nothing): nothing forwarded
#   lvl-3rr    the same, each request to the next node: 2 in 3 forwarded to
#              the home, as direct messages (docs/cluster.md, "A cheaper
#              hop"); against lvl-3sticky, what a forward costs here
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
# pinning. ONLY="http-1 http-3loc http-3rr" runs only the rows named (the
# summary lists those). PORTS (default 174) is the first three digits of
# every port, so that two runs on one machine do not meet. PROFILE=N takes
# an N-second CPU profile of every node during each HTTP/TCP row (its
# admin listener, port ${PORTS}i4), written to $M/prof-<row>-n<i>.pb.gz.
# Needs $M/mcpedge and $M/mcpload (go build -o ...) and python3; ports
# ${PORTS}00-${PORTS}60 free.
set -u
M=${M:-/tmp/m}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CORES=${CORES:-}
LOADCORES=${LOADCORES:-}
ONLY=${ONLY:-}
P=${PORTS:-174}
PROFILE=${PROFILE:-}
cd "$M"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > state.key; echo >> state.key
OUT="$M/cluster-results.txt"; : > "$OUT"

pin() { # index: the taskset prefix for node index
  [ -z "$CORES" ] && return
  local a=($CORES); echo "taskset -c ${a[$1]}"
}
loadpin() { [ -n "$LOADCORES" ] && echo "taskset -c $LOADCORES"; }

PIDS=()
start() { # n [handlers [alone]]: start n nodes (1, or alone: no cluster) serving the handler set (bench), or (gw) the upstream of gw.toml
  PIDS=()
  local n=$1 set=${2:-bench} alone=${3:-} i
  for ((i=1; i<=n; i++)); do
    local admin=""
    [ -n "$PROFILE" ] && admin=127.0.0.1:$P${i}4
    local args=(-tcp 127.0.0.1:$P${i}0 -http 127.0.0.1:$P${i}1 -admin "$admin" -log-level warn -max-inflight 0 -state-key-file state.key)
    if [ "$set" = gw ]; then args+=(-config gw.toml -workers 4096); else args+=(-handlers $set); fi
    if [ "$n" -gt 1 ] && [ -z "$alone" ]; then
      local routes="" j
      for ((j=1; j<=n; j++)); do [ $j != $i ] && routes="$routes,nats-route://127.0.0.1:$P${j}2"; done
      args+=(-node n$i -cluster-embed 127.0.0.1:$P${i}2 -cluster-routes "${routes#,}" -cluster-link 127.0.0.1:$P${i}3)
    fi
    $(pin $((i-1))) ./mcpedge "${args[@]}" 2>>"$M/cluster-srv.log" &
    PIDS+=($!)
  done
  sleep 1.5 # routes up
}
UPID=
upstream() { # the gateway rows' shared upstream, on ${PORTS}50 (pinned to the last node's cores)
  $(pin 2) ./mcpedge -tcp 127.0.0.1:${P}50 -http "" -admin "" -handlers bench -log-level warn -max-inflight 0 2>>"$M/cluster-srv.log" &
  UPID=$!
  sleep 0.5
}
printf '[upstream.x]\nurl = "tcp://127.0.0.1:%s50"\nshare = "pool:4"\n' "$P" > gw.toml
echo '[{"name":"level","method":"logging/setLevel","params":{"level":"info"}}]' > level.json
stop() { kill "${PIDS[@]}" 2>/dev/null; wait "${PIDS[@]}" 2>/dev/null; }
pids() { local IFS=,; echo "${PIDS[*]}"; }

want() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }

PROFS=()
profile() { # name: a CPU profile of every node while the row's load runs
  [ -z "$PROFILE" ] && return
  local i
  for ((i=1; i<=${#PIDS[@]}; i++)); do
    (sleep 1.5; curl -s -o "$M/prof-$1-n$i.pb.gz" "http://127.0.0.1:$P${i}4/debug/pprof/profile?seconds=$PROFILE") &
    PROFS+=($!)
  done
}

load() { # name targets flags...
  local name=$1 targets=$2; shift 2
  want "$name" || return
  profile "$name"
  $(loadpin) ./mcpload -q -duration "$DURATION" -warmup 1s -pids "$(pids)" -json "$M/r.json" "$@" $targets >/dev/null 2>>"$M/cluster-load.log"
  python3 - "$name" "$M/r.json" >>"$OUT" <<'PY'
import json,sys
d=json.load(open(sys.argv[2])); s=d.get("server") or {}
print("%s rps=%.0f us_per_call=%.2f requests=%d errors=%d p50_us=%.0f p99_us=%.0f" % (sys.argv[1], d["throughput_rps"], s.get("cpu_per_request_us",0), d["requests"], d["errors"], d["latency_us"]["p50"], d["latency_us"]["p99"]))
PY
  wait_profiles
  tail -1 "$OUT"
}

wait_profiles() { [ ${#PROFS[@]} -gt 0 ] && wait "${PROFS[@]}"; PROFS=(); }

fanout() { # name targets
  local name=$1 targets=$2
  want "$name" || return
  $(loadpin) ./mcpload -q -mode fanout -subscribers 300 -updates 100 -interval 20ms -json "$M/r.json" $targets >/dev/null 2>>"$M/cluster-load.log"
  python3 - "$name" "$M/r.json" >>"$OUT" <<'PY'
import json,sys
d=json.load(open(sys.argv[2]))["fanout"]; l=d.get("delay_us") or {}
print("%s subscribed=%d delivered=%d lost=%d p50_us=%.0f p99_us=%.0f max_us=%.0f" % (sys.argv[1], d["subscribed"], d["delivered"], d["lost"], l.get("p50",0), l.get("p99",0), l.get("max",0)))
PY
  tail -1 "$OUT"
}

H1=http://127.0.0.1:${P}11/mcp; H2=http://127.0.0.1:${P}21/mcp; H3=http://127.0.0.1:${P}31/mcp
T1=tcp://127.0.0.1:${P}10; T2=tcp://127.0.0.1:${P}20; T3=tcp://127.0.0.1:${P}30
for ((r=1; r<=ROUNDS; r++)); do
  echo "round $r" | tee -a "$OUT"
  if want http-1 || want tcp-1 || want http26-1; then
  start 1
  load http-1 "$H1" -c 64
  load tcp-1 "$T1" -c 16 -inflight 16
  load http26-1 "$H1" -c 64 -protocol 2026-07-28
  stop
  fi
  if want fanout-1; then start 1 demo; fanout fanout-1 "$H1"; stop; fi
  if want http-3loc || want http-3sticky || want http-3rr || want tcp-3 || want http26-3rr || want lvl-3sticky || want lvl-3rr; then
  start 3
  load http-3loc "$H1" -c 64
  load http-3sticky "$H1,$H2,$H3" -c 64 -sticky
  load http-3rr "$H1,$H2,$H3" -c 64
  load lvl-3sticky "$H1,$H2,$H3" -c 64 -sticky -scenario level.json
  load lvl-3rr "$H1,$H2,$H3" -c 64 -scenario level.json
  load tcp-3 "$T1,$T2,$T3" -c 16 -inflight 16
  load http26-3rr "$H1,$H2,$H3" -c 64 -protocol 2026-07-28
  stop
  fi
  if want http-3alone; then start 3 bench alone; load http-3alone "$H1,$H2,$H3" -c 64 -sticky; stop; fi
  if want fanout-3; then start 3 demo; fanout fanout-3 "$H1,$H2,$H3"; stop; fi
  if want gw-1 || want gw-3rr; then
  upstream
  if want gw-1; then start 1 gw; load gw-1 "$H1" -c 64; stop; fi
  if want gw-3rr; then start 3 gw; load gw-3rr "$H1,$H2,$H3" -c 64; stop; fi
  kill $UPID; wait $UPID 2>/dev/null
  fi
done

python3 - "$OUT" <<'PY'
import re,sys,statistics as st
rows={}
for line in open(sys.argv[1]):
    f=line.split()
    if len(f)<2 or "=" not in f[1]: continue
    rows.setdefault(f[0],[]).append({k:float(v) for k,v in (x.split("=") for x in f[1:])})
def med(name,key): return st.median(r[key] for r in rows[name])
print("\nmedians of %d rounds" % max(len(v) for v in rows.values()))
for name in ["http-1","http-3loc","http-3sticky","http-3rr","http-3alone","lvl-3sticky","lvl-3rr","tcp-1","tcp-3","http26-1","http26-3rr"]:
    if name not in rows: continue
    print("%-12s %8.0f req/s  %6.2f us/call  errors %d" % (name, med(name,"rps"), med(name,"us_per_call"), sum(r["errors"] for r in rows[name])))
def ratio(a,b): return "%.2fx" % (med(a,"us_per_call")/med(b,"us_per_call")) if a in rows and b in rows else "-"
if "lvl-3sticky" in rows and "lvl-3rr" in rows:
    print("forwarded request (direct message): %.1f us more server CPU than one served where it lands ((lvl-3rr - lvl-3sticky) x 3/2)" % ((med("lvl-3rr","us_per_call")-med("lvl-3sticky","us_per_call"))*1.5))
print("3 nodes / 1 node, CPU per call: http local %s, http sticky %s, http round-robin %s, http three alone (no cluster) %s, tcp %s, 2026-07-28 round-robin %s" % (ratio("http-3loc","http-1"), ratio("http-3sticky","http-1"), ratio("http-3rr","http-1"), ratio("http-3alone","http-1"), ratio("tcp-3","tcp-1"), ratio("http26-3rr","http26-1")))
print("against three nodes that are no cluster (the floor of three processes here), CPU per call: http sticky %s, http round-robin %s" % (ratio("http-3sticky","http-3alone"), ratio("http-3rr","http-3alone")))
for name in ["gw-1","gw-3rr"]:
    if name not in rows: continue
    print("%-12s %8.0f req/s  %6.2f us/call  errors %d" % (name, med(name,"rps"), med(name,"us_per_call"), sum(r["errors"] for r in rows[name])))
print("gateway, 3 nodes round-robin / 1 node, CPU per call: %s" % ratio("gw-3rr","gw-1"))
for name in ["fanout-1","fanout-3"]:
    if name not in rows: continue
    print("%-10s delay p50 %6.0f us  p99 %6.0f us  lost %d" % (name, med(name,"p50_us"), med(name,"p99_us"), sum(r["lost"] for r in rows[name])))
PY
