"""The agent's output by Prometheus practice: `promtool check metrics` clean, bounded labels (no pid,
no free text), counters for counts, build_info and process metrics; a scrape never waits for a slow
source once the first diagnosis is done; structured logs; the web config's auth and its refusals."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from clusterdoctor.serve.agent import Agent, Source, default_sources, make_server
from clusterdoctor.serve.agent_log import Logger
from clusterdoctor.serve.agent_metrics import bounded_subject, escape_label
from tests.conftest import TEST_DATA, run_cli
from tests.serve.test_agent import LOGS_END

XID = b"NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."


def promtool() -> str:
    exe = shutil.which("promtool")
    if not exe:
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return exe


def _agent(tmp_path, extra=()):
    kern = tmp_path / "kern.log"
    kern.write_bytes(b"2026-11-30T08:50:00+00:00 host kernel: " + XID + b"\n")
    logs = [str(TEST_DATA / "etcd_stall" / "zap" / f"etcd-m{i}.log") for i in range(3)]
    clock = lambda: LOGS_END + 60  # noqa: E731
    srcs = default_sources(str(tmp_path), logs, 5.0, kernel_logs=[str(kern)], clock=clock) + list(extra)
    return Agent(srcs, interval_s=3600, clock=clock)


def test_promtool_check_metrics_is_clean(tmp_path):
    def noisy():
        return {}

    text = _agent(tmp_path, [Source('with "quotes" and \\ and \udcff', noisy, 1.0)]).render()
    out = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout + out.stderr == "", out.stdout + out.stderr
    # what was read is there
    assert 'clusterdoctor_finding{rule="GPU001",severity="critical",layer="gpu"' in text
    assert 'clusterdoctor_events_total{kind="gpu.xid"} 1' in text
    assert 'clusterdoctor_source_up{source="kernel-log"} 1' in text
    assert "clusterdoctor_build_info{version=" in text and "process_resident_memory_bytes " in text
    # every family is declared once, counters end in _total
    types = [ln.split()[2:4] for ln in text.splitlines() if ln.startswith("# TYPE ")]
    names = [n for n, _ in types]
    assert len(names) == len(set(names))
    assert all(n.endswith("_total") for n, k in types if k == "counter")
    assert not any(n.endswith("_total") for n, k in types if k != "counter")


def test_promtool_flags_a_bad_exposition():
    bad = "# TYPE clusterdoctor_events gauge\nclusterdoctor_events_total 3\n# TYPE x_total gauge\nx_total 1\n"
    out = subprocess.run([promtool(), "check", "metrics"], input=bad, capture_output=True, text=True)
    assert out.returncode != 0 or out.stdout + out.stderr


def test_labels_are_bounded():
    assert bounded_subject("training/gpt-0/trainer (pid 4242, python)") == "training/gpt-0/trainer (python)"
    assert bounded_subject("pid 17 (python)") == "(python)"
    assert bounded_subject("pids 1, 2, 3 on GPU 0") == "on GPU 0"
    assert bounded_subject("GPU 0000:3b:00.0") == "GPU 0000:3b:00.0"
    assert len(bounded_subject("x" * 1000)) == 160
    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert escape_label("caf\udcc3") == "caf\\\\xc3"  # a non-UTF-8 file name: escaped, never a 500


def test_no_free_text_labels(tmp_path):
    text = _agent(tmp_path).render()
    labels = set()
    for ln in text.splitlines():
        if ln and not ln.startswith("#") and "{" in ln:
            labels |= {kv.split("=", 1)[0] for kv in ln[ln.index("{") + 1 : ln.rindex("}")].split('",') if kv}
    assert "message" not in labels and "msg" not in labels
    assert "pid=" not in text.split("clusterdoctor_finding{", 1)[1].split("# HELP", 1)[0]


def test_scrape_serves_the_last_diagnosis_and_never_waits(tmp_path):
    gate = threading.Event()
    slow_calls = []

    def slow():
        slow_calls.append(1)
        gate.wait(20)
        return {}

    agent = _agent(tmp_path, [Source("slow", slow, 0.5)])
    agent.interval_s = 0.2
    srv = make_server(agent, "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            first = r.read().decode()
        assert 'clusterdoctor_source_up{source="slow"} 0' in first
        for _ in range(5):  # the source is still stuck: later scrapes answer from the last round at once
            t0 = time.monotonic()
            with urllib.request.urlopen(url, timeout=20) as r:
                r.read()
            assert time.monotonic() - t0 < 5  # a generous cap: the source alone blocks for 20 s
        assert len(slow_calls) == 1  # not started again while it runs
        deadline = time.monotonic() + 60
        while agent.diagnoses < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert agent.diagnoses >= 3  # the timer keeps diagnosing
        req = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(req, timeout=20) as r:
            assert r.status == 200 and r.read() == b""
    finally:
        gate.set()
        srv.shutdown()
        srv.server_close()
        agent.close()


def test_logs_are_structured_and_levelled():
    now = lambda: 1_796_028_667.25  # noqa: E731
    buf = io.StringIO()
    log = Logger("info", "logfmt", buf, now)
    log.debug("hidden")
    log.warn("source down", source="file /var/log/x y.log", reason='said "no"')
    assert buf.getvalue() == (
        'ts=2026-11-30T08:51:07.250Z level=warn msg="source down" source="file /var/log/x y.log" '
        'reason="said \\"no\\""\n'
    )
    buf = io.StringIO()
    Logger("debug", "json", buf, now).debug("diagnosis", findings=3)
    assert json.loads(buf.getvalue()) == {
        "ts": "2026-11-30T08:51:07.250Z",
        "level": "debug",
        "msg": "diagnosis",
        "findings": 3,
    }
    with pytest.raises(ValueError):
        Logger("verbose")


def test_agent_logs_source_state_changes_once(tmp_path):
    buf = io.StringIO()
    state = {"fail": True}

    def flaky():
        if state["fail"]:
            raise OSError("permission denied")
        return {}

    agent = Agent([Source("flaky", flaky, 1.0)], log=Logger("info", "logfmt", buf))
    agent.render()
    agent.render()
    state["fail"] = False
    agent.render()
    lines = buf.getvalue().splitlines()
    assert [ln.split(" msg=")[1].split('"')[1] for ln in lines] == ["source down", "source up"]
    assert "permission denied" in lines[0]


# --- CLI: flags and refusals --------------------------------------------------------------------------


def test_cli_refuses_bad_durations_and_log_options(tmp_path):
    (tmp_path / "sys").mkdir()
    for args, what in (
        (["--event-window", "soon"], "--event-window"),
        (["--interval", "0"], "--interval"),
        (["--log-level", "loud"], "log level"),
        (["--log-format", "xml"], "log format"),
    ):
        r = run_cli("serve", "agent", "--sysfs-root", str(tmp_path), "--listen", "127.0.0.1:0", *args)
        assert r.code == 2 and what in r.err and "Traceback" not in r.err, (args, r.err)
        assert len(r.err.strip().splitlines()) == 1


def test_cli_web_config_refusals(tmp_path):
    (tmp_path / "sys").mkdir()
    cases = {
        "users.yml": "basic_auth_users:\n  prometheus: $2y$10$abcdefghijklmnopqrstuu7Wb0Y5X1Yd8Z0E1b5O3aJHq8M8G1xW2\n",
        "plain.yml": "basic_auth_users:\n  prometheus: secret\n",
        "typo.yml": "basic_auth_user:\n  prometheus: x\n",
        "tls.yml": "tls_server_config:\n  cert_file: none.crt\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    try:
        import bcrypt  # noqa: F401

        have_bcrypt = True
    except ModuleNotFoundError:
        have_bcrypt = False
    for name, expect in (
        ("users.yml", None if have_bcrypt else "needs the bcrypt package"),
        ("plain.yml", "not a bcrypt hash" if have_bcrypt else "needs the bcrypt package"),
        ("typo.yml", "unknown key"),
        ("tls.yml", "needs cert_file and key_file"),
        ("missing.yml", "cannot read"),
    ):
        if expect is None:
            continue
        r = run_cli(
            "serve", "agent", "--sysfs-root", str(tmp_path), "--listen", "127.0.0.1:0",
            "--web.config.file", str(tmp_path / name),
        )  # fmt: skip
        assert r.code == 2 and expect in r.err and "Traceback" not in r.err, (name, r.err)
        assert "secret" not in r.err


def test_basic_auth_with_bcrypt(tmp_path):
    bcrypt = pytest.importorskip("bcrypt")
    from clusterdoctor.serve.agent_web import load_web_config

    h = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()
    cfg_file = tmp_path / "web.yml"
    cfg_file.write_text(f"basic_auth_users:\n  prom: '{h}'\n")
    web = load_web_config(str(cfg_file))
    agent = Agent([], interval_s=3600)
    srv = make_server(agent, "127.0.0.1", 0, web=web)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url + "/metrics", timeout=20)
        assert e.value.code == 401
        tok = base64.b64encode(b"prom:s3cret").decode()
        req = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Basic {tok}"})
        with urllib.request.urlopen(req, timeout=20) as r:
            assert b"clusterdoctor_build_info" in r.read()
        with urllib.request.urlopen(url + "/healthz", timeout=20) as r:
            assert r.read() == b"ok\n"
    finally:
        srv.shutdown()
        srv.server_close()
        agent.close()
