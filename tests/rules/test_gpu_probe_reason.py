"""A GPU whose initialisation failed ranks below the driver's own reason (firmware/version skew).

The lines are a real kernel log from https://github.com/ublue-os/bazzite/issues/2668 (incident gpu-048).
"""

from __future__ import annotations

from pathlib import Path

from clusterdoctor import diagnosis

NOW = 1_780_000_000.0

LOG = """\
[   12.014918] NVRM: API mismatch: the client has the version 570.153.02, but
               NVRM: this kernel module has the version 570.144.  Please
               NVRM: make sure that this kernel module and all NVIDIA driver
               NVRM: components have the same version.
[   23.991660] nvidia 0000:07:00.0: Direct firmware load for nvidia/570.144/gsp_ga10x.bin failed with error -2
[   23.991667] NVRM: RmFetchGspRmImages: No firmware image found
[   23.991672] NVRM: GPU 0000:07:00.0: RmInitAdapter failed! (0x61:0x56:1770)
[   23.991822] NVRM: GPU 0000:07:00.0: rm_init_adapter failed, device minor number 0
"""

PROBE_ONLY = """\
[   23.991672] NVRM: GPU 0000:07:00.0: RmInitAdapter failed! (0x61:0x56:1770)
[   23.991822] NVRM: GPU 0000:07:00.0: rm_init_adapter failed, device minor number 0
"""


def _diagnose(tmp_path: Path, text: str) -> list:
    p = tmp_path / "paste.txt"
    p.write_text(text)
    obs = diagnosis.new_observations(clock=lambda: NOW)
    refs = diagnosis.load_sources(obs, [p])
    return diagnosis.run(obs, refs).findings


def test_missing_gsp_firmware_leads_and_names_the_gpu(tmp_path: Path) -> None:
    fs = _diagnose(tmp_path, LOG)
    assert fs[0].rule == "NVRM106"
    assert "0000:07:00" in (fs[0].subject or "")
    lost = [f for f in fs if f.rule == "GPU002"]
    assert lost and lost[0].score < fs[0].score
    assert any(e.description == "driver says why" for e in lost[0].evidence)


def test_probe_failure_alone_still_leads(tmp_path: Path) -> None:
    fs = _diagnose(tmp_path, PROBE_ONLY)
    assert fs[0].rule == "GPU002"
