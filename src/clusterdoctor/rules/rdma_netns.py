"""The RDMA subsystem's network-namespace mode (``rdma_system`` input: iproute2 ``rdma system``)."""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("rdma_system", "no rdma system output (iproute2: rdma system show)")


@rule(
    id="RDMA025",
    name="rdma-netns-exclusive",
    layer="rdma",
    title="RDMA subsystem in exclusive netns mode: the RDMA shared device plugin cannot run here",
    requires=("rdma_system",),
    severity=Severity.INFO,
    causes=("rdma.device-plugin",),
)
def rdma_netns_exclusive(obs: Observations) -> Iterator[Finding]:
    """``rdma system`` says ``netns exclusive``.

    **Symptom**: the RDMA shared device plugin exits at start ("Exiting.. can not change : incorrect
    RDMA subsystem network namespace", RDMADP102); pods see no RDMA device that was not moved into
    their namespace.
    **Why**: in exclusive mode every RDMA device belongs to one network namespace (``rdma dev set
    <dev> netns <ns>``); sharing one HCA among pods needs the shared mode. Exclusive is right for
    per-pod SR-IOV RDMA (the SR-IOV CNI moves each VF's RDMA device), so this is a note, not a fault.
    **Fix**: for the shared device plugin, ``rdma system set netns shared`` and remove
    ``options ib_core netns_mode=0`` from /etc/modprobe.d; keep exclusive for SR-IOV RDMA.
    **Verify**: `rdma system`; `kubectl logs -n kube-system <rdma-shared-dp pod>`.
    """
    for s in obs.get("rdma_system") or []:
        if s.netns_mode != "exclusive":
            continue
        yield rdma_netns_exclusive.finding(
            "rdma system: netns exclusive: each RDMA device is usable only in the network namespace it "
            "was moved to; the RDMA shared device plugin refuses to start in this mode.",
            evidence=[Evidence("netns", "exclusive", source=f"{s.source}:{s.line}")],
            subject="rdma system",
            confidence=0.5,
        ).acting(Action.CONFIGURE)
