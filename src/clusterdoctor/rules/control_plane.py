"""Control-plane rules: kube-scheduler latency tail and pending pods, kube-apiserver latency.

Metric names differ across Kubernetes versions; each rule uses the first name present (newest
first) and says which one (and the ``kubernetes_build_info`` version) in its evidence:

- pod scheduling end to end: ``scheduler_pod_scheduling_sli_duration_seconds`` (1.29+, BETA) →
  ``scheduler_pod_scheduling_duration_seconds`` (1.23–1.29, removed 1.30) →
  ``scheduler_e2e_scheduling_duration_seconds`` (before 1.23, removed 1.27);
- one scheduling attempt: ``scheduler_scheduling_attempt_duration_seconds`` (STABLE) and
  ``scheduler_scheduling_algorithm_duration_seconds`` (ALPHA, still exported in 1.35);
- apiserver: ``apiserver_request_sli_duration_seconds`` (1.27+) → ``apiserver_request_slo_duration_seconds``
  (1.23–1.26) → ``apiserver_request_duration_seconds`` (all versions; includes webhook time).

Tiers: **degraded** (warning) and **paging** (critical). The kubernetes-mixin has no scheduler
latency alert at all, so the scheduler tiers cite the pod-startup SLO instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from clusterdoctor.analyze.metric_window import MetricWindow, detect_kube_version, earlier_dump_evidence
from clusterdoctor.analyze.quantile import fraction_above, quantile_of, validate_histogram
from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.alerts import Alert, Example, hist, p99_above
from clusterdoctor.rules.registry import Observations, rule

MIXIN = "kubernetes-monitoring/kubernetes-mixin @ aa38e2bf"
POD_STARTUP_SLO = "kubernetes sig-scalability SLO pod_startup_latency.md (p99 <= 5 s)"

SCHED_E2E_NAMES = (
    "scheduler_pod_scheduling_sli_duration_seconds",
    "scheduler_pod_scheduling_duration_seconds",
    "scheduler_e2e_scheduling_duration_seconds",
)
SCHED_ATTEMPT_NAMES = (
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_e2e_scheduling_duration_seconds",
)
SCHED_ALGO_NAMES = ("scheduler_scheduling_algorithm_duration_seconds",)
APISERVER_NAMES = (
    "apiserver_request_sli_duration_seconds",
    "apiserver_request_slo_duration_seconds",
    "apiserver_request_duration_seconds",
)

ATTEMPT_DEGRADED = Threshold(
    "scheduling_attempt_p99_degraded",
    0.1,
    "s",
    "clusterdoctor default: no published threshold (kubernetes-mixin has no scheduler latency alert); "
    "a healthy attempt takes milliseconds (the STABLE histogram's buckets start at 1 ms)",
    "one scheduling attempt (algorithm + binding) p99 above 100 ms",
)
SCHED_PAGING = Threshold(
    "pod_scheduling_p99_paging",
    5.0,
    "s",
    POD_STARTUP_SLO,
    "scheduling alone uses the whole pod-startup budget",
)
E2E_DEGRADED = Threshold(
    "pod_scheduling_p99_degraded",
    1.0,
    "s",
    "clusterdoctor default: 20% of the " + POD_STARTUP_SLO,
    "pods wait more than 1 s (p99) from entering the queue to being bound",
)
PENDING_UNSCHEDULABLE = Threshold(
    "unschedulable_pods",
    0,
    "pods",
    MIXIN + " KubePodNotReady (Pending pods, 15m)",
    "pods the scheduler tried and could not place",
)
SCHED_ERRORS = Threshold(
    "schedule_attempts_error",
    0,
    "attempts",
    "kube-scheduler metrics.go: result=error means an internal scheduler problem",
    "scheduling attempts that failed with an internal error",
)
# kubernetes-mixin rules/kube_apiserver-config.libsonnet: "fast enough" buckets of the SLO.
APISERVER_SLO_BOUND = {
    "resource": Threshold("apiserver_read_resource_slo", 1.0, "s", MIXIN, "read, scope=resource: 1 s"),
    "namespace": Threshold("apiserver_read_namespace_slo", 5.0, "s", MIXIN, "read, scope=namespace: 5 s"),
    "cluster": Threshold("apiserver_read_cluster_slo", 30.0, "s", MIXIN, "read, scope=cluster: 30 s"),
    "write": Threshold("apiserver_write_slo", 1.0, "s", MIXIN, "write (mutating) verbs: 1 s"),
}
APISERVER_BURN_PAGING = Threshold(
    "apiserver_slow_fraction_paging",
    0.144,
    "fraction",
    MIXIN + " KubeAPIErrorBudgetBurn (1h/5m windows, factor 14.4 x 1% budget)",
    "more than 14.4% of requests slower than the SLO bucket",
)
MIN_REQUESTS = 20  # fewer observations than this make a p99 meaningless
READ_VERBS = frozenset({"GET", "LIST"})
SKIP_VERBS = frozenset({"WATCH", "CONNECT", "WATCHLIST"})
STREAMING_SUBRESOURCES = frozenset({"proxy", "attach", "log", "exec", "portforward"})


# --- alerts over the scheduler's and apiserver's own metrics -------------------------------------------
_S = 'job="kube-scheduler",instance="10.0.0.2:10259",profile="default-scheduler"'
_SL = {"job": "kube-scheduler", "instance": "10.0.0.2:10259", "profile": "default-scheduler"}
_ATTEMPT = "scheduler_scheduling_attempt_duration_seconds"
_E2E = "scheduler_pod_scheduling_sli_duration_seconds"
_MS = (("0.001", 100), ("0.002", 100), ("0.004", 100), ("+Inf", 100))  # attempts of ~1 ms


def _sched(metric: str, th: Threshold, sev: str, buckets, what: str, name: str, also=()) -> Alert:
    return Alert(
        name=name,
        expr=p99_above(metric, "job, instance, profile", th.value),
        severity=sev,
        for_="10m",
        source="kube-scheduler",
        summary=f"{{{{ $labels.instance }}}}: {what} p99 above {th.value:g} s",
        description=f"{what} p99 over 5 minutes has stayed above {th.value:g} s ({th.meaning}; {th.source}).",
        fires=Example(hist(metric, _S, buckets), _SL, also=also),
        healthy=Example(hist(metric, _S, _MS) + hist(_E2E, _S, _MS)),
    )


CP001_ALERTS = (
    _sched(_ATTEMPT, ATTEMPT_DEGRADED, "warning", (("0.128", 0), ("0.256", 100), ("+Inf", 100)),
           "one scheduling attempt", "ClusterdoctorSchedulerAttemptLatency"),
    _sched(_ATTEMPT, SCHED_PAGING, "critical", (("4.096", 0), ("8.192", 100), ("+Inf", 100)),
           "one scheduling attempt", "ClusterdoctorSchedulerAttemptLatency", ("warning",)),
    _sched(_E2E, E2E_DEGRADED, "warning", (("1.024", 0), ("2.048", 100), ("+Inf", 100)),
           "pod scheduling (queue to bound)", "ClusterdoctorSchedulerPodSchedulingLatency"),
)  # fmt: skip
CP002_ALERTS = (
    Alert(
        name="ClusterdoctorSchedulerUnschedulablePods",
        expr='sum by (job, instance) (scheduler_pending_pods{queue="unschedulable"}) > 0',
        severity="warning",
        for_="15m",
        source="kube-scheduler",
        summary="{{ $labels.instance }}: pods the scheduler cannot place for 15 minutes",
        description=(
            "scheduler_pending_pods{queue=unschedulable} has been above 0 for 15 minutes: no node fits these "
            "pods (GPUs, affinity, taints, topology). Read a pending pod's FailedScheduling event."
        ),
        fires=Example(
            ((f'scheduler_pending_pods{{{_S},queue="unschedulable"}}', "3x30"),),
            {"job": "kube-scheduler", "instance": "10.0.0.2:10259"},
        ),
        healthy=Example(
            (
                (f'scheduler_pending_pods{{{_S},queue="unschedulable"}}', "0x30"),
                (f'scheduler_pending_pods{{{_S},queue="active"}}', "5x30"),  # waiting their turn: fine
            )
        ),
    ),
    Alert(
        name="ClusterdoctorSchedulerErrors",
        expr='sum by (job, instance) (increase(scheduler_schedule_attempts_total{result="error"}[10m])) > 0',
        severity="critical",
        for_="1m",
        source="kube-scheduler",
        summary="{{ $labels.instance }}: scheduling attempts fail with internal errors",
        description=f"{SCHED_ERRORS.meaning} ({SCHED_ERRORS.source}). Check the scheduler's log.",
        fires=Example(
            ((f'scheduler_schedule_attempts_total{{{_S},result="error"}}', "0+1x30"),),
            {"job": "kube-scheduler", "instance": "10.0.0.2:10259"},
        ),
        healthy=Example(
            (
                (f'scheduler_schedule_attempts_total{{{_S},result="error"}}', "0x30"),
                (f'scheduler_schedule_attempts_total{{{_S},result="scheduled"}}', "0+20x30"),
            )
        ),
    ),
)
_API = "apiserver_request_sli_duration_seconds"
_A = 'job="apiserver",instance="10.0.0.1:6443",component="apiserver"'
_WRITE = 'verb!~"GET|LIST|WATCH|WATCHLIST|CONNECT"'
_MIN_RATE = MIN_REQUESTS / 300  # MIN_REQUESTS observations in the 5-minute window
_BY = "job, instance, verb, resource"


def _api_expr(selector: str, bound: float) -> str:
    return (
        p99_above(_API, _BY, bound, selector=selector)
        + f" and on ({_BY}) sum by ({_BY}) (rate({_API}_count{{{selector}}}[5m])) >= {_MIN_RATE:g}"
    )


def _api_example(verb: str, resource: str, scope: str, buckets) -> tuple[tuple[str, str], ...]:
    return hist(
        _API, f'{_A},verb="{verb}",resource="{resource}",scope="{scope}",subresource=""', buckets, count=True
    )


_API_FAST = (("0.05", 100), ("0.1", 100), ("1", 100), ("+Inf", 100))


def _api_healthy() -> Example:
    return Example(
        _api_example("POST", "pods", "resource", _API_FAST)
        + _api_example("GET", "nodes", "resource", _API_FAST)
        + _api_example("LIST", "pods", "cluster", _API_FAST)
        # a slow WATCH is normal (long-running): never an alert
        + hist(
            f"{_API}",
            f'{_A},verb="WATCH",resource="pods",scope="cluster",subresource=""',
            (("60", 0), ("+Inf", 100)),
            True,
        )
    )


def _api_labels(verb: str, resource: str) -> dict[str, str]:
    return {"job": "apiserver", "instance": "10.0.0.1:6443", "verb": verb, "resource": resource}


def _read_alert(scope: str, th: Threshold, verb: str, resource: str, buckets) -> Alert:
    sel = f'verb=~"GET|LIST",scope="{scope}"'
    return Alert(
        name="ClusterdoctorApiserverReadLatency",
        labels=(("scope", scope),),
        expr=_api_expr(sel, th.value),
        severity="warning",
        for_="15m",
        source="kube-apiserver",
        summary=f"apiserver {{{{ $labels.instance }}}}: {{{{ $labels.verb }}}} {{{{ $labels.resource }}}} (scope {scope}) p99 above {th.value:g} s",
        description=(
            f"Read latency p99 over 5 minutes (at least {MIN_REQUESTS} requests) is above the {th.meaning} "
            f"bound ({th.source}). Check etcd latency first, then webhooks and unpaginated LISTs."
        ),
        fires=Example(_api_example(verb, resource, scope, buckets), _api_labels(verb, resource)),
        healthy=_api_healthy(),
    )


CP003_ALERTS = (
    _read_alert(
        "resource", APISERVER_SLO_BOUND["resource"], "GET", "nodes", (("1", 0), ("2", 100), ("+Inf", 100))
    ),
    _read_alert(
        "namespace", APISERVER_SLO_BOUND["namespace"], "LIST", "pods", (("5", 0), ("10", 100), ("+Inf", 100))
    ),
    _read_alert(
        "cluster", APISERVER_SLO_BOUND["cluster"], "LIST", "pods", (("30", 0), ("60", 100), ("+Inf", 100))
    ),
    Alert(
        name="ClusterdoctorApiserverWriteLatency",
        expr=_api_expr(_WRITE, APISERVER_SLO_BOUND["write"].value),
        severity="warning",
        for_="15m",
        source="kube-apiserver",
        summary="apiserver {{ $labels.instance }}: {{ $labels.verb }} {{ $labels.resource }} p99 above 1 s",
        description=(
            f"Write latency p99 over 5 minutes (at least {MIN_REQUESTS} requests) is above the 1 s SLO bound "
            f"({MIXIN}). Writes wait on etcd (disk, leader changes) or admission webhooks."
        ),
        fires=Example(
            _api_example("POST", "pods", "resource", (("0.1", 90), ("1", 97), ("2", 100), ("+Inf", 100))),
            _api_labels("POST", "pods"),
        ),
        healthy=_api_healthy(),
    ),
    Alert(
        name="ClusterdoctorApiserverWriteLatency",
        expr=(
            f'1 - sum by ({_BY}) (rate({_API}_bucket{{{_WRITE},le=~"1|1[.]0"}}[5m])) '
            f"/ sum by ({_BY}) (rate({_API}_count{{{_WRITE}}}[5m])) > {APISERVER_BURN_PAGING.value:g}"
        ),
        severity="critical",
        for_="5m",
        source="kube-apiserver",
        summary="apiserver {{ $labels.instance }}: over 14.4% of {{ $labels.verb }} {{ $labels.resource }} slower than 1 s",
        description=f"{APISERVER_BURN_PAGING.meaning} ({APISERVER_BURN_PAGING.source}): the error budget burns 14.4x too fast.",
        fires=Example(
            _api_example("POST", "pods", "resource", (("0.1", 50), ("1", 70), ("2", 100), ("+Inf", 100))),
            _api_labels("POST", "pods"),
            also=("warning",),
        ),
        healthy=_api_healthy(),
    ),
)


def _version_evidence(w: MetricWindow, used: str) -> Evidence:
    v = detect_kube_version(w)
    where = f"Kubernetes v{v[0]}.{v[1]}" if v else "Kubernetes version unknown (no kubernetes_build_info)"
    return Evidence(f"{where}; metric used: {used}")


def _who(w: MetricWindow, instance: str, component: str) -> str:
    """The subject of a finding about one component instance: its ``instance`` label, the dump it
    came from when nothing else names it (``kube-scheduler <file>``), or the component alone."""
    subject = w.subject_for(instance) if instance else ""
    if not subject:
        return component
    return f"{component} {subject}" if subject in w.instance_sources.values() else subject


def _span(w: MetricWindow) -> str:
    return "since the process started" if w.is_snapshot else "over the window"


def _first_step_above(
    w: MetricWindow, name: str, threshold: float, **match: str
) -> tuple[float, float] | None:
    if w.is_snapshot:
        return None
    for t, v in w.quantile_steps(name, 0.99, **match):
        if v == v and v > threshold:
            return t, v
    return None


@rule(
    id="CP001",
    name="scheduler-latency-tail",
    layer="control-plane",
    title="kube-scheduler latency tail is high",
    requires=("scheduler_metrics",),
    thresholds=(ATTEMPT_DEGRADED, E2E_DEGRADED, SCHED_PAGING),
    alerts=CP001_ALERTS,
)
def scheduler_latency_tail(obs: Observations) -> Iterable[Finding]:
    """The scheduler's p99 attempt/algorithm or end-to-end pod scheduling latency is high.

    **Symptom**: p99 of `scheduler_scheduling_attempt_duration_seconds` (or the algorithm part) above
    100 ms, or p99 of `scheduler_pod_scheduling_sli_duration_seconds` above 1 s; pods sit in Pending
    before being bound; pod start latency grows.
    **Why**: slow attempts come from expensive filter/score plugins (inter-pod affinity, topology
    spread over many nodes), an overloaded scheduler (CPU throttling), or slow binding (apiserver/etcd
    latency); a long end-to-end time with fast attempts means pods retry (backoff, unschedulable).
    **Fix**: look at `scheduler_plugin_execution_duration_seconds` and
    `scheduler_framework_extension_point_duration_seconds` for the slow plugin; give the scheduler
    CPU; reduce `percentageOfNodesToScore` on large clusters; fix apiserver/etcd latency first when
    binding is slow.
    **Verify**: on the control-plane node, the scheduler's own endpoint (the API server's /metrics has no scheduler series): `curl -sk -H "Authorization: Bearer $(kubectl create token default)" https://127.0.0.1:10259/metrics | grep scheduler_scheduling_attempt_duration_seconds` and `kubectl get pods -A --field-selector=status.phase=Pending`
    """
    w: MetricWindow = obs.get("scheduler_metrics")
    checks = []
    e2e = w.first_present(*SCHED_E2E_NAMES)
    attempt = w.first_present(*SCHED_ATTEMPT_NAMES)
    algo = w.first_present(*SCHED_ALGO_NAMES)
    if attempt:
        checks.append((attempt, "scheduling attempt", ATTEMPT_DEGRADED, SCHED_PAGING))
    if algo and algo != attempt:
        checks.append((algo, "scheduling algorithm", ATTEMPT_DEGRADED, SCHED_PAGING))
    if e2e and e2e != attempt:
        checks.append((e2e, "pod scheduling (end to end)", E2E_DEGRADED, SCHED_PAGING))
    attempt_fast = False
    if attempt:
        qs = [quantile_of(0.99, h.buckets).value for h in w.merged_histogram(attempt).values()]
        attempt_fast = bool(qs) and all(v == v and v <= ATTEMPT_DEGRADED.value for v in qs)
    for name, what, degraded, paging in checks:
        for key, h in sorted(w.merged_histogram(name, by=("instance", "profile")).items()):
            q = quantile_of(0.99, h.buckets)
            n = h.buckets[-1][1] if h.buckets else 0
            if math.isnan(q.value) or q.value <= degraded.value:
                continue
            sev = Severity.CRITICAL if q.value > paging.value else Severity.WARNING
            inst = _who(w, key[0], "kube-scheduler")
            note = ""
            if name == e2e and attempt_fast:
                # Attempts are fast: the time is spent between attempts (unschedulable/backoff).
                sev = Severity.WARNING
                note = " (attempts are fast: pods waited between attempts, see CP002)"
            ev = [
                Evidence(
                    f"{what} p99 {w.span_for({'instance': key[0]})} ({n:g} observations)",
                    value=round(q.value, 6),
                    threshold=degraded.value,
                    unit="s",
                    source=w.source_for({"instance": key[0]}, name) or None,
                ),
                Evidence(
                    f"share of {what} observations slower than {degraded.value:g} s",
                    value=round(fraction_above(degraded.value, h), 4),
                ),
                _version_evidence(w, name),
            ]
            first = _first_step_above(w, name, degraded.value)
            if first:
                ev.append(
                    Evidence(
                        f"first step with {what} p99 above {degraded.value:g} s",
                        value=round(first[1], 4),
                        unit="s",
                        time=first[0],
                    )
                )
            for p in validate_histogram(h):
                ev.append(Evidence(f"histogram check: {p}"))
            ev += earlier_dump_evidence(w, key[0], histogram=name, what=what)
            if name == e2e:
                for labels, h1 in ((hh.labels, hh) for hh in w.histograms(name) if hh.labels.get("attempts")):
                    if labels.get("attempts") != "1" and h1.buckets and h1.buckets[-1][1] > 0:
                        ev.append(
                            Evidence(
                                f"pods scheduled after {labels['attempts']} attempts", value=h1.buckets[-1][1]
                            )
                        )
            yield scheduler_latency_tail.finding(
                f"{inst}: {what} p99 {q.value:.3g} s > {degraded.value:g} s{note}",
                evidence=ev,
                severity=sev,
                subject=inst,
                confidence=0.9 if n >= MIN_REQUESTS else 0.5,
            )


@rule(
    id="CP002",
    name="scheduler-pending-pods",
    layer="control-plane",
    title="Pods the scheduler cannot place (pending, unschedulable, errors)",
    requires=("scheduler_metrics",),
    thresholds=(PENDING_UNSCHEDULABLE, SCHED_ERRORS),
    alerts=CP002_ALERTS,
)
def scheduler_pending_pods(obs: Observations) -> Iterable[Finding]:
    """Pods wait in the scheduler's unschedulable/backoff queues, or attempts fail.

    **Symptom**: `scheduler_pending_pods{queue="unschedulable"}` above 0, a growing backoff queue, or
    `scheduler_schedule_attempts_total{result="unschedulable"|"error"}` growing; pods stay Pending
    with FailedScheduling events.
    **Why**: no node satisfies the pod's requests/affinity/taints/topology constraints (capacity,
    GPU or NUMA resources, zone spread), or the scheduler hit an internal error.
    **Fix**: read the FailedScheduling event of a pending pod for the plugin that rejected it; add
    capacity or relax constraints; for `error` results check the scheduler's log.
    **Verify**: `kubectl get events -A --field-selector reason=FailedScheduling` and `kubectl get pods -A --field-selector=status.phase=Pending -o wide`
    """
    w: MetricWindow = obs.get("scheduler_metrics")
    queues: dict[str, dict[str, float]] = {}
    for labels, v, _ in w.latest("scheduler_pending_pods"):
        inst = labels.get("instance") or ""
        queues.setdefault(inst, {})
        q = labels.get("queue", "")
        queues[inst][q] = queues[inst].get(q, 0.0) + v
    attempts: dict[str, dict[str, float]] = {}
    for labels, inc, _ in w.increase("scheduler_schedule_attempts_total"):
        inst = labels.get("instance") or ""
        r = labels.get("result", "")
        attempts.setdefault(inst, {})
        attempts[inst][r] = attempts[inst].get(r, 0.0) + inc
    for inst in sorted(set(queues) | set(attempts)):
        qs = queues.get(inst, {})
        at = attempts.get(inst, {})
        unsched = qs.get("unschedulable", 0.0)
        errors = at.get("error", 0.0)
        unsched_attempts = at.get("unschedulable", 0.0)
        if unsched <= PENDING_UNSCHEDULABLE.value and errors <= SCHED_ERRORS.value and unsched_attempts <= 0:
            continue
        total = sum(at.values())
        src = w.source_for({"instance": inst}) or None
        ev = [
            Evidence(f'scheduler_pending_pods{{queue="{q}"}}', value=v, source=src)
            for q, v in sorted(qs.items())
        ]
        span = w.span_for({"instance": inst})
        if at:
            ev.append(
                Evidence(
                    f"scheduler_schedule_attempts_total {span}: "
                    + ", ".join(f"{r}={v:g}" for r, v in sorted(at.items())),
                    value=total,
                )
            )
        parts = []
        if unsched > 0:
            parts.append(f"{unsched:g} pod{'s' if unsched != 1 else ''} unschedulable")
        if unsched_attempts > 0:
            parts.append(f"{unsched_attempts:g} of {total:g} attempts unschedulable {span}")
        if errors > 0:
            parts.append(f"{errors:g} attempts failed with an internal error")
        sev = Severity.CRITICAL if errors > 0 else Severity.WARNING
        who = _who(w, inst, "kube-scheduler")
        yield scheduler_pending_pods.finding(
            f"{who}: " + "; ".join(parts),
            evidence=ev,
            severity=sev,
            subject=who,
            confidence=0.85,
        )


def _slo_class(labels: dict[str, str]) -> str | None:
    verb = labels.get("verb", "").upper()
    if verb in SKIP_VERBS or labels.get("subresource", "") in STREAMING_SUBRESOURCES:
        return None
    if verb in READ_VERBS:
        scope = labels.get("scope", "")
        return scope if scope in ("resource", "namespace", "cluster") else "cluster"
    return "write"


@rule(
    id="CP003",
    name="apiserver-latency",
    layer="control-plane",
    title="kube-apiserver requests are slow (by verb and resource)",
    requires=("apiserver_metrics",),
    thresholds=(*APISERVER_SLO_BOUND.values(), APISERVER_BURN_PAGING),
    alerts=CP003_ALERTS,
)
def apiserver_latency(obs: Observations) -> Iterable[Finding]:
    """apiserver request latency p99 exceeds the SLO bucket for its verb/scope.

    **Symptom**: p99 of `apiserver_request_duration_seconds` (or the SLI histogram) above 1 s for
    resource reads and writes, 5 s for namespace lists, 30 s for cluster lists; kubectl,
    controllers, CNI plugins and kubelets time out.
    **Why**: the apiserver waits on etcd (slow disk, leader changes), on admission webhooks, or is
    overloaded (APF queueing); large LISTs without pagination are expensive.
    **Fix**: check etcd first (`etcd_request_duration_seconds`, WAL fsync, leader changes); then
    webhooks (`apiserver_admission_webhook_admission_duration_seconds`); paginate large lists and
    use informers; tune API Priority and Fairness.
    **Verify**: `kubectl get --raw /metrics | grep apiserver_request_duration_seconds_bucket` and `kubectl get --raw /readyz?verbose`
    """
    w: MetricWindow = obs.get("apiserver_metrics")
    name = w.first_present(*APISERVER_NAMES)
    if not name:
        return
    merged = w.merged_histogram(name, by=("instance", "verb", "resource", "scope", "subresource"))
    for (inst, verb, resource, scope, sub), h in sorted(merged.items()):
        cls = _slo_class({"verb": verb, "scope": scope, "subresource": sub})
        if cls is None:
            continue
        bound = APISERVER_SLO_BOUND[cls]
        n = h.buckets[-1][1] if h.buckets else 0
        if n < MIN_REQUESTS:
            continue
        q = quantile_of(0.99, h.buckets)
        if math.isnan(q.value) or q.value <= bound.value:
            continue
        slow = fraction_above(bound.value, h)
        sev = Severity.CRITICAL if slow > APISERVER_BURN_PAGING.value else Severity.WARNING
        what = f"{verb} {resource}{'/' + sub if sub else ''}" + (f" (scope {scope})" if scope else "")
        src = w.source_for({"instance": inst}, name) or None
        span = w.span_for({"instance": inst})
        inst = _who(w, inst, "kube-apiserver")
        ev = [
            Evidence(
                f"{what} p99 {span} ({n:g} requests)",
                value=round(q.value, 4),
                threshold=bound.value,
                unit="s",
                source=src,
            ),
            Evidence(
                f"share slower than {bound.value:g} s",
                value=round(slow, 4),
                threshold=APISERVER_BURN_PAGING.value,
            ),
            _version_evidence(w, name),
        ]
        first = _first_step_above(w, name, bound.value, verb=verb, resource=resource)
        if first:
            ev.append(
                Evidence(
                    f"first step with p99 above {bound.value:g} s",
                    value=round(first[1], 4),
                    unit="s",
                    time=first[0],
                )
            )
        yield apiserver_latency.finding(
            f"{inst}: {what} p99 {q.value:.3g} s > {bound.value:g} s",
            evidence=ev,
            severity=sev,
            subject=f"{inst} {verb} {resource}",
            confidence=0.9,
        )


# --- the pod a scheduler message is about ---------------------------------------------------------


def pending_pod(obs: Observations, message: object, hits: list, subject: str | None) -> str | None:
    """The pod a FailedScheduling reason is about when its line does not say: the one pod the inputs
    show Pending (a `kubectl get pods` or a `kubectl describe pod` pasted with the event)."""
    if subject is not None:
        return subject
    pending = {f"pod {p.key}" for p in obs.get("kube_pods") or [] if p.status == "Pending"}
    pending |= {
        o.ref
        for o in obs.get("kube_objects") or []
        if o.kind == "pod" and o.ref and o.fields.get("Status") == "Pending"
    }
    return pending.pop() if len(pending) == 1 else None


def _register_resolver() -> None:
    from clusterdoctor.rules.messages import register_subject_resolver

    register_subject_resolver("scheduler_events", pending_pod)


_register_resolver()
