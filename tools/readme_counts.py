"""Refresh the ``rules run: N, skipped: M, findings: K`` lines of the README's examples.

Every rule added to the catalogue changes how many rules run or are skipped on the README's
examples, and tests/test_readme_examples.py compares those lines with the real output. After adding
rules, run::

    .venv/bin/python tools/readme_counts.py          # rewrite README.md in place
    .venv/bin/python tools/readme_counts.py --check  # exit 1 when a line would change

Each ```text block that starts with ``$ COMMAND`` and shows a ``rules run:`` line is run as the
README test runs it (COLUMNS=80, no shared fixtures: ``$CLUSTERDOCTOR_FIXTURES`` an empty folder,
from the repository root) and only that line is replaced by the one the command printed. Other lines
are left for the test to judge: a finding that changed is a change to review, not to refresh.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
COUNTS = re.compile(r"^rules run: \d+, skipped: \d+, findings: \d+$")
BLOCK = re.compile(r"^```text\n(.*?)^```$", flags=re.S | re.M)


def _run(cmd: str, env: dict[str, str]) -> str:
    args = shlex.split(cmd)
    if args[0] == "clusterdoctor":
        argv = [sys.executable, "-m", "clusterdoctor.cli.main", *args[1:]]
    else:
        argv = [str(REPO / args[0]), *args[1:]]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=300).stdout


def refresh(text: str, env: dict[str, str]) -> tuple[str, list[str]]:
    """The README text with each example's counts line as its command prints it, and the changes."""
    changes: list[str] = []

    def one(m: re.Match[str]) -> str:
        lines = m.group(1).split("\n")
        if not lines[0].startswith("$ ") or not any(COUNTS.match(x) for x in lines):
            return m.group(0)
        printed = [x for x in _run(lines[0][2:], env).splitlines() if COUNTS.match(x)]
        if not printed:
            changes.append(f"{lines[0]}: prints no counts line (left as is)")
            return m.group(0)
        for i, x in enumerate(lines):
            if COUNTS.match(x) and x != printed[0]:
                changes.append(f"{lines[0][:60]}: {x} -> {printed[0]}")
                lines[i] = printed[0]
        return "```text\n" + "\n".join(lines) + "```"

    return BLOCK.sub(one, text), changes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="report lines that would change; exit 1 if any")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as empty:
        env = dict(os.environ, COLUMNS="80", CLUSTERDOCTOR_FIXTURES=empty)
        env.pop("NO_COLOR", None)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        new, changes = refresh(README.read_text(), env)
    for c in changes:
        print(c)
    if ns.check:
        return 1 if changes else 0
    if new != README.read_text():
        README.write_text(new)
    print(f"README.md: {len(changes)} counts line(s) changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
