#!/bin/bash
# metrics-ab.sh: A/B of mcpedge's CPU per call, admin (metrics) off vs on: server CPU from
# /proc/PID/stat utime+stime over mcpload's measured phase (mcpload -pid).
# TCP pipelined (-c 4 -inflight 32) and HTTP (-c 16), 5 s each (after mcpload's
# 2 s warm-up), off and on in ABBA order (ORDER), T=tcp,http picks the transports.
# Needs $M/mcpedge and $M/mcpload (M=/tmp/m: go build -o /tmp/m/mcpedge
# ./cmd/mcpedge; go build -o /tmp/m/mcpload ./cmd/mcpload) and python3; ports
# 17400-17402 free.
M=${M:-/tmp/m}
cd "$M"
run() { # mode target flags...
  local mode=$1 target=$2; shift 2
  ./mcpload -q -duration 5s -pid $SRV -json "$M/r.json" "$@" $target >/dev/null 2>&1
  python3 -c 'import json,sys;d=json.load(open(sys.argv[3]));s=d["server"];print(sys.argv[1],sys.argv[2],"requests=%d rps=%.0f server_cpu_s=%.2f server_us_per_call=%.3f errors=%d"%(d["requests"],d["throughput_rps"],s["cpu_s"],s["cpu_per_request_us"],d["errors"]))' $mode ${target%%:*} "$M/r.json"
}
ORDER=${ORDER:-"off on on off off on on off"}   # ABBA: drift in the machine's load cancels
for round in 1; do
  for mode in $ORDER; do
    adm=""; [ $mode = on ] && adm=127.0.0.1:17402
    ./mcpedge -tcp 127.0.0.1:17400 -http 127.0.0.1:17401 -admin "$adm" -handlers bench -log-level warn 2>>"$M/ab-srv.log" &
    SRV=$!
    sleep 0.5
    [[ ${T:-tcp,http} == *tcp* ]] && run $mode tcp://127.0.0.1:17400 -c 4 -inflight 32
    [[ ${T:-tcp,http} == *http* ]] && run $mode http://127.0.0.1:17401/mcp -c 16
    kill $SRV; wait $SRV 2>/dev/null
  done
done
