"""Hangs and mismatches: the collective that not every rank joined, the rank behind, and a job that never
communicated (COMM009, COMM012), from watchdog timeouts and desync reports, NCCL COLL opCounts, gloo and
TCPStore failures, Flight Recorder dumps and torchfrtrace reports (:mod:`clusterdoctor.analyze.comm.hangs`).

The reporter is not the culprit: a timeout names the ranks that waited. The culprit is the rank the inputs
say is behind, absent or on another collective (a desync report's "[7] ... didn't join collective", ranks
of the group that did not report the timeout the others report, a lower opCount, a Flight Recorder
dump that stops earlier). COMM014 compares the ranks' tracebacks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Evidence, Finding, Severity
from clusterdoctor.rules.comm_common import comm_analysis
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("py_traceback", "no Python traceback (a job log with the ranks' tracebacks)")


def _busy_suspect(obs: Observations, h: Any) -> Any:
    """The one suspect rank (of a timeout the others report) whose log shows an unfinished progress bar
    (tqdm: data preprocessing, a download): it is still busy in its own work, so it is the one behind.
    None when no suspect, or more than one, shows one."""
    missing = set(h.missing)
    bars: dict[int, Any] = {}
    for b in obs.get("rank_progress") or []:
        if b.rank in missing and b.pct < 100:
            bars[b.rank] = b  # the last bar a rank printed
    return next(iter(bars.values())) if len(bars) == 1 else None


def _hang_subject(h: Any) -> str:
    """What a hang finding is about: the culprit ranks; else the ranks of the group that did not report a
    timeout the others report (the suspects: the reporter is not the culprit); else the reporting ranks;
    else the file."""
    from clusterdoctor.analyze.comm.hangs import ranks_label

    if h.culprit_ranks:
        return ranks_label(h.culprit_ranks)
    if h.missing and len(h.reporters) >= 2:
        return ranks_label(h.missing)
    if h.reporters:
        return ranks_label(h.reporters)
    return h.source


# Incident-corpus cause classes (tests/data/incidents/causes) a hang names, by its kind.
_BEHIND_OR_MISMATCH = ("nccl.rank-behind", "nccl.collective-mismatch")


def _hang_causes(h: Any) -> tuple[str, ...]:
    """The cause classes of a hang: a rank behind or absent, or ranks that called different collectives.
    A watchdog timeout that no rank explains names both (PyTorch's own report speaks of "lagging, dead or
    mismatched ranks"); one that every rank of the group reports names neither (every rank arrived: the
    transport did not move data)."""
    if h.kind == "mismatch":
        return ("nccl.collective-mismatch",)
    if h.kind in ("not_joined", "lagging", "pending", "peer_lost"):
        return ("nccl.rank-behind",) if h.op_kind not in ("desync", "stall") else _BEHIND_OR_MISMATCH
    if h.kind == "timeout":
        if h.group_size and h.reporters and len(h.reporters) >= h.group_size and not h.culprit_ranks:
            return ()
        return _BEHIND_OR_MISMATCH
    return ()


def _hang_role(h: Any) -> str:
    """A timeout that names no culprit and no suspect is the symptom of whatever cause the same run
    shows (an IB error, a GPU fault); with one, it is the finding."""
    if h.kind == "timeout" and not h.culprit_ranks and not h.missing:
        return "symptom"
    return "cause"


def _sorted_locations(locs: Any) -> list[str]:
    def key(loc: str) -> tuple[str, int]:
        path, _, line = loc.rpartition(":")
        return (path, int(line)) if line.isdigit() else (loc, 0)

    return sorted(dict.fromkeys(locs), key=key)


def _line_ranges(locs: list[str], most: int = 6) -> str:
    """``a.log:1, a.log:2, a.log:3, b.log:7`` → ``a.log:1-3, b.log:7`` (at most ``most`` files named)."""
    by_file: dict[str, list[int]] = {}
    plain: list[str] = []
    for loc in locs:
        path, _, line = loc.rpartition(":")
        if path and line.isdigit():
            by_file.setdefault(path, []).append(int(line))
        else:
            plain.append(loc)
    parts = []
    for path, lines in by_file.items():
        runs: list[list[int]] = []
        for n in sorted(set(lines)):
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        parts.append(f"{path}:" + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs))
    parts += plain
    return ", ".join(parts[:most]) + (f" and {len(parts) - most} more files" if len(parts) > most else "")


def _hang_evidence(h: Any) -> list[Evidence]:
    """The collective and the lines it rests on (one entry: how many lines, the first locations),
    then its numbers, culprits last."""
    where = _sorted_locations(h.locations) or [f"{h.source}:{h.line}" if h.line else h.source]
    ev = [
        Evidence("collective", h.op),
        Evidence("log lines it rests on", len(where), source=_line_ranges(where)),
    ]
    ev.append(Evidence("group / sequence", f"{h.group or '?'} / {h.seq if h.seq is not None else '?'}"))
    if h.numel_in is not None:
        ev.append(Evidence("NumelIn / NumelOut", f"{h.numel_in} / {h.numel_out}"))
    if h.timeout_ms is not None:
        ev.append(Evidence("timeout", h.timeout_ms, unit="ms"))
    if h.ran_ms is not None:
        ev.append(Evidence("ran for", h.ran_ms, unit="ms"))
    if h.last_completed is not None:
        ev.append(Evidence("last enqueued / last completed work", f"{h.last_enqueued} / {h.last_completed}"))
    if h.group_size is not None:
        ev.append(Evidence("ranks in the group", h.group_size))
    if h.reporters:
        ev.append(Evidence("ranks reporting it", list(h.reporters)))
    if h.missing:
        ev.append(Evidence("ranks of the group not reporting it", list(h.missing)))
    if h.culprit_ranks:
        ev.append(Evidence("culprit ranks", list(h.culprit_ranks)))
    return ev


_GLOO_VERIFY = [
    "rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: gloo then checks each collective with a monitored barrier "
    "and names the rank that did not arrive (`Ranks 1 failed to pass monitoredBarrier`)",
    "`py-spy dump --pid PID` on the suspected rank while the job hangs",
]


@rule(
    id="COMM009",
    name="collective-hang-or-mismatch",
    layer="comm",
    title="Collective hang or mismatch: a rank behind, absent or on another collective",
    requires=("comm",),
    severity=Severity.CRITICAL,
)
def hang(obs: Observations) -> Iterator[Finding]:
    """A collective that not every rank joined, ranks behind on a communicator, or ranks calling different collectives.

    **Symptom**: the job stops making progress, then ``Watchdog caught collective operation timeout``
    after ``Timeout(ms)`` (default 10–30 min) on every rank, or gloo's ``Timed out waiting …ms for recv
    operation``; or wrong results/crashes after a mismatch.
    **Why**: a collective completes only when all ranks of its group call it with the same type, size
    and dtype. A rank that crashed, took another code path (an extra ``all_reduce`` on rank 0 only),
    or is stuck in data loading never arrives; the others wait until the watchdog fires. The ranks
    that report the timeout are the victims; the culprit is the rank missing from the collective
    (torchrun's "Root Cause (first observed failure)" names the first victim, not the culprit).
    **Fix**: look at the culprit rank's log and stack (Flight Recorder ``frames``, ``py-spy dump``) for
    the divergent code path or error; make collectives unconditional across ranks.
    **Verify**: rerun with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=true, and after
    the next hang run `torchfrtrace --prefix nccl_trace_rank_ /tmp/`.
    """
    a = comm_analysis(obs)
    first = {h.group for h in a.hangs if h.first_collective or h.kind == "rendezvous"}
    explained = {h.group for h in a.hangs if h.kind != "pending"}
    for h in a.hangs:
        if h.first_collective or h.kind == "rendezvous":
            continue  # COMM012: the job never communicated
        if h.kind == "pending" and (h.group in explained or h.group in first):
            continue  # the unfinished work is the stuck collective another finding already names
        sev = Severity.CRITICAL if h.kind in ("not_joined", "lagging", "timeout") else Severity.WARNING
        if h.kind == "mismatch" and h.culprit_ranks:
            sev = Severity.CRITICAL
        subject = _hang_subject(h)
        label = {
            "not_joined": "never joined",
            "lagging": "is behind",
            "mismatch": "called a different collective" if h.culprit_ranks else "disagree on the collective",
            "timeout": "timed out" if not h.culprit_ranks else "never arrived",
            "pending": "left work unfinished",
            "peer_lost": "lost a peer",
        }.get(h.kind, h.kind)
        gloo = (h.op or "").startswith("gloo")
        partial = ""
        if h.partial:
            sev = min(sev, Severity.WARNING)
            partial = ". From a partial input: a trace of this job is truncated."
        busy = None
        if h.kind == "timeout" and not h.culprit_ranks and h.missing and len(h.reporters) >= 2:
            label = "did not report the timeout the others report (the suspects)"
            busy = _busy_suspect(obs, h)
            if busy is not None:
                subject = f"rank {busy.rank}"
                label = (
                    f"is still busy in its own work ('{busy.desc[:60]}' at {busy.pct}%, {busy.left} left by "
                    "its progress bar) while the others time out; no other suspect shows one"
                )
        f = hang.finding(
            (h.detail if h.detail.startswith(subject) else f"{subject} {label}: {h.detail}") + partial,
            evidence=_hang_evidence(h),
            severity=sev,
            confidence=0.9 if h.culprit_ranks else 0.75 if busy is not None else 0.6,
            subject=subject,
            verify=_GLOO_VERIFY if gloo and not h.culprit_ranks else None,
            causes=("nccl.rank-behind",) if busy is not None else _hang_causes(h),
        )
        f.role = _hang_role(h)
        yield f


@rule(
    id="COMM012",
    name="first-collective-never-completed",
    layer="comm",
    title="The job never communicated: the first collective (or the rendezvous) never completed",
    requires=("comm",),
    severity=Severity.CRITICAL,
)
def first_collective(obs: Observations) -> Iterator[Finding]:
    """The watchdog fired on a process group's first collective (``last completed work: -1`` or
    SeqNum 1), or the process group never formed (TCPStore/rendezvous timeout).

    **Symptom**: the job hangs right after start-up (model loaded, DDP/FSDP being wrapped, the first
    barrier) and dies after the full collective timeout (10–30 min) with
    ``WorkNCCL(SeqNum=1, …)`` and ``last completed work: -1``, or with ``wait timeout after …ms, keys: …``
    / ``clients joined`` while creating the process group.
    **Why**: no collective ever completed, so this is not a slow step. A first collective that is a
    1-element ALLREDUCE is ``dist.barrier()``: run before any rank bound its GPU, it lands on a guessed
    device (cuda:0 on every rank) and hangs (pytorch#134617; yiqiao-yin/deepspeed-course#17). Otherwise: either a rank never arrived (not
    started, crashed, stuck before its first collective, cannot reach the store), or every rank arrived
    and the transport never moved data — rendezvous, topology or network: NCCL picked a broken path
    (P2P/CUMEM across PCIe roots, an IB port or fabric that drops RDMA, the wrong socket interface), or
    the store address (MASTER_ADDR/MASTER_PORT) is unreachable from some hosts.
    **Fix**: if ranks are missing, look at their hosts and logs first. If every rank reported the timeout,
    debug the transport: rerun with ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,P2P`` and check that every
    rank printed ``Init COMPLETE`` and which ``via …`` paths it chose; test the path with nccl-tests on the
    same hosts; try ``NCCL_P2P_DISABLE=1`` (intra-node) or ``NCCL_IB_DISABLE=1`` (inter-node) to confirm
    which layer is broken, then fix it (ACS/IOMMU for P2P, the IB port, ``NCCL_SOCKET_IFNAME``). Enable the
    Flight Recorder (``TORCH_NCCL_TRACE_BUFFER_SIZE=2000``, ``TORCH_NCCL_DUMP_ON_TIMEOUT=1``) so the next
    hang names the ranks, and lower the timeout while debugging.
    **Verify**: `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,P2P TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 torchrun ...`
    then `torchfrtrace --prefix nccl_trace_rank_ /tmp/`, and `all_reduce_perf -b 8 -e 128M -f 2 -g 1` across
    the same hosts (every rank must reach "Init COMPLETE").
    """
    a = comm_analysis(obs)
    for h in a.hangs:
        if not (h.first_collective or h.kind == "rendezvous"):
            continue
        subject = _hang_subject(h)
        if h.kind == "rendezvous":
            what = "the process group never formed"
        elif h.last_completed is not None and h.last_completed < 0:
            what = "the very first collective never completed (last completed work: -1)"
        else:
            what = "the first collective of the group (SeqNum 1) never completed"
        if h.culprit_ranks:
            cause = f"{ranks_label_of(h.culprit_ranks)} never arrived"
        elif h.missing:
            cause = f"{ranks_label_of(h.missing)} did not report it: check that they started and reached it"
        elif h.group_size and len(h.reporters) == h.group_size:
            cause = "every rank arrived, so the transport did not move data: rendezvous, topology or network"
        else:
            cause = "rendezvous, topology, network or a rank that never arrived — not a slow step"
        if _is_barrier(h) and not h.culprit_ranks:
            cause += (
                "; it is a barrier (a 1-element ALLREDUCE): before any rank binds its GPU, torch runs it on a "
                "guessed device (cuda:0 on every rank, or global rank % GPUs), so bind it first "
                "(torch.cuda.set_device(LOCAL_RANK), init_process_group(device_id=...) or "
                "barrier(device_ids=[LOCAL_RANK]))"
            )
        yield first_collective.finding(
            f"{subject}: {what}; {cause}. {h.detail}.",
            evidence=_hang_evidence(h),
            confidence=0.9 if (h.culprit_ranks or h.last_completed is not None) else 0.75,
            subject=subject,
            causes=_first_collective_causes(h),
        )


def _first_collective_causes(h: Any) -> tuple[str, ...]:
    """A process group that never formed: the rendezvous (and, when fewer ranks joined than the world
    size, a world size that is not the number of processes launched); a first collective that never
    completed: a rank that never arrived, or, when every rank arrived, the path NCCL chose."""
    if h.kind == "rendezvous":
        if h.group_size is not None:
            return ("torch.rendezvous", "torch.world-size-mismatch")
        return ("torch.rendezvous",)
    if h.culprit_ranks or h.missing:
        return ("nccl.rank-behind",)
    barrier = ("nccl.duplicate-gpu",) if _is_barrier(h) else ()
    if h.group_size and len(h.reporters) >= h.group_size:
        return ("nccl.p2p-unsupported", "nccl.ib-connect", *barrier)
    return ("nccl.rank-behind", "nccl.p2p-unsupported", *barrier)


def _is_barrier(h: Any) -> bool:
    """The stuck first collective is ``dist.barrier()``: ProcessGroupNCCL runs it as an ALLREDUCE of one
    element on a device it must pick; with none bound yet it guesses one (rank % local GPUs before
    pytorch#134617, the current device, cuda:0 unless set_device ran, in distributed_c10d), and
    ranks that guess the same GPU or a GPU another rank's NCCL context does not expect hang there."""
    return (h.op or "").upper() == "ALLREDUCE" and h.numel_in == 1 and h.numel_out in (1, None)


def ranks_label_of(ranks: Any) -> str:
    from clusterdoctor.analyze.comm.hangs import ranks_label

    return ranks_label(ranks)


@rule(
    id="COMM014",
    name="tracebacks-in-different-collectives",
    layer="comm",
    title="Ranks' tracebacks stop in different collectives",
    requires=("py_traceback",),
    severity=Severity.CRITICAL,
    causes=("nccl.collective-mismatch",),
)
def tracebacks_in_different_collectives(obs: Observations) -> Iterator[Finding]:
    """The tracebacks of different ranks end in different ``torch.distributed`` collectives.

    **Symptom**: the job hangs (or fails on a mismatch check) and the ranks' tracebacks, dumped on the
    timeout or by ``py-spy``, show one rank in ``broadcast`` while the others are in ``barrier`` or
    ``all_reduce``.
    **Why**: a collective completes only when every rank of the group enters the same one; ranks that took
    different code paths (a collective under ``if rank == 0``, metrics logged with different keys per
    rank, a data-dependent branch) wait in different collectives for ever.
    **Fix**: make the sequence of collectives identical on every rank; the traceback of the odd rank shows
    the call that diverged.
    **Verify**: `TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...` (PyTorch then reports the first mismatched
    collective with both ranks' fingerprints).
    """
    by_rank: dict[int, tuple[str, Any, str]] = {}
    for log in obs.get("py_traceback") or []:
        for tb in log.tracebacks:
            c = tb.innermost_collective
            if c is None or tb.rank is None or tb.rank in by_rank:
                continue  # only tracebacks of known, distinct ranks are compared (chained ones repeat)
            by_rank[tb.rank] = (c, tb, log.path)
    calls: dict[str, list[int]] = {}
    for rank, (c, _tb, _p) in sorted(by_rank.items()):
        calls.setdefault(c, []).append(rank)
    if len(calls) < 2:
        yield from _interleaved_in_different_collectives(obs)
        return
    from clusterdoctor.analyze.comm.hangs import ranks_label

    groups = sorted(calls.items(), key=lambda kv: (len(kv[1]), kv[1]))
    odd = groups[0][1] if len(groups[0][1]) < len(groups[-1][1]) else []
    detail = "; ".join(f"{ranks_label(r)} in {c}" for c, r in sorted(calls.items()))
    yield tracebacks_in_different_collectives.finding(
        f"the ranks' tracebacks stop in different collectives: {detail}",
        evidence=[
            Evidence(f"{ranks_label([rank])} traceback", c, source=f"{p}:{tb.line}")
            for rank, (c, tb, p) in sorted(by_rank.items())[:8]
        ],
        subject=ranks_label(odd) if odd else ranks_label(sorted(by_rank)),
        confidence=0.8,
    )


def _interleaved_in_different_collectives(obs: Observations) -> Iterator[Finding]:
    """Tracebacks without rank prefixes whose lines hold two leaf collectives: one process's stack is in
    at most one, so these are several processes' tracebacks interleaved, stuck in different collectives."""
    for log in obs.get("py_traceback") or []:
        for tb in log.tracebacks:
            leaves = sorted(tb.leaf_collectives)
            if tb.rank is not None or len(leaves) < 2:
                continue
            yield tracebacks_in_different_collectives.finding(
                "the interleaved tracebacks of several processes (no rank prefix) stop in different "
                f"collectives: {', '.join(leaves)}; one process's stack is in at most one",
                evidence=[
                    Evidence(
                        "collectives in one run of traceback lines",
                        ", ".join(leaves),
                        source=f"{log.path}:{tb.line}",
                    ),
                    Evidence("ranks", "not printed: add TORCH_DISTRIBUTED_DEBUG=DETAIL or a rank prefix"),
                ],
                confidence=0.6,
            )
            return
