"""NCCL of different versions across the nodes (or environments) of one job.

Every rank of a communicator must run the same NCCL: its bootstrap and connection messages change between
releases, so ranks of two versions fail at init with errors that name neither version (``ncclSocketInit
... family``, ``unhandled system error``, a hang). The NCCL troubleshooting guide and the threads that
find it ("installing the same NCCL version on all machines fixed it") check the versions first.

What the inputs say about versions: ``pip freeze`` / ``pip list`` listings, one per node
(:mod:`clusterdoctor.observe.comm.pip_freeze`: the ``nvidia-nccl-cu*`` wheel that PyTorch loads, or a
``nccl`` package), and NCCL logs (``NCCL version 2.21.5+cuda12.4``, one per file).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("python_packages", "no pip freeze / pip list output")

_NCCL_PKG = re.compile(r"^(?:nvidia-nccl(?:-cu\d{1,3})?|nccl|libnccl\d?)$")


def _versions(obs: Observations) -> dict[str, dict[str, list[str]]]:
    """package -> version -> the inputs that show it (listings per package; NCCL logs as "NCCL")."""
    out: dict[str, dict[str, list[str]]] = {}
    for lst in obs.get("python_packages") or []:
        for name, ver in lst.packages.items():
            if _NCCL_PKG.match(name):
                out.setdefault(name, {}).setdefault(ver, []).append(lst.path)
    # NCCL logs: only those of different hosts (one host's logs of two versions are a before and an after)
    logs = [
        (log.version.split("+")[0], log) for log in obs.get("nccl_log") or [] if getattr(log, "version", None)
    ]
    hosts: dict[str, set[str]] = {}
    for ver, log in logs:
        hosts.setdefault(ver, set()).update(log.hosts)
    if len(hosts) > 1 and all(hosts.values()):
        vers = list(hosts)
        if all(not (hosts[a] & hosts[b]) for i, a in enumerate(vers) for b in vers[i + 1 :]):
            for ver, log in logs:
                out.setdefault("NCCL", {}).setdefault(ver, []).append(log.path)
    return out


@rule(
    id="COMM016",
    name="nccl-version-differs-across-nodes",
    layer="comm",
    title="NCCL versions differ between the nodes of the job",
    requires=(),
    requires_any=("python_packages", "nccl_log"),
    severity=Severity.CRITICAL,
    causes=("nccl.version-mismatch",),
)
def nccl_version_differs(obs: Observations) -> Iterator[Finding]:
    """The inputs of one job show two or more NCCL versions (pip listings per node, NCCL logs per node).

    **Symptom**: init fails or hangs between some nodes with errors that do not say why (``ncclSocketInit:
    connecting to address with family N``, ``unhandled system error``, ``Message truncated``), while each
    node alone works.
    **Why**: ranks of one communicator exchange NCCL's internal structures at bootstrap and connect
    time; their layout changes between releases, so ranks of two versions misread each other. A node
    with another ``nvidia-nccl-cu12`` wheel (a pip upgrade on one node, another image) is the usual cause.
    **Fix**: install one NCCL version on every node (the same ``nvidia-nccl-cu12==X`` wheel, or the same
    container image), and check that the process loads it (``NCCL version`` in the NCCL_DEBUG=INFO log).
    **Verify**: `pip freeze | grep nccl` on every node, and `NCCL_DEBUG=VERSION python train.py` (its "NCCL version" line).
    """
    for pkg, by_ver in sorted(_versions(obs).items()):
        if len(by_ver) < 2:
            continue
        ranked = sorted(by_ver.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        odd = ranked[-1] if len(ranked[-1][1]) < len(ranked[0][1]) else None
        shown = ", ".join(f"{v} ({len(ps)} input{'s' if len(ps) > 1 else ''})" for v, ps in ranked)
        what = "NCCL" if pkg == "NCCL" else pkg
        f = nccl_version_differs.finding(
            f"{what} differs between the inputs of the job: {shown}; every rank must run the same NCCL.",
            evidence=[Evidence(f"{what} {v}", len(ps), source=", ".join(ps[:4])) for v, ps in ranked[:6]],
            subject=f"{what} {odd[0]} ({_short(odd[1])})"
            if odd
            else f"{what} {' vs '.join(v for v, _ in ranked)}",
            confidence=0.85,
        )
        f.action = Action.CONFIGURE
        yield f


def _short(paths: list[Any]) -> str:
    return ", ".join(str(p).rsplit("/", 1)[-1] for p in paths[:3])
