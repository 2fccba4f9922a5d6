"""Saved /metrics dumps: each is its own target (instance = its path) unless it says what it is, and
dumps of one process taken at two times are one target, judged on the later one."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor import diagnosis
from clusterdoctor.observe.control.scrape import load_metrics_observations
from tests.conftest import TEST_DATA, shared_fixture

ZAP = TEST_DATA / "etcd_dead_member" / "zap"


def _window(*paths: Path):
    obs = diagnosis.new_observations(lambda: 0.0)
    diagnosis.load_sources(obs, list(paths))
    return obs.get("metrics")


def test_a_dump_is_labelled_with_its_path_and_its_identity():
    out = load_metrics_observations(ZAP / "metrics_before_m0.prom")
    w = out["metrics"]
    p = str(ZAP / "metrics_before_m0.prom")
    assert w.snapshot_instances == {p} and w.instance_identity == {p: "etcd:1364b0b423444e07"}
    assert {s.labels["instance"] for lst in w.series.values() for s in lst} == {p}
    node = load_metrics_observations(TEST_DATA / "ctrl" / "node_exporter_1.5.0_metrics.prom")["metrics"]
    assert set(node.instance_identity.values()) == {"node:vm"}
    fed = load_metrics_observations(TEST_DATA / "ctrl" / "prometheus_2.42.0_federate_all.prom")["metrics"]
    assert not fed.snapshot_instances and not fed.instance_identity  # timed, with its own instance labels


def test_before_and_after_dumps_of_one_member_are_one_target_judged_on_the_later():
    before, after = ZAP / "metrics_before_m1.prom", ZAP / "metrics_after_m1.prom"
    w = _window(after, before)  # order given does not matter: the counters order them
    assert w.canonical(str(before)) == w.canonical(str(after)) == "etcd:40a85d23ff26f1e4"
    assert w.earlier(str(after)) == [str(before)] and w.superseded() == {str(before)}
    ((labels, v, _),) = w.latest("etcd_server_leader_changes_seen_total")
    assert labels["instance"] == str(after) and v == 2
    assert len(w.select("etcd_server_leader_changes_seen_total", include_superseded=True)) == 2


def test_two_members_are_two_targets():
    w = _window(ZAP / "metrics_after_m0.prom", ZAP / "metrics_after_m1.prom")
    assert w.canonical(str(ZAP / "metrics_after_m0.prom")) != w.canonical(str(ZAP / "metrics_after_m1.prom"))
    assert not w.superseded()


def test_unnamed_dumps_of_one_kubelet_are_grouped_by_their_counters():
    before = shared_fixture("ctrl/kubelet_pod_start_sli_aks_before.prom")
    after = shared_fixture("ctrl/kubelet_pod_start_sli_aks_after_110pods.prom")
    sched = shared_fixture("ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom")
    w = _window(before, after, sched)
    assert w.canonical(str(before)) == str(after) and w.earlier(str(after)) == [str(before)]
    assert w.canonical(str(sched)) == str(sched)  # another component: never grouped


def _bump(text: str, factor: int) -> str:
    """The same exposition with every counter/bucket/count value multiplied (a later read)."""

    def repl(m: re.Match) -> str:
        return f"{m.group(1)} {float(m.group(2)) * factor!r}"

    return re.sub(r"^(\S*(?:_total|_bucket|_count)(?:\{[^}]*\})?) (\d+(?:\.\d+)?)$", repl, text, flags=re.M)


@settings(max_examples=15, deadline=None)
@given(factor=st.integers(min_value=1, max_value=50), drop=st.booleans())
def test_grouping_property(tmp_path_factory, factor, drop):
    """A later read of one process (counters never lower) is grouped and judged alone; lower a single
    counter (a restart) and the two are no longer one process read twice."""
    base = shared_fixture("ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom").read_text()
    d = tmp_path_factory.mktemp("dumps")
    a, b = d / "a.prom", d / "b.prom"
    a.write_text(base)
    later = _bump(base, factor)
    if drop:  # one counter goes down: not the same process
        later = re.sub(
            r"^(scheduler_schedule_attempts_total\{[^}]*\}) \S+$", r"\1 0", later, count=1, flags=re.M
        )
    b.write_text(later)
    w = _window(b, a)
    same = w.canonical(str(a)) == w.canonical(str(b))
    if drop and factor == 1:  # only lower, nowhere higher: b is simply the earlier read
        assert same and w.earlier(str(a)) == [str(b)]
    elif drop:  # lower here, higher elsewhere: not one process read twice
        assert not same and not w.superseded()
    elif factor == 1:  # the same content twice: one target; either may stand for it
        assert same and len(w.superseded()) == 1
    else:
        assert same and w.earlier(str(b)) == [str(a)] and w.superseded() == {str(a)}
