"""The real-incident benchmark: `diagnose` on every case of tests/data/incidents, scored on its first line.

    .venv/bin/python bench/incidents.py              # the table, per category and per half (dev / eval)
    .venv/bin/python bench/incidents.py --details    # also one line per dev case that is not right
    .venv/bin/python bench/incidents.py --write      # and record each verdict in results.toml

For faults: top-1 (the first finding names the cause the thread established, on the right instance),
top-3, and unread (an artefact `diagnose` refused). For healthy controls: false alarms (any finding at
warning or above) and unread. Time is the in-process time of load + rules per case; the baseline
beside it is reading the same files into memory (the floor any parser pays).

Per-case details are shown for dev cases only: eval cases are only ever run (README of the corpus);
`--details-eval` shows them too, for the record after a batch is scored, never to tune on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.incident_corpus import CATEGORIES, Outcome, load_cases, run_case, split_of, write_results


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "-"


def table(outcomes: list[Outcome]) -> list[str]:
    rows = [
        "| category | half | faults | top-1 | top-3 | unread | controls | false alarms | ctrl unread |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[(o.case.category, o.case.split)].append(o)
        groups[("all", o.case.split)].append(o)
        groups[("all", "both")].append(o)
        groups[(o.case.category, "both")].append(o)
    order = [*CATEGORIES, "all"]
    for cat in order:
        for half in ("dev", "eval", "both"):
            g = groups.get((cat, half))
            if not g:
                continue
            faults = [o for o in g if not o.case.healthy]
            ctrl = [o for o in g if o.case.healthy]
            rows.append(
                f"| {cat} | {half} | {len(faults)} | {_pct(sum(o.top1 for o in faults), len(faults))} | "
                f"{_pct(sum(o.top3 for o in faults), len(faults))} | "
                f"{_pct(sum(bool(o.unread) for o in faults), len(faults))} | {len(ctrl)} | "
                f"{_pct(sum(o.verdict == 'false-alarm' for o in ctrl), len(ctrl))} | "
                f"{_pct(sum(bool(o.unread) for o in ctrl), len(ctrl))} |"
            )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--details", action="store_true", help="one line per dev case that is not right")
    ap.add_argument("--details-eval", action="store_true", help="also for eval cases (never to tune on)")
    ap.add_argument(
        "--write", action="store_true", help="record verdicts in tests/data/incidents/results.toml"
    )
    ap.add_argument("--category", choices=CATEGORIES)
    ap.add_argument("--split", choices=("dev", "eval"))
    ap.add_argument("--case", action="append", help="only this case id (repeatable)")
    ap.add_argument("--batch", type=int, action="append", help="only cases of this batch (repeatable)")
    a = ap.parse_args()
    cases = load_cases()
    bad_split = [
        c.id for c in cases if c.split != split_of(c.meta.get("source", "")) and not c.meta.get("moved")
    ]
    if a.category:
        cases = [c for c in cases if c.category == a.category]
    if a.split:
        cases = [c for c in cases if c.split == a.split]
    if a.case:
        cases = [c for c in cases if c.id in set(a.case)]
    if a.batch:
        cases = [c for c in cases if int(c.meta.get("batch", 1)) in set(a.batch)]
    if not cases:
        print("no case selected")
        return 2
    import clusterdoctor.rules.registry as registry

    registry.load_all()  # imports once, outside the timed part
    outcomes: list[Outcome] = []
    floor: list[float] = []
    tty = sys.stderr.isatty()
    for i, c in enumerate(cases, 1):
        if tty:
            print(f"\r{i}/{len(cases)} {c.id:<24}", end="", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        for p in c.artefacts:
            p.read_bytes()
        floor.append(time.perf_counter() - t0)
        outcomes.append(run_case(c))
    if tty:
        print("\r" + " " * 40 + "\r", end="", file=sys.stderr)
    n_dev = sum(o.case.split == "dev" for o in outcomes)
    moved = [o.case.id for o in outcomes if o.case.meta.get("moved")]
    print(f"incident corpus: {len(outcomes)} cases ({n_dev} dev, {len(outcomes) - n_dev} eval); "
          f"split by the parity of sha1(source)[0]; moved eval->dev: {len(moved)} {moved or ''}")  # fmt: skip
    if bad_split:
        print(f"WARNING: {len(bad_split)} case(s) whose split is not their source's: {bad_split}")
    print()
    print("\n".join(table(outcomes)))
    secs = [o.seconds for o in outcomes]
    print()
    print(
        f"time per case: median {statistics.median(secs) * 1000:.0f} ms, max {max(secs) * 1000:.0f} ms, "
        f"total {sum(secs):.1f} s; reading the same files alone: total {sum(floor) * 1000:.1f} ms "
        f"(ratio {sum(secs) / max(sum(floor), 1e-9):.0f}x: the rules' work, not I/O)"
    )
    if a.details or a.details_eval:
        print()
        for o in outcomes:
            if o.verdict in ("right", "quiet"):
                continue
            if o.case.split == "eval" and not a.details_eval:
                continue
            top = o.top[0] if o.top else {}
            first = f"{top.get('rule')} [{top.get('subject') or ''}]" if top else "no finding"
            extra = f"; unread: {o.unread[0][:100]}" if o.unread else ""
            rank = f" (right at #{o.rank})" if o.rank else ""
            print(f"{o.case.split} {o.case.id}: {o.verdict}{rank}; first: {first}{extra}")
    if a.write:
        if a.category or a.split or a.case or a.batch:
            print("--write records the whole corpus: run it without --category/--split/--case")
            return 2
        write_results(outcomes)
        print("\nwrote tests/data/incidents/results.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
