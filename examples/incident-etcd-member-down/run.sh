#!/bin/sh
# Diagnosis of a real etcd member death, from the whole incident folder (see README.md). Run from anywhere.
set -e
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
exec clusterdoctor diagnose "$repo/tests/data/etcd_dead_member/zap" "$@"
