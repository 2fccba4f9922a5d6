"""Interface listings (observe/comm/ifaces.py) and COMM019 (rules/comm_ifaces.py). The listings here are
written in each program's format for the test (not pasted by anyone); the NCCL log is dev case nccl-005's."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor import diagnosis
from clusterdoctor.errors import InputError
from clusterdoctor.model import Severity
from clusterdoctor.observe.comm.ifaces import parse_ifaces, sniff_ifaces
from clusterdoctor.rules.comm_ifaces import matches

INCIDENTS = Path(__file__).resolve().parents[2] / "data" / "incidents"
NOW = 1_790_000_000.0

IP_ADDR = """1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
    inet 127.0.0.1/8 scope host lo
       valid_lft forever preferred_lft forever
2: eth0@if23: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default
    link/ether 02:42:ac:11:00:02 brd ff:ff:ff:ff:ff:ff link-netnsid 0
    inet 172.17.0.2/16 brd 172.17.255.255 scope global eth0
       valid_lft forever preferred_lft forever
3: ib0: <BROADCAST,MULTICAST> mtu 2044 qdisc mq state DOWN group default qlen 256
    link/infiniband 80:00:00:29:fe:80:00:00:00:00:00:00:00:00:00:00 brd 00:ff:ff:ff:ff:12
"""
IFCONFIG = """eth0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1500
        inet 10.0.0.5  netmask 255.255.255.0  broadcast 10.0.0.255
        ether 00:16:3e:00:00:01  txqueuelen 1000  (Ethernet)

lo: flags=73<UP,LOOPBACK,RUNNING>  mtu 65536
        inet 127.0.0.1  netmask 255.0.0.0
"""
IFCONFIG_OLD = """eth0      Link encap:Ethernet  HWaddr 00:16:3e:00:00:01
          inet addr:10.0.0.5  Bcast:10.0.0.255  Mask:255.255.255.0
          UP BROADCAST RUNNING MULTICAST  MTU:1500  Metric:1
"""
IP_BR = "lo               UNKNOWN        127.0.0.1/8 ::1/128\nens5             UP             10.0.0.5/24 fe80::1/64\n"


@pytest.mark.parametrize(
    ("text", "program", "names", "routable"),
    [
        (IP_ADDR, "ip addr", ["lo", "eth0", "ib0"], ["eth0"]),
        (IFCONFIG, "ifconfig", ["eth0", "lo"], ["eth0"]),
        (IFCONFIG_OLD, "ifconfig", ["eth0"], ["eth0"]),
        (IP_BR, "ip -br addr", ["lo", "ens5"], ["ens5"]),
    ],
)
def test_formats(text: str, program: str, names: list[str], routable: list[str]) -> None:
    assert sniff_ifaces(text.encode())
    lst = parse_ifaces(text)
    assert lst.program == program and lst.names() == names
    assert [i.name for i in lst.ifaces if i.routable] == routable


def test_ncclsocket_ifname_matching() -> None:
    assert matches("eth", "eth0") and not matches("eth", "ens5")
    assert matches("=eth0", "eth0") and not matches("=eth", "eth0")
    assert matches("^lo,docker", "ens5") and not matches("^lo,docker", "docker0")
    assert matches("ens,eth", "eth1")


def test_ifname_that_matches_nothing(tmp_path: Path) -> None:
    # dev case nccl-005: NCCL_SOCKET_IFNAME=eth2 on a host whose interfaces are lo and eth0
    (tmp_path / "log.txt").write_text((INCIDENTS / "nccl-005" / "paste.txt").read_text())
    (tmp_path / "ip.txt").write_text(IP_ADDR)
    obs = diagnosis.new_observations(clock=lambda: NOW)
    d = diagnosis.run(obs, diagnosis.load_sources(obs, [tmp_path]))
    (f,) = [x for x in d.findings if x.rule == "COMM019"]
    assert f.subject == "NCCL_SOCKET_IFNAME=eth2" and f.causes == ("nccl.socket-iface",)
    # the same log with a host that has eth2 up: no finding
    (tmp_path / "ip.txt").write_text(IP_ADDR.replace("eth0", "eth2"))
    obs = diagnosis.new_observations(clock=lambda: NOW)
    d = diagnosis.run(obs, diagnosis.load_sources(obs, [tmp_path]))
    assert "COMM019" not in {x.rule for x in d.findings}


def test_other_text_is_refused() -> None:
    for text in ("1: hello world\n", "eth0 is my interface\n", ""):
        assert not sniff_ifaces(text.encode())
    with pytest.raises(InputError):
        parse_ifaces("nothing here\n")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from([IP_ADDR, IFCONFIG, IP_BR, "    inet 1.2.3.4/8", "junk", "2: x: <UP> mtu 1"]),
        max_size=6,
    )
)
def test_any_mix_is_read_or_refused(parts: list[str]) -> None:
    try:
        lst = parse_ifaces("\n".join(parts))
    except InputError:
        return
    assert all(i.name for i in lst.ifaces)


def test_env_listing_beside_the_interfaces(tmp_path: Path) -> None:
    # `env | grep NCCL` (written for the test in env's format) naming an interface the host lacks
    from clusterdoctor.observe.comm.env_listing import parse_env_listing, sniff_env_listing

    env = "NCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME=eth2\nNCCL_IB_DISABLE=1\n"
    assert sniff_env_listing(env.encode()) and parse_env_listing(env).env["NCCL_SOCKET_IFNAME"] == "eth2"
    assert sniff_env_listing(b"# /etc/nccl.conf\nexport NCCL_SOCKET_IFNAME='ens'\n")
    assert not sniff_env_listing(b"PATH=/usr/bin\nHOME=/root\n")  # no NCCL_ variable
    assert not sniff_env_listing(b"NCCL_DEBUG=INFO\nthen it hung\n")  # not every line a setting
    (tmp_path / "env.txt").write_text(env)
    (tmp_path / "ip.txt").write_text(IP_ADDR)
    obs = diagnosis.new_observations(clock=lambda: NOW)
    d = diagnosis.run(obs, diagnosis.load_sources(obs, [tmp_path]))
    (f,) = [x for x in d.findings if x.rule == "COMM019"]
    assert f.subject == "NCCL_SOCKET_IFNAME=eth2"
    # the settings alone are read and not judged
    obs = diagnosis.new_observations(clock=lambda: NOW)
    d = diagnosis.run(obs, diagnosis.load_sources(obs, [tmp_path / "env.txt"]))
    assert not [x for x in d.findings if x.severity >= Severity.WARNING]
