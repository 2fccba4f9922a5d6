"""etcdctl's text output (tables, -w simple, v2 member list / cluster-health, alarm list) on real output:
the examples of etcd-io/etcd etcdctl/README.md (v3.5.0) and lines pasted in public issue threads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.etcd import load_etcdctl_observations, sniff_etcdctl
from clusterdoctor.observe.control.etcdctl_text import parse_etcdctl_text, parse_size, sniff_etcdctl_text

# etcdctl/README.md (etcd v3.5.0): `./etcdctl -w table endpoint --cluster status` (a 3.2 build: no IS LEARNER)
STATUS_TABLE_32 = """\
+------------------------+------------------+----------------+---------+-----------+-----------+------------+
|        ENDPOINT        |        ID        |    VERSION     | DB SIZE | IS LEADER | RAFT TERM | RAFT INDEX |
+------------------------+------------------+----------------+---------+-----------+-----------+------------+
| http://127.0.0.1:2379  | 8211f1d0f64f3269 | 3.2.0-rc.1+git |   25 kB |     false |         2 |          8 |
| http://127.0.0.1:22379 | 91bc3c398fb3c146 | 3.2.0-rc.1+git |   25 kB |     false |         2 |          8 |
| http://127.0.0.1:32379 | fd422379fda50e48 | 3.2.0-rc.1+git |   25 kB |      true |         2 |          8 |
+------------------------+------------------+----------------+---------+-----------+-----------+------------+
"""
# etcdctl/README.md: `./etcdctl -w table member list`
MEMBER_TABLE = """\
+------------------+---------+--------+------------------------+------------------------+
|        ID        | STATUS  |  NAME  |       PEER ADDRS       |      CLIENT ADDRS      |
+------------------+---------+--------+------------------------+------------------------+
| 8211f1d0f64f3269 | started | infra1 | http://127.0.0.1:12380 | http://127.0.0.1:2379  |
| 91bc3c398fb3c146 | started | infra2 | http://127.0.0.1:22380 | http://127.0.0.1:22379 |
| fd422379fda50e48 | started | infra3 | http://127.0.0.1:32380 | http://127.0.0.1:32379 |
+------------------+---------+--------+------------------------+------------------------+
"""
# etcdctl/README.md: `./etcdctl endpoint --cluster health`, `endpoint status`, `member list` (simple)
SIMPLE = """\
http://127.0.0.1:2379 is healthy: successfully committed proposal: took = 1.060091ms
http://127.0.0.1:22379 is healthy: successfully committed proposal: took = 903.138µs
127.0.0.1:2379, 8211f1d0f64f3269, 3.0.0, 25 kB, false, 2, 63
8211f1d0f64f3269, started, infra1, http://127.0.0.1:12380, http://127.0.0.1:2379
"""
# github.com/etcd-io/etcd/issues/9639 (etcdctl cluster-health, v2 API)
CLUSTER_HEALTH = """\
member 665131028a69b34a is healthy: got healthy result from http://10.64.34.216:2379
member a45f912cb9e0d57a is healthy: got healthy result from http://10.64.34.129:2379
member f5ba6970564585ba is healthy: got healthy result from http://10.64.34.217:2379
"""


def test_status_table_of_etcd_32_reads_every_row_and_the_leader():
    res = parse_etcdctl_text(STATUS_TABLE_32, "status.txt")
    rows = res.status.statuses
    assert [r.endpoint for r in rows] == [
        "http://127.0.0.1:2379",
        "http://127.0.0.1:22379",
        "http://127.0.0.1:32379",
    ]
    assert [format(r.member_id, "x") for r in rows] == [
        "8211f1d0f64f3269",
        "91bc3c398fb3c146",
        "fd422379fda50e48",
    ]
    assert [r.is_leader for r in rows] == [False, False, True]
    assert all(r.db_size == 25_000 and r.raft_term == 2 and r.raft_applied_index == 8 for r in rows)
    assert res.skipped == [] and res.describe() == "etcdctl endpoint status"


def test_member_table_and_simple_forms():
    members = parse_etcdctl_text(MEMBER_TABLE).members
    assert [(m.name, m.client_urls) for m in members][0] == ("infra1", ("http://127.0.0.1:2379",))
    res = parse_etcdctl_text(SIMPLE)
    assert [h.healthy for h in res.status.health] == [True, True]
    assert res.status.health[1].took_seconds == pytest.approx(903.138e-6)
    (row,) = res.status.statuses
    assert row.raft_index == 63 and row.version == "3.0.0" and not row.is_leader
    assert [m.name for m in res.members] == ["infra1"]


def test_v2_cluster_health_is_read_as_health_and_members():
    res = parse_etcdctl_text(CLUSTER_HEALTH)
    assert all(h.healthy for h in res.status.health) and len(res.status.health) == 3
    assert {format(m.id, "x") for m in res.members} == {
        "665131028a69b34a",
        "a45f912cb9e0d57a",
        "f5ba6970564585ba",
    }


def test_unhealthy_and_unreachable_members():
    text = (
        # etcdctl ep_command.go / ctlv2 cluster_health.go templates
        "https://10.0.0.3:2379 is unhealthy: failed to commit proposal: context deadline exceeded\n"
        "member 5eea96fe49f3c82d is unreachable: [https://10.0.0.4:2379] are all unreachable\n"
        "failed to check the health of member 8e9e05c52164694d on http://10.0.0.5:2379: Get "
        "http://10.0.0.5:2379/health: dial tcp 10.0.0.5:2379: connect: connection refused\n"
        "cluster is degraded\n"
        "Error: unhealthy cluster\n"
    )
    res = parse_etcdctl_text(text)
    bad = {h.endpoint: h.error for h in res.status.health if not h.healthy}
    assert bad["https://10.0.0.3:2379"] == "context deadline exceeded"
    assert "are all unreachable" in bad["member 5eea96fe49f3c82d"]
    assert "connection refused" in bad["http://10.0.0.5:2379"]
    assert res.cluster_verdict == "degraded" and res.errors == ["unhealthy cluster"]


def test_alarm_list_both_spellings():
    res = parse_etcdctl_text("memberID:10276657743932975437 alarm:NOSPACE \nalarm:NOSPACE\n")
    assert [(a.member_id, a.alarm) for a in res.alarms] == [(10276657743932975437, "NOSPACE"), (0, "NOSPACE")]


def test_etcd_36_table_with_quota_and_errors():
    text = (  # etcdctl 3.6 printer.go columns (header as tablewriter upper-cases it)
        "| ENDPOINT | ID | VERSION | STORAGE VERSION | DB SIZE | IN USE | PERCENTAGE NOT IN USE | QUOTA | IS LEADER |"
        " IS LEARNER | RAFT TERM | RAFT INDEX | RAFT APPLIED INDEX | ERRORS | DOWNGRADE TARGET VERSION |"
        " DOWNGRADE ENABLED |\n"
        "| 127.0.0.1:2379 | 8e9e05c52164694d | 3.6.0 | 3.6.0 | 2.1 GB | 2.1 GB | 0% | 2.1 GB | true | false |"
        " 2 | 4 | 4 | memberID:10276657743932975437 alarm:NOSPACE |  | false |\n"
    )
    (row,) = parse_etcdctl_text(text).status.statuses
    assert row.quota == 2_100_000_000 and row.db_size_in_use == 2_100_000_000
    assert row.errors == ("memberID:10276657743932975437 alarm:NOSPACE",)


def test_loader_reads_a_paste_with_other_lines_and_warns():
    p = "etcd.txt"
    text = "some prose the user typed\n" + SIMPLE
    res = parse_etcdctl_text(text, p)
    assert res.skipped == [1] and res.read == 4


def test_loader_hook(tmp_path):
    f = tmp_path / "health.txt"
    f.write_text(CLUSTER_HEALTH)
    assert sniff_etcdctl(f.read_bytes())
    out = load_etcdctl_observations(str(f))
    assert out["described_as"] == "etcdctl cluster-health"
    assert len(out["etcd_status"].health) == 3 and len(out["etcd_members"]) == 3


@pytest.mark.parametrize(
    "text", ["", "hello\nworld\n", "| a | b |\n| 1 | 2 |\n", "8211f1d0f64f3269, started\n", "cluster is\n"]
)
def test_not_etcdctl_is_one_input_error(text):
    with pytest.raises(InputError):
        parse_etcdctl_text(text, "x.txt")


@pytest.mark.parametrize(
    ("text", "n"),
    [("25 kB", 25_000), ("2.1 GB", 2_100_000_000), ("16 MiB", 16 << 20), ("4096", 4096), ("x", None)],
)
def test_sizes(text, n):
    assert parse_size(text) == n


def test_sniff_refuses_other_text():
    assert sniff_etcdctl_text(STATUS_TABLE_32.encode()) and sniff_etcdctl_text(CLUSTER_HEALTH.encode())
    for other in (b"NAME READY STATUS\n", b"# HELP x y\nx 1\n", b"Jan 1 host kernel: hi\n", b"\x00\x01"):
        assert not sniff_etcdctl_text(other)


_ID = st.integers(min_value=1, max_value=(1 << 64) - 1)


@settings(max_examples=60, deadline=None)
@given(
    mid=_ID,
    term=st.integers(0, 10**9),
    index=st.integers(0, 10**12),
    leader=st.booleans(),
    kb=st.integers(1, 10**6),
)
def test_simple_status_rows_round_trip(mid, term, index, leader, kb):
    line = f"https://10.0.0.1:2379, {mid:x}, 3.5.9, {kb} kB, {str(leader).lower()}, false, {term}, {index}, {index}, \n"
    (row,) = parse_etcdctl_text(line).status.statuses
    assert row.member_id == mid and row.is_leader == leader and row.raft_term == term
    assert row.raft_applied_index == index and row.db_size == kb * 1000


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_read_or_refused_in_one_line(text):
    try:
        res = parse_etcdctl_text(text)
    except InputError as e:
        assert e.reason
        return
    assert res.read >= 1 and res.read + len(res.skipped) <= res.lines


def test_long_hostile_lines_are_linear():
    import time

    for line in (
        "a" * 200_000 + " is unhealthy: x",
        "| " * 100_000,
        "member " + "f" * 100_000,
        ", " * 100_000,
    ):
        t0 = time.perf_counter()
        try:
            parse_etcdctl_text(line + "\n")
        except InputError:
            pass
        assert sniff_etcdctl_text(line.encode()) in (True, False)
        assert time.perf_counter() - t0 < 30, line[:30]  # a cap on a hostile line, generous under load


def test_v2_cluster_health_without_urls_and_failed_check_names_the_member():
    # etcd 2.0's cluster-health printed no URL (github.com/etcd-io/etcd PR adding cluster-health,
    # tests/data/incidents/ctrl-003)
    res = parse_etcdctl_text(
        "cluster is healthy\nmember 6e3bd23ae5f1eae0 is healthy\nmember 924e2e83e93f2560 is unhealthy\n"
        "member a8266ecf031671f3 is healthy\n"
    )
    assert [h.endpoint for h in res.status.health if not h.healthy] == ["member 924e2e83e93f2560"]
    assert len(res.members) == 3
    # "failed to check the health of member X on URL" ties the URL to the member (ctrl-023)
    res = parse_etcdctl_text(
        "failed to check the health of member da6937d2522edbd8 on https://$PUBLIC_IP:2379: Get "
        "https://$PUBLIC_IP:2379/health: x509: cannot validate certificate for $PUBLIC_IP because it "
        "doesn't contain any IP SANs\n"
    )
    (m,) = res.members
    assert format(m.id, "x") == "da6937d2522edbd8" and m.client_urls == ("https://$PUBLIC_IP:2379",)


def test_etcd_20_member_list_and_wide_padded_tables_are_read():
    # etcd 2.0.9 printed no isLeader (tests/data/incidents/ok-ctrl-002)
    res = parse_etcdctl_text(
        "5ae3067007f7fb85: name=etcd2 peerURLs=http://192.168.12.52:2380 clientURLs=http://192.168.12.52:2379\n"
    )
    (m,) = res.members
    assert m.name == "etcd2" and m.client_urls == ("http://192.168.12.52:2379",)
    # a 3.4 table whose cells are padded to an https endpoint's width (ok-ctrl-015), cut mid-row
    table = (
        "+-------------------------+------------------+---------+---------+-----------+------------+-----------+"
        "------------+--------------------+--------+\n"
        "|        ENDPOINT         |        ID        | VERSION | DB SIZE | IS LEADER | IS LEARNER | RAFT TERM |"
        " RAFT INDEX | RAFT APPLIED INDEX | ERRORS |\n"
        "| https://172.16.2.3:2379 | f15c8d27ccf66395 |   3.4.3 |  2.2 MB |     false |      false |         6 |"
        "      41219 |              41219 |        |\n"
        "| https://172.16.2.6:2379 | be8c6e0b5f5f6157 |   3.4.3 |  2.2 MB |      true |      false |         6 |"
        "      412\n"
    )
    assert sniff_etcdctl_text(table.encode())
    res = parse_etcdctl_text(table)
    assert [s.endpoint for s in res.status.statuses][:1] == ["https://172.16.2.3:2379"]


# github.com/etcd-io/etcd/issues/20115 (corpus case ctrl-301): the ERRORS cell wrapped by the table writer
WRAPPED_ERRORS = """\
+----------------+------------------+---------+---------+-----------+------------+-----------+------------+--------------------+--------------------------------+
|    ENDPOINT    |        ID        | VERSION | DB SIZE | IS LEADER | IS LEARNER | RAFT TERM | RAFT INDEX | RAFT APPLIED INDEX |             ERRORS             |
+----------------+------------------+---------+---------+-----------+------------+-----------+------------+--------------------+--------------------------------+
| 127.0.0.1:2379 | 8e9e05c52164694d |  3.5.18 |  2.1 GB |      true |      false |         9 |    3623467 |            3623467 |  memberID:10276657743932975437 |
|                |                  |         |         |           |            |           |            |                    |                 alarm:NOSPACE  |
+----------------+------------------+---------+---------+-----------+------------+-----------+------------+--------------------+--------------------------------+
"""


def test_a_wrapped_cell_continues_its_row():
    res = parse_etcdctl_text(WRAPPED_ERRORS, "x.txt")
    (row,) = res.status.statuses
    assert row.errors == ("memberID:10276657743932975437 alarm:NOSPACE",)
    assert not res.skipped
    # the continuation line is about that row's member (a known message in it names the member)
    assert [mid for _, mid in res.row_lines] == [0x8E9E05C52164694D, 0x8E9E05C52164694D]
    assert "alarm:NOSPACE" in res.row_lines[1][0]
