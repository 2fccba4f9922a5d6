"""OSU Micro-Benchmarks output as pasted (github.com/openucx/ucx, tests/data/incidents/ok-rdma-011):
read as data; anything else is refused in one line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.osu import parse_osu, sniff_osu

BIBW = """\
# OSU MPI Bi-Directional Bandwidth Test v5.7
# Size      Bandwidth (MB/s)
1                       5.95
2                      12.49
1048576             24509.98
4194304             24609.96
"""


def test_title_columns_and_rows():
    assert sniff_osu(BIBW.encode())
    (run,) = parse_osu(BIBW, "osu.txt")
    assert (run.title, run.version, run.columns) == (
        "OSU MPI Bi-Directional Bandwidth Test",
        "5.7",
        ["Bandwidth (MB/s)"],
    )
    assert run.rows[0] == (1, (5.95,)) and run.rows[-1] == (4194304, (24609.96,))


def test_not_osu_is_refused():
    assert not sniff_osu(b"# Size of the thing\n1 2\n")
    with pytest.raises(InputError):
        parse_osu("hello\n1 2\n", "x")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_read_or_refused(text):
    try:
        runs = parse_osu(text, "x")
    except InputError:
        return
    assert all(r.rows for r in runs)
