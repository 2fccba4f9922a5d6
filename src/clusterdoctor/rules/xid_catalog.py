"""NVIDIA Xid codes: meaning, severity and the action NVIDIA documents, as data with their source.

Source: NVIDIA, "Xid Errors" and "Analyzing Xid Errors with the Xid Catalog"
(docs.nvidia.com/deploy/xid-errors/, the catalog's *Resolution Bucket (Immediate Action)* column:
RESTART_APP, RESET_GPU, RESTART_BM (reboot the node), WORKFLOW_*, CONTACT_SUPPORT) and NVIDIA's
"GPU Memory Error Management" (A100+: row remapping, contained/uncontained ECC). Meanings and actions
are paraphrased, not copied. Severity is clusterdoctor's reading of the action: an application
restart is a warning about the job; anything that needs the GPU reset, the node rebooted or the board
serviced is critical for the node.

Each code also says what acting on it takes (``act``, a :class:`~clusterdoctor.model.Action`: the
ranking's tie-break, so that of two findings with the same score the Xid 94 that needs a reset leads the
Xid 31 the program fixes) and which incident-corpus cause classes it names (``causes``:
tests/data/incidents/causes/gpu.toml). Xid 154 names its recovery action in its message ("... to 0x2
(Node Reboot Required)", the driver's ``_gpuRecoveryActionName``): :func:`recovery_action` reads it.

SXid codes (NVSwitch, "Xid and SXid Errors" for HGX/NVSwitch systems) are too many to list; every
SXid is treated as an NVSwitch fault whose NVLink ports lead to GPUs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterdoctor.model import Action, Severity

__all__ = ["RECOVERY_ACTIONS", "XID_CATALOG", "XID_SOURCE", "XidInfo", "recovery_action", "xid_info"]

XID_SOURCE = (
    "NVIDIA Xid catalog, docs.nvidia.com/deploy/xid-errors/ (resolution bucket, immediate action); "
    "NVIDIA GPU Memory Error Management (A100+); code names from open-gpu-kernel-modules "
    "src/common/sdk/nvidia/inc/nverror.h"
)

# actions (what an operator does), kept short and uniform
RESTART_APP = "restart the application (the GPU itself is usable)"
RESET_GPU = "drain the GPU's jobs and reset it (nvidia-smi -r -i <id>, or reboot the node)"
REBOOT_NODE = "drain the node and reboot it"
RMA = "drain the node; run dcgmi diag -r 3; if it fails or recurs, reseat/RMA the board"
CHECK_BUS = "drain the node; check PCIe seating, risers and power; reboot; RMA if it recurs"
UPDATE_DRIVER = "drain and reset the GPU; update the driver/firmware if it recurs"

# incident-corpus cause classes (tests/data/incidents/causes/gpu.toml)
XA = "gpu.xid-app"
ECC = "gpu.ecc-uncorrectable"
REMAP = "gpu.row-remap"
BUS = "gpu.fallen-off-bus"
PCIE = "gpu.pcie-degraded"
GSP = "gpu.gsp-timeout"
RESET = "gpu.reset-required"
NVLINK = "gpu.nvlink-fault"
INIT = "gpu.init-failed"
HW = "gpu.hw-faulty"


@dataclass(frozen=True)
class XidInfo:
    code: int
    name: str
    meaning: str
    severity: Severity
    action: str
    hardware: bool  # points at the GPU/board rather than the application
    # what acting on it takes (the ranking's tie-break: an Xid 94 that needs a reset before an Xid 31
    # that the program fixes) and the cause classes it names
    act: Action = Action.RESET_DEVICE
    causes: tuple[str, ...] = ()


_C = Severity.CRITICAL
_W = Severity.WARNING
_I = Severity.INFO
_A = Action


def _app(code: int, name: str, meaning: str, sev: Severity = _W, act: Action = Action.FIX_PROGRAM) -> XidInfo:
    """An application-class Xid: NVIDIA's bucket RESTART_APP, the GPU is usable."""
    return XidInfo(code, name, meaning, sev, RESTART_APP, False, act, (XA,))


XID_CATALOG: dict[int, XidInfo] = {
    x.code: x
    for x in (
        # -- the application's fault (NVIDIA: RESTART_APP; the GPU is usable) --------------------------
        _app(
            8,
            "GPU stopped processing",
            "a channel stopped making progress (idle timeout)",
            _W,
            _A.RESTART_JOB,
        ),
        _app(
            13,
            "Graphics engine exception",
            "the GPU raised an exception for the running program (e.g. out-of-range address, illegal "
            "instruction); usually an application bug, hardware only if it repeats across jobs",
        ),
        _app(
            31,
            "GPU memory page fault",
            "MMU fault: the program touched memory it does not own (illegal address); usually an "
            "application or driver bug",
        ),
        _app(
            43,
            "GPU stopped processing",
            "a user program hit a fault and its channel was stopped; the GPU is fine",
            _I,
            _A.RESTART_JOB,
        ),
        XidInfo(
            45,
            "Preemptive cleanup",
            "channels torn down after an earlier error or a killed process; a consequence, not a cause",
            _I,
            "none (look at the Xid before it)",
            False,
            _A.OBSERVE,
            (XA,),
        ),
        _app(56, "Display engine error", "display engine error", _I, _A.RESTART_JOB),
        _app(68, "Video decoder exception", "NVDEC exception", _W, _A.RESTART_JOB),
        _app(69, "Graphics engine class error", "graphics engine class error"),
        _app(109, "Context switch timeout", "a context switch timed out", _W, _A.RESTART_JOB),
        _app(
            174,
            "Process killed silently",
            "the driver killed a process's channels without a report",
            _I,
            _A.RESTART_JOB,
        ),
        # -- memory ----------------------------------------------------------------------------------------
        XidInfo(
            48,
            "Double-bit ECC error",
            "an uncorrectable (double-bit) ECC error in GPU memory",
            _C,
            RESET_GPU + "; row remap or page retirement follows",
            True,
            _A.RESET_DEVICE,
            (ECC,),
        ),
        XidInfo(
            63,
            "Row remapping / page retirement event",
            "an ECC error was recorded for remapping (A100+) or page retirement; the remap takes effect at "
            "the next GPU reset",
            _W,
            "reset the GPU when its jobs allow, to apply the remap",
            True,
            _A.RESET_DEVICE,
            (REMAP,),
        ),
        XidInfo(
            64,
            "Row remapping / page retirement failure",
            "recording the remap or retirement failed",
            _C,
            RMA,
            True,
            _A.REPLACE_HARDWARE,
            (REMAP,),
        ),
        XidInfo(
            92,
            "High single-bit ECC error rate",
            "correctable ECC errors arrive at a high rate",
            _W,
            "watch the ECC counters; run dcgmi diag -r 3 at the next drain; RMA if the rate persists",
            True,
            _A.OBSERVE,
            (HW,),
        ),
        XidInfo(
            94,
            "Contained ECC error",
            "an uncorrectable ECC error was contained to the application that used the memory; other work "
            "on the GPU is unaffected",
            _W,
            RESTART_APP + "; reset the GPU at the next drain to apply the remap",
            True,
            _A.RESET_DEVICE,
            (ECC,),
        ),
        XidInfo(
            95,
            "Uncontained ECC error",
            "an uncorrectable ECC error could not be contained: every application on the GPU is affected",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (ECC,),
        ),
        XidInfo(
            140,
            "Unrecovered ECC error",
            "an ECC error that was not recovered",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (ECC,),
        ),
        XidInfo(
            156,
            "Resource retirement event",
            "a memory resource was retired",
            _W,
            "reset the GPU at the next drain",
            True,
            _A.RESET_DEVICE,
            (REMAP,),
        ),
        XidInfo(
            157,
            "Resource retirement failure",
            "retiring a memory resource failed",
            _C,
            RMA,
            True,
            _A.REPLACE_HARDWARE,
            (REMAP,),
        ),
        XidInfo(
            168,
            "Reduced GPU memory capacity",
            "the GPU runs with less memory than it has (retired resources)",
            _C,
            RMA,
            True,
            _A.REPLACE_HARDWARE,
            (REMAP, HW),
        ),
        XidInfo(
            171,
            "Uncorrectable DRAM error",
            "an uncorrectable error in GPU DRAM",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (ECC,),
        ),
        XidInfo(
            172,
            "Uncorrectable SRAM error",
            "an uncorrectable error in on-chip SRAM",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (ECC,),
        ),
        XidInfo(
            175,
            "Memory subsystem error",
            "the GPU's memory subsystem reported an error",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (ECC, HW),
        ),
        # -- the bus, power and the board ------------------------------------------------------------------
        XidInfo(
            79,
            "GPU has fallen off the bus",
            "the GPU stopped answering on PCIe",
            _C,
            CHECK_BUS,
            True,
            _A.REBOOT_NODE,
            (BUS,),
        ),
        XidInfo(
            54,
            "Auxiliary power not connected",
            "the board's auxiliary power cable is missing or failing",
            _C,
            CHECK_BUS,
            True,
            _A.REPLACE_HARDWARE,
            (HW,),
        ),
        XidInfo(
            167,
            "PCIe fatal timeout",
            "a PCIe transaction to the GPU timed out fatally",
            _C,
            CHECK_BUS,
            True,
            _A.REBOOT_NODE,
            (BUS, PCIE),
        ),
        XidInfo(
            176,
            "PCIe correctable error fault",
            "correctable PCIe errors past the driver's limit",
            _W,
            CHECK_BUS,
            True,
            _A.REPLACE_HARDWARE,
            (PCIE,),
        ),
        XidInfo(
            32,
            "Invalid or corrupted push buffer stream",
            "corrupted command stream (PCIe or driver)",
            _W,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW, PCIE),
        ),
        XidInfo(
            80,
            "Push buffer CRC mismatch",
            "a corrupted push buffer (PCIe or memory)",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW, PCIE),
        ),
        XidInfo(
            38,
            "Driver firmware error",
            "the driver's firmware reported an error",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            44,
            "Graphics engine fault during context switch",
            "graphics engine fault during a context switch",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            46,
            "GPU stopped processing",
            "the GPU stopped processing work",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            57,
            "Error programming video memory interface",
            "memory interface error",
            _C,
            RMA,
            True,
            _A.REPLACE_HARDWARE,
            (HW,),
        ),
        XidInfo(
            58,
            "Unstable video memory interface",
            "memory interface unstable",
            _C,
            RMA,
            True,
            _A.REPLACE_HARDWARE,
            (HW,),
        ),
        XidInfo(
            59,
            "Internal micro-controller error",
            "a GPU micro-controller (PMU) reported an error",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            61,
            "Internal micro-controller breakpoint/warning",
            "a GPU micro-controller stopped at a breakpoint",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            62,
            "Internal micro-controller halt",
            "a GPU micro-controller halted",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            81,
            "VGA subsystem error",
            "the VGA subsystem reported an error",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            93,
            "InfoROM erase limit exceeded",
            "the board's InfoROM cannot be written any more",
            _C,
            RMA,
            True,
            _A.REPLACE_HARDWARE,
            (HW,),
        ),
        XidInfo(110, "Security fault", "security fault error", _C, REBOOT_NODE, True, _A.REBOOT_NODE, (HW,)),
        XidInfo(
            121,
            "C2C link error",
            "an error on the chip-to-chip (Grace-Hopper) link",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            122,
            "SPI PMU RPC read failure",
            "SPI/PMU RPC read failure",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            123,
            "SPI PMU RPC write failure",
            "SPI/PMU RPC write failure",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            124,
            "SPI PMU RPC erase failure",
            "SPI/PMU RPC erase failure",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            125,
            "InfoROM file system error",
            "the board's InfoROM file system is corrupt",
            _C,
            RMA,
            True,
            _A.REPLACE_HARDWARE,
            (HW,),
        ),
        XidInfo(
            143,
            "GPU initialisation failure",
            "the GPU failed to initialise",
            _C,
            RMA,
            True,
            _A.REBOOT_NODE,
            (INIT, HW),
        ),
        XidInfo(
            158,
            "GPU fatal timeout",
            "the GPU stopped responding within the driver's fatal timeout",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            159,
            "CHI non-data error",
            "a coherent-interconnect (C2C/CHI) error",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (HW,),
        ),
        XidInfo(
            169, "SEC2 halt", "the GPU's security engine halted", _C, RESET_GPU, True, _A.RESET_DEVICE, (HW,)
        ),
        XidInfo(
            173,
            "C2C fatal link failure",
            "the chip-to-chip link failed",
            _C,
            REBOOT_NODE,
            True,
            _A.REBOOT_NODE,
            (HW,),
        ),
        # -- firmware (GSP) and recovery actions ----------------------------------------------------------
        XidInfo(
            119,
            "GSP RPC timeout",
            "the driver timed out waiting for the GPU System Processor",
            _C,
            UPDATE_DRIVER,
            True,
            _A.RESET_DEVICE,
            (GSP,),
        ),
        XidInfo(
            120,
            "GSP error",
            "the GPU System Processor reported an error",
            _C,
            UPDATE_DRIVER,
            True,
            _A.RESET_DEVICE,
            (GSP,),
        ),
        XidInfo(
            154,
            "GPU recovery action changed",
            "the driver changed the GPU's recovery action (reset or reboot required); read the action in the "
            "message",
            _C,
            RESET_GPU,
            True,
            _A.RESET_DEVICE,
            (RESET,),
        ),
        # -- NVLink -----------------------------------------------------------------------------------------
        XidInfo(
            74,
            "NVLink error",
            "an NVLink reported a fatal error or lost training; the other end (GPU or NVSwitch) is named in "
            "the message",
            _C,
            RESET_GPU + "; if it recurs, check the NVLink/NVSwitch path (reseat, RMA)",
            True,
            _A.RESET_DEVICE,
            (NVLINK,),
        ),
        *(
            XidInfo(
                code, name, "an NVLink error (" + name + ")", _C, RESET_GPU, True, _A.RESET_DEVICE, (NVLINK,)
            )
            for code, name in (
                (108, "NVLink remote translation error"),
                (136, "NVLink link training failed (ALI)"),
                (137, "NVLink privilege error"),
                (144, "NVLink SAW error"),
                (145, "NVLink RLW error"),
                (146, "NVLink TLW error"),
                (147, "NVLink TREX error"),
                (148, "NVLink NVLPW control error"),
                (149, "NVLink NETIR error"),
                (150, "NVLink MSE error"),
                (155, "NVLink software-defined error"),
                (166, "NVLink secure (NVLE) error"),
                (170, "NVLink secure error"),
            )
        ),
    )
}

# what the Xid 154 message says the recovery action now is ("... to 0x2 (Node Reboot Required)"), the
# driver's _gpuRecoveryActionName (open-gpu-kernel-modules src/nvidia/src/kernel/gpu/gpu.c)
RECOVERY_ACTIONS: dict[str, Action] = {
    "gpu reset required": Action.RESET_DEVICE,
    "node reboot required": Action.REBOOT_NODE,
    "drain p2p": Action.RESET_DEVICE,
    "drain and reset": Action.RESET_DEVICE,
    "recover imex domain": Action.RESTART_SERVICE,
    "none": Action.OBSERVE,
}
_RECOVERY_TO = re.compile(
    r"recovery action changed from [^()]{0,16}\([^)]{0,40}\) to [^()]{0,16}\((?P<to>[^)]{1,40})\)", re.I
)


def recovery_action(message: str) -> Action | None:
    """The action an Xid 154 message names (None when the message does not say)."""
    m = _RECOVERY_TO.search(message or "")
    return RECOVERY_ACTIONS.get(m.group("to").strip().lower()) if m else None


def xid_info(code: int) -> XidInfo:
    """The catalog entry, or a generic one for codes not listed (looked up by the operator)."""
    found = XID_CATALOG.get(code)
    if found is not None:
        return found
    return XidInfo(
        code,
        f"Xid {code}",
        "not in clusterdoctor's catalog: look it up in NVIDIA's Xid catalog",
        Severity.WARNING,
        "look the code up in NVIDIA's Xid catalog; run dcgmi diag -r 2",
        False,
        Action.OBSERVE,
        (),
    )
