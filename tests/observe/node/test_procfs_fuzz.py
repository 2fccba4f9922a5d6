"""Property and fuzz tests for the procfs parsers.

Properties use generated numa_maps lines (constructed, with random page sizes and policies) and
check that bytes add up; fuzzing uses random bytes and mutations of real kernel output (the
captured numa_maps file and this process's live status) and checks that only InputError escapes.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.procfs import parse_numa_maps, parse_status
from tests.conftest import TEST_DATA

REAL_NUMA_MAPS = (TEST_DATA / "procfs" / "numa_maps_policies.txt").read_bytes()
REAL_STATUS = Path("/proc/self/status").read_bytes()

POLICIES = st.sampled_from(
    [
        "default",
        "local",
        "bind:0",
        "bind=static:0-1",
        "interleave:0-3",
        "weighted interleave:0-1",
        "prefer:1",
        "prefer=relative:0",
        "prefer (many):0,1",
        "prefer (many)=static|balancing:2",
    ]
)
PAGE_KB = st.sampled_from([4, 16, 64, 2048, 1048576])
EXTRA_ITEMS = st.lists(
    st.sampled_from(
        [
            "heap",
            "stack",
            "huge",
            "anon=3",
            "dirty=2",
            "mapped=5",
            "mapmax=7",
            "active=0",
            "swapcache=1",
            "writeback=0",
            "file=/usr/lib/x\\040y.so",
            "futureitem=9",
            "newflag",
        ]
    ),
    max_size=4,
)


@st.composite
def vma_lines(draw: st.DrawFn) -> tuple[str, dict[int, int]]:
    """One generated numa_maps line and the bytes per node it holds."""
    addr = draw(st.integers(min_value=0x1000, max_value=(1 << 47) - 1))
    policy = draw(POLICIES)
    items = draw(EXTRA_ITEMS)
    counts = draw(st.dictionaries(st.integers(0, 63), st.integers(1, 10**9), max_size=4))
    page_kb = draw(PAGE_KB)
    parts = [f"{addr:x}", policy, *items]
    if counts:
        parts += [f"N{n}={c}" for n, c in sorted(counts.items())]
        parts.append(f"kernelpagesize_kB={page_kb}")
    return " ".join(parts), {n: c * page_kb * 1024 for n, c in counts.items()}


@given(st.lists(vma_lines(), max_size=40))
def test_bytes_add_up_through_each_lines_page_size(lines: list[tuple[str, dict[int, int]]]) -> None:
    nm = parse_numa_maps("".join(line + "\n" for line, _ in lines))
    expected: dict[int, int] = {}
    for _, by_node in lines:
        for n, b in by_node.items():
            expected[n] = expected.get(n, 0) + b
    assert nm.bytes_by_node == expected
    assert nm.total_bytes == sum(nm.policy_bytes.values())
    assert nm.vma_count == len(lines)
    non_default = [line for line, _ in lines if line.split(" ")[1] != "default"]
    assert len(nm.policy_vmas) == len(non_default)
    assert sum(sum(v.bytes_by_node.values()) for v in nm.policy_vmas) == sum(
        b for p, b in nm.policy_bytes.items() if p != "default"
    )


@given(st.lists(vma_lines(), min_size=2, max_size=30), st.data())
def test_parsing_is_additive_over_line_splits(
    lines: list[tuple[str, dict[int, int]]], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(lines) - 1))
    text = [line + "\n" for line, _ in lines]
    whole = parse_numa_maps("".join(text))
    a, b = parse_numa_maps("".join(text[:cut])), parse_numa_maps("".join(text[cut:]))
    merged = dict(a.bytes_by_node)
    for n, v in b.bytes_by_node.items():
        merged[n] = merged.get(n, 0) + v
    assert whole.bytes_by_node == merged


def _only_input_error(fn, data: bytes) -> None:
    try:
        fn(data, "fuzz")
    except InputError:
        pass


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_random_bytes_only_input_error(data: bytes) -> None:
    _only_input_error(parse_numa_maps, data)
    _only_input_error(parse_status, data)


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    b = bytearray(base)
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "dup"]))
        pos = draw(st.integers(0, max(len(b) - 1, 0)))
        if op == "flip" and b:
            b[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            b[pos:pos] = draw(
                st.sampled_from([b" ", b"\n", b"=", b":", b"N", b"-1", b"\x00", b"\xff", b"9" * 30])
            )
        elif op == "delete":
            del b[pos : pos + draw(st.integers(1, 20))]
        elif op == "truncate":
            del b[pos:]
        elif op == "dup":
            b[pos:pos] = b[pos : pos + draw(st.integers(1, 200))]
    return bytes(b)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(REAL_NUMA_MAPS))
def test_mutated_real_numa_maps_only_input_error(data: bytes) -> None:
    _only_input_error(parse_numa_maps, data)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(REAL_STATUS))
def test_mutated_real_status_only_input_error(data: bytes) -> None:
    _only_input_error(parse_status, data)


def test_real_inputs_parse_unmutated() -> None:
    # The fuzz bases themselves are valid (otherwise the mutation tests prove little).
    assert parse_numa_maps(REAL_NUMA_MAPS).total_bytes > 0
    assert parse_status(REAL_STATUS)["Pid"] > 0


@given(st.lists(vma_lines(), max_size=40), st.booleans())
def test_fast_path_agrees_with_line_parser(lines: list[tuple[str, dict[int, int]]], newline: bool) -> None:
    """The dict-of-tails fast path and the line-by-line parser give the same result."""
    from clusterdoctor.observe.node.procfs import _parse_slow

    text = "\n".join(line for line, _ in lines) + ("\n" if newline and lines else "")
    fast, slow = parse_numa_maps(text), _parse_slow(text, None)
    assert fast.as_dict() == slow.as_dict()


def test_fast_path_agrees_on_live_processes() -> None:
    from clusterdoctor.observe.node.procfs import _parse_fast, _parse_slow, list_pids

    checked = 0
    for pid in list_pids():
        try:
            text = Path(f"/proc/{pid}/numa_maps").read_text()
        except OSError:
            continue
        if text:
            assert _parse_fast(text, None).as_dict() == _parse_slow(text, None).as_dict(), pid
            checked += 1
    assert checked > 0
    text = REAL_NUMA_MAPS.decode()
    assert _parse_fast(text, None).as_dict() == _parse_slow(text, None).as_dict()


# -- the whole-text fast path against the line parser -------------------------------------------

FAST_POLICIES = st.sampled_from(
    ["default", "default", "default", "local", "bind:1", "interleave:0-1", "prefer (many):0-1"]
    + ["weighted interleave:0", "prefer=static:1"]
)
FAST_ITEMS = st.lists(
    st.sampled_from(["huge", "heap", "stack", "anon=7", "dirty=3", "mapped=2", "mapmax=4", "active=0"])
    | st.from_regex(r"file=/[a-zA-Z0-9_./-]{1,20}(\\040[a-z]{1,5})?", fullmatch=True),
    max_size=4,
)


@st.composite
def kernel_lines(draw: st.DrawFn) -> str:
    """A numa_maps line as show_numa_map prints one: items, then N<node>= counts and page size."""
    addr = draw(st.integers(min_value=0x1000, max_value=(1 << 47) - 1))
    parts = [f"{addr:x}", draw(FAST_POLICIES)]
    counts = draw(st.dictionaries(st.integers(0, 7), st.integers(1, 10**6), max_size=3))
    if counts:
        parts += draw(FAST_ITEMS)
        parts += [f"N{n}={c}" for n, c in sorted(counts.items())]
        parts.append(f"kernelpagesize_kB={draw(st.sampled_from([4, 4, 4, 2048, 1048576]))}")
    else:  # no resident page: only the items printed before the page walk
        parts += draw(st.lists(st.sampled_from(["huge", "heap", "stack", "file=/lib/x.so"]), max_size=2))
    return " ".join(parts)


@settings(max_examples=300)
@given(st.lists(kernel_lines(), max_size=60))
def test_whole_text_fast_path_agrees_with_line_parser(lines: list[str]) -> None:
    """On kernel-shaped text the fast path answers itself (no fallback) and as the line parser does."""
    from clusterdoctor.observe.node.procfs import _parse_fast, _parse_slow

    text = "".join(line + "\n" for line in lines)
    fast = _parse_fast(text, None)  # raises _Fallback if it gave up: that would fail here
    assert fast.as_dict() == _parse_slow(text, None).as_dict()
    assert list(fast.policy_bytes) == list(_parse_fast(text, None).policy_bytes)  # deterministic


def _result_or_error(fn, text: str) -> object:
    try:
        return fn(text, "x").as_dict()
    except InputError as e:
        return ("InputError", e.reason, e.line)


@st.composite
def mutated_kernel_text(draw: st.DrawFn) -> str:
    """Kernel-shaped text with a few edits of the kinds that could fool a whole-text scan."""
    text = "".join(line + "\n" for line in draw(st.lists(kernel_lines(), min_size=1, max_size=20)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "policy"]))
        pos = draw(st.integers(0, len(text)))
        if op == "insert":
            edit = draw(st.sampled_from(EDITS))
            text = text[:pos] + edit + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 3)) :]
        else:  # damage the policy of one "default" line (most lines are)
            starts = [m.start() for m in re.finditer(" default", text)]
            if starts:
                at = draw(st.sampled_from(starts))
                text = text[:at] + draw(st.sampled_from(POLICY_EDITS)) + text[at + 8 :]
    return text


EDITS = [" ", "\n", "\t", "N", " N", " N1=", " N2=x", " N0=5", "=", "x", "Z", "\r", "\u00b2", " default"]
EDITS += ["kernelpagesize_kB=", " kernelpagesize_kB=4", "kernelpagesize_kB=0", " N\u00b2=1"]
POLICY_EDITS = [" defaultx", " default\t", " Default", " default ", " default N1=2", " default=static"]
POLICY_EDITS += [" default:0", " bind:0", " default kernelpagesize_kB=x", "default"]


@settings(max_examples=400)
@given(mutated_kernel_text())
@example("1000 default\n1000 defaultx N0=1 kernelpagesize_kB=4\n")
@example("1000 default\n1000 default N0=1 N1=2x N2=3 kernelpagesize_kB=4\n")
@example("1000 default\n1000 default kernelpagesize_kB=abc\n")
@example("1000 default\n\n1000 default N0=1 kernelpagesize_kB=4\n")
def test_fast_path_never_changes_a_result_on_edited_text(text: str) -> None:
    """parse_numa_maps (fast path, falling back) gives exactly the line parser's result or error."""
    from clusterdoctor.observe.node.procfs import _parse_slow

    assert _result_or_error(parse_numa_maps, text) == _result_or_error(_parse_slow, text)


def test_whole_text_fast_path_on_live_maps_with_numpy_and_policies() -> None:
    """Live maps of real children (numpy loaded; a numactl policy where numactl exists) agree too."""
    import shutil
    import subprocess
    import sys

    from clusterdoctor.observe.node.procfs import _parse_fast, _parse_slow

    code = "import sys, numpy; print('ready', flush=True); sys.stdin.read()"
    prefixes = [[]] + ([["numactl", "--preferred-many=0", "--"]] if shutil.which("numactl") else [])
    for prefix in prefixes:
        child = subprocess.Popen(
            [*prefix, sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
            text = Path(f"/proc/{child.pid}/numa_maps").read_text()
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=30)
            child.stdout.close()
        assert text.count("\n") > 100  # numpy's libraries: a map of real size
        fast = _parse_fast(text, None)
        assert fast.as_dict() == _parse_slow(text, None).as_dict()
        assert fast.total_bytes > 0
