"""Optional NVML (nvidia-ml-py, ``import pynvml``): which processes hold a context on which GPU.

NVML is imported inside the functions, never at module import, and everything here degrades to an
empty answer (no error) when the library, the driver or a GPU is absent. GPU indices are NVML's
(the order ``nvidia-smi`` prints, i.e. PCI bus order), which is the ``index`` of GPUs in
:class:`~clusterdoctor.topology.model.Topology` built from nvidia-smi or sysfs.
"""

from __future__ import annotations

from typing import Any


def _load() -> Any | None:
    try:
        import pynvml  # type: ignore[import-not-found]
    except Exception:  # ImportError, or a broken install
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None
    return pynvml


def gpu_processes() -> dict[int, list[int]]:
    """``{pid: [gpu index, ...]}`` for every process with a compute or graphics context, or ``{}``.

    Returns ``{}`` without error when nvidia-ml-py is not installed, the driver is not loaded or
    there is no GPU. A GPU whose process list cannot be read (e.g. no permission in a container)
    is skipped.
    """
    nv = _load()
    if nv is None:
        return {}
    out: dict[int, list[int]] = {}
    try:
        count = nv.nvmlDeviceGetCount()
        getters = [
            getattr(nv, name, None)
            for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses")
        ]
        for index in range(count):
            try:
                handle = nv.nvmlDeviceGetHandleByIndex(index)
            except Exception:
                continue
            for getter in getters:
                if getter is None:
                    continue
                try:
                    procs = getter(handle)
                except Exception:
                    continue
                for p in procs or ():
                    pid = getattr(p, "pid", None)
                    if isinstance(pid, int) and pid > 0:
                        lst = out.setdefault(pid, [])
                        if index not in lst:
                            lst.append(index)
    except Exception:
        return {}
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass
    return out


def gpu_uuids() -> dict[str, int]:
    """``{"GPU-<uuid>": index}`` for every GPU NVML sees (MIG devices not included), or ``{}``.

    Lets the placement audit resolve ``CUDA_VISIBLE_DEVICES=GPU-<uuid>`` when the topology source
    did not record UUIDs.
    """
    nv = _load()
    if nv is None:
        return {}
    out: dict[str, int] = {}
    try:
        for index in range(nv.nvmlDeviceGetCount()):
            try:
                uuid = nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(index))
            except Exception:
                continue
            if isinstance(uuid, bytes):
                uuid = uuid.decode("ascii", "replace")
            if uuid:
                out[str(uuid)] = index
    except Exception:
        return {}
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass
    return out
