"""The terminal report: findings first, ranked, with evidence, fix and verify commands.

It fits the terminal: lines wrap at the width (``COLUMNS`` honoured; 80 when the output is not a
terminal) with a hanging indent, a verify command is broken only between shell words (with a ``\\``
continuation, so it still pastes), and paths under the inputs' common folder are shown relative to
it (the folder is named once, in the header). Only a single token longer than a line (a path, a
URL) may stick out. JSON and HTML carry the full detail.
"""

from __future__ import annotations

import io
import os
import shutil
import textwrap
from collections.abc import Callable, Iterable

from clusterdoctor.escape import shown
from clusterdoctor.model import Diagnosis, Severity

SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
DEFAULT_WIDTH = 80
MIN_WIDTH = 40
KEEP = "\u00a0"  # a space :func:`wrap` never breaks at (textwrap splits only at ASCII whitespace)


def terminal_width() -> int:
    """``COLUMNS`` when set, else the terminal's width, else 80 (a pipe or a file)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def wrap(text: str, width: int, first: str = "", rest: str | None = None) -> list[str]:
    """``text`` wrapped at ``width`` after the prefix ``first`` (continuation lines after ``rest``,
    default: spaces as wide as ``first``). Words are never split; a word longer than a line keeps
    its own line; a :data:`KEEP` space joins two words into one and is printed as a space."""
    rest = " " * len(first) if rest is None else rest
    w = textwrap.TextWrapper(
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
    out: list[str] = []
    for i, para in enumerate(str(text).splitlines() or [""]):
        w.initial_indent = first if i == 0 else rest
        out.extend(w.wrap(para) or [w.initial_indent.rstrip()])
    return [ln.replace(KEEP, " ") for ln in out] if KEEP in text else out


def shell_words(cmd: str) -> list[str]:
    """Split ``cmd`` at the spaces a shell would split at (quotes and backslashes kept as written)."""
    words: list[str] = []
    cur: list[str] = []
    quote = ""
    i = 0
    while i < len(cmd):
        c = cmd[i]
        if quote:
            cur.append(c)
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"' and i + 1 < len(cmd):
                cur.append(cmd[i + 1])
                i += 1
        elif c in "'\"":
            quote = c
            cur.append(c)
        elif c == "\\" and i + 1 < len(cmd):
            cur.extend((c, cmd[i + 1]))
            i += 1
        elif c.isspace():
            if cur:
                words.append("".join(cur))
                cur = []
        else:
            cur.append(c)
        i += 1
    if cur:
        words.append("".join(cur))
    return words


def wrap_command(cmd: str, width: int, first: str, rest: str) -> list[str]:
    """A shell command at ``width``: broken only between shell words, each broken line ending in
    `` \\`` so that the lines pasted into a shell are still the one command."""
    if len(first) + len(cmd) <= width:
        return [first + cmd]
    lines: list[str] = []
    line = first
    has_word = False
    for word in shell_words(cmd):
        if has_word and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line, has_word = rest + word, True
        else:
            line = line + (" " if has_word else "") + word
            has_word = True
    lines.append(line)
    return lines


def common_folder(locations: Iterable[str]) -> str | None:
    """The folder every path-like input lives in, when that says something (not ``/``)."""
    paths = [
        loc for loc in locations if loc and "://" not in loc and (os.sep in loc or os.path.splitext(loc)[1])
    ]
    if not paths:
        return None
    if len({os.path.isabs(p) for p in paths}) > 1:
        paths = [os.path.abspath(p) for p in paths]
    try:
        base = os.path.commonpath(paths)
    except ValueError:
        return None
    if base == paths[0] and not os.path.isdir(base):  # one file (or a file and its folder): the folder
        base = os.path.dirname(base)
    if base in ("", ".", os.sep) or base == os.path.dirname(os.sep):
        return None
    return base


def render_text(
    diag: Diagnosis,
    *,
    color: bool = False,
    width: int | None = None,
    verbose: bool = False,
    title: str = "clusterdoctor diagnosis",
    summary_lines: Iterable[str] = (),
) -> str:
    """Render ``diag`` for a terminal ``width`` columns wide (default :func:`terminal_width`).
    ``color=False`` gives plain text (files, pipes, tests). ``title`` heads the report; a command's own
    overview (``summary_lines``, already fitted to ``width``) goes between the counts and the findings."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    width = max(MIN_WIDTH, width or terminal_width())
    base = common_folder(s.location for s in diag.sources)
    prefix = (base.rstrip(os.sep) + os.sep) if base else None

    def rel(s: object) -> str:
        """A value from the inputs: relative to their folder, shown safely (escapes visible, URL
        credentials removed: :func:`clusterdoctor.escape.shown`)."""
        text = str(s)
        return shown(text.replace(prefix, "") if prefix else text)

    buf = io.StringIO()
    con = Console(
        file=buf, force_terminal=color, no_color=not color, width=width, highlight=False, soft_wrap=True
    )

    def out(lines: Iterable[str], style: str | None = None, span: int | None = None) -> None:
        for ln in lines:
            t = Text(ln)
            if style:
                t.stylize(style, 0, span if span is not None else len(ln))
            con.print(t)
            span = None if span is None else 0  # style only the first line's span

    out(wrap(headline(diag, rel), width, rest="   "), "bold", len("most likely cause:"))
    out(wrap(f"{title} — host {shown(diag.host)} — {diag.generated_at}", width, rest="   "))
    if diag.sources:
        by_kind: dict[str, list[str]] = {}
        for s in diag.sources:
            by_kind.setdefault(s.kind, []).append(rel(s.location))
        if base:
            out(
                wrap(f"sources in {shown(base)}{os.sep} (paths below are relative to it):", width, rest="   ")
            )
        else:
            out(["sources:"])
        for kind, locs in by_kind.items():
            out(wrap(f"{shown(kind)}: {', '.join(locs)}", width, first="   ", rest="      "))
    if diag.topology is not None:
        t = diag.topology
        out(
            wrap(
                f"machine: {len(t.nodes)} NUMA node(s), {len(t.all_cpus())} CPUs, {len(t.gpus)} GPU(s), "
                f"{len(t.nics)} NIC(s) ({sum(1 for n in t.nics if n.is_rdma)} RDMA) — from {rel(t.source)}",
                width,
                rest="   ",
            )
        )
    out([f"rules run: {len(diag.rules_run)}, skipped: {len(diag.skipped)}, findings: {len(diag.findings)}"])
    out([""])
    extra = list(summary_lines)
    if extra:
        out(extra)
        out([""])
    if not diag.findings:
        out(
            wrap("No findings from the rules that ran (skipped rules below were NOT checked).", width),
            "green",
            len("No findings"),
        )
    for i, f in enumerate(diag.findings, 1):
        head = f"{i}. {str(f.severity).upper()}"
        subj = f" [{rel(f.subject)}]" if f.subject else ""
        out(
            wrap(f"{head} {f.rule} {rel(f.title)}{subj}  (score{KEEP}{f.score:.2f})", width, rest="   "),
            SEVERITY_STYLE.get(f.severity),
            len(head),
        )
        out(wrap(rel(f.summary), width, first="   "))
        for e in f.evidence:
            parts = [rel(e.description)]
            if e.value is not None:
                parts.append(f"= {rel(e.value)}{(' ' + rel(e.unit)) if e.unit else ''}")
            if e.threshold is not None:
                parts.append(f"(threshold {rel(e.threshold)})")
            if e.source:
                parts.append(f"[{rel(e.source)}]")
            out(wrap(" ".join(parts), width, first="   - "))
        if f.fix:
            out(wrap(rel(f.fix), width, first="   fix: "))
        for v in f.verify:
            out(wrap_command(rel(v), width, "   verify: ", "       "))
        out([""])
    if diag.placement and verbose:
        tbl = Table(title="process placement", show_lines=False)
        for col in ("pid", "comm", "cpu nodes", "memory by node", "gpus", "remote mem"):
            tbl.add_column(col, overflow="fold")
        for p in diag.placement:
            tbl.add_row(*(shown(c) for c in placement_row(p)))
        con.print(tbl, soft_wrap=False)
    if diag.skipped:
        out(["skipped (not checked — missing input):"], "bold", len("skipped"))
        by_reason: dict[str, list[str]] = {}
        for s in diag.skipped:
            by_reason.setdefault(s.reason, []).append(s.rule)
        for reason, rules in by_reason.items():
            ids = (
                ", ".join(rules)
                if len(rules) <= MAX_SKIPPED_IDS
                else (f"{', '.join(rules[:6])} and {len(rules) - 6} more")
            )
            out(wrap(f"{ids}: {rel(reason)}", width, first="   ", rest="      "))
    for w in diag.warnings:
        out(wrap(rel(w), width, first="warning: ", rest="   "), "yellow", len("warning:"))
    return buf.getvalue()


# A reason shared by more rules than this (the message catalogues' rules without messages) names the
# first few and counts the rest; the JSON report lists every one.
MAX_SKIPPED_IDS = 12


def headline(diag: Diagnosis, rel: Callable[[object], str] = str) -> str:
    """The report's first line: the most likely cause and its instance, or that none was found."""
    if not diag.findings:
        n = len(diag.skipped)
        return f"most likely cause: none found by the {len(diag.rules_run)} rules that ran ({n} not checked)"
    f = diag.findings[0]
    subj = f" [{rel(f.subject)}]" if f.subject else ""
    return f"most likely cause: {f.title}{subj} — {f.rule}, {f.severity}"


def placement_row(p: dict) -> list[str]:
    """A placement dict (Placement.as_dict()) as table cells."""
    mem = p.get("memory_bytes_by_node") or {}
    mem_s = ", ".join(f"N{k}:{_mib(v)}" for k, v in sorted(mem.items(), key=lambda kv: str(kv[0]))) or "-"
    share = p.get("remote_memory_share")
    return [
        str(p.get("pid", "")),
        str(p.get("comm") or "?"),
        ",".join(str(n) for n in p.get("cpu_nodes") or []) or "-",
        mem_s,
        ",".join(p.get("gpus") or []) or "-",
        f"{share * 100:.0f}%" if isinstance(share, (int, float)) else "-",
    ]


def _mib(v: object) -> str:
    try:
        return f"{int(v) / (1 << 20):.0f}MiB"  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return str(v)


def raised_flags(p: dict) -> list[str]:
    """Names of the placement flags raised in a Placement.as_dict() record."""
    flags = p.get("flags") or {}
    return [k for k, v in flags.items() if (v.get("raised") if isinstance(v, dict) else v)]
