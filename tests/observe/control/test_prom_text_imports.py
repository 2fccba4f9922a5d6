"""The fresh-process path of the Prometheus text parser (issue 26: >= 10x prometheus_client as a whole
process): reading a real dump imports neither ``re``, ``collections``, ``typing``, dataclasses nor
observe.limits, and the careful per-line loop (``re`` and its patterns) is imported only for a file
the plain-file pass cannot read."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import TEST_DATA

HEAVY = (
    "re",
    "collections",
    "typing",
    "dataclasses",
    "clusterdoctor.observe.limits",
    "clusterdoctor.model",
    "clusterdoctor.observe.control.prom_careful",
)
CODE = f"""
import sys
import clusterdoctor.observe.control.prom_text as m
ms = m.parse_prom_text(open(sys.argv[1], encoding="utf-8").read())
print(len(ms.samples), *sorted(x for x in {HEAVY!r} if x in sys.modules))
"""


def test_real_dump_imports_only_the_parser() -> None:
    p = TEST_DATA / "ctrl" / "prometheus_2.42.0_federate_all.prom"
    out = subprocess.run([sys.executable, "-c", CODE, str(p)], capture_output=True, text=True, check=True)
    n, *heavy = out.stdout.split()
    assert int(n) == 2138 and heavy == []


def test_careful_loop_reads_what_the_plain_pass_refuses() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom clusterdoctor.observe.control.prom_text import parse_prom_text as p\n"
            'ms = p(\'m{a="x}y"} 1 # {trace_id="1"} 2\\nn 3\\n\', openmetrics=False)\n'
            "print(*[s.name for s in ms.samples], 'prom_careful' in str(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["m", "n", "True"]


STREAM = f"""
import sys
from clusterdoctor.observe.control.prom_stream import parse_prom_stream
ms = parse_prom_stream(open(sys.argv[1], "rb"))
print(len(ms), ms.columns is not None, *sorted(x for x in {HEAVY!r} if x in sys.modules))
"""


def test_streamed_file_imports_only_the_parser(tmp_path) -> None:
    """parse_prom_stream (the file in blocks, issue 26 sixth round) on a dump and on dumps put together
    past the size it reads whole: the same import set as parse_prom_text."""
    p = TEST_DATA / "ctrl" / "prometheus_2.42.0_federate_all.prom"
    big = tmp_path / "federate-x16.prom"
    big.write_bytes(p.read_bytes() * 16)  # 5 MB: streamed
    for path, n, streamed in ((p, 2138, "False"), (big, 2138 * 16, "True")):
        out = subprocess.run(
            [sys.executable, "-c", STREAM, str(path)], capture_output=True, text=True, check=True
        )
        got, was_streamed, *heavy = out.stdout.split()
        assert (int(got), was_streamed, heavy) == (n, streamed, [])
