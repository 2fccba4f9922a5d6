"""Flight Recorder dumps (real pickles/JSON captured here, the tutorial's printed dump) and torchfrtrace reports."""

from __future__ import annotations

import os
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.flight_recorder import (
    FrDump,
    FrTraceReport,
    load_flight_recorder,
    parse_flight_recorder,
    sniff_flight_recorder,
)
from tests.conftest import TEST_DATA, shared_fixture

FR = TEST_DATA / "comm" / "fr_gloo_2rank"


def test_tutorial_printed_dump() -> None:
    d = load_flight_recorder(shared_fixture("comm/torch_flight_recorder_dump_unpickled_example.txt"))
    assert isinstance(d, FrDump)
    assert d.version == "2.5"
    assert d.pg_config == {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
    assert d.pg_ranks("0") == [0, 1]
    assert (
        d.pg_status["0"]["last_enqueued_collective"] == 2
        and d.pg_status["0"]["last_started_collective"] == -1
    )
    (e,) = d.entries
    assert (e.record_id, e.pg_id, e.pg_name, e.pg_desc, e.collective_seq_id, e.op) == (
        0,
        0,
        "0",
        "default_pg",
        1,
        "all_reduce",
    )
    assert (e.input_sizes, e.input_dtypes, e.state, e.timeout_ms, e.is_p2p) == (
        [[3, 4]],
        ["Float"],
        "completed",
        600000,
        False,
    )
    assert d.elided and d.warnings


def test_torchfrtrace_report() -> None:
    r = load_flight_recorder(shared_fixture("comm/torchfrtrace_not_all_ranks_joining_2rank.txt"))
    assert isinstance(r, FrTraceReport)
    (m,) = r.mismatches
    assert (m.kind, m.collective_seq_id, m.entry, m.missing_ranks, m.expected_ranks) == (
        "not all ranks joining",
        5,
        4,
        (1,),
        2,
    )
    assert (m.group, m.collective, m.state, m.input_sizes) == (
        "0:default_pg",
        "nccl:all_reduce",
        "scheduled",
        "[[3, 4]]",
    )


@pytest.mark.parametrize("rank", [0, 1])
def test_real_pickle_and_json_dumps_agree(rank: int) -> None:
    pk = load_flight_recorder(FR / f"fr_trace_rank_{rank}.pkl")
    js = load_flight_recorder(FR / f"fr_trace_rank_{rank}.json")
    assert isinstance(pk, FrDump) and isinstance(js, FrDump)
    assert pk.rank == js.rank == rank  # from the file name: the dump carries no rank
    assert [(e.collective_seq_id, e.profiling_name, e.state) for e in pk.entries] == [
        (e.collective_seq_id, e.profiling_name, e.state) for e in js.entries
    ]
    seqs = [e.collective_seq_id for e in pk.entries]
    # make_fr_dumps.py: 3 all_reduce, broadcast, barrier on both ranks, then rank 0 alone issues all_reduce #6.
    assert seqs == ([1, 2, 3, 4, 5, 6] if rank == 0 else [1, 2, 3, 4, 5])
    assert pk.entries[3].profiling_name == "gloo:broadcast"
    assert pk.pg_status["0"]["last_enqueued_collective"] == (6 if rank == 0 else 5)


def test_malicious_pickle_is_refused_without_running_code(tmp_path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(pickle.dumps({"entries": [Evil()]}, protocol=4))
    with pytest.raises(InputError, match="refusing"):
        load_flight_recorder(p)
    assert not marker.exists()


def test_not_a_dump(tmp_path) -> None:
    p = tmp_path / "x.txt"
    p.write_text("just text")
    with pytest.raises(InputError):
        load_flight_recorder(p)
    with pytest.raises(InputError):
        parse_flight_recorder(b'{"entries": 5}')


def test_sniff() -> None:
    assert sniff_flight_recorder((FR / "fr_trace_rank_0.pkl").read_bytes(), "fr_trace_rank_0.pkl")
    assert sniff_flight_recorder((FR / "fr_trace_rank_0.pkl").read_bytes(), "dump.bin")  # by content
    assert sniff_flight_recorder((FR / "fr_trace_rank_1.json").read_bytes(), "x.json")
    assert not sniff_flight_recorder(b'{"traceEvents": []}', "x.json")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=600))
def test_fuzz_pickle_bytes(data: bytes) -> None:
    for blob in (b"\x80" + data, data):
        try:
            parse_flight_recorder(blob)
        except InputError:
            pass


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_fuzz_mutated_real_pickle(data) -> None:
    raw = (FR / "fr_trace_rank_0.pkl").read_bytes()
    i = data.draw(st.integers(1, len(raw)))
    j = data.draw(st.integers(i, min(len(raw), i + 50)))
    junk = data.draw(st.binary(max_size=20))
    try:
        parse_flight_recorder(raw[:i] + junk + raw[j:])
    except InputError:
        pass


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["", "  ", "[rank0]: ", "[default0]:[rank0]: ", "[1,0]<stdout>:"]),
    st.text(alphabet="abc `", max_size=20),
)
def test_report_behind_a_prefix_but_not_in_prose(prefix: str, prose: str) -> None:
    """The real torchfrtrace report behind a launcher prefix is read; the same phrase quoted in the middle
    of a sentence (a README describing a report) is not a report."""
    from clusterdoctor.observe.comm.flight_recorder import parse_frtrace_report, sniff_flight_recorder

    text = shared_fixture("comm/torchfrtrace_not_all_ranks_joining_2rank.txt").read_text()
    prefixed = "\n".join(prefix + ln.strip() for ln in text.splitlines())
    rep = parse_frtrace_report(prefixed)
    assert [(m.collective_seq_id, m.missing_ranks) for m in rep.mismatches] == [(5, (1,))]
    assert sniff_flight_recorder(prefixed.encode())
    quoted = (
        f"The report says{prose} `Not all ranks joining collective 5 at entry 4` when a rank is missing.\n"
    )
    assert not sniff_flight_recorder(quoted.encode())
