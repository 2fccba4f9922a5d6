"""Huge inputs are refused before they are read: one line naming the file and the limit, exit 2.

The limit is lowered through ``$CLUSTERDOCTOR_MAX_INPUT_BYTES`` so that real fixtures exceed it;
the one slow test builds a 1 GiB file in a temporary directory by repeating a real capture.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.scrape import load_metrics_observations
from clusterdoctor.observe.event_sources import load_event_observations
from clusterdoctor.observe.limits import DEFAULT_MAX_INPUT_BYTES, MAX_INPUT_ENV, max_input_bytes, read_input
from tests.conftest import TEST_DATA, run_cli

NODE = TEST_DATA / "ctrl" / "node_exporter_1.5.0_metrics.prom"  # 135,685 bytes
LOG = TEST_DATA / "etcd_stall" / "zap" / "etcd-m2.log"  # 19,046 bytes


@pytest.mark.parametrize(
    "value,expect",
    [("100K", 100 << 10), ("2m", 2 << 20), ("1GiB", 1 << 30), ("4096", 4096), ("1.5M", int(1.5 * (1 << 20)))],
)
def test_limit_from_environment(monkeypatch, value, expect):
    monkeypatch.setenv(MAX_INPUT_ENV, value)
    assert max_input_bytes() == expect


@given(st.text(max_size=12))
def test_limit_never_fails_and_is_positive(value):
    import os

    old = os.environ.get(MAX_INPUT_ENV)
    os.environ[MAX_INPUT_ENV] = value.replace("\x00", "")
    try:
        assert max_input_bytes() > 0
    finally:
        if old is None:
            del os.environ[MAX_INPUT_ENV]
        else:
            os.environ[MAX_INPUT_ENV] = old


def test_default_limit(monkeypatch):
    monkeypatch.delenv(MAX_INPUT_ENV, raising=False)
    assert max_input_bytes() == DEFAULT_MAX_INPUT_BYTES


def test_metrics_dump_over_limit_refused(monkeypatch):
    monkeypatch.setenv(MAX_INPUT_ENV, "100K")
    with pytest.raises(InputError) as e:
        load_metrics_observations(NODE)
    msg = e.value.one_line()
    assert msg.startswith(f"{NODE}: file is 133 KiB, larger than the input limit of 100 KiB")
    assert MAX_INPUT_ENV in msg and "\n" not in msg
    monkeypatch.setenv(MAX_INPUT_ENV, "200K")
    assert load_metrics_observations(NODE)["metrics"].has("node_load1")


def test_log_over_limit_refused(monkeypatch):
    monkeypatch.setenv(MAX_INPUT_ENV, "8K")
    with pytest.raises(InputError, match="larger than the input limit of 8 KiB"):
        load_event_observations(LOG)
    assert read_input(LOG, limit=LOG.stat().st_size) == LOG.read_bytes()  # exactly at the limit: read


def test_cli_refuses_with_one_line_and_exit_2():
    r = run_cli("diagnose", str(NODE), env={MAX_INPUT_ENV: "100K"})
    assert r.code == 2, r.err
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(NODE) in lines[0] and "input limit of 100 KiB" in lines[0]
    assert "Traceback" not in r.err


@pytest.mark.slow
def test_one_gib_metrics_file_refused_quickly_with_bounded_memory(tmp_path):
    """1 GiB made by repeating the real node exporter capture; the default limit refuses it unread."""
    import time

    chunk = NODE.read_bytes()
    big = tmp_path / "huge.prom"
    with big.open("wb") as f:
        for _ in range((1 << 30) // len(chunk) + 1):
            f.write(chunk)
    assert big.stat().st_size > 1 << 30
    # Run the CLI under a fresh python whose RUSAGE_CHILDREN covers only that one child (the test
    # process's own children maximum includes every earlier test's subprocesses).
    probe = (
        "import os, resource, subprocess, sys, json\n"
        "env = dict(os.environ); env[sys.argv[2]] = ''\n"
        "p = subprocess.run([sys.executable, '-m', 'clusterdoctor.cli.main', 'diagnose', sys.argv[1]],"
        " capture_output=True, text=True, env=env)\n"
        "print(json.dumps({'code': p.returncode, 'err': p.stderr,"
        " 'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n"
    )
    import json
    import subprocess
    import sys

    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", probe, str(big), MAX_INPUT_ENV], capture_output=True, text=True
    )
    took = time.monotonic() - t0
    big.unlink()
    res = json.loads(out.stdout)
    assert res["code"] == 2 and "Traceback" not in res["err"]
    assert f"{big}: file is 1 GiB, larger than the input limit of 256 MiB" in res["err"]
    assert took < 30
    peak_kib = res["rss"]
    assert peak_kib < 400 * 1024  # the child never read the file


def test_bundle_member_over_limit_left_out_with_warning(tmp_path, monkeypatch):
    from clusterdoctor.observe.bundle import BundleWriter, load_bundle_observations

    w = BundleWriter()
    w.add("metrics/node.prom", NODE.read_bytes())
    w.add("logs/etcd-m2.log", LOG.read_bytes())
    out = tmp_path / "b.tar.zst"
    w.write(out)
    monkeypatch.setenv(MAX_INPUT_ENV, "64K")
    data = load_bundle_observations(out)
    assert any(
        x.startswith(f"{out}:metrics/node.prom: 133 KiB, larger than the input limit of 64 KiB")
        for x in data["warnings"]
    )
    assert "metrics" not in data  # the oversized dump was not read
    assert {e.kind for e in data["events"]} >= {"etcd.heartbeat_slow"}  # the rest still loads
