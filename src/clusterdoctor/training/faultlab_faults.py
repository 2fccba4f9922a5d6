"""More faults for the fault lab (:mod:`clusterdoctor.training.faultlab`), each real: a CPU-burning
neighbour (Debian's ``stress-ng``) in one rank's cgroup, more work on one rank from step 1, several
faults at once, a CPU quota that tightens over time, checkpoints written and fsynced by one rank, and
the background load generator of the bench's loaded condition. Every fault is undone by ``stop()``;
the processes started here (stress-ng) run in sessions of their own and are ended by session id.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clusterdoctor.training.faultlab import Fault, _sleep_unless, _Throttle

if TYPE_CHECKING:
    from clusterdoctor.training.faultlab import Lab

__all__ = ["Background", "Checkpoint", "Gradual", "Imbalance", "Neighbour", "Several", "WorkerFault"]


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _stress_ng(*args: str, cpus: set[int] | None = None) -> subprocess.Popen:
    """Debian's stress-ng in a session of its own (ended by :func:`_end_session`)."""
    exe = shutil.which("stress-ng")
    if exe is None:
        raise RuntimeError("stress-ng not installed (apt-get install stress-ng)")
    cmd = [exe, *args, "--quiet"]
    if cpus:
        cmd = ["taskset", "-c", ",".join(map(str, sorted(cpus))), *cmd]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _end_session(p: subprocess.Popen | None) -> None:
    if p is None or p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)  # the session we started: stress-ng and its workers
        p.wait(5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


@dataclass
class Neighbour(_Throttle):
    """A real CPU-burning neighbour in the rank's container: the rank and ``workers`` stress-ng CPU
    workers share one cgroup limited to ``fraction`` of a CPU (a pod whose sidecar or co-located
    process burns the CPU its limit allows; the rank gets what the neighbour leaves)."""

    rank: int
    workers: int = 2
    fraction: float = 0.6
    kind = "compute"

    def start(self, lab: Lab) -> None:
        self._throttle(lab, f"neighbour-r{self.rank}", [lab.pid(self.rank)])
        self.proc = _stress_ng("--cpu", str(self.workers), "--cpu-method", "matrixprod")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # its workers join the rank's cgroup as they start
            kids = _session_pids(self.proc.pid)
            if len(kids) > self.workers:
                break
            time.sleep(0.02)
        for pid in _session_pids(self.proc.pid):
            try:
                self.cg.add(pid)
            except OSError:
                pass

    def stop(self) -> None:
        if hasattr(self, "proc"):
            _end_session(self.proc)
        super().stop()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "workers": self.workers}


def _session_pids(sid: int) -> list[int]:
    """Processes of session ``sid`` (stress-ng and the workers it forked)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.getsid(int(d)) == sid:
                    out.append(int(d))
            except OSError:
                pass
    return out


class WorkerFault(Fault):
    """A fault the training processes act out themselves (from :meth:`config`, given to every rank in the
    episode's configuration): more work on one rank, checkpoint writes. ``from_start``: in force from
    step 1 (the lab records the episode's start as the injection)."""

    from_start = False

    def config(self) -> dict[str, Any]:  # pragma: no cover - interface
        raise NotImplementedError

    def start(self, lab: Lab) -> None:
        pass

    def stop(self) -> None:
        pass


@dataclass
class Imbalance(WorkerFault):
    """Rank ``rank`` does ``factor`` times the work per batch from step 1 (its batch repeated): data or
    work skew, a rank slow from birth with no healthy past of its own."""

    rank: int
    factor: int = 2
    kind = "compute"
    from_start = True

    def config(self) -> dict[str, Any]:
        return {"imbalance": {"rank": self.rank, "factor": self.factor}}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "factor": self.factor}


@dataclass
class Checkpoint(WorkerFault):
    """Rank ``rank`` writes ``mb`` MiB and fsyncs it every ``every`` steps from step ``after`` on (into
    ``dir``, default the episode's folder): real storage I/O inside the training loop."""

    rank: int
    every: int = 10
    mb: int = 32
    after: int = 25
    dir: str | None = None
    kind = "storage"

    def config(self) -> dict[str, Any]:
        return {"ckpt": {"rank": self.rank, "every": self.every, "mb": self.mb, "after": self.after,
                         "dir": self.dir}}  # fmt: skip

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "every": self.every, "mb": self.mb}


@dataclass
class Several(Fault):
    """Several faults at once (two stragglers); ``ranks`` lists their ranks."""

    faults: list[Fault]
    kind = "compute"

    @property
    def rank(self) -> int | None:  # type: ignore[override]
        return self.faults[0].rank if self.faults else None

    @property
    def ranks(self) -> list[int]:
        return [f.rank for f in self.faults if f.rank is not None]

    def start(self, lab: Lab) -> None:
        self.started: list[Fault] = []
        for f in self.faults:
            f.start(lab)
            self.started.append(f)

    def stop(self) -> None:
        for f in getattr(self, "started", []):
            f.stop()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "ranks": self.ranks, "inner": [f.describe() for f in self.faults]}


@dataclass
class Gradual(_Throttle):
    """One rank's CPU quota tightened from ``start_fraction`` to ``end_fraction`` over ``ramp_s``
    seconds (a slow degradation: a fan failing, a neighbour growing)."""

    rank: int
    start_fraction: float = 0.9
    end_fraction: float = 0.15
    ramp_s: float = 3.0
    kind = "compute"

    @property
    def fraction(self) -> float:  # type: ignore[override]
        return self.start_fraction

    def start(self, lab: Lab) -> None:
        self._throttle(lab, f"gradual-r{self.rank}", [lab.pid(self.rank)])
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._ramp, daemon=True)
        self.thread.start()

    def _ramp(self) -> None:
        t0 = time.monotonic()
        while not self.halt.is_set():
            x = min(1.0, (time.monotonic() - t0) / max(self.ramp_s, 1e-3))
            try:
                self.cg.limit(self.start_fraction + (self.end_fraction - self.start_fraction) * x)
            except OSError:
                return
            if x >= 1.0:
                return
            _sleep_unless(self.halt, 0.1)

    def stop(self) -> None:
        if hasattr(self, "halt"):
            self.halt.set()
            self.thread.join(5)
        super().stop()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "start_fraction": self.start_fraction,
                "end_fraction": self.end_fraction, "ramp_s": self.ramp_s}  # fmt: skip


class Background:
    """A background load generator on the whole machine (the bench's loaded condition): ``workers``
    stress-ng CPU workers at ``load`` percent each, unpinned, plus one I/O worker with ``io``."""

    def __init__(self, workers: int = 2, load: int = 50, io: bool = False) -> None:
        self.workers, self.load, self.io = workers, load, io
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Background:
        args = ["--cpu", str(self.workers), "--cpu-load", str(self.load), "--cpu-method", "matrixprod"]
        if self.io:
            args += ["--hdd", "1", "--hdd-bytes", "64m"]
        self.proc = _stress_ng(*args)
        return self

    def __exit__(self, *exc: object) -> None:
        _end_session(self.proc)
        self.proc = None

    def describe(self) -> dict[str, Any]:
        return {"workers": self.workers, "load": self.load, "io": self.io}
