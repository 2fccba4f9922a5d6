"""perfquery, ibqueryerrors and iblinkinfo, printed with infiniband-diags' own formats and a real
ibqueryerrors line (https://github.com/openucx/ucx/issues/9590)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.fabric import parse_ib_counters, parse_iblinkinfo, sniff_fabric

PERFQUERY = """\
# Port counters: Lid 17 port 1 (CapMask: 0x5A00)
PortSelect:......................1
CounterSelect:...................0x0000
SymbolErrorCounter:..............65535
LinkErrorRecoveryCounter:........3
LinkDownedCounter:...............12
PortRcvErrors:...................0
PortXmitDiscards:................0
PortXmitData:....................4059904
PortRcvPkts:.....................56384
PortXmitWait:....................0
"""

IBQUERYERRORS = """\
Errors for 0x0002c903000a5f4e "node1 HCA-1"
   GUID 0x1070fd0300370ea2 port ALL: [LinkDownedCounter == 25 (25.000)] [PortRcvErrors == 26 (26.000)] [PortXmitDiscards == 2846 (2.779K)] [PortXmitWait == 14681376621 (13.673G)]
"""

IBLINKINFO = """\
Switch: 0x248a0703003f1856 Quantum Mellanox Technologies:
           1    1[  ] ==( 4X      53.125 Gbps Active/  LinkUp)==>      17    1[  ] "node1 HCA-1" ( )
           1    2[  ] ==( 1X      53.125 Gbps Active/  LinkUp)==>      18    1[  ] "node2 HCA-1" ( Could be 4X)
           1    3[  ] ==(                Down/ Polling)==>             [  ] "" ( )
"""


def test_perfquery_counters_under_sysfs_names():
    (p,) = parse_ib_counters(PERFQUERY)
    assert (p.device, p.port) == ("lid 17", 1)
    assert p.counters["link_downed"] == 12 and p.counters["port_xmit_data"] == 4059904
    assert p.saturated == ["symbol_error"]  # 16-bit counter at 65535: stuck, not a value


def test_ibqueryerrors_brackets():
    (p,) = parse_ib_counters(IBQUERYERRORS)
    assert p.device == "node1 HCA-1"
    assert p.counters == {
        "link_downed": 25,
        "port_rcv_errors": 26,
        "port_xmit_discards": 2846,
        "port_xmit_wait": 14681376621,
    }


def test_iblinkinfo_links_and_the_tools_own_marks():
    a, b, c = parse_iblinkinfo(IBLINKINFO)
    assert (a.node, a.width, a.state, a.remote, a.could_be) == (
        "Quantum Mellanox Technologies",
        "4X",
        "Active",
        "node1 HCA-1",
        None,
    )
    assert (b.width, b.could_be, b.remote_lid) == ("1X", "Could be 4X", 18)
    assert (c.state, c.phys_state, c.remote) == ("Down", "Polling", None)


def test_sniff():
    for t in (PERFQUERY, IBQUERYERRORS, IBLINKINFO):
        assert sniff_fabric(t.encode())
    assert not sniff_fabric(b"# HELP x\nx 1\n")
    with pytest.raises(InputError):
        parse_ib_counters("PortSelect:......................1\n")  # no header: whose counters?


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_read_or_refused(text):
    for parse in (parse_ib_counters, parse_iblinkinfo):
        try:
            parse(text, "t")
        except InputError as e:
            assert e.one_line().startswith("t")
