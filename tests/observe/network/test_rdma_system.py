"""iproute2 `rdma system` read (the maintainer's real output in k8s-rdma-shared-dev-plugin#84), and RDMA025."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.rdma_system import parse_rdma_system, sniff_rdma_system

REAL = Path(__file__).resolve().parents[2] / "data" / "infra_pastes" / "rdma-system-84-shared.txt"


def test_real_shared_mode_with_its_command_line():
    text = REAL.read_text()
    assert sniff_rdma_system(text.encode())
    s = parse_rdma_system(text, "p")
    assert (s.netns_mode, s.switches, s.line) == ("shared", {"copy-on-fork": True}, 2)


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("netns shared\n", "shared"),  # iproute2 5.x (synthetic, the format of rdma(8))
        ("$ rdma sys\nnetns exclusive copy-on-fork on\n", "exclusive"),  # synthetic
        ("netns exclusive privileged-qkey off copy-on-fork on\n", "exclusive"),  # synthetic
    ],
)
def test_formats(text, mode):
    assert sniff_rdma_system(text.encode())
    assert parse_rdma_system(text).netns_mode == mode


def test_other_text_is_not_rdma_system():
    assert not sniff_rdma_system(b"netns shared\nsomething else\n")
    assert not sniff_rdma_system(b"Unknown object 'system'.\n")
    with pytest.raises(InputError):
        parse_rdma_system("Unknown object 'system'.\n")


@given(st.text(max_size=200))
def test_parser_raises_only_input_error(text):
    try:
        parse_rdma_system(text)
    except InputError:
        assert not sniff_rdma_system(text.encode())


def test_exclusive_mode_is_a_note_and_shared_is_quiet(tmp_path):
    from clusterdoctor import diagnosis
    from clusterdoctor.model import Severity

    def first(text: str):
        p = tmp_path / "rdma.txt"
        p.write_text(text)
        obs = diagnosis.new_observations(clock=lambda: 1.8e9)
        return diagnosis.run(obs, diagnosis.load_sources(obs, [p])).findings

    assert first(REAL.read_text()) == []
    fs = first("# rdma system\nnetns exclusive copy-on-fork on\n")  # synthetic
    assert [(f.rule, f.severity) for f in fs] == [("RDMA025", Severity.INFO)]
