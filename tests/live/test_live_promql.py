"""Every PromQL expression of the dashboard and of the alerts, executed by a real Prometheus.

Prometheus (Debian's) scrapes, on 127.0.0.1 with ephemeral ports: the clusterdoctor agent (real
RDMA counters from node exporter's sysfs fixture, real etcd logs, and the kubelet pod-resources API
served by a real gRPC server), a real node exporter reading the InfiniBand sysfs fixture, and the
fixture /metrics dumps of etcd, kube-scheduler, the kubelet and dcgm-exporter. It loads the
generated rule file too, so its own rule manager evaluates every alert. Each query must come back
``success``; the queries over series those targets export must come back non-empty (a misspelt
metric name returns nothing without an error, so success alone would not catch it)."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from clusterdoctor.report.dashboard import queries
from clusterdoctor.serve.agent import Agent, default_sources, make_server
from tests.conftest import TEST_DATA, shared_fixture
from tests.fake_kubelet import Allocation, start_fake_kubelet
from tests.live.conftest import NODE_EXPORTER, PROMETHEUS, Services, free_ports, need, start, wait_http

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy/components/grafana-dashboard/clusterdoctor.json"
RULE_FILE = REPO / "deploy/components/prometheus-config/clusterdoctor-rules.yaml"
DUMPS = {
    "etcd": "ctrl/etcd_v3.6.6_minikube_metrics.prom",
    "kube-scheduler": "ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom",
    "kubelet": "ctrl/kubelet_pod_start_sli_aks_after_110pods.prom",
    "dcgm-exporter": "gpu/dcgm-exporter_rtx4000ada_lke_580.95.05_pod-labels.prom",
}
GPUS = ["GPU-a8394b51-c086-568a-9f1a-c1e1c934c44c", "GPU-00000000-1111-2222-3333-444444444444"]


def _dump_server(files: dict[str, bytes]) -> ThreadingHTTPServer:
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = files.get(self.path.strip("/").split("/")[0])
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            return

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _kubelet(sock: Path):
    pytest.importorskip("grpc")
    return start_fake_kubelet(sock, [Allocation("default", "cuda-75454ffb9f-8ljq7", "cuda", GPUS[:1])], GPUS)


def _query(prom: str, expr: str) -> dict:
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:  # 400 with the PromQL error in the body
        return json.loads(e.read())


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    from tests.observe.network.test_rdma import untar_infiniband

    prom_exe = need(PROMETHEUS, "prometheus")
    ne_exe = need(NODE_EXPORTER, "prometheus-node-exporter")
    tmp = tmp_path_factory.mktemp("promql")
    root = untar_infiniband(shared_fixture("ctrl/nic/sysfs/node_exporter_sys_fixtures.ttar"), tmp / "root")
    files = {name: shared_fixture(rel).read_bytes() for name, rel in DUMPS.items()}
    services = Services()
    cleanup = []
    try:
        dumps = _dump_server(files)
        cleanup.append(lambda: (dumps.shutdown(), dumps.server_close()))
        sock = tmp / "k.sock"
        kubelet = _kubelet(sock)
        cleanup.append(lambda: kubelet.stop(None))
        logs = [str(TEST_DATA / "etcd_stall" / "zap" / f"etcd-m{i}.log") for i in range(3)]
        agent = Agent(
            default_sources(str(root), logs, 5.0, pod_resources_socket=str(sock)), pod_resources=True
        )
        asrv = make_server(agent, "127.0.0.1", 0)
        threading.Thread(target=asrv.serve_forever, daemon=True).start()
        cleanup.append(lambda: (asrv.shutdown(), asrv.server_close(), agent.close()))
        ne_port, prom_port = free_ports(2)
        ne = start(
            "node-exporter",
            [ne_exe, f"--web.listen-address=127.0.0.1:{ne_port}", f"--path.sysfs={root}/sys",
             "--collector.disable-defaults", "--collector.infiniband"],
            tmp,
        )  # fmt: skip
        services.procs.append(ne)
        wait_http(f"http://127.0.0.1:{ne_port}/metrics")
        dport = dumps.server_address[1]
        jobs = [
            {"job_name": "clusterdoctor-agent", "static_configs": [
                {"targets": [f"127.0.0.1:{asrv.server_address[1]}"], "labels": {"node": "gpu-node-7"}}]},
            {"job_name": "node", "static_configs": [{"targets": [f"127.0.0.1:{ne_port}"]}]},
        ] + [
            {"job_name": name, "metrics_path": f"/{name}/metrics", "static_configs": [{"targets": [f"127.0.0.1:{dport}"]}]}
            for name in DUMPS
        ]  # fmt: skip
        cfg = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(RULE_FILE)],
            "scrape_configs": jobs,
        }
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        prom = start(
            "prometheus",
            [prom_exe, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            tmp,
        )  # fmt: skip
        services.procs.append(prom)
        url = f"http://127.0.0.1:{prom_port}"
        n = len(jobs)

        def all_up(body: bytes) -> bool:
            res = json.loads(body)["data"]["result"]
            return len(res) == n and all(r["value"][1] == "1" for r in res)

        wait_http(f"{url}/api/v1/query?query=up", 60, all_up)
        time.sleep(4)  # a few samples per series: rate() needs two, the agent's RDMA rates two scrapes
        yield url
    finally:
        services.stop_all()
        for c in reversed(cleanup):
            c()


def test_dashboard_queries_run_and_see_the_exporters(prometheus):
    doc = json.loads(DASHBOARD.read_text())
    exprs = queries(doc)
    assert len(exprs) >= 20
    empty = []
    for expr in exprs:
        res = _query(prometheus, expr.replace("$node", ".*"))
        assert res.get("status") == "success", f"{expr}: {res.get('error')}"
        if not res["data"]["result"]:
            empty.append(expr)
    # the targets above export these series: their panels must show data
    for needle in (
        "etcd_disk_wal_fsync_duration_seconds",
        "etcd_server_leader_changes_seen_total",
        "scheduler_scheduling_attempt_duration_seconds",
        "scheduler_pending_pods",
        "kubelet_pod_start_sli_duration_seconds",
        "clusterdoctor_node_gpus",
        "clusterdoctor_gpu_allocation",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_GPU_TEMP",
        "clusterdoctor_rdma_counter_total",
        "node_infiniband_link_downed_total",
        "node_infiniband_port_data_received_bytes_total",
        "clusterdoctor_source_up",
        "clusterdoctor_rule_skipped",
        "clusterdoctor_diagnosis_timestamp_seconds",
        'up{job="clusterdoctor-agent"',
        "process_resident_memory_bytes",
    ):
        hits = [e for e in exprs if needle in e]
        assert hits, needle
        assert not [e for e in hits if e in empty], f"no data for {needle}: {[e for e in hits if e in empty]}"


def test_alert_expressions_run(prometheus):
    rules = yaml.safe_load(RULE_FILE.read_text())
    exprs = [a["expr"] for g in rules["groups"] for a in g["rules"]]
    assert len(exprs) >= 60
    for expr in exprs:
        res = _query(prometheus, expr)
        assert res.get("status") == "success", f"{expr}: {res.get('error')}"
    # the dcgm-exporter fields the GPU alerts use exist in a real dcgm-exporter scrape
    for metric in (
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    ):
        assert any(metric in e for e in exprs) and _query(prometheus, metric)["data"]["result"], metric
    # the node exporter series the RDMA alerts name exist under those names
    for metric in ("node_infiniband_link_downed_total", "node_infiniband_port_transmit_wait_total"):
        assert any(metric.removeprefix("node_infiniband_").removesuffix("_total") in e for e in exprs)
        assert _query(prometheus, metric)["data"]["result"], metric


def test_prometheus_rule_manager_evaluates_every_alert(prometheus):
    deadline = time.monotonic() + 30
    while True:
        with urllib.request.urlopen(f"{prometheus}/api/v1/rules?type=alert", timeout=20) as r:
            groups = json.loads(r.read())["data"]["groups"]
        rules = [ru for g in groups for ru in g["rules"]]
        if rules and all(ru.get("lastEvaluation", "").startswith("0001") is False for ru in rules):
            break
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    n = sum(len(g["rules"]) for g in yaml.safe_load(RULE_FILE.read_text())["groups"])
    assert len(rules) == n
    bad = [(ru["name"], ru.get("lastError")) for ru in rules if ru.get("health") != "ok"]
    assert bad == []
