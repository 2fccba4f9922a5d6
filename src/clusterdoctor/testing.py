"""Helpers for the test suite and benchmarks: where the shared real-data fixtures live.

The fixtures sit beside the checkout (``../shared/fixtures``) on developer machines and in CI, but
not in a user's clone. :func:`fixtures_root` finds them (env ``CLUSTERDOCTOR_FIXTURES`` first);
tests skip with a clear reason when they are absent. Tests never copy or edit these files.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "CLUSTERDOCTOR_FIXTURES"


def fixtures_root() -> Path | None:
    """The shared fixtures directory, or None when it is not present."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env)
        return p if p.is_dir() else None
    here = Path(__file__).resolve()
    # src/clusterdoctor/testing.py -> repo root is parents[2]; ../shared/fixtures beside it.
    for base in (here.parents[2], Path.cwd()):
        cand = base.parent / "shared" / "fixtures"
        if cand.is_dir():
            return cand
    return None


def fixture_path(relpath: str) -> Path | None:
    """``relpath`` under the shared fixtures, or None when the fixtures or that file are absent."""
    root = fixtures_root()
    if root is None:
        return None
    p = root / relpath
    return p if p.exists() else None


def prom_client_samples(text: str) -> list[tuple]:
    """prometheus_client's parse of an exposition as comparable ``(name, labels, value, ts)`` tuples
    (the reference our parser is checked against in tests and bench/prom_parse.py)."""
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            v = "NaN" if s.value != s.value else float(s.value)
            out.append((s.name, tuple(sorted(s.labels.items())), v, s.timestamp))
    return out


def comparable_samples(ms: object) -> list[tuple]:
    """Our MetricSet as the same tuples, with prometheus_client's renaming of counters that lack
    ``_total`` (it appends the suffix to their samples)."""
    out = []
    for name, labels, v, t in ms.normalized():  # type: ignore[attr-defined]
        fam = ms.family_of(name)  # type: ignore[attr-defined]
        if fam is not None and fam.type == "counter" and fam.name == name and not name.endswith("_total"):
            name += "_total"
        out.append((name, labels, v, t))
    return out
