"""torch.utils.collect_env reports (observe/comm/collect_env.py) and COMM018 (rules/comm_versions.py): a public
report whose PyTorch CUDA build is too new for the driver; the same report with a driver that suffices, on
Windows, or without the driver line stays quiet."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor import diagnosis
from clusterdoctor.errors import InputError
from clusterdoctor.model import Severity
from clusterdoctor.observe.comm.collect_env import parse_collect_env, sniff_collect_env
from clusterdoctor.rules.comm_versions import _min_driver

PUBLIC = Path(__file__).resolve().parents[2] / "data" / "comm" / "public"
REPORT = PUBLIC / "collect_env_pytorch_30071.txt"
NOW = 1_790_000_000.0


def _findings(path: Path):
    obs = diagnosis.new_observations(clock=lambda: NOW)
    return diagnosis.run(obs, diagnosis.load_sources(obs, [path])).findings


def test_report_fields() -> None:
    text = REPORT.read_text()
    assert sniff_collect_env(text.encode())
    env = parse_collect_env(text)
    assert env.torch_version == "1.3.1" and env.cuda_build == "10.1.243" and env.driver == "410.48"
    assert len(env.gpus) == 8 and env.gpus[0] == "TITAN Xp"
    assert env.get("cuDNN version") is None  # "Could not collect"
    assert env.packages is not None and env.packages.packages == {"numpy": "1.17.4"}


def test_cuda_build_too_new_for_the_driver(tmp_path: Path) -> None:
    # pytorch#30071: torch 1.3.1+cu101 on driver 410.48 (CUDA 10.1 needs 418.39): "Is CUDA available: No"
    (f, *_) = _findings(REPORT)
    assert f.rule == "COMM018" and f.subject == "driver 410.48" and "418.39 or newer" in f.summary
    assert "nccl.cuda-driver-runtime" in f.causes
    text = REPORT.read_text()
    for name, changed in (
        ("new.txt", text.replace("Nvidia driver version: 410.48", "Nvidia driver version: 418.87.01")),
        ("win.txt", text.replace("OS: Ubuntu 16.04.4 LTS", "OS: Microsoft Windows Server 2019 Standard")),
        (
            "nodrv.txt",
            text.replace("Nvidia driver version: 410.48", "Nvidia driver version: Could not collect"),
        ),
    ):
        p = tmp_path / name
        p.write_text(changed)
        assert not [x for x in _findings(p) if x.severity >= Severity.WARNING], name


@pytest.mark.parametrize(
    ("cuda", "key"), [("12.4", "12"), ("12.1.105", "12"), ("11.8", "11"), ("10.2", "10.2"), ("8.0", None)]
)
def test_minimum_driver_by_cuda_release(cuda: str, key: str | None) -> None:
    got = _min_driver(cuda)
    assert (got[0] if got else None) == key


def test_other_text_is_not_a_report() -> None:
    assert not sniff_collect_env(b"PyTorch version: 2.1 is what I use\n")
    with pytest.raises(InputError):
        parse_collect_env("hello\n")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["PyTorch version: 2.1.0", "Nvidia driver version: 5x", "GPU 0: A", "[pip3] a==1", "x"]
        ),
        max_size=8,
    )
)
def test_any_line_mix_is_read_or_refused(lines: list[str]) -> None:
    try:
        env = parse_collect_env("\n".join(lines))
    except InputError:
        return
    assert env.driver is None or env.driver[0].isdigit()
