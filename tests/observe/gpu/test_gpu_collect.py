"""``clusterdoctor collect`` gathers GPU tool outputs when the tools exist, and ``diagnose BUNDLE`` reads them.

No GPU tool can run on this machine, so ``nvidia-smi`` and ``dcgmi`` are stand-ins on PATH that print
REAL captures from fixtures/gpu (the H800 host's ``nvidia-smi nvlink --status`` and ``dcgmi discovery
-l``) — what is tested is the collection, the bundle layout and reading it back, not the tools."""

from __future__ import annotations

import os
import stat

from clusterdoctor import diagnosis
from clusterdoctor.observe.bundle import read_bundle
from clusterdoctor.observe.node_collect import CollectOptions, collect_bundle
from tests.conftest import shared_fixture


def _stub(bin_dir, name, body):
    p = bin_dir / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def test_collect_gpu_tools_into_the_bundle_and_read_them_back(tmp_path, monkeypatch):
    nvl = shared_fixture("gpu/nvidia-smi-nvlink-status_h800-x8_8-links_elided.txt")
    disc = shared_fixture("gpu/dcgmi-discovery-l_h800-x8_no-nvswitch.txt")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(
        bin_dir,
        "nvidia-smi",
        f'if [ "$1" = nvlink ] && [ "$2" = -s ]; then cat "{nvl}"; exit 0; fi\necho "NVIDIA-SMI has failed" >&2; exit 9\n',
    )
    _stub(bin_dir, "dcgmi", f'if [ "$1" = discovery ]; then cat "{disc}"; exit 0; fi\nexit 3\n')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    sysroot = tmp_path / "root"
    (sysroot / "sys/devices/system/node").mkdir(parents=True)
    out = tmp_path / "b.tar.zst"
    man = collect_bundle(
        out, CollectOptions(sysfs_root=str(sysroot), journal_units=[], rdma_interval_s=0, timeout_s=5)
    )
    status = {s["name"]: s for s in man["sources"]}
    assert status["gpu nvidia-smi nvlink -s"]["status"] == "ok"
    assert status["gpu dcgmi discovery -l"]["status"] == "ok"
    assert (
        status["gpu nvidia-smi -q -x"]["status"] == "failed"
        and "has failed" in status["gpu nvidia-smi -q -x"]["error"]
    )
    files = read_bundle(out)
    assert files["gpu/nvidia-smi-nvlink-s.txt"] == nvl.read_bytes()
    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    diagnosis.load_sources(obs, [out])
    from clusterdoctor.analyze.gpu_health import gpu_fleet

    fleet = gpu_fleet(obs)
    assert len(fleet.gpus) == 8
    assert fleet.gpus[0].bus_id == "0000:18:00.0" and len(fleet.gpus[0].nvlinks) == 8
