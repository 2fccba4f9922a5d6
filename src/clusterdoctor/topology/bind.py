"""Apply a rank's plan to this process and exec a command: no numactl binary needed.

CPU binding uses :func:`os.sched_setaffinity`; memory binding calls the ``set_mempolicy`` system call
through ctypes. Both are inherited across ``execve``. When the kernel or a container refuses the
memory policy (EPERM without CAP_SYS_NICE, ENOSYS, "does not support NUMA policy"), binding falls back
to CPUs only with a warning — never a crash before the command starts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field

from clusterdoctor.errors import UsageError
from clusterdoctor.topology.cpuset import format_cpulist
from clusterdoctor.topology.plan import RankPlan

# mempolicy modes, include/uapi/linux/mempolicy.h
MPOL_DEFAULT = 0
MPOL_PREFERRED = 1
MPOL_BIND = 2
MPOL_INTERLEAVE = 3

# set_mempolicy syscall numbers per architecture (arch/*/syscalls tables).
SYS_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237, "ppc64le": 261, "s390x": 270, "i686": 276}

# move_pages syscall numbers (query mode: nodes=NULL reports the node each page is on)
SYS_MOVE_PAGES = {"x86_64": 279, "aarch64": 239, "ppc64le": 301, "s390x": 310, "i686": 317}

MEM_MODES = {"preferred": MPOL_PREFERRED, "bind": MPOL_BIND, "interleave": MPOL_INTERLEAVE, "none": None}


@dataclass
class BindResult:
    cpus: tuple[int, ...]
    memory_node: int | None
    mem_mode: str
    mem_applied: bool
    warnings: list[str] = field(default_factory=list)


def set_mempolicy(mode: int, nodes: Sequence[int]) -> None:
    """Call ``set_mempolicy(mode, nodemask, maxnode)``; raises OSError with the kernel's errno."""
    nr = SYS_SET_MEMPOLICY.get(platform.machine())
    if nr is None:
        raise OSError(errno.ENOSYS, f"set_mempolicy syscall number unknown on {platform.machine()}")
    maxnode = max(nodes, default=0) + 2
    words = (maxnode + 63) // 64
    mask = (ctypes.c_ulong * words)()
    for n in nodes:
        mask[n // 64] |= 1 << (n % 64)
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.syscall.restype = ctypes.c_long
    rc = libc.syscall(ctypes.c_long(nr), ctypes.c_int(mode), mask if nodes else None, ctypes.c_ulong(maxnode))
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def page_nodes(address: int, length: int, samples: int = 8) -> list[int]:
    """The NUMA node of ``samples`` pages spread over ``[address, address + length)`` of this process,
    as the kernel reports it (``move_pages(2)`` with no target nodes: a query, nothing moves). A page
    not yet touched reads as a negative errno (-ENOENT); OSError when the call itself fails."""
    nr = SYS_MOVE_PAGES.get(platform.machine())
    if nr is None:
        raise OSError(errno.ENOSYS, f"move_pages syscall number unknown on {platform.machine()}")
    page = os.sysconf("SC_PAGE_SIZE")
    first, last = address - address % page, address + max(length, 1) - 1
    npages = (last - first) // page + 1
    n = max(1, min(samples, npages))
    addrs = (ctypes.c_void_p * n)(*[first + (i * (npages - 1) // max(1, n - 1)) * page for i in range(n)])
    status = (ctypes.c_int * n)()
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.syscall.restype = ctypes.c_long
    rc = libc.syscall(
        ctypes.c_long(nr), ctypes.c_int(0), ctypes.c_ulong(n), addrs, None, status, ctypes.c_int(0)
    )
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return list(status)


def apply_plan(rank: RankPlan, mem_mode: str = "preferred", *, pid: int = 0) -> BindResult:
    """Bind the calling process (``pid=0``) to the rank's CPUs and, where allowed, its memory node."""
    if mem_mode not in MEM_MODES:
        raise UsageError(f"unknown memory mode {mem_mode!r}; choose one of {', '.join(MEM_MODES)}")
    cpus = tuple(sorted(set(rank.compute_cpus) | set(rank.comm_cpus)))
    warnings: list[str] = []
    try:
        os.sched_setaffinity(pid, cpus)
    except OSError as e:
        raise UsageError(
            f"cannot bind to CPUs {format_cpulist(cpus)}: {e.strerror} "
            "(they must exist on this machine and lie inside the cgroup cpuset)"
        ) from None
    applied = False
    mode = MEM_MODES[mem_mode]
    if mode is not None and rank.memory_node is not None:
        try:
            set_mempolicy(mode, [rank.memory_node])
            applied = True
        except OSError as e:
            warnings.append(
                f"memory policy {mem_mode}:{rank.memory_node} refused ({e.strerror}); binding CPUs only "
                "(containers may need CAP_SYS_NICE)"
            )
    elif mode is not None:
        warnings.append("memory node unknown; memory policy left unset")
    return BindResult(cpus, rank.memory_node, mem_mode, applied, warnings)


def exec_bound(rank: RankPlan, argv: Sequence[str], mem_mode: str = "preferred") -> BindResult:
    """Bind this process to ``rank`` then replace it with ``argv`` (returns only if exec fails)."""
    if not argv:
        raise UsageError("no command given after --")
    result = apply_plan(rank, mem_mode)
    env = dict(os.environ)
    env["CLUSTERDOCTOR_COMPUTE_CPUS"] = format_cpulist(rank.compute_cpus)
    env["CLUSTERDOCTOR_COMM_CPUS"] = format_cpulist(rank.comm_cpus)
    env["CLUSTERDOCTOR_NUMA_NODE"] = str(rank.numa_node)
    # NCCL names its proxy threads only when asked: clusterdoctor.training.threads finds them by name
    env.setdefault("NCCL_SET_THREAD_NAME", "1")
    env.setdefault("LOCAL_RANK", str(rank.local_rank))
    for w in result.warnings:
        os.write(2, f"clusterdoctor: warning: {w}\n".encode())
    try:
        os.execvpe(argv[0], list(argv), env)
    except OSError as e:
        raise UsageError(f"cannot run {argv[0]}: {e.strerror}") from None
    return result  # pragma: no cover - exec does not return
