"""The incident corpus (tests/data/incidents): load the cases, run `diagnose` on one, score its result.

Shared by bench/incidents.py (the table) and tests/test_incidents.py (the ratchet: dev cases that are
right stay right). See tests/data/incidents/README.md for the case format and the dev/eval split.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

# the corpus of this checkout; CLUSTERDOCTOR_INCIDENTS points at another (a worktree reading the
# corpus of the main checkout while it grows)
CORPUS = Path(
    os.environ.get("CLUSTERDOCTOR_INCIDENTS") or Path(__file__).resolve().parent / "data" / "incidents"
)
RESULTS = CORPUS / "results.toml"
CATEGORIES = ("nccl", "gpu", "control", "rdma", "storage")
# diagnose runs "now" at a fixed instant: a case's verdict never depends on the day it is run
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc).timestamp()
TOP_N = 3


@dataclass
class Case:
    id: str
    folder: Path
    meta: dict[str, Any]

    @property
    def split(self) -> str:
        return self.meta.get("split", "eval")

    @property
    def category(self) -> str:
        return self.meta.get("category", "?")

    @property
    def healthy(self) -> bool:
        return self.meta.get("kind") == "healthy"

    @property
    def classes(self) -> set[str]:
        c = self.meta.get("cause_class") or []
        return {c} if isinstance(c, str) else set(c)

    @property
    def artefacts(self) -> list[Path]:
        return sorted(
            (p for p in self.folder.iterdir() if p.is_file() and p.name != "case.toml"),
            key=lambda p: (len(p.name), p.name),
        )


def split_of(source: str) -> str:
    """The split a source URL puts its cases in (README: nobody picks)."""
    return "dev" if hashlib.sha1(source.encode()).digest()[0] % 2 == 0 else "eval"


def load_cases(root: Path = CORPUS) -> list[Case]:
    out = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        f = d / "case.toml"
        if d.is_dir() and f.is_file():
            out.append(Case(d.name, d, tomllib.loads(f.read_text())))
    return out


@dataclass
class Outcome:
    case: Case
    verdict: str  # right | wrong | unread | false-alarm | quiet (a control with nothing at warning+)
    top: list[dict[str, Any]] = field(default_factory=list)  # the first findings: rule, subject, ...
    rank: int | None = None  # 1-based position of the first acceptable finding (faults)
    unread: list[str] = field(default_factory=list)  # artefacts not used, with the reason
    seconds: float = 0.0
    error: str | None = None

    @property
    def top1(self) -> bool:
        return self.rank == 1

    @property
    def top3(self) -> bool:
        return self.rank is not None and self.rank <= TOP_N


def acceptable(case: Case, finding: Any) -> bool:
    """A finding names the case's cause: its rule is accepted or one of its classes is the case's,
    and the case's subject pattern (if any) matches its subject or summary."""
    ok = finding.rule in set(case.meta.get("accept_rules") or []) or bool(
        case.classes & set(getattr(finding, "causes", ()) or ())
    )
    if not ok:
        return False
    pattern = case.meta.get("subject") or ""
    if not pattern:
        return True
    rx = re.compile(pattern, re.I)
    return bool(rx.search(finding.subject or "") or rx.search(finding.summary or ""))


def run_case(case: Case) -> Outcome:
    """`clusterdoctor diagnose ARTEFACT...` on the case, in this process, and its verdict."""
    from clusterdoctor import diagnosis
    from clusterdoctor.errors import InputError
    from clusterdoctor.model import Severity

    t0 = time.perf_counter()
    obs = diagnosis.new_observations(clock=lambda: NOW)
    try:
        refs = diagnosis.load_sources(obs, case.artefacts)
    except InputError as e:
        return Outcome(case, "unread", unread=[e.one_line()], seconds=time.perf_counter() - t0)
    diag = diagnosis.run(obs, refs)
    secs = time.perf_counter() - t0
    unread = [w[len("not used: ") :] for w in diag.warnings if w.startswith("not used: ")]
    top = [
        {"rule": f.rule, "severity": str(f.severity), "subject": f.subject, "summary": f.summary[:200]}
        for f in diag.findings[:TOP_N]
    ]
    if case.healthy:
        alarm = [f for f in diag.findings if f.severity >= Severity.WARNING]
        verdict = "false-alarm" if alarm else ("unread" if unread else "quiet")
        return Outcome(case, verdict, top, unread=unread, seconds=secs)
    rank = next((i for i, f in enumerate(diag.findings, 1) if acceptable(case, f)), None)
    if rank == 1:
        verdict = "right"
    elif not diag.findings and unread:
        verdict = "unread"
    else:
        verdict = "wrong"
    return Outcome(case, verdict, top, rank, unread, secs)


def load_results(path: Path = RESULTS) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    return tomllib.loads(path.read_text()).get("case", {})


def write_results(outcomes: list[Outcome], path: Path = RESULTS) -> None:
    """One table per case: its verdict and first finding, as the bench last saw them."""
    lines = [
        "# Written by `python bench/incidents.py --write`: the verdict of each case as last run.",
        "# tests/test_incidents.py keeps every dev case marked right, right.",
        "",
    ]
    for o in sorted(outcomes, key=lambda o: o.case.id):
        top = o.top[0] if o.top else {}
        lines.append(f'[case."{o.case.id}"]')
        lines.append(f'split = "{o.case.split}"')
        lines.append(f'verdict = "{o.verdict}"')
        lines.append(f"rank = {o.rank if o.rank is not None else 0}")
        lines.append(f"top_rule = {_toml_str(top.get('rule') or '')}")
        lines.append(f"top_subject = {_toml_str(top.get('subject') or '')}")
        lines.append("")
    path.write_text("\n".join(lines))


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'
