"""Live: kill the leader of a real 3-member etcd under load and check that `clusterdoctor diagnose`
names it as the cause — first from the incident folder tests/data/etcd_dead_member/capture.sh
writes (the script that made the committed captures), then against the real Prometheus while it
still runs (`--prometheus`), with the members' logs and `etcdctl member list -w json`.

Free 127.0.0.1 ports; skips when etcd/etcdctl/prometheus are not installed; kills what it started.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time

import pytest

from clusterdoctor.observe.control.logs import parse_time
from clusterdoctor.observe.control.prom_api import PromClient
from tests.conftest import TEST_DATA, run_cli
from tests.live.conftest import (
    ETCDCTL,
    PROMETHEUS,
    Services,
    free_ports,
    need,
    start,
    start_etcd_cluster,
    wait_http,
)

pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.timeout(180)]


def _free_base() -> int:
    for base in range(32000, 60000, 101):
        ok = True
        for off in (0, 1, 10, 11, 20, 21, 30):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", base + off))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    pytest.skip("no free port range on 127.0.0.1")


def test_capture_script_folder_names_the_dead_leader(tmp_path):
    for b in ("etcd", "etcdctl", "prometheus", "curl", "bash"):
        if not shutil.which(b):
            pytest.skip(f"{b} not installed (apt-get install etcd-server etcd-client prometheus curl)")
    out = tmp_path / "cap"
    p = subprocess.run(
        ["bash", str(TEST_DATA / "etcd_dead_member" / "capture.sh"), str(out), str(_free_base()), "zap"],
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "METRICS": "1"},
        capture_output=True,
        timeout=150,
    )
    assert (out / "what_happened.txt").exists(), p.stderr.decode()[-2000:]
    happened = (out / "what_happened.txt").read_text()
    leader = happened.split("leader ")[1].split()[0]  # m0, m1 or m2
    killed = parse_time(happened.split("killed (SIGKILL) ")[1].split()[0][:26] + "Z")
    r = run_cli("diagnose", str(out), "--format", "json")
    assert r.code == 1, r.err
    d = json.loads(r.out)
    first = d["findings"][0]
    members = {m["name"]: m for m in json.loads((out / "member_list.json").read_text())["members"]}
    hid = format(members[leader]["ID"], "x")
    assert first["rule"] == "ETCD009" and first["subject"] == f"{leader} ({hid})", first
    assert (
        members[leader]["clientURLs"][0] in first["summary"]
        and members[leader]["peerURLs"][0] in first["summary"]
    )
    assert "It was the leader" in first["summary"]
    stopped = next(e for e in first["evidence"] if e["description"].startswith("stopped: "))
    assert killed is not None and 0 <= stopped["time"] - killed < 2.0  # peers' logs, or up's scrape
    rules = [f["rule"] for f in d["findings"]]
    assert rules.index("ETCD009") < rules.index("ETCD004")  # above the leader change it caused
    # everything the script left that is not an input is listed, nothing aborted
    assert any("what_happened.txt" in w and "unrecognised" in w for w in d["warnings"])


def test_against_the_running_prometheus(tmp_path, monkeypatch):
    # etcd's default (capnslog) log stamps local time without a zone; the suite also runs in
    # TZ=Asia/Shanghai (make test-clock): the members log in UTC, as on a server
    monkeypatch.setenv("TZ", "UTC")
    need(PROMETHEUS, "prometheus")
    etcdctl = need(ETCDCTL, "etcd-client")
    services = Services()
    stop = threading.Event()
    try:
        members = start_etcd_cluster(tmp_path, 3, services, heartbeat_ms=100, election_ms=1000)
        (prom_port,) = free_ports(1)
        targets = ", ".join(f"'{m.client_url.split('//')[1]}'" for m in members)
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: etcd\n    static_configs: [{{targets: [{targets}]}}]\n"
        )
        services.procs.append(
            start(
                "prometheus",
                [
                    PROMETHEUS,
                    f"--config.file={cfg}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                ],
                tmp_path,
            )
        )
        prom = f"http://127.0.0.1:{prom_port}"

        def three_up(body: bytes) -> bool:
            res = json.loads(body)["data"]["result"]
            return len(res) == 3 and all(x["value"][1] == "1" for x in res)

        wait_http(f"{prom}/api/v1/query?query=up", 30, three_up)
        eps = ",".join(m.client_url for m in members)
        env = {"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"}
        ml = subprocess.run(
            [etcdctl, f"--endpoints={eps}", "member", "list", "-w", "json"],
            capture_output=True,
            env=env,
            timeout=10,
        )
        (tmp_path / "member_list.json").write_bytes(ml.stdout)
        status = json.loads(
            subprocess.run(
                [etcdctl, f"--endpoints={eps}", "endpoint", "status", "-w", "json"],
                capture_output=True,
                env=env,
                timeout=10,
            ).stdout
        )
        leader_id = status[0]["Status"]["leader"]
        leader = next(m for m, s in zip(members, status) if s["Status"]["header"]["member_id"] == leader_id)

        def load() -> None:  # a client writing keys until the test ends
            k = 0
            while not stop.is_set():
                k += 1
                subprocess.run(
                    [etcdctl, f"--endpoints={eps}", "--command-timeout=2s", "put", f"k{k % 20}", str(k)],
                    capture_output=True,
                    env=env,
                    timeout=10,
                )

        t = threading.Thread(target=load, daemon=True)
        t.start()
        time.sleep(2)
        # the services' clock, not this process's: the suite also runs under libfaketime, which the
        # Go binaries (etcd, Prometheus) do not see
        clock = PromClient(prom, timeout=5)
        killed = clock.server_time()
        leader.proc.stop(kill=True)
        time.sleep(8)  # election, then a few scrapes of the dead target
        logs = [str(m.proc.log) for m in members]
        r = run_cli(
            "diagnose",
            "--prometheus",
            prom,
            "--since",
            "2m",
            "--step",
            "1",
            *logs,
            str(tmp_path / "member_list.json"),
            "--format",
            "json",
        )
        stop.set()
        t.join(15)
        assert r.code == 1, r.err
        d = json.loads(r.out)
        first = d["findings"][0]
        hid = format(leader_id, "x")
        assert first["rule"] == "ETCD009" and first["subject"] == f"{leader.name} ({hid})", first["summary"]
        assert leader.client_url in first["summary"] and leader.peer_url in first["summary"]
        assert "Prometheus up" in first["summary"] and "It was the leader" in first["summary"]
        stopped = next(e for e in first["evidence"] if e["description"].startswith("stopped: "))
        assert -1.0 <= stopped["time"] - killed < 3.0
    finally:
        stop.set()
        services.stop_all()
