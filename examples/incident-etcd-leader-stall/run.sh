#!/bin/sh
# Layered diagnosis of a real etcd leader stall (see README.md). Run from anywhere, in a clone after
# `make run`: it uses the clone's .venv/bin/clusterdoctor, else a clusterdoctor on PATH.
# Needs only tests/data/ (in every clone). Exit code is clusterdoctor diagnose's:
# 1 here, because the stall is a CRITICAL finding (0 nothing at or above --fail-on, 2 bad input).
set -e
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../find-clusterdoctor"
d="$repo/tests/data/etcd_stall/zap"
exec "$cd_bin" diagnose "$d/etcd-m0.log" "$d/etcd-m1.log" "$d/etcd-m2.log" "$@"
