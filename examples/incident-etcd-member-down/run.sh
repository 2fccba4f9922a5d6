#!/bin/sh
# Diagnosis of a real etcd member death, from the whole incident folder (see README.md). Run from
# anywhere, in a clone after `make run`: it uses the clone's .venv/bin/clusterdoctor, else a
# clusterdoctor on PATH. Needs only tests/data/ (in every clone), not ../shared. Exit code is
# clusterdoctor diagnose's: 1 here, because the dead member is a CRITICAL finding.
set -e
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd_bin="$repo/.venv/bin/clusterdoctor"
if [ ! -x "$cd_bin" ]; then
    cd_bin=$(command -v clusterdoctor || true)
fi
if [ -z "$cd_bin" ]; then
    echo "run.sh: clusterdoctor not found: run \`make run\` in $repo first (it creates .venv)" >&2
    exit 2
fi
exec "$cd_bin" diagnose "$repo/tests/data/etcd_dead_member/zap" "$@"
