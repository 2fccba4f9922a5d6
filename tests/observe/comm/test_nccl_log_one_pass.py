"""The NCCL log's one pass (issue 26): the trigger gate answers exactly what a search for every
trigger word would, and folding WARN and version lines into the INFO scan keeps what each reads."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.comm.nccl_log import _GATE, _any_trigger, parse_nccl_log
from clusterdoctor.observe.comm.torch_dist import TRIGGERS

# text made of trigger words, their pieces, and the characters they are looked for by
PIECES = st.sampled_from(
    [*TRIGGERS, *(t[: len(t) // 2] for t in TRIGGERS), *(t[len(t) // 2 :] for t in TRIGGERS)]
    + [rx.pattern[0] for rx in _GATE]
    + ["\n", " ", "NCCL INFO ", "x" * 300]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(PIECES, st.text(max_size=20)), max_size=40))
def test_gate_is_exactly_a_search_for_each_trigger(parts: list[str]) -> None:
    text = "".join(parts)
    assert _any_trigger(text) == any(t in text for t in TRIGGERS)


def test_gate_finds_each_word_among_many_of_its_scan_characters() -> None:
    for word in TRIGGERS:
        for rx in _GATE:
            c = rx.pattern[0]
            assert _any_trigger(c * 10_000 + word + c * 10_000)
            assert _any_trigger(word[:-1] + c * 10_000) == any(t in word[:-1] + c * 10_000 for t in TRIGGERS)


def test_warn_and_version_lines_are_read_in_the_same_pass() -> None:
    text = (
        "# NCCL version 2.18.3+cuda12.2\n"
        "host:1:2 [0] NCCL INFO NCCL version 2.19.1+cuda12.3\n"
        "host:1:2 [0] NCCL WARN Net : Connection closed by remote peer\n"
        "host:1:2 [0] NCCL INFO Using network IB\n"
        "host:1:2 [0] NCCL WARN Cuda failure 'out of memory'\n"
    )
    log = parse_nccl_log(text)
    assert log.version == "2.18.3+cuda12.2"  # the first one, as before
    assert log.warns == ["Net : Connection closed by remote peer", "Cuda failure 'out of memory'"]
    assert log.lines_kept == 2  # the INFO lines only
    assert set(log.networks) == {"IB"}


def test_repeated_nccl_tests_runs_are_reported_as_runs() -> None:
    from clusterdoctor.cli.comm import TABLES_LISTED, nccl_tests_tables
    from clusterdoctor.observe.comm.nccl_tests import parse_nccl_tests

    header = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    table = "".join(
        f"  {s:>10}  {s // 4:>10}     float     sum      -1    10.0    {b:.2f}    {b:.2f}      0    10.0    {b:.2f}    {b:.2f}      0\n"
        for s, b in ((1 << 20, 1.0), (1 << 28, 2.0), (1 << 30, 3.0))
    )
    one = parse_nccl_tests(header + table)
    assert len(one.tables()) == 1 and nccl_tests_tables(one)["tables"] == 1
    many = parse_nccl_tests((header + table) * 150 + table)  # the last table without its header
    doc = nccl_tests_tables(many)
    assert doc["tables"] == 151
    assert [r["size"] for r in doc["rows"]] == [1 << 20, 1 << 28, 1 << 30]  # one row per size
    assert doc["rows"][2]["busbw_gbs"] == 3.0 and doc["rows"][2]["tables"] == 151
    assert len(doc["per_table"]) == TABLES_LISTED and doc["per_table_omitted"] == 51
    assert doc["per_table"][0]["peak_busbw_gbs"] == 2.5
