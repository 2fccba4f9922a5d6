"""NVIDIA DCGM and dcgm-exporter: the errors that stop the exporter, as data.

DCGM returns a ``dcgmReturn_t`` whose text (``errorString``) the exporter logs inside its own message:
``level=fatal msg="Error watching fields: <text>"``. Two of them mean the requested fields need a DCGM
module that this host cannot run: DCGM_ST_MODULE_NOT_LOADED ("This request is serviced by a module of
DCGM that is not currently loaded") and DCGM_ST_PROFILING_NOT_SUPPORTED ("Profiling is not supported
for this group of GPUs or GPU") — the profiling (DCP) fields, ``DCGM_FI_PROF_*``, exist only on
datacenter GPUs of Volta and later. Newer exporters log the same texts at ``level=info`` ("Not
collecting DCP metrics: ...", "Not collecting CPU metrics; ...") and carry on: that is normal and
not an entry here (the pattern needs a fatal or error level).

Sources: NVIDIA go-dcgm ``pkg/dcgm/dcgm_structs.h`` (the status codes and their texts), NVIDIA
dcgm-exporter (its collectors skip unsupported fields since 2.1.2); example lines from public threads.
"""

from __future__ import annotations

import re

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_STRUCTS = "https://github.com/NVIDIA/go-dcgm/blob/main/pkg/dcgm/dcgm_structs.h"

MESSAGES: tuple[Message, ...] = (
    Message(
        code="DCGM101",
        name="dcgm-exporter-module-not-loaded",
        title="dcgm-exporter exits: the fields it watches need a DCGM module this GPU cannot load",
        pattern=(
            r"(?:This request is serviced by a module of DCGM that is not currently loaded|"
            r"Profiling is not supported for this group of GPUs)"
        ),
        trigger="module of DCGM that is not currently loaded",
        triggers=("Profiling is not supported for this group of GPUs",),
        context=r"level=(?:fatal|error)\b",
        flags=re.I,  # logrus prints level=fatal, slog level=ERROR
        meaning=(
            "the exporter asked DCGM to watch fields served by a module that is not loaded (the profiling/"
            "DCP module for DCGM_FI_PROF_* fields) and exits, so no GPU metric is exported"
        ),
        cause=(
            "profiling fields in the exporter's counters CSV on GPUs that do not support them (consumer, "
            "pre-Volta) or a DCGM install without its profiling module; dcgm-exporter before 2.1.2 watched "
            "them by default"
        ),
        fix=(
            "upgrade dcgm-exporter (2.1.2+ skips unsupported fields) or remove the DCGM_FI_PROF_* lines from "
            "its counters CSV (-f / DCGM_EXPORTER_COLLECTORS); on datacenter GPUs install DCGM with its "
            "proprietary modules"
        ),
        verify=("dcgmi modules -l", "dcgmi discovery -l", "kubectl logs <dcgm-exporter pod>"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_STRUCTS,
        example=(
            'time="2020-12-15T11:28:40Z" level=fatal msg="Error watching fields: This request is serviced by '
            'a module of DCGM that is not currently loaded"'
        ),
        example_source="https://github.com/NVIDIA/gpu-monitoring-tools/issues/141",
        causes=("gpu.dcgm",),
    ),
    Message(
        code="DCGM102",
        name="dcgm-exporter-no-nvml",
        title="dcgm-exporter cannot load NVML in its container (no NVIDIA runtime injected it)",
        pattern=r"Cannot init NVML library; err: (?:ERROR_LIBRARY_NOT_FOUND|NVML Shared Library Not Found)",
        trigger="Cannot init NVML library; err: ",
        meaning="the exporter found no libnvidia-ml.so in its container and exits without exporting anything",
        cause=(
            "the exporter pod did not run under the NVIDIA container runtime: no runtimeClassName: nvidia "
            "(where nvidia is not the default runtime), the container toolkit not installed or configured on "
            "the node, or no driver on it"
        ),
        fix=(
            "run the exporter with runtimeClassName: nvidia (the GPU operator sets it), or make nvidia the "
            "default runtime (nvidia-ctk runtime configure --set-as-default); restart the pod"
        ),
        verify=(
            "kubectl get pod <dcgm-exporter pod> -o jsonpath='{.spec.runtimeClassName}'",
            "nvidia-ctk --version",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/NVIDIA/dcgm-exporter/blob/main/internal/pkg/nvmlprovider/provider.go",
        example='time=2026-09-19T20:06:59.547Z level=ERROR msg="Cannot init NVML library; err: ERROR_LIBRARY_NOT_FOUND"',
        example_source="https://github.com/NVIDIA/dcgm-exporter/issues/612",
        causes=("gpu.container-runtime", "gpu.dcgm"),
    ),
)
