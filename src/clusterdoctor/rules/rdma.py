"""RDMA data-plane rules: receive drops, congestion, retransmission, link errors, completion errors.

Inputs: ``rdma`` (cumulative counters per port, :class:`clusterdoctor.observe.network.rdma.RdmaPort`, from
RDMA sources and from Ethernet/DPDK statistics via :mod:`clusterdoctor.observe.network.nic_stats`) and,
when two reads were taken, ``rdma_rates``. With rates a rule judges the current state; with totals
only it reports what happened since the counters were last reset, with lower confidence.
Counter meanings and classes: reference/ctrl.md §3 (NVIDIA texts quoted in node_exporter
collector/infiniband_linux.go; kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules import rdma_subject  # noqa: F401  (registers the ib subject resolver)
from clusterdoctor.rules.alerts import Alert, Example, counter_rates
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input(
    "rdma_rates", "only one read of the RDMA counters (take two reads some seconds apart for rates)"
)

ANY_INCREASE = Threshold(
    "rdma_error_counter_increase",
    0,
    "events",
    "NVIDIA/kernel mlx5 counters.rst: these counters count drops, NAKs and timeouts; in a healthy lossless "
    "RoCE/IB fabric they stay at 0 (reference/ctrl.md §3)",
    "any increase is abnormal",
)
LOSS_HIGH = Threshold(
    "nic_loss_fraction_high",
    1e-3,
    "fraction of received packets",
    "Mathis et al., 'The macroscopic behavior of the TCP congestion avoidance algorithm' (CCR 1997): "
    "throughput ~ 1/sqrt(loss), so 0.1 % loss already costs TCP most of a fast link; RoCE expects 0",
    "drop/error fraction at which the finding is critical",
)
LOSS_NEGLIGIBLE = Threshold(
    "nic_loss_fraction_negligible",
    1e-6,
    "fraction of received packets",
    "clusterdoctor default: below one in a million received packets a total since boot is noise, reported as info",
    "drop/error fraction below which the finding is informational",
)
HIGH_RATE = Threshold(
    "rdma_error_rate_high",
    100,
    "1/s",
    "clusterdoctor default: at 100 drops/retransmissions per second a collective with thousands of "
    "messages per second loses a measurable fraction to recovery (local_ack_timeout defaults to ~0.5 s per loss)",
    "rate at which an RDMA error class is critical",
)

RX_DROPS = (
    "out_of_buffer",
    "rx_out_of_buffer",
    "rnr_nak_retry_err",
    "rx_discards_phy",
    # Ethernet / DPDK (observe/network/nic_stats.py): NIC had no RX descriptor, mbuf pool empty, driver drops
    "imissed",
    "rx_missed_errors",
    "rx_nombuf",
    "rx_mbuf_allocation_errors",
    "rx_missed",
    "rx_dropped",
    "port.rx_dropped",
    "rx_total_discard_pkts",
    "rx_stat_discard",
)
CONGESTION = (
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
    "rp_cnp_handled",
    "port_xmit_wait",
    "port_xmit_discards",
    "rx_pause_ctrl_phy",
    "tx_pause_ctrl_phy",
)
MISCONFIG = ("rp_cnp_ignored", "rx_icrc_encapsulated")
WAIT_ONLY = {"port_xmit_wait"}  # flow-control wait, not a drop
RETRANS = (
    "out_of_sequence",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "duplicate_request",
)
LINK = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_remote_physical_errors",
    "link_down_events_phy",
    "rx_symbol_err_phy",
    "rx_pcs_symbol_err_phy",
    "rx_crc_errors",
    "rx_crc_errors.nic",
    "rx_crc_errors_phy",
    "mac_remote_errors",
)
# received-packet totals a drop/error count is compared with (the largest present is used)
RX_PACKETS = (
    "ipackets",
    "rx_good_packets",
    "rx_packets",
    "rx_packets_phy",
    "port_rcv_packets",
    "rx_unicast",
    "rx_ucast_packets",
)
CQE = (
    "req_cqe_error",
    "resp_cqe_error",
    "req_remote_access_errors",
    "resp_remote_access_errors",
    "req_remote_invalid_request",
    "resp_local_length_error",
)
FLUSH = ("req_cqe_flush_error", "resp_cqe_flush_error")


# --- alerts: node exporter's InfiniBand counters (IB link and port counters), and the agent's
# clusterdoctor_rdma_counter_total (rate() in PromQL) for the hardware counters node exporter does not export (RoCE
# out_of_buffer, ECN/CNP, retransmission, completion errors) -----------------------------------------
_N = 'job="node",instance="10.0.3.7:9100",device="mlx5_0",port="1"'
_NL = {"job": "node", "instance": "10.0.3.7:9100", "device": "mlx5_0", "port": "1"}
_AG = 'job="clusterdoctor-agent",instance="10.0.3.7:9877",node="gpu-node-7",device="mlx5_0",port="1"'
_AGL = {"node": "gpu-node-7", "instance": "10.0.3.7:9877", "device": "mlx5_0", "port": "1"}
_NE_LINK = (
    "link_downed", "link_error_recovery", "port_errors_received", "symbol_error",
    "local_link_integrity_errors", "excessive_buffer_overrun_errors", "port_receive_remote_physical_errors",
)  # fmt: skip


def _re(names: tuple[str, ...]) -> str:
    """A PromQL regex (inside a double-quoted string) matching exactly these counter names."""
    return "|".join(n.replace(".", "\\\\.") for n in names)


def _agent_rate(names: tuple[str, ...], what: str, rid_counter: str, quiet_counter: str) -> tuple[Alert, ...]:
    # the agent exports the raw counters; the rate is PromQL's (right behind an HA Prometheus pair)
    expr = (
        "max by (node, instance, device, port) "
        f'(rate(clusterdoctor_rdma_counter_total{{counter=~"{_re(names)}"}}[5m]))'
    )
    healthy = Example(
        (
            (f'clusterdoctor_rdma_counter_total{{{_AG},counter="{rid_counter}"}}', "1000+0x30"),
            (
                f'clusterdoctor_rdma_counter_total{{{_AG},counter="{quiet_counter}"}}',
                "0+72e9x30",
            ),  # data, not errors: 1.2e9/s
        )
    )

    def one(sev: str, rate: float, threshold: str, also=()) -> Alert:
        return Alert(
            expr=f"{expr} {threshold}",
            severity=sev,
            for_="5m",
            source="clusterdoctor-agent",
            summary=f"{{{{ $labels.node }}}} {{{{ $labels.device }}}}/{{{{ $labels.port }}}}: {what}",
            description=(
                f"The agent's counters (their rate over 5 minutes) show {what} on this port "
                f"({ANY_INCREASE.meaning}; at {HIGH_RATE.value:g}/s and above it is critical). "
                "`clusterdoctor rules` explains the counters and the fix."
            ),
            fires=Example(
                (
                    (
                        f'clusterdoctor_rdma_counter_total{{{_AG},counter="{rid_counter}"}}',
                        f"0+{rate * 60:g}x30",
                    ),
                ),
                _AGL,
                also=also,
            ),
            healthy=healthy,
        )

    return (
        one("warning", 3, "> 0"),
        one("critical", 450, f">= {HIGH_RATE.value:g}", ("warning",)),
    )


def _node_exporter(names: tuple[str, ...], what: str, fires_metric: str, name: str) -> Alert:
    rates = counter_rates(tuple(f"node_infiniband_{n}_total" for n in names))
    return Alert(
        name=name,
        expr=f"max by (job, instance, device, port) ({rates}) > 0",
        severity="warning",
        for_="10m",
        source="node-exporter",
        summary=f"{{{{ $labels.instance }}}} {{{{ $labels.device }}}}/{{{{ $labels.port }}}}: {what} (node exporter)",
        description=(
            f"node exporter's InfiniBand counters for this port grew for 10 minutes: {what}. "
            f"{ANY_INCREASE.meaning} ({ANY_INCREASE.source})."
        ),
        # every counter of the alert present on the same port, as node exporter exports them
        fires=Example(
            tuple(
                (f"node_infiniband_{n}_total{{{_N}}}", "0+12x30" if n == fires_metric else "2x30")
                for n in names
            )
            + ((f"node_infiniband_port_data_received_bytes_total{{{_N}}}", "0+1e10x30"),),
            _NL,
        ),
        healthy=Example(
            tuple((f"node_infiniband_{n}_total{{{_N}}}", "7x30") for n in names)  # old errors, none new
            + ((f"node_infiniband_port_data_received_bytes_total{{{_N}}}", "0+1e10x30"),)
        ),
    )


RDMA001_ALERTS = _agent_rate(RX_DROPS, "receive drops (no receive buffer)", "out_of_buffer", "rx_bytes")
RDMA002_ALERTS = (
    *_agent_rate(CONGESTION, "congestion signals (ECN/CNP, pause, transmit wait)", "np_cnp_sent", "rx_bytes"),
    _node_exporter(
        ("port_transmit_wait", "port_discards_transmitted"),
        "transmit wait / discards (congestion)",
        "port_transmit_wait",
        "ClusterdoctorRdmaCongestionNodeExporter",
    ),
)
RDMA003_ALERTS = _agent_rate(
    RETRANS, "retransmissions and transport timeouts", "local_ack_timeout_err", "rx_bytes"
)
RDMA004_ALERTS = (
    *_agent_rate(LINK, "link errors", "symbol_error", "rx_bytes"),
    _node_exporter(_NE_LINK, "link errors", "link_error_recovery", "ClusterdoctorRdmaLinkErrorsNodeExporter"),
)
RDMA005_ALERTS = _agent_rate(CQE, "completion errors", "req_cqe_error", "rx_bytes")


def _views(obs: Observations) -> list[tuple[str, dict[str, float], dict[str, Any], bool]]:
    """(port name, values, info, is_rate) per port: rates when available, else totals."""
    out = []
    rates = obs.get("rdma_rates") or []
    rated = set()
    for r in rates:
        out.append(
            (
                r.name,
                dict(r.per_s),
                {"interval_s": r.interval_s, "resets": r.resets, "saturated": r.saturated},
                True,
            )
        )
        rated.add(r.name)
    for p in obs.get("rdma") or []:
        if p.name in rated:
            continue
        out.append(
            (
                p.name,
                {k: float(v) for k, v in p.counters.items()},
                {"saturated": p.saturated, "source": p.source},
                False,
            )
        )
    return out


def _src(obs: Observations, name: str) -> str | None:
    for p in obs.get("rdma") or []:
        if p.name == name:
            return p.source or None
    return None


def _nonzero(vals: dict[str, float], names: tuple[str, ...], saturated: list[str]) -> dict[str, float]:
    return {k: vals[k] for k in names if vals.get(k, 0) > 0 and k not in saturated}


def _emit(
    rule_obj: Any, obs: Observations, names: tuple[str, ...], what: str, base_sev: Severity
) -> Iterator[Finding]:
    for port, vals, info, is_rate in _views(obs):
        sat = list(info.get("saturated") or [])
        hits = _nonzero(vals, names, sat)
        stuck = [k for k in sat if k in names]
        if not hits and not stuck:
            continue
        unit = "1/s" if is_rate else "since reset"
        ev = [
            Evidence(k, round(v, 3) if is_rate else int(v), ANY_INCREASE.value, unit, _src(obs, port))
            for k, v in hits.items()
        ]
        ev += [
            Evidence(
                f"{k} stuck at its maximum (saturated; true count unknown, at least this)",
                int(vals.get(k, 0)),
                source=_src(obs, port),
            )
            for k in stuck
        ]
        if is_rate:
            top = max(hits.values(), default=0.0)
            sev = Severity.CRITICAL if top >= HIGH_RATE.value else base_sev
            conf = 0.85
            when = f"over the last {info.get('interval_s', 0):.3g} s"
            if info.get("resets"):
                ev.append(
                    Evidence(
                        "counters reset between the reads (rate counted from zero)", ", ".join(info["resets"])
                    )
                )
        else:
            sev = Severity.INFO if base_sev == Severity.INFO else Severity.WARNING
            if names == CONGESTION and set(hits) <= WAIT_ONLY and not stuck:
                # a total of transmit-wait ticks since reset grows on every busy fabric: by itself, with no
                # rate and no discards, it says the link was used, not that it is congested now
                sev = Severity.INFO
            conf = 0.6
            when = "since the counters were last reset (one read; rates need two)"
        denom = max((vals[k] for k in RX_PACKETS if vals.get(k, 0) > 0), default=0.0)
        if denom and names in (RX_DROPS, LINK) and hits:
            # drivers count one drop under several names (imissed = rx_missed_errors = rx_out_of_buffer on
            # mlx5): take the largest, and compare drops with what arrived (received + dropped)
            worst = max(hits.values())
            frac = worst / (denom + worst) if names == RX_DROPS else worst / denom
            ev.append(
                Evidence(
                    "share of received packets", float(f"{frac:.3g}"), LOSS_HIGH.value, source=_src(obs, port)
                )
            )
            if frac >= LOSS_HIGH.value:
                sev = Severity.CRITICAL
            elif frac < LOSS_NEGLIGIBLE.value and not stuck:
                sev = Severity.INFO
            when += f" (dropped or errored share {frac:.2g}; {int(denom)} packets received)"
        desc = ", ".join(f"{k}={v:.3g}" if is_rate else f"{k}={int(v)}" for k, v in hits.items())
        if stuck:
            desc = ", ".join(filter(None, [desc, "saturated: " + ", ".join(stuck)]))
        yield rule_obj.finding(
            f"{port}: {what} {when}: {desc}.", evidence=ev, severity=sev, confidence=conf, subject=port
        )


@rule(
    id="RDMA001",
    name="rdma-receive-drops",
    layer="rdma",
    title="Receive queue drops (no receive WQE / descriptor / buffer)",
    requires=("rdma",),
    thresholds=(ANY_INCREASE, HIGH_RATE, LOSS_HIGH, LOSS_NEGLIGIBLE),
    alerts=RDMA001_ALERTS,
    causes=("rdma.congestion",),
)
def rdma_receive_drops(obs: Observations) -> Iterator[Finding]:
    """Packets dropped because the receiver had no posted receive buffer (``out_of_buffer``, RNR NAKs).

    **Symptom**: all-reduce or RDMA-read throughput drops with bursts; ``out_of_buffer`` or
    ``rnr_nak_retry_err`` grow; senders retransmit.
    **Why**: the receive queue ran empty — the application (or DPDK poller) did not re-post receive
    WQEs fast enough, or the queue is too small for the burst — so the NIC drops (or NAKs) incoming packets.
    **Fix**: deepen the receive queues (e.g. NCCL_IB_QPS_PER_CONNECTION / larger RX rings for DPDK),
    keep the polling thread on the NIC's NUMA node with a dedicated core, avoid CPU throttling of it.
    **Verify**: `rdma statistic show link <dev>/<port>` twice, seconds apart (out_of_buffer must stop growing)
    and `cat /sys/class/infiniband/*/ports/*/hw_counters/out_of_buffer`.
    """
    yield from _emit(rdma_receive_drops, obs, RX_DROPS, "receive drops (no receive buffer)", Severity.WARNING)


@rule(
    id="RDMA002",
    name="rdma-congestion",
    layer="rdma",
    title="RDMA fabric congestion (ECN/CNP, transmit wait)",
    requires=("rdma",),
    thresholds=(ANY_INCREASE, HIGH_RATE),
    alerts=RDMA002_ALERTS,
    causes=("rdma.congestion",),
)
def rdma_congestion(obs: Observations) -> Iterator[Finding]:
    """Congestion signals: ECN-marked RoCE packets, CNPs sent/handled, PFC pauses, IB transmit wait.

    **Symptom**: collective bandwidth far below line rate, worse for cross-rack/cross-zone traffic and at
    larger scale; latency tails grow.
    **Why**: switches mark packets (ECN) when queues build; the receiver (notification point) answers with
    CNPs and the sender (reaction point) slows down (DCQCN). ``np_*`` counters growing on a host means it
    receives congested traffic (incast); ``rp_cnp_handled`` means it is being throttled as a sender.
    CE marks with no CNPs sent, or ``rp_cnp_ignored`` > 0, mean congestion control is misconfigured.
    **Fix**: spread traffic (NCCL ring/tree choice, fewer ranks per NIC, rail-optimised placement),
    check ECMP hashing and switch buffer/ECN thresholds, enable/verify DCQCN on every host.
    **Verify**: `rdma statistic show` twice, seconds apart (rates of np_ecn_marked_roce_packets, np_cnp_sent,
    rp_cnp_handled) and `mlnx_qos -i <if>` for PFC/ECN settings.
    """
    yield from _emit(rdma_congestion, obs, CONGESTION, "congestion signals", Severity.WARNING)
    for port, vals, _info, _is_rate in _views(obs):
        ce = vals.get("np_ecn_marked_roce_packets", 0)
        if ce > 0 and "np_cnp_sent" in vals and vals.get("np_cnp_sent", 0) == 0:
            yield rdma_congestion.finding(
                f"{port}: ECN-marked RoCE packets received but no CNP sent — the notification point is disabled, so senders never slow down.",
                evidence=[
                    Evidence("np_ecn_marked_roce_packets", ce, source=_src(obs, port)),
                    Evidence("np_cnp_sent", 0, source=_src(obs, port)),
                ],
                severity=Severity.CRITICAL,
                confidence=0.8,
                subject=port,
            )
        if vals.get("rp_cnp_ignored", 0) > 0:
            yield rdma_congestion.finding(
                f"{port}: rp_cnp_ignored > 0 — CNPs arrive but RoCE congestion control is not enabled on this adapter.",
                evidence=[Evidence("rp_cnp_ignored", vals["rp_cnp_ignored"], 0, source=_src(obs, port))],
                severity=Severity.WARNING,
                confidence=0.8,
                subject=port,
            )


@rule(
    id="RDMA003",
    name="rdma-retransmission",
    layer="rdma",
    title="RDMA retransmissions and transport timeouts (packet loss)",
    requires=("rdma",),
    thresholds=(ANY_INCREASE, HIGH_RATE),
    alerts=RDMA003_ALERTS,
    causes=("rdma.congestion", "rdma.retry-exceeded"),
)
def rdma_retransmission(obs: Observations) -> Iterator[Finding]:
    """Loss recovery at the transport: out-of-sequence packets, NAK sequence errors, ACK timeouts.

    **Symptom**: RDMA throughput collapses in bursts, NCCL collectives show long tails; in the worst case
    QPs go to error state (``retry exceeded``) and jobs fail.
    **Why**: on a lossless fabric these stay at zero; they grow when packets are dropped (buffer overflow
    without PFC, link errors, misrouted ECMP) and the responder sees a sequence gap (``out_of_sequence``,
    ``packet_seq_err``) or the requester's ACK timer expires (``local_ack_timeout_err``, ~0.5 s each).
    **Fix**: find the drop: check link errors on both ends and switch drop counters, make PFC/ECN
    consistent end to end, reduce incast; raise the QP timeout only as a stop-gap.
    **Verify**: `rdma statistic show` twice, seconds apart (out_of_sequence, packet_seq_err,
    local_ack_timeout_err rates) and the switch port's discard counters.
    """
    yield from _emit(
        rdma_retransmission, obs, RETRANS, "retransmission / transport timeouts", Severity.WARNING
    )


@rule(
    id="RDMA004",
    name="rdma-link-errors",
    layer="rdma",
    title="RDMA link errors (symbol errors, link down, recovery)",
    requires=("rdma",),
    thresholds=(ANY_INCREASE, HIGH_RATE),
    alerts=RDMA004_ALERTS,
    causes=("ib.link-degraded",),
)
def rdma_link_errors(obs: Observations) -> Iterator[Finding]:
    """Physical-layer errors: symbol errors, link error recovery, link downed, receive errors.

    **Symptom**: sporadic retransmissions and stalls on one node or one rail; ``link_downed`` flaps.
    **Why**: a marginal cable, transceiver or port corrupts bits; the link retrains (error recovery) or goes
    down, and every packet lost that way must be retransmitted by the transport.
    **Fix**: reseat or replace the cable/transceiver, clean the connectors, move to another switch port;
    replace the cable if ``link_downed`` keeps growing.
    **Verify**: `cat /sys/class/infiniband/*/ports/*/counters/{symbol_error,link_downed,link_error_recovery}`
    twice, minutes apart, and `mlxlink -d <dev> -m` (BER, eye) where available.
    """
    yield from _emit(rdma_link_errors, obs, LINK, "link errors", Severity.WARNING)


@rule(
    id="RDMA005",
    name="rdma-completion-errors",
    layer="rdma",
    title="RDMA completion errors (access, length, remote errors)",
    requires=("rdma",),
    thresholds=(ANY_INCREASE,),
    alerts=RDMA005_ALERTS,
    causes=("rdma.retry-exceeded",),
)
def rdma_completion_errors(obs: Observations) -> Iterator[Finding]:
    """Work completions with errors (``req/resp_cqe_error``, remote access / invalid request errors).

    **Symptom**: RDMA operations fail; NCCL/UCX report ``completion with error`` and ranks abort or hang.
    **Why**: a CQE error moves the QP to the error state; its outstanding work then completes with
    ``*_cqe_flush_error`` (secondary, not a cause). Access and length errors are application/rkey/buffer
    bugs; a remote error comes from the peer. Retry-exceeded after packet loss shows up here too.
    **Fix**: read the first error's status in the application log (rkey, length, retry exceeded), fix
    buffer registration; if it follows retransmission findings, fix the loss first.
    **Verify**: `rdma statistic show` twice, seconds apart (cqe error counters stop growing) and the
    application's first `IBV_WC_*` error.
    """
    for f in _emit(rdma_completion_errors, obs, CQE, "completion errors", Severity.WARNING):
        f.summary += " Flush errors that accompany them are secondary (QP already in error)."
        yield f


@rule(
    id="RDMA006",
    name="rdma-counters-unreadable",
    layer="rdma",
    title="RDMA port counters unavailable",
    requires=("rdma",),
    severity=Severity.INFO,
    causes=(),  # a gap in what can be checked, not a cause of anything
)
def rdma_counters_unreadable(obs: Observations) -> Iterator[Finding]:
    """Port counters read ``N/A (no PMA)``: this port's errors cannot be checked.

    **Symptom**: counters under ``/sys/class/infiniband/<dev>/ports/<n>/counters`` read ``N/A (no PMA)``.
    **Why**: the device has no performance-management agent for its port counters (some iWARP/RoCE
    devices); drops and errors on it are invisible to this tool.
    **Fix**: read the device's own statistics instead (`ethtool -S <netdev>`, vendor tools) or enable
    `hw_counters` support in its driver.
    **Verify**: `cat /sys/class/infiniband/<dev>/ports/<n>/counters/port_rcv_data`.
    """
    for p in obs.get("rdma") or []:
        if p.unavailable and not p.counters:
            yield rdma_counters_unreadable.finding(
                f"{p.name}: {len(p.unavailable)} port counters read 'N/A' (no PMA); its errors are not checked.",
                evidence=[Evidence("unavailable counters", len(p.unavailable), source=p.source)],
                confidence=0.9,
                subject=p.name,
            )
