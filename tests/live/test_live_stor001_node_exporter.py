"""Live on 127.0.0.1: STOR001 judges the fleet's node exporter filesystems through a real Prometheus.

Two real node exporters (filesystem collector, `/dev` no longer excluded): gpu-node-8's reads this
machine's filesystems as they are; gpu-node-7's runs in a private mount namespace where `/dev/shm`
is a 1 MiB tmpfs that the test filled (the machine's own /dev/shm is not touched). `diagnose
--prometheus` names gpu-node-7's `/dev/shm` as shared memory exhausted and not gpu-node-8's. Needs
root for the mount namespace (skips otherwise); polling caps are generous, nothing asserts speed."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.conftest import run_cli
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

pytestmark = [pytest.mark.live, pytest.mark.timeout(400)]
MOUNT = "mount -t tmpfs -o size=1m tmpfs /dev/shm"
INCLUDE_DEV = "--collector.filesystem.mount-points-exclude=^/(proc|sys|mnt)($|/)"


_query = prom_query  # tests/live/conftest.py


def test_full_dev_shm_of_one_node_through_prometheus(tmp_path):
    prom_exe = need(PROMETHEUS, "prometheus")
    ne_exe = need(NODE_EXPORTER, "prometheus-node-exporter")
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", MOUNT], capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace with a tmpfs here: {probe.stderr.strip()[:200]}")
    full_port, host_port, prom_port = free_ports(3)
    script = tmp_path / "full-shm.sh"
    script.write_text(
        f"set -e\n{MOUNT}\nhead -c 2000000 /dev/zero > /dev/shm/fill 2>/dev/null || true\n"
        f"exec {ne_exe} --web.listen-address=127.0.0.1:{full_port} --collector.disable-defaults "
        f"--collector.filesystem '{INCLUDE_DEV}'\n"
    )
    services = Services()
    try:
        services.procs.append(
            start("ne-full-shm", ["unshare", "-m", "--propagation", "private", "sh", str(script)], tmp_path)
        )
        services.procs.append(
            start(
                "ne-host",
                [
                    ne_exe,
                    f"--web.listen-address=127.0.0.1:{host_port}",
                    "--collector.disable-defaults",
                    "--collector.filesystem",
                    INCLUDE_DEV,
                ],
                tmp_path,
            )  # fmt: skip
        )
        for port in (full_port, host_port):
            wait_http(f"http://127.0.0.1:{port}/metrics", 30)
        cfg = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "node", "static_configs": [
                {"targets": [f"127.0.0.1:{full_port}"], "labels": {"node": "gpu-node-7"}},
                {"targets": [f"127.0.0.1:{host_port}"], "labels": {"node": "gpu-node-8"}}]}],
        }  # fmt: skip
        services.procs.append(start_prometheus(tmp_path, cfg, prom_port, prom_exe))
        wait_http(f"http://127.0.0.1:{prom_port}/-/ready", 60)
        wanted = (
            'node_filesystem_avail_bytes{node="gpu-node-7",mountpoint="/dev/shm"} == 0',
            'node_filesystem_size_bytes{node="gpu-node-8",mountpoint="/dev/shm"}',
        )
        deadline = time.monotonic() + 180  # a cap on a hang
        missing = list(wanted)
        while time.monotonic() < deadline and missing:
            missing = [q for q in wanted if not _query(prom_port, q)]
            time.sleep(0.5)
        if missing:
            logs = "\n".join(p.log.read_text(errors="replace")[-1500:] for p in services.procs)
            pytest.fail(f"not in Prometheus within 180 s: {missing}\n{logs}")

        url = f"http://127.0.0.1:{prom_port}"
        r = run_cli("diagnose", "--prometheus", url, "--since", "5m", "--format", "json", timeout=180)
        assert r.code == 1, r.err  # a critical finding
        doc = json.loads(r.out)
        shm = [f for f in doc["findings"] if f["rule"] == "STOR001" and f["subject"].endswith(":/dev/shm")]
        assert [f["subject"] for f in shm] == ["gpu-node-7:/dev/shm"], shm
        (f,) = shm
        assert f["severity"] == "critical", f  # (the cause classes are not in the JSON)
        assert "100 % used" in f["summary"] and "shared memory" in f["summary"], f["summary"]
        assert f["evidence"][0]["source"] == "node exporter on gpu-node-7"
        t = run_cli("diagnose", "--prometheus", url, "--since", "5m", env={"COLUMNS": "80"}, timeout=180)
        assert t.code == 1 and "gpu-node-7:/dev/shm" in t.out, t.out[-2000:]
        wide = [ln for ln in t.out.splitlines() if len(ln) > 80 and " " in ln.strip()]
        assert not wide, wide[:3]
    finally:
        services.stop_all()
