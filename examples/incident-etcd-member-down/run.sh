#!/bin/sh
# Diagnosis of a real etcd member death, from the whole incident folder (see README.md). Run from
# anywhere, in a clone after `make run`: it uses the clone's .venv/bin/clusterdoctor, else a
# clusterdoctor on PATH. Needs only tests/data/ (in every clone). Exit code is
# clusterdoctor diagnose's: 1 here, because the dead member is a CRITICAL finding.
set -e
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../find-clusterdoctor"
exec "$cd_bin" diagnose "$repo/tests/data/etcd_dead_member/zap" "$@"
