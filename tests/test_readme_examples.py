"""Every command the README shows runs, as shown, in a clone with nothing beside it.

The tracked files of this checkout are copied to a fresh folder (no ``../shared`` beside it, and
``$CLUSTERDOCTOR_FIXTURES`` pointing at an empty folder), and there:

* every ```text block that starts with ``$ COMMAND`` is run at COLUMNS=80 from the copy's root and
  each line it shows must appear in the real output, in the same order; a ``...`` line stands for
  lines left out. Lines that carry the run's own time or the folder of the clone the README was made
  in are not compared. The block about this machine (``clusterdoctor diagnose`` with no input) is
  run too, but only its shape is compared: it describes the machine it ran on;
* every ``clusterdoctor ...`` line of the other code blocks (```sh and plain ones) is parsed by the
  real command-line parser: the command exists, its options exist and their values are valid (a
  placeholder in capitals such as ``DIR`` or ``FILE`` stands for a user's path and is not checked);
* no file a user reads (README.md, examples/) mentions ``../shared``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main

from clusterdoctor.cli.common import _click

UsageError = _click().exceptions.UsageError

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
GENERATED_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$")  # the report's own time
README_CLONE = "/work/main"  # where the README's output was made: absolute paths under it vary by clone
MACHINE = "clusterdoctor diagnose"  # describes the machine it runs on: shape only


def _blocks() -> list[tuple[str, list[str]]]:
    """(info string, lines) of every fenced code block of the README."""
    found = re.findall(r"^```([\w-]*)\n(.*?)^```$", README.read_text(), flags=re.S | re.M)
    return [(info, body.rstrip("\n").split("\n")) for info, body in found]


def readme_examples() -> list[tuple[str, list[str]]]:
    """(command, the output lines shown) for each ```text block that starts with ``$ ``."""
    out = []
    for info, lines in _blocks():
        if info == "text" and lines and lines[0].startswith("$ "):
            out.append((lines[0][2:], lines[1:]))
    return out


def readme_command_lines() -> list[str]:
    """Every ``clusterdoctor ...`` invocation in the README's other code blocks (comments dropped)."""
    out = []
    for info, lines in _blocks():
        if info == "text" or info in ("python", "yaml"):
            continue
        for line in lines:
            line = line.removeprefix("$ ").split("  #")[0].strip()
            if line.startswith("- "):
                line = line[2:]
            m = re.match(r"(?:torchrun .*--no-python )?((?:\.venv/bin/)?clusterdoctor(?:\s[^`|;]*)?)$", line)
            if m:
                out.append(m.group(1).strip())
    yaml_lines = [
        ln.strip()[2:] for info, ls in _blocks() if info == "yaml" for ln in ls if "clusterdoctor " in ln
    ]
    return out + [ln for ln in yaml_lines if ln.startswith("clusterdoctor ")]


EXAMPLES = readme_examples()
COMMAND_LINES = readme_command_lines()


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


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A copy of this checkout's files (as git would clone them) with nothing beside it."""
    top = tmp_path_factory.mktemp("plain-clone")
    dest = top / "clusterdoctor"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    assert not (top / "shared").exists()
    empty = top / "no-fixtures"
    empty.mkdir()
    env = dict(
        os.environ,
        COLUMNS="80",
        CLUSTERDOCTOR_FIXTURES=str(empty),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    env.pop("NO_COLOR", None)
    return dest, env


def _run(cmd: str, root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    args = shlex.split(cmd)
    if args[0] == "clusterdoctor":
        argv = [sys.executable, "-m", "clusterdoctor.cli.main", *args[1:]]
    else:  # an example script: it finds the clusterdoctor of this environment on PATH
        argv = [str(root / args[0]), *args[1:]]
    return subprocess.run(argv, cwd=root, capture_output=True, text=True, env=env, timeout=300)


def test_the_readme_has_examples_to_check():
    cmds = [" ".join(c.split()[:2]) for c, _ in EXAMPLES]
    assert len(EXAMPLES) >= 8, cmds
    assert {"clusterdoctor gpu", "clusterdoctor watch", "clusterdoctor comm", "clusterdoctor numa"} <= set(
        cmds
    )
    assert len(COMMAND_LINES) >= 6, COMMAND_LINES


def test_in_order_finds_a_changed_or_reordered_line():
    actual = ["a", "b", "c"]
    assert in_order(["a", "...", "c"], actual) == []
    assert in_order(["c", "a"], actual) == ["a"]
    assert in_order(["a", "x"], actual) == ["x"]
    assert in_order([f"inputs under {README_CLONE}/tests/data", "c"], actual) == []  # clone-specific


def test_nothing_a_user_reads_mentions_the_shared_folder():
    readers = [README, *sorted((REPO / "examples").rglob("*"))]
    bad = [
        str(p.relative_to(REPO))
        for p in readers
        if p.is_file() and "../shared" in p.read_text(errors="replace")
    ]
    assert not bad, f"these send a user to ../shared, which a clone does not have: {bad}"


@pytest.mark.parametrize("cmd,shown", EXAMPLES, ids=[c[:60] for c, _ in EXAMPLES])
def test_readme_example_output_is_real(cmd: str, shown: list[str], clone):
    root, env = clone
    p = _run(cmd, root, env)
    assert p.returncode in (0, 1), p.stderr
    if cmd.strip() == MACHINE:  # this machine, not the README's: the report's frame only
        assert "clusterdoctor diagnosis — host " in p.stdout, p.stdout[:300]
        assert "rules run: " in p.stdout and "skipped (not checked — missing input):" in p.stdout
        return
    missing = in_order(shown, p.stdout.splitlines())
    assert not missing, "README shows lines the command no longer prints:\n" + "\n".join(missing)


def _parses(words: list[str]) -> None:
    """Click's parse of ``words`` against the app (conversion included), without running anything."""
    from clusterdoctor.cli.main import app

    cmd, name = typer.main.get_command(app), "clusterdoctor"
    while hasattr(cmd, "get_command") and words and not words[0].startswith("-"):
        ctx = cmd.make_context(name, [], resilient_parsing=True)
        sub = cmd.get_command(ctx, words[0])
        assert sub is not None, f"no command {words[0]!r} in {name!r}"
        cmd, name, words = sub, words[0], words[1:]
    cmd.make_context(name, list(words), resilient_parsing=False)


PLACEHOLDER = re.compile(
    r"^[A-Z][A-Z_]*(?:[=.][\w.-]+)?$|^[\w-]+=[\w.-]+\.\w+$|^\w+\.(?:tar\.zst|html|json|txt|prom|xml)$"
)


@pytest.mark.parametrize("line", COMMAND_LINES, ids=[c[:60] for c in COMMAND_LINES])
def test_every_readme_command_line_parses(line: str, clone):
    root, _ = clone
    words = shlex.split(line)
    words = words[1:]  # the program
    if "--" in words:  # numa exec -- CMD: the part after -- is the user's program
        words = words[: words.index("--") + 1] + ["true"]
    if any(w in ("...", "…") for w in words):
        pytest.skip("an elided command line")
    concrete = [w for w in words if not PLACEHOLDER.match(w)]
    if concrete != words:  # a user's path stands here: check the command and its option names only
        words = [w for w in words if w.startswith("-") or w.isalpha() and w.islower()]
        words = [w for w in words if w not in ("-o",)]
        if "--help" not in words:
            words.append("--help")
    cwd = os.getcwd()
    try:
        os.chdir(root)
        _parses(words)
    except typer.Exit:
        pass  # --help: the command and the options before it exist
    except UsageError as e:
        pytest.fail(f"README line does not parse: {line!r}: {e.format_message()}")
    finally:
        os.chdir(cwd)
