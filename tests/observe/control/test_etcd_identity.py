"""What names etcd members: `etcdctl member list -w json` (decimal IDs), etcdctl's stderr, and the
members' own logs (zap and capnslog) — real outputs captured here (tests/data/etcd_dead_member,
tests/data/etcd_stall), plus properties of the parsers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.etcd import load_etcdctl_observations, parse_member_list, sniff_etcdctl
from clusterdoctor.observe.control.logs import load_logs, parse_logs
from tests.conftest import TEST_DATA

D = TEST_DATA / "etcd_dead_member"


def test_member_list_decimal_ids_as_etcdctl_prints_them():
    ml = parse_member_list((D / "zap" / "member_list.json").read_bytes(), "member_list.json")
    assert format(ml.cluster_id, "x") == "fdac3c2db37118dc" and ml.raft_term == 2
    got = {m.name: (m.hex_id, m.peer_urls, m.client_urls) for m in ml.members}
    assert got == {
        "m0": ("1364b0b423444e07", ("http://127.0.0.1:42791",), ("http://127.0.0.1:42790",)),
        "m1": ("40a85d23ff26f1e4", ("http://127.0.0.1:42801",), ("http://127.0.0.1:42800",)),
        "m2": ("60af19f72c903e1e", ("http://127.0.0.1:42811",), ("http://127.0.0.1:42810",)),
    }
    # after the leader was killed the list is the same: membership does not change when one dies
    after = parse_member_list((D / "zap" / "member_list_after.json").read_text())
    assert {m.id for m in after.members} == {m.id for m in ml.members}


def test_member_list_is_detected_and_loaded():
    data = (D / "capnslog" / "member_list.json").read_bytes()
    assert sniff_etcdctl(data, "member_list.json")
    out = load_etcdctl_observations(str(D / "capnslog" / "member_list.json"))
    assert out["described_as"] == "etcdctl member list (3 members)"
    assert sorted(m.name for m in out["etcd_members"]) == ["m0", "m1", "m2"]


def test_etcdctl_stderr_names_the_failed_endpoint_and_keeps_client_lines():
    out = load_etcdctl_observations(str(D / "zap" / "status_after.stderr"))
    (err,) = out["etcd_status"].errors
    assert err.endpoint == "http://127.0.0.1:42810" and err.message == "context deadline exceeded"
    (ev,) = out["events"]
    assert ev.kind == "etcd.client_timeout" and dict(ev.attrs)["endpoint"] == "127.0.0.1:42810"


@pytest.mark.parametrize(
    "text",
    [b"", b"{}", b'{"members": 3}', b'{"members": [{"name": "x"}]}', b'{"members": [{"ID": "zz"}]}', b"[1]"],
)
def test_bad_member_lists_are_one_line_errors(text):
    with pytest.raises(InputError):
        parse_member_list(text, "x.json")


_IDS = st.integers(min_value=1, max_value=(1 << 64) - 1)


@given(st.lists(st.tuples(_IDS, st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True)), max_size=7))
def test_member_list_round_trip(members):
    doc = {
        "header": {
            "cluster_id": 12345678901234567890,
            "member_id": members[0][0] if members else 1,
            "raft_term": 4,
        },
        "members": [
            {
                "ID": i,
                "name": n,
                "peerURLs": [f"http://10.0.0.{k}:2380"],
                "clientURLs": [f"http://10.0.0.{k}:2379"],
            }
            for k, (i, n) in enumerate(members)
        ],
    }
    ml = parse_member_list(json.dumps(doc))
    assert [(m.id, m.name) for m in ml.members] == members
    hexed = json.dumps({**doc, "members": [{**m, "ID": format(m["ID"], "x")} for m in doc["members"]]})
    assert [m.id for m in parse_member_list(hexed).members] == [i for i, _ in members]  # hex strings


@given(st.binary(max_size=300))
def test_member_list_parser_never_crashes(data):
    try:
        parse_member_list(b'{"members":' + data)
    except InputError:
        pass


@pytest.mark.parametrize("form", ["zap", "capnslog"])
def test_logs_name_their_member_and_every_peer(form):
    ml = {m.id: m for m in parse_member_list((D / form / "member_list.json").read_text()).members}
    for i in range(3):
        out = load_logs(D / form / f"etcd-m{i}.log")
        (span,) = out["log_spans"]
        own = [m for m in out["etcd_members"] if m.name]
        assert [m.name for m in own] == [f"m{i}"]
        me = ml[own[0].id]
        assert span.member == me.hex_id and out["described_as"] == f"etcd log (member m{i} ({me.hex_id}))"
        # every member's ID and peer URL, as the log added them; the member's own client URL
        assert {m.id: m.peer_urls for m in out["etcd_members"]} == {k: v.peer_urls for k, v in ml.items()}
        if form == "zap" or own[0].client_urls:
            assert own[0].client_urls == me.client_urls
        # the events of the file are stamped with the member that wrote it
        etcd = [e for e in out["events"] if e.kind.startswith("etcd.") and e.kind != "etcd.client_timeout"]
        assert etcd and all(dict(e.attrs)["local_member"] == me.hex_id for e in etcd)


def test_peer_loss_lines_in_both_forms():
    zap = parse_logs((D / "zap" / "etcd-m1.log").read_bytes())
    lost = [e for e in zap.events if e.kind == "etcd.peer_lost"]
    assert lost and {dict(e.attrs)["peer"] for e in lost} == {"60af19f72c903e1e"}
    capn = parse_logs((D / "capnslog" / "etcd-m2.log").read_bytes())
    unreachable = [e for e in capn.events if e.kind == "etcd.peer_unreachable"]
    assert unreachable and {dict(e.attrs)["peer"] for e in unreachable} == {"ab4ad0d1ff2963d8"}
    assert "connection refused" in unreachable[0].message


_HEX = st.integers(min_value=1, max_value=(1 << 64) - 1).map(lambda n: format(n, "x"))


@given(me=_HEX, peer=_HEX, name=st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True))
def test_identity_lines_property(me, peer, name):
    """The real line templates of etcd 3.4.23 with other IDs and names read back as written."""
    text = "\n".join(
        [
            f"2026-12-01 15:37:13.199262 I | embed: name = {name}",
            f"2026-12-01 15:37:15.207683 I | etcdserver: starting member {me} in cluster 4f5108f77e843f30",
            f"2026-12-01 15:37:15.231125 I | etcdserver/membership: added member {peer} [http://10.1.2.3:2380] "
            "to cluster 4f5108f77e843f30",
            f"2026-12-01 15:37:15.412453 I | etcdserver: published {{Name:{name} ClientURLs:[http://10.1.2.4:2379]}} "
            "to cluster 4f5108f77e843f30",
            f"2026-12-01 15:37:25.725515 W | rafthttp: lost the TCP streaming connection with peer {peer} "
            "(stream MsgApp v2 reader)",
        ]
    )
    res = parse_logs(text)
    assert res.local_member == me
    mine = [m for m in res.members if m.hex_id == me.lstrip("0")]
    assert mine and mine[0].name == name and mine[0].client_urls == ("http://10.1.2.4:2379",)
    if peer != me:
        (lost,) = [e for e in res.events if e.kind == "etcd.peer_lost"]
        assert dict(lost.attrs)["peer"] == peer and dict(lost.attrs)["local_member"] == me
