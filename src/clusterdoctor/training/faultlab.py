"""Fault lab: a real multi-rank DDP job on this machine's CPUs, and real faults injected from outside.

Used by the tests and by ``bench/failslow.py`` to measure the fail-slow probe and detector on real
slowdowns, not simulated ones. Needs root (cgroups, network namespaces) and the training extra.

* :class:`Lab` starts ``world`` ranks of :mod:`clusterdoctor.training.faultlab_worker` (gloo),
  each optionally in a network namespace of its own, joined by veth pairs to a bridge in another
  namespace (names unique per lab, removed by :meth:`Lab.close`). It then runs training runs
  ("episodes") one after another in the same processes, each with a fresh model and probe, wrapped
  in DDP, FSDP1 or FSDP2 (``extra={"wrap": ...}``).
* Faults act on the processes from outside the training code:

  - :class:`CpuQuota`: cgroup v1 ``cpu.cfs_quota_us`` on one rank (a throttled CPU / noisy neighbour),
    or on its training thread alone (slower compute, transfers unhindered);
  - :class:`StopCont`: SIGSTOP/SIGCONT duty cycle of one rank (a host that keeps freezing it);
  - :class:`SlowLink`: ``tbf`` rate limit on both ends of one rank's veth (a NIC that trained slow);
  - :class:`SlowLoader`: cgroup CPU quota on one rank's data-loader worker process;
  - :class:`Periodic`: any of these switched on for ``on_s`` and off for ``off_s``;
  - :class:`JobWide`: one CPU quota on every rank together (the whole job slower);
  and in :mod:`clusterdoctor.training.faultlab_faults`:

  - :class:`Neighbour`: a real CPU-burning neighbour (Debian's ``stress-ng``) in one rank's CPU cgroup
    (a noisy co-tenant inside its container's limit);
  - :class:`Imbalance`: one rank does ``factor`` times the work per batch from step 1 (data skew);
  - :class:`Several`: several faults at once (two stragglers);
  - :class:`Gradual`: a CPU quota on one rank that tightens step by step (a slow degradation);
  - :class:`SlowLink` with ``qdisc="htb"``: an ``htb`` rate class instead of ``tbf``;
  - :class:`Checkpoint`: one rank writes and fsyncs a checkpoint every few steps (real storage I/O);
  - :class:`Background`: a load generator (``stress-ng``) on the whole machine, for the loaded
    condition of the bench (not a fault: the detector must stay quiet under it).

Every fault is undone by ``stop()`` and, whatever happens, by :meth:`Lab.close`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CGROUP_CPU = "/sys/fs/cgroup/cpu"


def lab_available(netns: bool = False) -> str | None:
    """None when a lab can run here; else the reason it cannot (for a test skip)."""
    if os.geteuid() != 0:
        return "needs root (cgroups, network namespaces)"
    if not os.path.exists(os.path.join(CGROUP_CPU, "cpu.cfs_quota_us")):
        return f"no cgroup v1 cpu controller at {CGROUP_CPU}"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch not installed (training extra)"
    if netns and (shutil.which("ip") is None or shutil.which("tc") is None):
        return "iproute2 (ip, tc) not installed"
    return None


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=30)


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


class _Cgroup:
    """A uniquely named cgroup v1 cpu group; processes moved back to the root group on remove."""

    def __init__(self, name: str) -> None:
        self.path = os.path.join(CGROUP_CPU, name)
        os.makedirs(self.path, exist_ok=True)
        self.pids: list[tuple[int, str]] = []  # (pid or tid, the file it was written to)

    def limit(self, fraction: float, period_us: int = 100_000) -> None:
        with open(os.path.join(self.path, "cpu.cfs_period_us"), "w") as f:
            f.write(str(period_us))
        with open(os.path.join(self.path, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(max(1000, int(fraction * period_us))))

    def add(self, pid: int, thread: bool = False) -> None:
        """Move process ``pid`` (all its threads), or with ``thread`` only the thread of that id
        (cgroup v1 ``tasks``: a process' main thread has the process' id)."""
        what = "tasks" if thread else "cgroup.procs"
        with open(os.path.join(self.path, what), "w") as f:
            f.write(str(pid))
        self.pids.append((pid, what))

    def release(self) -> None:
        for pid, what in self.pids:
            try:
                with open(os.path.join(CGROUP_CPU, what), "w") as f:
                    f.write(str(pid))
            except OSError:
                pass  # the process is gone
        self.pids.clear()

    def remove(self) -> None:
        self.release()
        try:
            with open(os.path.join(self.path, "tasks")) as f:
                left = [int(x) for x in f.read().split()]
            for tid in left:
                with open(os.path.join(CGROUP_CPU, "tasks"), "w") as f:
                    f.write(str(tid))
        except OSError:
            pass
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)


class Fault:
    """A fault on the lab's processes: ``start(lab)`` applies it, ``stop()`` undoes it."""

    kind = "fault"
    rank: int | None = None

    def start(self, lab: Lab) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"fault": type(self).__name__, "kind": self.kind, "rank": self.rank}


class _Throttle(Fault):
    """A fault that holds processes to ``fraction`` of one CPU in a cgroup of its own."""

    fraction: float

    def _throttle(
        self, lab: Lab, what: str, pids: list[int], period_us: int = 100_000, thread: bool = False
    ) -> None:
        self.cg = _Cgroup(f"{lab.tag}-{what}-{uuid.uuid4().hex[:6]}")
        self.cg.limit(self.fraction, period_us)
        for pid in pids:
            self.cg.add(pid, thread=thread)

    def stop(self) -> None:
        if hasattr(self, "cg"):
            self.cg.remove()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "fraction": self.fraction}


@dataclass
class CpuQuota(_Throttle):
    """``fraction`` of one CPU per ``period_us`` for one rank. The default 100 ms period throttles in
    long freezes (the process runs ``fraction`` of the period, then waits); a short period (5 ms)
    slows it evenly. With ``main_thread`` only the training thread is limited (cgroup v1 ``tasks``):
    its compute is slower while gloo's transfer threads are not — on CPU the nearest thing to a GPU
    at a lower clock behind a healthy network."""

    rank: int
    fraction: float = 0.15
    period_us: int = 100_000
    main_thread: bool = False  # only the training thread: gloo's and the probe's threads run free
    kind = "compute"

    def start(self, lab: Lab) -> None:
        self._throttle(lab, f"quota-r{self.rank}", [lab.pid(self.rank)], self.period_us, self.main_thread)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "period_us": self.period_us, "main_thread": self.main_thread}


@dataclass
class JobWide(_Throttle):
    fraction: float = 0.6
    kind = "job"
    rank: int | None = None

    def start(self, lab: Lab) -> None:
        self._throttle(lab, "jobwide", [lab.pid(r) for r in range(lab.world)])


@dataclass
class SlowLoader(_Throttle):
    rank: int
    fraction: float = 0.02
    kind = "data"

    def start(self, lab: Lab) -> None:
        kids = _children(lab.pid(self.rank))
        if not kids:
            raise RuntimeError(f"rank {self.rank} has no data-loader worker process")
        self._throttle(lab, f"loader-r{self.rank}", kids)


@dataclass
class StopCont(Fault):
    """SIGSTOP for ``stop_s``, SIGCONT for ``cont_s``, repeated, from a thread of this process."""

    rank: int
    stop_s: float = 0.03
    cont_s: float = 0.03
    kind = "compute"

    def start(self, lab: Lab) -> None:
        self.pid = lab.pid(self.rank)
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        try:
            while not self.halt.is_set():  # time.sleep, not Event.wait: libfaketime (make test-clock)
                os.kill(self.pid, signal.SIGSTOP)
                time.sleep(self.stop_s)
                os.kill(self.pid, signal.SIGCONT)
                time.sleep(self.cont_s)
        except ProcessLookupError:
            pass
        finally:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        if hasattr(self, "halt"):
            self.halt.set()
            self.thread.join(5)
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "stop_s": self.stop_s, "cont_s": self.cont_s}


@dataclass
class SlowLink(Fault):
    """``tbf`` (or with ``qdisc="htb"`` an ``htb`` class) on both ends of one rank's veth (its egress
    and its ingress)."""

    rank: int
    rate: str = "400mbit"
    burst: str = "32kb"
    qdisc: str = "tbf"
    kind = "communication"

    def start(self, lab: Lab) -> None:
        if not lab.netns:
            raise RuntimeError("SlowLink needs a lab with network namespaces")
        self.lab = lab
        for ns, dev in lab.link_ends(self.rank):
            tc = ("ip", "netns", "exec", ns, "tc")
            if self.qdisc == "htb":
                _run(*tc, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
                _run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb",
                     "rate", self.rate, "ceil", self.rate, "burst", self.burst)  # fmt: skip
            else:
                _run(*tc, "qdisc", "replace", "dev", dev, "root", "tbf",
                     "rate", self.rate, "burst", self.burst, "latency", "500ms")  # fmt: skip

    def stop(self) -> None:
        if hasattr(self, "lab"):
            for ns, dev in self.lab.link_ends(self.rank):
                _run("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "rate": self.rate, "qdisc": self.qdisc}


@dataclass
class Periodic(Fault):
    """``inner`` on for ``on_s``, off for ``off_s``, repeated until stopped."""

    inner: Fault
    on_s: float = 1.5
    off_s: float = 1.5
    kind = "periodic"

    @property
    def rank(self) -> int | None:  # type: ignore[override]
        return self.inner.rank

    def start(self, lab: Lab) -> None:
        self.halt = threading.Event()
        self.lab = lab
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.halt.is_set():
            self.inner.start(self.lab)
            _sleep_unless(self.halt, self.on_s)
            self.inner.stop()
            _sleep_unless(self.halt, self.off_s)

    def stop(self) -> None:
        if hasattr(self, "halt"):
            self.halt.set()
            self.thread.join(10)
            self.inner.stop()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "inner": self.inner.describe(), "on_s": self.on_s, "off_s": self.off_s}


@dataclass
class EpisodeResult:
    """One training run of the lab: where its probe files are and when the fault began."""

    index: int
    dir: str
    fault: dict[str, Any] | None
    injected_at: float | None
    injected_after_step: int | None
    steps: int
    seconds: float
    median_step_s: float | None
    error: str | None = None


@dataclass
class Lab:
    """``world`` ranks of real DDP training (gloo, CPU) that run episodes on request."""

    root: Path
    world: int = 4
    netns: bool = False
    env: dict[str, str] = field(default_factory=dict)
    tag: str = field(default_factory=lambda: f"cdfs{uuid.uuid4().hex[:6]}")

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.lab_dir = self.root / "lab"
        self.procs: list[subprocess.Popen] = []
        self.k = 0
        self._ns: list[str] = []
        self._faults: list[Fault] = []

    # -- processes --------------------------------------------------------------------------------
    def start(self, timeout: float = 180.0) -> None:
        self.lab_dir.mkdir(parents=True, exist_ok=True)
        if self.netns:
            self._make_network()
            addr = self._addr(0)
        else:
            addr = "127.0.0.1"
        port = _free_port() if not self.netns else 29500
        for r in range(self.world):
            env = dict(os.environ)
            env.update(
                RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(self.world), MASTER_ADDR=addr,
                MASTER_PORT=str(port), FAULTLAB_LAB=str(self.lab_dir), PYTHONUNBUFFERED="1",
                OMP_NUM_THREADS="1",
            )  # fmt: skip
            env.pop("CLUSTERDOCTOR_WATCH_DIR", None)
            if self.netns:
                env["GLOO_SOCKET_IFNAME"] = "eth0"
            env.update(self.env)
            cmd = [sys.executable, "-m", "clusterdoctor.training.faultlab_worker"]
            if self.netns:
                cmd = ["ip", "netns", "exec", self._rank_ns(r), *cmd]
            log = open(self.root / f"rank{r}.log", "wb")
            self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
            log.close()
        self.timeout = timeout

    def pid(self, rank: int) -> int:
        return self.procs[rank].pid

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def episode(
        self,
        steps: int,
        fault: Fault | None = None,
        onset_step: int = 20,
        every: int = 5,
        port: int | None = None,
        timeout: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> EpisodeResult:
        """Run one training run of ``steps`` steps; start ``fault`` once step ``onset_step`` is seen."""
        k = self.k
        self.k += 1
        d = self.root / f"episode-{k}"
        d.mkdir(parents=True, exist_ok=True)
        cfg = {"steps": steps, "every": every, "job": f"lab-{self.tag}-e{k}", "dir": str(d), "port": port}
        cfg.update(extra or {})
        for wf in _worker_faults(fault):
            got = wf.config()
            if "ckpt" in got:
                got["ckpt"] = {**got["ckpt"], "dir": got["ckpt"].get("dir") or str(d / "ckpt")}
                got["ckpt"]["after"] = max(int(got["ckpt"]["after"]), onset_step)
            cfg.update(got)
        tmp = self.lab_dir / f".go-{k}"
        tmp.write_text(json.dumps(cfg))
        tmp.replace(self.lab_dir / f"go-{k}")
        done = self.lab_dir / f"done-{k}"
        t_start = time.time()
        deadline = time.monotonic() + (timeout or self.timeout)
        injected_at = None
        injected_step = None
        error = None
        # a fault the ranks act out from step 1 (more work on one rank) is in force from the start
        if fault is not None and getattr(fault, "from_start", False):
            injected_at, injected_step = t_start, 0
        try:
            while not done.exists():
                if not self.alive():
                    error = "a rank exited: " + self._tail_logs()
                    break
                if time.monotonic() > deadline:
                    error = f"episode {k} did not finish in time"
                    break
                if fault is not None and injected_at is None:
                    s = _last_step(d / "watch-rank0.jsonl")
                    if s is not None and s >= onset_step:
                        fault.start(self)
                        self._faults.append(fault)
                        injected_at = time.time()
                        injected_step = s
                time.sleep(0.02)
        finally:
            if fault is not None and fault in self._faults:
                fault.stop()
                self._faults.remove(fault)
        med = None
        if done.exists():
            try:
                med = json.loads(done.read_text()).get("median_step_s")
            except ValueError:
                pass
        return EpisodeResult(
            k, str(d), fault.describe() if fault else None, injected_at, injected_step, steps,
            time.time() - t_start, med, error,
        )  # fmt: skip

    def close(self) -> None:
        for f in list(self._faults):
            try:
                f.stop()
            except Exception:
                pass
        self._faults.clear()
        try:
            self.lab_dir.mkdir(parents=True, exist_ok=True)
            (self.lab_dir / "stop").write_text("")
        except OSError:
            pass
        for p in self.procs:
            try:
                os.kill(p.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self._kill_children()
        self._remove_network()
        _remove_cgroups(self.tag)

    def __enter__(self) -> Lab:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _kill_children(self) -> None:
        # data-loader workers exit with their parent (they poll it); nothing else is started
        pass

    def _tail_logs(self) -> str:
        out = []
        for r in range(self.world):
            try:
                text = (self.root / f"rank{r}.log").read_text(errors="replace").strip().splitlines()
            except OSError:
                continue
            if text:
                out.append(f"rank {r}: {text[-1][:300]}")
        return "; ".join(out)

    # -- network namespaces -------------------------------------------------------------------------
    def _rank_ns(self, r: int) -> str:
        return f"{self.tag}-r{r}"

    def _bridge_ns(self) -> str:
        return f"{self.tag}-br"

    def _addr(self, r: int) -> str:
        return f"10.213.7.{r + 1}"

    def link_ends(self, r: int) -> list[tuple[str, str]]:
        """(namespace, device) of both ends of rank ``r``'s veth."""
        return [(self._rank_ns(r), "eth0"), (self._bridge_ns(), f"{self.tag[-6:]}b{r}")]

    def _make_network(self) -> None:
        br = self._bridge_ns()
        _run("ip", "netns", "add", br)
        self._ns.append(br)
        _run("ip", "-n", br, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", br, "link", "set", "br0", "up")
        for r in range(self.world):
            ns = self._rank_ns(r)
            _run("ip", "netns", "add", ns)
            self._ns.append(ns)
            a, b = f"{self.tag[-6:]}a{r}", f"{self.tag[-6:]}b{r}"
            _run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            _run("ip", "link", "set", a, "netns", ns)
            _run("ip", "link", "set", b, "netns", br)
            _run("ip", "-n", ns, "link", "set", a, "name", "eth0")
            _run("ip", "-n", ns, "addr", "add", f"{self._addr(r)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", br, "link", "set", b, "master", "br0")
            _run("ip", "-n", br, "link", "set", b, "up")

    def _remove_network(self) -> None:
        for ns in reversed(self._ns):
            _run("ip", "netns", "del", ns, check=False)
        self._ns.clear()


def _worker_faults(fault: Fault | None) -> list[Any]:
    """The faults the ranks act out themselves (a ``config()``: faultlab_faults.WorkerFault), alone or
    inside a :class:`~clusterdoctor.training.faultlab_faults.Several`."""
    if fault is None:
        return []
    if callable(getattr(fault, "config", None)):
        return [fault]
    return [f for f in getattr(fault, "faults", []) if callable(getattr(f, "config", None))]


def _sleep_unless(halt: threading.Event, seconds: float) -> None:
    """Sleep ``seconds`` in short naps, returning early once ``halt`` is set (no timed lock wait)."""
    end = time.monotonic() + seconds
    while not halt.is_set() and time.monotonic() < end:
        time.sleep(min(0.02, max(0.0, end - time.monotonic())))


def _remove_cgroups(tag: str) -> None:
    try:
        names = [n for n in os.listdir(CGROUP_CPU) if n.startswith(tag)]
    except OSError:
        names = []
    for n in names:
        cg = _Cgroup.__new__(_Cgroup)
        cg.path, cg.pids = os.path.join(CGROUP_CPU, n), []
        cg.remove()


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _last_step(path: Path) -> int | None:
    """The last step index in a probe file (reads only its tail)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 4096))
            tail = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(tail):
        if b'"kind":"step"' in line:
            try:
                return int(json.loads(line)["step"])
            except (ValueError, KeyError):
                continue
    return None
