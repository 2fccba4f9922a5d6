"""observe/paste: what pasting adds around program output is undone and recorded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.paste import clean, looks_pasted

# --- prompts of RDMA and storage pastes (w-rdma) ------------------------------------------------------


def test_suse_prompt_ends_in_a_greater_than_sign():
    # https://github.com/BSC-ES/autosubmit/issues/596
    p = clean("pr1eld24@login1:~> bsc_quota\nFilesystem      type        blocks\n")
    assert p.commands == ["bsc_quota"] and p.text == "Filesystem      type        blocks\n"


def test_working_directory_prompt_before_a_known_program():
    # https://github.com/microsoft/mscclpp/issues/493
    p = clean("/export/home/me/mscclpp# ibstat\nCA 'mlx5_0'\n")
    assert p.commands == ["ibstat"] and p.text == "CA 'mlx5_0'\n" and p.origin == [2]
    # a path followed by '#' and something that is not a known command is left alone
    assert not looks_pasted("/var/log/app# 42 retries\n")


def test_bare_command_on_the_first_line():
    # https://github.com/openucx/ucx/issues/8229 and issues/6000
    for cmd, body in (
        ("ulimit -a", "core file size          (blocks, -c) 0\n"),
        ("sudo ibv_devinfo", "hca_id: mlx5_0\n"),
        ('grep -E "failed: |error: " /var/log/syslog', "May  4 kernel: x\n"),  # ": " inside quotes
    ):
        p = clean(f"{cmd}\n{body}")
        assert p.commands == [cmd] and p.text == body and p.origin == [2]


def test_a_programs_own_message_is_not_a_command_line():
    for first in (
        "cat: /sys/class/infiniband/mlx5_0/ports/1/state: No such file or directory",
        "dmesg: read kernel buffer failed: Operation not permitted",
        # gpud's message naming the program (github.com/leptonai/gpud, corpus ok-gpu-703): words and ": "
        "nvidia-smi GPU GPU 00000000:E1:00.0 failed to determine if it qualifies for RMA: invalid remapping "
        'failure occurred value: ""',
    ):
        assert clean(first + "\nnext\n").commands == []
    # only the first content line is looked at: output that starts with a program name later stays
    p = clean("hca_id: mlx5_0\nibstat\n")
    assert p.commands == [] and "ibstat" in p.text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_clean_keeps_origin_aligned(text):
    p = clean(text)
    assert p.text.count("\n") == len(p.origin)  # one original line number per line of the output
    assert p.origin == sorted(p.origin) and all(1 <= o for o in p.origin)
