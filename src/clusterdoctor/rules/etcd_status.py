"""ETCD008: what etcdctl says about the cluster (``endpoint status``, ``endpoint health``, v2 ``cluster-health``,
``alarm list``), read from its JSON or text output (:mod:`clusterdoctor.observe.control.etcdctl_text`).

Split from :mod:`clusterdoctor.rules.etcd` (the metric rules), which re-exports it.
"""

from __future__ import annotations

from collections.abc import Iterable

from clusterdoctor.analyze.etcd_members import member_directory
from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, rule

APPLIED_INDEX_LAG = Threshold(
    "raft_applied_index_lag",
    5000,
    "entries",
    "etcd --snapshot-catchup-entries default 5000 (a follower further behind is sent a snapshot)",
    "a member this far behind the most advanced one is catching up from a snapshot",
)
DEFAULT_QUOTA = Threshold(
    "etcd_quota_backend_bytes_default",
    2 * 1024**3,
    "bytes",
    "etcd --quota-backend-bytes default 2 GiB (etcd maintenance guide, space quota: "
    "https://etcd.io/docs/v3.5/op-guide/maintenance/#space-quota)",
    "the backend quota assumed when etcdctl does not print it (3.3-3.5 tables)",
)
QUOTA_NEAR = Threshold(
    "etcd_db_quota_used",
    0.95,
    "fraction",
    "etcd mixin etcdBackendQuotaLowSpace: (etcd_mvcc_db_total_size_in_bytes / etcd_server_quota_backend_bytes) "
    "* 100 > 95 (etcd-io/etcd contrib/mixin)",
    "share of the backend quota used above which etcd is about to raise NOSPACE",
)

# what an etcdctl error names (tests/data/incidents/causes/control.toml), by the words in it
_ERROR_CLASSES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("NOSPACE", "database space exceeded"), "etcd.db-space-exceeded"),
    (("x509", "tls:", "certificate"), "etcd.tls"),
    (("cluster ID mismatch",), "etcd.member-config"),
    (
        (
            "connection refused", "deadline exceeded", "unreachable", "no route to host", "i/o timeout",
            "unhealthy result", "failed to connect", "connection reset", "EOF", "timed out when dialing",
            "dial tcp",
        ),
        "etcd.member-down",
    ),
)  # fmt: skip


def error_causes(text: str) -> tuple[str, ...]:
    """The cause classes an etcdctl error names (the first that fits), or none."""
    for words, cls in _ERROR_CLASSES:
        if any(w in text for w in words):
            return (cls,)
    return ()


def _nospace_messages(obs: Observations) -> set[str]:
    """Files whose NOSPACE lines the message catalogue (ETCD102) already reports."""
    return {h.path for h in obs.get("messages") or [] if getattr(h, "code", "") == "ETCD102"}


@rule(
    id="ETCD008",
    name="etcd-endpoint-status",
    layer="control-plane",
    title="etcd endpoints unhealthy or disagree (etcdctl)",
    requires=("etcd_status",),
    thresholds=(APPLIED_INDEX_LAG, DEFAULT_QUOTA, QUOTA_NEAR),
)
def etcd_endpoint_status(obs: Observations) -> Iterable[Finding]:
    """etcdctl reports an unhealthy/unreachable endpoint, an alarm, a full backend, disagreeing leaders
    or lagging members.

    **Symptom**: `etcdctl endpoint health` shows `health: false` or an error (`cluster-health`: a member
    unhealthy or unreachable); `endpoint status` lacks an endpoint, shows an alarm in its ERRORS column,
    a DB SIZE at its quota, members that name different leaders, or a member whose raft applied index
    lags.
    **Why**: a member is down or partitioned, or an election is in progress; an alarm (NOSPACE) makes
    the cluster refuse writes; a lagging member applies slowly (disk) or is catching up from a snapshot.
    **Fix**: restore the failed member (process, disk, network on 2379/2380); if it cannot come
    back, replace it with `etcdctl member remove` and `member add`. For NOSPACE: compact, defragment,
    `etcdctl alarm disarm`.
    **Verify**: `etcdctl endpoint status --cluster -w table` and `etcdctl endpoint health --cluster -w table`
    """
    st = obs.get("etcd_status")
    health = getattr(st, "health", []) or []
    statuses = getattr(st, "statuses", []) or []
    errors = getattr(st, "errors", []) or []
    d = member_directory(obs)
    # one finding per endpoint: what every etcdctl output said about it
    bad: dict[str, list[Evidence]] = {}
    what: dict[str, list[str]] = {}
    for h in health:
        if not h.healthy:
            bad.setdefault(h.endpoint, []).extend(
                [
                    Evidence(
                        f"endpoint health: false ({h.error or 'no error given'})",
                        value=False,
                        source=h.source or "etcdctl endpoint health",
                    ),
                    Evidence("took", value=h.took_seconds, unit="s"),
                ]
            )
            what.setdefault(h.endpoint, []).append(f"unhealthy: {h.error or 'health false'}")
    for e in errors:
        bad.setdefault(e.endpoint, []).append(
            Evidence("etcdctl error", value=e.message, source=e.source or "etcdctl endpoint status")
        )
        what.setdefault(e.endpoint, []).append(f"status failed: {e.message}")
    reported = _nospace_messages(obs)
    for s in statuses:
        errs = [x for x in s.errors if not ("NOSPACE" in x and s.source in reported)]
        if errs:
            bad.setdefault(s.endpoint, []).append(
                Evidence("endpoint status errors", value=", ".join(errs), source=s.source or None)
            )
            what.setdefault(s.endpoint, []).append(f"errors: {', '.join(errs)}")
    for ep, ev in bad.items():
        said = "; ".join(dict.fromkeys(what[ep]))
        yield etcd_endpoint_status.finding(
            f"etcd endpoint {ep} (member {d.describe(ep)}): {said}",
            evidence=ev,
            severity=Severity.CRITICAL,
            subject=d.label(ep),
            confidence=0.95,
            causes=error_causes(said),
        )
    yield from _quota(statuses, d, reported)
    by_source: dict[str, list] = {}
    for s in statuses:
        by_source.setdefault(s.source, []).append(s)
    for src, rows in by_source.items():
        leaders = {s.leader for s in rows if s.leader}
        if len(leaders) > 1:  # rows of one output are one moment; outputs of two moments may differ
            yield etcd_endpoint_status.finding(
                "etcd endpoints disagree on the leader (election in progress or partition)"
                + (f" in {src}" if src else ""),
                evidence=[
                    Evidence(f"{s.endpoint} sees leader", value=d.label(s.leader), source=src or None)
                    for s in rows
                ],
                severity=Severity.CRITICAL,
                subject="etcd cluster (" + ", ".join(sorted({d.label(s.member_id) for s in rows})) + ")",
                causes=(),
            )
        top = max(s.raft_applied_index for s in rows)
        for s in rows:
            lag = top - s.raft_applied_index
            if lag > APPLIED_INDEX_LAG.value:
                yield etcd_endpoint_status.finding(
                    f"etcd member {d.describe(s.member_id)} lags {lag} raft entries behind",
                    evidence=[
                        Evidence(
                            "raft applied index lag",
                            value=lag,
                            threshold=APPLIED_INDEX_LAG.value,
                            source=src or None,
                        )
                    ],
                    severity=Severity.WARNING,
                    subject=d.label(s.member_id),
                    causes=(),
                )


def _quota(statuses: list, d, reported: set[str]) -> Iterable[Finding]:
    """A backend at its quota: etcd is about to raise (or has raised) NOSPACE."""
    for s in statuses:
        if any("NOSPACE" in x for x in s.errors):
            continue  # the alarm itself is reported
        quota = s.quota or DEFAULT_QUOTA.value
        used = s.db_size / quota if quota else 0.0
        if used < QUOTA_NEAR.value:
            continue
        assumed = s.quota is None
        yield etcd_endpoint_status.finding(
            f"etcd member {d.describe(s.member_id)}: its database is {s.db_size / 1e9:.2f} GB, "
            f"{100 * used:.0f}% of the {'default ' if assumed else ''}backend quota "
            f"({quota / 1e9:.2f} GB{'; the quota itself is not in the output' if assumed else ''})",
            evidence=[
                Evidence("db size", s.db_size, quota, "bytes", source=s.source or None),
                Evidence("share of the quota used", round(used, 4), QUOTA_NEAR.value),
            ],
            severity=Severity.CRITICAL if not assumed else Severity.WARNING,
            subject=d.label(s.member_id),
            confidence=0.9 if not assumed else 0.6,
            causes=("etcd.db-space-exceeded",),
        )


# the catalogue entries about the printing member being removed from its cluster (rules/catalog/etcd.py)
_OWN_REMOVAL = frozenset({"ETCD120"})


def member_subject(obs: Observations, message: object, hits: list, subject: str | None) -> str | None:
    """An etcd line's subject (a peer ID, ``member <ID>``, a peer address) as the member directory names
    that member (``m2 (60af19f72c903e1e)``) when the inputs say which member it is; else as the line did.

    A line about the printing member's own removal (ETCD120) that names no host is the etcd node that is
    down: with embedded etcd (k3s, RKE2) a removed member stops the server on its node, so when the
    ``kubectl get nodes`` beside it shows exactly one node with the etcd role that is not Ready, that node.
    """
    if not subject:
        if getattr(message, "code", "") in _OWN_REMOVAL:
            down = {
                n.name
                for n in obs.get("kube_nodes") or []
                if "etcd" in n.roles.split(",") and n.status.split(",")[0] != "Ready"
            }
            if len(down) == 1:
                return down.pop()
        return subject
    token = subject[len("member ") :] if subject.startswith("member ") else subject
    m = member_directory(obs).resolve(token)
    return m.label() if m is not None else subject


def _register_resolver() -> None:
    from clusterdoctor.rules.messages import register_subject_resolver

    register_subject_resolver("etcd", member_subject)


_register_resolver()
