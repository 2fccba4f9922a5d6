"""GPU rules on clocks: active clock event (throttle) reasons, a low SM clock under load.

Split from rules/gpu.py (which lists the per-GPU rules); references: reference/gpu-health.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Evidence, Finding, Severity
from clusterdoctor.rules.gpu_common import (
    BUSY_UTIL,
    SM_CLOCK_MIN_RATIO,
    _cost,
    _extra_ident,
    _fleet,
    _sel,
    node_name,
)
from clusterdoctor.rules.registry import Observations, rule
from clusterdoctor.topology.gpu import GpuState

LAYER = "gpu"

# -- clocks ------------------------------------------------------------------------------------------

HW_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
SW_REASONS = ("sw_thermal_slowdown", "sw_power_cap")
REASON_TEXT = {
    "hw_slowdown": "HW slowdown (external signal: power supply, board, or thermal)",
    "hw_thermal_slowdown": "HW thermal slowdown (the GPU is too hot)",
    "hw_power_brake_slowdown": "HW power brake (the power supply or baseboard asserted the brake)",
    "sw_thermal_slowdown": "SW thermal slowdown (the driver lowers clocks to stay under a temperature limit)",
    "sw_power_cap": "SW power cap (the GPU hit its power limit)",
}


def _judged_reasons(g: GpuState) -> list[str]:
    """Active reasons that count: hardware ones always; software ones while busy."""
    active = set(g.active_reasons())
    out = [r for r in HW_REASONS if r in active]
    busy = g.busy(float(BUSY_UTIL.value))
    if busy or out:
        out += [r for r in SW_REASONS if r in active]
    return out


@rule(
    id="GPU009",
    name="gpu-clock-event-reason",
    layer=LAYER,
    title="GPU clocks held down by a throttle (clock event) reason",
    requires=("gpu_health", "gpu_clock_reasons"),
    thresholds=(BUSY_UTIL,),
    severity=Severity.WARNING,
    causes=("gpu.thermal-power",),
)
def clock_reason(obs: Observations) -> Iterator[Finding]:
    """An active HW slowdown / HW thermal / HW power brake (any time) or SW thermal / SW power cap (while busy).

    **Symptom**: one rank's step time is longer; its GPU runs below its max SM clock at full utilisation;
    every collective waits for it.
    **Why**: the GPU lowers its clocks when told to: a hardware signal (power supply, baseboard, over
    temperature) or the driver's power/thermal control. The same reason on every GPU of a node points at
    the node (PSU, cooling, a power cap set for the node); on one GPU at that GPU (its cooling, its power
    stage, a lowered power limit).
    **Fix**: HW power brake / HW slowdown: check the node's PSUs and BMC event log, reseat; thermal: check
    fans, airflow, inlet temperature; SW power cap: check ``nvidia-smi -q -d POWER`` for a lowered limit.
    **Verify**: `nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE` under load and `dcgmi diag -r 2`.
    """
    f = _fleet(obs)
    for node in f.nodes():
        gpus = [g for g in f.gpus_of(node) if g.clock_reasons is not None]
        judged = {g.label(): _judged_reasons(g) for g in gpus}
        node_wide: set[str] = set()
        if len(gpus) >= 2:
            for r in (*HW_REASONS, *SW_REASONS):
                if all(r in judged[g.label()] for g in gpus):
                    node_wide.add(r)
        if node_wide:
            yield clock_reason.finding(
                f"{node_name(node)}: every GPU ({len(gpus)}) reports "
                + ", ".join(REASON_TEXT[r] for r in sorted(node_wide))
                + " — the cause is the node (power supply, cooling, node power cap), not one GPU. All its ranks run slow.",
                evidence=[
                    Evidence(
                        f"{g.label()} active reasons",
                        ", ".join(g.active_reasons()),
                        source=g.source_of("clock_reasons"),
                    )
                    for g in gpus[:8]
                ],
                severity=Severity.CRITICAL if node_wide & set(HW_REASONS) else Severity.WARNING,
                subject=node_name(node),
                confidence=0.85,
            )
        for g in gpus:
            mine = [r for r in judged[g.label()] if r not in node_wide]
            if not mine:
                continue
            hw = [r for r in mine if r in HW_REASONS]
            ratio = (g.sm_clock_mhz / g.sm_max_mhz) if g.sm_clock_mhz and g.sm_max_mhz else None
            cost = (
                f"it runs at {ratio:.0%} of its max SM clock ({g.sm_clock_mhz:.0f}/{g.sm_max_mhz:.0f} MHz)"
                if ratio is not None and ratio < 0.999
                else "its clocks are capped whenever work arrives"
            )
            busy = g.busy(float(BUSY_UTIL.value))
            yield clock_reason.finding(
                f"{g.label()}: "
                + ", ".join(REASON_TEXT[r] for r in mine)
                + (
                    f" while {g.util_pct:.0f}% busy"
                    if busy
                    else (" although idle (a hardware signal is asserted)" if hw else "")
                )
                + ". "
                + _cost(g, cost),
                evidence=[
                    *_extra_ident(g),
                    Evidence(
                        "active clock event reasons",
                        ", ".join(g.active_reasons()),
                        source=g.source_of("clock_reasons"),
                    ),
                    Evidence("utilisation", g.util_pct, BUSY_UTIL.value, "%", g.source_of("util_pct")),
                    *(
                        [
                            Evidence(
                                "SM clock / max",
                                f"{g.sm_clock_mhz:.0f}/{g.sm_max_mhz:.0f} MHz",
                                source=g.source_of("sm_clock_mhz"),
                            )
                        ]
                        if ratio is not None
                        else []
                    ),
                    *(
                        [Evidence("temperature", g.temp_c, unit="C", source=g.source_of("temp_c"))]
                        if g.temp_c is not None
                        else []
                    ),
                    *(
                        [
                            Evidence(
                                "power draw / limit",
                                f"{g.power_w:.0f}/{g.power_limit_w:.0f} W",
                                source=g.source_of("power_w"),
                            )
                        ]
                        if g.power_w is not None and g.power_limit_w
                        else []
                    ),
                ],
                severity=Severity.CRITICAL if hw else Severity.WARNING,
                subject=g.label(),
                confidence=0.85 if busy else 0.7,
                verify=[
                    f"nvidia-smi -q {_sel(g)} -d PERFORMANCE,POWER,TEMPERATURE",
                    "dcgmi diag -r 2",
                    "ipmitool sel elist",
                ],
            )


@rule(
    id="GPU010",
    name="gpu-sm-clock-low-under-load",
    layer=LAYER,
    title="SM clock far below its maximum under load",
    requires=("gpu_health", "gpu_clocks_under_load"),
    thresholds=(BUSY_UTIL, SM_CLOCK_MIN_RATIO),
    severity=Severity.WARNING,
    causes=("gpu.thermal-power",),
)
def sm_clock_low(obs: Observations) -> Iterator[Finding]:
    """A busy GPU runs its SM clock below 80 % of its maximum with no throttle reason that explains it.

    **Symptom**: the rank on this GPU is slower than its peers; nvidia-smi shows it at full utilisation but
    a low SM clock.
    **Why**: locked or lowered application clocks (``nvidia-smi -lgc``/``-ac``), a reduced power limit, or a
    throttle reason the source did not export.
    **Fix**: reset clocks (``nvidia-smi -rgc``, ``-rac``), restore the default power limit, then look at the
    throttle reasons (GPU009) under load.
    **Verify**: `nvidia-smi -q -d CLOCK,PERFORMANCE,POWER` under load.
    """
    for g in _fleet(obs).gpus:
        if not g.busy(float(BUSY_UTIL.value)) or not g.sm_clock_mhz or not g.sm_max_mhz:
            continue
        ratio = g.sm_clock_mhz / g.sm_max_mhz
        if ratio >= float(SM_CLOCK_MIN_RATIO.value):
            continue
        if _judged_reasons(g):
            continue  # GPU009 names the reason and this cost
        yield sm_clock_low.finding(
            f"{g.label()}: {g.util_pct:.0f}% busy at {g.sm_clock_mhz:.0f} MHz, {ratio:.0%} of its {g.sm_max_mhz:.0f} MHz maximum"
            + (
                "; no throttle reason active — check locked clocks and the power limit."
                if g.clock_reasons is not None
                else "; throttle reasons not exported."
            )
            + " "
            + _cost(g, f"it computes about {1 / max(ratio, 0.01):.1f}× slower than an unthrottled peer"),
            evidence=[
                *_extra_ident(g),
                Evidence(
                    "SM clock / max",
                    round(ratio, 3),
                    SM_CLOCK_MIN_RATIO.value,
                    source=g.source_of("sm_clock_mhz"),
                ),
                Evidence("utilisation", g.util_pct, BUSY_UTIL.value, "%", g.source_of("util_pct")),
                *([Evidence("application clock", g.app_sm_mhz, unit="MHz")] if g.app_sm_mhz else []),
            ],
            subject=g.label(),
            confidence=0.75,
        )
