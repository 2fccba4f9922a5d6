"""RDMA rails: which of a host's ports a communication library would choose among.

Input: ``ib_ports`` (:mod:`clusterdoctor.observe.network.ibports`). NCCL and UCX use every Active RDMA
port they find unless told otherwise (NCCL_IB_HCA, UCX_NET_DEVICES); a host whose InfiniBand rails
sit beside a slower port — an Ethernet (RoCE) port of another adapter, or an IB port at a lower rate —
may have rings built through that port. That is a configuration to check, not a fault in itself, so
the finding is informational; a listing without port rates is judged only by the link layer (an
``ibstatus``/``ibstat`` port with LID 0 and SM LID 0 while Active has no subnet manager: Ethernet).
Likewise for RoCE GIDs (``ib_gids``): a GID index fixed for every host (NCCL_IB_GID_INDEX) selects the
routable GID only where the tables agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.registry import Observations, rule


def _layer(p: Any) -> str | None:
    """InfiniBand or Ethernet, as stated or as the LIDs show (an Active IB port always has a LID)."""
    if p.link_layer in ("InfiniBand", "Ethernet"):
        return p.link_layer
    if p.state == "Active" and p.lid is not None and p.sm_lid is not None:
        return "Ethernet" if p.lid == 0 and p.sm_lid == 0 else "InfiniBand"
    return None


@rule(
    id="RDMA015",
    name="rdma-mixed-rails",
    layer="rdma",
    title="A slower RDMA port sits beside the InfiniBand rails (a library may choose it)",
    requires=("ib_ports",),
    severity=Severity.INFO,
    causes=("rdma.hca-selection",),
)
def rdma_mixed_rails(obs: Observations) -> Iterator[Finding]:
    """Two or more Active InfiniBand ports and, on the same listing, an Active Ethernet port or an
    InfiniBand port at a lower rate than the rails.

    **Symptom**: NCCL bandwidth well below the rails' rate although every IB port is Active at full
    speed; `NCCL_DEBUG=INFO` lists an `mlx5_N` that is not one of the rails among `NET/IB` devices.
    **Why**: NCCL's IB transport opens every Active device it finds (net_ib.cc ncclIbInit) unless
    NCCL_IB_HCA filters them, and UCX every device unless UCX_NET_DEVICES does; a ring built through
    a 40 Gb/s Ethernet port runs at that port's rate.
    **Fix**: name the rails: `NCCL_IB_HCA=mlx5_0,mlx5_1,...` or exclude the others
    (`NCCL_IB_HCA=^mlx5_3,mlx5_4`); for UCX, `UCX_NET_DEVICES=mlx5_0:1,...`.
    **Verify**: `NCCL_DEBUG=INFO` shows only the rails in its `NET/IB : Using` line.
    """
    by_src: dict[str, list[Any]] = {}
    for p in obs.get("ib_ports") or []:
        if p.state == "Active" and p.device:
            by_src.setdefault(p.source, []).append(p)
    for _src, ports in sorted(by_src.items()):
        ib = [p for p in ports if _layer(p) == "InfiniBand"]
        if len(ib) < 2:
            continue
        top = max((p.rate_gbps for p in ib if p.rate_gbps), default=None)
        odd = [p for p in ports if _layer(p) == "Ethernet"]
        if top:
            odd += [p for p in ib if p.rate_gbps and p.rate_gbps < top]
        if not odd:
            continue
        names = sorted({p.name for p in odd})
        rails = sorted({p.name for p in ib if p not in odd})
        why = []
        for p in sorted(odd, key=lambda p: p.name):
            if _layer(p) == "Ethernet":
                how = (
                    "link layer Ethernet"
                    if p.link_layer
                    else "LID 0 and SM LID 0 (no subnet manager: Ethernet)"
                )
                why.append(f"{p.name}: {how}" + (f", {p.rate_gbps:g} Gb/s" if p.rate_gbps else ""))
            else:
                why.append(f"{p.name}: {p.rate_gbps:g} Gb/s against {top:g}")
        f = rdma_mixed_rails.finding(
            f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} Active beside the InfiniBand rails "
            f"({', '.join(rails[:8])}): NCCL and UCX use every Active port unless NCCL_IB_HCA / "
            f"UCX_NET_DEVICES name the rails ({'; '.join(why[:4])}).",
            evidence=[Evidence(f"{p.name}: {p.program} line {p.line}", source=p.source) for p in odd[:6]],
            subject=" ".join(names),
            confidence=0.5,
        )
        f.action = Action.CONFIGURE
        yield f


@rule(
    id="RDMA017",
    name="roce-gid-index-differs",
    layer="rdma",
    title="The routable RoCE GID sits at different indexes on the hosts (a fixed GID index fits one only)",
    requires=("ib_gids",),
    severity=Severity.INFO,
    causes=("roce.gid",),
)
def roce_gid_index_differs(obs: Observations) -> Iterator[Finding]:
    """GID tables of two or more hosts (separate inputs) whose first IPv4-mapped GID has different indexes.

    **Symptom**: RDMA connections between two RoCE hosts time out (UCX `UD endpoint timeout`, NCCL
    `ibv_modify_qp ... Connection timed out`) while each host works with others; the hosts' `show_gids`
    or `ibv_devinfo -v` GID tables differ in length.
    **Why**: the kernel fills a port's GID table from its netdev's addresses, one entry per address and
    RoCE version enabled; hosts with another number of addresses or RoCE modes put the IPv4 GID at
    another index. NCCL_IB_GID_INDEX / UCX_IB_GID_INDEX / perftest `-x` name one index for every host,
    so on the others it selects a link-local or absent GID.
    **Fix**: make the tables alike (the same RoCE mode and addresses on every host), or let the library
    choose by address family (NCCL 2.21+: leave NCCL_IB_GID_INDEX unset, set NCCL_IB_ROCE_VERSION_NUM
    and NCCL_IB_ADDR_FAMILY; UCX: UCX_IB_ROCE_LOCAL_SUBNET / the default index 0 on both).
    **Verify**: `show_gids` on each host lists the RoCE v2 IPv4 GID at the index the job uses.
    """
    by_src: dict[str, list[Any]] = {}
    for g in obs.get("ib_gids") or []:
        by_src.setdefault(g.source, []).append(g)
    first: dict[str, tuple[int, str, int]] = {}  # source -> (index, address, entries per address)
    for src, gids in sorted(by_src.items()):
        v4 = [g for g in gids if g.ipv4 and g.version in (None, "v2")]
        if not v4:
            continue
        g0 = min(v4, key=lambda g: g.index)
        per = sum(1 for g in gids if g.gid == g0.gid)
        first[src] = (g0.index, g0.ipv4 or g0.gid, per)
    if len(first) < 2 or len({i for i, _, _ in first.values()}) < 2:
        return
    parts = [f"{Path(s).name}: index {i} ({addr}, {per} entr{'y' if per == 1 else 'ies'} per address)"
             for s, (i, addr, per) in first.items()]  # fmt: skip
    modes = {per for _, _, per in first.values()}
    f = roce_gid_index_differs.finding(
        "The first IPv4 RoCE GID is at different indexes on the hosts ("
        + "; ".join(parts[:6])
        + "): a GID index set for all of them selects another GID on some"
        + (" (the hosts list a different number of RoCE versions per address)" if len(modes) > 1 else "")
        + ".",
        evidence=[Evidence(p) for p in parts[:6]],
        subject="RoCE GID tables",
        confidence=0.5,
    )
    f.action = Action.CONFIGURE
    yield f
