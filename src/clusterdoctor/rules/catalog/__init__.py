"""Message catalogues as data: what a line that a program prints means, what causes it, how to fix it.

One module per program family (:data:`FAMILIES`): NCCL, PyTorch (c10d, elastic, tracebacks), CUDA
runtime errors, nvidia-smi / NVML failures, NVRM lines other than Xid (the Xid table is :mod:`clusterdoctor.rules.xid_catalog`),
the NVSwitch fabric manager, the Kubernetes device plugin and GPU operator, InfiniBand verbs and port
states, the kubelet, containerd, etcd server and client, scheduler events, storage and data loading.
Each entry (:class:`Message`) is one known message: a pattern, its meaning, its likely cause, the fix
and the command that verifies it, a severity, what the fix takes (:class:`~clusterdoctor.model.Action`),
the public source that documents the message, and a real line that shows it (tests/rules/test_message_catalog.py
checks every entry against its own example, and each example against every other pattern).

Parsers turn matching lines into typed hits (:mod:`clusterdoctor.observe.messages`); rules judge
them (:mod:`clusterdoctor.rules.messages`: one rule per entry, its id the entry's code). Adding a
message is one entry here and its real line.

Patterns are searched anywhere in a line (``re.search``), behind any prefix; they must be linear on
any line: no nested or overlapping quantifiers (``(a+)+``, ``.*x.*``), bounded repeats where a field
is free text. ``trigger`` is a literal substring every matching line contains (a fast pre-filter:
one scan for all triggers finds the candidate lines); a message whose variants share no literal lists
the others in ``triggers`` and other patterns in ``variants``. Named groups feed ``subject`` (``rank {rank}``, ``GPU {pci}``), ``detail``
(values added to the summary) and the finding's evidence; ``name2``, ``name3`` stand in for ``name`` in
another alternative of the pattern. ``count_before`` keeps the number printed just before the match as
the group ``count`` (and requires one); ``rank_group`` names the group that says how many instances a
line's message covers. ``context`` is a second pattern the line must also hold (a message that other
programs print too, such as Go's TLS errors, is the entry's only on its program's lines).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from functools import cache, lru_cache

from clusterdoctor.model import Action, Severity

__all__ = ["FAMILIES", "Message", "all_messages", "by_code"]

# family module -> layer of its findings
FAMILIES: dict[str, str] = {
    "nccl": "comm",
    "torch": "comm",
    "launcher": "comm",  # DeepSpeed's launcher, Slurm's step daemon, MPI, Horovod, Ray
    "cuda": "gpu",
    "nvml": "gpu",
    "nvrm": "gpu",
    "fabricmanager": "gpu",
    "deviceplugin": "gpu",
    "pcie_aer": "gpu",
    "dcgm": "gpu",  # DCGM and dcgm-exporter  # the kernel's PCIe AER lines (a GPU's or NIC's link)
    "ib": "rdma",
    "ib_host": "rdma",  # the host's RDMA stack: mlx5 driver, DEVX, libibverbs/librdmacm, perftest, OFI
    "rdma_plugin": "rdma",  # Kubernetes RDMA device plugins (RDMA shared device plugin, SR-IOV device plugin)
    "kubelet": "kubelet",
    "containerd": "kubelet",
    "etcd": "etcd",
    "scheduler_events": "control-plane",
    "apiserver": "control-plane",  # kube-apiserver's RBAC answers and storage errors
    "storage": "storage",
    "systemd": "kubelet",  # systemd's lines about a failed service (each entry sets its own layer)
}


@dataclass(frozen=True)
class Message:
    """One known message of a program (see the module docstring)."""

    code: str  # rule id, e.g. "NCCL101"
    name: str  # kebab-case, e.g. "nccl-shm-no-space"
    title: str  # one line, what it is
    pattern: str
    trigger: str  # a literal substring of every matching line (or of one of ``triggers``)
    meaning: str  # what the message says happened
    cause: str  # the likely cause(s)
    fix: str
    verify: tuple[str, ...]
    severity: Severity
    action: Action
    source: str  # where the message and its meaning are documented (URL)
    example: str  # a real line that shows it (from a public thread or the program's source)
    causes: tuple[str, ...] = ()  # incident-corpus cause classes it names (tests/data/incidents/causes)
    # "cause": the message names why; "symptom": a consequence that another finding explains (a
    # timeout, a generic failure) and is folded into that finding when one is present
    role: str = "cause"
    subject: str = ""  # template over the pattern's named groups, e.g. "rank {rank}"
    flags: int = 0  # re flags (re.I)
    confidence: float = 0.9
    family: str = ""  # set from the module
    layer: str = ""  # set from the module (FAMILIES)
    example_source: str = ""  # URL of the thread the example line comes from
    notes: tuple[str, ...] = field(default=())
    # further literal substrings, for a message whose variants (versions, wordings) share no literal:
    # a matching line holds ``trigger`` or one of these
    triggers: tuple[str, ...] = ()
    # more patterns tried after ``pattern`` (each its own regex, led by a literal, so that none needs a
    # top-level alternation the regex engine cannot skip through quickly): a CUDA error by its enum name
    variants: tuple[str, ...] = ()

    @property
    def all_triggers(self) -> tuple[str, ...]:
        return (self.trigger, *self.triggers)

    # template over the named groups appended to the finding's summary ("{nodes} node(s) lack {resource}")
    detail: str = ""
    # a named group holding how many instances the line says this message covers (the scheduler's
    # "28 Insufficient cpu"): of several messages on one line, the one covering most ranks first
    rank_group: str = ""
    # the number printed just before the match ("28 " in "28 Insufficient cpu") is kept as the group
    # "count" (so that the pattern can start with its literal text, which keeps it fast on long lines)
    count_before: bool = False
    # a second pattern the line must also hold somewhere (the program's own marks: "rafthttp", a peer
    # port) for a message that other programs print too (Go's x509 errors); searched on its own, so
    # the main pattern can still start with its literal text
    context: str = ""

    @property
    def context_regex(self) -> re.Pattern[str] | None:
        return _compile(self.context, self.flags) if self.context else None

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern, self.flags)

    @property
    def regexes(self) -> tuple[re.Pattern[str], ...]:
        """``pattern`` and then each of ``variants``, compiled."""
        return (self.regex, *(_compile(v, self.flags) for v in self.variants))


@cache
def _compile(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


@lru_cache(maxsize=1)
def all_messages() -> tuple[Message, ...]:
    """Every entry of every family, in family then code order."""
    out: list[Message] = []
    for family, layer in FAMILIES.items():
        try:
            mod = importlib.import_module(f"{__name__}.{family}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{family}":
                continue
            raise
        for m in getattr(mod, "MESSAGES", ()):
            out.append(_with_family(m, family, layer))
    codes = [m.code for m in out]
    dupes = {c for c in codes if codes.count(c) > 1}
    if dupes:
        raise ValueError(f"duplicate message codes: {sorted(dupes)}")
    return tuple(out)


def _with_family(m: Message, family: str, layer: str) -> Message:
    from dataclasses import replace

    return replace(m, family=m.family or family, layer=m.layer or layer)


def by_code() -> dict[str, Message]:
    return {m.code: m for m in all_messages()}
