#!/bin/sh
# Capture what torchrun really prints when one rank of a gloo job never arrives (see README.md).
# Usage: sh tests/data/comm/make_torchrun_logs.sh OUT_DIR   (from the repository root, torch in .venv)
# Every torchrun exits 1 (a rank failed); that is the point, so exit codes are not checked.
set -u
out=${1:?OUT_DIR}
here=$(dirname "$0")
run="timeout 120 .venv/bin/torchrun --standalone --nproc-per-node 2"
worker="$here/torchrun_hang_worker.py"
mkdir -p "$out/stuck_rank_tee"
$run "$worker" stuck_rank >"$out/stuck_rank_plain.log" 2>&1
$run "$worker" late_rank >"$out/late_rank_plain.log" 2>&1
$run --tee 3 --log-dir "$out/stuck_rank_tee" "$worker" stuck_rank >"$out/stuck_rank_tee/console.log" 2>&1
# torch 2.13 takes the prefix template from the environment (torch/distributed/run.py); it applies
# to tee'd/redirected output.
TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[${role_name}-r${rank}-l${local_rank}]:' \
  $run --tee 3 "$worker" stuck_rank >"$out/stuck_rank_prefix_template.log" 2>&1
TORCH_DISTRIBUTED_DEBUG=DETAIL $run --tee 3 "$worker" stuck_rank >"$out/stuck_rank_detail.log" 2>&1
exit 0
