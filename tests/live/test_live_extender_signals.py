"""The scheduler extender reads real signals: a real Prometheus scrapes three nodes' agents and the
extender (its real HTTP server, as kube-scheduler calls it) filters the node with a critical GPU finding,
scores down the node with a straggler warning, and uses the agents' free-GPU counts.

node-c's agent is the real agent reading a real gRPC pod-resources server (8 GPUs, 2 allocated).
node-a and node-b serve the agent's exposition with findings of the GPU-health layer (rules of the
`gpu` branch) and COMM007 (straggler), which the agent exports as `clusterdoctor_finding`."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from clusterdoctor.serve.agent import Agent, default_sources, make_server
from clusterdoctor.serve.extender import serve_in_thread
from clusterdoctor.serve.signals import PrometheusSignals
from tests.fake_kubelet import Allocation, start_fake_kubelet
from tests.live.conftest import PROMETHEUS, Services, free_ports, need, start, wait_http

pytestmark = pytest.mark.live

GPUS = [f"GPU-c0000000-0000-0000-0000-00000000000{i}" for i in range(8)]
EXPOSITION = {
    "node-a": (
        'clusterdoctor_finding{rule="GPU002",severity="critical",layer="gpu",subject="GPU 3 (GPU-77f0…)"} 2.85\n'
        'clusterdoctor_node_gpus{state="allocatable"} 8\nclusterdoctor_node_gpus{state="free"} 8\n'
    ),
    "node-b": (
        'clusterdoctor_finding{rule="COMM007",severity="warning",layer="comm",subject="rank 5"} 1.6\n'
        'clusterdoctor_finding{rule="NUMA004",severity="warning",layer="numa",subject="x"} 1.6\n'
        'clusterdoctor_node_gpus{state="allocatable"} 8\nclusterdoctor_node_gpus{state="free"} 8\n'
    ),
}


def _expositions() -> ThreadingHTTPServer:
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = EXPOSITION.get(self.path.strip("/").split("/")[0], "").encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            return

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _kubelet(sock):
    pytest.importorskip("grpc")
    return start_fake_kubelet(sock, [Allocation("train", "llm-0", "trainer", GPUS[:2])], GPUS)


def _node(name: str) -> dict:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
        "status": {"allocatable": {"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": "8"}},
    }


def _pod(gpus: int) -> dict:
    return {
        "metadata": {"name": "train-0", "namespace": "ml"},
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)}}}
            ]
        },
    }


def _post(port: int, verb: str, body: dict):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/scheduler/{verb}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_extender_filters_and_scores_on_prometheus_signals(tmp_path):
    prom_exe = need(PROMETHEUS, "prometheus")
    services = Services()
    cleanup = []
    try:
        expo = _expositions()
        cleanup.append(lambda: (expo.shutdown(), expo.server_close()))
        kubelet = _kubelet(tmp_path / "k.sock")
        cleanup.append(lambda: kubelet.stop(None))
        agent = Agent(
            default_sources(str(tmp_path), [], 5.0, pod_resources_socket=str(tmp_path / "k.sock")),
            pod_resources=True,
        )
        asrv = make_server(agent, "127.0.0.1", 0)
        threading.Thread(target=asrv.serve_forever, daemon=True).start()
        cleanup.append(lambda: (asrv.shutdown(), asrv.server_close(), agent.close()))
        (prom_port,) = free_ports(1)
        ep = expo.server_address[1]
        jobs = [
            {"job_name": "clusterdoctor-agent", "static_configs": [
                {"targets": [f"127.0.0.1:{asrv.server_address[1]}"], "labels": {"node": "node-c"}}]},
        ] + [
            {"job_name": f"agent-{n}", "metrics_path": f"/{n}/metrics",
             "static_configs": [{"targets": [f"127.0.0.1:{ep}"], "labels": {"node": n}}]}
            for n in EXPOSITION
        ]  # fmt: skip
        (tmp_path / "p.yml").write_text(
            yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": jobs})
        )
        prom = start(
            "prometheus",
            [prom_exe, f"--config.file={tmp_path / 'p.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            tmp_path,
        )  # fmt: skip
        services.procs.append(prom)
        url = f"http://127.0.0.1:{prom_port}"
        wait_http(
            f"{url}/api/v1/query?query=clusterdoctor_node_gpus",
            60,
            lambda b: len({r["metric"].get("node") for r in json.loads(b)["data"]["result"]}) == 3,
        )
        signals = PrometheusSignals(url, ttl_s=0)
        esrv, _ = serve_in_thread(signals=signals)
        cleanup.append(lambda: (esrv.shutdown(), esrv.server_close()))
        port = esrv.server_address[1]
        nodes = {"items": [_node("node-a"), _node("node-b"), _node("node-c")]}

        res = _post(port, "filter", {"pod": _pod(4), "nodes": nodes})
        kept = [n["metadata"]["name"] for n in res["nodes"]["items"]]
        assert kept == ["node-b", "node-c"]
        assert "GPU002" in res["failedNodes"]["node-a"] and "critical" in res["failedNodes"]["node-a"]

        # node-c: 6 of its 8 GPUs are free (the agent read 2 allocated from pod resources)
        assert _post(port, "filter", {"pod": _pod(7), "nodes": nodes})["failedNodes"]["node-c"].startswith(
            "insufficient GPU: 6 GPU(s)"
        )

        scores = {h["host"]: h["score"] for h in _post(port, "prioritize", {"pod": _pod(4), "nodes": nodes})}
        assert scores["node-a"] == 0
        unsignalled = {
            h["host"]: h["score"] for h in _post_no_signals({"pod": _pod(4), "nodes": nodes}, cleanup)
        }
        # node-b's straggler warning halves its score; node-b without signals scores what it would
        assert scores["node-b"] == int(unsignalled["node-b"] * 0.5)
        assert scores["node-b"] < unsignalled["node-b"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            health = json.loads(r.read())
        assert health["signals"]["error"] is None and health["signals"]["nodes"] == 3
    finally:
        services.stop_all()
        for c in reversed(cleanup):
            c()


def _post_no_signals(body: dict, cleanup: list):
    srv, _ = serve_in_thread()
    cleanup.append(lambda: (srv.shutdown(), srv.server_close()))
    return _post(srv.server_address[1], "prioritize", body)


def test_unreachable_prometheus_leaves_scheduling_as_without_signals():
    (port,) = free_ports(1)  # nothing listens there
    signals = PrometheusSignals(
        f"http://127.0.0.1:{port}", timeout_s=1, ttl_s=0, clock=lambda: time.monotonic()
    )
    esrv, _ = serve_in_thread(signals=signals)
    try:
        body = {"pod": _pod(4), "nodes": {"items": [_node("node-a"), _node("node-c")]}}
        res = _post(esrv.server_address[1], "filter", body)
        assert [n["metadata"]["name"] for n in res["nodes"]["items"]] == ["node-a", "node-c"]
        assert signals.error and f"127.0.0.1:{port}" in signals.error
    finally:
        esrv.shutdown()
        esrv.server_close()
