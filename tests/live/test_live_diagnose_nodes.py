"""Live on 127.0.0.1: `diagnose --prometheus` reads the node side of the fleet from a real Prometheus
that scrapes our agent (the real CLI process, a GPU finding raised from one Xid kernel-log line),
a second agent whose kernel log cannot be read (its `clusterdoctor_source_up 0`), and a real node
exporter (this machine's filesystems), and a second node exporter reading node exporter's own sysfs
test fixture (its ttar, under --path.sysfs) whose link_error_recovery counter of mlx4_0/1 the test keeps
increasing (synthetic increase of a real-format file). The report has the agent's finding (source "agent on NODE"),
a warning for the down source, STOR001 judged on node exporter's filesystems (not skipped), and the
source line says what it read; RDMA004 finds the link errors of that port from the rate. Nothing is mocked; polling caps are generous, nothing asserts speed."""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from tests.conftest import run_cli, shared_fixture
from tests.live.conftest import (
    NODE_EXPORTER,
    PROMETHEUS,
    Services,
    free_ports,
    need,
    prom_query,
    start,
    start_prometheus,
    wait_http,
)
from tests.observe.network.test_rdma import untar_infiniband

pytestmark = [pytest.mark.live]
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."


_query = prom_query  # tests/live/conftest.py


def test_diagnose_prometheus_reads_agents_and_node_exporter(tmp_path):
    prom_exe = need(PROMETHEUS, "prometheus")
    ne_exe = need(NODE_EXPORTER, "prometheus-node-exporter")
    (tmp_path / "root" / "sys").mkdir(parents=True)
    kmsg = tmp_path / "kmsg"
    usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)  # stamped now on the boot clock
    kmsg.write_bytes(f"6,1,1000,-;Linux version 6.1\n3,2,{usec},-;{XID}\n".encode())
    sick, blind, ne_port, ib_port, prom_port = free_ports(5)
    ib = untar_infiniband(shared_fixture("ctrl/nic/sysfs/node_exporter_sys_fixtures.ttar"), tmp_path / "ib")
    counter = ib / "sys/class/infiniband/mlx4_0/ports/1/counters/link_error_recovery"
    stop = threading.Event()

    def bump() -> None:  # link errors keep coming on mlx4_0/1
        n = int(counter.read_text().strip() or 0)
        # time.sleep, not stop.wait(0.5): under libfaketime (make test-clock) a timed wait on a
        # condition variable never returned, so the counter stood still
        while not stop.is_set():
            time.sleep(0.5)
            n += 50
            counter.write_text(f"{n}\n")

    bumper = threading.Thread(target=bump, daemon=True)
    services = Services()
    try:
        bumper.start()
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
        services.procs.append(
            start(
                "node-exporter-ib",
                [
                    ne_exe,
                    f"--web.listen-address=127.0.0.1:{ib_port}",
                    "--collector.disable-defaults",
                    "--collector.infiniband",
                    f"--path.sysfs={ib / 'sys'}",
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
                    {"targets": [f"127.0.0.1:{ne_port}"], "labels": {"node": "gpu-node-7"}},
                    {"targets": [f"127.0.0.1:{ib_port}"], "labels": {"node": "gpu-node-8"}}]},
            ],
        }  # fmt: skip
        services.procs.append(start_prometheus(tmp_path, cfg, prom_port, prom_exe))
        wait_http(f"http://127.0.0.1:{prom_port}/-/ready", 60)
        deadline = time.monotonic() + 180  # a cap on a hang
        wanted = (
            'clusterdoctor_finding{rule="GPU001"}',
            'clusterdoctor_source_up{source="kernel-log"} == 0',
            "node_filesystem_size_bytes",
            'rate(node_infiniband_link_error_recovery_total{device="mlx4_0",port="1"}[1m]) > 0',
        )
        missing: list[str] = list(wanted)
        while time.monotonic() < deadline:
            missing = [q for q in wanted if not _query(prom_port, q)]
            if not missing:
                break
            time.sleep(0.5)
        else:
            logs = "\n".join(p.log.read_text(errors="replace")[-1500:] for p in services.procs)
            pytest.fail(f"not in Prometheus within 180 s: {missing}\n{logs}")

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
        assert "clusterdoctor agents: " in src["detail"] and "filesystem rows" in src["detail"], src
        assert "InfiniBand ports" in src["detail"], src
        link = [
            f for f in doc["findings"] if f["rule"] == "RDMA004" and "gpu-node-8:mlx4_0/1" in json.dumps(f)
        ]
        assert link, [(f["rule"], f.get("subject")) for f in doc["findings"]]
        assert any(
            e.get("unit") == "1/s" and "link_error_recovery" in e["description"] for e in link[0]["evidence"]
        ), link
        # the text report names the agent as the finding's source, within 80 columns
        t = run_cli("diagnose", "--prometheus", url, "--since", "10m", env={"COLUMNS": "80"}, timeout=180)
        assert t.code in (0, 1) and "agent on gpu-node-7" in t.out, t.out[-2000:]
        wide = [ln for ln in t.out.splitlines() if len(ln) > 80 and " " in ln.strip()]
        assert not wide, wide[:3]
    finally:
        stop.set()
        services.stop_all()


def test_dead_prometheus_beside_other_inputs_is_a_warning_and_exit_2(tmp_path):
    """A Prometheus that does not answer (a closed port on 127.0.0.1: a real refused connection)
    next to a log file: the log's report, a warning naming the server without its password, exit 2
    (an input not read); alone it is one line and exit 2. Never a traceback, never a clean exit."""
    from tests.conftest import TEST_DATA

    (port,) = free_ports(1)
    url = f"http://user:s3cret@127.0.0.1:{port}"
    log = str(TEST_DATA / "etcd_stall" / "zap" / "etcd-m0.log")
    r = run_cli("diagnose", log, "--prometheus", url, "--since", "5m", "--format", "json")
    assert r.code == 2 and "Traceback" not in r.err, r.err
    doc = json.loads(r.out)
    assert doc["findings"] and any(s["location"] == log for s in doc["sources"])
    dead = [w for w in doc["warnings"] if w.startswith("prometheus not read") and f"127.0.0.1:{port}" in w]
    assert dead and "s3cret" not in r.out + r.err, doc["warnings"]
    assert f"127.0.0.1:{port}" in r.err and "prometheus not read" in r.err  # named on stderr too
    alone = run_cli("diagnose", "--prometheus", url, "--since", "5m")
    assert alone.code == 2 and len(alone.err.strip().splitlines()) == 1 and "cannot connect" in alone.err
    assert "s3cret" not in alone.err and "Traceback" not in alone.err
