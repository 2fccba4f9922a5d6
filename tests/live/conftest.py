"""Real services for the live tests, on 127.0.0.1 only: etcd (Debian etcd-server), a Prometheus
node exporter and Prometheus itself. Each fixture skips with the reason when its binary is
absent, uses free ports and a temporary directory, and kills what it started at teardown."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"
PROMETHEUS = "/usr/bin/prometheus"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"


def need(binary: str, package: str) -> str:
    path = binary if Path(binary).exists() else shutil.which(Path(binary).name)
    if not path:
        pytest.skip(f"{binary} not installed (apt-get install {package})")
    return path


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def wait_http(url: str, timeout: float = 15.0, ok=lambda body: True) -> bytes:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                body = r.read()
                if ok(body):
                    return body
        except OSError as e:
            last = e
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {timeout:g} s ({last})")


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path

    def stop(self, kill: bool = False) -> None:
        if self.popen.poll() is None:
            if kill:
                self.popen.kill()
            else:
                self.popen.terminate()
            try:
                self.popen.wait(5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def prom_query(port: int, q: str) -> list[dict]:
    """The result vector of an instant PromQL query to the Prometheus on 127.0.0.1:``port``."""
    import urllib.parse

    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())["data"]["result"]


def start(name: str, args: list[str], tmp: Path) -> Proc:
    log = tmp / f"{name}.log"
    fh = log.open("wb")
    p = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    fh.close()
    return Proc(name, p, log)


def start_prometheus(tmp: Path, cfg: dict, port: int, exe: str = PROMETHEUS) -> Proc:
    """A real Prometheus on 127.0.0.1:``port`` with ``cfg`` (a prometheus.yml as a dict) and its own
    TSDB under ``tmp``; the caller waits for ``/-/ready`` and stops it (``Services``)."""
    import yaml

    (tmp / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    return start(
        "prometheus",
        [exe, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        tmp,
    )  # fmt: skip


@dataclass
class Services:
    procs: list[Proc] = field(default_factory=list)

    def stop_all(self) -> None:
        for p in reversed(self.procs):
            p.stop()


@dataclass
class EtcdMember:
    name: str
    client_url: str
    peer_url: str
    proc: Proc


def start_etcd_cluster(
    tmp: Path, n: int, services: Services, heartbeat_ms: int = 50, election_ms: int = 500
) -> list[EtcdMember]:
    """Start an n-member etcd cluster; its processes join ``services`` (stopped by the caller)."""
    exe = need(ETCD, "etcd-server")
    ports = free_ports(2 * n)
    names = [f"m{i}" for i in range(n)]
    peers = [f"http://127.0.0.1:{ports[2 * i + 1]}" for i in range(n)]
    initial = ",".join(f"{nm}={pu}" for nm, pu in zip(names, peers))
    members = []
    for i, nm in enumerate(names):
        client = f"http://127.0.0.1:{ports[2 * i]}"
        args = [
            exe, "--name", nm, "--data-dir", str(tmp / f"etcd-{nm}"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
            "--initial-cluster", initial, "--initial-cluster-token", f"cd-{tmp.name}",
            "--heartbeat-interval", str(heartbeat_ms), "--election-timeout", str(election_ms),
        ]  # fmt: skip
        proc = start(f"etcd-{nm}", args, tmp)
        services.procs.append(proc)
        members.append(EtcdMember(nm, client, peers[i], proc))
    for m in members:
        wait_http(f"{m.client_url}/health", 20, lambda b: json.loads(b).get("health") == "true")
    return members


@pytest.fixture(scope="session")
def live_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("live")


@pytest.fixture(scope="session")
def stack(live_tmp) -> Iterator[dict]:
    """One etcd, one node exporter and a Prometheus scraping both (and itself) every second."""
    need(PROMETHEUS, "prometheus")
    ne = need(NODE_EXPORTER, "prometheus-node-exporter")
    services = Services()
    try:
        (live_tmp / "single").mkdir()
        etcd = start_etcd_cluster(live_tmp / "single", 1, services)
        ne_port, prom_port = free_ports(2)
        ne_proc = start("node-exporter", [ne, f"--web.listen-address=127.0.0.1:{ne_port}"], live_tmp)
        services.procs.append(ne_proc)
        wait_http(f"http://127.0.0.1:{ne_port}/metrics")
        cfg = live_tmp / "prometheus.yml"
        etcd_target = etcd[0].client_url.split("//")[1]
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            f"  - job_name: etcd\n    static_configs: [{{targets: ['{etcd_target}']}}]\n"
            f"  - job_name: node\n    static_configs: [{{targets: ['127.0.0.1:{ne_port}']}}]\n"
            f"  - job_name: prometheus\n    static_configs: [{{targets: ['127.0.0.1:{prom_port}']}}]\n"
        )
        prom = start(
            "prometheus",
            [
                PROMETHEUS,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={live_tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            live_tmp,
        )
        services.procs.append(prom)
        prom_url = f"http://127.0.0.1:{prom_port}"

        def three_up(body: bytes) -> bool:
            res = json.loads(body)["data"]["result"]
            return len(res) == 3 and all(r["value"][1] == "1" for r in res)

        wait_http(f"{prom_url}/api/v1/query?query=up", 30, three_up)
        yield {
            "etcd": etcd[0],
            "node_exporter_url": f"http://127.0.0.1:{ne_port}/metrics",
            "prometheus_url": prom_url,
            "tmp": live_tmp,
        }
    finally:
        services.stop_all()
