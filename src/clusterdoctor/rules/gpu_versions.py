"""The loaded NVIDIA kernel module against the user-space driver the host has installed.

Input: ``nvidia_versions`` (:mod:`clusterdoctor.observe.gpu.driver_versions`: ``/proc/driver/nvidia/version``,
``dpkg -l`` rows of the driver packages, apt history entries that changed them).
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input(
    "nvidia_versions",
    "no NVIDIA driver versions (cat /proc/driver/nvidia/version, dpkg -l | grep nvidia, /var/log/apt/history.log)",
)

_FIX = (
    "reboot the node (or unload and reload the nvidia modules: stop GPU clients, rmmod nvidia_uvm nvidia_drm "
    "nvidia_modeset nvidia, modprobe nvidia) so that the kernel module matches the installed user space; "
    "hold the driver packages (apt-mark hold) or exclude them from unattended-upgrades"
)
_VERIFY = ("cat /proc/driver/nvidia/version", "dpkg -l | grep -E 'nvidia|libnvidia'", "nvidia-smi")


@rule(
    id="GPU022",
    name="gpu-driver-version-mismatch",
    layer="gpu",
    title="The loaded NVIDIA kernel module is not the installed user-space driver (or was replaced under it)",
    requires=("nvidia_versions",),
    severity=Severity.CRITICAL,
    causes=("gpu.driver-mismatch",),
)
def driver_version_mismatch(obs: Observations) -> Iterator[Finding]:
    """The kernel module in ``/proc/driver/nvidia/version`` differs from the installed driver packages, or
    apt replaced the NVIDIA user-space packages (often unattended-upgrades) while a module was loaded.

    **Symptom**: `nvidia-smi` prints `Failed to initialize NVML: Driver/library version mismatch`; CUDA
    programs fail to initialise; the version in /proc/driver/nvidia/version is not the one `dpkg -l` lists.
    **Why**: NVML and libcuda talk to the kernel module of their own release only; installing a new driver
    replaces the libraries at once, but the old module stays loaded until it is reloaded or the node reboots.
    **Fix**: reboot the node (or reload the nvidia modules) so the module matches the libraries; keep
    unattended-upgrades away from the driver packages (apt-mark hold).
    **Verify**: `cat /proc/driver/nvidia/version` and `nvidia-smi` report the release `dpkg -l` lists.
    """
    all_dv = obs.get("nvidia_versions") or []
    modules = {dv.kernel_module for dv in all_dv if dv.kernel_module}
    for dv in all_dv:
        for mod in sorted(modules):
            other = sorted({v for v, _ in dv.packages.values() if v != mod})
            if not other:
                continue
            pk = [(p, v, n) for p, (v, n) in sorted(dv.packages.items()) if v != mod]
            yield driver_version_mismatch.finding(
                f"the loaded NVIDIA kernel module is {mod} but the installed driver packages are "
                f"{', '.join(other)}: NVML and CUDA refuse to talk to the module (version mismatch)",
                evidence=[
                    Evidence("kernel module (/proc/driver/nvidia/version)", value=mod, source=dv.source)
                ]
                + [Evidence(f"line {n}: package {p}", value=v, source=dv.source) for p, v, n in pk[:5]],
                subject=f"driver {mod} vs {other[0]}",
                confidence=0.95,
                fix=_FIX,
                verify=_VERIFY,
            ).acting(Action.REBOOT_NODE)
        changed = [c for c in dv.changes if c.old and c.old != c.new]
        if changed and not modules:
            olds = sorted({c.old for c in changed if c.old})
            news = sorted({c.new for c in changed})
            f = driver_version_mismatch.finding(
                f"apt replaced the NVIDIA driver's user space ({', '.join(olds)} -> {', '.join(news)}) at "
                f"{changed[0].when or 'a time not shown'}: a module loaded before stays at the old release until "
                "the node reboots, and NVML reports a driver/library version mismatch",
                evidence=[
                    Evidence(
                        f"line {c.line}: {c.package} {c.old} -> {c.new}",
                        value=c.when or None,
                        source=dv.source,
                    )
                    for c in changed[:5]
                ],
                subject=f"driver {olds[0]} -> {news[-1]}",
                severity=Severity.WARNING,
                confidence=0.7,
                fix=_FIX,
                verify=_VERIFY,
            ).acting(Action.REBOOT_NODE)
            yield f


register_input(
    "component_versions",
    "no program version lines (nvcc --version, nvidia-smi --version, kubectl version, k3s -v, ofed_info -s ...)",
)


def _driver_cuda(obs: Observations) -> list[tuple[str, str]]:
    """(CUDA version the driver supports, where it is said): nvidia-smi's header, `nvidia-smi --version`."""
    out = [
        (str(r.attrs["cuda_version"]), r.source)
        for r in obs.get("gpu_reports") or []
        if r.attrs.get("cuda_version")
    ]
    out += [
        (c.version, f"{c.path}:{c.line}")
        for c in obs.get("component_versions") or []
        if c.component == "driver cuda"
    ]
    return out


def _major(v: str) -> int | None:
    head = v.lstrip("v").split(".", 1)[0]
    return int(head) if head.isdigit() else None


@rule(
    id="GPU024",
    name="cuda-toolkit-newer-than-driver",
    layer="gpu",
    title="The CUDA toolkit (nvcc) is of a newer major release than the NVIDIA driver supports",
    requires=("component_versions",),
    severity=Severity.WARNING,
    causes=("nccl.cuda-driver-runtime", "gpu.driver-mismatch"),
)
def cuda_toolkit_newer_than_driver(obs: Observations) -> Iterator[Finding]:
    """``nvcc --version`` says a CUDA release whose major number is above the ``CUDA Version`` that
    ``nvidia-smi`` prints for the installed driver (the newest CUDA that driver runs).

    **Symptom**: programs built with that toolkit fail at their first CUDA call with ``CUDA driver
    version is insufficient for CUDA runtime version`` (error 35, ``cudaErrorInsufficientDriver``);
    ``torch.cuda.is_available()`` is False for a wheel of that CUDA; ``nvidia-smi`` works.
    **Why**: a CUDA runtime needs a driver of at least its major release (minor version compatibility
    only covers minors within one major); ``nvidia-smi``'s ``CUDA Version`` is the newest the driver
    runs, not what is installed.
    **Fix**: upgrade the NVIDIA driver to a release of that CUDA major (or newer), or install the toolkit
    and framework builds of the driver's CUDA major; on data-centre GPUs the cuda-compat package gives
    forward compatibility without a driver upgrade.
    **Verify**: `nvidia-smi` (header: CUDA Version) and `nvcc --version`; run `deviceQuery`.

    Anti-pattern: reading ``CUDA Version: 11.4`` in ``nvidia-smi`` as the installed toolkit and
    installing a CUDA 12 toolkit beside it. Same major, newer minor (12.4 on a driver of 12.2) is not
    judged: minor version compatibility runs most of it.
    """
    drivers = [(v, where) for v, where in _driver_cuda(obs) if _major(v) is not None]
    if not drivers:
        return
    for c in obs.get("component_versions") or []:
        if c.component != "cuda toolkit" or _major(c.version) is None:
            continue
        older = [(v, where) for v, where in drivers if (_major(v) or 0) < (_major(c.version) or 0)]
        if not older:
            continue
        v, where = older[0]
        f = cuda_toolkit_newer_than_driver.finding(
            f"the CUDA toolkit is {c.version} (nvcc) but the NVIDIA driver runs CUDA up to {v}: programs built "
            f"with CUDA {_major(c.version)}.x fail with 'CUDA driver version is insufficient' (error 35)",
            evidence=[
                Evidence("nvcc: Cuda compilation tools, release", c.version, source=f"{c.path}:{c.line}"),
                Evidence("driver's CUDA Version (nvidia-smi)", v, source=where),
            ],
            subject=f"CUDA {c.version} vs driver CUDA {v}",
            confidence=0.7,
        )
        f.action = Action.CONFIGURE
        yield f
