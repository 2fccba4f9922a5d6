"""nvidia-smi -L pasted under a command line with a label before the prompt ("(host) # nvidia-smi -L").

Real: NVIDIA/nvidia-container-toolkit#1227 (incident gpu-403, paste-2.txt)."""

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
