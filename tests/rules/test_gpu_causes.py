"""GPU rules name their cause classes and rank by what acting on them takes; what is normal is no finding.

Xid lines are in the driver's own format (``NVRM: Xid (PCI:%s): %d, pid=%d, name=%s, <text>``,
open-gpu-kernel-modules ``nvErrorLog``); the other inputs are real pastes (dev cases of the incident
corpus, the shared fixtures), some of them edited to state one fault each."""

from __future__ import annotations

import pytest

from clusterdoctor import diagnosis
from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.registry import run_rules
from clusterdoctor.rules.xid_catalog import XID_CATALOG, recovery_action, xid_info
from tests.conftest import TEST_DATA, shared_fixture

CORPUS = TEST_DATA / "incidents"
NVLINK_H100 = "gpu/nvidia-smi-nvlink-s_h100-80gb-vm_18-links-healthy.txt"


def _xid(bus: str, code: int, text: str, pid: int = 4242, name: str = "python3") -> str:
    return f"[Mon Apr  8 17:04:05 2024] NVRM: Xid (PCI:{bus}): {code}, pid={pid}, name={name}, {text}"


def _run(tmp_path, *texts: str):
    files = []
    for i, t in enumerate(texts):
        f = tmp_path / f"in{i}.txt"
        f.write_text(t)
        files.append(f)
    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    diagnosis.load_sources(obs, files)
    findings, skipped, _ = run_rules(obs)
    return findings, {s.rule: s.reason for s in skipped}


def test_every_catalogued_xid_names_a_cause_class_and_an_action():
    for code, info in XID_CATALOG.items():
        assert info.causes, code
        assert isinstance(info.act, Action)
    assert xid_info(79).causes == ("gpu.fallen-off-bus",) and xid_info(79).act == Action.REBOOT_NODE
    assert xid_info(31).causes == ("gpu.xid-app",) and xid_info(31).act == Action.FIX_PROGRAM
    assert set(xid_info(94).causes) == {"gpu.ecc-uncorrectable"} and xid_info(94).act == Action.RESET_DEVICE
    assert xid_info(119).causes == ("gpu.gsp-timeout",) and xid_info(154).causes == ("gpu.reset-required",)
    assert xid_info(9999).causes == ()  # not in the catalogue: names no class


def test_xid_94_outranks_xid_31_on_an_equal_score_whatever_the_input_order(tmp_path):
    """Both are warnings of the same confidence: the GPU that needs a reset leads the program bug."""
    a = _xid("0000:19:00", 31, "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f0a_00000000.")
    b = _xid("0000:3b:00", 94, "Contained: SM (0x1). RST: No, D-RST: No")
    for texts in ((a + "\n" + b + "\n",), (b + "\n" + a + "\n",), (a + "\n", b + "\n"), (b + "\n", a + "\n")):
        findings, _ = _run(tmp_path, *texts)
        xids = [f for f in findings if f.rule == "GPU001"]
        assert [f.severity for f in xids] == [Severity.WARNING, Severity.WARNING]
        assert xids[0].score == xids[1].score
        assert "0000:3b:00" in xids[0].subject and xids[0].action == Action.RESET_DEVICE
        assert "gpu.ecc-uncorrectable" in xids[0].causes and "gpu.xid-app" in xids[1].causes


def test_xid_154_takes_the_action_its_message_names():
    assert recovery_action("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)") == (
        Action.REBOOT_NODE
    )
    assert recovery_action("GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)") == (
        Action.RESET_DEVICE
    )
    assert recovery_action("something else") is None


def test_one_gpu_with_several_xids_names_the_classes_of_its_worst(tmp_path):
    text = "\n".join(
        [
            _xid("0000:a1:00", 79, "GPU has fallen off the bus.", pid=0, name="<unknown>"),
            _xid("0000:a1:00", 45, "Ch 00000010"),
            _xid("0000:a1:00", 13, "Graphics Exception: ESR 0x405840=0xa0040800"),
        ]
    )
    findings, _ = _run(tmp_path, text + "\n")
    (f,) = [x for x in findings if x.rule == "GPU001"]
    assert f.causes == ("gpu.fallen-off-bus",) and f.action == Action.REBOOT_NODE
    assert f.summary.index("Xid 79") < f.summary.index("Xid 13")


@pytest.mark.parametrize(
    ("case", "rule", "cls"),
    [
        ("gpu-029", "GPU001", "gpu.fallen-off-bus"),  # dmesg -T | grep NVRM: Xid 79
        ("gpu-031", "GPU002", "gpu.fallen-off-bus"),  # lspci rev ff and NVML Unknown Error
        ("gpu-011", "GPU005", "gpu.row-remap"),  # -q Remapped Rows excerpt without its GPU header
    ],
)
def test_dev_cases_name_their_class(case, rule, cls):
    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    folder = CORPUS / case
    diagnosis.load_sources(obs, sorted(p for p in folder.iterdir() if p.name.startswith("paste")))
    findings, _, _ = run_rules(obs)
    hit = [f for f in findings if f.rule == rule]
    assert hit and cls in hit[0].causes


def test_unregistered_fabric_is_gpu020(tmp_path):
    """An nvidia-smi -q Fabric section (the layout r550+ prints) in a pasted excerpt."""
    excerpt = "    Fabric\n        State                             : In Progress\n        Status                            : N/A\n"
    findings, _ = _run(tmp_path, excerpt)
    (f,) = [x for x in findings if x.rule == "GPU020"]
    assert f.severity == Severity.CRITICAL and f.causes == ("gpu.fabric-manager",)
    done = excerpt.replace("In Progress", "Completed").replace("N/A", "Success")
    findings, _ = _run(tmp_path, done)
    assert not [x for x in findings if x.rule == "GPU020"]


def _nvlink(model: str, inactive: set[int], gpus: int = 2) -> str:
    """The H100 nvlink -s capture as ``gpus`` GPUs of ``model`` with links ``inactive`` down."""
    src = shared_fixture(NVLINK_H100).read_text().splitlines()
    out = []
    for i in range(gpus):
        for line in src:
            if line.startswith("GPU 0:"):
                out.append(line.replace("GPU 0:", f"GPU {i}:").replace("NVIDIA H100 80GB HBM3", model))
                continue
            n = int(line.split("Link ")[1].split(":")[0]) if "Link " in line else None
            out.append(f"\t Link {n}: <inactive>" if n in inactive else line)
    return "\n".join(out) + "\n"


def test_h100_nvl_bridge_pair_uses_12_of_18_links_by_design(tmp_path):
    findings, _ = _run(tmp_path, _nvlink("NVIDIA H100 NVL", set(range(12, 18))))
    assert not [f for f in findings if f.rule == "GPU011"]


def test_bridged_card_with_fewer_links_than_its_peer_is_judged(tmp_path):
    text = _nvlink("NVIDIA H100 NVL", set(range(12, 18)), gpus=1) + _nvlink(
        "NVIDIA H100 NVL", set(range(4, 18)), gpus=2
    ).split("GPU 1:", 1)[1].join(["GPU 1:", ""])
    findings, _ = _run(tmp_path, text)
    (f,) = [x for x in findings if x.rule == "GPU011"]
    assert f.subject.startswith("GPU1") and "where its bridged peers have 12" in f.summary


def test_sxm_link_down_is_still_a_finding(tmp_path):
    findings, _ = _run(tmp_path, _nvlink("NVIDIA H100 80GB HBM3", {5}, gpus=1))
    (f,) = [x for x in findings if x.rule == "GPU011"]
    assert "link 5" in f.summary and f.causes == ("gpu.nvlink-fault",)


def test_listing_shortened_with_dots_is_not_links_down(tmp_path):
    lines = shared_fixture(NVLINK_H100).read_text().splitlines()
    cut = "\n".join([*lines[:8], "......", ""])  # links 7-17 cut out by the user
    for text in (cut, "$ nvidia-smi nvlink -s\n" + cut, "nvidia-smi nvlink -s\n" + cut):
        findings, _ = _run(tmp_path, text)
        assert not [f for f in findings if f.rule == "GPU011"], text[:40]


def test_listing_with_the_command_line_on_top_is_read(tmp_path):
    text = "nvidia-smi nvlink -s\n" + shared_fixture(NVLINK_H100).read_text()
    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    f = tmp_path / "nv.txt"
    f.write_text(text)
    refs = diagnosis.load_sources(obs, [f])
    assert refs and obs.get("gpu_reports")
    (g,) = obs.get("gpu_reports")[0].gpus
    assert len(g.nvlinks) == 18 and all(n.active for n in g.nvlinks)


def test_idle_clock_reason_is_not_throttling():
    """ok-gpu-001: `nvidia-smi -q | grep -A8 'Clocks Throttle'` of an idle GPU is read and is healthy."""
    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    diagnosis.load_sources(obs, [CORPUS / "ok-gpu-001" / "paste.txt"])
    findings, skipped, ran = run_rules(obs)
    assert "GPU009" in ran and not [f for f in findings if f.severity >= Severity.WARNING]
