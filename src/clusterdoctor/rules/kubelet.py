"""Kubelet rules: slow pod starts and the CNI/CRI timeouts that cause them.

Inputs: ``pod_starts`` (:mod:`clusterdoctor.observe.control.kube`: ``kubectl get pods -o json``, or kubelet
``Observed pod startup duration`` log lines) and ``events`` (:mod:`clusterdoctor.observe.control.logs`).
The ``kubelet_pod_start_sli_duration_seconds`` histogram rule (KUBELET003) reads ``kubelet_metrics``.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Event, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.alerts import Alert, Example, hist, p99_above
from clusterdoctor.rules.etcd_log import utc
from clusterdoctor.rules.registry import Observations, register_input, rule

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
