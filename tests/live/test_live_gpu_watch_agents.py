"""Live on 127.0.0.1: `gpu health --prometheus` and `watch --prometheus` read the clusterdoctor
agents from a real Prometheus. Real processes only: three agents (the real CLI, `serve agent`), two
fail-slow probes (`clusterdoctor.training.watch`, one rank each, a plain loop: no torch.distributed)
of one job on gpu-node-7 and gpu-node-8, and Prometheus.

- gpu-node-7's agent raises GPU001 from one Xid kernel-log line (a real NVRM line format, written
  by the test and stamped now on the boot clock); gpu-node-9's agent the same, outside the job;
- gpu-node-8's agent cannot read its kernel log: `clusterdoctor_source_up{source="kernel-log"} 0`.

Phases: (1) Prometheus scrapes gpu-node-8's agent only: `gpu health` checked nothing (exit 1, says
so) and warns that its kernel log is down; (2) all of them (config reloaded): `gpu health` ranks
the agents' GPU001, `watch` shows the job's host's only and counts the other node; (3) gpu-node-7's
agent is stopped: `gpu health` says that agent is gone and its finding is no longer current.

Never compares this process's clock with Prometheus's (Go is not faked under `make test-clock`);
polling caps are generous, nothing asserts speed."""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from tests.conftest import run_cli
from tests.live.conftest import PROMETHEUS, Services, free_ports, need, prom_query, start, wait_http

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
PROBE = """
import sys, time
from clusterdoctor.training.watch import install
w = install(None, job="fleet-job", port=int(sys.argv[1]), host=sys.argv[2], gpu="0", jsonl_dir=None,
            exchange=False, tap_collectives=False)
while True:
    time.sleep(0.05)
    w.step()
"""


_query = prom_query  # tests/live/conftest.py


def _wait(port: int, services: Services, present: tuple[str, ...] = (), absent: tuple[str, ...] = ()) -> None:
    deadline = time.monotonic() + 180  # a cap on a hang
    bad: list[str] = []
    while time.monotonic() < deadline:
        bad = [q for q in present if not _query(port, q)] + [
            f"absent: {q}" for q in absent if _query(port, q)
        ]
        if not bad:
            return
        time.sleep(0.5)
    logs = "\n".join(p.log.read_text(errors="replace")[-1500:] for p in services.procs)
    pytest.fail(f"Prometheus not as wanted within 180 s: {bad}\n{logs}")


def _agent(name: str, port: int, klog, tmp_path):
    return start(
        name,
        [sys.executable, "-m", "clusterdoctor.cli.main", "serve", "agent", f"--listen=127.0.0.1:{port}",
         f"--sysfs-root={tmp_path / 'root'}", f"--kernel-log={klog}", "--event-window=1h", "--interval=1s"],
        tmp_path,
    )  # fmt: skip


def _config(path, agents: dict[str, int], probes: dict[str, int]) -> None:
    cfg = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {"job_name": "clusterdoctor-agent", "static_configs": [
                {"targets": [f"127.0.0.1:{p}"], "labels": {"node": n}} for n, p in agents.items()]},
        ],
    }  # fmt: skip
    if probes:
        cfg["scrape_configs"].append(
            {
                "job_name": "clusterdoctor-watch",
                "honor_labels": True,  # the probe's own job label is the training job
                "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in probes.values()]}],
            }
        )
    path.write_text(yaml.safe_dump(cfg))


def _narrow(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if len(ln) > 80 and " " in ln.strip()]


def test_gpu_health_and_watch_read_the_agents(tmp_path):
    prom_exe = need(PROMETHEUS, "prometheus")
    (tmp_path / "root" / "sys").mkdir(parents=True)
    kmsg = tmp_path / "kmsg"
    usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)  # stamped now on the boot clock
    kmsg.write_bytes(f"6,1,1000,-;Linux version 6.1\n3,2,{usec},-;{XID}\n".encode())
    a7, a8, a9, r0, r1, prom_port = free_ports(6)
    services = Services()
    try:
        sick = _agent("agent-7", a7, kmsg, tmp_path)
        services.procs += [sick, _agent("agent-8", a8, tmp_path / "no-kmsg", tmp_path)]
        services.procs.append(_agent("agent-9", a9, kmsg, tmp_path))
        for rank, (port, host) in enumerate(((r0, "gpu-node-7"), (r1, "gpu-node-8"))):
            env = ["env", f"RANK={rank}", "WORLD_SIZE=2", "LOCAL_RANK=0"]
            services.procs.append(
                start(f"probe-{rank}", [*env, sys.executable, "-c", PROBE, str(port), host], tmp_path)
            )
        for port in (a7, a8, a9, r0, r1):
            wait_http(f"http://127.0.0.1:{port}/metrics", 90)
        cfg = tmp_path / "prometheus.yml"
        _config(cfg, {"gpu-node-8": a8}, {})
        services.procs.append(
            start(
                "prometheus",
                [
                    prom_exe,
                    f"--config.file={cfg}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                    "--web.enable-lifecycle",
                ],
                tmp_path,
            )  # fmt: skip
        )
        url = f"http://127.0.0.1:{prom_port}"
        wait_http(f"{url}/-/ready", 60)

        # (1) only the blind agent: nothing checked is never OK
        _wait(prom_port, services, ('clusterdoctor_source_up{node="gpu-node-8",source="kernel-log"} == 0',))
        r = run_cli("gpu", "health", "--prometheus", url, "--window", "10m", "--format", "json", timeout=180)
        assert r.code == 1 and "nothing checked" in r.err and "Traceback" not in r.err, r.err
        doc = json.loads(r.out)
        assert doc["agents"]["gpu_checked"] == [] and doc["agents"]["nodes"] == ["gpu-node-8"], doc["agents"]
        assert doc["agents"]["sources_down"] == [{"node": "gpu-node-8", "source": "kernel-log"}]
        assert any("gpu-node-8" in w and "kernel-log down" in w for w in doc["warnings"]), doc["warnings"]
        assert not doc["findings"], doc["findings"]

        # (2) every agent and the job's probes
        _config(cfg, {"gpu-node-7": a7, "gpu-node-8": a8, "gpu-node-9": a9}, {"0": r0, "1": r1})
        urllib.request.urlopen(urllib.request.Request(f"{url}/-/reload", method="POST"), timeout=10).close()
        _wait(
            prom_port,
            services,
            (
                'clusterdoctor_finding{rule="GPU001",node="gpu-node-7"}',
                'clusterdoctor_finding{rule="GPU001",node="gpu-node-9"}',
                'count(clusterdoctor_watch_steps_total{job="fleet-job"}) == 2',
                'count(count_over_time(clusterdoctor_watch_steps_total{job="fleet-job"}[5m]) > 10) == 2',
            ),
        )
        r = run_cli("gpu", "health", "--prometheus", url, "--window", "10m", "--format", "json", timeout=180)
        assert r.code == 1, r.err  # critical findings (the default --fail-on)
        doc = json.loads(r.out)
        xid = [f for f in doc["findings"] if f["rule"] == "GPU001"]
        assert {f["subject"].split(":")[0] for f in xid} == {"gpu-node-7", "gpu-node-9"}, xid
        assert all(f["severity"] == "critical" and "exported now" in f["summary"] for f in xid), xid
        assert any("GPU 0000:3b:00.0" in f["subject"] for f in xid), xid
        assert doc["agents"]["gpu_checked"] == ["gpu-node-7", "gpu-node-9"], doc["agents"]
        assert {r["subject"].split(":")[0] for r in doc["sick_gpus"]} >= {"gpu-node-7", "gpu-node-9"}
        src = next(s for s in doc["sources"] if s["kind"] == "prometheus")
        assert "agents: 2 GPU findings on 3 nodes" in src["detail"], src
        t = run_cli(
            "gpu", "health", "--prometheus", url, "--window", "10m", env={"COLUMNS": "80"}, timeout=180
        )
        assert t.code == 1 and "agent on gpu-node-7" in t.out and "kernel-log down" in t.out, t.out[-3000:]
        assert "clusterdoctor agents: 3 nodes, GPU health read on 2" in t.out, t.out[:2000]
        assert "GPU rules: no dcgm-exporter" in t.out and "GPU002" not in t.out, t.out[-2000:]
        assert not _narrow(t.out), _narrow(t.out)[:3]

        # watch: the job's hosts only; the other node is one line
        args = ("watch", "--prometheus", url, "--job", "fleet-job", "--since", "5m", "--once")
        w = run_cli(*args, "--format", "json", timeout=180)
        assert w.code == 1 and "Traceback" not in w.err, w.err
        rep = json.loads(w.out)
        mine = [f for f in rep["findings"] if f["rule"] == "GPU001"]
        assert [f["subject"].split(":")[0] for f in mine] == ["gpu-node-7"], rep["findings"]
        assert mine[0]["evidence"][0]["source"] == "agent on gpu-node-7"
        assert rep["agents"]["joined_to_job_hosts"] and rep["agents"]["other_nodes"] == ["gpu-node-9"]
        assert any("gpu-node-8" in x and "kernel-log down" in x for x in rep["warnings"]), rep["warnings"]
        assert any("outside the job (1)" in x and "not shown (1)" in x for x in rep["warnings"]), rep[
            "warnings"
        ]
        assert {j["job"] for j in rep["jobs"]} == {"fleet-job"} and rep["jobs"][0]["ranks"] == 2
        wt = run_cli(*args, env={"COLUMNS": "80"}, timeout=180)
        assert wt.code == 1 and "GPU001" in wt.out and "gpu-node-9" not in wt.out.split("warning:")[0], wt.out
        assert not _narrow(wt.out), _narrow(wt.out)[:3]

        # (3) gpu-node-7's agent stops: gone, its finding no longer current
        sick.stop()
        _wait(prom_port, services, absent=('clusterdoctor_source_up{node="gpu-node-7"}',))
        r = run_cli("gpu", "health", "--prometheus", url, "--window", "10m", "--format", "json", timeout=180)
        doc = json.loads(r.out)
        assert r.code == 1, r.err
        assert any("gpu-node-7" in x and "no longer exported" in x for x in doc["warnings"]), doc["warnings"]
        assert "gpu-node-7" in doc["agents"]["gone"], doc["agents"]
        old = [f for f in doc["findings"] if f["rule"] == "GPU001" and f["subject"].startswith("gpu-node-7")]
        assert old and "cleared before the end of the window" in old[0]["summary"], old
    finally:
        services.stop_all()
