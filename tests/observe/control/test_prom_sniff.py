"""The metrics sniffer accepts expositions only: sample lines in the exact shape the text formats define
(or well-formed # HELP/# TYPE), never a configuration table that merely starts with a name and a number.

The non-metrics excerpts are the first data lines of files found on a Debian machine (/etc/ethertypes,
/etc/protocols, /etc/services, /etc/networks, /etc/rpc), copied verbatim (tabs included)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.control.prom_text import sniff_prom_text
from clusterdoctor.observe.control.scrape import sniff_metrics
from tests.conftest import TEST_DATA

ETHERTYPES = (
    "# Ethernet frame types\n#\n# <name>\t<hexnumber> <alias1>...<alias35> # Comment\n#\n"
    "IPv4\t\t0800\tip ip4\t# IP (IPv4)\nX25\t\t0805\nARP\t\t0806\tether-arp # Address Resolution Protocol\n"
    "FR_ARP\t\t0808\t\t# Frame Relay ARP [RFC1701]\nBPQ\t\t08FF\t\t# G8BPQ AX.25 over Ethernet\n"
)
PROTOCOLS = (
    "# Internet (IP) protocols\n"
    "ip\t0\tIP\t\t# internet protocol, pseudo protocol number\n"
    "hopopt\t0\tHOPOPT\t\t# IPv6 Hop-by-Hop Option [RFC1883]\n"
    "icmp\t1\tICMP\t\t# internet control message protocol\n"
)
SERVICES = "tcpmux\t\t1/tcp\t\t\t\t# TCP port service multiplexer\necho\t\t7/tcp\necho\t\t7/udp\n"
NETWORKS = "default\t\t0.0.0.0\nloopback\t127.0.0.0\nlink-local\t169.254.0.0\n"
RPC = "portmapper\t100000\tportmap sunrpc rpcbind\nrstatd\t\t100001\trstat rstat_svc rup perfmeter\n"


@pytest.mark.parametrize(
    "text",
    [ETHERTYPES, PROTOCOLS, SERVICES, NETWORKS, RPC],
    ids=["ethertypes", "protocols", "services", "networks", "rpc"],
)
def test_system_tables_are_not_metrics(text):
    assert not sniff_prom_text(text.encode())
    assert not sniff_metrics(text.encode(), "x")


@pytest.mark.parametrize(
    "text",
    [
        "# HELP etcd_server_has_leader Whether or not a leader exists.\n# TYPE etcd_server_has_leader gauge\n",
        'etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 2325\n',  # a grep of one series
        "up 1\nscrape_duration_seconds 0.004 1700000000000\n",  # with a timestamp
        '# a comment\nhttp_requests_total{code="200"} 1027 # {trace_id="abc"} 1 1.0\n',  # OpenMetrics exemplar
        "node_load1 +Inf\nnode_load5 NaN\n",
    ],
)
def test_expositions_are_metrics(text):
    assert sniff_prom_text(text.encode())


@pytest.mark.parametrize(
    "text", ["# TYPE foo sometype\nfoo 1\nbar baz\n", "X25 0805\n", "# HELP\n", "foo 1 2 3\n"]
)
def test_near_misses_are_not(text):
    assert not sniff_prom_text(text.encode())


def test_saved_dumps_still_sniffed():
    for name in ("etcd_3.4.23_3member_after_leader_stop_metrics.prom", "node_exporter_1.5.0_metrics.prom",
                 "prometheus_2.42.0_federate_all.prom"):  # fmt: skip
        assert sniff_metrics((TEST_DATA / "ctrl" / name).read_bytes()[:65536], name)


_NAMES = st.from_regex(r"[a-z][a-z0-9]{0,8}_[a-z0-9_]{1,12}", fullmatch=True)
_VALUES = st.one_of(
    st.integers(-(10**12), 10**12).map(str), st.floats(allow_nan=False, allow_infinity=False).map(repr)
)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_NAMES, _VALUES, st.booleans()), min_size=1, max_size=6))
def test_generated_samples_are_metrics_and_trailing_words_are_not(rows):
    text = "".join(f'{n}{{job="x"}} {v}\n' if lab else f"{n} {v}\n" for n, v, lab in rows)
    assert sniff_prom_text(text.encode())
    assert not sniff_prom_text((text.splitlines()[0] + " and more words\n").encode())
