#!/bin/bash
# A real etcd member death under load, captured with the real tools on 127.0.0.1:
# 3-member etcd (Debian etcd-server), a real Prometheus scraping the three every second, clients
# writing keys in a loop; then the leader is killed with SIGKILL and the survivors elect a new one.
#
#   ./capture.sh OUT BASE [zap|capnslog]
#
# Ports: member i listens on BASE+10i (client) and BASE+10i+1 (peer); Prometheus on BASE+30.
# METRICS=0 skips the /metrics dumps (the capnslog run does, to keep the repository small).
set -u
OUT=$1; BASE=$2; LOGGER=${3:-zap}
METRICS=${METRICS:-1}
rm -rf "$OUT"; mkdir -p "$OUT"
export ETCDCTL_API=3
utc() { date -u +%FT%T.%NZ; }
CL=""; for i in 0 1 2; do CL="$CL,m$i=http://127.0.0.1:$((BASE+10*i+1))"; done; CL=${CL#,}
EPS="http://127.0.0.1:$BASE,http://127.0.0.1:$((BASE+10)),http://127.0.0.1:$((BASE+20))"
PIDS=()
for i in 0 1 2; do
  C=$((BASE+10*i)); P=$((BASE+10*i+1))
  if [ "$LOGGER" = zap ]; then extra="--logger=zap --log-outputs=stderr"; else extra="--logger=capnslog"; fi
  etcd --name m$i --data-dir "$OUT/data$i" $extra \
    --listen-client-urls http://127.0.0.1:$C --advertise-client-urls http://127.0.0.1:$C \
    --listen-peer-urls http://127.0.0.1:$P --initial-advertise-peer-urls http://127.0.0.1:$P \
    --initial-cluster "$CL" --initial-cluster-state new --initial-cluster-token dead-$BASE \
    2> "$OUT/m$i.log" &
  PIDS+=($!)
done
for i in 0 1 2; do
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$((BASE+10*i))/health" | grep -q '"health":"true"' && break; sleep 0.2
  done
done
PROM=$((BASE+30))
cat > "$OUT/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: etcd
    static_configs:
      - targets: ['127.0.0.1:$BASE', '127.0.0.1:$((BASE+10))', '127.0.0.1:$((BASE+20))']
YML
prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/tsdb" \
  --web.listen-address=127.0.0.1:$PROM 2> "$OUT/prometheus.stderr" &
PP=$!
for _ in $(seq 1 150); do
  n=$(curl -s "http://127.0.0.1:$PROM/api/v1/query?query=up" | grep -o '"value":\[[0-9.]*,"1"\]' | wc -l)
  [ "$n" = 3 ] && break; sleep 0.2
done
T0=$(date -u +%s)
etcdctl --endpoints=$EPS member list -w json > "$OUT/member_list.json"
etcdctl --endpoints=$EPS endpoint status -w json > "$OUT/status_before.json"
etcdctl --endpoints=$EPS endpoint health -w json > "$OUT/health_before.json" 2>&1
if [ "$METRICS" = 1 ]; then
  for i in 0 1 2; do curl -s "http://127.0.0.1:$((BASE+10*i))/metrics" > "$OUT/metrics_before_m$i.prom"; done
fi
L=$(python3 -c "import json; d=json.load(open('$OUT/status_before.json')); print([i for i,e in enumerate(d) if e['Status']['header']['member_id']==e['Status']['leader']][0])")
LP=${PIDS[$L]}
# two clients write keys in a loop until told to stop (their stderr is kept: what a user's client saw)
for c in 1 2; do
  ( k=0; while [ ! -e "$OUT/stop" ]; do k=$((k+1))
      etcdctl --endpoints=$EPS --command-timeout=2s put c$c-key$((k%50)) "value-$k" >/dev/null || true
    done ) 2>> "$OUT/client.log" &
done
sleep 4
{ echo "leader m$L pid $LP (client http://127.0.0.1:$((BASE+10*L)), peer http://127.0.0.1:$((BASE+10*L+1)))"
  echo "killed (SIGKILL) $(utc)"; } > "$OUT/what_happened.txt"
kill -KILL $LP
sleep 10
touch "$OUT/stop"; sleep 3
echo "after $(utc)" >> "$OUT/what_happened.txt"
etcdctl --endpoints=$EPS --command-timeout=2s member list -w json > "$OUT/member_list_after.json"
etcdctl --endpoints=$EPS --command-timeout=2s endpoint status -w json > "$OUT/status_after.json" 2> "$OUT/status_after.stderr"
etcdctl --endpoints=$EPS --command-timeout=2s endpoint health -w json > "$OUT/health_after.json" 2> "$OUT/health_after.stderr"
if [ "$METRICS" = 1 ]; then
  for i in 0 1 2; do
    [ $i = $L ] && continue
    curl -s "http://127.0.0.1:$((BASE+10*i))/metrics" > "$OUT/metrics_after_m$i.prom"
  done
fi
T1=$(date -u +%s)
for q in up etcd_server_has_leader etcd_server_leader_changes_seen_total etcd_server_proposals_failed_total \
    etcd_network_peer_sent_failures_total; do
  curl -s -G "http://127.0.0.1:$PROM/api/v1/query_range" --data-urlencode "query=$q" \
    --data-urlencode "start=$T0" --data-urlencode "end=$T1" --data-urlencode step=1 > "$OUT/prometheus_query_range_$q.json"
done
# keep the logs as they were before the orderly shutdown below
for i in 0 1 2; do cp "$OUT/m$i.log" "$OUT/etcd-m$i.log"; done
for p in "${PIDS[@]}" $PP; do kill $p 2>/dev/null; done
wait
rm -rf "$OUT"/data* "$OUT"/m?.log "$OUT/tsdb" "$OUT/stop" "$OUT/prometheus.stderr"
