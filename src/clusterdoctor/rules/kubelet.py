"""Kubelet rules: slow pod starts and the CNI/CRI timeouts that cause them.

Inputs: ``pod_starts`` (:mod:`clusterdoctor.observe.control.kube`: ``kubectl get pods -o json``, or kubelet
``Observed pod startup duration`` log lines) and ``events`` (:mod:`clusterdoctor.observe.control.logs`).
The ``kubelet_pod_start_sli_duration_seconds`` histogram rule (KUBELET003) reads ``kubelet_metrics``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from clusterdoctor.model import Event, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.alerts import Alert, Example, hist, p99_above
from clusterdoctor.rules.etcd_log import utc
from clusterdoctor.rules.registry import Observations, register_input, rule

if TYPE_CHECKING:
    from clusterdoctor.rules.catalog import Message

register_input("pod_starts", "no pod start data (pass `kubectl get pods -o json` output or kubelet logs)")

POD_START_SLOW = Threshold(
    "pod_start_slow",
    30.0,
    "s",
    "issue 3 target 'pod start > 30 s'; 30 s is a bucket edge of kubelet_pod_start_sli_duration_seconds "
    "(k8s pkg/kubelet/metrics/metrics.go), and 6x the sig-scalability pod-startup SLO of 5 s p99 "
    "(Azure/telescope investigation.md)",
    "pod start duration above which a start is slow",
)
POD_START_SLO = Threshold(
    "pod_start_slo_p99",
    5.0,
    "s",
    "Kubernetes sig-scalability pod startup latency SLO: p99 <= 5 s, excluding image pulls (as cited in Azure/telescope investigation.md)",
    "SLO for stateless pod start, excluding image pulls",
)

_TIMEOUT_KINDS = (
    "cni.timeout",
    "cri.timeout",
    "sandbox.create_failed",
    "sandbox.stop_failed",
    "apiserver.timeout",
)


def _events(obs: Observations, kinds: tuple[str, ...]) -> list[Event]:
    return [e for e in obs.get("events") or [] if isinstance(e, Event) and e.kind in kinds]


def _src(e: Event) -> str | None:
    if e.source is None:
        return None
    return f"{e.source.location}:{(e.source.detail or '').replace('line ', '')}"


@rule(
    id="KUBELET001",
    name="pod-start-slow",
    layer="kubelet",
    title="Pods take longer than 30 s to start",
    requires=("pod_starts",),
    thresholds=(POD_START_SLOW, POD_START_SLO),
    severity=Severity.WARNING,
)
def pod_start_slow(obs: Observations) -> Iterator[Finding]:
    """Pods took more than 30 s from creation to running containers.

    **Symptom**: deployments and jobs ramp up slowly; training jobs wait for their last worker; the
    ``kubelet_pod_start_sli_duration_seconds`` tail sits in the 30–60 s buckets.
    **Why**: a pod start is scheduling + sandbox (pause container, CNI ADD) + image pulls + container
    start. When the CNI or the container runtime times out (often because the API server or etcd is
    slow), kubelet retries after a back-off, and the start takes tens of seconds.
    **Fix**: follow the CNI/CRI timeout finding if there is one; otherwise pre-pull images, and check the
    sandbox phase (CNI plugin, IPAM, API server reachability from the node).
    **Verify**: `kubectl get events -A --field-selector reason=FailedCreatePodSandBox` and
    `journalctl -u kubelet | grep 'Observed pod startup duration'`.
    """
    pods = [p for p in obs.get("pod_starts") or [] if not getattr(p, "static", False)]
    slow = sorted(
        (p for p in pods if p.start_s is not None and p.start_s > POD_START_SLOW.value),
        key=lambda p: -(p.start_s or 0),
    )
    if not slow:
        return
    timeouts = _events(obs, _TIMEOUT_KINDS)
    no_pull = [p for p in slow if p.excludes_pulls]
    sandbox_dominated = [
        p for p in slow if p.sandbox_s is not None and p.start_s and p.sandbox_s >= 0.8 * p.start_s
    ]
    ev = [
        Evidence(
            f"{p.key}: start" + (" (SLO duration, image pulls excluded)" if p.excludes_pulls else ""),
            round(p.start_s or 0, 3),
            POD_START_SLOW.value,
            "s",
            p.source,
            p.created,
        )
        for p in slow[:8]
    ]
    if sandbox_dominated:
        ev.append(
            Evidence(
                "slow pods whose time went to scheduled → PodReadyToStartContainers (sandbox, CNI and image pulls)",
                len(sandbox_dominated),
            )
        )
    if timeouts:
        first = min(timeouts, key=lambda e: e.time if e.time is not None else float("inf"))
        ev.append(
            Evidence(
                f"CNI/CRI/sandbox timeouts in the logs ({first.kind} first)",
                len(timeouts),
                source=_src(first),
                time=first.time,
            )
        )
        why = " CNI/CRI timeouts in the logs explain them (see KUBELET002)."
        sev, conf = Severity.CRITICAL, 0.85
    elif no_pull:
        why = " kubelet reports these durations without image pulls, so pulls are not the cause; look at the sandbox/CNI phase."
        sev, conf = Severity.WARNING, 0.8
    else:
        why = " No CNI/CRI timeout is in the data given; the time includes image pulls and sandbox setup."
        sev, conf = Severity.WARNING, 0.6
    yield pod_start_slow.finding(
        f"{len(slow)} of {len(pods)} pods took more than {POD_START_SLOW.value:g} s to start "
        f"(slowest {slow[0].key}: {slow[0].start_s:.1f} s).{why}",
        evidence=ev,
        severity=sev,
        confidence=conf,
        subject=slow[0].key,
    )


@rule(
    id="KUBELET002",
    name="cni-cri-timeouts",
    layer="kubelet",
    title="CNI / container-runtime calls time out (sandbox failures)",
    requires=("events",),
    severity=Severity.WARNING,
)
def cni_cri_timeouts(obs: Observations) -> Iterator[Finding]:
    """kubelet or containerd logged CNI/CRI timeouts or pod sandbox failures.

    **Symptom**: pods stuck in ``ContainerCreating``; events ``FailedCreatePodSandBox``; kubelet logs
    ``Error adding network: context deadline exceeded`` or ``StopPodSandbox … failed``.
    **Why**: kubelet gives each CRI call (RunPodSandbox, StopPodSandbox) a deadline; the CNI plugin inside
    it often calls the API server (Calico: namespace and pod lookups). When the API server — or etcd
    behind it — is slow, the CNI call misses the deadline, the sandbox is torn down and retried, and
    the pod start takes tens of seconds. A slow or overloaded containerd shows the same way.
    **Fix**: if the messages say the API server did not answer in time, fix the control plane first
    (see the etcd and cascade findings); otherwise check the CNI daemon on the node and containerd
    (`crictl info`, containerd logs), and the node's CPU/disk pressure.
    **Verify**: `kubectl get events -A --field-selector reason=FailedCreatePodSandBox` and
    `journalctl -u kubelet -u containerd --since -1h | grep -E 'deadline exceeded|FailedCreatePodSandBox'`.
    """
    evs = _events(obs, _TIMEOUT_KINDS)
    relevant = [e for e in evs if e.kind != "apiserver.timeout"]
    if not relevant:
        return
    by_kind: dict[str, list[Event]] = {}
    for e in relevant:
        by_kind.setdefault(e.kind, []).append(e)
    api = [
        e
        for e in evs
        if "apiserver-timeout" in dict(e.attrs).get("cause", "") or e.kind == "apiserver.timeout"
    ]
    ev = []
    for k, es in sorted(by_kind.items()):
        first = min(es, key=lambda e: e.time if e.time is not None else float("inf"))
        ev.append(Evidence(f"{k} ({first.message[:120]})", len(es), source=_src(first), time=first.time))
    if api:
        ev.append(
            Evidence(
                "of which the API server did not answer in time",
                len(api),
                source=_src(api[0]),
                time=api[0].time,
            )
        )
    create_failed = by_kind.get("sandbox.create_failed", [])
    sev = Severity.CRITICAL if create_failed else Severity.WARNING
    times = [e.time for e in relevant if e.time is not None]
    summary = (
        f"{len(relevant)} CNI/CRI timeout or sandbox failure event(s)"
        + (f", first at {utc(min(times))}" if times else "")
        + "."
        + (" The CNI call waited on the API server: the control plane is the upstream cause." if api else "")
    )
    # the node(s) these came from: their logs' hosts are not always known, the files always are
    where = sorted({e.source.location for e in relevant if e.source is not None}) or ["kubelet log"]
    yield cni_cri_timeouts.finding(
        summary,
        evidence=ev,
        severity=sev,
        confidence=0.8 if api else 0.75,
        subject=", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else ""),
        causes=_timeout_causes(by_kind, api),
    )


def _timeout_causes(by_kind: dict[str, list[Event]], api: list[Event]) -> tuple[str, ...]:
    """The cause classes the timeouts name: none when the API server was the one that did not answer
    (the control plane is upstream), else the CNI plugin and/or the container runtime."""
    if api:
        return ()
    out: list[str] = []
    if "cni.timeout" in by_kind:
        out.append("kubelet.cni")
    if "cri.timeout" in by_kind:
        out.append("kubelet.runtime-down")
    return tuple(out)


POD_START_SLI_NAME = "kubelet_pod_start_sli_duration_seconds"
_K = 'job="kubelet",instance="10.0.3.7:10250",node="gpu-node-7"'
_KL = {"job": "kubelet", "instance": "10.0.3.7:10250", "node": "gpu-node-7"}
_KBY = "job, instance, node"
_QUICK = (("1", 10), ("5", 10), ("30", 10), ("60", 10), ("+Inf", 10))  # every start within a second


def _kubelet_alert(sev: str, expr: str, summary: str, buckets, also=()) -> Alert:
    return Alert(
        name="ClusterdoctorPodStartSliTail",
        expr=expr,
        severity=sev,
        for_="15m",
        source="kubelet",
        summary=summary,
        description=(
            f"kubelet_pod_start_sli_duration_seconds (image pulls excluded) over 10 minutes: {POD_START_SLOW.meaning} "
            f"is {POD_START_SLOW.value:g} s; the SLO is {POD_START_SLO.value:g} s p99. The time goes to sandbox "
            "creation (CNI, CRI), volume mounts or waiting on the API server."
        ),
        fires=Example(hist(POD_START_SLI_NAME, _K, buckets, count=True), _KL, also=also),
        healthy=Example(hist(POD_START_SLI_NAME, _K, _QUICK, count=True)),
    )


KUBELET003_ALERTS = (
    _kubelet_alert(
        "warning",
        p99_above(POD_START_SLI_NAME, _KBY, POD_START_SLOW.value, window="10m"),
        "kubelet {{ $labels.node }}: pod start p99 above 30 s",
        (("1", 6), ("5", 8), ("30", 9), ("60", 10), ("+Inf", 10)),
    ),
    _kubelet_alert(
        "critical",
        f'1 - sum by ({_KBY}) (rate({POD_START_SLI_NAME}_bucket{{le=~"30|30[.]0"}}[10m])) '
        f"/ sum by ({_KBY}) (rate({POD_START_SLI_NAME}_count[10m])) > 0.5",
        "kubelet {{ $labels.node }}: most pod starts take longer than 30 s",
        (("1", 0), ("5", 1), ("30", 3), ("60", 8), ("+Inf", 10)),
        ("warning",),
    ),
)


@rule(
    id="KUBELET003",
    name="pod-start-sli-tail",
    layer="kubelet",
    title="Kubelet pod-start SLI p99 above 30 s",
    requires=("kubelet_metrics",),
    thresholds=(POD_START_SLOW,),  # one threshold, stated once (the 5 s SLO is in its source text)
    alerts=KUBELET003_ALERTS,
    severity=Severity.WARNING,
)
def pod_start_sli_tail(obs: Observations) -> Iterator[Finding]:
    """The kubelet's own pod-start histogram (excluding image pulls) has its p99 above 30 s.

    **Symptom**: pods sit in ContainerCreating; deployments and training jobs start minutes late;
    ``kubelet_pod_start_sli_duration_seconds`` has observations in the 30–60 s buckets and beyond.
    **Why**: the SLI excludes image pulls, so the time goes to sandbox creation (CNI IPAM, CRI calls
    to containerd), volume mounts, or the kubelet waiting on the API server; a node packed with
    daemonsets at boot shows it first.
    **Fix**: look for CNI/CRI timeouts in the kubelet log (KUBELET002), check containerd and the CNI
    plugin's API-server latency, raise `--max-pods` only with IPAM capacity to match, and spread
    daemonset start-up.
    **Verify**: `kubectl get --raw /api/v1/nodes/NODE/proxy/metrics | grep kubelet_pod_start_sli_duration_seconds`
    """
    from clusterdoctor.analyze.metric_window import earlier_dump_evidence
    from clusterdoctor.analyze.quantile import fraction_above, quantile_of, validate_histogram

    window = obs.get("kubelet_metrics")
    if window is None or not window.has(POD_START_SLI_NAME + "_bucket"):
        return
    for h in window.histograms(POD_START_SLI_NAME):
        if not h.buckets or not h.buckets[-1][1]:
            continue
        q = quantile_of(0.99, h.buckets)
        p99 = q.value
        problems = validate_histogram(h) + list(q.problems)
        total = h.buckets[-1][1]
        slow = fraction_above(POD_START_SLOW.value, h.buckets)
        inst = window.subject_for(h.labels.get("instance", "")) or h.labels.get("node") or "kubelet"
        ev = [
            Evidence(
                f"{POD_START_SLI_NAME} p99 ({total:g} pod starts)",
                round(p99, 3),
                POD_START_SLOW.value,
                "s",
                window.source_for(h.labels) or None,
            ),
            Evidence(
                f"share of pod starts slower than {POD_START_SLOW.value:g} s", round(slow, 3), unit="fraction"
            ),
        ]
        ev += [Evidence(f"invalid histogram data: {p}") for p in problems]
        ev += earlier_dump_evidence(
            window, h.labels.get("instance", ""), histogram=POD_START_SLI_NAME, what="pod start"
        )
        if p99 > POD_START_SLOW.value:
            yield pod_start_sli_tail.finding(
                f"{inst}: pod start p99 {p99:.1f} s over {total:g} starts, above the "
                f"{POD_START_SLOW.value:g} s threshold ({slow * 100:.0f}% of the starts were slower), "
                "excluding image pulls.",
                evidence=ev,
                subject=inst,
                severity=Severity.CRITICAL if slow > 0.5 else Severity.WARNING,
            )
        elif problems:
            yield pod_start_sli_tail.finding(
                f"{inst}: the pod-start histogram is invalid ({'; '.join(problems)}); its sum/quantiles cannot be trusted.",
                evidence=ev,
                subject=inst,
                severity=Severity.INFO,
                confidence=0.9,
            )


# --- pods and nodes as kubectl shows them (observe/control/kubectl_text) -----------------------------

register_input("kube_pods", "no `kubectl get pods` listing")
register_input("kube_nodes", "no `kubectl get nodes` listing")
register_input("kube_objects", "no `kubectl describe pod|node` output")

MAX_POD_FINDINGS = 20  # pods named one by one; the rest are counted in the last finding
START_GRACE = Threshold(
    "pod_start_grace",
    300.0,
    "s",
    "clusterdoctor default: a pod (or a node joining) is Pending / ContainerCreating / NotReady for "
    "seconds to minutes while it is scheduled, pulls images and gets its network (the pod-start SLO is "
    "5 s p99 without pulls; large images take minutes); younger than this it is starting, not stuck",
    "age below which a starting pod or a new NotReady node is not judged",
)
_STARTING = ("not started (Pending)",)
POD_SYMPTOM_CONFIDENCE = 0.5  # a pod's state is what a cause (a message, a node condition) explains

# pod STATUS / container waiting reasons, by what they say (kubectl's printers.go and the kubelet's
# container waiting reasons: pkg/kubelet/container/sync_result.go, pkg/kubelet/images/types.go)
_POD_STATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("evicted by the kubelet (node pressure)", ("Evicted",)),
    ("not started (Pending)", ("Pending", "ContainerCreating", "PodInitializing")),
    (
        "crash-looping or failing to start",
        (
            "CrashLoopBackOff",
            "Error",
            "RunContainerError",
            "CreateContainerError",
            "CreateContainerConfigError",
            "ContainerCannotRun",
            "StartError",
            "PostStartHookError",
        ),
    ),  # fmt: skip
    ("cannot pull its image", ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull")),
    ("killed for memory (OOMKilled)", ("OOMKilled",)),
    ("on a node that stopped reporting (Unknown)", ("Unknown", "NodeLost")),
)


def _pod_state(status: str) -> str | None:
    if status.startswith("Init:") and not status.startswith("Init:0/0"):
        return "not started (Pending)"
    for what, names in _POD_STATES:
        if status in names:
            return what
    return None


def age_seconds(text: str) -> float | None:
    """kubectl's AGE column (``65m``, ``3h5m``, ``2m21s``, ``10d``) in seconds; None when not one."""
    import re

    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "y": 31536000}
    parts = re.findall(r"(\d{1,9})([smhdy])", text or "")
    if not parts or "".join(a + b for a, b in parts) != (text or "").strip():
        return None
    return float(sum(int(a) * units[b] for a, b in parts))


def _starting(what: str, age: str) -> bool:
    """A pod still starting (or a node still joining): not judged."""
    a = age_seconds(age)
    return what in _STARTING and a is not None and a < START_GRACE.value


def _pod_rows(obs: Observations) -> list[tuple[str, str, list[str], str]]:
    """(subject, state, evidence lines, source) of every pod kubectl shows in a bad state."""
    out = []
    for p in obs.get("kube_pods") or []:
        what = _pod_state(p.status)
        if what and _starting(what, p.age):
            continue
        if what:
            ev = [f"line {p.line}: STATUS {p.status}, READY {p.ready}, RESTARTS {p.restarts}, AGE {p.age}"]
            out.append((f"pod {p.key}", what, ev, p.source))
    for o in obs.get("kube_objects") or []:
        if o.kind != "pod":
            continue
        states = [o.fields.get("Reason", ""), o.fields.get("Status", "")] + [
            r for _, _, r in o.container_states
        ]
        what = next((w for w in (_pod_state(s) for s in states if s) if w), None)
        if what:
            ev = [f"{k}: {o.fields[k]}" for k in ("Status", "Reason", "Message") if o.fields.get(k)]
            ev += [f"container {c}: {s}" + (f" ({r})" if r else "") for c, s, r in o.container_states[:4]]
            out.append((o.ref or "pod (name not pasted)", what, ev, o.source))
    return out


# pods of the NVIDIA GPU stack on a node: the device plugin, and what it waits for under the GPU operator
# (driver, container toolkit, validator): NVIDIA/k8s-device-plugin deployments/static/*.yml and
# NVIDIA/gpu-operator assets/state-*/ DaemonSet names
_GPU_STACK_POD = re.compile(
    r"\bpod (?:[\w.\-]{1,253}/)?(?:nvidia-device-plugin|nvidia-driver-daemonset|nvidia-container-toolkit"
    r"|nvidia-operator-validator)[\w.\-]{0,200}$"
)


@rule(
    id="KUBELET004",
    name="pods-not-running",
    layer="kubelet",
    title="Pods not running (pending, crash-looping, evicted, image pull failing)",
    requires=(),
    requires_any=("kube_pods", "kube_objects"),
    thresholds=(START_GRACE,),
    severity=Severity.WARNING,
)
def pods_not_running(obs: Observations) -> Iterator[Finding]:
    """`kubectl get pods` / `kubectl describe pod` show pods that are not running.

    **Symptom**: STATUS Pending, ContainerCreating, CrashLoopBackOff, Error, ImagePullBackOff, OOMKilled,
    Evicted or Unknown; RESTARTS climbing.
    **Why**: a pod's state is the consequence of something else: the scheduler finding no node (see its
    FailedScheduling reason), the kubelet evicting it for node pressure, the runtime failing to start its
    container, the program crashing, an image that cannot be pulled. The pod state says where to look;
    the message that explains it (in the events, the node's conditions, the logs) is the cause, and this
    finding folds into it when it is among the inputs.
    **Fix**: `kubectl describe pod <pod>` (its Events and container states) and `kubectl logs <pod>
    --previous`; fix what they name.
    **Verify**: `kubectl get pods -A -o wide | grep -v -E 'Running|Completed'` lists nothing.

    A pod younger than five minutes that is still Pending or ContainerCreating is starting, not stuck:
    not judged.
    """
    rows = _pod_rows(obs)
    for subject, what, ev, src in rows[:MAX_POD_FINDINGS]:
        causes: tuple[str, ...] = ("kubelet.eviction",) if what.startswith("evicted") else ()
        summary = f"{subject} is {what}"
        if _GPU_STACK_POD.search(subject) and not causes:
            # the device plugin (or a component it waits for) is not running: the node advertises no GPUs
            causes = ("k8s.gpu-not-advertised", "gpu.device-plugin")
            summary += (
                ": a pod of the NVIDIA GPU stack, so the node advertises no nvidia.com/gpu while it is down"
            )
        f = pods_not_running.finding(
            summary,
            evidence=[Evidence(e, source=src or None) for e in ev],
            subject=subject,
            confidence=POD_SYMPTOM_CONFIDENCE,
            causes=causes,
        )
        f.role = "symptom"
        yield f
    if len(rows) > MAX_POD_FINDINGS:
        f = pods_not_running.finding(
            f"{len(rows) - MAX_POD_FINDINGS} more pod(s) not running",
            evidence=[Evidence(f"{s}: {w}") for s, w, _, _ in rows[MAX_POD_FINDINGS : MAX_POD_FINDINGS + 10]],
            subject="more pods",
            confidence=POD_SYMPTOM_CONFIDENCE,
        )
        f.role = "symptom"
        yield f


# node conditions that name a cause (kubelet pkg/kubelet/nodestatus/setters.go): condition -> class
_PRESSURE = {"MemoryPressure": "kubelet.eviction", "DiskPressure": "kubelet.eviction",
             "PIDPressure": "kubelet.eviction", "NetworkUnavailable": "kubelet.cni"}  # fmt: skip


@rule(
    id="KUBELET005",
    name="node-not-ready",
    layer="kubelet",
    title="Node NotReady or under pressure (kubectl get/describe nodes)",
    requires=(),
    requires_any=("kube_nodes", "kube_objects"),
    thresholds=(START_GRACE,),
    severity=Severity.WARNING,
)
def node_not_ready(obs: Observations) -> Iterator[Finding]:
    """A node is NotReady (or Unknown), or one of its pressure conditions is True.

    **Symptom**: `kubectl get nodes` shows NotReady or Unknown; `kubectl describe node` shows Ready False
    or Unknown, or MemoryPressure / DiskPressure / PIDPressure / NetworkUnavailable True.
    **Why**: NotReady is what the node controller sees when the kubelet stops reporting Ready; the Ready
    condition's message says why (container runtime down, PLEG not healthy, network plugin not ready),
    and that message is the cause. A pressure condition means the kubelet crossed an eviction threshold
    and evicts pods; NetworkUnavailable means the node's pod network (CNI, routes) is not set up.
    **Fix**: read the condition's message (`kubectl describe node <node>`); on the node, check the kubelet
    and the runtime (`journalctl -u kubelet -u containerd`), free disk or memory for a pressure condition.
    **Verify**: `kubectl get nodes` shows Ready; `kubectl describe node <node> | grep -A8 Conditions`.
    """
    for n in obs.get("kube_nodes") or []:
        state = n.status.split(",")[0]
        young = (a := age_seconds(n.age)) is not None and a < START_GRACE.value
        if state in ("NotReady", "Unknown") and not (state == "NotReady" and young):
            f = node_not_ready.finding(
                f"node {n.name} is {state}",
                evidence=[
                    Evidence(
                        f"line {n.line}: STATUS {n.status}, ROLES {n.roles}, AGE {n.age}", source=n.source
                    )
                ],
                subject=f"node {n.name}",
                confidence=POD_SYMPTOM_CONFIDENCE,
            )
            f.role = "symptom"
            yield f
    for o in obs.get("kube_objects") or []:
        if o.kind != "node":
            continue
        subject = o.ref or "node (name not pasted)"
        for c in o.conditions:
            text = f"{c.type} {c.status}" + (f" ({c.reason}: {c.message})" if c.reason or c.message else "")
            if c.type == "Ready" and c.status in ("False", "Unknown"):
                f = node_not_ready.finding(
                    f"{subject} is not Ready: {c.reason or c.status}"
                    + (f": {c.message}" if c.message else ""),
                    evidence=[Evidence(f"condition {text}", source=o.source or None)],
                    subject=subject,
                    confidence=POD_SYMPTOM_CONFIDENCE,
                )
                f.role = "symptom"
                yield f
            elif c.type in _PRESSURE and c.status == "True":
                yield node_not_ready.finding(
                    f"{subject} reports {c.type}: {c.message or c.reason}",
                    evidence=[Evidence(f"condition {text}", source=o.source or None)],
                    subject=subject,
                    confidence=0.85,
                    causes=(_PRESSURE[c.type],),
                )


# a node the GPU stack labelled as having NVIDIA GPUs (gpu-operator GPU feature discovery and NFD)
_GPU_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.product", "nvidia.com/gpu.count",
               "feature.node.kubernetes.io/pci-10de.present")  # fmt: skip


@rule(
    id="KUBELET006",
    name="gpu-not-advertised",
    layer="kubelet",
    title="GPU node advertises no nvidia.com/gpu (device plugin not registered)",
    requires=("kube_objects",),
    severity=Severity.WARNING,
    causes=("k8s.gpu-not-advertised",),
)
def gpu_not_advertised(obs: Observations) -> Iterator[Finding]:
    """A node labelled as a GPU node has no (or zero) nvidia.com/gpu in its Capacity or Allocatable.

    **Symptom**: `kubectl describe node` shows the nvidia.com/gpu.* labels (or the NVIDIA PCI feature label)
    but Capacity/Allocatable lists no `nvidia.com/gpu`, or 0; GPU pods stay Pending with `Insufficient
    nvidia.com/gpu`.
    **Why**: the extended resource is advertised only by the NVIDIA device plugin once it registers with
    the kubelet; it is missing when the plugin's DaemonSet pod is not running on the node, cannot see the
    GPUs (driver or container toolkit not ready, the container runtime not configured for nvidia), or
    marked them unhealthy (allocatable below capacity after an Xid).
    **Fix**: check the device plugin pod on the node (`kubectl -n gpu-operator get pods -o wide`, its logs),
    the driver (`nvidia-smi` on the node) and the runtime's nvidia configuration; restart the plugin pod.
    **Verify**: `kubectl get node <node> -o jsonpath='{.status.allocatable.nvidia\\.com/gpu}'` prints the GPU count.
    """
    for o in obs.get("kube_objects") or []:
        if o.kind != "node" or not (o.capacity or o.allocatable):
            continue  # the Capacity section was not pasted: not judged
        labelled = [k for k in _GPU_LABELS if k in o.labels and o.labels[k] not in ("false", "0")]
        # the accelerator resource the kubelet itself advertised before 1.11: a GPU node, whose
        # nvidia.com/gpu only a registered device plugin provides
        legacy = o.capacity.get("alpha.kubernetes.io/nvidia-gpu") or o.allocatable.get(
            "alpha.kubernetes.io/nvidia-gpu"
        )
        if legacy not in (None, "", "0"):
            labelled.append(f"alpha.kubernetes.io/nvidia-gpu={legacy}")
        if not labelled:
            continue
        cap = o.capacity.get("nvidia.com/gpu")
        alloc = o.allocatable.get("nvidia.com/gpu")
        if cap not in (None, "0") and alloc not in ("0",):
            continue
        what = (
            "lists no nvidia.com/gpu"
            if cap is None and alloc is None
            else f"has nvidia.com/gpu capacity {cap}, allocatable {alloc}"
        )
        yield gpu_not_advertised.finding(
            f"{o.ref or 'the node'} is labelled as a GPU node ({', '.join(labelled)}) but {what}",
            evidence=[
                Evidence(f"label {k}={o.labels.get(k, '')}".rstrip("="), source=o.source or None)
                for k in labelled
            ]
            + [Evidence("Capacity nvidia.com/gpu", cap), Evidence("Allocatable nvidia.com/gpu", alloc)],
            subject=o.ref or None,
            confidence=0.8,
        )


# resources the kubelet itself accounts (allocatable below capacity by its reservations, by design);
# every other resource with a "/" is an extended resource a device plugin advertises
_NATIVE = ("cpu", "memory", "pods", "ephemeral-storage", "storage")


def _count(v: str | None) -> int | None:
    return int(v) if v is not None and v.isdigit() else None


@rule(
    id="KUBELET007",
    name="device-plugin-unhealthy-devices",
    layer="kubelet",
    title="Fewer devices allocatable than the node has (the device plugin marked some unhealthy)",
    requires=("kube_objects",),
    severity=Severity.WARNING,
    causes=("gpu.device-plugin", "k8s.gpu-not-advertised"),
)
def device_plugin_unhealthy(obs: Observations) -> Iterator[Finding]:
    """A device-plugin resource (``nvidia.com/gpu``, ``rdma/…``, ``amd.com/gpu``) has Allocatable below
    Capacity in ``kubectl describe node``.

    **Symptom**: `kubectl describe node` shows `nvidia.com/gpu: 8` under Capacity and `7` under
    Allocatable; a job that asks for every GPU of the node stays Pending.
    **Why**: the kubelet reserves CPU and memory (kube-reserved, system-reserved), never devices: a
    device plugin reports each device healthy or unhealthy (ListAndWatch), and the kubelet counts only
    the healthy ones as allocatable (k8s.io/kubernetes pkg/kubelet/cm/devicemanager). The NVIDIA
    device plugin marks a GPU unhealthy on a critical Xid (its health.go) and, before v0.15, never
    marks it healthy again.
    **Fix**: find the GPU in the device plugin's log (`Xid=… on Device=…`, "marking device … as
    unhealthy"), act on that Xid (reset the GPU), then restart the plugin pod; for an Xid that is the
    application's (Xid 94 contained ECC), DP_DISABLE_HEALTHCHECKS=94 keeps the GPU in service.
    **Verify**: `kubectl get node <node> -o jsonpath='{.status.allocatable}'` equals its capacity.
    """
    for o in obs.get("kube_objects") or []:
        if o.kind not in ("node", "") or not (o.capacity and o.allocatable):
            continue  # both sections are needed: not judged otherwise
        for res, cap_s in sorted(o.capacity.items()):
            if "/" not in res or res.startswith("hugepages-") or res in _NATIVE:
                continue
            alloc_s = (o.allocatable.get(res) or "").split()  # "7   <=== here": the user's mark after it
            cap, alloc = _count(cap_s), _count(alloc_s[0] if alloc_s else None)
            if cap is None or alloc is None or alloc >= cap:
                continue
            gpu = res.endswith("/gpu") or "gpu" in res
            yield device_plugin_unhealthy.finding(
                f"{o.ref or 'the node'}: {res} capacity {cap}, allocatable {alloc} — the device plugin "
                f"reports {cap - alloc} of its devices unhealthy"
                + (" (a GPU with a critical Xid, or failing health checks)" if gpu else ""),
                evidence=[
                    Evidence(f"Capacity {res}", cap, source=o.source or None),
                    Evidence(f"Allocatable {res}", alloc, cap, source=o.source or None),
                ],
                subject=o.ref or None,
                confidence=0.75,
                causes=("gpu.device-plugin", "k8s.gpu-not-advertised") if gpu else (),
            )


# --- the process a kernel memory-cgroup OOM was about -------------------------------------------
# A memcg OOM call trace (``mem_cgroup_oom_synchronize+0x...``, ``oom-kill:constraint=CONSTRAINT_MEMCG``)
# names no process; the line that opens the same report does: "<comm> invoked oom-killer: gfp_mask=..."
# (mm/oom_kill.c dump_header). Where one file holds exactly one such process, it is the subject.
_OOM_TRACE = "KUBELET117"
_OOM_INVOKED = "KUBELET118"


def oom_process_subject(obs: Observations, m: Message, hits: list[Any], subject: str | None) -> str | None:
    """The process that invoked the OOM killer, for a memcg OOM finding whose lines name none."""
    if subject is not None or m.code != _OOM_TRACE:
        return subject
    from clusterdoctor.rules.messages import hit_groups, hits_by_code

    paths = {h.path for h in hits}
    procs = {
        p
        for h in hits_by_code(obs).get(_OOM_INVOKED, [])
        if h.path in paths and (p := hit_groups(h).get("proc"))
    }
    return procs.pop() if len(procs) == 1 else subject


# journald / syslog's prefix names the node that printed a node agent's line:
# "Jun 01 16:46:01 node-pool-7f-gg9jj kubelet[179303]: ..." (short-iso: "2024-06-01T16:46:01+0000 host ...")
_SYSLOG_HOST = re.compile(
    r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[\d.,:+\-Z]{0,20}) "
    r"(?P<host>[A-Za-z0-9][\w.\-]{0,252}) (?:kubelet|k3s|k3s-agent|rke2|containerd|dockerd|crio|kernel)(?:\[\d{1,10}\])?:"
)


# the image an image-pull message is about: kubelet's 'Failed to pull image "x"', containerd's 'failed to
# pull and unpack image "x"', crictl's 'pulling image "x"' (quotes escaped inside structured logs)
_IMAGE = re.compile(
    r'(?:[Pp]ull(?:ing)?(?: and unpack)? image|[Bb]ack-off pulling image) \\?"([^"\\\s]{1,300})\\?"'
)


def node_agent_subject(obs: Observations, m: Message, hits: list[Any], subject: str | None) -> str | None:
    """The subject of a kubelet/container-runtime message: the memcg OOM's process (above), else the one
    node whose journald/syslog prefix printed the lines, when those that have a prefix agree."""
    subject = oom_process_subject(obs, m, hits, subject)
    if subject is not None:
        return subject
    if any(c.startswith("image.") for c in m.causes):
        images = {mm.group(1) for h in hits if (mm := _IMAGE.search(h.text))}
        if len(images) == 1:
            return f"image {images.pop()}"
    hosts = {mm.group("host") for h in hits if (mm := _SYSLOG_HOST.match(h.text))}
    return hosts.pop() if len(hosts) == 1 else None


def _register_oom_subject() -> None:
    from clusterdoctor.rules.messages import register_subject_resolver

    register_subject_resolver("kubelet", node_agent_subject)
    register_subject_resolver("containerd", node_agent_subject)


_register_oom_subject()
