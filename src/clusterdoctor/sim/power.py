"""Per-GPU-type power and price model: idle and peak watts, FP16 efficiency, DVFS range, $/GPU-hour.

Every number carries its source. Where a number is an assumption (no public measurement at hand) the
source says so; override any field with :func:`power_model` ``overrides``. Power of a GPU at
allocation share u in [0, 1] is ``idle_w + (peak_w - idle_w) * u`` (linear; arXiv 2506.14551 reports
8xH100 nodes training at ~76 % of rated power, so peak here is "busy", not TDP, where known). The DVFS
range is used by :mod:`clusterdoctor.sim.dvfs` (a clock inside it sets busy watts and job speed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class GpuPower:
    model: str
    idle_w: float
    peak_w: float
    fp16_tflops_per_w: float | None
    dvfs_mhz: tuple[int, int] | None  # (min, max) graphics clock
    usd_per_gpu_hour: float
    source: str

    def watts(self, util: float) -> float:
        u = min(max(util, 0.0), 1.0)
        return self.idle_w + (self.peak_w - self.idle_w) * u


_ISSUE_FP16 = (
    "FP16 TFLOPS/W default required by clusterdoctor issue #7 (provenance not stated there; dense datasheet "
    "values give lower ratios: A100 SXM 312 TFLOPS / 400 W = 0.78, H100 SXM5 989.4 / 700 W = 1.41, "
    "../shared/reference/sched.md section 4)"
)
_IDLE_ASSUMPTION = "idle watts: assumption (~15 % of TDP), not measured"
_PRICE_NOTE = "price: assumption for a cloud on-demand GPU-hour, set your own with --price"

CATALOG: dict[str, GpuPower] = {
    "A100-SXM4": GpuPower(
        "A100-SXM4",
        60.0,
        400.0,
        1.82,
        (210, 1410),
        4.10,
        f"TDP 400 W and 1410 MHz max clock: NVIDIA A100 datasheet; {_ISSUE_FP16}; {_IDLE_ASSUMPTION}; "
        f"{_PRICE_NOTE} (AWS p4d.24xlarge list $32.77/h / 8 GPUs, 2023)",
    ),
    "H100-SXM5": GpuPower(
        "H100-SXM5",
        70.0,
        700.0,
        2.96,
        (345, 1980),
        12.29,
        f"TDP 700 W and 1980 MHz boost: NVIDIA H100 datasheet; {_ISSUE_FP16}; {_IDLE_ASSUMPTION}; "
        f"{_PRICE_NOTE} (AWS p5.48xlarge list $98.32/h / 8 GPUs, 2023)",
    ),
    "H800": GpuPower(
        "H800", 70.0, 700.0, 2.96, (345, 1980), 12.29, "treated as H100-SXM5 (same board power)"
    ),
    "A800": GpuPower("A800", 60.0, 400.0, 1.82, (210, 1410), 4.10, "treated as A100-SXM4 (same board power)"),
    "V100": GpuPower(
        "V100",
        40.0,
        300.0,
        None,
        (135, 1530),
        3.06,
        f"TDP 300 W (V100 SXM2 datasheet); {_IDLE_ASSUMPTION}; {_PRICE_NOTE} (AWS p3 $24.48/h / 8)",
    ),
    "P100": GpuPower(
        "P100",
        30.0,
        250.0,
        None,
        (544, 1329),
        1.50,
        f"TDP 250 W (P100 PCIe datasheet); {_IDLE_ASSUMPTION}; {_PRICE_NOTE}",
    ),
    "T4": GpuPower(
        "T4",
        10.0,
        70.0,
        None,
        (300, 1590),
        0.53,
        f"TDP 70 W (T4 datasheet); {_IDLE_ASSUMPTION}; {_PRICE_NOTE} (AWS g4dn.xlarge $0.526/h)",
    ),
    "A10": GpuPower(
        "A10",
        20.0,
        150.0,
        None,
        (210, 1695),
        1.01,
        f"TDP 150 W (A10 datasheet); {_IDLE_ASSUMPTION}; {_PRICE_NOTE} (AWS g5.xlarge $1.006/h)",
    ),
}
GENERIC = GpuPower(
    "generic",
    45.0,
    300.0,
    None,
    None,
    2.0,
    "unknown model (e.g. openb's undisclosed G1-G3): generic 300 W board, assumption",
)

_ALIASES = {
    "A100": "A100-SXM4", "A100-SXM4-80GB": "A100-SXM4", "A800-SXM4-80GB": "A800", "H100": "H100-SXM5",
    "V100M16": "V100", "V100M32": "V100", "MISC": "generic",
}  # fmt: skip

USD_PER_KWH = 0.10  # assumption: electricity price, set your own with --usd-per-kwh
PUE = 1.2  # assumption: facility overhead on IT power (typical modern data centre), set with --pue


# Dense FP16 tensor TFLOPS from datasheets, for generations without a TFLOPS/W entry (sources: NVIDIA
# V100 SXM2, P100 PCIe (no tensor cores: FP16 18.7), T4 and A10 datasheets); openb's undisclosed G1-G3 get
# a V100-class assumption.
DENSE_FP16_TFLOPS = {"V100": 125.0, "P100": 18.7, "T4": 65.0, "A10": 125.0, "generic": 125.0}


def fp16_tflops(entry: GpuPower) -> float:
    """FP16 TFLOPS of one GPU: TFLOPS/W x busy watts where the catalogue has TFLOPS/W (A100, H100),
    else the dense datasheet figure (``DENSE_FP16_TFLOPS``)."""
    if entry.fp16_tflops_per_w:
        return entry.fp16_tflops_per_w * entry.peak_w
    for k, v in DENSE_FP16_TFLOPS.items():
        if entry.model.upper().startswith(k.upper()):
            return v
    if entry.source == GENERIC.source:
        return DENSE_FP16_TFLOPS["generic"]
    key = _ALIASES.get(entry.model, entry.model)
    return DENSE_FP16_TFLOPS.get(key, DENSE_FP16_TFLOPS["generic"])


def power_model(model: str, overrides: dict[str, GpuPower] | None = None) -> GpuPower:
    """The power/price entry for a GPU model name as it appears in a trace."""
    if overrides and model in overrides:
        return overrides[model]
    key = _ALIASES.get(model, model)
    if key in CATALOG:
        entry = CATALOG[key]
        return entry if entry.model == model else replace(entry, model=model)
    for k, v in CATALOG.items():
        if model.upper().startswith(k.split("-")[0]):
            return replace(v, model=model)
    return replace(GENERIC, model=model)
