"""The Ray path of ``comm analyze`` and ``sim compare`` (issue 21 item 6), on a real local Ray: the same
report as the serial load, paths or shipped bytes; Ray never chosen implicitly; a Ray that does not
start or answer is one line and exit 2. Skipped with the reason when Ray cannot start here (the
2-core machine under load misses Ray's own 30 s raylet deadline)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.parallel import load_comm_parallel
from clusterdoctor.observe.comm.sources import load_comm_observations
from tests.conftest import run_cli, shared_fixture
from tests.observe.comm.test_parallel import comm_dir, report

pytestmark = [pytest.mark.serial, pytest.mark.timeout(600)]


def test_ray_gives_the_serial_load(tmp_path):
    """A local Ray cluster of 2 CPUs; the workers read the paths, then the bytes the driver ships."""
    pytest.importorskip("ray", reason="Ray not installed (extra `sim`)")
    from clusterdoctor.ray_cluster import start_ray, stop_ray

    d = comm_dir(tmp_path)
    try:
        ray, mine = start_ray(None, 2)
    except InputError as e:
        pytest.skip(f"Ray cannot start on this machine now: {e.one_line()}")
    try:
        serial = report(load_comm_observations([d]))
        for ship in (False, True):
            data, results = load_comm_parallel([d], workers=2, use_ray=True, ship_bytes=ship)
            assert report(data) == serial
            assert results
    finally:
        stop_ray(ray, mine)


def test_a_ray_that_does_not_answer_is_one_line_exit_2(tmp_path):
    """``--ray-address auto`` with no cluster running (a private Ray temp folder): Ray's own error."""
    pytest.importorskip("ray", reason="Ray not installed (extra `sim`)")
    d = comm_dir(tmp_path)
    r = run_cli(
        "comm", "analyze", str(d), "--ray-address", "auto", env={"RAY_TMPDIR": str(tmp_path)}, timeout=300
    )
    if r.code in (0, 1):
        pytest.skip("a Ray cluster is running on this machine: `auto` found it")
    assert r.code == 2, r.err
    lines = [ln for ln in r.err.splitlines() if ln.startswith("clusterdoctor:")]
    assert len(lines) == 1 and "--ray" in lines[0] and "Traceback" not in r.err


def test_a_ray_address_where_nothing_listens_fails_at_once(tmp_path):
    """``--ray-address 127.0.0.1:PORT`` with nothing on the port: one line naming the address, not a
    minute of Ray's own reconnect retries (the port is taken from a socket closed just before)."""
    pytest.importorskip("ray", reason="Ray not installed (extra `sim`)")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = comm_dir(tmp_path)
    r = run_cli("comm", "analyze", str(d), "--ray-address", f"127.0.0.1:{port}", timeout=300)
    assert r.code == 2, r.err
    lines = [ln for ln in r.err.splitlines() if ln.startswith("clusterdoctor:")]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "not reachable" in lines[0]
    assert "Traceback" not in r.err


def test_host_port_of_ray_addresses():
    from clusterdoctor.ray_cluster import _host_port

    assert _host_port("ray://10.0.0.1:10001") == ("10.0.0.1", 10001)
    assert _host_port("127.0.0.1:6379") == ("127.0.0.1", 6379)
    assert _host_port("[::1]:6379") == ("::1", 6379)
    assert _host_port("auto") is None and _host_port("local") is None


def test_sim_compare_workers_never_picks_ray(tmp_path):
    """``--workers 2`` without ``--ray``: two local processes on the first rows of the openb traces;
    Ray is not even imported."""
    pods = shared_fixture("sched/alibaba_gpu_v2023/openb_pod_list_default.csv")
    nodes = shared_fixture("sched/alibaba_gpu_v2023/openb_node_list_gpu_node.csv")
    p, n = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    p.write_text("".join(pods.read_text().splitlines(keepends=True)[:201]))  # header + 200 pods
    n.write_text("".join(nodes.read_text().splitlines(keepends=True)[:31]))  # header + 30 nodes
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from clusterdoctor.cli.sim import _sweep\n"
        f"got = _sweep(Path({str(n)!r}), Path({str(p)!r}), ['best-fit'], [1, 2], 1.3, 2)\n"
        "print(sorted(got['best-fit']), 'ray' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["[1,", "2]", "False"], out.stderr[-2000:]
