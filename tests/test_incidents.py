"""The incident corpus: every case well-formed, and every dev case the tool gets right stays right.

The verdicts are recorded by `python bench/incidents.py --write` in tests/data/incidents/results.toml;
eval cases are only run by the bench (never asserted here: a failing eval case is not for tuning).
"""

from __future__ import annotations

import re

import pytest
import tomllib

from tests.incident_corpus import CATEGORIES, CORPUS, load_cases, load_results, run_case, split_of

CASES = load_cases()
RESULTS = load_results()
REQUIRED = ("id", "title", "source", "program", "category", "kind", "cause", "cause_class", "split")


def _classes() -> set[str]:
    out = {"healthy"}
    for f in (CORPUS / "causes").glob("*.toml"):
        out |= set(tomllib.loads(f.read_text()))
    return out


CLASSES = _classes()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_is_well_formed(case):
    missing = [k for k in REQUIRED if k not in case.meta]
    assert not missing, f"{case.id}: case.toml lacks {missing}"
    assert case.meta["id"] == case.id
    assert case.category in CATEGORIES
    assert case.meta["kind"] in ("fault", "healthy")
    assert case.meta["split"] in ("dev", "eval")
    if not case.meta.get("moved"):
        assert case.split == split_of(case.meta["source"]), "split comes from the source URL, not a choice"
    unknown = case.classes - CLASSES
    assert not unknown, f"{case.id}: cause classes not in causes/*.toml: {unknown}"
    assert case.healthy == (case.classes == {"healthy"})
    assert case.artefacts, f"{case.id}: no artefact"
    assert all(p.stat().st_size > 0 for p in case.artefacts)
    try:
        re.compile(case.meta.get("subject", ""), re.I)
    except re.error as e:
        pytest.fail(f"{case.id}: subject is not a regex ({e}): escape [ ] ( ) in instance names")


RIGHT_DEV = [
    c for c in CASES if c.split == "dev" and RESULTS.get(c.id, {}).get("verdict") in ("right", "quiet")
]


@pytest.mark.parametrize("case", RIGHT_DEV, ids=[c.id for c in RIGHT_DEV])
def test_dev_case_stays_right(case):
    o = run_case(case)
    want = RESULTS[case.id]["verdict"]
    assert o.verdict == want, f"{case.id}: was {want}, now {o.verdict}; first findings: {o.top}"
