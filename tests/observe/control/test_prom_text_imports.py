"""The fresh-process path of the Prometheus text parser (issue 26: >= 10x prometheus_client as a whole
process): reading a real dump imports neither typing, dataclasses nor observe.limits, and the slow-path
line pattern (~8 ms to compile) is compiled only for a file the bulk pattern cannot read."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import TEST_DATA

CODE = """
import sys
import clusterdoctor.observe.control.prom_text as m
ms = m.parse_prom_text(open(sys.argv[1], encoding="utf-8").read())
print(len(ms.samples), m._LINE_RE is None, *sorted(x for x in ("typing", "dataclasses",
      "clusterdoctor.observe.limits", "clusterdoctor.model") if x in sys.modules))
"""


def test_real_dump_imports_only_the_parser() -> None:
    p = TEST_DATA / "ctrl" / "prometheus_2.42.0_federate_all.prom"
    out = subprocess.run([sys.executable, "-c", CODE, str(p)], capture_output=True, text=True, check=True)
    n, lazy, *heavy = out.stdout.split()
    assert int(n) == 2138 and lazy == "True" and heavy == []


def test_slow_path_still_compiles_its_pattern() -> None:
    from clusterdoctor.observe.control import prom_text

    ms = prom_text.parse_prom_text('m{a="x}y"} 1 # {trace_id="1"} 2\nn 3\n', openmetrics=False)
    assert [s.name for s in ms.samples] == ["m", "n"] and prom_text._LINE_RE is not None
