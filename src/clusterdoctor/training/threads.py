"""Bind a training process's communication threads to their own CPUs near the NIC, by thread id.

``clusterdoctor numa exec`` binds the whole process (compute and communication CPUs of the rank's
plan) and exports the plan's sets as ``CLUSTERDOCTOR_COMPUTE_CPUS`` and ``CLUSTERDOCTOR_COMM_CPUS``; a
process cannot bind threads that do not exist yet, so the split happens here, inside the job, once the
threads are there::

    dist.init_process_group("nccl")
    from clusterdoctor.training.threads import bind_comm_threads
    binder = bind_comm_threads(watch=True)     # comm threads -> comm CPUs, the rest -> compute CPUs

Communication threads are found by name (``/proc/self/task/<tid>/comm``): PyTorch's c10d threads
(``pt_nccl_watchdg``, ``pt_nccl_heartbt``, ``pt_gloo_runloop``, ``pt_tcpstore_uv``), gloo's
``gloo_tcp_loop``, and NCCL's own proxy threads (``NCCL Service``/``NCCL Progress``/``NCCL UDS``,
named only when ``NCCL_SET_THREAD_NAME=1``, which ``numa exec`` sets unless the environment already
says). NCCL starts its proxy threads when a communicator is first used, so ``watch=True`` keeps a daemon
thread that binds new communication threads as they appear (every ``interval`` seconds, a listing of
``/proc/self/task``: microseconds). DataLoader workers are processes: bind them with
:func:`clusterdoctor.training.numa_worker_init_fn`.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from clusterdoctor.topology.cpuset import format_cpulist, parse_cpulist

__all__ = ["COMM_THREAD", "CommThreadBinder", "bind_comm_threads", "thread_names"]

# kernel thread names (15 characters at most) of communication threads, as PyTorch 2.x, gloo and NCCL
# (src/proxy.cc, NCCL_SET_THREAD_NAME) set them
COMM_THREAD = re.compile(r"^(?:pt_nccl_|pt_gloo|pt_tcpstore|pt_c10d|gloo_|NCCL |nccl|ucx|UCX)")


def thread_names(pid: int | None = None) -> dict[int, str]:
    """Kernel thread id -> thread name of every thread of ``pid`` (default: this process)."""
    base = f"/proc/{pid or 'self'}/task"
    out: dict[int, str] = {}
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"{base}/{t}/comm", encoding="utf-8", errors="replace") as f:
                out[int(t)] = f.read().strip()
        except (OSError, ValueError):
            continue  # a thread that just exited
    return out


def _env_cpus(name: str) -> set[int] | None:
    v = os.environ.get(name)
    return set(parse_cpulist(v)) if v else None


@dataclass
class CommThreadBinder:
    """Binds communication threads to ``comm_cpus`` and (once) the other threads to ``compute_cpus``."""

    comm_cpus: set[int]
    compute_cpus: set[int] | None = None
    pid: int | None = None
    bound: dict[int, str] = field(default_factory=dict)  # tid -> name of the comm threads bound so far
    others: dict[int, str] = field(default_factory=dict)  # tid -> name of the threads put on compute CPUs
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def scan(self) -> int:
        """Bind the communication threads not bound yet; returns how many were bound now."""
        names = thread_names(self.pid)
        own = {self._thread.native_id} if self._thread is not None and self._thread.native_id else set()
        new = 0
        for tid, name in names.items():
            if tid in self.bound or tid in own:
                continue
            if COMM_THREAD.match(name):
                if self._set(tid, self.comm_cpus, name):
                    self.bound[tid] = name
                    new += 1
            elif self.compute_cpus and tid not in self.others:
                if self._set(tid, self.compute_cpus, name):
                    self.others[tid] = name
        return new

    def _set(self, tid: int, cpus: Iterable[int], name: str) -> bool:
        try:
            os.sched_setaffinity(tid, set(cpus))
            return True
        except ProcessLookupError:
            return False  # exited meanwhile
        except OSError as e:
            self.errors.append(
                f"thread {tid} ({name}): cannot bind to CPUs {format_cpulist(cpus)}: {e.strerror}"
            )
            return False

    def start(self, interval: float = 1.0) -> CommThreadBinder:
        """Keep binding new communication threads every ``interval`` seconds, in a daemon thread."""
        if self._thread is not None:
            return self
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval):
                self.scan()

        self._thread = threading.Thread(target=loop, name="cd_bind_comm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def bind_comm_threads(
    comm_cpus: Iterable[int] | None = None,
    compute_cpus: Iterable[int] | None = None,
    *,
    watch: bool = False,
    interval: float = 1.0,
) -> CommThreadBinder:
    """Bind this process's communication threads to ``comm_cpus`` and its other threads to
    ``compute_cpus`` (defaults: ``CLUSTERDOCTOR_COMM_CPUS`` / ``CLUSTERDOCTOR_COMPUTE_CPUS`` from
    ``numa exec``). ``watch=True`` keeps binding threads that start later (NCCL's proxy threads).
    ValueError when no communication CPUs are given or set."""
    comm = set(comm_cpus) if comm_cpus is not None else _env_cpus("CLUSTERDOCTOR_COMM_CPUS")
    if not comm:
        raise ValueError(
            "no communication CPUs: pass comm_cpus=, or run under `clusterdoctor numa exec` "
            "(it sets CLUSTERDOCTOR_COMM_CPUS)"
        )
    compute = set(compute_cpus) if compute_cpus is not None else _env_cpus("CLUSTERDOCTOR_COMPUTE_CPUS")
    b = CommThreadBinder(comm, compute or None)
    b.scan()
    if watch:
        b.start(interval)
    return b
