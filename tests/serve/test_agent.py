"""The node agent: findings as Prometheus metrics; a dead source never blocks a scrape."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from clusterdoctor.serve.agent import Agent, Source, default_sources, escape_label, make_server
from tests.conftest import TEST_DATA, needs_real_lock_timeouts, run_cli, shared_fixture
from tests.observe.network.test_rdma import untar_infiniband

LOGS_END = 1796028667.0  # 2026-11-30T08:51:07Z, the last line of tests/data/etcd_stall/zap/etcd-m0.log


@pytest.fixture
def ib_root(tmp_path):
    return untar_infiniband(
        shared_fixture("ctrl/nic/sysfs/node_exporter_sys_fixtures.ttar"), tmp_path / "root"
    )


def scrape(port, path="/metrics"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
        return r.headers.get("Content-Type"), r.read().decode()


@needs_real_lock_timeouts
def test_dead_source_does_not_block(ib_root):
    release = threading.Event()
    calls = []

    def dead():
        calls.append(1)
        release.wait(30)
        return {}

    logs = [str(TEST_DATA / "etcd_stall" / "zap" / f"etcd-m{i}.log") for i in range(3)]
    clock = lambda: LOGS_END + 60  # noqa: E731  # a minute after the logs end: their events are in the window
    srcs = default_sources(str(ib_root), logs, 5.0, clock=clock) + [Source("dead", dead, 0.3)]
    agent = Agent(srcs, interval_s=3600, clock=clock)
    srv = make_server(agent, "127.0.0.1", 0)
    port = srv.server_address[1]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        t0 = time.monotonic()
        ctype, body = scrape(port)
        assert time.monotonic() - t0 < 25  # the stuck source (30 s) is not waited for; generous under load
        assert ctype.startswith("text/plain; version=0.0.4")
        assert 'clusterdoctor_source_up{source="dead"} 0' in body
        assert 'clusterdoctor_source_up{source="rdma-sysfs"} 1' in body
        # findings from the real inputs: congestion on mlx4_0/1, the stall chain from the logs
        assert 'rule="RDMA002",severity="warning",layer="rdma",subject="mlx4_0/1"' in body
        assert (
            'rule="CHAIN001"' in body and 'clusterdoctor_events_total{kind="etcd.heartbeat_slow"} 2' in body
        )
        # raw counters, never rates (rate() is PromQL's)
        assert 'clusterdoctor_rdma_counter_total{device="mlx4_0",port="1",counter="port_rcv_data"}' in body
        assert "_rate{" not in body
        # second scrape: served from the last diagnosis, nothing run again
        _, body2 = scrape(port)
        assert len(calls) == 1 and agent.diagnoses == 1
        assert (
            body2.split("clusterdoctor_diagnoses_total")[1] == body.split("clusterdoctor_diagnoses_total")[1]
        )
        assert scrape(port, "/healthz")[1] == "ok\n"
    finally:
        release.set()
        srv.shutdown()
        srv.server_close()
        agent.close()


def test_failing_source_reported():
    def boom():
        raise OSError("permission denied")

    text = Agent([Source("boom", boom, 1.0)]).render()
    assert 'clusterdoctor_source_up{source="boom"} 0' in text
    assert 'clusterdoctor_rule_skipped{rule="RDMA001"} 1' in text


def test_escape_label():
    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_agent_process(ib_root):
    port = free_port()
    env = dict(os.environ)
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "clusterdoctor.cli.main",
            "serve",
            "agent",
            "--listen",
            f"127.0.0.1:{port}",
            "--sysfs-root",
            str(ib_root),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        body = None
        for _ in range(100):
            try:
                body = scrape(port)[1]
                break
            except OSError:
                time.sleep(0.1)
        assert body is not None and 'rule="RDMA006"' in body  # i40iw0: no PMA
    finally:
        p.terminate()
        p.wait(60)


def test_cli_bad_listen():
    r = run_cli("serve", "agent", "--listen", "127.0.0.1:notaport")
    assert r.code == 2 and "port is not a number" in r.err and "Traceback" not in r.err


def test_cli_extender_placeholder():
    # with or without clusterdoctor.serve.extender in the build: one line, exit 2, never a traceback
    r = run_cli("serve", "extender", "--policy", "no-such-policy", "--listen", "127.0.0.1:1")
    assert r.code == 2 and ("extender" in r.err or "no-such-policy" in r.err) and "Traceback" not in r.err
