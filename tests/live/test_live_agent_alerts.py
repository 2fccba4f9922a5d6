"""End to end on 127.0.0.1: the agent (the real CLI process), a node exporter and a real Prometheus
with the generated rules. A GPU finding fires from one kernel-log line (a file of /dev/kmsg records
standing in for the device), resolves once the line is older than the agent's event window (a short
window injected with --event-window), and the agent-down alert fires when the agent is stopped.

The generated rules are used as they are except their ``for:`` durations, cut to 2 s so the test
takes a minute instead of half an hour. Polling caps are generous (minutes); nothing asserts speed."""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.live.conftest import (
    NODE_EXPORTER,
    PROMETHEUS,
    Services,
    free_ports,
    need,
    prom_query,
    start,
    wait_http,
)

pytestmark = [pytest.mark.live, pytest.mark.serial]

REPO = Path(__file__).resolve().parents[2]
RULE_FILE = REPO / "deploy/components/prometheus-config/clusterdoctor-rules.yaml"
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
WINDOW_S = 20


_query = prom_query  # tests/live/conftest.py


def _alerts(port: int, name: str) -> list[dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/alerts", timeout=10) as r:
        return [a for a in json.loads(r.read())["data"]["alerts"] if a["labels"]["alertname"] == name]


def _until(what: str, cond, cap_s: float = 180.0, logs: list[Path] = ()):
    deadline = time.monotonic() + cap_s
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.5)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.exists())
    pytest.fail(f"{what}: not within {cap_s:g} s\n{tails}")


def test_gpu_finding_fires_resolves_and_agent_down_fires(tmp_path):
    prom_exe = need(PROMETHEUS, "prometheus")
    ne_exe = need(NODE_EXPORTER, "prometheus-node-exporter")
    (tmp_path / "root" / "sys").mkdir(parents=True)
    kmsg = tmp_path / "kmsg"
    kmsg.write_bytes(b"6,1,1000,-;Linux version 6.1 (a kernel log with no GPU trouble yet)\n")
    agent_port, ne_port, prom_port = free_ports(3)
    rules = yaml.safe_load(RULE_FILE.read_text())
    for g in rules["groups"]:
        for r in g["rules"]:
            r["for"] = "2s"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    services = Services()
    try:
        agent = start(
            "agent",
            [sys.executable, "-m", "clusterdoctor.cli.main", "serve", "agent",
             f"--listen=127.0.0.1:{agent_port}", f"--sysfs-root={tmp_path / 'root'}",
             f"--kernel-log={tmp_path / 'no-such-kmsg'}", f"--kernel-log={kmsg}",
             f"--event-window={WINDOW_S}s", "--interval=1s", "--log-level=debug"],
            tmp_path,
        )  # fmt: skip
        services.procs.append(agent)
        ne = start(
            "node-exporter",
            [ne_exe, f"--web.listen-address=127.0.0.1:{ne_port}", "--collector.disable-defaults",
             "--collector.time", "--collector.loadavg"],
            tmp_path,
        )  # fmt: skip
        services.procs.append(ne)
        wait_http(f"http://127.0.0.1:{agent_port}/metrics", 60)
        wait_http(f"http://127.0.0.1:{ne_port}/metrics", 30)
        cfg = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(tmp_path / "rules.yaml")],
            "scrape_configs": [
                {"job_name": "clusterdoctor-agent", "static_configs": [
                    {"targets": [f"127.0.0.1:{agent_port}"], "labels": {"node": "gpu-node-7"}}]},
                {"job_name": "node", "static_configs": [{"targets": [f"127.0.0.1:{ne_port}"]}]},
            ],
        }  # fmt: skip
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        prom = start(
            "prometheus",
            [prom_exe, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
            tmp_path,
        )  # fmt: skip
        services.procs.append(prom)
        wait_http(f"http://127.0.0.1:{prom_port}/-/ready", 60)
        logs = [agent.log, prom.log]
        # both targets up, the kernel log read from the fallback path, no GPU alert yet
        _until(
            "agent and node exporter up",
            lambda: (
                {r["metric"]["job"] for r in _query(prom_port, "up == 1")} >= {"clusterdoctor-agent", "node"}
            ),
            logs=logs,
        )
        up = _until(
            "kernel-log source up",
            lambda: _query(prom_port, 'clusterdoctor_source_up{source="kernel-log"} == 1'),
            logs=logs,
        )
        assert up and not _alerts(prom_port, "ClusterdoctorGpuXidKernelLog")

        # one Xid line, stamped now on the boot clock as the kernel stamps it
        usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)
        with open(kmsg, "ab") as f:
            f.write(f"3,2,{usec},-;{XID}\n".encode())
        t_line = time.monotonic()
        firing = _until(
            "ClusterdoctorGpuXidKernelLog firing",
            lambda: [a for a in _alerts(prom_port, "ClusterdoctorGpuXidKernelLog") if a["state"] == "firing"],
            logs=logs,
        )
        lab = firing[0]["labels"]
        assert lab["rule"] == "GPU001" and lab["severity"] == "critical" and lab["node"] == "gpu-node-7"
        assert lab["subject"] == "GPU 0000:3b:00.0"
        assert _query(prom_port, 'clusterdoctor_events_total{kind="gpu.xid"} == 1')

        # the line ages out of the window: the finding goes and the alert resolves
        _until(
            "ClusterdoctorGpuXidKernelLog resolved",
            lambda: not _alerts(prom_port, "ClusterdoctorGpuXidKernelLog"),
            logs=logs,
        )
        assert time.monotonic() - t_line >= WINDOW_S - 2  # not before the window (2 s of clock slack)
        assert not _query(prom_port, 'clusterdoctor_finding{rule="GPU001"}')
        # the counter stays: it counts what was read, not what is current
        assert _query(prom_port, 'clusterdoctor_events_total{kind="gpu.xid"} == 1')
        assert not _alerts(prom_port, "ClusterdoctorAgentDown")

        # the agent stops: the meta-alert fires instead of every alert resolving silently
        agent.stop()
        down = _until(
            "ClusterdoctorAgentDown firing",
            lambda: [a for a in _alerts(prom_port, "ClusterdoctorAgentDown") if a["state"] == "firing"],
            logs=logs,
        )
        assert down[0]["labels"]["instance"] == f"127.0.0.1:{agent_port}"
        assert "level=info msg=listening" in agent.log.read_text()  # structured logs on stderr
    finally:
        services.stop_all()
