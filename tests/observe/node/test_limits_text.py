"""ulimit -a and lsmod, on real pastes from public threads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.limits_text import (
    load_limits_text,
    parse_lsmod,
    parse_ulimit,
    sniff_limits_text,
)

# https://github.com/openucx/ucx/issues/8229
ULIMIT_BASH = """\
core file size          (blocks, -c) 0
data seg size           (kbytes, -d) unlimited
scheduling priority             (-e) 0
file size               (blocks, -f) unlimited
pending signals                 (-i) 1030810
max locked memory       (kbytes, -l) 64
max memory size         (kbytes, -m) unlimited
open files                      (-n) 1024
pipe size            (512 bytes, -p) 8
"""

# zsh's `ulimit -a` (Src/Builtins/rlimits.c)
ULIMIT_ZSH = """\
-t: cpu time (seconds)              unlimited
-f: file size (blocks)              unlimited
-l: locked-in-memory size (kbytes)  8192
-n: file descriptors                1024
"""

# https://github.com/SoftRoCE/rxe-dev/issues/65 (`lsmod | grep rxe`: no header)
LSMOD = """\
rdma_rxe              102400  0
ip6_udp_tunnel         16384  1 rdma_rxe
udp_tunnel             16384  1 rdma_rxe
ib_core               208896  14 iw_cxgb3,iw_cxgb4,rdma_cm,ib_cm,iw_cm,mlx4_ib,ib_ucm,iw_nes,ib_iser,ib_umad,ib_uverbs,rdma_rxe,rdma_ucm,ib_ipoib
"""


def test_ulimit_bash_and_zsh():
    u = parse_ulimit(ULIMIT_BASH)
    assert (u.memlock_kib(), u.values["n"], u.values["d"], u.units["l"]) == (64, 1024, None, "kbytes")
    assert u.lines["l"] == 6
    z = parse_ulimit(ULIMIT_ZSH)
    assert (z.memlock_kib(), z.values["n"], z.values["t"]) == (8192, 1024, None)


def test_lsmod_without_header():
    mods = parse_lsmod(LSMOD)
    assert [m.name for m in mods] == ["rdma_rxe", "ip6_udp_tunnel", "udp_tunnel", "ib_core"]
    assert mods[3].used == 14 and "ib_uverbs" in mods[3].users


def test_sniff_tells_lsmod_from_prometheus_samples():
    assert sniff_limits_text(LSMOD.encode())
    assert sniff_limits_text(b"Module                  Size  Used by\nnvidia_peermem         16384  0\n")
    assert not sniff_limits_text(b"node_load1 0.5 1700000000000\nnode_load5 0.7 1700000000000\n")
    assert not sniff_limits_text(b"root 1234 0 bash\nroot 99 0 sshd\n")  # ps-like columns
    assert sniff_limits_text(ULIMIT_BASH.encode()) and sniff_limits_text(ULIMIT_ZSH.encode())


def test_load(tmp_path):
    p = tmp_path / "u.txt"
    p.write_text(ULIMIT_BASH)
    out = load_limits_text(p)
    assert out["ulimits"][0].memlock_kib() == 64
    p.write_text(LSMOD)
    assert len(load_limits_text(p)["kernel_modules"]) == 4
    p.write_text("hello\n")
    with pytest.raises(InputError):
        load_limits_text(p)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_read_or_refused(text):
    for parse in (parse_ulimit, parse_lsmod):
        try:
            parse(text, "t")
        except InputError as e:
            assert e.one_line().startswith("t")
