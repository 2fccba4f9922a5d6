"""What a perftest run's own header says about the RDMA path it tried (``perftest`` input).

A run is data, not a verdict (:mod:`clusterdoctor.observe.network.perftest`); what its header shows is
judged here: on a RoCE port (``Link type : Ethernet``) every connection is addressed by GID, and the
``GID:`` lines under ``local address`` / ``remote address`` print the GIDs the two ends exchanged. An
all-zero GID is an empty GID table entry: the port's netdev has no IP address for that index (a pod's
secondary network without a RoCE GID, a VF without an address), so the queue pair cannot be moved
to RTR and perftest answers "Failed to modify QP ... to RTR" / "Unable to Connect the HCA's through
the link".
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("perftest", "no perftest output (ib_write_bw, ib_read_bw, ib_send_bw ...)")


def _zero(gid: str) -> bool:
    digits = gid.replace(":", "").replace(".", "")
    return bool(digits) and set(digits) == {"0"}


@rule(
    id="RDMA016",
    name="perftest-zero-gid",
    layer="rdma",
    title="perftest over RoCE used an all-zero GID (no IP address behind that GID index)",
    requires=("perftest",),
    severity=Severity.CRITICAL,
    causes=("roce.gid",),
)
def perftest_zero_gid(obs: Observations) -> Iterator[Finding]:
    """A perftest run on an Ethernet (RoCE) port whose local or remote GID is all zeros.

    **Symptom**: `ib_write_bw` prints `GID: 00:00:...:00` under `local address` and fails with
    `Failed to modify QP <n> to RTR` / `Unable to Connect the HCA's through the link`.
    **Why**: RoCE addresses every packet with the GID at the chosen index (perftest `-x`, NCCL_IB_GID_INDEX);
    the kernel fills GID entries from the IP addresses of the port's netdev, so an entry is zero
    when that netdev (or the pod's network interface on the RDMA device) has no address for it.
    **Fix**: give the RoCE netdev an IP address (in Kubernetes, a secondary network on the RDMA device
    with IPAM: macvlan/SR-IOV CNI with an address, not a bare interface), then pick the RoCE v2 GID of
    that address (`show_gids`; perftest `-x <index>`, NCCL_IB_GID_INDEX).
    **Verify**: `show_gids` lists a RoCE v2 GID with the IPv4 address; perftest prints it as its GID.
    """
    for run in obs.get("perftest") or []:
        if (run.fields.get("Link type") or "").lower() != "ethernet":
            continue
        zero = [g for g in run.gids if _zero(g)]
        if not zero:
            continue
        dev = run.device or "the RDMA device"
        which = "both ends" if len(zero) >= 2 else "one end"
        idx = run.fields.get("GID index")
        f = perftest_zero_gid.finding(
            f"{dev}: perftest over RoCE exchanged an all-zero GID on {which}"
            + (f" (GID index {idx})" if idx else "")
            + ": that GID entry is empty, so no queue pair can reach RTR; the netdev behind it has no IP address.",
            evidence=[
                Evidence("Link type", run.fields.get("Link type"), source=run.source),
                Evidence("GID index", idx, source=run.source),
                *[Evidence("GID", g, source=f"{run.source}:{run.line}") for g in zero[:2]],
            ],
            subject=dev,
            confidence=0.8,
        )
        f.action = Action.CONFIGURE
        yield f
