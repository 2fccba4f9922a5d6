"""GPU018 on dcgmi health's NVLink watch: every link "currently down" on a GPU whose model is not known
to have NVLink is not judged (a PCIe card without a bridge); other NVLink incidents stay failures."""

from __future__ import annotations

from clusterdoctor.model import Severity
from tests.conftest import diagnose_text

# `dcgmi health -c` as pasted in github.com/NVIDIA/NVSentinel/pull/1481 (corpus ok-gpu-802): a PCIe A100
# without an NVLink bridge, its banner left out by the paste
EXCERPT = (
    "| Overall Health            | Failure                                       |\n"
    "| -> 0                      | Failure                                       |\n"
    "|    -> NVLINK system       | Failure                                       |\n"
    "|                           | GPU 0's NvLink link 0 is currently down ...   |\n"
    "|                           | GPU 0's NvLink link 1 is currently down ...   |\n"
    "|                           | ... (all 12 links)                            |\n"
)


def test_links_down_on_a_gpu_of_unknown_model_is_info(tmp_path):
    f = diagnose_text(tmp_path, EXCERPT)
    assert [x.rule for x in f] == ["GPU018"]
    assert f[0].severity == Severity.INFO and "Not judged" in f[0].summary


def test_nvlink_errors_stay_a_failure(tmp_path):
    text = EXCERPT.replace("is currently down ...", "has CRC errors above limit")
    f = diagnose_text(tmp_path, text)
    assert f[0].rule == "GPU018" and f[0].severity == Severity.CRITICAL
