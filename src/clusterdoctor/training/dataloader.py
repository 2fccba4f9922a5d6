"""NUMA-aware DataLoader workers: pin each worker to CPUs of the NUMA node local to the rank's GPU.

DataLoader workers inherit the parent's affinity, which is usually every CPU of the machine (or the
wrong node). :func:`numa_worker_init_fn` returns a ``worker_init_fn`` that, inside each worker and
by worker id, pins the worker to physical cores of the GPU's node:

* the GPU is the rank's CUDA device, mapped through ``CUDA_VISIBLE_DEVICES`` (or its PCI address
  when CUDA is up) to the driver's GPU in the topology model;
* the CPUs are that node's CPUs that this process may use (``os.sched_getaffinity``, i.e. the cgroup
  cpuset, and the topology's ``allowed_cpus``);
* workers are spread over physical cores, SMT siblings kept together: with W workers and C cores,
  each worker gets C/W whole cores (W <= C), else cores are shared round-robin;
* on a machine with one NUMA node, or when the GPU's node is unknown, nothing is pinned (a debug or
  warning message says why).

:class:`NumaDataLoader` is a ``torch.utils.data.DataLoader`` that installs it and also pins the
pin-memory thread to the same node. Torch is imported only when a DataLoader is built or a worker
starts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from clusterdoctor.topology.model import Device, Topology

log = logging.getLogger(__name__)

__all__ = ["NumaWorkerInit", "numa_worker_init_fn", "plan_worker_cpus", "resolve_gpu"]


# -- pure planning (no torch) -------------------------------------------------------------------
def physical_cores(topology: Topology, cpus: Iterable[int]) -> list[tuple[int, ...]]:
    """Group ``cpus`` by physical core (SMT siblings together), cores ordered by their lowest CPU."""
    groups: dict[tuple[int, int], list[int]] = {}
    for c in sorted(set(cpus)):
        info = topology.cpus.get(c)
        key = info.core_key() if info is not None else (-3, c)
        groups.setdefault(key, []).append(c)
    return sorted((tuple(v) for v in groups.values()), key=lambda t: t[0])


def assign_cores(cores: Sequence[tuple[int, ...]], worker_id: int, num_workers: int) -> tuple[int, ...]:
    """CPUs for worker ``worker_id`` of ``num_workers``: an even share of whole cores, or, with more
    workers than cores, one core shared round-robin. Empty only when ``cores`` is empty."""
    if not cores:
        return ()
    n = len(cores)
    w = max(num_workers, 1)
    if w > n:
        return tuple(sorted(cores[worker_id % n]))
    base, extra = divmod(n, w)
    start = worker_id * base + min(worker_id, extra)
    size = base + (1 if worker_id < extra else 0)
    return tuple(sorted(c for core in cores[start : start + size] for c in core))


def plan_worker_cpus(
    topology: Topology, node_cpus: Iterable[int], num_workers: int, allowed: Iterable[int] | None = None
) -> list[tuple[int, ...]]:
    """CPUs of each of ``num_workers`` workers, from ``node_cpus`` limited to ``allowed``."""
    usable = set(node_cpus)
    if allowed is not None:
        usable &= set(allowed)
    cores = physical_cores(topology, usable)
    return [assign_cores(cores, w, num_workers) for w in range(num_workers)]


def _visible_device_entry(device: int, env: Mapping[str, str]) -> str | None:
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if device >= len(entries):
        raise ValueError(f"CUDA device {device} is not in CUDA_VISIBLE_DEVICES={visible!r}")
    return entries[device]


def resolve_gpu(
    topology: Topology,
    gpu: int | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    use_cuda: bool = True,
) -> Device | None:
    """The topology's GPU behind this rank's CUDA device.

    ``gpu`` may be the local CUDA index (default: ``LOCAL_RANK``, else 0) or a GPU name / PCI address
    in the topology. A local index is mapped by PCI address when CUDA is up, else through
    ``CUDA_VISIBLE_DEVICES`` (a number is the driver's index; a ``GPU-`` UUID is matched against the
    GPU's ``uuid`` attribute). None when the GPU cannot be identified.
    """
    env = os.environ if env is None else env
    if isinstance(gpu, str) and not gpu.isdigit():
        return topology.find_device(gpu)
    local = int(gpu) if gpu is not None else int(env.get("LOCAL_RANK", "0") or 0)
    if use_cuda:
        pci = _cuda_pci_address(local)
        if pci is not None:
            dev = topology.find_device(pci)
            if dev is not None:
                return dev
    entry = _visible_device_entry(local, env)
    if entry is None:
        return topology.gpu_by_index(local)
    if entry.isdigit():
        return topology.gpu_by_index(int(entry))
    for g in topology.gpus:
        uuid = str(g.attrs.get("uuid", "")).lower()
        if uuid and (uuid == entry.lower() or uuid.startswith(entry.lower())):
            return g
    log.debug("CUDA_VISIBLE_DEVICES entry %r matches no GPU in the topology", entry)
    return None


def _cuda_pci_address(local: int) -> str | None:
    """``dddd:bb:dd.0`` of CUDA device ``local``, only if torch is already imported and CUDA is up."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available() or local >= torch.cuda.device_count():
            return None
        p = torch.cuda.get_device_properties(local)
        return f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    except Exception:  # pragma: no cover - driver quirks: fall back to the environment
        return None


# -- the worker_init_fn ------------------------------------------------------------------------
class NumaWorkerInit:
    """Picklable ``worker_init_fn``: pins the calling worker by id, then calls ``base_init_fn``.

    ``cores`` is None when nothing should be pinned (``reason`` says why).
    """

    def __init__(
        self,
        cores: list[tuple[int, ...]] | None,
        *,
        node: int | None = None,
        reason: str = "",
        base_init_fn: Callable[[int], Any] | None = None,
    ) -> None:
        self.cores = cores
        self.node = node
        self.reason = reason
        self.base_init_fn = base_init_fn

    @property
    def node_cpus(self) -> tuple[int, ...]:
        """Every CPU the workers may be pinned to (the pin-memory thread gets these); () if none."""
        return tuple(sorted(c for core in self.cores or () for c in core))

    def cpus_for(self, worker_id: int, num_workers: int) -> tuple[int, ...]:
        return assign_cores(self.cores or [], worker_id, num_workers)

    def __call__(self, worker_id: int) -> None:
        if self.cores:
            from torch.utils.data import get_worker_info

            info = get_worker_info()
            num_workers = info.num_workers if info is not None else 1
            cpus = self.cpus_for(worker_id, num_workers)
            pin_process(cpus)
            log.debug("DataLoader worker %d pinned to CPUs %s (NUMA node %s)", worker_id, cpus, self.node)
        if self.base_init_fn is not None:
            self.base_init_fn(worker_id)


def pin_process(cpus: Iterable[int]) -> None:
    """Set the affinity of every thread of this process to ``cpus``."""
    target = set(cpus)
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, target)
        except (ProcessLookupError, PermissionError):  # a thread that just exited
            continue


def pin_thread(native_id: int, cpus: Iterable[int]) -> None:
    """Pin one thread (by its kernel thread id, ``threading.Thread.native_id``) to ``cpus``."""
    os.sched_setaffinity(native_id, set(cpus))


def numa_worker_init_fn(
    topology: Topology | None = None,
    *,
    gpu: int | str | None = None,
    base_init_fn: Callable[[int], Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> NumaWorkerInit:
    """A ``worker_init_fn`` pinning DataLoader workers to the NUMA node of this rank's GPU.

    ``topology`` defaults to this machine's (``clusterdoctor.topology.build.from_sysfs``). ``gpu``:
    see :func:`resolve_gpu`. ``base_init_fn`` is your own ``worker_init_fn``, called after pinning.
    The plan is made here, in the parent (cgroup cpuset = ``os.sched_getaffinity(0)``); each worker
    applies its share when it starts.
    """
    topo = topology if topology is not None else _load_topology()

    def noop(reason: str, level: int = logging.DEBUG) -> NumaWorkerInit:
        log.log(level, "NUMA worker pinning off: %s", reason)
        return NumaWorkerInit(None, reason=reason, base_init_fn=base_init_fn)

    if topo is None:
        return noop("no topology of this machine")
    if not topo.is_multi_node:
        return noop("single NUMA node: workers keep the inherited affinity")
    dev = resolve_gpu(topo, gpu, env=env)
    if dev is None:
        return noop(
            f"GPU {gpu if gpu is not None else 'of this rank'} not found in the topology", logging.WARNING
        )
    node_cpus: tuple[int, ...] | None = None
    if dev.numa_node is not None and topo.node(dev.numa_node) is not None:
        node_cpus = topo.node(dev.numa_node).cpus  # type: ignore[union-attr]
    elif dev.local_cpus:
        node_cpus = dev.local_cpus
    if not node_cpus:
        return noop(f"NUMA node of {dev.name} is unknown; not guessing", logging.WARNING)
    allowed = set(os.sched_getaffinity(0))
    if topo.allowed_cpus is not None:
        allowed &= set(topo.allowed_cpus)
    usable = sorted(set(node_cpus) & allowed)
    if not usable:
        return noop(
            f"none of node {dev.numa_node}'s CPUs ({_fmt(node_cpus)}) is in this process's cpuset "
            f"({_fmt(allowed)}); leaving affinity alone",
            logging.WARNING,
        )
    cores = physical_cores(topo, usable)
    log.debug(
        "NUMA worker pinning: %s on node %s, CPUs %s (%d cores)",
        dev.name,
        dev.numa_node,
        _fmt(usable),
        len(cores),
    )
    return NumaWorkerInit(cores, node=dev.numa_node, base_init_fn=base_init_fn)


def _fmt(cpus: Iterable[int]) -> str:
    from clusterdoctor.topology.cpuset import format_cpulist

    return format_cpulist(cpus)


def _load_topology() -> Topology | None:
    try:
        from clusterdoctor.topology.build import from_sysfs
    except ImportError:
        log.debug("clusterdoctor.topology.build.from_sysfs is not available")
        return None
    try:
        return from_sysfs("/")
    except Exception as exc:  # a broken sysfs must not stop training
        log.warning("could not read this machine's topology (%s); NUMA worker pinning off", exc)
        return None


# -- the DataLoader wrapper (class built on first use, so importing this module needs no torch) --
_CLASS: type | None = None


def _make_class() -> type:
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    from torch.utils.data import DataLoader

    class NumaDataLoader(DataLoader):  # type: ignore[misc,type-arg]
        """``DataLoader`` whose workers and pin-memory thread run on the GPU's NUMA node.

        Takes the DataLoader arguments plus ``topology`` and ``gpu`` (see
        :func:`numa_worker_init_fn`); your ``worker_init_fn`` still runs, after pinning.
        """

        def __init__(
            self,
            dataset: Any,
            *args: Any,
            topology: Topology | None = None,
            gpu: int | str | None = None,
            **kwargs: Any,
        ) -> None:
            base = kwargs.pop("worker_init_fn", None)
            self.numa_init = numa_worker_init_fn(topology, gpu=gpu, base_init_fn=base)
            super().__init__(dataset, *args, worker_init_fn=self.numa_init, **kwargs)

        def _get_iterator(self) -> Any:
            it = super()._get_iterator()
            thread = getattr(it, "_pin_memory_thread", None)
            cpus = self.numa_init.node_cpus
            if thread is not None and cpus and thread.native_id is not None:
                pin_thread(thread.native_id, cpus)
                log.debug("pin-memory thread pinned to CPUs %s", _fmt(cpus))
            return it

    _CLASS = NumaDataLoader
    return _CLASS


def __getattr__(name: str) -> Any:
    if name == "NumaDataLoader":
        return _make_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
