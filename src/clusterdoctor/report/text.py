"""The terminal report (rich): findings first, ranked, with evidence, fix and verify commands."""

from __future__ import annotations

import io

from clusterdoctor.model import Diagnosis, Severity

SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def render_text(diag: Diagnosis, *, color: bool = False, width: int = 110, verbose: bool = False) -> str:
    """Render ``diag`` for a terminal. ``color=False`` gives plain text (files, pipes, tests)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    buf = io.StringIO()
    con = Console(
        file=buf, force_terminal=color, no_color=not color, width=width, highlight=False, soft_wrap=not color
    )
    con.print(f"[bold]clusterdoctor diagnosis[/bold] — host {escape(diag.host)} — {diag.generated_at}")
    if diag.sources:
        con.print("sources: " + ", ".join(f"{s.kind}:{s.location}" for s in diag.sources), markup=False)
    if diag.topology is not None:
        t = diag.topology
        con.print(
            f"machine: {len(t.nodes)} NUMA node(s), {len(t.all_cpus())} CPUs, {len(t.gpus)} GPU(s), "
            f"{len(t.nics)} NIC(s) ({sum(1 for n in t.nics if n.is_rdma)} RDMA) — from {t.source}",
            markup=False,
        )
    con.print(
        f"rules run: {len(diag.rules_run)}, skipped: {len(diag.skipped)}, findings: {len(diag.findings)}"
    )
    con.print()
    if not diag.findings:
        con.print(
            "[green]No findings[/green] from the rules that ran (skipped rules below were NOT checked)."
        )
    for i, f in enumerate(diag.findings, 1):
        style = SEVERITY_STYLE.get(f.severity, "")
        subj = escape(f" [{f.subject}]") if f.subject else ""
        title = escape(f.title)
        con.print(
            f"[{style}]{i}. {str(f.severity).upper()}[/{style}] {f.rule} {title}{subj}  (score {f.score:.2f})"
        )
        con.print(f"   {f.summary}", markup=False)
        for e in f.evidence:
            parts = [e.description]
            if e.value is not None:
                parts.append(f"= {e.value}{(' ' + e.unit) if e.unit else ''}")
            if e.threshold is not None:
                parts.append(f"(threshold {e.threshold})")
            if e.source:
                parts.append(f"[{e.source}]")
            con.print("   - " + " ".join(str(p) for p in parts), markup=False)
        if f.fix:
            con.print(f"   fix: {f.fix}", markup=False)
        for v in f.verify:
            con.print(f"   verify: {v}", markup=False)
        con.print()
    if diag.placement and verbose:
        t = Table(title="process placement", show_lines=False)
        for col in ("pid", "comm", "cpu nodes", "memory by node", "gpus", "remote mem"):
            t.add_column(col)
        for p in diag.placement:
            t.add_row(*placement_row(p))
        con.print(t)
    if diag.skipped:
        con.print("[bold]skipped[/bold] (not checked — missing input):")
        by_reason: dict[str, list[str]] = {}
        for s in diag.skipped:
            by_reason.setdefault(s.reason, []).append(s.rule)
        for reason, rules in by_reason.items():
            con.print(f"   {', '.join(rules)}: {reason}", markup=False)
    for w in diag.warnings:
        con.print(f"[yellow]warning:[/yellow] {escape(w)}")
    return buf.getvalue()


def placement_row(p: dict) -> list[str]:
    """A placement dict (Placement.as_dict()) as table cells."""
    mem = p.get("memory_bytes_by_node") or {}
    mem_s = ", ".join(f"N{k}:{_mib(v)}" for k, v in sorted(mem.items(), key=lambda kv: str(kv[0]))) or "-"
    share = p.get("remote_memory_share")
    return [
        str(p.get("pid", "")),
        str(p.get("comm", "")),
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
