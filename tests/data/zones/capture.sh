#!/bin/sh
# Capture real zone-labelled latency: a real Prometheus scrapes four real node exporters, two in
# "zone-a" (its own zone) and two in "zone-b", and labels every target with source_zone and
# destination_zone through relabel_configs. The cross-zone link is a real, slower network path:
# inside a private network namespace (everything on its own 127.0.0.1, MTU 1500) an HTB class
# (tc; this kernel has neither netem nor prio) limits what the zone-b exporters send to RATE. Usage:
# capture.sh OUTDIR [SECONDS] [RATE]  (root; needs ip, tc, prometheus, prometheus-node-exporter, curl).
set -eu
OUT=$1; SECS=${2:-60}; RATE=${3:-2mbit}
NS=cdzones$$
W=$(mktemp -d)
mkdir -p "$OUT"
ip netns add "$NS"
cleanup() {
  for p in $(cat "$W"/pids 2>/dev/null); do kill "$p" 2>/dev/null || true; done
  sleep 1
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
X="ip netns exec $NS"
$X ip link set lo mtu 1500 up
# class 1:30 is rate-limited; only packets FROM the zone-b exporters (sport) go there
$X tc qdisc add dev lo root handle 1: htb default 10 r2q 100000
$X tc class add dev lo parent 1: classid 1:10 htb rate 10gbit
$X tc class add dev lo parent 1: classid 1:30 htb rate "$RATE" ceil "$RATE" burst 3000
for port in 19201 19202; do
  $X tc filter add dev lo protocol ip parent 1:0 prio 1 u32 match ip sport $port 0xffff flowid 1:30
done
for port in 19101 19102 19201 19202; do
  $X prometheus-node-exporter --web.listen-address=127.0.0.1:$port >"$W/ne$port.log" 2>&1 &
  echo $! >>"$W"/pids
done
cat >"$W/prometheus.yml" <<YML
global: {scrape_interval: 1s, scrape_timeout: 900ms}
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ['127.0.0.1:19101', '127.0.0.1:19102']
        labels: {zone: zone-a}
      - targets: ['127.0.0.1:19201', '127.0.0.1:19202']
        labels: {zone: zone-b}
    relabel_configs:
      - {source_labels: [zone], target_label: destination_zone}
      - {target_label: source_zone, replacement: zone-a}
      - {action: labeldrop, regex: zone}
YML
$X prometheus --config.file="$W/prometheus.yml" --storage.tsdb.path="$W/tsdb" \
  --web.listen-address=127.0.0.1:19090 >"$W/prom.log" 2>&1 &
echo $! >>"$W"/pids
sleep 3
START=$(date +%s)
sleep "$SECS"
END=$(date +%s)
Q="$X curl -s -G http://127.0.0.1:19090/api/v1"
$Q/query_range --data-urlencode query=scrape_duration_seconds --data-urlencode start=$START \
  --data-urlencode end=$END --data-urlencode step=1 >"$OUT/prometheus_2.42.0_query_range_scrape_duration_zones.json"
$Q/query --data-urlencode query=up >"$OUT/prometheus_2.42.0_query_up_zones.json"
$Q/series --data-urlencode 'match[]={destination_zone=~".+"}' --data-urlencode start=$START \
  --data-urlencode end=$END >"$OUT/prometheus_2.42.0_series_destination_zone.json"
$Q/label/__name__/values >"$OUT/prometheus_2.42.0_label_name_values.json"
$X curl -s -G http://127.0.0.1:19090/federate --data-urlencode 'match[]=scrape_duration_seconds' \
  >"$OUT/prometheus_2.42.0_federate_scrape_duration_zones.prom"
cp "$W/prometheus.yml" "$OUT/prometheus.yml"
$X tc -s class show dev lo >"$OUT/tc_class_stats.txt"
echo "start $START end $END zone-b rate $RATE" >"$OUT/what_happened.txt"
