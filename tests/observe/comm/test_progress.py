"""tqdm progress bars with the rank that printed them (observe/comm/progress.py)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.comm.progress import scan_progress

INCIDENTS = Path(__file__).resolve().parents[2] / "data" / "incidents"


def test_bar_and_rank_of_a_dev_case() -> None:
    # nccl-015: rank 0's bar, then (on the same line, no newline) rank 2's watchdog message
    (b,) = scan_progress((INCIDENTS / "nccl-015" / "paste.txt").read_text())
    assert (b.rank, b.desc, b.pct, b.left) == (0, "Grouping texts in chunks of 2049", 8, "30:38")


def test_forms() -> None:
    text = (
        "[rank3]: Map (num_proc=8):  42%|████▏     | 4200/10000 [00:12<00:17, 340.1 examples/s]\n"
        "100%|██████████| 10/10 [00:01<00:00,  9.8it/s]\n"
        "loss 0.5 | 10% of the data\n"
    )
    a, b = scan_progress(text)
    assert (a.rank, a.pct, a.desc) == (3, 42, "Map (num_proc=8)")
    assert (b.rank, b.pct, b.desc) == (None, 100, "")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789%|/[]<:,. abdefaultrank\n█")), max_size=300))
def test_any_text_is_scanned_without_error(text: str) -> None:
    for b in scan_progress(text):
        assert 0 <= b.pct <= 100 and b.line >= 1
