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
