"""Logs of the GPU node services: the NVIDIA device plugin, the GPU operator's validators and the
NVSwitch fabric manager -> :class:`GpuReport` (what they say about the GPUs; their error lines are
catalogued messages, found beside this parser by :mod:`clusterdoctor.observe.messages`).

Recognised by their own lines (NVIDIA/k8s-device-plugin ``cmd/nvidia-device-plugin/main.go``,
``internal/plugin/server.go``, ``internal/rm/health.go``; NVIDIA/gpu-operator ``cmd/nvidia-validator``;
the Fabric Manager User Guide's log format ``[date] [LEVEL] [tid N] text``), with any prefix in front
(``kubectl logs --prefix``, journald, klog's ``I1204 07:31:31.764138 1 main.go:235]``):

- device plugin: "Starting FS watcher", "Loading NVML", "Starting GRPC server for 'nvidia.com/gpu'",
  "Registered device plugin for 'nvidia.com/gpu' with Kubelet", "No devices found. Waiting
  indefinitely.", and the health checker's ``XidCriticalError: Xid=79 on Device=GPU-…`` (older: "…, the
  device will go unhealthy"), read as an Xid event of that GPU (by UUID) so the Xid table judges it;
- operator validators: "running command chroot with args [/run/nvidia/driver nvidia-smi]", "Detected
  a pre-installed driver on the host", "[Vector addition of 50000 elements]", "all validations are
  successful";
- fabric manager: ``[INFO] [tid 1234] Fabric Manager version … is running``, "Connected to 1 node.",
  "Successfully configured all the available NVSwitches to route GPU NVLink traffic", journald's
  ``nv-fabricmanager[1507]:`` lines, and ``systemctl status nvidia-fabricmanager`` (the unit's
  Description "NVIDIA fabric manager service" and its ``nv-fabricmanager -c .../fabricmanager.cfg``).

A log of these services that says nothing wrong is read, and gives no finding.
"""

from __future__ import annotations

import re

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.common import decode, unquote_lines
from clusterdoctor.topology.gpu import GpuEvent, GpuReport, GpuState

__all__ = ["parse_service_log", "sniff_service_log"]

KIND_PLUGIN = "NVIDIA device plugin log"
KIND_VALIDATOR = "GPU operator validator log"
KIND_FM = "fabric manager log"

_PLUGIN = re.compile(
    r"Starting FS watcher|Loading NVML|Starting GRPC server for '[\w./-]{1,64}'|Registered device plugin "
    r"for '[\w./-]{1,64}' with Kubelet|Registered device plugin with Kubelet|No devices found\. Waiting "
    r"indefinitely|Starting NVIDIA Device Plugin|XidCriticalError: Xid=\d{1,4}|Retr(?:ei|ie)ving plugins"
    r"|Starting to serve '?[\w./-]{1,64}'? on /var/lib/kubelet/device-plugins"
)
_VALIDATOR = re.compile(
    r"running command chroot with args \[/run/nvidia/driver|Detected (?:a )?pre-installed driver on the host"
    r"|\[Vector addition of \d{1,9} elements\]|all validations are successful|waiting for nvidia container "
    r"stack to be setup|Attempting to validate a (?:pre-installed driver|driver container)"
)
_FM = re.compile(
    r"\[(?:INFO|WARNING|ERROR|DEBUG)\] \[tid \d{1,10}\]|nv-fabricmanager\[\d{1,10}\]:"
    r"|Fabric Manager version \S{1,20} is running|Successfully configured all the available NVSwitches"
    r"|nvidia-fabricmanager-start\.sh\[\d{1,10}\]:"
    # `systemctl status nvidia-fabricmanager`: the unit's Description and its ExecStart command line
    r"|nvidia-fabricmanager\.service - NVIDIA fabric manager service|nv-fabricmanager -c \S{1,200}fabricmanager\.cfg"
    # older systemd names the unit by its Description only: "systemd[1]: Starting NVIDIA fabric
    # manager service..." (journalctl -u nvidia-fabricmanager in dstackai/dstack#2348, incident gpu-021)
    r"|systemd\[\d{1,10}\]: (?:Starting|Started|Stopping|Stopped|Failed to start) NVIDIA fabric manager service"
)
_XID = re.compile(
    r"XidCriticalError: Xid=(?P<code>\d{1,4}) on Device=(?P<dev>GPU-[0-9a-fA-F-]{8,64}|MIG-[0-9a-fA-F-]{8,64}|\S{1,80}?)[;,]"
)
_UNHEALTHY = re.compile(r"'(?P<res>[\w./-]{1,64})' device marked unhealthy: (?P<dev>\S{1,80})")
_FM_VERSION = re.compile(r"Fabric Manager version (?:is : )?(?P<v>\d[\w.]{1,20})")
_FM_OK = re.compile(r"Successfully configured all the available (?:GPUs and )?NVSwitches")


def _kind(text: str) -> str | None:
    head = text[:65536]
    counts = {
        KIND_PLUGIN: len(_PLUGIN.findall(head)),
        KIND_VALIDATOR: len(_VALIDATOR.findall(head)),
        KIND_FM: len(_FM.findall(head)) if "abric" in head else 0,
    }
    best = max(counts, key=lambda k: counts[k])
    return best if counts[best] else None


def sniff_service_log(head: bytes) -> bool:
    """Whether ``head`` is a log of the device plugin, the operator's validators or the fabric manager."""
    return _kind(head[:65536].decode("utf-8", errors="replace")) is not None


def parse_service_log(data: bytes | str, path: str | None = None) -> GpuReport:
    """What the log says about the GPUs (Xid events the device plugin saw, the fabric manager's state).
    InputError when it is none of these logs."""
    src = path or "<GPU service log>"
    text = decode(data, path)
    kind = _kind(text)
    if kind is None:
        raise InputError("not a device plugin, GPU operator validator or fabric manager log", path)
    report = GpuReport(kind, src)
    report.facts.add("service_log")
    by_uuid: dict[str, GpuState] = {}
    for lineno, line in enumerate(unquote_lines(text), 1):
        m = _XID.search(line)
        if m:
            dev = m.group("dev")
            g = by_uuid.get(dev)
            if g is None:
                g = by_uuid[dev] = GpuState(uuid=dev if dev.startswith(("GPU-", "MIG-")) else None)
                g.sources.append(src)
                report.gpus.append(g)
            g.events.append(
                GpuEvent(
                    "xid",
                    f"device plugin: {line.strip()[:200]}",
                    code=int(m.group("code")),
                    source=src,
                    line=lineno,
                )
            )
            continue
        m = _UNHEALTHY.search(line)
        if m:
            report.attrs.setdefault("unhealthy", []).append(m.group("dev"))
            continue
        if kind == KIND_FM:
            v = _FM_VERSION.search(line)
            if v:
                report.attrs["fabric_manager_version"] = v.group("v")
            if _FM_OK.search(line):
                report.attrs["fabric_configured"] = True
    if report.gpus:
        report.facts.add("xid_events")
    return report
