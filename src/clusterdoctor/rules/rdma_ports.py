"""RDMA port rules: port states, link width and rate, RoCE GIDs, the locked-memory limit, netdevs.

Inputs (:mod:`clusterdoctor.observe.network.ibports`, :mod:`~clusterdoctor.observe.network.ucx_info`,
:mod:`~clusterdoctor.observe.node.limits_text`): ``ib_ports`` from ibstat, ibstatus, ibv_devinfo, rdma link,
ibdev2netdev -v and lshca; ``ib_gids`` from show_gids and ibv_devinfo -v; ``ib_netdevs`` from
ibdev2netdev; ``ulimits``; ``ucx_interfaces``; and the catalogued messages (``messages``).

What is normal is not a finding:

* a RoCE (Ethernet) port's width and speed say how the Ethernet link was built (1X at 100 Gb/s on a
  single-lane 100GbE port, a bond's ports), never a degraded IB link: only InfiniBand ports are judged;
* an ``ibdev2netdev`` ``(Down)`` is the netdev's operational state: an IPoIB netdev (``ib0``, ``ibp26s0``)
  without an address is down on a healthy pure-IB fabric, and an unused second port is down on a
  healthy host beside others that are up;
* a GID table with only link-local RoCE v2 GIDs is reported (info) but judged only when a connection
  failed; a listing the user shortened with ``...`` is not evidence that an entry is missing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from clusterdoctor.model import Action, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input(
    "ib_ports",
    "no RDMA port listing (ibstat, ibstatus, ibv_devinfo, rdma link, ibdev2netdev -v or lshca output)",
)
register_input("ib_gids", "no GID table (show_gids or ibv_devinfo -v output)")
register_input("ib_netdevs", "no ibdev2netdev output")
register_input("ulimits", "no ulimit -a output")
register_input("ucx_interfaces", "no ucx_info -d output")
register_input("ib_links", "no iblinkinfo output")

DEGRADED_RATE_FRACTION = Threshold(
    "ib_rate_fraction_of_siblings",
    0.5,
    "fraction of the fastest Active port of the same HCA type",
    "IBTA link training: a 4X port that loses lanes or falls back a speed generation runs at 1/2 or 1/4 "
    "of its rate; equal HCAs on one host are cabled alike, so a port at half its siblings' rate trained down",
    "rate at or below which an Active InfiniBand port is degraded",
)
MEMLOCK_RECOMMENDED = Threshold(
    "memlock_kib",
    "unlimited",
    "KiB (ulimit -l)",
    "NCCL troubleshooting guide (InfiniBand: 'ulimit -l unlimited'), UCX ib_log.c ('Please set max locked "
    "memory (ulimit -l) to unlimited'), Open MPI FAQ ib-locked-pages",
    "any finite locked-memory limit is below what RDMA memory registration is documented to need",
)

# IPoIB netdev names: ib0, ib1.8001 (child), ibp26s0, ibs1f0 (predictable names)
_IPOIB_PREFIXES = ("ib",)


def _act(f: Finding, action: Action) -> Finding:
    return f.acting(action)


def _cls(code: str) -> tuple[str, ...]:
    from clusterdoctor.rules.catalog import by_code

    m = by_code().get(code)
    return m.causes if m else ()


def _elided(obs: Observations, source: str) -> bool:
    """The user cut lines out of this input ('...'): an absence in it proves nothing."""
    return any(getattr(p, "path", None) == source and getattr(p, "gaps", ()) for p in obs.get("pastes") or [])


def _where(p: Any) -> str:
    return f"{p.source}:{p.line}"


def _state_words(p: Any) -> str:
    bits = [f"state {p.state}" if p.state else "", f"physical state {p.phys_state}" if p.phys_state else ""]
    return ", ".join(b for b in bits if b) or "state not shown"


def _port_groups(ports: Iterable[Any]) -> dict[tuple[Any, ...], list[Any]]:
    """Ports by device/port across every input; a port whose device the excerpt does not name is its own."""
    groups: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for p in ports:
        key = (p.device, p.port) if p.device else ("?", p.source, p.line)
        groups[key].append(p)
    return groups


def _subject(p: Any) -> str:
    return p.name if p.device else "an RDMA port (device not named in the excerpt)"


def _netdev_note(group: list[Any]) -> str:
    nd = next((p.netdev for p in group if p.netdev), None)
    return f" ({nd})" if nd else ""


@rule(
    id="RDMA007",
    name="rdma-port-down",
    layer="rdma",
    title="RDMA port down or flapping",
    requires=("ib_ports",),
    causes=("ib.port-down",),
)
def rdma_port_down(obs: Observations) -> Iterator[Finding]:
    """A port that is Down (Polling, Disabled) or was seen both Down and Active.

    **Symptom**: NCCL/UCX/MPI hang at connection or fail with completion errors (error 12), or a job uses
    fewer rails than it should; ``ibstat`` shows ``State: Down``; ``rdma link`` shows ``state DOWN``.
    **Why**: a Down port carries nothing: ``Polling`` means no link partner trained with it (no cable, a
    dead transceiver, the switch port down), ``Disabled`` that it was disabled or the module is not
    recognised. Seen Down and Active in reads moments apart, the link is flapping (a marginal cable or
    transceiver), and every flap breaks the queue pairs on it.
    **Fix**: reseat or replace the cable/transceiver, check the switch port; keep jobs off the port until
    it stays Active (NCCL_IB_HCA / UCX_NET_DEVICES list only Active ports); a port that is unused by design
    can be ignored or disabled.
    **Verify**: `ibstat` (State: Active, Physical state: LinkUp) and `rdma link show`, a few minutes apart.
    """
    for _key, group in sorted(_port_groups(obs.get("ib_ports") or []).items(), key=lambda kv: str(kv[0])):
        states = {p.state for p in group if p.state}
        down = [p for p in group if p.state == "Down"]
        if not down:
            continue
        p0 = down[0]
        ev = [Evidence(f"{_where(p)}: {p.program}: {_state_words(p)}", source=p.source) for p in group[:6]]
        phys = sorted({p.phys_state for p in down if p.phys_state})
        how = f" (physical state {', '.join(phys)})" if phys else ""
        if "Active" in states:
            yield _act(
                rdma_port_down.finding(
                    f"{_subject(p0)}{_netdev_note(group)} was seen Down{how} and Active in {len(group)} reads: "
                    "the link is flapping.",
                    evidence=ev,
                    severity=Severity.WARNING,
                    confidence=0.8,
                    subject=_subject(p0),
                    causes=("ib.port-down", "ib.link-degraded"),
                ),
                Action.REPLACE_HARDWARE,
            )
            continue
        yield _act(
            rdma_port_down.finding(
                f"{_subject(p0)}{_netdev_note(group)} is Down{how}: it carries no traffic.",
                evidence=ev,
                severity=Severity.WARNING,
                confidence=0.75,
                subject=_subject(p0),
            ),
            Action.REPLACE_HARDWARE,
        )


@rule(
    id="RDMA008",
    name="rdma-port-not-active",
    layer="rdma",
    title="InfiniBand port stuck Initializing or Armed (no subnet manager)",
    requires=("ib_ports",),
    causes=("ib.no-subnet-manager",),
)
def rdma_port_initializing(obs: Observations) -> Iterator[Finding]:
    """A port whose physical link is up but that no subnet manager has made Active.

    **Symptom**: ``ibstat`` shows ``State: Initializing`` with ``Physical state: LinkUp`` (``PORT_INIT``
    in ibv_devinfo, ``init`` in lshca), LIDs 0; the port cannot carry traffic and jobs that pick it hang.
    **Why**: an IB port becomes Active only when the subnet manager assigns its LID and moves it through
    Armed to Active; Initializing with the link up means no SM is running on the fabric, or this port is
    not reached by it (a partitioned fabric, an SM that excluded the port).
    **Fix**: start or fix the subnet manager (opensm, or the managed switch's / UFM's SM) on this fabric,
    and check that it sees the port; until then exclude the port from jobs.
    **Verify**: `sminfo` (an SM answers) and `ibstat` (State: Active, a non-zero Base lid and SM lid).
    """
    for _key, group in sorted(_port_groups(obs.get("ib_ports") or []).items(), key=lambda kv: str(kv[0])):
        states = {p.state for p in group if p.state}
        if "Active" in states:
            continue
        stuck = [p for p in group if p.state in ("Initializing", "Armed")]
        if not stuck:
            continue
        p0 = stuck[0]
        sm = next((p.sm_lid for p in stuck if p.sm_lid is not None), None)
        sm_note = f"; SM lid {sm}" if sm is not None else ""
        ev = [Evidence(f"{_where(p)}: {p.program}: {_state_words(p)}", source=p.source) for p in group[:6]]
        if p0.state == "Armed":
            yield _act(
                rdma_port_initializing.finding(
                    f"{_subject(p0)}{_netdev_note(group)} is Armed: the subnet manager configured it but never "
                    f"made it Active{sm_note}.",
                    evidence=ev,
                    severity=Severity.WARNING,
                    confidence=0.7,
                    subject=_subject(p0),
                ),
                Action.RESTART_SERVICE,
            )
            continue
        yield _act(
            rdma_port_initializing.finding(
                f"{_subject(p0)}{_netdev_note(group)} is Initializing with the physical link up: no subnet "
                f"manager has configured it{sm_note}.",
                evidence=ev,
                severity=Severity.CRITICAL,
                confidence=0.8,
                subject=_subject(p0),
            ),
            Action.RESTART_SERVICE,
        )


@rule(
    id="RDMA009",
    name="rdma-link-degraded",
    layer="rdma",
    title="InfiniBand link trained below its width or rate",
    requires=("ib_ports",),
    thresholds=(DEGRADED_RATE_FRACTION,),
    causes=("ib.link-degraded",),
)
def rdma_link_degraded(obs: Observations) -> Iterator[Finding]:
    """An Active InfiniBand port at 1X width, in link error recovery, or at half the rate of its siblings.

    **Symptom**: collectives over one rail are slower than over the others; ``ibv_devinfo -v`` shows
    ``active_width: 1X`` or ``ibstat`` a lower ``Rate`` than the host's other ports of the same HCA.
    **Why**: when lanes fail to train (a damaged cable, a dirty connector, a marginal transceiver) a 4X
    IB link comes up narrower or at a lower speed generation and keeps running, at a fraction of its
    bandwidth. RoCE ports are not judged: their width and speed reflect the Ethernet port design.
    **Fix**: reseat or replace the cable/transceiver, clean the connectors, try another switch port;
    check the switch side's negotiated width and speed.
    **Verify**: `ibv_devinfo -v | grep -E 'active_(width|speed)'` and `ibstat` (Rate equal across ports).
    """
    ports = [p for p in obs.get("ib_ports") or [] if p.link_layer == "InfiniBand" and p.state == "Active"]
    best: dict[str, float] = {}
    for p in ports:
        if p.ca_type and p.rate_gbps:
            best[p.ca_type] = max(best.get(p.ca_type, 0.0), p.rate_gbps)
    seen: set[str] = set()
    for p in sorted(ports, key=lambda p: (p.name, p.source, p.line)):
        why = None
        if p.width == "1X":
            why = f"trained at 1X width ({p.speed or 'speed not shown'}): a quarter of a 4X link's lanes"
        elif p.phys_state == "LinkErrorRecovery":
            why = "is in link error recovery (retraining after errors)"
        elif (
            p.ca_type and p.rate_gbps and p.rate_gbps <= DEGRADED_RATE_FRACTION.value * best.get(p.ca_type, 0)
        ):
            why = (
                f"runs at {p.rate_gbps:g} Gb/s while another {p.ca_type} port on this host runs at "
                f"{best[p.ca_type]:g} Gb/s"
            )
        if why is None or p.name in seen:
            continue
        seen.add(p.name)
        yield _act(
            rdma_link_degraded.finding(
                f"{_subject(p)} {why}.",
                evidence=[
                    Evidence(
                        f"{_where(p)}: {p.program}: rate {p.rate_gbps}, width {p.width}", source=p.source
                    )
                ],
                severity=Severity.WARNING,
                confidence=0.6,
                subject=_subject(p),
            ),
            Action.REPLACE_HARDWARE,
        )


# catalogue codes whose line says an RDMA connection could not be made or kept
CONNECT_FAILURES = ("IB101", "IB104", "IB110", "IB111", "IB122")


def _connect_failures(obs: Observations) -> list[Any]:
    return [h for h in obs.get("messages") or [] if h.code in CONNECT_FAILURES]


@rule(
    id="RDMA010",
    name="roce-gid",
    layer="rdma",
    title="RoCE GID index not routable between hosts",
    requires=("ib_gids",),
    causes=("roce.gid",),
)
def roce_gid(obs: Observations) -> Iterator[Finding]:
    """A RoCE port whose GID table offers no routable RoCE v2 address, or a connection failure beside a
    table where the routable GID is not the link-local one a default index picks.

    **Symptom**: NCCL ``ibv_modify_qp failed ... Connection timed out`` or completion error 12 on RoCE,
    UCX ``Transport retry count exceeded ... /RoCE``, perftest ``Failed status 12`` while ping works.
    **Why**: on RoCE every GID is an address: link-local ``fe80::`` GIDs are not routed between subnets
    (and with RoCE v2 not at all across routers), RoCE v1 GIDs are not routable, and a netdev without
    an IP address has no routable GID. A queue pair built on such a GID never reaches the peer.
    **Fix**: select the RoCE v2 GID that carries the host's IPv4 (or global IPv6) address:
    NCCL_IB_GID_INDEX=<index> (or leave it unset on NCCL 2.21+, which picks one), UCX_IB_GID_INDEX, perftest
    -x <index>; give the RoCE netdev an IP address when it has none.
    **Verify**: `show_gids` (an index with VER v2 and an IPv4 address on both hosts) and
    `ib_write_bw -x <index> <peer>`.
    """
    failures = _connect_failures(obs)
    groups: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for g in obs.get("ib_gids") or []:
        groups[(g.device or "?", g.port, g.source if not g.device else "")].append(g)
    for (_dev, _port, _src), gids in sorted(groups.items(), key=lambda kv: str(kv[0])):
        roce = [g for g in gids if g.version in ("v1", "v2")]
        if not roce:
            continue  # an InfiniBand port: fe80:: GIDs are its normal addresses
        g0 = roce[0]
        subject = (
            f"{g0.device}/{g0.port}" if g0.device and g0.port is not None else (g0.device or "RoCE GID table")
        )
        routable = sorted((g for g in roce if g.version == "v2" and not g.link_local), key=lambda g: g.index)
        local = sorted((g for g in roce if g.version == "v2" and g.link_local), key=lambda g: g.index)
        ev = [
            Evidence(f"{g.source}:{g.line}: GID[{g.index}] {g.gid} RoCE {g.version}", source=g.source)
            for g in sorted(roce, key=lambda g: g.index)[:8]
        ]
        ev += [Evidence(f"line {h.line}: {h.text}", source=h.path) for h in failures[:3]]
        if not routable:
            if any(_elided(obs, g.source) for g in roce):
                continue  # entries were cut out of the listing: the routable one may be among them
            yield _act(
                roce_gid.finding(
                    f"{subject}: no routable RoCE v2 GID (only link-local or RoCE v1 entries): the netdev has no "
                    "IP address, so RoCE v2 traffic to other hosts cannot be addressed.",
                    evidence=ev,
                    severity=Severity.CRITICAL if failures else Severity.INFO,
                    confidence=0.8 if failures else 0.5,
                    subject=subject,
                ),
                Action.CONFIGURE,
            )
            continue
        if failures and local:
            r = routable[0]
            yield _act(
                roce_gid.finding(
                    f"{subject}: RDMA connections failed, and the routable RoCE v2 GID is index {r.index} "
                    f"({r.address}) while link-local RoCE v2 GIDs sit at index "
                    f"{', '.join(str(g.index) for g in local)}: select the routable one "
                    f"(NCCL_IB_GID_INDEX={r.index}).",
                    evidence=ev,
                    severity=Severity.CRITICAL,
                    confidence=0.85,
                    subject=subject,
                    causes=("roce.gid", *_cls(failures[0].code)),
                ),
                Action.CONFIGURE,
            )


MEMLOCK_CODES = ("IB105", "IB112", "IB132")


@rule(
    id="RDMA011",
    name="rdma-memlock",
    layer="rdma",
    title="Locked-memory limit too low for RDMA",
    requires=("messages",),
    thresholds=(MEMLOCK_RECOMMENDED,),
    causes=("rdma.memlock",),
)
def rdma_memlock(obs: Observations) -> Iterator[Finding]:
    """Verbs calls that pin memory fail with ENOMEM and the locked-memory limit is finite.

    **Symptom**: ``ibv_create_cq(...) failed: Cannot allocate memory`` (UCX), ``Call to ibv_reg_mr failed
    with error Cannot allocate memory`` (NCCL), ``< failed to open interface >`` in ``ucx_info -d``;
    ``ulimit -l`` prints a number (64, 8192) instead of ``unlimited``.
    **Why**: completion queues, queue pairs and registered buffers are pinned memory, counted against
    RLIMIT_MEMLOCK; the distribution default (64 KiB or 8 MiB) is far below what RDMA libraries allocate.
    **Fix**: set memlock to unlimited for the job: ``* soft/hard memlock unlimited`` in
    /etc/security/limits.conf (and a new login), ``--ulimit memlock=-1`` for containers, LimitMEMLOCK=infinity
    for services and the resource manager (slurmd propagates its own limit), then check inside the job.
    **Verify**: `ulimit -l` (unlimited, inside the job's environment) and `ucx_info -d` (no failed interface).
    """
    hits = [h for h in obs.get("messages") or [] if h.code in MEMLOCK_CODES]
    if not hits:
        return
    limits = [u for u in obs.get("ulimits") or [] if u.has("l")]
    finite = [u for u in limits if u.memlock_kib() is not None]
    if limits and not finite:
        return  # memlock is unlimited where it was read: not this
    devices: set[str] = {h.group("hca") for h in hits if h.group("hca")}
    failed = [
        i
        for i in obs.get("ucx_interfaces") or []
        if i.failed and any("Cannot allocate memory" in e for e in i.errors)
    ]
    devices |= {i.hca for i in failed if i.hca}
    if not finite and not devices:
        return  # nothing to add to the message's own finding
    ev = [Evidence(f"line {h.line}: {h.text}", source=h.path) for h in hits[:4]]
    for u in finite[:2]:
        ev.append(
            Evidence(
                f"max locked memory (ulimit -l) is {u.memlock_kib()} {u.units.get('l', 'kbytes')}",
                u.memlock_kib(),
                "unlimited",
                source=f"{u.source}:{u.lines.get('l', 0)}",
            )
        )
    for i in failed[:4]:
        ev.append(
            Evidence(f"ucx_info -d: {i.transport} on {i.device}: failed to open interface", source=i.source)
        )
    where = ", ".join(sorted(devices)) if devices else None
    limit = (
        f"the locked-memory limit is {finite[0].memlock_kib()} KiB" if finite else "the limit was not shown"
    )
    yield _act(
        rdma_memlock.finding(
            f"RDMA could not pin memory{' on ' + where if where else ''} (Cannot allocate memory) and {limit}: "
            "RDMA needs memlock unlimited.",
            evidence=ev,
            severity=Severity.CRITICAL,
            confidence=0.9 if finite else 0.8,
            subject=where or "memlock",
        ),
        Action.CONFIGURE,
    )


@rule(
    id="RDMA012",
    name="rdma-netdevs-down",
    layer="rdma",
    title="Every RDMA device listed has its netdev down",
    requires=("ib_netdevs",),
    causes=("ib.port-down",),
)
def rdma_netdevs_down(obs: Observations) -> Iterator[Finding]:
    """An ``ibdev2netdev`` listing in which no port's netdev is up (IPoIB netdevs aside).

    **Symptom**: ``ibdev2netdev`` prints ``==> net1 (Down)`` for the only device a pod or host has, and
    RDMA tests (ib_write_bw, NCCL) cannot connect.
    **Why**: for a RoCE port or an SR-IOV VF given to a pod, the netdev's state is the port's: a VF whose
    link state is left disabled/auto stays Down, as does a RoCE port without link. When some ports are up
    and others down, the down ones are usually unused by design and are not judged; IPoIB netdevs
    (``ib0``, ``ibp26s0``) are down on healthy pure-IB fabrics that do not use IPoIB.
    **Fix**: bring the link up: for SR-IOV VFs set the VF link state to enable (linkState: enable in the
    SriovNetwork / SriovIBNetwork, ``ip link set <pf> vf <n> state enable``), check the cable and switch
    port of a physical port.
    **Verify**: `ibdev2netdev` (Up) and `ip link show <netdev>` (state UP) inside the pod.
    """
    by_source: dict[str, list[Any]] = defaultdict(list)
    for n in obs.get("ib_netdevs") or []:
        by_source[n.source].append(n)
    for source, rows in sorted(by_source.items()):
        if any(n.up for n in rows) or _elided(obs, source):
            continue
        judged = [n for n in rows if n.port_state is None and not n.netdev.startswith(_IPOIB_PREFIXES)]
        for n in judged:
            yield _act(
                rdma_netdevs_down.finding(
                    f"{n.device}/{n.port} ({n.netdev}) is Down, and no RDMA device in the listing has its netdev "
                    "up: nothing here can carry RDMA traffic.",
                    evidence=[
                        Evidence(
                            f"{n.source}:{n.line}: {n.device} port {n.port} ==> {n.netdev} (Down)",
                            source=n.source,
                        )
                    ],
                    severity=Severity.WARNING,
                    confidence=0.7,
                    subject=f"{n.device}/{n.port}",
                ),
                Action.CONFIGURE,
            )


@rule(
    id="RDMA013",
    name="rdma-hca-pcie-narrow",
    layer="rdma",
    title="HCA's PCIe link narrower than it is capable of",
    requires=("ib_ports",),
)
def rdma_hca_pcie_narrow(obs: Observations) -> Iterator[Finding]:
    """An HCA whose PCIe link trained at fewer lanes than its capability (lshca marks it ``>!<``).

    **Symptom**: RDMA bandwidth tops out well below the port rate; ``lshca`` shows ``LnkStaWidth x8 >!<``
    against ``LnkCapWidth x16``; ``lspci -vv`` shows ``LnkSta: Width x8`` under ``LnkCap: Width x16``.
    **Why**: a card in a narrower slot, a riser or bifurcation setting, or a bad seat makes the PCIe link
    train at fewer lanes: a x8 Gen3 link carries about 63 Gb/s, less than a 100 Gb/s port.
    **Fix**: move the HCA to a full-width slot, check BIOS bifurcation and the riser, reseat the card.
    **Verify**: `lspci -vv -s <pci> | grep -E 'LnkCap|LnkSta'` (equal widths).
    """
    seen: set[str] = set()
    for p in obs.get("ib_ports") or []:
        if not p.pcie_width or (p.pci or p.name) in seen:
            continue
        seen.add(p.pci or p.name)
        yield _act(
            rdma_hca_pcie_narrow.finding(
                f"{_subject(p)} ({p.pci or 'PCI address not shown'}): PCIe link at {p.pcie_width} of "
                f"{p.pcie_capability or 'a wider capability'}.",
                evidence=[
                    Evidence(
                        f"{_where(p)}: lshca LnkStaWidth {p.pcie_width} vs LnkCapWidth {p.pcie_capability}",
                        source=p.source,
                    )
                ],
                severity=Severity.WARNING,
                confidence=0.5,
                subject=_subject(p),
            ),
            Action.REPLACE_HARDWARE,
        )


@rule(
    id="RDMA014",
    name="ib-fabric-link-degraded",
    layer="rdma",
    title="Fabric link running below what both ends support (iblinkinfo: Could be ...)",
    requires=("ib_links",),
    causes=("ib.link-degraded",),
)
def ib_fabric_link_degraded(obs: Observations) -> Iterator[Finding]:
    """An ``iblinkinfo`` link that the tool itself marks ``Could be 4X`` or ``Could be <speed>``.

    **Symptom**: one path of the fabric is slower than the others; collectives crossing it lag;
    ``iblinkinfo`` prints ``( Could be 4X)`` or ``( Could be 53.125 Gbps)`` after the peer.
    **Why**: iblinkinfo compares the width and speed a link trained at with what both ports support: a
    link that came up narrower or slower than both ends allow has lost lanes or fell back a speed
    generation (a damaged cable, a dirty connector, a marginal transceiver). Down ports without a peer are
    unused switch ports and are not judged.
    **Fix**: reseat or replace the cable/transceiver of that link, clean the connectors, or move it to
    another port; then bounce the port so it retrains.
    **Verify**: `iblinkinfo` (no "Could be" on the link) and `ibportstate <lid> <port>`.
    """
    for link in obs.get("ib_links") or []:
        if not link.could_be or link.state != "Active":
            continue
        peer = f" to {link.remote} (lid {link.remote_lid} port {link.remote_port})" if link.remote else ""
        yield _act(
            ib_fabric_link_degraded.finding(
                f"{link.name}{peer} runs at {link.width or '?'} {link.speed or ''}: iblinkinfo says "
                f"'{link.could_be}'.",
                evidence=[Evidence(f"{link.source}:{link.line}: iblinkinfo", source=link.source)],
                severity=Severity.WARNING,
                confidence=0.75,
                subject=link.name,
            ),
            Action.REPLACE_HARDWARE,
        )


register_input("rdma_devices", "no ibv_devices output")


@rule(
    id="RDMA023",
    name="rdma-device-guid-unset",
    layer="rdma",
    title="RDMA device without a node GUID (an SR-IOV VF never given one)",
    requires=("rdma_devices",),
    causes=("rdma.vf-config",),
)
def rdma_device_guid_unset(obs: Observations) -> Iterator[Finding]:
    """Devices that ``ibv_devices`` lists with node GUID ``0000000000000000``.

    **Symptom**: verbs programs on the device fail to connect (perftest, NCCL, UCX), or the port never
    becomes Active; ``ibv_devices`` shows the VFs' node GUID as all zeros beside the PFs' real ones.
    **Why**: a virtual function's node and port GUIDs are assigned by the PF's administrator (or by the
    SR-IOV network operator); one that was never given a GUID cannot be addressed by the subnet manager,
    and the SM needs virtualisation enabled to serve VFs at all.
    **Fix**: assign GUIDs to the VFs (``ip link set <pf> vf <n> node_guid <guid> port_guid <guid>``, or
    the SR-IOV operator's policy), enable virtualisation in OpenSM (``virt_enabled 2``), then rebind the VF.
    **Verify**: `ibv_devices` (no all-zero GUID) and `ibstat <vf device>` (State: Active).
    """
    devs = obs.get("rdma_devices") or []
    unset = [d for d in devs if d.guid_unset]
    if not unset:
        return
    names = ", ".join(d.name for d in unset[:8])
    others = [d for d in devs if not d.guid_unset]
    beside = f" beside {len(others)} device(s) with a GUID" if others else ""
    yield _act(
        rdma_device_guid_unset.finding(
            f"{names}: node GUID 0000000000000000{beside}: a virtual function that was never given a GUID.",
            evidence=[
                Evidence(f"{d.name}: node GUID {d.node_guid}", source=f"{d.source}:{d.line}")
                for d in unset[:6]
            ],
            severity=Severity.WARNING,
            confidence=0.8,
            subject=names,
        ),
        Action.CONFIGURE,
    )


register_input("ib_devnodes", "no ls /sys/class/infiniband with ls /dev/infiniband")


@rule(
    id="RDMA024",
    name="rdma-uverbs-missing",
    layer="rdma",
    title="RDMA devices without their /dev/infiniband/uverbs node (a container given only some)",
    requires=("ib_devnodes",),
    causes=("rdma.container-access",),
)
def rdma_uverbs_missing(obs: Observations) -> Iterator[Finding]:
    """Fewer ``uverbsN`` nodes in ``/dev/infiniband`` than devices in ``/sys/class/infiniband``.

    **Symptom**: RDMA CM programs fail with ENODEV (``rdma_get_devices``, ``rdma_create_id``), verbs
    programs cannot open some HCAs, inside a container or pod.
    **Why**: user space reaches a device only through its ``uverbsN`` node; a container that was given
    the nodes of some HCAs (a device plugin resource, a ``--device`` list) still sees every device in
    sysfs, and librdmacm's initialisation fails as a whole when one of them cannot be opened.
    **Fix**: pass every HCA's ``/dev/infiniband/uverbsN`` (and ``rdma_cm``) into the container, or hide
    the others (RDMA shared device plugin resource per HCA, network namespace mode ``exclusive``).
    **Verify**: `ls /sys/class/infiniband /dev/infiniband` inside the container; `ibv_devinfo` lists all.
    """
    for d in obs.get("ib_devnodes") or []:
        if d.devices is None or d.nodes is None or not d.devices:
            continue
        if len(d.uverbs) >= len(d.devices):
            continue
        yield _act(
            rdma_uverbs_missing.finding(
                f"{len(d.devices)} RDMA device(s) in /sys/class/infiniband but {len(d.uverbs)} uverbs node(s) in "
                f"/dev/infiniband ({', '.join(d.uverbs) or 'none'}): the others cannot be opened here.",
                evidence=[
                    Evidence(f"/sys/class/infiniband: {' '.join(d.devices[:8])}", source=d.source),
                    Evidence(f"/dev/infiniband: {' '.join(d.nodes[:8])}", source=d.source),
                ],
                severity=Severity.WARNING,
                confidence=0.8,
                subject="/dev/infiniband",
            ),
            Action.CONFIGURE,
        )
