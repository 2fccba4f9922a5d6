"""NVIDIA Xid codes: meaning, severity and the action NVIDIA documents, as data with their source.

Source: NVIDIA, "Xid Errors" and "Analyzing Xid Errors with the Xid Catalog"
(docs.nvidia.com/deploy/xid-errors/, the catalog's *Resolution Bucket (Immediate Action)* column:
RESTART_APP, RESET_GPU, RESTART_BM (reboot the node), WORKFLOW_*, CONTACT_SUPPORT) and NVIDIA's
"GPU Memory Error Management" (A100+: row remapping, contained/uncontained ECC). Meanings and actions
are paraphrased, not copied. Severity is clusterdoctor's reading of the action: an application
restart is a warning about the job; anything that needs the GPU reset, the node rebooted or the board
serviced is critical for the node.

SXid codes (NVSwitch, "Xid and SXid Errors" for HGX/NVSwitch systems) are too many to list; every
SXid is treated as an NVSwitch fault whose NVLink ports lead to GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterdoctor.model import Severity

__all__ = ["XID_CATALOG", "XID_SOURCE", "XidInfo", "xid_info"]

XID_SOURCE = (
    "NVIDIA Xid catalog, docs.nvidia.com/deploy/xid-errors/ (resolution bucket, immediate action); "
    "NVIDIA GPU Memory Error Management (A100+)"
)

# actions (what an operator does), kept short and uniform
RESTART_APP = "restart the application (the GPU itself is usable)"
RESET_GPU = "drain the GPU's jobs and reset it (nvidia-smi -r -i <id>, or reboot the node)"
REBOOT_NODE = "drain the node and reboot it"
RMA = "drain the node; run dcgmi diag -r 3; if it fails or recurs, reseat/RMA the board"
CHECK_BUS = "drain the node; check PCIe seating, risers and power; reboot; RMA if it recurs"
UPDATE_DRIVER = "drain and reset the GPU; update the driver/firmware if it recurs"


@dataclass(frozen=True)
class XidInfo:
    code: int
    name: str
    meaning: str
    severity: Severity
    action: str
    hardware: bool  # points at the GPU/board rather than the application


_C = Severity.CRITICAL
_W = Severity.WARNING
_I = Severity.INFO

XID_CATALOG: dict[int, XidInfo] = {
    x.code: x
    for x in (
        XidInfo(
            8,
            "GPU stopped processing",
            "a channel stopped making progress (idle timeout)",
            _W,
            RESTART_APP,
            False,
        ),
        XidInfo(
            13,
            "Graphics engine exception",
            "the GPU raised an exception for the running program (e.g. out-of-range address, illegal instruction); usually an application bug, hardware only if it repeats across jobs",
            _W,
            RESTART_APP,
            False,
        ),
        XidInfo(
            31,
            "GPU memory page fault",
            "MMU fault: the program touched memory it does not own (illegal address); usually an application or driver bug",
            _W,
            RESTART_APP,
            False,
        ),
        XidInfo(
            32,
            "Invalid or corrupted push buffer stream",
            "corrupted command stream (PCIe or driver)",
            _W,
            RESET_GPU,
            True,
        ),
        XidInfo(38, "Driver firmware error", "the driver's firmware reported an error", _C, RESET_GPU, True),
        XidInfo(
            43,
            "GPU stopped processing",
            "a user program hit a fault and its channel was stopped; the GPU is fine",
            _I,
            RESTART_APP,
            False,
        ),
        XidInfo(
            45,
            "Preemptive cleanup",
            "channels torn down after an earlier error or a killed process; a consequence, not a cause",
            _I,
            "none (look at the Xid before it)",
            False,
        ),
        XidInfo(46, "GPU stopped processing", "the GPU stopped processing work", _C, RESET_GPU, True),
        XidInfo(
            48,
            "Double-bit ECC error",
            "an uncorrectable (double-bit) ECC error in GPU memory",
            _C,
            RESET_GPU + "; row remap or page retirement follows",
            True,
        ),
        XidInfo(
            54,
            "Auxiliary power not connected",
            "the board's auxiliary power cable is missing or failing",
            _C,
            CHECK_BUS,
            True,
        ),
        XidInfo(56, "Display engine error", "display engine error", _I, RESTART_APP, False),
        XidInfo(57, "Error programming video memory interface", "memory interface error", _C, RMA, True),
        XidInfo(58, "Unstable video memory interface", "memory interface unstable", _C, RMA, True),
        XidInfo(
            61,
            "Internal micro-controller breakpoint/warning",
            "a GPU micro-controller stopped at a breakpoint",
            _C,
            RESET_GPU,
            True,
        ),
        XidInfo(62, "Internal micro-controller halt", "a GPU micro-controller halted", _C, RESET_GPU, True),
        XidInfo(
            63,
            "Row remapping / page retirement event",
            "an ECC error was recorded for remapping (A100+) or page retirement; the remap takes effect at the next GPU reset",
            _W,
            "reset the GPU when its jobs allow, to apply the remap",
            True,
        ),
        XidInfo(
            64,
            "Row remapping / page retirement failure",
            "recording the remap or retirement failed",
            _C,
            RMA,
            True,
        ),
        XidInfo(68, "Video decoder exception", "NVDEC exception", _W, RESTART_APP, False),
        XidInfo(69, "Graphics engine class error", "graphics engine class error", _W, RESTART_APP, False),
        XidInfo(
            74,
            "NVLink error",
            "an NVLink reported a fatal error or lost training; the other end (GPU or NVSwitch) is named in the message",
            _C,
            RESET_GPU + "; if it recurs, check the NVLink/NVSwitch path (reseat, RMA)",
            True,
        ),
        XidInfo(79, "GPU has fallen off the bus", "the GPU stopped answering on PCIe", _C, CHECK_BUS, True),
        XidInfo(
            92,
            "High single-bit ECC error rate",
            "correctable ECC errors arrive at a high rate",
            _W,
            "watch the ECC counters; run dcgmi diag -r 3 at the next drain; RMA if the rate persists",
            True,
        ),
        XidInfo(
            94,
            "Contained ECC error",
            "an uncorrectable ECC error was contained to the application that used the memory; other work on the GPU is unaffected",
            _W,
            RESTART_APP + "; reset the GPU at the next drain to apply the remap",
            True,
        ),
        XidInfo(
            95,
            "Uncontained ECC error",
            "an uncorrectable ECC error could not be contained: every application on the GPU is affected",
            _C,
            RESET_GPU,
            True,
        ),
        XidInfo(109, "Context switch timeout", "a context switch timed out", _W, RESTART_APP, False),
        XidInfo(110, "Security fault", "security fault error", _C, REBOOT_NODE, True),
        XidInfo(
            119,
            "GSP RPC timeout",
            "the driver timed out waiting for the GPU System Processor",
            _C,
            UPDATE_DRIVER,
            True,
        ),
        XidInfo(120, "GSP error", "the GPU System Processor reported an error", _C, UPDATE_DRIVER, True),
        XidInfo(
            121, "C2C link error", "an error on the chip-to-chip (Grace-Hopper) link", _C, RESET_GPU, True
        ),
        XidInfo(123, "SPI PMU RPC write failure", "SPI/PMU RPC failure", _C, RESET_GPU, True),
        XidInfo(136, "Link training failed", "an interconnect link failed to train", _C, RESET_GPU, True),
        XidInfo(140, "Unrecovered ECC error", "an ECC error that was not recovered", _C, RESET_GPU, True),
        XidInfo(143, "GPU initialisation failure", "the GPU failed to initialise", _C, RMA, True),
        XidInfo(144, "NVLink SAW error", "NVLink error (Blackwell)", _C, RESET_GPU, True),
        XidInfo(145, "NVLink RLW error", "NVLink error (Blackwell)", _C, RESET_GPU, True),
        XidInfo(149, "NVLink NETIR error", "NVLink error (Blackwell)", _C, RESET_GPU, True),
        XidInfo(
            154,
            "GPU recovery action changed",
            "the driver changed the GPU's recovery action (reset or reboot required); read the action in the message",
            _C,
            RESET_GPU,
            True,
        ),
    )
}


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
    )
