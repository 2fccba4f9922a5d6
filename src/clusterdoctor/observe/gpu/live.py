"""This node's GPU health, live: NVML (nvidia-ml-py) when present, else ``nvidia-smi`` on PATH; the kernel
log (``dmesg``, else ``journalctl -k``) for Xid/SXid; sysfs for PCIe links.

Every source degrades on its own: a missing library, driver, binary or permission becomes a reason in
the result (shown when the GPU rules are skipped), never an exception. NVML is imported here, inside
the function, so the CLI starts without it (extra ``nvidia``).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.topology.gpu import GpuReport, GpuState, NvLinkState, PcieLink

__all__ = ["LiveGpu", "collect_live_gpu", "read_nvml"]

NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS in nvml.h (r535: 18)


@dataclass
class LiveGpu:
    reports: list[GpuReport] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # sources not read, with the reason
    used: list[str] = field(default_factory=list)


def _call(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # NVMLError_NotSupported, NoPermission, GpuIsLost ...
        return None


def read_nvml() -> tuple[GpuReport | None, str | None]:
    """(report, None) from NVML, or (None, reason) when NVML cannot be used."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except Exception:
        return None, "nvidia-ml-py (pynvml) is not installed (pip install 'clusterdoctor[nvidia]')"
    try:
        pynvml.nvmlInit()
    except Exception as e:
        return None, f"NVML could not start ({type(e).__name__}: {e}); no NVIDIA driver loaded?"
    nv = pynvml
    src = "NVML (live)"
    rep = GpuReport("nvml", src)
    rep.facts.update(
        {
            "identity",
            "clocks",
            "clock_reasons",
            "ecc",
            "remap",
            "retired_pages",
            "pcie",
            "nvlink",
            "processes",
        }
    )
    try:
        drv = _call(nv.nvmlSystemGetDriverVersion)
        for i in range(_call(nv.nvmlDeviceGetCount) or 0):
            h = _call(nv.nvmlDeviceGetHandleByIndex, i)
            if h is None:
                rep.warnings.append(f"NVML: GPU {i} handle not readable")
                continue
            g = GpuState(index=i)
            put = lambda k, v, g=g: g.set(k, v.decode() if isinstance(v, bytes) else v, src)  # noqa: E731
            put("uuid", _call(nv.nvmlDeviceGetUUID, h))
            put("model", _call(nv.nvmlDeviceGetName, h))
            put("driver_version", drv)
            pci = _call(nv.nvmlDeviceGetPciInfo, h)
            if pci is not None:
                from clusterdoctor.observe.gpu.common import norm_bus_id

                bus = getattr(pci, "busId", b"")
                g.bus_id = norm_bus_id(bus.decode() if isinstance(bus, bytes) else str(bus))
            util = _call(nv.nvmlDeviceGetUtilizationRates, h)
            put("util_pct", float(util.gpu) if util is not None else None)
            put("sm_clock_mhz", _call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM))
            put("sm_max_mhz", _call(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM))
            put("temp_c", _call(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU))
            pw = _call(nv.nvmlDeviceGetPowerUsage, h)
            put("power_w", pw / 1000.0 if pw is not None else None)
            pl = _call(nv.nvmlDeviceGetEnforcedPowerLimit, h)
            put("power_limit_w", pl / 1000.0 if pl is not None else None)
            getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
            )
            mask = _call(getter, h) if getter else None
            if mask is not None:
                from clusterdoctor.observe.gpu.nvidia_smi_q import reason_bits

                put("clock_reasons", reason_bits(int(mask)))
            for scope, name in ((nv.NVML_VOLATILE_ECC, "volatile"), (nv.NVML_AGGREGATE_ECC, "aggregate")):
                put(
                    f"ecc_{name}_uncorrectable",
                    _call(nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, scope),
                )
                put(
                    f"ecc_{name}_correctable",
                    _call(nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, scope),
                )
            rr = _call(getattr(nv, "nvmlDeviceGetRemappedRows", None) or (lambda _h: None), h)
            if rr is not None and len(rr) >= 4:
                put("remap_correctable", int(rr[0]))
                put("remap_uncorrectable", int(rr[1]))
                put("remap_pending", bool(rr[2]))
                put("remap_failure", bool(rr[3]))
            link = PcieLink(
                gen_current=_call(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
                gen_max=_call(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
                width_current=_call(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
                width_max=_call(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
                replays=_call(getattr(nv, "nvmlDeviceGetPcieReplayCounter", lambda _h: None), h),
                source=src,
            )
            if any(v is not None for k, v in link.__dict__.items() if k != "source"):
                g.pcie = link
            links = []
            supported = True
            for n in range(NVLINK_MAX_LINKS):
                try:
                    st = nv.nvmlDeviceGetNvLinkState(h, n)
                except Exception as e:
                    if n == 0 and "Not Supported" in str(e):
                        supported = False
                    break
                links.append(NvLinkState(n, active=bool(st), source=src))
            if not supported:
                g.nvlink_support = "none"
            elif links:
                g.nvlinks = links
                g.nvlink_support = "links" if any(x.active for x in links) else "inactive"
            for getter_name in (
                "nvmlDeviceGetComputeRunningProcesses",
                "nvmlDeviceGetGraphicsRunningProcesses",
            ):
                for p in _call(getattr(nv, getter_name, lambda _h: None), h) or ():
                    pid = getattr(p, "pid", None)
                    if isinstance(pid, int) and all(pid != x for x, _ in g.processes):
                        g.processes.append((pid, ""))
            g.sources.append(src)
            rep.gpus.append(g)
    finally:
        _call(nv.nvmlShutdown)
    return rep, None


def _run(args: list[str], timeout: float) -> tuple[bytes | None, str | None]:
    try:
        p = subprocess.run(args, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, f"`{' '.join(args)}` took longer than {timeout:g} s"
    except OSError as e:
        return None, f"`{' '.join(args)}` could not run: {e.strerror or e}"
    if p.returncode != 0:
        err = p.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, f"`{' '.join(args)}` exited {p.returncode}: {err[-1] if err else ''}".strip()
    return p.stdout, None


def kernel_log_bytes(timeout: float = 10.0) -> tuple[bytes | None, str, str | None]:
    """(the NVIDIA lines of the kernel log, how it was read, reason when none could be read)."""
    reasons = []
    for args in (
        ["dmesg", "--time-format", "iso"],
        ["journalctl", "-k", "-o", "short-iso", "--no-pager", "-q", "--since", "-7d"],
    ):
        if not shutil.which(args[0]):
            reasons.append(f"{args[0]} not on PATH")
            continue
        out, why = _run(args, timeout)
        if out is None:
            reasons.append(why or args[0])
            continue
        keep = [
            ln
            for ln in out.splitlines()
            if b"NVRM" in ln or b"nvidia" in ln or b"SXid" in ln or ln[:1] in (b" ", b"\t")
        ]
        return b"\n".join(keep) + b"\n", " ".join(args), None
    return None, "", "; ".join(reasons)


def collect_live_gpu(sysfs_root: str = "/", timeout: float = 10.0, kernel_log: bool = True) -> LiveGpu:
    """Every live GPU source of this node (see the module docstring); ``kernel_log=False`` leaves the
    kernel log to the caller (the agent reads it incrementally)."""
    out = LiveGpu()
    rep, why = read_nvml()
    if rep is not None:
        out.reports.append(rep)
        out.used.append("NVML")
    else:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            out.skipped.append(f"NVML: {why}; nvidia-smi: not on PATH")
        else:
            data, err = _run([smi, "-q", "-x"], timeout)
            if data is None:
                out.skipped.append(f"NVML: {why}; nvidia-smi: {err}")
            else:
                from clusterdoctor.observe.gpu.nvidia_smi_xml import parse_nvidia_smi_xml

                try:
                    out.reports.append(parse_nvidia_smi_xml(data, "nvidia-smi -q -x (live)"))
                    out.used.append("nvidia-smi -q -x")
                except InputError as e:
                    out.skipped.append(f"nvidia-smi -q -x: {e.reason}")
                nl, err = _run([smi, "nvlink", "-s"], timeout)
                if nl is not None and nl.strip():
                    from clusterdoctor.observe.gpu.nvlink import parse_nvlink

                    try:
                        out.reports.append(parse_nvlink(nl, "nvidia-smi nvlink -s (live)"))
                    except InputError:
                        pass
    klog, how, why = kernel_log_bytes(timeout) if kernel_log else (b"", "", None)
    if not kernel_log:
        pass
    elif klog is None:
        out.skipped.append(f"kernel log: {why}")
    elif out.reports or b"NVRM" in klog:
        from clusterdoctor.observe.gpu.kernel_log import parse_kernel_log

        try:
            out.reports.append(parse_kernel_log(klog, f"{how} (live)"))
        except InputError:
            empty = GpuReport("kernel log", f"{how} (live)")
            empty.facts.add("kernel_log")  # read, and no NVIDIA message in it: no Xid
            out.reports.append(empty)
        out.used.append(how)
    from clusterdoctor.observe.gpu.sysfs_link import sysfs_gpu_report

    sysrep = sysfs_gpu_report(sysfs_root, f"{sysfs_root.rstrip('/')}/sys/bus/pci/devices (live)")
    if sysrep is not None:
        out.reports.append(sysrep)
        out.used.append("sysfs PCIe links")
    return out
