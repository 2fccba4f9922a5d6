"""pip freeze / pip list listings (observe/comm/pip_freeze.py): the per-node listings of a dev case, pip's
own formats, and text that is not a listing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.pip_freeze import normalise, parse_packages, sniff_packages

INCIDENTS = Path(__file__).resolve().parents[2] / "data" / "incidents"


def test_pip_freeze_grep_nccl_of_two_nodes() -> None:
    # dev case nccl-007 (`pip freeze | grep nccl` on the problem node and on the others)
    a = (INCIDENTS / "nccl-007" / "paste.txt").read_text()
    b = (INCIDENTS / "nccl-007" / "paste-2.txt").read_text()
    assert sniff_packages(a.encode()) and sniff_packages(b.encode())
    assert parse_packages(a).packages == {"nvidia-nccl-cu11": "2.14.3", "nvidia-nccl-cu12": "2.20.5"}
    assert parse_packages(b).packages["nvidia-nccl-cu12"] == "2.19.3"


def test_pip_freeze_forms_and_pip_list() -> None:
    text = "# comment\n-e git+https://x/y.git#egg=y\ntorch @ file:///wheels/torch.whl\nNVIDIA_NCCL.cu12==2.21.5\nnumpy===1.26.4\n"
    assert sniff_packages(text.encode())
    assert parse_packages(text).packages == {"nvidia-nccl-cu12": "2.21.5", "numpy": "1.26.4"}
    listing = "Package           Version\n----------------- ---------\nnvidia-nccl-cu12  2.18.1\ntorch             2.1.0+cu121\n\n[notice] A new release of pip is available\n"
    assert sniff_packages(listing.encode())
    run = parse_packages(listing)
    assert run.program == "pip list" and run.packages == {
        "nvidia-nccl-cu12": "2.18.1",
        "torch": "2.1.0+cu121",
    }


@pytest.mark.parametrize(
    "text",
    [
        "a == b is how you compare in Python\n",
        "x=1\ny=2\n",  # an env file
        "NCCL_DEBUG=INFO\n",
        "torch==2.1.0\nand then it failed\n",  # not every line a requirement
        "",
    ],
)
def test_other_text_is_not_a_listing(text: str) -> None:
    assert not sniff_packages(text.encode())


def test_normalise_as_pep_503() -> None:
    assert normalise("NVIDIA_NCCL.cu12") == normalise("nvidia-nccl-cu12") == "nvidia-nccl-cu12"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_read_or_refused(text: str) -> None:
    try:
        run = parse_packages(text)
    except InputError:
        return
    assert run.packages and all(v[:1].isdigit() for v in run.packages.values())


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9]{0,10}(?:-[a-z0-9]{1,5})?", fullmatch=True),
        st.from_regex(r"[0-9]{1,3}(?:\.[0-9]{1,3}){0,3}", fullmatch=True),
        min_size=1,
        max_size=20,
    )
)
def test_freeze_round_trip(pkgs: dict[str, str]) -> None:
    text = "".join(f"{k}=={v}\n" for k, v in pkgs.items())
    assert sniff_packages(text.encode())
    assert parse_packages(text).packages == pkgs
