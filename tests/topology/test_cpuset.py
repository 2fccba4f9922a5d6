"""cpulist/hexmask parsing: round trips and bad input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.topology.cpuset import format_cpulist, parse_cpulist, parse_hexmask


@given(st.sets(st.integers(0, 4096), max_size=200))
def test_cpulist_round_trip(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == tuple(sorted(cpus))


@given(st.sets(st.integers(0, 1023), max_size=100))
def test_hexmask_matches_bits(cpus):
    mask = sum(1 << c for c in cpus)
    text = f"{mask:x}"
    # kernel masks are comma-separated 32-bit words
    padded = text.rjust(((len(text) + 7) // 8) * 8, "0")
    kernel = ",".join(padded[i : i + 8] for i in range(0, len(padded), 8))
    assert parse_hexmask(kernel) == tuple(sorted(cpus))


def test_real_forms():
    assert parse_cpulist("0-1,62-63") == (0, 1, 62, 63)
    assert parse_cpulist("48-63,176-191") == tuple(range(48, 64)) + tuple(range(176, 192))
    assert parse_cpulist("") == ()
    assert parse_cpulist("0-7:2") == (0, 2, 4, 6)
    assert parse_hexmask("0x00000000,00000000,ffff0000") == tuple(range(16, 32))


@given(st.text(max_size=30))
def test_garbage_only_input_error(text):
    try:
        parse_cpulist(text)
    except InputError:
        pass


@pytest.mark.parametrize("bad", ["3-1", "a-b", "1,,x", "0-99999999", "1:0"])
def test_bad_lists(bad):
    with pytest.raises(InputError):
        parse_cpulist(bad)
