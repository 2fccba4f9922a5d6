"""Catalogue entries' other wordings (``variants``), each on a real line from a public thread: the entry's
own ``example`` is tested by test_message_catalog.py, these are the forms it does not show."""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from tests.conftest import diagnose_text

CASES = [
    # github.com/beclab/Olares/pull/3963 (corpus gpu-803): a newer driver names the GPU and its holder
    ("[  201.910514] NVRM: GPU 0000:01:00.0 is already bound to NovaCore.\n", "NVRM105", "GPU 0000:01:00.0"),
    # github.com/bghira/SimpleTuner thread (corpus stor-801): Rust's io::Error wording of ENOSPC
    (
        "safetensors_rust.SafetensorError: Error while serializing: I/O error: No space left on device "
        "(os error 28)\n",
        "STOR104",
        None,
    ),
    # github.com/kubeflow/pytorch-operator/issues/333 (corpus nccl-701): torch < 1.8's TCPStore
    ("ValueError: host not found: Name or service not known\n", "TORCH124", None),
    # github.com/SlinkyProject/containers/issues/14 (corpus ctrl-804): `sinfo -R` cuts the reason
    (
        "REASON               USER      TIMESTAMP           NODELIST\n"
        "gres/gpu count repor slurm     2026-04-14T06:39:53 slinky-0\n",
        "LAUNCH107",
        "node slinky-0",
    ),
    # github.com/clusterinthecloud/terraform/issues/11 (corpus ctrl-910): `sinfo -R` with a custom
    # --Format: the NODELIST column straight after the reason names the drained nodes
    (
        "REASON                                  NODELIST            \n"
        "Low RealMemory                          compute[001-003]    \n",
        "LAUNCH111",
        "node compute[001-003]",
    ),
    # the default `sinfo -R` columns (USER, TIMESTAMP before NODELIST)
    (
        "REASON               USER      TIMESTAMP           NODELIST\n"
        "Low RealMemory       slurm     2026-04-14T06:39:53 gpu-[01-04]\n",
        "LAUNCH111",
        "node gpu-[01-04]",
    ),
    # github.com/NVIDIA/gpu-operator/issues/64 (corpus gpu-751): a driver container's dnf
    (
        "Error: Unable to find a match: elfutils-libelf-devel.x86_64\n",
        "GPUOP102",
        "elfutils-libelf-devel.x86_64",
    ),
]


@pytest.mark.parametrize(("text", "code", "subject"), CASES, ids=[c[1] for c in CASES])
def test_variant_line_is_read_as_its_entry(tmp_path, text, code, subject):
    f = diagnose_text(tmp_path, text)
    assert f and f[0].rule == code
    if subject is not None:
        assert f[0].subject == subject


def test_ipv6_lookup_warning_alone_is_not_a_rendezvous_failure(tmp_path):
    # printed on healthy hosts without IPv6 (github.com/antgroup/animate-x/issues/15): TORCH124 reads
    # only the IPv4 form
    line = (
        "[W socket.cpp:601] [c10d] The IPv6 network addresses of (localhost, 51595) cannot be retrieved "
        "(gai error: -2 - Name or service not known).\n"
    )
    try:
        found = diagnose_text(tmp_path, line)
    except InputError:  # nothing else recognised in it: refused, which is not a finding either
        found = []
    assert all(x.rule != "TORCH124" for x in found)
