"""GPU health rules: Xid/SXid events, memory errors, clock throttling, NVLink, PCIe, DCGM results.

Input: the joined fleet (:func:`clusterdoctor.analyze.gpu_health.gpu_fleet`) of everything GPU the
diagnosis was given — ``nvidia-smi -q``/``-x``/``--query-gpu``, kernel logs, ``nvidia-smi nvlink``,
``lspci -vv``, sysfs links, ``dcgmi``, live NVML and dcgm-exporter series. Each rule reads only the
facts it needs; a GPU whose sources do not state them is not judged (the health grid shows it as
unknown), and a rule for which no GPU states them is skipped with the reason (derived kinds below).

Every finding names the GPU (index, bus id, UUID when known), its node, the rank or pod that uses
it when known, what it costs and how to verify. References: reference/gpu-health.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import clusterdoctor.rules.gpu_gemm  # GPU023 registers with the GPU rules
import clusterdoctor.rules.gpu_recovery
import clusterdoctor.rules.gpu_versions  # noqa: F401 (GPU022 registers with the GPU rules)
from clusterdoctor.analyze.gpu_health import GPU_CHECKS, UNNAMED
from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.gpu_clocks import REASON_TEXT, clock_reason, sm_clock_low
from clusterdoctor.rules.gpu_common import _fleet, node_name
from clusterdoctor.rules.gpu_dcgm import dcgm_diag, dcgm_health
from clusterdoctor.rules.gpu_memory import (
    correctable_rising,
    ecc_uncorrectable,
    remap_failure,
    remap_pending,
    retired_pages,
)
from clusterdoctor.rules.gpu_nvlink import fabric_not_ready, nvlink_down, nvlink_errors
from clusterdoctor.rules.gpu_pcie import lane_errors, no_driver, pcie_degraded, pcie_replays
from clusterdoctor.rules.gpu_xid import gpu_lost, gpu_xid
from clusterdoctor.rules.registry import Observations, rule

LAYER = "gpu"

# -- joined to the communication and fail-slow layers ---------------------------------------------------

# the rules that judge one GPU (or one node's GPUs); GPU019 and the fail-slow rules join their findings
PER_GPU_RULES = (
    gpu_xid, gpu_lost, ecc_uncorrectable, remap_pending, remap_failure, retired_pages,
    correctable_rising, clock_reason, sm_clock_low, nvlink_down, nvlink_errors,
    pcie_degraded, pcie_replays, lane_errors, no_driver, dcgm_diag, dcgm_health, fabric_not_ready,
)  # fmt: skip
# What acting on each rule's finding takes, when the finding does not say (the ranking's tie-break:
# of two findings with the same score, the one that needs the GPU reset or the board replaced leads)
DEFAULT_ACTIONS: dict[str, Action] = {
    "GPU001": Action.RESET_DEVICE,
    "GPU002": Action.REBOOT_NODE,
    "GPU003": Action.RESET_DEVICE,
    "GPU004": Action.RESET_DEVICE,
    "GPU005": Action.RESET_DEVICE,
    "GPU006": Action.REPLACE_HARDWARE,
    "GPU007": Action.REBOOT_NODE,
    "GPU008": Action.OBSERVE,
    "GPU009": Action.REPLACE_HARDWARE,
    "GPU010": Action.CONFIGURE,
    "GPU011": Action.RESET_DEVICE,
    "GPU012": Action.OBSERVE,
    "GPU013": Action.REPLACE_HARDWARE,
    "GPU014": Action.OBSERVE,
    "GPU015": Action.OBSERVE,
    "GPU016": Action.CONFIGURE,
    "GPU017": Action.RESET_DEVICE,
    "GPU018": Action.OBSERVE,
    "GPU020": Action.RESTART_SERVICE,
}


def _default_action(r: Any) -> None:
    """Give the findings of rule ``r`` its :data:`DEFAULT_ACTIONS` entry unless they name their own."""
    import functools

    fn, action = r.fn, DEFAULT_ACTIONS[r.id]

    @functools.wraps(fn)
    def acting(obs: Observations) -> Iterator[Any]:
        for x in fn(obs):
            if isinstance(x, Finding) and x.action == Action.NONE:
                x.action = action
            yield x

    r.fn = acting


for _r in PER_GPU_RULES:
    _default_action(_r)

_CHECK_OF_RULE = {rid: cid for cid, _t, rules in GPU_CHECKS for rid in rules}
# which GPU faults can make a rank of each fail-slow class slow (a data-loader straggler: none)
CAUSE_CHECKS: dict[str, tuple[str, ...]] = {
    "compute": ("xid", "memory", "clocks", "nvlink", "pcie", "dcgm"),
    "communication": ("nvlink", "pcie"),
    "silent": ("xid", "memory", "dcgm"),
    "data": (),
    "job": (),
}


def judged_gpu_findings(obs: Observations) -> list[Finding]:
    """The per-GPU rules' findings at warning or above (computed once per Observations)."""
    cached = obs.get("_gpu_judged")
    if cached is not None:
        return cached
    judged: list[Finding] = []
    if obs.has("gpu_health"):
        for r in PER_GPU_RULES:
            if all(obs.has(k) for k in r.requires):
                judged.extend(x for x in r.fn(obs) if x.severity >= Severity.WARNING)
    obs.put("_gpu_judged", judged)
    return judged


def fault_phrase(f: Finding) -> str:
    """A GPU finding in a few words: the active throttle reasons for GPU009, else its title."""
    if f.rule == "GPU009":
        ev = next((e for e in f.evidence if e.description == "active clock event reasons"), None)
        names = [n.strip() for n in str(ev.value).split(",")] if ev is not None else []
        short = [REASON_TEXT[n].split(" (")[0] for n in names if n in REASON_TEXT]
        if short:
            return ", ".join(short) + " active"
    return f.title[:1].lower() + f.title[1:]


class RankGpuHealth:
    """What the GPU data says about one rank's GPU: the GPUs tied to it, the findings on them (or on
    its whole node), and one evidence line. Empty (``known`` False) when no GPU source covers it."""

    def __init__(self, obs: Observations, host: str | None, gpu: Any, job_hosts: set[str]) -> None:
        from clusterdoctor.analyze.gpu_health import coverage, gpus_of_rank

        self.host, self.gpu = host, gpu
        fleet = _fleet(obs)
        tie = gpus_of_rank(fleet, host, gpu, job_hosts)
        self.node, self.match, self.note = tie.node, tie.match, tie.note
        self.gpus = tie.gpus
        self.labels = [g.label() for g in tie.gpus]
        self.node_labels = [g.label() for g in tie.node_gpus] + (
            [node_name(tie.node or None)] if tie.node is not None else []
        )
        judged = judged_gpu_findings(obs)
        own = set(self.labels) | ({node_name(tie.node or None)} if tie.node is not None else set())
        scope = own if tie.match == "gpu" else set(self.node_labels)
        self.faults = sorted(
            (f for f in judged if f.subject in scope), key=lambda f: (-int(f.severity), -f.score, f.rule)
        )
        self.known = tie.match is not None
        where = f"GPU{gpu}" if tie.match == "gpu" else "its GPU"
        self.title = f"{where} on this host" if tie.match == "gpu" else "GPUs of this host"
        if not self.known:
            self.text = f"not checked: no GPU source for host {host or '?'}"
        elif self.faults:
            self.text = "; ".join(f"{fault_phrase(f)} ({f.rule}, {f.subject})" for f in self.faults[:4])
        elif tie.match == "gpu":
            cov = coverage(tie.gpus[0], fleet)
            ok = [c for c, v in cov.items() if v == "ok"]
            unk = [c for c, v in cov.items() if v == "unknown"]
            self.text = f"{self.labels[0]}: no fault in {', '.join(ok) or 'nothing stated'}" + (
                f"; not exported: {', '.join(unk)}" if unk else ""
            )
        else:
            self.text = (
                f"no GPU{gpu} in the GPU sources of {node_name(tie.node or None)}"
                if gpu_index_known(gpu)
                else f"its GPU is not known (probe label {gpu!r}); no GPU fault on {node_name(tie.node or None)}"
            )

    def causes(self, kind: str) -> list[Finding]:
        """The findings that can make a rank of fail-slow class ``kind`` slow."""
        checks = CAUSE_CHECKS.get(kind, ())
        return [f for f in self.faults if _CHECK_OF_RULE.get(f.rule) in checks]


def gpu_index_known(gpu: Any) -> bool:
    from clusterdoctor.analyze.gpu_health import gpu_index

    return gpu_index(gpu) is not None


def rank_gpu_health(obs: Observations, rank: int) -> RankGpuHealth | None:
    """:class:`RankGpuHealth` of ``rank`` of the fail-slow table (its host and GPU as the probe
    recorded them), or None without GPU data or without the rank's identity."""
    table = obs.get("watch")
    if table is None or not obs.has("gpu_health"):
        return None
    ident = table.identities.get(rank)
    if ident is None:
        return None
    cache = obs.get("_rank_gpu_health")
    if cache is None:
        cache = {}
        obs.put("_rank_gpu_health", cache)
    if rank not in cache:
        hosts = {i.host for i in table.identities.values() if i.host}
        cache[rank] = RankGpuHealth(obs, ident.host, ident.gpu, hosts)
    return cache[rank]


def failslow_symptom(ep: Any, table: Any) -> tuple[str, str, str]:
    """(fail-slow rule, what the rank does, what it costs the others) of a detector episode."""
    kind = ep.periodic_of if ep.kind == "periodic" else ep.kind
    rule_id = {"compute": "FS001", "communication": "FS002", "data": "FS003"}.get(kind, "FS001")
    if ep.kind == "periodic":
        rule_id = "FS005"
    late = ep.detail.get("lateness_s")
    if kind == "communication":
        what = f"its transfers are slow since step {ep.onset_step}"
        cost = f"every collective of the job is {ep.factor:.2f}x slower"
    else:
        what = f"finishes its own work late since step {ep.onset_step}" + (
            f", {late * 1000:.1f} ms a step" if late else ""
        )
        cost = f"every other rank waits for it; the job is {ep.factor:.2f}x slower"
    return rule_id, what, cost


@rule(
    id="GPU019",
    name="gpu-fault-on-straggler-rank",
    layer=LAYER,
    title="A sick GPU is why a rank straggles",
    requires=("gpu_health",),
    requires_any=("kineto", "watch"),
    severity=Severity.CRITICAL,
)
def straggler_gpu(obs: Observations) -> Iterator[Finding]:
    """The rank named as the straggler — by the trace analysis (COMM007) or by the fail-slow detector
    (FS001 compute, FS002 localised link, FS005 periodic, FS006 silent) — runs on a GPU, or node, with
    a GPU finding that can cause it.

    **Symptom**: one rank starts most collectives last (or its transfers are slow, or it stopped);
    every other rank waits for it; the job's step time follows that rank.
    **Why**: a throttled, erroring or degraded GPU computes its part of the step slower (a bad PCIe or
    NVLink link moves its data slower; an Xid stops it); the collective cannot complete until it
    arrives. The GPU finding is the cause, the straggler the symptom.
    **Fix**: act on the GPU finding named (drain/reset/RMA, fix cooling or power); meanwhile exclude that
    GPU or node from the job (e.g. ``CUDA_VISIBLE_DEVICES`` or a node taint) so the others stop waiting.
    **Verify**: `clusterdoctor comm analyze TRACE_DIR` or `clusterdoctor watch --from DIR --gpu FILES`
    after the fix (the straggler is gone) and `nvidia-smi -q -d PERFORMANCE,ECC,ROW_REMAPPER` on that node.
    """
    judged = judged_gpu_findings(obs)
    if obs.has("kineto"):
        yield from _comm_straggler_gpu(obs, judged)
    if obs.has("watch"):
        yield from _failslow_straggler_gpu(obs)


def _comm_straggler_gpu(obs: Observations, judged: list[Finding]) -> Iterator[Finding]:
    from clusterdoctor.analyze.correlate import gpu_cause_chain
    from clusterdoctor.rules.comm import STRAGGLER_MIN_LATE, STRAGGLER_SHARE, comm_analysis

    a = comm_analysis(obs)
    f = _fleet(obs)
    for s in a.stragglers[:1]:
        if s.matched < 3 or s.late_count / s.matched < float(STRAGGLER_SHARE.value):
            continue
        if s.mean_late_us < float(STRAGGLER_MIN_LATE.value):
            continue
        rank_gpus = [g for g in f.gpus if str(s.rank) in g.ranks]
        nodes = {g.node or UNNAMED for g in rank_gpus}
        if not nodes and len(f.nodes()) == 1:
            nodes = set(f.nodes())  # one node described: the rank's node
        node_gpus = [g for g in f.gpus if (g.node or UNNAMED) in nodes]
        labels = [g.label() for g in rank_gpus]
        node_labels = [g.label() for g in node_gpus] + [node_name(n or None) for n in nodes]
        chain = gpu_cause_chain(s, judged, labels, node_labels)
        if chain is None:
            continue
        worst = max(
            (x for x in judged if x.subject in {c[0] for c in chain.causes}), key=lambda x: x.severity
        )
        yield straggler_gpu.finding(
            f"rank {s.rank} is the straggler and "
            + ("its GPU" if chain.match == "gpu" else "its node")
            + f" is sick: {chain.describe()}.",
            evidence=[
                Evidence(
                    "straggler (COMM007)", f"rank {s.rank}: last in {s.late_count} of {s.matched} collectives"
                ),
                Evidence("mean lateness", round(s.mean_late_us, 1), float(STRAGGLER_MIN_LATE.value), "µs"),
                *[Evidence("cause", f"{rule} {title}", source=subj) for subj, title, rule, _ in chain.causes],
                Evidence("evidence chain", chain.describe()),
            ],
            severity=worst.severity,
            subject=f"rank {s.rank}",
            confidence=0.8 if chain.match == "gpu" else 0.6,
            causes=worst.causes,
        )


def failslow_gpu_chain(obs: Observations, rank: int, kind: str, symptom: str, cost: str) -> Any:
    """The GPU cause chain of a fail-slow straggler of class ``kind`` (None when no GPU finding on its
    GPU or node can cause that class), with the rank's :class:`RankGpuHealth`."""
    from clusterdoctor.analyze.correlate import rank_cause_chain

    h = rank_gpu_health(obs, rank)
    if h is None or not h.known:
        return None, h
    causes = h.causes(kind)
    labels = h.labels if h.match == "gpu" else []
    node_labels = [node_name(h.node or None)] if h.match == "gpu" else h.node_labels
    return rank_cause_chain(rank, symptom, cost, causes, labels, node_labels), h


def _failslow_straggler_gpu(obs: Observations) -> Iterator[Finding]:
    from clusterdoctor.rules.failslow import failslow_analysis

    res = failslow_analysis(obs)
    table = obs.get("watch")
    items: list[tuple[int, str, str, str, str, Any]] = []
    for ep in res.episodes:
        if ep.rank is None:
            continue
        kind = ep.periodic_of if ep.kind == "periodic" else ep.kind
        rule_id, what, cost = failslow_symptom(ep, table)
        items.append((ep.rank, kind or "", rule_id, what, cost, ep.confidence))
    for s in res.silent:
        items.append(
            (s.rank, "silent", "FS006", f"stopped reporting after step {s.last_step}", "the job waits", 0.9)
        )
    seen: set[int] = set()
    for rank, kind, rule_id, what, cost, conf in items:
        if rank in seen:
            continue
        chain, h = failslow_gpu_chain(obs, rank, kind, what, cost)
        if chain is None:
            continue
        seen.add(rank)
        worst = max(
            (x for x in h.faults if x.subject in {c[0] for c in chain.causes}), key=lambda x: x.severity
        )
        yield straggler_gpu.finding(
            f"rank {rank} is the straggler ({rule_id}) and "
            + ("its GPU" if chain.match == "gpu" else "a GPU of its node")
            + f" is sick: {chain.describe()}.",
            evidence=[
                Evidence(f"straggler ({rule_id})", f"rank {rank}: {what}"),
                *([Evidence("how the rank was tied to the GPU data", h.note)] if h.note else []),
                *[Evidence("cause", f"{rl} {title}", source=subj) for subj, title, rl, _ in chain.causes],
                Evidence("evidence chain", chain.describe()),
            ],
            severity=worst.severity,
            subject=f"rank {rank}",
            confidence=round(min(conf, 0.8 if chain.match == "gpu" else 0.6), 3),
            fix=worst.fix
            + " Meanwhile take that GPU or node out of the job so the other ranks stop waiting.",
            verify=[*worst.verify, "clusterdoctor watch --from <dir> --gpu <files> --once"],
            causes=worst.causes,
        )
