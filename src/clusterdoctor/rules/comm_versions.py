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


# The oldest Linux driver each CUDA major release runs on (minor version compatibility: a build for any 12.x
# runtime runs on 525.60.13 or newer), from the CUDA Toolkit release notes, "CUDA Toolkit and Minimum
# Required Driver Version for CUDA Minor Version Compatibility" (Table 2), and the CUDA 10.x/9.x tables.
CUDA_MIN_DRIVER: dict[str, tuple[int, ...]] = {
    "13": (580, 0, 0),
    "12": (525, 60, 13),
    "11": (450, 80, 2),
    "10.2": (440, 33, 0),
    "10.1": (418, 39, 0),
    "10.0": (410, 48, 0),
    "9.2": (396, 26, 0),
    "9.1": (390, 46, 0),
    "9.0": (384, 81, 0),
}
_CUDA_NOTES = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"


def _min_driver(cuda: str) -> tuple[str, tuple[int, ...]] | None:
    parts = cuda.split(".")
    for key in (".".join(parts[:2]), parts[0]):
        if key in CUDA_MIN_DRIVER:
            return key, CUDA_MIN_DRIVER[key]
    return None


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(str(x) for x in (v[:2] if len(v) == 3 and v[2] == 0 else v))


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


register_input("torch_env", "no PyTorch environment report (python -m torch.utils.collect_env)")


@rule(
    id="COMM018",
    name="torch-cuda-newer-than-driver",
    layer="comm",
    title="The PyTorch build's CUDA needs a newer NVIDIA driver than the node has",
    requires=("torch_env",),
    severity=Severity.CRITICAL,
    causes=("nccl.cuda-driver-runtime", "gpu.driver-mismatch"),
)
def torch_cuda_newer_than_driver(obs: Observations) -> Iterator[Finding]:
    """collect_env's ``CUDA used to build PyTorch`` is of a CUDA release the ``Nvidia driver version`` is too old for.

    **Symptom**: ``torch.cuda.is_available()`` is False with a working ``nvidia-smi``, or every CUDA call
    (NCCL's too: ``unhandled cuda error``) fails with ``CUDA driver version is insufficient for CUDA
    runtime version`` (error 35).
    **Why**: PyTorch wheels ship their CUDA runtime; the kernel driver must be at least the minimum of that
    CUDA major release (minor version compatibility: 525.60.13 for any 12.x, 450.80.02 for 11.x on Linux).
    **Fix**: upgrade the NVIDIA driver, or install the PyTorch build for an older CUDA (e.g. a cu118
    wheel on a 470/515 driver); in containers, the host's driver is the one that counts.
    **Verify**: `nvidia-smi --query-gpu=driver_version --format=csv` and `python -c 'import torch; print(torch.version.cuda, torch.cuda.is_available())'`.
    """
    for env in obs.get("torch_env") or []:
        cuda, driver = env.cuda_build, env.driver
        if not cuda or not driver or "windows" in (env.os or "").lower():
            continue  # Windows drivers are numbered otherwise
        need = _min_driver(cuda)
        if need is None or _version(driver) >= need[1]:
            continue
        f = torch_cuda_newer_than_driver.finding(
            f"PyTorch {env.torch_version or '?'} is built for CUDA {cuda}, which needs NVIDIA driver "
            f"{_fmt(need[1])} or newer; the node has {driver}.",
            evidence=[
                Evidence("CUDA used to build PyTorch", cuda, source=env.path),
                Evidence("Nvidia driver version", driver, _fmt(need[1]), source=env.path),
                Evidence("minimum drivers per CUDA release", _CUDA_NOTES),
            ],
            subject=f"driver {driver}",
            confidence=0.85,
        )
        f.action = Action.CONFIGURE
        yield f
