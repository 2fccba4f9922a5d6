"""Every kind of HTML report, opened in a real headless Chromium (Debian's ``chromium``) at 1280 px:
no console error or failed load, no sideways scrolling, the severity as a badge and the finding's
body in normal text, and the plots a reader looks for (step time with the onset for a straggler, a
labelled timeline, the GPU fleet grid).

A small script is put at the top of a copy of each report (the report itself has none): it records
``error`` events and ``console.error`` calls and, once the page has loaded, writes what it measured
into the DOM that ``chromium --dump-dom`` prints. Chromium's own log (``--enable-logging=stderr``)
is read too, for console errors raised before the script ran.

``CLUSTERDOCTOR_SCREENSHOTS=DIR`` also writes a 1280 px wide PNG of each report into DIR (how
``docs/screenshots/`` was made).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian package `chromium`)")

DATA = REPO / "examples" / "data"
TD = REPO / "tests" / "data"
H100 = DATA / "nvidia-smi-q_h100-sxm-x8_535.183.01_sw-thermal-power-brake-on-one-gpu_pcie-replays.txt"

# (name, clusterdoctor arguments before --format html, what the page must show)
REPORTS = [
    ("diagnose-etcd-member-down", ["diagnose", str(TD / "etcd_dead_member")], ["timeline", "ETCD009"]),
    ("diagnose-failslow", ["diagnose", str(TD / "failslow" / "quota-rank2")], ["step time per rank", "onset: rank 2"]),
    ("diagnose-topology", ["diagnose", str(DATA / "24em64t-2n6c2t-pci.xml")], ["NUMA distance heatmap"]),
    ("gpu-health", ["gpu", "health", str(H100)], ["GPU fleet health", "GPU009"]),
    ("comm-failslow", ["comm", "analyze", str(TD / "failslow" / "fr-quota-rank2")], ["step time per rank", "onset: rank 2"]),
    ("comm-log", ["comm", "analyze", str(TD / "comm" / "public")], ["COMM012"]),
]  # fmt: skip

PROBE = """<script>
window.__cd = {errors: []};
window.addEventListener('error', function (e) {
  window.__cd.errors.push('error: ' + (e.message || (e.target && (e.target.src || e.target.href)) || e.type));
}, true);
(function () { var ce = console.error; console.error = function () {
  window.__cd.errors.push('console.error: ' + Array.prototype.join.call(arguments, ' ')); ce.apply(console, arguments);
}; })();
window.addEventListener('load', function () {
  var d = document.documentElement, out = document.createElement('pre');
  var body = document.querySelector('.finding p:not(.finding-head)');
  var badge = document.querySelector('.badge');
  out.id = '__cd_result';
  out.textContent = JSON.stringify({
    errors: window.__cd.errors,
    scroll_width: d.scrollWidth, client_width: d.clientWidth,
    body_weight: body ? getComputedStyle(body).fontWeight : null,
    body_color: body ? getComputedStyle(body).color : null,
    badge: badge ? [badge.textContent, getComputedStyle(badge).backgroundColor] : null,
    svgs: Array.prototype.map.call(document.querySelectorAll('svg'), function (s) { return s.getAttribute('aria-label'); })
  });
  document.body.appendChild(out);
});
</script>"""


def _chromium(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--disable-extensions", "--enable-logging=stderr", "--v=0", "--window-size=1280,1000"]  # fmt: skip
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=timeout)


def _report(name: str, args: list[str], tmp_path: Path) -> Path:
    out = tmp_path / f"{name}.html"
    r = run_cli(*args, "--format", "html", "-o", str(out), env={"COLUMNS": "80"})
    assert r.code in (0, 1), r.err
    return out


@pytest.mark.parametrize("name,args,shows", REPORTS, ids=[r[0] for r in REPORTS])
def test_report_opens_cleanly_in_chromium(name, args, shows, tmp_path):
    page = _report(name, args, tmp_path)
    html = page.read_text()
    assert "<script" not in html.lower(), "reports carry no scripts"
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html), "no external assets"
    probed = tmp_path / f"{name}.probe.html"
    probed.write_text(html.replace("<head>", "<head>" + PROBE, 1))
    p = _chromium("--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    m = re.search(r'<pre id="__cd_result">(.*?)</pre>', p.stdout, re.S)
    assert m, (p.returncode, p.stderr[-2000:])
    import html as _h

    res = json.loads(_h.unescape(m.group(1)))
    console = [
        ln for ln in p.stderr.splitlines() if "CONSOLE" in ln and ("ERROR" in ln or "error" in ln.lower())
    ]
    assert res["errors"] == [] and console == [], (res["errors"], console)
    assert res["scroll_width"] <= res["client_width"], f"scrolls sideways at 1280 px: {res}"
    if res["body_weight"] is not None:  # a finding's body is normal text, its severity a badge
        assert res["body_weight"] in ("400", "normal"), res
        assert res["body_color"] in ("rgb(34, 34, 34)",), res
        assert res["badge"] and res["badge"][0] in ("CRITICAL", "WARNING", "INFO"), res
    text = (_h.unescape(p.stdout) + " " + " ".join(filter(None, res["svgs"]))).lower()
    for want in shows:
        assert want.lower() in text, (want, res["svgs"])
    shots = os.environ.get("CLUSTERDOCTOR_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        png = Path(shots).resolve() / f"{name}.png"
        _chromium("--window-size=1280,1100", f"--screenshot={png}", page.as_uri())
        assert png.exists()


def test_the_probe_sees_a_console_error(tmp_path):
    """The check itself: a page that raises is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!doctype html><html><head>" + PROBE + "</head><body><script>nope()</script></body></html>"
    )
    p = _chromium("--virtual-time-budget=3000", "--dump-dom", bad.as_uri())
    import html as _h

    m = re.search(r'<pre id="__cd_result">(.*?)</pre>', p.stdout, re.S)
    assert m and "nope" in json.loads(_h.unescape(m.group(1)))["errors"][0]


@pytest.mark.torch
def test_qat_report_opens_cleanly_in_chromium(tmp_path):
    """``qat report --html`` on a state saved by a real DriftMonitor (as tests/cli/test_qat_cli.py)."""
    pytest.importorskip("torch")
    from tests.cli.test_qat_cli import state_file

    state = state_file.__wrapped__(
        type("F", (), {"mktemp": lambda self, n: tmp_path})()
    )  # the fixture's body
    page = tmp_path / "qat.html"
    r = run_cli("qat", "report", str(state), "--html", "-o", str(page))
    assert r.code == 0, r.err
    probed = tmp_path / "qat.probe.html"
    probed.write_text(page.read_text().replace("<head>", "<head>" + PROBE, 1))
    p = _chromium("--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    import html as _h

    m = re.search(r'<pre id="__cd_result">(.*?)</pre>', p.stdout, re.S)
    assert m, p.stderr[-2000:]
    res = json.loads(_h.unescape(m.group(1)))
    assert res["errors"] == [] and res["scroll_width"] <= res["client_width"], res
