"""The rule catalog itself: documentation, thresholds, skipping — for every rule registered."""

from __future__ import annotations

import pytest

from clusterdoctor.model import Severity, Threshold
from clusterdoctor.rules.registry import REQUIRED_SECTIONS, Observations, load_all, run_rules

RULES = load_all()


def test_catalog_is_not_empty_and_ids_unique():
    ids = [r.id for r in RULES]
    assert len(ids) >= 10
    assert len(ids) == len(set(ids))
    assert len({r.name for r in RULES}) == len(RULES)


@pytest.mark.parametrize("r", RULES, ids=lambda r: r.id)
def test_docstring_has_symptom_why_fix_verify(r):
    sections = r.sections()
    for name in REQUIRED_SECTIONS:
        assert sections.get(name, "").strip(), f"{r.id} docstring lacks a **{name}** section"
    assert "`" in sections["Verify"], f"{r.id}: Verify must give a command in backticks"


@pytest.mark.parametrize("r", RULES, ids=lambda r: r.id)
def test_thresholds_have_sources(r):
    for t in r.thresholds:
        assert isinstance(t, Threshold)
        assert len(t.source) > 10, f"{r.id}: threshold {t.name} has no real source"


def test_rules_with_missing_inputs_are_skipped_with_reason():
    findings, skipped, ran = run_rules(Observations())
    assert findings == [] and ran == []
    assert {s.rule for s in skipped} == {r.id for r in RULES}
    assert all(s.reason and "no " in s.reason.lower() or "single" in s.reason for s in skipped)


def test_finding_defaults_come_from_docstring():
    r = next(r for r in RULES if r.id == "PCIE001")
    f = r.finding("x", severity=Severity.CRITICAL)
    assert f.fix.startswith("use the NIC") and any("nvidia-smi topo -m" in v for v in f.verify)
    assert f.score == float(Severity.CRITICAL) * f.confidence
