"""The agent in a Kubernetes pod: GPU allocations from a real gRPC pod-resources server, and a missing
socket reported as a series (not a crash) while the rest of the scrape still comes out."""

from __future__ import annotations

import io
import threading
import urllib.request

import pytest

from clusterdoctor.serve.agent import Agent, default_sources, make_server
from clusterdoctor.serve.agent_log import Logger

grpc = pytest.importorskip("grpc")

from tests.fake_kubelet import Allocation, start_fake_kubelet  # noqa: E402

GPUS = [f"GPU-0000000{i}-aaaa-bbbb-cccc-00000000000{i}" for i in range(4)]


def _scrape(agent: Agent) -> str:
    srv = make_server(agent, "127.0.0.1", 0)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_address[1]}/metrics", timeout=20) as r:
            return r.read().decode()
    finally:
        srv.shutdown()
        srv.server_close()
        agent.close()


def test_gpu_allocations_and_free_gpus(tmp_path):
    sock = tmp_path / "k.sock"
    server = start_fake_kubelet(sock, [Allocation("training", "gpt-worker-3", "trainer", GPUS[:2])], GPUS)
    try:
        body = _scrape(
            Agent(default_sources(str(tmp_path), [], 5.0, pod_resources_socket=str(sock)), pod_resources=True)
        )
    finally:
        server.stop(None)
    assert 'clusterdoctor_source_up{source="kubernetes"} 1' in body
    assert "clusterdoctor_pod_resources_up 1" in body
    assert (
        f'clusterdoctor_gpu_allocation{{gpu="{GPUS[0]}",resource="nvidia.com/gpu",namespace="training",'
        'pod="gpt-worker-3",container="trainer"} 1'
    ) in body
    assert 'clusterdoctor_node_gpus{state="allocatable"} 4' in body
    assert 'clusterdoctor_node_gpus{state="allocated"} 2' in body
    assert 'clusterdoctor_node_gpus{state="free"} 2' in body
    assert "clusterdoctor_kubernetes_warning" not in body


def test_missing_socket_is_a_series_and_the_rest_still_answers(tmp_path):
    log = io.StringIO()
    agent = Agent(
        default_sources(
            str(tmp_path), [], 5.0, proc_root="/proc", pod_resources_socket=str(tmp_path / "none.sock")
        ),
        pod_resources=True,
        log=Logger("info", "logfmt", log),
    )
    body = _scrape(agent)
    assert 'clusterdoctor_source_up{source="node-placement"} 1' in body
    assert "clusterdoctor_pod_resources_up 0" in body
    # a bounded label; the text of the warning is in the agent's log, never in a label
    assert 'clusterdoctor_kubernetes_warning{source="pod-resources"} 1' in body
    assert "message=" not in body
    assert "level=warn" in log.getvalue() and "no kubelet pod-resources socket" in log.getvalue()
    # the rest of the scrape: rule catalog status and findings counts
    assert 'clusterdoctor_findings{severity="critical"}' in body
    assert "clusterdoctor_rule_skipped" in body


def test_failed_audit_keeps_the_pod_reading(tmp_path):
    """A procfs/sysfs that cannot be read turns into a warning series; pods are still reported."""
    agent = Agent(
        default_sources(
            str(tmp_path), [], 5.0, proc_root="/proc", pod_resources_socket=str(tmp_path / "none.sock")
        ),
        pod_resources=True,
    )
    body = _scrape(agent)
    assert 'clusterdoctor_source_up{source="node-placement"} 1' in body
    assert 'clusterdoctor_kubernetes_warning{source="placement"} 1' in body
    assert "clusterdoctor_pod_resources_up 0" in body
