#!/bin/sh
# Layered diagnosis of a real etcd leader stall (see README.md). Run from anywhere.
set -e
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
d="$repo/tests/data/etcd_stall/zap"
exec clusterdoctor diagnose "$d/etcd-m0.log" "$d/etcd-m1.log" "$d/etcd-m2.log" "$@"
