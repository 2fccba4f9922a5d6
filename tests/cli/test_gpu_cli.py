"""``clusterdoctor gpu health`` and ``diagnose`` on GPU files, as users run them (a real process)."""

from __future__ import annotations

import json

from tests.conftest import shared_fixture
from tests.report.test_text_width import too_wide

X8 = "gpu/nvidia-smi-q_h100-sxm-x8_535.183.01_sw-thermal-power-brake-on-one-gpu_pcie-replays.txt"
DMESG = "gpu/dmesg-xid_ampere-hopper_xid48-dbe_xid63-row-remap_xid94-contained_peermem.log"
L4 = "gpu/dcgm-exporter_l4_kops-aws_580.105.08_remap-fields-healthy.prom"


def test_gpu_health_text_ranks_sick_gpus_and_fits_80_columns(cli):
    r = cli("gpu", "health", str(shared_fixture(X8)), str(shared_fixture(DMESG)), env={"COLUMNS": "80"})
    assert r.code == 1, r.err  # critical findings
    lines = r.out.splitlines()
    assert not too_wide(r.out)  # 80 columns, but for an unbreakable token (a long file name)
    table = lines[lines.index(next(ln for ln in lines if ln.startswith("SEV"))) + 1 :]
    first = [ln for ln in table if ln.strip()][:2]
    assert first[0].startswith("CRITICAL") and first[1].startswith("CRITICAL")
    assert "GPU2 0000:75:00.0" in r.out and "GPU 0000:19:00.0" in r.out
    assert "GPUs seen: 9; sick (warning or worse): 2" in r.out


def test_gpu_health_json_has_grid_and_not_exported(cli, tmp_path):
    out = tmp_path / "h.json"
    r = cli("gpu", "health", str(shared_fixture(L4)), "--format", "json", "-o", str(out))
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    assert doc["schema"] == "clusterdoctor.gpu_health/1"
    (row,) = doc["gpus"]
    assert row["node"] == "i-030791dc5a37cd257" and row["bus_id"] == "0000:31:00.0"
    assert row["checks"]["xid"]["status"] == "unknown"  # no XID field exported: not checked
    assert row["checks"]["clocks"]["status"] == "unknown"
    assert row["checks"]["pcie"]["status"] == "ok"
    assert doc["findings"] == [] and doc["sick_gpus"] == []
    assert any(s["rule"] == "GPU004" and "do not export it" in s["reason"] for s in doc["skipped"])


def test_gpu_health_html_grid(cli, tmp_path):
    out = tmp_path / "h.html"
    r = cli("gpu", "health", str(shared_fixture(X8)), "--format", "html", "-o", str(out))
    assert r.code == 1
    html = out.read_text()
    assert "<h2>GPU health</h2>" in html and "gpu-grid" in html
    assert html.count("<tr>") >= 9 and "g-critical" in html and "0000:75:00.0" in html


def test_diagnose_shows_gpu_findings_and_html_grid(cli, tmp_path):
    out = tmp_path / "d.html"
    r = cli("diagnose", str(shared_fixture(DMESG)), "--format", "html", "-o", str(out))
    assert r.code == 1
    assert "GPU health" in out.read_text() and "Xid 48" in out.read_text()
    j = cli("diagnose", str(shared_fixture(DMESG)), "--format", "json")
    doc = json.loads(j.out)
    assert (
        any(f["rule"] == "GPU001" for f in doc["findings"])
        and doc["gpu_health"][0]["checks"]["xid"]["status"] == "critical"
    )


def test_bad_input_is_one_line_naming_the_file_exit_2(cli, tmp_path):
    bad = tmp_path / "nvidia-smi.txt"
    bad.write_bytes(b"==============NVSMI LOG==============\nDriver Version : 1\n\x00\x01garbage")
    r = cli("gpu", "health", str(bad))
    assert r.code == 2 and r.out == ""
    assert len(r.err.strip().splitlines()) == 1 and str(bad) in r.err and "Traceback" not in r.err
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    r2 = cli("gpu", "health", str(junk))
    assert r2.code == 2 and len(r2.err.strip().splitlines()) == 1 and str(junk) in r2.err


def test_live_without_gpu_says_why_not_checked(cli):
    r = cli("gpu", "health", "--format", "json")
    doc = json.loads(r.out)
    # nothing could be checked: exit 1 and one line saying so, never "healthy" (as numa check)
    assert r.code == 1 and not doc["rules_run"], (r.code, r.err)
    assert "nothing checked" in r.err and r.err.count("\n") == 1
    reasons = {s["rule"]: s["reason"] for s in doc["skipped"]}
    assert doc["findings"] == [] and "GPU001" in reasons
    assert "NVML" in reasons["GPU001"] or "nvidia-smi" in reasons["GPU001"]
