"""Bundles: collect on this machine, read back safely, load offline; hostile archives are refused."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.bundle import BundleWriter, load_bundle_observations, read_bundle, sniff_bundle
from clusterdoctor.observe.node_collect import CollectOptions, collect_bundle
from clusterdoctor.redact import REDACTED
from tests.conftest import TEST_DATA, run_cli, shared_fixture
from tests.observe.network.test_rdma import untar_infiniband


def tar_zst(path, members):
    """Write a .tar.zst with the given TarInfo/data pairs (a hostile archive for the tests)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for ti, data in members:
            tar.addfile(ti, io.BytesIO(data) if data is not None else None)
    path.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))
    return path


def reg(name, data=b"x"):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    return ti, data


def test_collect_here_and_read_back(tmp_path):
    secret_log = tmp_path / "kubelet.log"
    real = shared_fixture("ctrl/kubelet_cni_sandbox_timeouts_k8s122938_calico2463.txt").read_text()
    secret_log.write_text(
        real + "Mar 02 20:00:37 k8s-worker-s2 kubelet[9914]: using --token=abcdef0123456789\n"
    )
    out = tmp_path / "b.tar.zst"
    man = collect_bundle(
        out,
        CollectOptions(
            files=[str(secret_log), str(TEST_DATA / "etcd_stall" / "zap" / "etcd-m2.log")],
            journal_units=["no-such-unit"],
            rdma_interval_s=0.05,
            timeout_s=5,
        ),
    )
    assert man["schema"] == "clusterdoctor.bundle/1"
    names = {s["name"]: s for s in man["sources"]}
    assert names["sysfs-topology"]["status"] == "ok"  # this machine's /sys
    assert names["proc-placement"]["status"] == "ok"
    assert all("timeout_s" in s for s in man["sources"])
    files = read_bundle(out)
    assert json.loads(files["manifest.json"])["host"] == man["host"]
    assert (
        b"abcdef0123456789" not in files["files/kubelet.log"]
        and REDACTED.encode() in files["files/kubelet.log"]
    )
    placement = json.loads(files["proc/placement.json"])
    # the same audit `diagnose` runs live: the GPU/RDMA-NIC processes (none on a machine without them)
    assert isinstance(placement, list)
    assert all(r["pid"] > 0 and "cpus_allowed" in r and "flags" in r for r in placement)
    assert sniff_bundle(out.read_bytes()[:65536])
    obs = load_bundle_observations(out)
    kinds = {e.kind for e in obs["events"]}
    assert {"cni.timeout", "sandbox.create_failed", "etcd.heartbeat_slow"} <= kinds


def test_rdma_two_reads_give_rates(tmp_path):
    root = untar_infiniband(
        shared_fixture("ctrl/nic/sysfs/node_exporter_sys_fixtures.ttar"), tmp_path / "root"
    )
    out = tmp_path / "r.tar.zst"
    collect_bundle(
        out, CollectOptions(sysfs_root=str(root), journal_units=[], rdma_interval_s=0.05, timeout_s=5)
    )
    files = read_bundle(out)
    assert "rdma/read1/sys/class/infiniband/mlx4_0/ports/1/counters/port_rcv_data" in files
    obs = load_bundle_observations(out)
    assert {p.name for p in obs["rdma"]} == {"i40iw0/1", "mlx4_0/1", "mlx4_0/2"}
    rr = {r.name: r for r in obs["rdma_rates"]}
    assert rr["mlx4_0/1"].deltas["port_rcv_data"] == 0  # a fixture tree does not move


def test_failed_source_recorded_not_raised(tmp_path):
    out = tmp_path / "f.tar.zst"
    man = collect_bundle(
        out,
        CollectOptions(
            scrape=["http://127.0.0.1:9/metrics"],
            scrape_interval_s=0,
            journal_units=[],
            files=[str(tmp_path / "missing.log")],
            timeout_s=2,
        ),
    )
    failed = {s["name"]: s for s in man["sources"] if s["status"] == "failed"}
    assert "scrape http://127.0.0.1:9/metrics" in failed and f"file {tmp_path / 'missing.log'}" in failed
    assert set(man["failed"]) == set(failed)
    assert read_bundle(out)["manifest.json"]


@pytest.mark.parametrize("name", ["../evil", "/etc/passwd", "a/../../evil", "ok/../../x"])
def test_refuses_escaping_names(tmp_path, name):
    p = tar_zst(tmp_path / "bad.tar.zst", [reg("manifest.json", b"{}"), reg(name)])
    with pytest.raises(InputError, match="escapes"):
        read_bundle(p)


def test_refuses_links_and_devices(tmp_path):
    ln = tarfile.TarInfo("sysfs/link")
    ln.type, ln.linkname = tarfile.SYMTYPE, "/etc/shadow"
    with pytest.raises(InputError, match="link"):
        read_bundle(tar_zst(tmp_path / "l.tar.zst", [reg("manifest.json", b"{}"), (ln, None)]))
    hard = tarfile.TarInfo("h")
    hard.type, hard.linkname = tarfile.LNKTYPE, "manifest.json"
    with pytest.raises(InputError, match="link"):
        read_bundle(tar_zst(tmp_path / "h.tar.zst", [reg("manifest.json", b"{}"), (hard, None)]))
    dev = tarfile.TarInfo("dev")
    dev.type = tarfile.CHRTYPE
    with pytest.raises(InputError, match="regular"):
        read_bundle(tar_zst(tmp_path / "d.tar.zst", [reg("manifest.json", b"{}"), (dev, None)]))


def test_size_limit_and_missing_manifest(tmp_path):
    p = tar_zst(tmp_path / "big.tar.zst", [reg("manifest.json", b"{}"), reg("a", b"0" * 5000)])
    with pytest.raises(InputError, match="more than"):
        read_bundle(p, max_total=1000)
    with pytest.raises(InputError, match="manifest"):
        read_bundle(tar_zst(tmp_path / "nm.tar.zst", [reg("x", b"1")]))


def test_writer_refuses_bad_names():
    w = BundleWriter()
    with pytest.raises(InputError):
        w.add("../x", b"")


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000), st.booleans())
def test_fuzz_read(tmp_path_factory, data, zstd_frame):
    p = tmp_path_factory.mktemp("fz") / "x.tar.zst"
    p.write_bytes(zstandard.ZstdCompressor().compress(data) if zstd_frame else data)
    try:
        read_bundle(p)
    except InputError:
        pass


def test_cli_collect(tmp_path):
    out = tmp_path / "cli.tar.zst"
    r = run_cli(
        "collect", "-o", str(out), "--unit", "no-such-unit", "--rdma-interval", "0.05", "--timeout", "5"
    )
    assert r.code == 0, r.err
    assert out.exists() and "sysfs-topology" in r.err
    assert read_bundle(out)["manifest.json"]


def test_scrape_real_local_endpoint_twice(tmp_path):
    import threading

    from clusterdoctor.serve.agent import Agent, default_sources, make_server

    agent = Agent(default_sources("/nonexistent", [], 2.0))
    srv = make_server(agent, "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/metrics"
        out = tmp_path / "s.tar.zst"
        man = collect_bundle(
            out, CollectOptions(scrape=[url], scrape_interval_s=0.1, journal_units=[], timeout_s=5)
        )
    finally:
        srv.shutdown()
        srv.server_close()
        agent.close()
    (src,) = [s for s in man["sources"] if s["name"] == f"scrape {url}"]
    assert src["status"] == "ok" and len(src["files"]) == 2
    files = read_bundle(out)
    for name in src["files"]:
        assert b'clusterdoctor_source_up{source="rdma-sysfs"} 1' in files[name]


def test_cli_diagnose_bundle_offline(tmp_path):
    out = tmp_path / "inc.tar.zst"
    zap = TEST_DATA / "etcd_stall" / "zap"
    args = ["collect", "-o", str(out), "--unit", "none", "--rdma-interval", "0.05"]
    for f in (
        zap / "etcd-m0.log",
        zap / "etcd-m1.log",
        zap / "etcd-m2.log",
        shared_fixture("ctrl/mlx5_bond_0_show_counters_hw_counters.txt"),
    ):
        args += ["--file", str(f)]
    assert run_cli(*args).code == 0
    r = run_cli("diagnose", str(out), "--format", "json")
    assert r.code == 1, r.err  # findings
    found = {(f["rule"], f["subject"]) for f in json.loads(r.out)["findings"]}
    # the stalled leader (m2, dcdad8be1efaa5ca, named by its own log in the bundle) is the subject
    stalled = "m2 (dcdad8be1efaa5ca)"
    assert {
        ("CHAIN001", f"etcd-stall: {stalled}"),
        ("ETCDLOG002", stalled),
        ("RDMA002", "mlx5_bond_0/1"),
    } <= found
