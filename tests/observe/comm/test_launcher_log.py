"""The launchers' own console lines (observe/comm/launcher.py): torchrun, srun, DeepSpeed's launcher are
read, not refused; the messages they hold are still judged; text without them is not claimed."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdoctor import diagnosis
from clusterdoctor.errors import InputError
from clusterdoctor.model import Severity
from clusterdoctor.observe.comm.launcher import parse_launcher_log, sniff_launcher_log

INCIDENTS = Path(__file__).resolve().parents[2] / "data" / "incidents"
NOW = 1_790_000_000.0


def _diagnose(path: Path):
    obs = diagnosis.new_observations(clock=lambda: NOW)
    return diagnosis.run(obs, diagnosis.load_sources(obs, [path]))


@pytest.mark.parametrize(("case", "launcher"), [("nccl-033", "torchrun"), ("ok-nccl-013", "slurm")])
def test_launcher_consoles_of_dev_cases_are_read(case: str, launcher: str) -> None:
    # nccl-033: torchrun's OMP_NUM_THREADS banner (the job then hung); ok-nccl-013: srun's allocation lines
    # and a JAX script's output
    path = INCIDENTS / case / "paste.txt"
    assert sniff_launcher_log(path.read_bytes())
    log = parse_launcher_log(path.read_text())
    assert launcher in log.launchers and log.lines >= 2
    d = _diagnose(path)
    assert not [f for f in d.findings if f.severity >= Severity.WARNING]
    assert not [w for w in d.warnings if w.startswith("not used: ")]


def test_a_message_beside_the_launcher_lines_is_still_judged(tmp_path: Path) -> None:
    # nextflow#5932-style srun output: the step's OOM line is LAUNCH103's
    p = tmp_path / "paste.txt"
    p.write_text(
        "srun: job 11300781 queued and waiting for resources\nsrun: job 11300781 has been allocated resources\n"
        "slurmstepd: error: Detected 1 oom_kill event in StepId=11300781.0. Some of the step tasks have been "
        "OOM Killed.\nsrun: error: node107: task 0: Out Of Memory\n"
    )
    assert "LAUNCH103" in {f.rule for f in _diagnose(p).findings}


def test_text_without_launcher_lines_is_not_claimed() -> None:
    for text in ("torch.distributed is a package\n", "running srun later\n", "[INFO] started\n"):
        assert not sniff_launcher_log(text.encode())
        with pytest.raises(InputError):
            parse_launcher_log(text)


def test_a_kernel_log_with_srun_lines_stays_the_gpu_readers(tmp_path: Path) -> None:
    # written for the test in the two programs' formats: srun's allocation lines, then an NVRM Xid line
    p = tmp_path / "paste.txt"
    p.write_text(
        "srun: job 11300781 queued and waiting for resources\nsrun: job 11300781 has been allocated resources\n"
        "[Tue Mar  5 10:00:00 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
    )
    assert _diagnose(p).findings[0].rule == "GPU001"
