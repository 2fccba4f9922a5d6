"""Control-plane components' own health probes: ``kubectl get componentstatuses`` and the verbose
``/livez``, ``/readyz``, ``/healthz`` answers.

Inputs: ``kube_components`` (:mod:`clusterdoctor.observe.control.kubectl_text`). The apiserver probes
the scheduler, the controller-manager and each etcd server (their ``/healthz``; deprecated since 1.19
but still printed); a row ``Unhealthy`` with ``connection refused`` on the component's port says the
component is not running or not serving there. ``Healthy`` rows are quiet. ``health_checks``
(:mod:`clusterdoctor.observe.control.healthz`): each ``[-]name failed`` line of a ``?verbose`` answer of
Kubernetes components or etcd (``kubectl get --raw '/readyz?verbose'`` prints the same), judged by
CP005; ``[+]`` lines and an answer that passes are quiet.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("kube_components", "no kubectl get componentstatuses output")


@rule(
    id="CP004",
    name="k8s-component-unhealthy",
    layer="control-plane",
    title="A control-plane component fails its health probe (kubectl get componentstatuses)",
    requires=("kube_components",),
    severity=Severity.CRITICAL,
    causes=("k8s.component-down",),
)
def component_unhealthy(obs: Observations) -> Iterator[Finding]:
    """A component (scheduler, controller-manager, etcd-N) listed ``Unhealthy``.

    **Symptom**: `kubectl get cs` shows `scheduler  Unhealthy  Get http://127.0.0.1:10251/healthz: dial
    tcp 127.0.0.1:10251: connect: connection refused`; pods stay Pending (no scheduler) or controllers
    do nothing (no controller-manager).
    **Why**: the apiserver probes each component on its local health port; a refused connection means the
    process is not running, crashed, or serves elsewhere (a secure port only, another bind address).
    **Fix**: check the component's service or static pod (`systemctl status kube-scheduler`, its log):
    flags that keep it from reaching the apiserver (--master / --kubeconfig), a crash loop, a changed port.
    **Verify**: `kubectl get componentstatuses` lists every component Healthy.
    """
    for c in obs.get("kube_components") or []:
        if c.status != "Unhealthy":
            continue
        why = c.error or c.message or "no error printed"
        f = component_unhealthy.finding(
            f"{c.name} is Unhealthy: {why}",
            evidence=[Evidence(f"line {c.line}: {c.name} {c.status}", value=why, source=c.source or None)],
            subject=c.name,
            confidence=0.85,
            causes=("etcd.member-down",) if c.name.startswith("etcd") else ("k8s.component-down",),
        )
        f.action = Action.RESTART_SERVICE
        yield f


register_input("health_checks", "no verbose health answer (curl/kubectl get --raw '/readyz?verbose')")

# what a failed check of each component says about the cause (the check names of k8s.io/apiserver
# and etcd's server/etcdserver/api/etcdhttp/health.go)
_CHECK_CAUSES = {
    ("kube-apiserver", "etcd"): ("apiserver.etcd-backend",),
    ("kube-apiserver", "etcd-readiness"): ("apiserver.etcd-backend",),
    ("etcd", "linearizable_read"): ("etcd.member-down",),  # no leader or no quorum to read through
}


@rule(
    id="CP005",
    name="health-check-failed",
    layer="control-plane",
    title="A component's verbose health answer has a failed check",
    requires=("health_checks",),
    severity=Severity.CRITICAL,
)
def health_check_failed(obs: Observations) -> Iterator[Finding]:
    """``/livez``, ``/readyz`` or ``/healthz`` with ``?verbose`` lists a ``[-]<check> failed`` line.

    **Symptom**: `kubectl get --raw='/readyz?verbose'` ends in `readyz check failed`; the kubelet
    restarts a static pod whose liveness probe fails; load balancers take an apiserver out.
    **Why**: each line is one check of the component itself; the failed one says where to look. For
    kube-apiserver, `[-]etcd failed` means it cannot reach or use its etcd (endpoints, TLS, a member
    without quorum); for etcd, `[-]linearizable_read failed` means a read through raft did not complete
    (no leader, no quorum), `[-]data_corruption failed` a CORRUPT alarm, `[-]non_learner failed` a
    learner member. The reason is withheld unless the caller may see it.
    **Fix**: follow the failed check: for etcd behind the apiserver, `etcdctl endpoint health` /
    `endpoint status` on the endpoints the apiserver uses (`--etcd-servers`) and its certificates; for
    etcd itself, its log around the answer (leader changes, slow disk, alarms: `etcdctl alarm list`).
    **Verify**: the same `?verbose` query lists every check `[+]... ok` and ends in `ok`.
    """
    checks = [c for c in obs.get("health_checks") or [] if not c.ok]
    by_answer: dict[tuple[str, str, str], list] = {}
    for c in checks:
        by_answer.setdefault((c.source, c.component, c.endpoint), []).append(c)
    for (src, comp, ep), failed in by_answer.items():
        names = list(dict.fromkeys(c.name for c in failed))
        who = comp or "the component"
        causes = tuple(dict.fromkeys(x for n in names for x in _CHECK_CAUSES.get((comp, n), ())))
        f = health_check_failed.finding(
            f"{who} fails {len(names)} check(s) of its {'/' + ep if ep else 'health'} answer: "
            + ", ".join(names[:6])
            + (" …" if len(names) > 6 else "")
            + ".",
            evidence=[
                Evidence(
                    f"line {c.line}: [-]{c.name} failed", value=c.reason or "no reason shown", source=src
                )
                for c in failed[:6]
            ],
            subject=f"{comp + ' ' if comp else ''}{names[0]}",
            confidence=0.8 if causes else 0.6,
            causes=causes,
        )
        f.action = Action.RESTART_SERVICE
        yield f
