"""The simulator's `--workers` Ray path (extra `sim`) on a real local Ray (`ray.init(num_cpus=2)`):
the same allocation curves as the in-process sweep, on the first rows of the openb traces."""

from __future__ import annotations

import pytest

from tests.conftest import shared_fixture, start_local_ray

ray = pytest.importorskip("ray", reason="Ray not installed (extra `sim`)")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def small_trace(tmp_path):
    pods = shared_fixture("sched/alibaba_gpu_v2023/openb_pod_list_default.csv")
    nodes = shared_fixture("sched/alibaba_gpu_v2023/openb_node_list_gpu_node.csv")
    p, n = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    p.write_text("".join(pods.read_text().splitlines(keepends=True)[:301]))  # header + 300 pods
    n.write_text("".join(nodes.read_text().splitlines(keepends=True)[:41]))  # header + 40 nodes
    return n, p


def test_sweep_on_ray_equals_local(small_trace):
    from clusterdoctor.cli.sim import _sweep
    from clusterdoctor.sim.reproduce import run_sweep

    nodes, pods = small_trace
    start_local_ray(ray)
    try:
        on_ray = _sweep(nodes, pods, ["best-fit", "first-fit"], [1, 2], 1.3, workers=2, use_ray=True)
        assert ray.is_initialized()  # the Ray path ran (it reuses the running local cluster)
    finally:
        ray.shutdown()
    local = run_sweep(nodes, pods, ["best-fit", "first-fit"], [1, 2], 1.3, workers=1)
    assert on_ray == local
    assert set(on_ray) == {"best-fit", "first-fit"} and all(set(v) == {1, 2} for v in on_ray.values())
