"""Per-QP RDMA rules: queue pairs in the error state, and per-QP transport errors, joined to their process.

Inputs: ``rdma_qps`` (``rdma res show qp``, text or JSON: :mod:`clusterdoctor.observe.network.rdma` and
:mod:`clusterdoctor.observe.network.rdma_qp`) and ``rdma_qp_counters`` (``rdma statistic qp show``).
The per-port counters stay with RDMA001-RDMA005; a QP counter set covers only the QPs bound to it, so
its errors are that process's, on that port.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Action, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("rdma_qps", "no queue pairs (rdma res show qp, text or -j)")
register_input(
    "rdma_qp_counters",
    "no per-QP counters (rdma statistic qp show; bind them with `rdma statistic qp set link DEV/PORT auto type on`)",
)

# QP states from which a QP does not carry traffic again (IB spec 10.3: Error and SQ Error; the QP must be
# reset and reconnected) — iproute2 prints them as ERR and SQE
BROKEN_STATES = ("ERR", "SQE")

# Per-QP hardware counters that count transport trouble (mlx5 q counters, kernel
# Documentation/ABI/stable/sysfs-class-infiniband "hw_counters"): each non-zero value is a real event.
FATAL_COUNTERS = {
    "rnr_nak_retry_err": "RNR NAK retries exhausted (the receiver had no receive buffer posted)",
    "req_cqe_error": "requester completions with error",
    "resp_cqe_error": "responder completions with error",
    "req_remote_access_errors": "remote access errors (bad rkey / permissions)",
    "resp_remote_access_errors": "remote access errors seen as responder",
    "req_remote_invalid_request": "remote invalid requests",
    "resp_local_length_error": "local length errors (receive buffer too small)",
}
RETRANS_COUNTERS = {
    "local_ack_timeout_err": "ACK timeouts (the requester retransmitted)",
    "packet_seq_err": "packet sequence errors (NAKs: lost packets)",
    "implied_nak_seq_err": "implied NAK sequence errors (lost packets)",
    "out_of_sequence": "out-of-sequence packets received (lost or reordered)",
    "duplicate_request": "duplicate requests (the peer retransmitted)",
}
QP_ERRORS = Threshold(
    "rdma_qp_transport_errors",
    0,
    "count",
    "IB spec retry semantics and the kernel's hw_counters documentation: each of these counts a "
    "retransmission or a failed completion on this QP; a healthy QP shows none",
    "per-QP transport error counters above zero",
)


def _owner(pid: Any, comm: Any) -> str:
    if pid is not None and comm:
        return f"pid {pid} {comm}"
    return f"{comm}" if comm else (f"pid {pid}" if pid is not None else "unknown owner")


@rule(
    id="RDMA021",
    name="rdma-qp-error-state",
    layer="rdma",
    title="RDMA queue pair in the error state (its connection is dead)",
    requires=("rdma_qps",),
    severity=Severity.WARNING,
    causes=("rdma.retry-exceeded", "rdma.qp-error"),
)
def qp_error_state(obs: Observations) -> Iterator[Finding]:
    """A queue pair sits in ERR or SQE: a completion failed (retries exhausted, a remote access error, a
    flushed work request) and the QP carries no traffic until its owner resets it.

    **Symptom**: a collective or an RDMA transfer hangs or fails with a completion error (NCCL `Got
    completion … with error 12`, UCX `Transport retry count exceeded`); `rdma res show qp` lists the QP
    with `state ERR`.
    **Why**: an RC QP moves to ERR when a work request completes in error — the peer is gone or
    unreachable (retry exhausted), the rkey is wrong, the receiver ran out of buffers — and every later
    request is flushed. One process's QPs in ERR on one port points at that port's link or its peer.
    **Fix**: find the first completion error in the owner's log (NCCL_DEBUG=INFO, UCX_LOG_LEVEL=info);
    check the port and the peer (`ibstat`, link error counters, the switch port); restart the job once the
    link is healthy (a QP in ERR is not recovered by waiting).
    **Verify**: `rdma res show qp` and `rdma statistic qp show`
    """
    by_owner: dict[tuple[str, Any, str, Any], list[Any]] = defaultdict(list)
    for q in obs.get("rdma_qps") or []:
        if q.state.upper() in BROKEN_STATES and not q.kernel:
            by_owner[(q.device, q.port, q.comm, q.pid)].append(q)
    for (dev, port, comm, pid), qs in sorted(by_owner.items(), key=lambda kv: str(kv[0])):
        where = f"{dev}/{port}" if port is not None else dev
        subject = f"{where} ({_owner(pid, comm)})"
        qpns = ", ".join(str(q.lqpn) for q in qs[:12]) + (f" and {len(qs) - 12} more" if len(qs) > 12 else "")
        f = qp_error_state.finding(
            f"{len(qs)} {qs[0].type} queue pair(s) of {_owner(pid, comm)} on {where} in the error state "
            f"(QP {qpns}).",
            evidence=[Evidence(f"QP {q.lqpn} type {q.type} state", q.state) for q in qs[:6]],
            subject=subject,
            confidence=0.8,
        )
        f.action = Action.RESTART_JOB
        yield f


@rule(
    id="RDMA022",
    name="rdma-qp-transport-errors",
    layer="rdma",
    title="Transport errors on one process's queue pairs (per-QP counters)",
    requires=("rdma_qp_counters",),
    thresholds=(QP_ERRORS,),
    causes=("rdma.retry-exceeded", "rdma.congestion"),
)
def qp_transport_errors(obs: Observations) -> Iterator[Finding]:
    """The counters bound to one process's QPs count retransmissions, NAKs or failed completions.

    **Symptom**: one job's RDMA traffic is slow or fails while the port's totals look unremarkable;
    `rdma statistic qp show` lists non-zero `local_ack_timeout_err`, `out_of_sequence`,
    `rnr_nak_retry_err` or `*_cqe_error` for that job's counter.
    **Why**: a per-QP counter set counts only the QPs bound to it (auto mode binds them per type or
    per process), so its errors belong to that process and port: lost packets on its path
    (retransmissions, sequence errors), a receiver without posted buffers (RNR NAKs), or failed
    completions.
    **Fix**: for retransmissions and sequence errors, check the path (link error counters on both ends,
    PFC/ECN configuration on RoCE, the switch port); for RNR NAKs, the receiver must post receive buffers
    in time (application); for completion errors, read the owner's log for the first one.
    **Verify**: `rdma statistic qp show` twice, a minute apart (the counters keep rising while it goes on)
    """
    qps = {(q.device, q.port, q.lqpn): q for q in obs.get("rdma_qps") or []}
    for c in obs.get("rdma_qp_counters") or []:
        bad = {k: v for k, v in c.counters.items() if v > QP_ERRORS.value and k in FATAL_COUNTERS}
        retrans = {k: v for k, v in c.counters.items() if v > QP_ERRORS.value and k in RETRANS_COUNTERS}
        if not bad and not retrans:
            continue
        owner = _owner(c.pid, c.comm)
        ev = [
            Evidence(FATAL_COUNTERS[k], v, QP_ERRORS.value, source=c.source) for k, v in sorted(bad.items())
        ]
        ev += [
            Evidence(RETRANS_COUNTERS[k], v, QP_ERRORS.value, source=c.source)
            for k, v in sorted(retrans.items())
        ]
        states = [qps[(c.device, c.port, n)].state for n in c.lqpns if (c.device, c.port, n) in qps]
        if c.lqpns:
            ev.append(Evidence("queue pairs bound to this counter", ", ".join(map(str, c.lqpns[:12]))))
        if states:
            ev.append(Evidence("their states (rdma res show qp)", ", ".join(states[:12])))
        what = ", ".join(f"{k} {v}" for k, v in sorted({**bad, **retrans}.items()))
        f = qp_transport_errors.finding(
            f"{owner} on {c.name}: {what} on its queue pair(s) {', '.join(map(str, c.lqpns[:6])) or '(not listed)'}.",
            evidence=ev,
            severity=Severity.CRITICAL if bad else Severity.WARNING,
            subject=f"{c.name} ({owner})",
            confidence=0.75,
        )
        f.action = Action.RESTART_JOB if bad else Action.CONFIGURE
        yield f
