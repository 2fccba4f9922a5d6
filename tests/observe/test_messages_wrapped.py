"""Known messages cut by a line break (a paste wrapped by a terminal, a mail client or a thread's width)
are still read: observe/messages.py finds a trigger that a break splits, where the break stood for a
space (a word wrap) or fell inside a word (a terminal's hard wrap)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.messages import scan_text
from clusterdoctor.rules.catalog import all_messages

INCIDENTS = Path(__file__).resolve().parents[1] / "data" / "incidents"
MESSAGES = [m for m in all_messages() if m.trigger in m.example and len(m.trigger) > 1]


def test_real_word_wrapped_dataloader_bus_error_is_read():
    # stor-301 (dev): "... is killed by signal: Bus\nerror. It is possible ..." as the thread shows it
    text = (INCIDENTS / "stor-301" / "paste.txt").read_text()
    hits = scan_text(text, "paste.txt")
    assert [(h.code, h.line) for h in hits] == [("STOR106", 1)]
    assert "Bus error" in hits[0].text  # the evidence is the message as one line


def test_a_message_that_starts_on_the_next_line_is_not_also_the_previous_lines():
    text = (
        "[74889.542031] pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010\n"
        "[74889.542044] pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
        "type=Transaction Layer, id=0010(Receiver ID)\n"
    )
    lines = sorted(h.line for h in scan_text(text, "kern.log") if h.code == "AER101")
    assert lines == [2]


def test_unwrapped_lines_are_read_once():
    line = "RuntimeError: DataLoader worker (pid 47) is killed by signal: Bus error. It is possible\n"
    assert [h.code for h in scan_text(line * 2, "x")] == ["STOR106", "STOR106"]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_example_cut_inside_its_trigger_is_still_read(data):
    m = data.draw(st.sampled_from(MESSAGES), label="entry")
    at = m.example.index(m.trigger)
    cut = at + data.draw(st.integers(1, len(m.trigger) - 1), label="cut")
    head, tail = m.example[:cut], m.example[cut:]
    word_wrap = head.endswith(" ") or tail.startswith(" ")
    text = head.rstrip(" ") + "\n" + tail.lstrip(" ") if word_wrap else head + "\n" + tail
    codes = {h.code for h in scan_text(text + "\n", "wrapped")}
    assert m.code in codes, text
