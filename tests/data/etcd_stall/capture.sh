#!/bin/bash
# 3-member etcd on 127.0.0.1 (zap JSON logs); while a client writes keys, the leader process is
# stalled in cycles (SIGSTOP $STOP_S s / SIGCONT $CONT_S s cycles for 6 s; defaults 0.3 / 0.1) - CPU starvation of the leader.
set -u
OUT=$1; BASE=$2; LOGGER=${3:-zap}
rm -rf "$OUT"; mkdir -p "$OUT"
CL=""; for i in 0 1 2; do CL="$CL,m$i=http://127.0.0.1:$((BASE+10*i+1))"; done; CL=${CL#,}
PIDS=()
for i in 0 1 2; do
  C=$((BASE+10*i)); P=$((BASE+10*i+1))
  if [ "$LOGGER" = zap ]; then extra="--logger=zap --log-outputs=stderr"; else extra="--logger=capnslog"; fi
  etcd --name m$i --data-dir "$OUT/data$i" $extra \
    --listen-client-urls http://127.0.0.1:$C --advertise-client-urls http://127.0.0.1:$C \
    --listen-peer-urls http://127.0.0.1:$P --initial-advertise-peer-urls http://127.0.0.1:$P \
    --initial-cluster "$CL" --initial-cluster-state new --initial-cluster-token stall-$BASE \
    2> "$OUT/m$i.log" &
  PIDS+=($!)
done
sleep 4
EPS="http://127.0.0.1:$BASE,http://127.0.0.1:$((BASE+10)),http://127.0.0.1:$((BASE+20))"
export ETCDCTL_API=3
etcdctl --endpoints=$EPS endpoint status -w json > "$OUT/status_before.json"
L=$(python3 -c "import json; d=json.load(open('$OUT/status_before.json')); print([i for i,e in enumerate(d) if e['Status']['header']['member_id']==e['Status']['leader']][0])")
LP=${PIDS[$L]}
( for k in $(seq 1 400); do etcdctl --endpoints=$EPS --command-timeout=3s put key$((k%20)) "value-$k" >/dev/null 2>&1; done ) &
W=$!
sleep 1
{ echo "leader m$L pid $LP"; echo "stall start $(date -u +%FT%T.%NZ)"; } > "$OUT/what_happened.txt"
END=$((SECONDS+6))
while [ $SECONDS -lt $END ]; do kill -STOP $LP; sleep ${STOP_S:-0.3}; kill -CONT $LP; sleep ${CONT_S:-0.1}; done
echo "stall end $(date -u +%FT%T.%NZ)" >> "$OUT/what_happened.txt"
sleep 3
kill $W 2>/dev/null; wait $W 2>/dev/null
etcdctl --endpoints=$EPS endpoint status -w json > "$OUT/status_after.json"
etcdctl --endpoints=$EPS endpoint health -w json > "$OUT/health_after.json" 2>&1
# keep the logs as they were before the orderly shutdown below
for i in 0 1 2; do cp "$OUT/m$i.log" "$OUT/etcd-m$i.log"; done
for p in "${PIDS[@]}"; do kill $p; done
wait
rm -rf "$OUT"/data* "$OUT"/m?.log
