"""Control-plane components' own health probes, as ``kubectl get componentstatuses`` prints them.

Input: ``kube_components`` (:mod:`clusterdoctor.observe.control.kubectl_text`). The apiserver probes
the scheduler, the controller-manager and each etcd server (their ``/healthz``; deprecated since 1.19
but still printed); a row ``Unhealthy`` with ``connection refused`` on the component's port says the
component is not running or not serving there. ``Healthy`` rows are quiet.
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
