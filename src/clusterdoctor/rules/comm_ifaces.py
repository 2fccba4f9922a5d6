"""NCCL_SOCKET_IFNAME that matches no usable interface of the host the user listed (``ip addr``, ``ifconfig``).

NCCL reads ``NCCL_SOCKET_IFNAME`` as a comma-separated list of interface-name prefixes (``eth`` matches
``eth0``, ``eth1``), exact names after ``=``, and names to exclude after ``^`` (NCCL environment-variable
docs; ``src/misc/socket.cc`` ``matchIfList``). When the NCCL log of a job says which value it was given
(``NCCL_SOCKET_IFNAME set by environment to eth2``) and an interface listing of the host is beside it, an
include list that matches no interface that is up with a routable address is the cause of NCCL's
"no socket interface found" / bogus-address errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("net_ifaces", "no interface listing (ip addr, ip -br addr, ifconfig)")
register_input("nccl_env", "no NCCL settings listing (env | grep NCCL, /etc/nccl.conf)")

_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-socket-ifname"


def matches(spec: str, name: str) -> bool:
    """Whether interface ``name`` is selected by an NCCL_SOCKET_IFNAME ``spec`` (prefixes, ``=`` exact,
    ``^`` exclusion)."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    if exclude:
        spec = spec[1:]
    exact = spec.startswith("=")
    if exact:
        spec = spec[1:]
    items = [x.strip() for x in spec.split(",") if x.strip()]
    hit = any((name == x) if exact else name.startswith(x) for x in items)
    return not hit if exclude else hit


@rule(
    id="COMM019",
    name="nccl-socket-ifname-matches-nothing",
    layer="comm",
    title="NCCL_SOCKET_IFNAME matches no usable interface of the host",
    requires=("net_ifaces",),
    requires_any=("nccl_log", "nccl_env"),
    severity=Severity.CRITICAL,
    causes=("nccl.socket-iface",),
)
def socket_ifname_matches_nothing(obs: Observations) -> Iterator[Finding]:
    """The ``NCCL_SOCKET_IFNAME`` of the NCCL log (or of a pasted ``env`` / ``nccl.conf``) selects none of the interfaces (up, with a routable address)
    that the pasted ``ip addr`` / ``ifconfig`` of the host lists.

    **Symptom**: NCCL init fails with ``Bootstrap : no socket interface found``, ``no NCCL_SOCKET_IFNAME
    interface found``, or an address with a bogus family (``connecting to address with family 59936``).
    **Why**: NCCL bootstraps and carries socket traffic only on the interfaces the variable selects; a name
    from another machine or image (``eth0`` where the host has ``ens5``, ``eth2`` that does not exist, an
    interface that is down) leaves it none.
    **Fix**: set NCCL_SOCKET_IFNAME to the interface that routes between the nodes (a prefix such as
    ``ens`` or an exact ``=ens5``), or unset it to let NCCL choose; exclude with ``^lo,docker``.
    **Verify**: `ip -br addr` on every node, then `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf -b 8 -e 8 -g 1` ("Bootstrap : Using ...").
    """
    specs = {
        v.strip()
        for src in (*(obs.get("nccl_log") or []), *(obs.get("nccl_env") or []))
        if (v := (getattr(src, "env", None) or {}).get("NCCL_SOCKET_IFNAME"))
    }
    lists = obs.get("net_ifaces") or []
    if len(specs) != 1 or not lists:
        return
    spec = specs.pop()
    for lst in lists:
        usable = [i for i in lst.ifaces if i.routable]
        if any(matches(spec, i.name) for i in usable):
            continue
        named = ", ".join(f"{i.name}{'' if i.routable else ' (down or no address)'}" for i in lst.ifaces[:8])
        f = socket_ifname_matches_nothing.finding(
            f"NCCL_SOCKET_IFNAME={spec} selects none of this host's usable interfaces ({lst.program}: {named}).",
            evidence=[
                Evidence("NCCL_SOCKET_IFNAME (NCCL log or settings)", spec),
                Evidence(f"interfaces ({lst.program})", len(lst.ifaces), source=lst.path),
                Evidence("how NCCL matches the names", _ENV_DOC),
            ],
            subject=f"NCCL_SOCKET_IFNAME={spec}",
            confidence=0.9,
        )
        f.action = Action.CONFIGURE
        yield f


@rule(
    id="COMM026",
    name="nccl-bootstrap-failed-over-ipoib",
    layer="comm",
    title="NCCL's TCP bootstrap failed on an IPoIB interface NCCL chose by default",
    requires=("nccl_log",),
    severity=Severity.CRITICAL,
    causes=("nccl.socket-iface",),
)
def bootstrap_failed_over_ipoib(obs: Observations) -> Iterator[Finding]:
    """The NCCL log shows the bootstrap failing (``bootstrap.cc:270 -> 2`` behind ``misc/socket.cc`` lines)
    while its bootstrap / out-of-band interface is an IPoIB one (``Bootstrap : Using ib0:...``, ``NET/IB :
    Using ... ; OOB ibp75s0:...``) and NCCL_SOCKET_IFNAME was not set.

    **Symptom**: init aborts with ``ncclSystemError`` / ``unhandled system error`` on a node whose RDMA
    devices NCCL listed; the trace is ``misc/socket.cc:NNN -> 2``, ``bootstrap.cc:NNN -> 2``.
    **Why**: with NCCL_SOCKET_IFNAME unset NCCL picks ``ib*`` interfaces first for its TCP bootstrap and the
    IB transport's out-of-band sockets (``ncclFindInterfaces`` in ``src/misc/socket.cc``); an IPoIB port
    without a route to the other nodes (a container's view, a partition that is not the job's network)
    cannot carry them. Only NCCL_SOCKET_IFNAME decides the bootstrap interface (NVIDIA/nccl#1000).
    **Fix**: set NCCL_SOCKET_IFNAME to the Ethernet interface that routes between the nodes
    (``NCCL_SOCKET_IFNAME=eth0`` or ``=enp...``), on every node.
    **Verify**: `ip -br addr`, `ping -c 3 <peer address>` over that interface, then
    `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf -b 8 -e 8 -g 1` ("Bootstrap : Using eth0:...").
    """
    for log in obs.get("nccl_log") or []:
        ipoib = sorted(i for i in getattr(log, "bootstrap_ifs", ()) if i.startswith("ib"))
        errors = getattr(log, "bootstrap_errors", [])
        if not ipoib or not errors or log.env.get("NCCL_SOCKET_IFNAME"):
            continue
        hosts = sorted(log.hosts)
        subject = f"host {hosts[0]}" if len(hosts) == 1 else log.path
        f = bootstrap_failed_over_ipoib.finding(
            f"NCCL's bootstrap failed ({errors[0]}) while it used the IPoIB interface {', '.join(ipoib)} "
            "for its TCP sockets; set NCCL_SOCKET_IFNAME to the Ethernet interface between the nodes.",
            evidence=[
                Evidence(
                    "bootstrap / OOB interface", ", ".join(ipoib), "an interface that reaches the peers"
                ),
                Evidence("bootstrap error trace", errors[0], source=log.path),
                Evidence("NCCL_SOCKET_IFNAME", "not set (NCCL prefers ib* interfaces)"),
                Evidence("how NCCL picks the interface", _ENV_DOC),
            ],
            subject=subject,
            confidence=0.7,
        )
        f.action = Action.CONFIGURE
        yield f


_IFNAME_IN_CMD = re.compile(r"(?:-x |--env |export |\s|^)NCCL_SOCKET_IFNAME=(?P<spec>[^\s'\"]{1,200})")
_INTERNAL = "internal error"  # ncclGetErrorString(ncclInternalError), 2.x


@rule(
    id="COMM027",
    name="nccl-tests-forced-ifname-fails-on-some-hosts",
    layer="comm",
    title="nccl-tests fails with an NCCL internal error on some hosts of a run that forces one NCCL_SOCKET_IFNAME",
    requires=("nccl_tests",),
    severity=Severity.CRITICAL,
    causes=("nccl.socket-iface",),
)
def forced_ifname_fails_on_some_hosts(obs: Observations) -> Iterator[Finding]:
    """The nccl-tests command exports one ``NCCL_SOCKET_IFNAME`` to every host (``mpirun -x
    NCCL_SOCKET_IFNAME=enp6s0``) and ``Test NCCL failure ... 'internal error'`` comes from some of the
    run's hosts only.

    **Symptom**: the test aborts right after its device list; ``<host>: Test NCCL failure common.cu:NNN
    'internal error - please report this issue to the NCCL developers'`` from one host, the others wait.
    **Why**: NCCL's bootstrap returns ``ncclInternalError`` when no interface matches NCCL_SOCKET_IFNAME
    (``Bootstrap : no socket interface found``, ``src/bootstrap.cc``). One value for all hosts holds only
    if their interfaces share the name; a host whose NIC is named differently (``enp4s0`` beside
    ``enp6s0``) fails, the others do not. NCCL does not support per-host names in one value other than as a
    list of prefixes (NVIDIA/nccl-tests#219, NVIDIA/nccl#286).
    **Fix**: give every host's name in the list (``NCCL_SOCKET_IFNAME=enp6s0,enp4s0``), a common prefix
    (``enp``), or an exclusion (``^lo,docker``); or set it per host (``/etc/nccl.conf``).
    **Verify**: `ip -br addr` on each host, then
    `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf -b 8 -e 8 -g 1` under the same mpirun
    ("Bootstrap : Using ..." on every host).
    """
    runs = obs.get("nccl_tests") or []
    specs = {m.group("spec") for r in runs if r.command and (m := _IFNAME_IN_CMD.search(r.command))}
    if len(specs) != 1:
        return
    spec = specs.pop()
    if "," in spec or spec.startswith("^"):
        return  # a list or an exclusion may already cover every host's name
    hosts = {x.host.strip() for r in runs for x in r.ranks if x.host.strip()}
    failed = {h for r in runs for h, err in r.failures if err.startswith(_INTERNAL)}
    if len(hosts) < 2 or not failed or not failed < hosts:
        return
    names = ", ".join(sorted(failed))
    f = forced_ifname_fails_on_some_hosts.finding(
        f"NCCL_SOCKET_IFNAME={spec} is forced on all {len(hosts)} hosts and NCCL fails with an internal "
        f"error on {names} only: check that {names} has an interface matching {spec} "
        "(a NIC of another name needs it in the list).",
        evidence=[
            Evidence("NCCL_SOCKET_IFNAME in the command", spec),
            Evidence("hosts of the run", ", ".join(sorted(hosts))),
            Evidence("hosts that report 'internal error'", names),
            Evidence("how NCCL matches the names", _ENV_DOC),
        ],
        subject=f"host {sorted(failed)[0]}" if len(failed) == 1 else f"NCCL_SOCKET_IFNAME={spec}",
        confidence=0.7,
    )
    f.action = Action.CONFIGURE
    yield f
