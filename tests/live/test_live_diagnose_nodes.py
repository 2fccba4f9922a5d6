"""Live on 127.0.0.1: `diagnose --prometheus` reads the node side of the fleet from a real Prometheus
that scrapes our agent (the real CLI process, a GPU finding raised from one Xid kernel-log line),
a second agent whose kernel log cannot be read (its `clusterdoctor_source_up 0`), and a real node
exporter (this machine's filesystems). The report has the agent's finding (source "agent on NODE"),
a warning for the down source, STOR001 judged on node exporter's filesystems (not skipped), and the
source line says what it read. Nothing is mocked; polling caps are generous, nothing asserts speed."""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from tests.conftest import run_cli
from tests.live.conftest import NODE_EXPORTER, PROMETHEUS, Services, free_ports, need, start, wait_http

pytestmark = [pytest.mark.live]
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."


def _query(port: int, q: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())["data"]["result"]


def test_diagnose_prometheus_reads_agents_and_node_exporter(tmp_path):
    prom_exe = need(PROMETHEUS, "prometheus")
    ne_exe = need(NODE_EXPORTER, "prometheus-node-exporter")
    (tmp_path / "root" / "sys").mkdir(parents=True)
    kmsg = tmp_path / "kmsg"
    usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)  # stamped now on the boot clock
    kmsg.write_bytes(f"6,1,1000,-;Linux version 6.1\n3,2,{usec},-;{XID}\n".encode())
    sick, blind, ne_port, prom_port = free_ports(4)
    services = Services()
    try:
        for name, port, klog in (("agent-sick", sick, kmsg), ("agent-blind", blind, tmp_path / "no-kmsg")):
            services.procs.append(
                start(
                    name,
                    [
                        sys.executable,
                        "-m",
                        "clusterdoctor.cli.main",
                        "serve",
                        "agent",
                        f"--listen=127.0.0.1:{port}",
                        f"--sysfs-root={tmp_path / 'root'}",
                        f"--kernel-log={klog}",
                        "--event-window=1h",
                        "--interval=1s",
                    ],
                    tmp_path,
                )  # fmt: skip
            )
        services.procs.append(
            start(
                "node-exporter",
                [
                    ne_exe,
                    f"--web.listen-address=127.0.0.1:{ne_port}",
                    "--collector.disable-defaults",
                    "--collector.filesystem",
                ],
                tmp_path,
            )  # fmt: skip
        )
        for port in (sick, blind):
            wait_http(f"http://127.0.0.1:{port}/metrics", 60)
        wait_http(f"http://127.0.0.1:{ne_port}/metrics", 30)
        cfg = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {"job_name": "clusterdoctor-agent", "static_configs": [
                    {"targets": [f"127.0.0.1:{sick}"], "labels": {"node": "gpu-node-7"}},
                    {"targets": [f"127.0.0.1:{blind}"], "labels": {"node": "gpu-node-8"}}]},
                {"job_name": "node", "static_configs": [
                    {"targets": [f"127.0.0.1:{ne_port}"], "labels": {"node": "gpu-node-7"}}]},
            ],
        }  # fmt: skip
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        services.procs.append(
            start(
                "prometheus",
                [
                    prom_exe,
                    f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                ],
                tmp_path,
            )  # fmt: skip
        )
        wait_http(f"http://127.0.0.1:{prom_port}/-/ready", 60)
        deadline = time.monotonic() + 180  # a cap on a hang
        while time.monotonic() < deadline:
            if (
                _query(prom_port, 'clusterdoctor_finding{rule="GPU001"}')
                and _query(prom_port, 'clusterdoctor_source_up{source="kernel-log"} == 0')
                and _query(prom_port, "node_filesystem_size_bytes")
            ):
                break
            time.sleep(0.5)
        else:
            logs = "\n".join(p.log.read_text(errors="replace")[-1500:] for p in services.procs)
            pytest.fail(f"series not in Prometheus within 180 s\n{logs}")

        url = f"http://127.0.0.1:{prom_port}"
        r = run_cli("diagnose", "--prometheus", url, "--since", "10m", "--format", "json", timeout=180)
        assert r.code in (0, 1), r.err
        doc = json.loads(r.out)
        agent = [f for f in doc["findings"] if "agent on gpu-node-7" in json.dumps(f)]
        assert agent, [f["summary"] for f in doc["findings"]]
        xid = next(f for f in agent if f["rule"] == "GPU001")
        assert xid["severity"] == "critical" and "GPU 0000:3b:00.0" in (xid.get("subject") or "")
        assert not [f for f in doc["findings"] if "agent on gpu-node-8" in json.dumps(f)]
        assert any("gpu-node-8" in w and "kernel-log" in w and "down" in w for w in doc["warnings"]), doc[
            "warnings"
        ]
        assert "STOR001" not in {s["rule"] for s in doc["skipped"]}
        src = next(s for s in doc["sources"] if s["kind"] == "prometheus")
        assert "clusterdoctor agents: " in src["detail"] and "node exporter: " in src["detail"], src
        # the text report names the agent as the finding's source, within 80 columns
        t = run_cli("diagnose", "--prometheus", url, "--since", "10m", env={"COLUMNS": "80"}, timeout=180)
        assert t.code in (0, 1) and "agent on gpu-node-7" in t.out, t.out[-2000:]
        wide = [ln for ln in t.out.splitlines() if len(ln) > 80 and " " in ln.strip()]
        assert not wide, wide[:3]
    finally:
        services.stop_all()
