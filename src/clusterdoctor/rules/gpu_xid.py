"""GPU rules on driver events: Xid errors, GPUs fallen off the bus, NVSwitch SXid errors.

Split from rules/gpu.py (which lists the per-GPU rules); references: reference/gpu-health.md.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.gpu_alerts import GPU001_ALERTS
from clusterdoctor.rules.gpu_common import (
    XID_APP_REPEAT,
    _acting,
    _cost,
    _extra_ident,
    _fleet,
    _fmt_t,
    _ident,
    _sel,
    node_name,
)
from clusterdoctor.rules.registry import Observations, rule
from clusterdoctor.rules.xid_catalog import XID_SOURCE, recovery_action, xid_info
from clusterdoctor.topology.gpu import GpuEvent

LAYER = "gpu"

# -- Xid / SXid / lost GPUs -------------------------------------------------------------------------


@rule(
    id="GPU001",
    name="gpu-xid",
    layer=LAYER,
    title="NVIDIA driver reported an Xid error on a GPU",
    requires=("gpu_health", "gpu_events"),
    thresholds=(XID_APP_REPEAT,),
    severity=Severity.CRITICAL,
    alerts=GPU001_ALERTS,
)
def gpu_xid(obs: Observations) -> Iterator[Finding]:
    """One finding per GPU with Xid errors: for each code, what it means, how often, and what NVIDIA
    says to do; the finding takes the severity of its worst code.

    **Symptom**: a job crashed or hung, or one rank slowed down; the kernel log holds ``NVRM: Xid`` lines
    (or dcgm-exporter's ``DCGM_FI_DEV_XID_ERRORS`` is non-zero).
    **Why**: the driver logs an Xid for every GPU fault it sees: application faults (13, 31, 43), memory
    errors (48, 63, 64, 92, 94, 95), interconnect faults (74, 79), firmware faults (119, 120). The code says
    whether the program, the GPU or the node must be acted on.
    **Fix**: follow the catalog action per code: restart the application (13/31/43 when isolated), reset
    the GPU (48, 95, 119), reboot the node and check PCIe seating and power (79), RMA after a failed
    remap (64) or repeated hardware Xids.
    **Verify**: `dmesg -T | grep -E 'NVRM: Xid|SXid'`, `nvidia-smi -q -d ECC,ROW_REMAPPER,PERFORMANCE`
    and `dcgmi diag -r 2`.
    """
    f = _fleet(obs)
    for g in f.gpus:
        by_code: dict[int, list[GpuEvent]] = defaultdict(list)
        for e in g.events:
            if e.kind == "xid" and e.code is not None:
                by_code[e.code].append(e)
        if g.xid_last and g.xid_last not in by_code:
            by_code[g.xid_last] = [
                GpuEvent(
                    "xid",
                    g.field_sources.get("xid_last_text") or "last Xid reported by DCGM",
                    code=g.xid_last,
                    source=g.source_of("xid_last"),
                )
            ]
        if not by_code:
            continue
        parts: list[tuple[Severity, Action, int, str]] = []  # (severity, action, code, sentence)
        evidence: list[Evidence] = list(_extra_ident(g))
        actions: list[tuple[int, str]] = []  # (code, action) in code order
        classes: dict[int, tuple[str, ...]] = {}
        hardware = False
        located = True
        for code, evs in sorted(by_code.items()):
            info = xid_info(code)
            act = info.act
            if code == 154:  # the message names the recovery action the driver now asks for
                named = [a for a in (recovery_action(e.message) for e in evs) if a is not None]
                act = max(named) if named else act
            classes[code] = info.causes
            hardware = hardware or info.hardware
            located = located and evs[0].line is not None
            procs = sorted({e.process or str(e.pid) for e in evs if e.process or e.pid})
            sev = info.severity
            if not info.hardware and len(procs) >= int(XID_APP_REPEAT.value):
                sev = Severity.WARNING
                note = f" It recurred for {len(procs)} processes: suspect the GPU, run dcgmi diag -r 2."
                classes[code] = (*info.causes, "gpu.hw-faulty")  # across jobs: the board, not one program
            else:
                note = ""
            times = [e.time for e in evs if e.time is not None]
            when = (
                f"{_fmt_t(min(times))} .. {_fmt_t(max(times))}"
                if times
                else (evs[0].time_text or "time not in the log")
            )
            parts.append(
                (
                    sev,
                    act,
                    code,
                    f"Xid {code} ({info.name}) ×{len(evs)} — {info.meaning}. Action: {info.action}.{note}",
                )
            )
            actions.append((code, info.action))
            evidence += [
                Evidence(
                    f"Xid {code} events ({str(sev)})",
                    len(evs),
                    source=evs[0].source + (f":{evs[0].line}" if evs[0].line else ""),
                ),
                Evidence(f"Xid {code} when", when),
                Evidence(f"Xid {code} first message", evs[0].message[:200]),
                *([Evidence(f"Xid {code} processes", ", ".join(procs[:8]))] if procs else []),
                Evidence(f"Xid {code} catalog action", info.action, source=XID_SOURCE),
            ]
        # the worst code leads (on equal severity, the one that needs the strongest action: an Xid 94
        # before an Xid 31); then the others in code order
        parts.sort(key=lambda x: (-int(x[0]), -int(x[1]), x[2]))
        worst, strongest = parts[0][0], max(p[1] for p in parts)
        # the causes it names: those of every code at the worst severity, the leading code's first
        causes: list[str] = []
        for p in parts:
            if p[0] == worst:
                causes += [c for c in classes.get(p[2], ()) if c not in causes]
        cost = "the GPU is unreliable until acted on" if hardware else "the job on it lost its work"
        f = gpu_xid.finding(
            f"{g.label()}: " + " ".join(p[3] for p in parts) + " " + _cost(g, cost),
            evidence=evidence,
            severity=worst,
            subject=g.label(),
            confidence=0.9 if located else 0.7,
            fix=actions[0][1] if len(actions) == 1 else " ".join(f"Xid {c}: {a}." for c, a in actions),
            verify=[
                f"nvidia-smi -q {_sel(g)} -d ECC,ROW_REMAPPER,PERFORMANCE".replace("  ", " "),
                "dmesg -T | grep -E 'NVRM: Xid'",
                "dcgmi diag -r 2",
            ],
            causes=causes,
        )
        f.action = strongest
        yield f


# NVRM messages that say why the driver could not initialise a GPU (a module/firmware/user-space version
# mismatch): where one is in the inputs, a probe failure is its consequence and ranks below it
PROBE_REASON_CODES = frozenset({"NVRM104", "NVRM106", "NVRM107"})
PROBE_SYMPTOM_CONFIDENCE = 0.5


def _probe_reasons(obs: Observations) -> list[str]:
    """The lines of the inputs in which the driver says why a probe failed (see PROBE_REASON_CODES)."""
    return [h.text for h in obs.get("messages") or [] if getattr(h, "code", "") in PROBE_REASON_CODES]


# GPU events that say the driver cannot use a GPU: what they are in words, the cause classes they name
LOST_KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "fell_off_bus": ("fell off the bus", ("gpu.fallen-off-bus",)),
    "unreachable": ("does not answer on PCIe", ("gpu.fallen-off-bus",)),
    "smi_error": ("nvidia-smi cannot read it (ERR!)", ("gpu.fallen-off-bus", "gpu.hw-faulty")),
    "probe_failed": ("probe failed", ("gpu.init-failed",)),
    "bar_invalid": ("invalid BAR", ("gpu.init-failed",)),
    "unsupported": ("not supported by the installed driver", ("gpu.init-failed",)),
}


@rule(
    id="GPU002",
    name="gpu-lost",
    layer=LAYER,
    title="GPU fell off the bus or failed to initialise",
    requires=("gpu_health", "gpu_events"),
    severity=Severity.CRITICAL,
    causes=("gpu.fallen-off-bus", "gpu.init-failed"),
)
def gpu_lost(obs: Observations) -> Iterator[Finding]:
    """The driver lost the GPU ("fallen off the bus") or could not bring it up (probe failed, BARs invalid).

    **Symptom**: ``nvidia-smi`` shows fewer GPUs, reports "GPU is lost" or "No devices were found";
    jobs fail at CUDA initialisation on that node.
    **Why**: the GPU stopped answering on PCIe (power, riser, seating, a failing board) or the platform
    did not give it working BARs/link at boot (firmware, above-4G decoding, an unsupported host).
    **Fix**: drain the node; for a lost GPU reseat it and check power cables, risers and the slot, then
    reboot; for BAR/probe failures enable above-4G decoding/resizable BAR and check the platform supports
    the card; RMA if it recurs.
    **Verify**: `nvidia-smi -L`, `lspci -vv -d 10de:` (LnkSta, driver in use) and `dmesg -T | grep NVRM`.
    """
    f = _fleet(obs)
    reasons = _probe_reasons(obs)
    for g in f.gpus:
        has79 = any(e.kind == "xid" and e.code == 79 for e in g.events)
        lost = [e for e in g.events if e.kind in LOST_KINDS]
        if not lost or (has79 and all(e.kind == "fell_off_bus" for e in lost)):
            continue  # Xid 79 is GPU001's finding
        kinds = Counter(e.kind for e in lost)
        desc = ", ".join(f"{LOST_KINDS[k][0]} ×{n}" for k, n in kinds.items())
        causes = [c for k in kinds for c in LOST_KINDS[k][1]]
        explained = bool(reasons) and set(kinds) == {"probe_failed"}
        yield _acting(
            Action.REBOOT_NODE,
            gpu_lost.finding(
                f"{g.label()}: {desc} — the driver cannot use this GPU. " + _cost(g, "no work runs on it"),
                evidence=[
                    *_extra_ident(g),
                    *[
                        Evidence(
                            e.kind, e.message[:200], source=f"{e.source}:{e.line}" if e.line else e.source
                        )
                        for e in lost[:4]
                    ],
                    *([Evidence("driver says why", reasons[0][:200])] if explained else []),
                ],
                subject=g.label(),
                confidence=PROBE_SYMPTOM_CONFIDENCE if explained else 0.9,
                causes=list(dict.fromkeys(causes)),
            ),
        )
    for node, evs in f.node_events.items():
        fails = [e for e in evs if e.kind in ("probe_failed", "fell_off_bus")]
        if fails and not any(g for g in f.gpus_of(node) if any(x.kind in LOST_KINDS for x in g.events)):
            yield _acting(
                Action.REBOOT_NODE,
                gpu_lost.finding(
                    f"{node_name(node)}: {fails[0].message[:160]}",
                    evidence=[
                        Evidence(e.kind, e.message[:200], source=f"{e.source}:{e.line}") for e in fails[:4]
                    ],
                    subject=node_name(node),
                    confidence=0.8,
                    causes=list(dict.fromkeys(c for e in fails for c in LOST_KINDS[e.kind][1])),
                ),
            )


@rule(
    id="GPU003",
    name="nvswitch-sxid",
    layer=LAYER,
    title="NVSwitch reported an SXid error",
    requires=("gpu_health",),
    severity=Severity.CRITICAL,
    causes=("gpu.nvlink-fault",),
)
def nvswitch_sxid(obs: Observations) -> Iterator[Finding]:
    """An NVSwitch (``nvidia-nvswitch``) logged an SXid; joined to the GPUs of the node that show NVLink trouble.

    **Symptom**: NCCL all-reduce inside an HGX node slows or hangs; ``SXid`` lines in the kernel log;
    DCGM may still pass (NVIDIA/DCGM#198).
    **Why**: an NVSwitch port or its link to a GPU failed (CRC, training, fatal port errors); the GPU on
    the other end of that port loses bandwidth or its links (Xid 74, inactive links).
    **Fix**: drain the node; reset the GPUs/NVSwitches (or reboot) and restart the fabric manager; if the
    same port fails again, service the baseboard.
    **Verify**: `dmesg -T | grep SXid`, `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e` on every GPU,
    `systemctl status nvidia-fabricmanager`.
    """
    f = _fleet(obs)
    for node, evs in f.node_events.items():
        sx = [e for e in evs if e.kind == "sxid"]
        if not sx:
            continue
        suspects = [
            g
            for g in f.gpus_of(node)
            if any(e.kind == "xid" and e.code == 74 for e in g.events)
            or any(n.active is False for n in g.nvlinks)
            or g.nvlink_support == "inactive"
        ]
        codes = Counter(e.code for e in sx)
        if suspects:
            joined = "; GPUs with NVLink trouble on this node: " + ", ".join(g.label() for g in suspects)
        else:
            joined = "; no GPU source on this node shows which GPU lost links (add nvidia-smi nvlink -s and the Xid log)"
        yield nvswitch_sxid.finding(
            f"{node_name(node)}: {len(sx)} SXid event(s) from "
            + ", ".join(sorted({str(e.attrs.get("nvswitch")) for e in sx}))
            + f" (codes {', '.join(str(c) for c in sorted(codes))}){joined}. NVLink traffic through that switch "
            "slows or stops, so intra-node collectives wait.",
            evidence=[
                *[
                    Evidence(f"SXid {e.code}", e.message[:200], source=f"{e.source}:{e.line}", time=e.time)
                    for e in sx[:4]
                ],
                *[_ident(g) for g in suspects],
            ],
            subject=suspects[0].label() if len(suspects) == 1 else node_name(node),
            confidence=0.8 if suspects else 0.6,
        )
