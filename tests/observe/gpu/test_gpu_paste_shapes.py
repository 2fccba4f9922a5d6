"""GPU pastes of shapes the readers missed: nvidia-smi -L under a labelled prompt ("(host) # nvidia-smi -L")
and the fabric manager's journal as older systemd writes it.

Real: NVIDIA/nvidia-container-toolkit#1227 (incident gpu-403, paste-2.txt), dstackai/dstack#2348
(incident gpu-021, paste-2.txt) and the threads named beside the other lines."""

from __future__ import annotations

from pathlib import Path

from clusterdoctor.observe.gpu.nvidia_smi_table import parse_nvidia_smi_list, sniff_nvidia_smi_list

REAL = Path(__file__).resolve().parents[2] / "data" / "incidents" / "gpu-403" / "paste-2.txt"


def test_labelled_prompt_is_the_command_line():
    text = REAL.read_text()
    assert text.startswith("(host) # nvidia-smi -L")
    assert sniff_nvidia_smi_list(text.encode())
    report = parse_nvidia_smi_list(text, "p")
    assert [g.model for g in report.gpus] == ["NVIDIA A10", "NVIDIA A10", "Tesla T4", "Tesla T4"]


def test_a_label_alone_is_not_a_prompt():
    # synthetic: the label without the command is not taken for the command line
    assert not sniff_nvidia_smi_list(
        b"(host) nvidia-smi -L\nGPU 0: Tesla T4 (UUID: GPU-a1329f2e-1e73-88f2-4d4b-1ce18debbc6d)\n"
    )


# --- the fabric manager's journal as older systemd writes it ------------------------------------------

FM_REAL = Path(__file__).resolve().parents[2] / "data" / "incidents" / "gpu-021" / "paste-2.txt"
# https://github.com/NVIDIA/nvtrust/issues/128: newer systemd, the unit named before its Description
FM_NEWER = (
    "Jan 05 14:44:41 TENCENT64 systemd[1]: Starting nvidia-fabricmanager.service - NVIDIA fabric manager service...\n"
    "Jan 05 14:45:28 TENCENT64 systemd[1]: Started nvidia-fabricmanager.service - NVIDIA fabric manager service.\n"
)


def test_fabric_manager_journal_of_older_systemd_is_read():
    from clusterdoctor.observe.gpu.service_logs import KIND_FM, parse_service_log, sniff_service_log

    text = FM_REAL.read_text()  # ssh's known-hosts warning above the one journal line (dstack#2348)
    assert "systemd[1]: Starting NVIDIA fabric manager service..." in text
    assert sniff_service_log(text.encode())
    assert parse_service_log(text, "p").kind == KIND_FM
    assert parse_service_log(FM_NEWER, "p").kind == KIND_FM


def test_other_services_starting_are_not_the_fabric_manager():
    from clusterdoctor.observe.gpu.service_logs import sniff_service_log

    # https://github.com/mrzenc/vgpu4nixos/issues/4: another NVIDIA daemon's systemd lines
    line = "Mar 20 13:55:26 nixos systemd[1]: Starting NVIDIA vGPU Manager Daemon...\n"
    assert not sniff_service_log(line.encode())
