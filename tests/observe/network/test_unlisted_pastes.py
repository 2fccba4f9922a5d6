"""Pastes no reader claims, refused with what they look like (observe/gpu/unlisted.py,
observe/network/unlisted.py), and fi_info's bare error code read (observe/network/fi_info.py, RDMA026).

Every paste is real, from the incident corpus (tests/data/incidents/<case>/, whose case.toml names
the thread) or from the thread named beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.detect import load_path
from clusterdoctor.observe.gpu.unlisted import looks_like
from clusterdoctor.observe.network.unlisted import looks_like_rdma

CORPUS = Path(__file__).resolve().parents[2] / "data" / "incidents"


def refusal(rel: str) -> str:
    with pytest.raises(InputError) as e:
        load_path(CORPUS / rel)
    return e.value.reason


@pytest.mark.parametrize(
    ("rel", "says"),
    [
        ("gpu-031/paste.txt", "a Slurm sinfo table"),
        ("gpu-036/paste.txt", "only the command line(s) `nvidia-smi`, none of the output"),
        ("gpu-056/paste.txt", "a Slurm configuration file (CgroupAutomount, ConstrainCores"),
        ("gpu-056/paste-2.txt", "only the command line(s) `srun -p gpu"),
        ("gpu-056/paste-3.txt", "the value of $CUDA_VISIBLE_DEVICES echoed in a shell"),
        ("rdma-009/paste-3.txt", "an rxe_cfg status table"),
        ("rdma-012/paste-2.txt", "a shell trace (set -x)"),
    ],
)
def test_refused_with_what_it_looks_like(rel, says):
    why = refusal(rel)
    assert says in why
    assert "unrecognised input" not in why


# https://github.com/SoftRoCE/rxe-dev/issues/75: rxe_cfg status with no rxe device at all
RXE_STATUS_75 = """root@arria10:/# rxe_cfg status
  Name  Link  Driver   Speed  NMTU  IPv4_addr  RDEV  RMTU
  eth0  yes   st_gmac         1500  10.0.1.25
"""


def test_rxe_cfg_table_of_another_thread(tmp_path):
    p = tmp_path / "rxe.txt"
    p.write_text(RXE_STATUS_75)
    with pytest.raises(InputError, match="an rxe_cfg status table"):
        load_path(p)


def test_refused_paste_still_gives_its_known_messages():
    # rxe-dev#74: the rxe_cfg table under libibverbs' ABI warning: the warning is read (IB170)
    what, data = load_path(CORPUS / "rdma-501" / "paste.txt")
    assert {h.code for h in data["messages"]} == {"IB170"}
    assert any("rxe_cfg status table" in w for w in data["warnings"])


@pytest.mark.parametrize(
    "rel",
    ["gpu-506/paste.txt", "ok-rdma-013/paste.txt", "rdma-502/paste.txt", "rdma-402/paste.txt"],
)
def test_program_output_is_not_taken_for_an_unlisted_shape(rel):
    text = (CORPUS / rel).read_text()
    assert looks_like(text) is None
    assert looks_like_rdma(text) is None


def test_prose_and_output_together_are_not_a_bare_command():
    # rdma-502 (oneflow#9115): command lines with their output under them
    assert looks_like("ibv_devinfo\nFailed to get IB devices list: Function not implemented\n") is None


# https://github.com/ofiwg/libfabric/issues/5689: a working fi_info -p efa (first block)
FI_INFO_OK = """provider: efa
    fabric: EFA-fe80::39:beff:fe6e:c23
    domain: efa_0-rdm
    version: 2.0
    type: FI_EP_RDM
    protocol: FI_PROTO_EFA
"""


def test_fi_info_error_code_read_as_a_failure():
    # aws-ofi-nccl#1020 (incident rdma-027): "$ fi_info -p efa" then "-61"
    what, data = load_path(CORPUS / "rdma-027" / "paste-2.txt")
    (f,) = data["fi_info_failures"]
    assert (f.code, f.provider, f.line) == (-61, "efa", 2)
    assert what == "fi_info failure (-61: FI_ENODATA: no provider matched)"


def test_fi_info_listing_is_not_a_failure(tmp_path):
    p = tmp_path / "fi.txt"
    p.write_text("$ fi_info -p efa\n" + FI_INFO_OK)
    _, data = load_path(p)
    assert "fi_info_failures" not in data
    assert [b.provider for b in data["fi_providers"]] == ["efa"]


def test_a_lone_number_without_fi_info_is_not_a_failure(tmp_path):
    p = tmp_path / "n.txt"
    p.write_text("$ echo $?\n-61\n")
    with pytest.raises(InputError):
        load_path(p)


def test_rdma026_names_the_provider(tmp_path):
    from clusterdoctor import diagnosis

    obs = diagnosis.new_observations(clock=lambda: 1_700_000_000.0)
    d = diagnosis.run(obs, diagnosis.load_sources(obs, [CORPUS / "rdma-027" / "paste-2.txt"]))
    assert [(f.rule, f.subject) for f in d.findings] == [("RDMA026", "efa")]
