"""GPU rule on a GEMM stress run across a node's GPUs (DCGM's ``ubergemm`` plugin run by hand).

Registered with the GPU rules (imported by :mod:`clusterdoctor.rules.gpu`). Input: ``gemm_results``
(:mod:`clusterdoctor.observe.gpu.ubergemm`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING

from clusterdoctor.model import Action, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, register_input, rule

if TYPE_CHECKING:
    from clusterdoctor.observe.gpu.ubergemm import GemmResult

register_input("gemm_results", "no GEMM stress output (ubergemm --adapters ... | grep GFlops)")

GEMM_PEER_FRACTION = Threshold(
    "gemm_peer_fraction",
    0.7,
    "of the median GFlops of the other GPUs in the same run",
    "the same GEMM on the GPUs of one node (one model, one clock policy) ends within a few percent of each "
    "other (seven A100s at 19096-19273 GFlops, a 1% spread, in NVIDIA/DCGM#122); 70% leaves room for "
    "boost-clock and thermal differences between boards many times that spread",
    "fraction of its peers' throughput below which one GPU's GEMM rate is an outlier",
)
MIN_PEERS = 2  # a median of at least two other GPUs


@rule(
    id="GPU023",
    name="gpu-gemm-throughput-outlier",
    layer="gpu",
    title="One GPU's GEMM throughput far below its peers' in the same stress run",
    requires=("gemm_results",),
    thresholds=(GEMM_PEER_FRACTION,),
    severity=Severity.CRITICAL,
    causes=("gpu.hw-faulty",),
)
def gemm_outlier(obs: Observations) -> Iterator[Finding]:
    """A GPU whose ``ubergemm`` result is below 70% of the median of the other GPUs of the run.

    **Symptom**: training on the node is slow (every collective waits for the slowest rank) although
    ``dcgmi diag`` passes; a GEMM run across the GPUs shows one adapter at a fraction of the others
    (``(ADAPTER#0) Ending with 6698 GFlops`` beside seven at ~19200: NVIDIA/DCGM#122).
    **Why**: the GPUs of a node run the same GEMM at nearly the same rate; one far below is clocked
    down (a power or thermal cap, a slowdown reason such as HW Slowdown from the board's power brake)
    or faulty. A pass of the diagnostic levels does not prove the rate: they check errors, not speed.
    **Fix**: read the GPU's clocks and throttle reasons (``nvidia-smi -q -d PERFORMANCE,CLOCK,POWER``)
    and fix a cap or cooling problem; if it runs at full clocks and is still slow, drain the node,
    reset the GPU, run the GEMM again and RMA the board if it stays slow.
    **Verify**: rerun ``ubergemm --adapters <all> --time_to_run 10 | grep GFlops``: every GPU within a few
    percent of the others.
    """
    runs: dict[str, list[GemmResult]] = defaultdict(list)
    for r in obs.get("gemm_results") or []:
        runs[r.source].append(r)
    frac = float(GEMM_PEER_FRACTION.value)
    for source, results in runs.items():
        best: dict[int, GemmResult] = {}
        for r in results:  # an adapter run twice: its best result
            if r.gpu not in best or r.gflops > best[r.gpu].gflops:
                best[r.gpu] = r
        if len(best) < MIN_PEERS + 1:
            continue
        for gpu, r in sorted(best.items()):
            peers = [o.gflops for g, o in best.items() if g != gpu]
            med = statistics.median(peers)
            if med <= 0 or r.gflops >= frac * med:
                continue
            pct = 100 * r.gflops / med
            yield gemm_outlier.finding(
                f"GPU {gpu} reached {r.gflops / 1000:.1f} TFLOPS in ubergemm, {pct:.0f}% of the median "
                f"{med / 1000:.1f} TFLOPS of the {len(peers)} other GPU(s) in the same run: clocked down or "
                "faulty; every collective of a job placed on it waits for it.",
                evidence=[
                    Evidence(f"GPU {gpu}: {r.gflops:.0f} GFlops", source=f"{source}:{r.line}"),
                    Evidence(
                        f"other GPUs: {min(peers):.0f}-{max(peers):.0f} GFlops (median {med:.0f})",
                        source=source,
                    ),
                ],
                confidence=0.8,
                subject=f"GPU {gpu}",
            ).acting(Action.RESET_DEVICE)
