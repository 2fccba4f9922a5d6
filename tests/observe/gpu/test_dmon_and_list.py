"""nvidia-smi dmon tables and nvidia-smi -L variants, read from real pastes (tests/data/infra_pastes/SOURCES.md
and the incident corpus), and the readers' behaviour on arbitrary text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.dmon import parse_dmon, sniff_dmon
from clusterdoctor.observe.gpu.load import classify_gpu
from clusterdoctor.observe.gpu.nvidia_smi_table import parse_nvidia_smi_list, sniff_nvidia_smi_list

DATA = Path(__file__).resolve().parents[2] / "data"
PASTES = DATA / "infra_pastes"


def test_dmon_pucvmet_old_columns_quoted_in_markdown():
    """mozilla/DeepSpeech#178: -s pucvmet of a 2016 driver ('temp', no mtemp), '> \\#' quoting."""
    text = (PASTES / "dmon-deepspeech-178-pucvmet.txt").read_bytes()
    assert classify_gpu(text) == "nvidia-smi dmon"
    rep = parse_dmon(text, "p")
    assert [g.index for g in rep.gpus] == [0, 1, 2, 3]
    g1 = rep.gpus[1]
    assert (g1.power_w, g1.temp_c, g1.util_pct, g1.sm_clock_mhz) == (111.0, 84.0, 18.0, 1733.0)
    assert g1.mem_temp_c is None
    assert not rep.warnings


def test_dmon_after_a_banner_last_row_wins():
    """NVIDIA/gpu-monitoring-tools#12: the Go dmon sample, its command and the host engine banner first."""
    rep = parse_dmon((PASTES / "dmon-gpu-monitoring-tools-12.txt").read_text(), "p")
    assert len(rep.gpus) == 1
    g = rep.gpus[0]
    assert (g.index, g.power_w, g.temp_c, g.sm_clock_mhz) == (0, 43.0, 48.0, 936.0)


def test_dmon_with_date_time_and_unsupported_metric():
    # synthetic: the -o DT layout of nvidia-smi(1), a "-" for the memory temperature
    text = (
        "#Date       Time        gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk\n"
        "#YYYYMMDD   HH:MM:SS    Idx     W     C     C     %     %     %     %   MHz   MHz\n"
        " 20240101   10:00:00      0    60    40     -    10     2     0     0  1593  1410\n"
        " 20240101   10:00:01      0    65    41     -    97     9     0     0  1593  1380\n"
    )
    rep = parse_dmon(text, "p")
    g = rep.gpus[0]
    assert (g.util_pct, g.sm_clock_mhz, g.mem_temp_c) == (97.0, 1380.0, None)


def test_dmon_refuses_a_table_it_does_not_know():
    assert not sniff_dmon(b"# gpu   frobs\n# Idx  n\n 0 1\n")
    assert not sniff_dmon(b"# gpu   pwr gtemp\n# Idx W C\n")  # a header, no row
    with pytest.raises(InputError):
        parse_dmon("# gpu pwr\n", "p")


def test_list_with_command_line_and_an_unreachable_gpu():
    """NordicHPC/sonar#72 (incident gpu-406): '$ nvidia-smi -L', then the failing card's NVML error."""
    text = (DATA / "incidents" / "gpu-406" / "paste.txt").read_bytes()
    assert sniff_nvidia_smi_list(text)
    rep = parse_nvidia_smi_list(text, "p")
    assert [g.bus_id for g in rep.gpus if g.index is None] == ["0000:18:00.0"]
    assert [g.index for g in rep.gpus if g.index is not None] == [1, 2, 3]
    assert not rep.warnings


def test_list_bare_command_and_a_last_line_cut_before_its_parenthesis():
    """TheTumultuousUnicornOfDarkness/CPU-X#115 (control ok-gpu-603): 'nvidia-smi -L' with no prompt,
    the UUID line pasted without its closing parenthesis."""
    text = (DATA / "incidents" / "ok-gpu-603" / "paste.txt").read_bytes()
    assert sniff_nvidia_smi_list(text)
    rep = parse_nvidia_smi_list(text, "p")
    assert [(g.index, g.model) for g in rep.gpus] == [(0, "GeForce GTX 1660 Ti")]
    assert rep.gpus[0].uuid == "GPU-e18afb8d-1627-f8ff-2ba3-c05c5a8e9e67"
    # a UUID cut short is not a GPU line: the parenthesis may be missing only after a whole UUID
    assert not sniff_nvidia_smi_list(b"GPU 0: GeForce GTX 1660 Ti (UUID: GPU-e18afb8d-1627\n")


def test_list_needs_at_least_one_gpu_line():
    only_err = b"Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error\n"
    assert not sniff_nvidia_smi_list(only_err)  # the message catalogue reads that line (NVML103)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("# gpuwrtemp0123456789-.\n\\>GPU:()UIDL$"), max_size=400))
def test_readers_never_fail_but_with_an_input_error(text):
    for sniff, parse in ((sniff_dmon, parse_dmon), (sniff_nvidia_smi_list, parse_nvidia_smi_list)):
        ok = sniff(text.encode())
        try:
            rep = parse(text, "p")
        except InputError:
            assert not ok
            continue
        assert rep.gpus
