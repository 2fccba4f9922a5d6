"""The budget API of observe/limits.py and the safe pickle reader, unit by unit (the CLI-level
reproducers are in tests/hostile)."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe import limits
from clusterdoctor.observe.safe_pickle import TooDeep, UnsafePickle, loads


def test_every_limit_from_the_environment_and_set_limit(monkeypatch):
    for name, d in limits.LIMITS.items():
        monkeypatch.setenv(d.env, "7")
        assert getattr(limits.current(), name) == 7
        monkeypatch.setenv(d.env, "not a number")
        assert getattr(limits.current(), name) == d.default  # ignored, the default applies
        monkeypatch.delenv(d.env)
    limits.set_limit("inflated=16G")
    try:
        assert limits.current().inflated == 16 << 30
    finally:
        os.environ.pop(limits.LIMITS["inflated"].env, None)
    for bad in ("nope=1", "inflated", "inflated=abc", "records=-5"):
        with pytest.raises(ValueError):
            limits.set_limit(bad)


def test_wall_time_budget_with_an_injected_clock(tmp_path):
    p = tmp_path / "x.log"
    p.write_bytes(b"line\n" * 100_000)
    now = [0.0]
    b = limits.Budget(str(p), limits.Limits(seconds=5), clock=lambda: now[0])
    with limits.open_input(p, budget=b) as f:
        f.read(1000)
        now[0] = 6.0
        with pytest.raises(limits.LimitExceeded) as e:
            f.read()
    assert e.value.limit == "seconds" and "took longer than 5 s" in e.value.one_line()
    assert "--limit seconds=SECONDS or CLUSTERDOCTOR_MAX_SECONDS" in e.value.one_line()


def test_inflated_budget_counts_output_not_input(tmp_path):
    p = tmp_path / "z.gz"
    p.write_bytes(gzip.compress(b"\0" * (8 << 20)))
    b = limits.Budget(str(p), limits.Limits(inflated=4 << 20))
    with (
        pytest.raises(limits.LimitExceeded, match="inflates to more than 4 MiB"),
        limits.open_input(p, budget=b) as f,
    ):
        while f.read(1 << 16):
            pass


def test_records_and_depth_budgets():
    b = limits.Budget("f", limits.Limits(records=10, depth=3))
    b.add_records(10)
    with pytest.raises(limits.LimitExceeded, match="more than 10 records"):
        b.add_records()
    b.check_depth(3)
    with pytest.raises(limits.LimitExceeded, match="nested deeper than 3"):
        b.check_depth(4)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1.5, True, "3", 10**9, -1])
def test_bounded_refuses_what_cannot_size_an_allocation(value):
    with pytest.raises(InputError):
        limits.bounded(value, 4096, "GPU count", "f")
    assert limits.bounded(8, 4096, "GPU count") == 8 and limits.bounded(8.0, 4096, "x") == 8


def test_read_bounded_and_non_regular(tmp_path):
    p = tmp_path / "a"
    p.write_bytes(b"x" * 100)
    assert limits.read_bounded(p, 100) == b"x" * 100
    assert limits.read_bounded(p, 10, prefix=True) == b"x" * 10
    with pytest.raises(limits.LimitExceeded):
        limits.read_bounded(p, 10)
    with pytest.raises(InputError, match="character device"):
        limits.read_bounded("/dev/zero", 10)
    with pytest.raises(FileNotFoundError):
        limits.read_bounded(tmp_path / "missing", 10)


def test_is_tar_from_512_inflated_bytes(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        ti = tarfile.TarInfo("a")
        ti.size = 1
        t.addfile(ti, io.BytesIO(b"x"))
    p = tmp_path / "a.tgz"
    p.write_bytes(buf.getvalue())
    assert limits.is_tar(p)
    q = tmp_path / "b.gz"
    q.write_bytes(gzip.compress(b"not a tar" * 100))
    assert not limits.is_tar(q) and not limits.is_tar("/dev/zero")


def test_archive_scope_shares_counts_and_limits_nesting():
    with limits.archive_scope("outer") as a:
        a.member("m1", 10)
        with limits.archive_scope("outer") as again:  # a second pass over the same archive
            assert again.level == 1
        with limits.archive_scope("inner") as b:
            assert b.level == 2
            b.member("m2", 10)
            with pytest.raises(limits.LimitExceeded, match="nested deeper than 2 levels"):
                with limits.archive_scope("innermost"):
                    pass
        assert a.state.members == 2 and a.state.total == 20


def test_warning_list_keeps_100_and_counts_the_rest():
    w = limits.WarningList(100)
    w.extend(f"line {i}" for i in range(10_000))
    assert len(w) == 100 and w.summary()[-1] == "... and 9,900 more warnings of the same file"


plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=5),
    max_leaves=30,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(value=plain, protocol=st.integers(0, 5))
def test_safe_pickle_reads_what_pickle_writes_for_plain_values(value, protocol):
    data = pickle.dumps(value, protocol=protocol)
    if protocol < 3 and _has_bytes(value):  # bytes in protocol 0-2 are calls (codecs.encode, bytes())
        with pytest.raises(UnsafePickle):
            loads(data)
        return
    assert loads(data) == pickle.loads(data)


def _has_bytes(v) -> bool:
    if isinstance(v, bytes):
        return True
    if isinstance(v, dict):
        return any(_has_bytes(x) for kv in v.items() for x in kv)
    if isinstance(v, (list, tuple)):
        return any(_has_bytes(x) for x in v)
    return False


def test_safe_pickle_sets_and_torch_typed_lists():
    assert loads(pickle.dumps({1, 2}, protocol=2)) == {1, 2}
    assert loads(pickle.dumps(frozenset({3}), protocol=4)) == frozenset({3})
    torch_intlist = b"\x80\x02ctorch.jit._pickle\nbuild_intlist\nq\x00]q\x01(K\x01K\x02e\x85q\x02Rq\x03."
    assert loads(torch_intlist) == [1, 2]


@pytest.mark.parametrize(
    "data",
    [
        b"\x80\x02cbuiltins\nbytearray\nq\x00\x8a\x05\x00\x00\x00\x00\x03\x85R.",  # bytearray(12 GiB)
        b"\x80\x02cbuiltins\neval\nX\x01\x00\x00\x001\x85R.",
        b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00\x96\x00\x00\x00\x00\x00\x00\x00\x00.",  # BYTEARRAY8
        b"\x80\x02]q\x00h\x00a.",  # a list holding itself
        b"\x80\x02(.",  # unbalanced mark
        b"\x80\x02\x8b\xff\xff\xff\x7f" + b"\xff" * 100 + b".",  # LONG4 claiming 2 GiB of digits
    ],
)
def test_safe_pickle_refusals(data):
    with pytest.raises(UnsafePickle):
        loads(data)


def test_safe_pickle_depth():
    deep = b"\x80\x02" + b"]" * 500 + b"a" * 499 + b"."
    with pytest.raises(TooDeep):
        loads(deep, max_depth=100)
    assert loads(deep, max_depth=1000) is not None
