"""The GPU health model: one :class:`GpuState` per GPU, as the tools describe it.

Every parser under :mod:`clusterdoctor.observe.gpu` returns a :class:`GpuReport` (one source: a file,
a live read, a Prometheus query) holding the GPUs it saw. The analysis
(:mod:`clusterdoctor.analyze.gpu_health`) joins the reports of one node by PCI bus id, UUID or
index, and joins each GPU to the topology (NUMA node, nearest NIC), to the processes and ranks that
use it and to the pod that owns it.

Anything a source does not state is ``None`` — "not exported", never zero. A counter read as 0 is
0; a counter the source does not carry stays ``None`` and the rules that need it say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CLOCK_REASONS",
    "GpuEvent",
    "GpuReport",
    "GpuState",
    "NvLinkState",
    "PcieLink",
    "Reading",
    "gen_speed_gts",
]

# PCIe generation -> transfer rate per lane (PCI-SIG base specifications 1.0 .. 6.0).
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}

# Clock event ("throttle") reasons, NVML's nvmlClocksEventReason* bits (nvml.h), by canonical name.
CLOCK_REASONS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


def gen_speed_gts(gen: int | None) -> float | None:
    """GT/s of a PCIe generation (None when unknown)."""
    return GEN_GTS.get(gen) if gen is not None else None


_MASKED_UUID = re.compile(r"^GPU-(?:0{8}|\d{8})-0000-0000-0000-\d{12}$")


def uuid_is_masked(uuid: str | None) -> bool:
    """A UUID replaced by a publisher's or capture tool's placeholder (``GPU-00000000-0000-…``)."""
    return bool(uuid) and bool(_MASKED_UUID.match(uuid or ""))


@dataclass
class PcieLink:
    """A GPU's PCIe link as one source states it (None = not stated)."""

    gen_current: int | None = None
    gen_max: int | None = None  # the GPU's (device) maximum, or the link's when only that is stated
    gen_host_max: int | None = None  # the slot's / host's maximum (nvidia-smi "Host Max")
    speed_current_gts: float | None = None
    speed_max_gts: float | None = None
    width_current: int | None = None
    width_max: int | None = None
    replays: int | None = None  # "Replays Since Reset" (or DCGM's replay counter)
    replay_rollovers: int | None = None
    lane_errors: tuple[int, ...] | None = None  # lanes with latched errors; () = stated none
    corr_err: bool | None = None  # DevSta CorrErr+
    downgraded_speed: bool | None = None  # lspci's "(downgraded)" annotation
    downgraded_width: bool | None = None
    source: str = ""

    def current_gts(self) -> float | None:
        return (
            self.speed_current_gts if self.speed_current_gts is not None else gen_speed_gts(self.gen_current)
        )

    def max_gts(self) -> float | None:
        cand = [v for v in (self.speed_max_gts, gen_speed_gts(self.gen_max)) if v is not None]
        host = gen_speed_gts(self.gen_host_max)
        best = max(cand) if cand else None
        if best is not None and host is not None:
            best = min(best, host)  # the link can only train to what both ends support
        return best

    def speed_below_capability(self) -> bool | None:
        cur, mx = self.current_gts(), self.max_gts()
        if cur is None or mx is None:
            return None
        return cur < mx

    def width_below_capability(self) -> bool | None:
        if self.width_current is None or self.width_max is None:
            return None
        return self.width_current < self.width_max

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None and v != ""}


@dataclass
class NvLinkState:
    """One NVLink of a GPU: up or not, its speed and error counters (None = not stated)."""

    link: int
    active: bool | None = None
    speed_gbs: float | None = None
    replay_errors: int | None = None
    recovery_errors: int | None = None
    crc_errors: int | None = None
    source: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None and v != ""}


@dataclass
class GpuEvent:
    """Something the driver or a tool reported about a GPU at a time (an Xid, a diag failure …).

    ``kind``: ``xid``, ``sxid``, ``fell_off_bus``, ``probe_failed``, ``bar_invalid``, ``reset_advised``,
    ``diag`` (a dcgmi diag test result), ``health`` (a dcgmi health incident).
    """

    kind: str
    message: str
    code: int | None = None
    time: float | None = None
    time_text: str | None = None
    pid: int | None = None
    process: str | None = None
    source: str = ""
    line: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if v is not None and v != "" and v != {}}
        return d


@dataclass(frozen=True)
class Reading:
    """A timed numeric reading of a GPU (for rates): ``name`` as in :class:`GpuState` attributes."""

    name: str
    value: float
    time: float | None
    source: str = ""


# Attributes of GpuState that are plain facts merged field by field when two sources describe one GPU.
MERGE_FIELDS = (
    "index",
    "bus_id",
    "uuid",
    "model",
    "serial",
    "driver_version",
    "vbios",
    "numa_node",
    "pstate",
    "util_pct",
    "temp_c",
    "mem_temp_c",
    "power_w",
    "power_limit_w",
    "power_default_limit_w",
    "sm_clock_mhz",
    "sm_max_mhz",
    "app_sm_mhz",
    "clock_reasons",
    "ecc_mode",
    "ecc_volatile_uncorrectable",
    "ecc_aggregate_uncorrectable",
    "ecc_volatile_correctable",
    "ecc_aggregate_correctable",
    "retired_sbe",
    "retired_dbe",
    "retired_pending",
    "remap_correctable",
    "remap_uncorrectable",
    "remap_pending",
    "remap_failure",
    "xid_last",
    "nvlink_support",
    "fabric_state",
    "fabric_status",
    "reset_required",
    "driver_in_use",
    "pod",
    "namespace",
    "container",
)


@dataclass
class GpuState:
    """One GPU: identity, readings and events. ``None`` everywhere means "the source did not say"."""

    node: str | None = None
    index: int | None = None
    bus_id: str | None = None  # "0000:75:00.0", lower case
    uuid: str | None = None
    model: str | None = None
    serial: str | None = None
    driver_version: str | None = None
    vbios: str | None = None
    numa_node: int | None = None
    nearest_nic: str | None = None
    nearest_nic_path: str | None = None
    # load and clocks
    pstate: str | None = None
    util_pct: float | None = None
    temp_c: float | None = None
    mem_temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    sm_max_mhz: float | None = None
    app_sm_mhz: float | None = None
    clock_reasons: dict[str, bool] | None = None  # CLOCK_REASONS name -> active
    # memory
    ecc_mode: str | None = None
    ecc_volatile_uncorrectable: int | None = None
    ecc_aggregate_uncorrectable: int | None = None
    ecc_volatile_correctable: int | None = None
    ecc_aggregate_correctable: int | None = None
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retired_pending: bool | None = None
    remap_correctable: int | None = None
    remap_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    xid_last: int | None = None  # dcgm-exporter's DCGM_FI_DEV_XID_ERRORS (last Xid seen)
    # links
    pcie: PcieLink | None = None
    nvlink_support: str | None = None  # "links" | "none" (no NVLink by design) | "inactive" | None
    nvlinks: list[NvLinkState] = field(default_factory=list)
    fabric_state: str | None = None
    fabric_status: str | None = None
    reset_required: bool | None = None
    driver_in_use: str | None = None  # kernel driver bound ("nvidia", "nouveau", "" = none)
    # who uses it
    processes: list[tuple[int, str]] = field(default_factory=list)
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    ranks: list[str] = field(default_factory=list)
    # history
    events: list[GpuEvent] = field(default_factory=list)
    readings: list[Reading] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    field_sources: dict[str, str] = field(default_factory=dict)

    # -- identity --------------------------------------------------------------------------
    def label(self) -> str:
        """How findings name this GPU: ``GPU2 0000:75:00.0 on node-a`` (the parts known)."""
        parts = [f"GPU{self.index}" if self.index is not None else "GPU"]
        if self.bus_id:
            parts.append(self.bus_id)
        elif self.uuid:
            parts.append(self.uuid)
        elif self.index is None:
            parts.append("(not named in the input)")  # an excerpt without the GPU's header
        if self.node:
            parts.append(f"on {self.node}")
        return " ".join(parts)

    def identity(self) -> str:
        """Index, bus id and UUID as one phrase for evidence (``index 2, bus 0000:75:00.0, UUID …``)."""
        bits = []
        if self.index is not None:
            bits.append(f"index {self.index}")
        bits.append(f"bus {self.bus_id}" if self.bus_id else "bus id unknown")
        if self.uuid:
            bits.append(f"UUID {self.uuid}" + (" (masked)" if uuid_is_masked(self.uuid) else ""))
        if self.model:
            bits.append(self.model)
        return ", ".join(bits)

    def source_of(self, name: str) -> str:
        return self.field_sources.get(name) or (self.sources[0] if self.sources else "")

    def set(self, name: str, value: Any, source: str) -> None:
        """Set a fact with its provenance (ignores None: unknown never overwrites)."""
        if value is None:
            return
        setattr(self, name, value)
        self.field_sources[name] = source

    def busy(self, threshold: float) -> bool | None:
        """Whether the GPU was busy (utilisation at or above ``threshold``); None when unknown."""
        if self.util_pct is None:
            return None
        return self.util_pct >= threshold

    def active_reasons(self) -> list[str]:
        return [k for k, v in (self.clock_reasons or {}).items() if v]

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"label": self.label()}
        for k in ("node", "nearest_nic", "nearest_nic_path", *MERGE_FIELDS):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.pcie is not None:
            d["pcie"] = self.pcie.as_dict()
        if self.nvlinks:
            d["nvlinks"] = [n.as_dict() for n in self.nvlinks]
        if self.processes:
            d["processes"] = [{"pid": p, "name": n} for p, n in self.processes]
        if self.ranks:
            d["ranks"] = list(self.ranks)
        if self.events:
            d["events"] = [e.as_dict() for e in self.events]
        d["sources"] = list(self.sources)
        return d


@dataclass
class GpuReport:
    """What one source said: its GPUs, node-level events it could not tie to a GPU, warnings.

    ``node`` is the host the source names (dcgm-exporter's ``Hostname``, a syslog host), else None.
    ``kind`` names the source type (``nvidia-smi -q``, ``dmesg``, …); ``facts`` lists the kinds of
    facts it can state at all (``"ecc"``, ``"clocks"``, …) so a rule can tell "not exported" from
    "healthy".
    """

    kind: str
    source: str
    node: str | None = None
    gpus: list[GpuState] = field(default_factory=list)
    events: list[GpuEvent] = field(default_factory=list)  # not tied to one GPU (SXid, probe failures)
    facts: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    time: float | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
