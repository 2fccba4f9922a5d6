"""Ranks that NCCL connects as one node's although they use the same GPU: two machines taken for one.

Read from NCCL's transport lines (:mod:`clusterdoctor.observe.comm.nccl_log`): ``Channel 00/0 : 6[6] ->
10[2] via P2P/IPC`` (``Ring 00 : ...`` before 2.4). The number in brackets is the rank's GPU (its
cudaDev; the bus id in NCCL 2.12-2.18). P2P and SHM connect ranks NCCL believes are on one node (same
host hash: the hostname, cut at the first dot before NCCL 2.4, or NCCL_HOSTID). Within one node every
rank has its own GPU, so two ranks joined by P2P/SHM connections that print the same GPU are on two
machines NCCL took for one (the GPU number repeats on the second machine), or two processes of one
machine were given one GPU (which NCCL 2.5+ refuses with "Duplicate GPU detected").
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.registry import Observations, rule

_LOCAL = ("P2P", "SHM")


def _find(parent: dict[int, int], x: int) -> int:
    while parent.setdefault(x, x) != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@rule(
    id="COMM020",
    name="local-transport-between-ranks-on-one-gpu",
    layer="comm",
    title="NCCL connects ranks on the same GPU number as one node's (two machines taken for one)",
    requires=("nccl_log",),
    severity=Severity.CRITICAL,
    causes=("nccl.same-hostname", "nccl.duplicate-gpu"),
)
def local_peers_on_one_gpu(obs: Observations) -> Iterator[Finding]:
    """Two ranks with the same GPU among one node's ranks (one host's, or joined by P2P/SHM lines).

    **Symptom**: ``unhandled cuda error`` or a hang at the first collective of a multi-node job;
    NCCL's ring lines show ``via P2P/IPC`` (or ``SHM``) to ranks that live on the other machine.
    **Why**: NCCL treats ranks with the same host hash as one node and connects them through GPU
    peer memory or host shared memory, which does not reach another machine. The hash is the
    hostname (cut at the first dot before NCCL 2.4: ``node1.a`` and ``node1.b`` collide), or
    NCCL_HOSTID; cloned machines and containers with one hostname collide too. Or two ranks of
    one machine were pinned to one GPU.
    **Fix**: give every machine a distinct hostname (or NCCL_HOSTID), upgrade an NCCL older than
    2.4; set each rank's device from its local rank (``torch.cuda.set_device(local_rank)``).
    **Verify**: `hostname -f` on each machine; with NCCL_DEBUG=INFO the cross-machine connections read
    ``via NET/...`` and each node's ranks print distinct GPUs.
    """
    for log in obs.get("nccl_log") or []:
        per_proc: dict[object, set[str]] = {}
        for comm, proc in log.comms:
            per_proc.setdefault(proc, set()).add(comm)
        if any(len(c) > 1 for c in per_proc.values()):
            continue  # several communicators: rank numbers are per communicator, not comparable
        # the ranks of one node as NCCL sees it: those a host's processes print and reach by P2P/SHM (a
        # line's host is the host hash NCCL compares); without a host prefix, ranks joined by such lines
        parent: dict[int, int] = {}
        gpu: dict[tuple[object, int], str] = {}
        lines: dict[int, int | None] = {}
        for t in log.transports:
            if t.kind not in _LOCAL or t.src_dev is None or t.dst_dev is None or t.src == t.dst:
                continue
            a, b = _find(parent, t.src), _find(parent, t.dst)
            if a != b:
                parent[a] = b
        for t in log.transports:
            if t.kind not in _LOCAL or t.src_dev is None or t.dst_dev is None or t.src == t.dst:
                continue
            node: object = t.proc.host if t.proc is not None else ("joined", _find(parent, t.src))
            for r, d in ((t.src, t.src_dev), (t.dst, t.dst_dev)):
                if gpu.setdefault((node, r), d) != d:
                    gpu[(node, r)] = ""  # one rank printed with two GPUs: not one communicator, not judged
                lines.setdefault(r, t.line)
        by_gpu: dict[tuple[object, str], list[int]] = {}
        for (node, r), d in gpu.items():
            if d:
                by_gpu.setdefault((node, d), []).append(r)
        clashes = sorted((sorted(rs), d) for (_, d), rs in by_gpu.items() if len(rs) > 1)
        if not clashes:
            continue
        ranks, dev = clashes[0]
        at = lines.get(ranks[-1])
        where = f"{log.path}:{at}" if at else log.path
        hosts = sorted(log.hosts)
        f = local_peers_on_one_gpu.finding(
            f"ranks {', '.join(map(str, ranks))} print GPU [{dev}] yet NCCL joins them by P2P/SHM as one "
            f"node's (host {', '.join(hosts[:3]) or '?'}): they run on different machines that NCCL takes "
            "for one (same hostname or host hash), or share one GPU.",
            evidence=[
                Evidence(
                    f"GPU [{d}]: ranks {', '.join(map(str, rs))} in one P2P/SHM group",
                    len(rs),
                    1,
                    source=where,
                )
                for rs, d in clashes[:4]
            ],
            severity=Severity.CRITICAL,
            subject=f"ranks {ranks[0]} and {ranks[1]}",
            confidence=0.75,
        )
        f.action = Action.CONFIGURE
        yield f
