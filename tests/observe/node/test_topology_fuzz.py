"""Fuzz every topology parser: random bytes and mutations of real inputs; only InputError may escape.

Seeds are the real fixtures (../shared/fixtures/numa, when present) and the real-tool captures in
tests/data/topology (always present). Mutations work on bytes (flip, cut, splice), on lines
(drop, duplicate, swap) and on values (an attribute value or a whitespace-separated token replaced
by a nasty one), so they reach past the XML / header checks into the number and matrix handling.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.hwloc_xml import parse_hwloc_xml, sniff_hwloc_xml
from clusterdoctor.observe.node.nccl_topo import parse_nccl_topo_xml, sniff_nccl_topo
from clusterdoctor.observe.node.numactl import parse_numactl_hardware, sniff_numactl_hardware
from clusterdoctor.observe.node.nvidia_smi import parse_nvidia_smi_topo, sniff_nvidia_smi_topo
from clusterdoctor.testing import fixture_path
from clusterdoctor.topology.model import Topology
from tests.conftest import TEST_DATA

PARSERS = [parse_hwloc_xml, parse_nccl_topo_xml, parse_nvidia_smi_topo, parse_numactl_hardware]
SNIFFERS = [sniff_hwloc_xml, sniff_nccl_topo, sniff_nvidia_smi_topo, sniff_numactl_hardware]

NASTY = [
    "", "-1", "0", "N/A", "X", "NV", "SOC", "99999999999999999999999", "0x", "0xf...f", "0x,0x,", "nan",
    "1e309", "3-1", "0-", ",", "ffff:ff:ff.f", "0000:zz:00.0", "\x00", "&amp;", "<", "GPU0", "cpus:",
    "4294967296", "0-1048577", "  ", "\t", "é", "²", "1²", "٣", "0-²",
]  # fmt: skip


def seeds() -> list[bytes]:
    out = [p.read_bytes() for p in sorted((TEST_DATA / "topology").iterdir()) if p.suffix in (".xml", ".txt")]
    numa = fixture_path("numa")
    if numa is not None:
        out += [p.read_bytes() for p in sorted(Path(numa).rglob("*")) if p.suffix in (".xml", ".txt")]
    return out


SEEDS = seeds()


def call_all(data: bytes) -> None:
    for parse in PARSERS:
        try:
            t = parse(data, "fuzz")
        except InputError as e:
            assert e.reason and e.path == "fuzz"
            continue
        assert isinstance(t, Topology)
        t.as_dict()  # the result is usable: serialisable, lookups work
        assert len(set(t.node_ids)) == len(t.node_ids)
        for d in t.devices():
            assert d.numa_node is None or d.numa_node in t.node_ids
    for sniff in SNIFFERS:
        assert sniff(data[:4096]) in (True, False)


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "cut", "splice", "lines", "value", "token"]))
        if op == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        elif op == "cut" and data:
            i = draw(st.integers(0, len(data)))
            data = data[:i]
        elif op == "splice" and data:
            i = draw(st.integers(0, len(data) - 1))
            j = draw(st.integers(i, min(len(data), i + 200)))
            data[i:j] = draw(st.binary(max_size=20))
        elif op == "lines":
            lines = bytes(data).split(b"\n")
            if len(lines) > 1:
                i = draw(st.integers(0, len(lines) - 1))
                j = draw(st.integers(0, len(lines) - 1))
                how = draw(st.sampled_from(["drop", "dup", "swap"]))
                if how == "drop":
                    del lines[i]
                elif how == "dup":
                    lines.insert(j, lines[i])
                else:
                    lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
        elif op == "value":
            spans = [m.span(1) for m in re.finditer(rb'="([^"]*)"', bytes(data))]
            if spans:
                a, b = draw(st.sampled_from(spans))
                data[a:b] = draw(st.sampled_from(NASTY)).encode()
        elif op == "token":
            spans = [m.span() for m in re.finditer(rb"[^\s<>\"=]+", bytes(data))]
            if spans:
                a, b = draw(st.sampled_from(spans))
                data[a:b] = draw(st.sampled_from(NASTY)).encode()
    return bytes(data)


FUZZ = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes(data: bytes):
    call_all(data)


@FUZZ
@given(mutated())
def test_mutated_real_inputs(data: bytes):
    call_all(data)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=500))
def test_random_text_as_str(text: str):
    for parse in PARSERS:
        try:
            parse(text, "fuzz")
        except InputError:
            pass


@pytest.mark.parametrize("seed", range(len(SEEDS)))
def test_every_seed_prefix_truncation(seed: int):
    """Cut each real input at 16 evenly spread points: each parser answers or raises InputError."""
    data = SEEDS[seed]
    for k in range(1, 17):
        call_all(data[: len(data) * k // 17])
