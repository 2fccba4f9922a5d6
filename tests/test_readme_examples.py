"""README's "real output" blocks are what the commands print today.

Every ```text block in README.md that starts with ``$ COMMAND`` is run (at COLUMNS=80, from the
clone's root) and each line the block shows must appear in the real output, in the same order; a
``...`` line stands for lines left out. Lines that carry the run's own time or the folder of the clone
the README was made in are not compared (where a clone lives changes how such a line wraps). Blocks
that read ``../shared/fixtures`` skip when the fixtures are not beside the clone, and the block about
this machine (``clusterdoctor diagnose`` with no input) is not compared: it describes the machine it
ran on.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SHARED = REPO.parent / "shared" / "fixtures"
GENERATED_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$")  # the report's own time
README_CLONE = "/work/main"  # where the README's output was made: absolute paths under it vary by clone


def readme_examples() -> list[tuple[str, list[str]]]:
    """(command, the output lines shown) for each ```text block that starts with ``$ ``."""
    blocks = re.findall(r"^```text\n(.*?)^```$", README.read_text(), flags=re.S | re.M)
    out = []
    for b in blocks:
        lines = b.rstrip("\n").split("\n")
        if lines and lines[0].startswith("$ "):
            out.append((lines[0][2:], lines[1:]))
    return out


EXAMPLES = [(cmd, shown) for cmd, shown in readme_examples() if cmd.strip() != "clusterdoctor diagnose"]


def in_order(shown: list[str], actual: list[str]) -> list[str]:
    """The shown lines that are missing from ``actual`` or out of order (empty: all there)."""
    missing, pos = [], 0
    for line in shown:
        if line.strip() in ("...", "") or GENERATED_AT.search(line) or README_CLONE in line:
            continue
        try:
            pos = actual.index(line, pos) + 1
        except ValueError:
            missing.append(line)
    return missing


def test_the_readme_has_examples_to_check():
    cmds = [" ".join(c.split()[:2]) for c, _ in EXAMPLES]
    assert len(EXAMPLES) >= 8, cmds
    assert {"clusterdoctor gpu", "clusterdoctor watch", "clusterdoctor comm"} <= set(cmds)


def test_in_order_finds_a_changed_or_reordered_line():
    actual = ["a", "b", "c"]
    assert in_order(["a", "...", "c"], actual) == []
    assert in_order(["c", "a"], actual) == ["a"]
    assert in_order(["a", "x"], actual) == ["x"]
    assert in_order([f"inputs under {README_CLONE}/tests/data", "c"], actual) == []  # clone-specific


@pytest.mark.parametrize("cmd,shown", EXAMPLES, ids=[c[:60] for c, _ in EXAMPLES])
def test_readme_example_output_is_real(cmd: str, shown: list[str]):
    if "../shared/fixtures" in cmd and not SHARED.is_dir():
        pytest.skip(f"needs the shared fixtures beside the clone ({SHARED})")
    args = shlex.split(cmd)
    if args[0] == "clusterdoctor":
        argv = [sys.executable, "-m", "clusterdoctor.cli.main", *args[1:]]
    else:  # an example script: it finds the clusterdoctor of this environment on PATH
        argv = [str(REPO / args[0]), *args[1:]]
    env = dict(
        os.environ, COLUMNS="80", PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )
    p = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    missing = in_order(shown, p.stdout.splitlines())
    assert not missing, "README shows lines the command no longer prints:\n" + "\n".join(missing)
