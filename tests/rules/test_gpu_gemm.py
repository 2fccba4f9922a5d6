"""ubergemm output (observe/gpu/ubergemm.py) and GPU023 (one GPU's GEMM rate far below its peers').

The paste is real: NVIDIA/DCGM#122 (https://github.com/NVIDIA/DCGM/issues/122), a DGX A100 whose GPU 0
reaches ~6.7 TFLOPS FP32 while its seven peers reach ~19.2 and dcgmi diag passes. No second public
paste of ubergemm's adapter lines was found (search corpus issues/code, 2026-12-03); the other inputs
here are labelled synthetic: printed in the program's format."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.model import Severity
from clusterdoctor.observe.gpu.ubergemm import parse_ubergemm, sniff_ubergemm
from clusterdoctor.rules.registry import REQUIRED_SECTIONS, get_rule

NOW = 1_700_000_000.0
REAL = Path(__file__).resolve().parents[1] / "data" / "incidents" / "gpu-506" / "paste.txt"


def diagnose(tmp_path: Path, text: str):
    from clusterdoctor import diagnosis

    p = tmp_path / "paste.txt"
    p.write_text(text)
    obs = diagnosis.new_observations(clock=lambda: NOW)
    refs = diagnosis.load_sources(obs, [p])
    return diagnosis.run(obs, refs)


def alarms(d):
    return [(f.rule, f.subject) for f in d.findings if f.severity >= Severity.WARNING]


def line(gpu: int, gflops: float) -> str:
    return f"GEMM [I] (ADAPTER#{gpu})  Ending with {gflops} GFlops"


def test_documented():
    r = get_rule("GPU023")
    for section in REQUIRED_SECTIONS:
        assert section in (r.fn.__doc__ or "")
    assert r.thresholds and r.thresholds[0].source


def test_real_paste_read_with_the_command_line():
    text = REAL.read_text()
    assert sniff_ubergemm(text.encode())
    res, skipped = parse_ubergemm(text, "p")
    assert skipped == []
    assert sorted(r.gpu for r in res) == list(range(8))
    assert {r.gpu: r.gflops for r in res}[0] == pytest.approx(6698.442948608)
    assert {r.gpu: r.line for r in res}[0] == 2


def test_real_paste_names_gpu0(tmp_path):
    d = diagnose(tmp_path, REAL.read_text())
    assert alarms(d) == [("GPU023", "GPU 0")]
    assert "35%" in d.findings[0].summary


def test_even_run_is_quiet(tmp_path):
    # synthetic: the seven healthy A100 results of the real paste, without GPU 0
    rows = [ln for ln in REAL.read_text().splitlines() if "ADAPTER#0)" not in ln]
    d = diagnose(tmp_path, "\n".join(rows) + "\n")
    assert alarms(d) == []


def test_two_gpus_are_not_judged(tmp_path):
    # synthetic: with one peer there is no median of others to trust
    d = diagnose(tmp_path, line(0, 6698.4) + "\n" + line(1, 19148.1) + "\n")
    assert alarms(d) == []


def test_no_adapter_line_is_refused():
    with pytest.raises(InputError, match="no '\\(ADAPTER#n\\)"):
        parse_ubergemm("GEMM [I] starting\n", "p")


def test_other_lines_are_named():
    _, skipped = parse_ubergemm(line(0, 1.5) + "\nsomething else\nreal\t0m12.3s\n", "p")
    assert skipped == [2]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1.0, max_value=1e6, allow_nan=False), min_size=1, max_size=16))
def test_parse_round_trips(values):
    text = "\n".join(line(i, round(v, 6)) for i, v in enumerate(values)) + "\n"
    res, skipped = parse_ubergemm(text, "p")
    assert skipped == []
    assert [r.gflops for r in res] == pytest.approx([round(v, 6) for v in values])
