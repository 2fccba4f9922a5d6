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
    Message(
        code="DCGM103",
        name="dcgm-hostengine-unreachable",
        title="dcgm-exporter (or dcgmi) cannot reach nv-hostengine: no GPU metric is collected",
        pattern=r"Host engine connection invalid/disconnected",
        trigger="Host engine connection invalid/disconnected",
        subject="{host}|nv-hostengine",
        meaning=(
            "the DCGM client (dcgm-exporter in remote-hostengine mode, dcgmi) has no connection to the DCGM "
            "host engine: it exits at start, or keeps serving the values it had before the engine went away"
        ),
        cause=(
            "nv-hostengine is not running where the client looks (the DCGM service or the operator's "
            "nvidia-dcgm pod is down, crashed or was restarted), the exporter points at an address where "
            "none listens (DCGM_REMOTE_HOSTENGINE_INFO=localhost:5555 with the standalone DCGM disabled), or "
            "nv-hostengine binds only 127.0.0.1 while the client connects from elsewhere"
        ),
        fix=(
            "start nv-hostengine (systemctl start nvidia-dcgm, or enable dcgm in the GPU operator's "
            "ClusterPolicy) or drop DCGM_REMOTE_HOSTENGINE_INFO so the exporter embeds its own engine; bind "
            "nv-hostengine with -b to the address the exporter uses; restart the exporter after the engine"
        ),
        verify=("dcgmi discovery -l", "systemctl status nvidia-dcgm", "kubectl logs <dcgm-exporter pod>"),
        severity=Severity.WARNING,
        action=Action.RESTART_SERVICE,
        source="https://github.com/NVIDIA/dcgm-exporter/blob/main/README.md",
        example=(
            'time="2022-09-29T12:09:14Z" level=fatal msg="Error connecting to nv-hostengine: Host engine '
            'connection invalid/disconnected"'
        ),
        example_source="https://github.com/NVIDIA/gpu-operator/issues/414",
        causes=("gpu.dcgm",),
    ),
    Message(
        code="DCGM104",
        name="dcgm-exporter-field-not-supported",
        title="dcgm-exporter exits: DCGM refuses to watch a field this GPU does not support",
        pattern=r"Error watching fields: Feature not supported",
        trigger="Error watching fields: Feature not supported",
        subject="{host}|dcgm-exporter",
        meaning=(
            "DCGM answered DCGM_ST_NOT_SUPPORTED when the exporter asked it to watch its metric list, and the "
            "exporter exits, so no GPU metric is exported"
        ),
        cause=(
            "the exporter's counters CSV lists a field the GPU lacks, most often a profiling (DCP) metric such "
            "as DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE on a GPU without that pipe; exporters before the fix "
            "of dcgm-exporter#86 did not skip unsupported metric groups"
        ),
        fix=(
            "upgrade dcgm-exporter (it queries the supported metric groups and skips the rest) or remove the "
            "unsupported DCGM_FI_PROF_* lines from its counters CSV; restart the exporter"
        ),
        verify=("dcgmi profile -l", "kubectl logs <dcgm-exporter pod>"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/NVIDIA/dcgm-exporter/pull/86",
        example="FATA[0001] Error watching fields: Feature not supported",
        example_source="https://github.com/NVIDIA/dcgm-exporter/pull/86",
        causes=("gpu.dcgm",),
    ),
    Message(
        code="DCGM105",
        name="dcgm-exporter-metric-skipped",
        title="dcgm-exporter skips a metric of its list that this GPU does not enable (normal)",
        pattern=r"Skipping line (?P<line>\d{1,5}) \('(?P<field>DCGM_FI_\w{1,64})'\): metric not enabled",
        trigger="): metric not enabled",
        subject="{field}",
        meaning=(
            "the exporter found a field of its counters CSV that this GPU (or DCGM build) does not provide, "
            "left it out and carries on: every other metric is exported"
        ),
        cause=(
            "a profiling (DCP) field the GPU lacks, such as a tensor pipe of another architecture; expected "
            "on that GPU, not a fault"
        ),
        fix="nothing to fix; remove the line from the counters CSV to silence it, or query the field on a GPU that has it",
        verify=("dcgmi profile -l", "curl -s localhost:9400/metrics | grep DCGM_FI_PROF"),
        severity=Severity.INFO,
        action=Action.NONE,
        source="https://github.com/NVIDIA/dcgm-exporter/pull/86",
        example="WARN[0000] Skipping line 24 ('DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE'): metric not enabled",
        example_source="https://github.com/NVIDIA/dcgm-exporter/pull/86",
        confidence=0.5,
    ),
    Message(
        code="DCGM106",
        name="dcgm-profiling-module-error",
        title="DCGM's profiling module fails to watch the DCP fields (exporter exits, dcgmi dmon fails)",
        pattern=r"The third-party Profiling module returned an unrecoverable error",
        trigger="The third-party Profiling module returned an unrecoverable error",
        subject="{host}|DCGM profiling module",
        meaning=(
            "DCGM_ST_PROFILING_LIBRARY_ERROR: the profiling library under DCGM could not enable the performance "
            "counters for the DCGM_FI_PROF_* fields, so dcgm-exporter exits (CrashLoopBackOff) or dcgmi "
            "dmon -e 10xx fails"
        ),
        cause=(
            "another client holds the GPU's performance counters (a second dcgm-exporter or nv-hostengine "
            "besides the GPU operator's, Nsight Compute/Systems, a profiler in a job), or a driver bug with "
            "GSP firmware (R535, open-gpu-kernel-modules#446: disabling GSP fixed it)"
        ),
        fix=(
            "run one DCGM per node (remove an extra exporter or host engine; pause profilers with dcgmi "
            "profile --pause around Nsight runs); on the GSP driver bug upgrade the driver or load nvidia "
            "with NVreg_EnableGpuFirmware=0; or drop the DCGM_FI_PROF_* fields from the counters CSV"
        ),
        verify=(
            "dcgmi dmon -e 1001 -c 1",
            "kubectl get pods -A | grep -i dcgm",
            "nvidia-smi -q | grep -i 'GSP Firmware'",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_STRUCTS + " (DCGM_ST_PROFILING_LIBRARY_ERROR)",
        example=(
            'time="2023-08-01T02:47:46Z" level=fatal msg="Failed to watch metrics: Error watching fields: The '
            'third-party Profiling module returned an unrecoverable error"'
        ),
        example_source="https://github.com/NVIDIA/dcgm-exporter/issues/148",
        causes=("gpu.dcgm",),
    ),
)
