"""ETCD009: a dead etcd member is named as the cause — on the real captures of a 3-member etcd
3.4.23 whose leader was killed under load (tests/data/etcd_dead_member, see its README)."""

from __future__ import annotations

import shutil

import pytest

from clusterdoctor import diagnosis
from clusterdoctor.analyze.etcd_members import member_directory, members_down
from clusterdoctor.model import Severity
from clusterdoctor.observe.control.logs import parse_time
from clusterdoctor.rules.etcd import etcd_member_down
from tests.conftest import TEST_DATA

D = TEST_DATA / "etcd_dead_member"
NOW = 1796140000.0
# what_happened.txt: the leader that was killed, and its name, ID and URLs (member_list.json)
KILLED = {
    "zap": (
        "m2",
        "60af19f72c903e1e",
        "http://127.0.0.1:42811",
        "http://127.0.0.1:42810",
        "m0 (1364b0b423444e07)",
    ),
    "capnslog": (
        "m0",
        "ab4ad0d1ff2963d8",
        "http://127.0.0.1:43791",
        "http://127.0.0.1:43790",
        "m2 (301c2069efdf313f)",
    ),
}


def _kill_time(form: str) -> float:
    text = (D / form / "what_happened.txt").read_text()
    t = parse_time(text.split("killed (SIGKILL) ")[1].split()[0][:26] + "Z")
    assert t is not None
    return t


def _diagnose(*paths):
    obs = diagnosis.new_observations(lambda: NOW)
    refs = diagnosis.load_sources(obs, list(paths))
    return obs, diagnosis.run(obs, refs)


@pytest.mark.parametrize("form", ["zap", "capnslog"])
def test_the_killed_leader_is_named_first_with_the_time_it_stopped(form):
    name, hid, peer, client, new_leader = KILLED[form]
    obs, d = _diagnose(D / form)
    first = d.findings[0]
    assert first.rule == "ETCD009" and first.severity == Severity.CRITICAL
    assert first.subject == f"{name} ({hid})"
    for part in (name, hid, peer, client):  # name, hex ID, peer and client URL
        assert part in first.summary, part
    assert "It was the leader" in first.summary and new_leader in first.summary
    (down,) = members_down(obs)
    # the peers noticed within 50 ms of the SIGKILL (the script's clock, same machine)
    assert 0 <= down.stopped_at - _kill_time(form) < 0.05
    assert down.was_leader and down.term == "3"
    # ranked above the leader change it caused and above the symptoms
    ranks = {f.rule: i for i, f in enumerate(d.findings)}
    for later in ("ETCD004", "ETCDLOG001", "ETCD007", "ETCD008", "CHAIN001"):
        assert ranks[later] > ranks["ETCD009"], later
    assert any(e.description.startswith("symptom: client requests failed") for e in first.evidence)
    assert any(e.description.startswith("symptom: proposals failed") for e in first.evidence)
    # the leader-loss finding points at the cause
    (lost,) = [f for f in d.findings if f.rule == "ETCDLOG001"]
    assert lost.subject == first.subject and "see ETCD009" in lost.summary
    (chain,) = [f for f in d.findings if f.rule == "CHAIN001"]
    assert chain.subject == f"etcd-member-down: {name} ({hid})"


def test_from_the_survivors_logs_alone(tmp_path):
    """No Prometheus, no etcdctl, not the dead member's own log: its peers' logs still name it."""
    name, hid, _, _, _ = KILLED["zap"]
    survivors = [D / "zap" / "etcd-m0.log", D / "zap" / "etcd-m1.log"]
    obs, d = _diagnose(*survivors)
    (f,) = [x for x in d.findings if x.rule == "ETCD009"]
    assert f.subject == f"m2 ({hid})" or f.subject == hid  # its name is in its own log and the member list
    assert "its peers' logs" in f.summary and "It was the leader" in f.summary
    # with the member list, its name and client URL come back
    obs, d = _diagnose(*survivors, D / "zap" / "member_list.json")
    (f,) = [x for x in d.findings if x.rule == "ETCD009"]
    assert f.subject == f"{name} ({hid})" and "http://127.0.0.1:42810" in f.summary


def test_from_prometheus_up_alone():
    """`up == 0` for its target until the end, named through the member list's client URLs."""
    obs, _ = _diagnose(D / "zap" / "prometheus_query_range_up.json", D / "zap" / "member_list.json")
    (down,) = members_down(obs)
    assert down.member.name == "m2" and down.bases == ["up"]
    # the first 0 point is at 15:36:50, the last 1 at 15:36:49: it stopped in (49-1 s, 50]
    assert down.stopped_at == pytest.approx(parse_time("2026-12-01T15:36:50Z"))
    assert down.last_alive == pytest.approx(parse_time("2026-12-01T15:36:48Z"))


def test_one_untimed_source_alone_is_not_enough():
    """A health check alone is ETCD008's finding; ETCD009 needs a timed sign or two kinds."""
    obs, d = _diagnose(D / "zap" / "health_after.json", D / "zap" / "member_list.json")
    assert members_down(obs) == []
    assert any(f.rule == "ETCD008" and f.subject == "m2 (60af19f72c903e1e)" for f in d.findings)


@pytest.mark.parametrize("form", ["zap", "capnslog"])
def test_a_stalled_leader_is_not_dead(form):
    """The stall capture: peers' probers lose the SIGSTOPped leader, but it logs again after."""
    obs, d = _diagnose(TEST_DATA / "etcd_stall" / form)
    assert members_down(obs) == []
    assert not [f for f in d.findings if f.rule == "ETCD009"]
    assert d.findings[0].rule == "CHAIN001" and d.findings[0].subject.startswith("etcd-stall: ")


def test_a_member_that_came_back_is_not_down(tmp_path):
    """Transformation of the real zap capture: a peer re-establishes its stream to m2 after the loss
    (the line a real restart produces, re-stamped after the kill)."""
    src = (D / "zap" / "etcd-m0.log").read_text().splitlines()
    again = next(
        ln
        for ln in src
        if '"msg":"established TCP streaming connection with remote peer"' in ln and "60af19f72c903e1e" in ln
    )
    later = again.replace(
        again.split('"ts":"')[1].split('"')[0], "2026-12-01T15:37:07.000Z"
    )  # after its last loss line
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "etcd-m0.log").write_text("\n".join(src + [later]) + "\n")
    shutil.copy(D / "zap" / "etcd-m1.log", logs / "etcd-m1.log")
    obs, _ = _diagnose(logs)
    assert members_down(obs) == []


def test_rule_is_skipped_with_the_inputs_it_can_use():
    from clusterdoctor.rules.registry import Observations, run_rules

    _, skipped, ran = run_rules(Observations(), [etcd_member_down])
    assert ran == [] and "any one of these would do" in skipped[0].reason and "etcdctl" in skipped[0].reason


def test_member_directory_joins_every_source():
    obs, _ = _diagnose(D / "zap")
    d = member_directory(obs)
    m = d.resolve("60af19f72c903e1e")
    assert m is not None and m.name == "m2"
    for token in (
        "m2",
        "http://127.0.0.1:42810",
        "127.0.0.1:42810",
        "http://127.0.0.1:42811",
        6966815697960713758,
    ):
        assert d.resolve(token) is m, token
    assert d.resolve(str(D / "zap" / "metrics_before_m2.prom")) is m  # the dump's etcd_server_id
    assert d.describe("127.0.0.1:42810") == (
        "m2 (ID 60af19f72c903e1e, peer http://127.0.0.1:42811, client http://127.0.0.1:42810)"
    )
    assert [x.label() for x in d.known()] == [
        "m0 (1364b0b423444e07)",
        "m1 (40a85d23ff26f1e4)",
        "m2 (60af19f72c903e1e)",
    ]


def test_a_removed_member_is_the_cause_not_the_peer_it_cannot_reach(tmp_path):
    """github.com/etcd-io/etcd/issues/9613 (corpus case ctrl-305): the log's own member was removed; its
    peer refusing it ("became inactive") is not that peer being down."""
    log = tmp_path / "etcd.log"
    log.write_text(
        "Apr 23 03:18:36.522337 mn-1 etcd[1753]: the member has been permanently removed from the cluster\n"
        "Apr 23 03:18:36.522389 mn-1 etcd[1753]: the data-dir used by this member must be removed.\n"
        "Apr 23 03:18:36.528556 mn-1 etcd[1753]: peer 97ce3ec97538cc91 became active\n"
        "Apr 23 03:18:36.623135 mn-1 etcd[1753]: failed to dial 97ce3ec97538cc91 on stream MsgApp v2 "
        "(the member has been permanently removed from the cluster)\n"
        "Apr 23 03:18:36.623161 mn-1 etcd[1753]: peer 97ce3ec97538cc91 became inactive\n"
    )
    _, d = _diagnose(log)
    assert d.findings[0].rule == "ETCD120" and d.findings[0].subject == "mn-1"
    assert not [f for f in d.findings if f.rule == "ETCD009"]
