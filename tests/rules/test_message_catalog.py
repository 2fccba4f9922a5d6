"""Every entry of the message catalogues (rules/catalog): well-formed, its real example line matches it (and is read as
its code, not another's), its pattern is linear on adversarial lines, and its rule explains it."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import tomllib

from clusterdoctor.model import Action, Severity
from clusterdoctor.observe.messages import scan_text
from clusterdoctor.rules.catalog import FAMILIES, all_messages
from clusterdoctor.rules.registry import get_rule, load_all

MESSAGES = all_messages()
CAUSES = Path(__file__).resolve().parents[1] / "data" / "incidents" / "causes"


def _classes() -> set[str]:
    out: set[str] = set()
    for f in CAUSES.glob("*.toml"):
        out |= set(tomllib.loads(f.read_text()))
    return out


CLASSES = _classes()
CODE = re.compile(r"^[A-Z]{2,8}\d{3}$")
NESTED = re.compile(r"\((?:[^()\\]|\\.)*[+*]\)[+*{]")  # (x+)+ (x*)* (x+){n}: catastrophic backtracking


def test_catalogue_is_not_empty_and_codes_are_unique():
    assert MESSAGES
    codes = [m.code for m in MESSAGES]
    assert len(codes) == len(set(codes))
    names = [m.name for m in MESSAGES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("m", MESSAGES, ids=[m.code for m in MESSAGES])
def test_entry_is_complete(m):
    assert CODE.match(m.code), m.code
    assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", m.name), m.name
    assert m.family in FAMILIES and m.layer
    assert m.meaning and m.cause and m.fix and m.title
    assert m.verify and all(" " in v or v.isidentifier() for v in m.verify)
    assert isinstance(m.severity, Severity) and isinstance(m.action, Action)
    assert m.role in ("cause", "symptom")
    assert m.source.startswith("https://"), "each message names its public source"
    assert m.example_source == "" or m.example_source.startswith("https://")
    assert not (set(m.causes) - CLASSES), f"unknown cause classes {set(m.causes) - CLASSES}"
    assert not NESTED.search(m.pattern), "nested quantifier: backtracks on long lines"


@pytest.mark.parametrize("m", MESSAGES, ids=[m.code for m in MESSAGES])
def test_example_is_read_as_its_own_code(m):
    assert m.trigger in m.example, "the trigger is a literal part of every matching line"
    assert m.regex.search(m.example), "the entry's own real line matches its pattern"
    hits = scan_text(m.example + "\n", "example")
    assert m.code in {h.code for h in hits}


@pytest.mark.parametrize("m", MESSAGES, ids=[m.code for m in MESSAGES])
def test_pattern_is_linear_on_a_long_line(m):
    """A 1 MB line of the trigger's own characters (what makes a backtracking pattern explode) is
    matched in time proportional to its length: 10x the line may cost at most ~30x (generous: a
    linear pattern costs 10x; a quadratic one 100x), or 2 s whatever the small line cost. The floor
    keeps a loaded machine from failing a linear pattern (a quadratic one takes minutes on 1 MB)."""

    def cost(n: int) -> float:
        line = (m.trigger + " ") * (n // (len(m.trigger) + 1)) + "x" * (n % 7)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            m.regex.search(line)
            best = min(best, time.perf_counter() - t0)
        return best

    small, big = cost(100_000), cost(1_000_000)
    assert big <= max(30 * small, 2.0), (small, big)


def test_every_entry_is_a_rule_that_explains_itself():
    load_all()
    for m in MESSAGES:
        r = get_rule(m.code)
        assert r is not None and r.layer == m.layer
        sec = r.sections()
        assert set(sec) >= {"Symptom", "Why", "Fix", "Verify"}
        assert r.finding("x").verify == list(m.verify)
