"""`clusterdoctor qat report STATE_FILE` on a state saved by a real DriftMonitor, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.training.qat import render
from clusterdoctor.training.qat.state import SCHEMA, parse_state
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def state_file(tmp_path_factory):
    """A state written by DriftMonitor.save() after gain drift and a gated recalibration."""
    pytest.importorskip("torch")
    from clusterdoctor.training.qat import DriftMonitor
    from tests.training.qat_fixtures import batches, digits, qat_cnn

    _, _, xca, xte, _ = digits()
    q = qat_cnn()
    mon = DriftMonitor(q)
    mon.calibrate(batches(xca))
    import torch

    with torch.no_grad():
        q(xte[:100] * 2.5)
    mon.apply(batches(xte[100:200] * 2.5, 50))
    p = tmp_path_factory.mktemp("qat") / "state.json"
    mon.save(p)
    mon.close()
    return p


@pytest.mark.torch
def test_text_report_has_a_row_per_layer(state_file):
    r = run_cli("qat", "report", str(state_file))
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("layer"))
    rows = lines[header + 2 : header + 6]
    assert [row.split()[0] for row in rows] == ["conv1", "conv2", "fc1", "fc2"]
    assert rows[0].split()[-1] == "recalibrate"
    assert "taken: SQNR" in r.out


@pytest.mark.torch
def test_json_and_html_reports(state_file, tmp_path):
    r = run_cli("qat", "report", str(state_file), "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["schema"] == SCHEMA
    saved = json.loads(state_file.read_text())
    assert [e["action"] for e in data["layers"]] == [e["action"] for e in saved["layers"]]
    out = tmp_path / "r.html"
    r = run_cli("qat", "report", str(state_file), "--html", "-o", str(out))
    assert r.code == 0, r.err
    page = out.read_text()
    assert page.count("<svg") == 4 and "<polyline" in page
    assert "conv1" in page and "recalibrate" in page


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (None, "no such file"),
        ("{not json", "not JSON"),
        ('{"schema": "other/1", "layers": []}', "not a QAT monitor state"),
        (json.dumps({"schema": SCHEMA, "layers": [{"layer": "a"}]}), "has no 'action'"),
        (
            json.dumps(
                {"schema": SCHEMA, "layers": [{"layer": "a", "action": "keep", "reason": "", "score": "x"}]}
            ),
            "score is not a number",
        ),
    ],
)
def test_bad_state_file_is_one_line_exit_2(tmp_path, content, expect):
    p = tmp_path / "s.json"
    if content is not None:
        p.write_text(content)
    r = run_cli("qat", "report", str(p))
    assert r.code == 2
    err = r.err.strip().splitlines()
    assert len(err) == 1 and str(p) in err[0] and expect in err[0]
    assert "Traceback" not in r.err


def test_conflicting_formats_exit_2(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"schema": SCHEMA, "layers": []}))
    r = run_cli("qat", "report", str(p), "--json", "--html")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1


def test_cli_module_does_not_import_torch():
    code = (
        "import sys, clusterdoctor.cli.qat, clusterdoctor.training.qat.state; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace")), st.text(max_size=300)))
def test_parse_state_fuzz_raises_only_input_error(text):
    try:
        parse_state(text, "fuzz.json")
    except InputError:
        pass


_VALID = json.dumps(
    {
        "schema": SCHEMA,
        "layers": [{"layer": "l", "action": "keep", "reason": "r", "hist_ref": [1, 2], "hist_cur": [2, 1]}],
        "actions": [],
    }
)


@settings(max_examples=150)
@given(st.integers(0, len(_VALID) - 1), st.integers(1, 20), st.text(max_size=5))
def test_parse_state_mutations_raise_only_input_error(pos, cut, junk):
    text = _VALID[:pos] + junk + _VALID[pos + cut :]
    try:
        state = parse_state(text)
    except InputError:
        return
    render.render_text(state)
    render.render_html(state)
