"""``clusterdoctor rules [ID]``: the rule catalog, and one rule explained with its thresholds."""

from __future__ import annotations

import json
import re

import typer

from clusterdoctor.cli.common import CliExit


def rules(
    rule_id: str = typer.Argument(None, help="A rule id (e.g. NUMA002) or name to explain."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    layer: str = typer.Option(None, "--layer", help="Only rules of this layer (numa, pcie, etcd, ...)."),
    fmt: str = typer.Option(
        "text",
        "--format",
        help="text | json | prometheus (alerting rule file) | prometheus-operator (PrometheusRule) | "
        "promtool-tests (unit tests for the rule file).",
    ),
    runbook_url: str = typer.Option(
        None, "--runbook-url", help="With prometheus formats: base URL; alerts get runbook_url=BASE/RULE_ID."
    ),
    agent_selector: str = typer.Option(
        None,
        "--agent-selector",
        help='With prometheus formats: label matchers of the agent\'s series (default job="clusterdoctor-agent").',
    ),
    cluster_label: str = typer.Option(
        None,
        "--cluster-label",
        help="With prometheus formats: label that tells clusters apart, kept by every aggregation "
        "(default cluster; empty: none).",
    ),
) -> None:
    """List every rule (id, layer, title, inputs), or explain one: symptom, why, fix, verify, thresholds.

    `--format prometheus` prints the catalogue as Prometheus alerting rules (deploy/ holds the output).
    """
    from clusterdoctor.report.text import terminal_width
    from clusterdoctor.rules.registry import get_rule, load_all

    if runbook_url:
        from clusterdoctor.cli.kube_options import check_http_url

        check_http_url("--runbook-url", runbook_url)
    if agent_selector and not re.fullmatch(
        r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*(,\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*)*',
        agent_selector,
    ):
        raise CliExit(
            2, f'error: --agent-selector {agent_selector!r}: expected label matchers such as job="x"'
        )
    if cluster_label and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", cluster_label):
        raise CliExit(2, f"error: --cluster-label {cluster_label!r}: not a label name")
    if fmt in ("prometheus", "prometheus-operator", "promtool-tests"):
        from clusterdoctor.cli.rules_export import export_alerts

        typer.echo(export_alerts(fmt, runbook_url, rule_id, layer, agent_selector, cluster_label), nl=False)
        return
    if fmt == "json":
        as_json = True
    elif fmt != "text":
        raise CliExit(
            2,
            f"error: --format {fmt!r}: expected text, json, prometheus, prometheus-operator or promtool-tests",
        )

    if rule_id:
        r = get_rule(rule_id)
        if r is None:
            raise CliExit(2, f"error: no rule {rule_id!r}; `clusterdoctor rules` lists them")
        sec = r.sections()
        from clusterdoctor.report.prometheus_rules import alert_entry, catalog_alerts

        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "id": r.id,
                        "name": r.name,
                        "layer": r.layer,
                        "title": r.title,
                        "severity": str(r.severity),
                        "requires": list(r.requires),
                        "sections": sec,
                        "thresholds": [t.as_dict() for t in r.thresholds],
                        "alerts": [alert_entry(ca) for ca in catalog_alerts([r])],
                    },
                    indent=2,
                )
            )
            return
        typer.echo(explain_text(r, terminal_width()))
        from clusterdoctor.report.text import wrap

        typer.echo("\nPrometheus alerts (`--json` gives them as data):")
        for ca in catalog_alerts([r]):
            expr = " ".join(ca.alert.expr.split())
            text = f"{ca.name} ({ca.alert.severity}, for {ca.alert.for_}): {expr}"
            typer.echo("\n".join(wrap(text, terminal_width(), "  ", "    ")))
        return
    everything = load_all()
    layers = sorted({r.layer for r in everything})
    if layer is not None and layer not in layers:
        raise CliExit(2, f"error: --layer {layer!r}: no such layer; choose one of {', '.join(layers)}")
    catalog = [r for r in everything if layer is None or r.layer == layer]
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "name": r.name,
                        "layer": r.layer,
                        "title": r.title,
                        "requires": list(r.requires),
                    }
                    for r in catalog
                ],
                indent=2,
            )
        )
        return
    typer.echo(catalog_text(catalog, terminal_width()))


def catalog_text(catalog: list, width: int) -> str:
    """The catalog grouped by layer, one rule a line: the id column, then title and (name), wrapped
    under the title column so the columns stay aligned at any width."""
    from clusterdoctor.report.text import wrap

    idw = max((len(r.id) for r in catalog), default=7)
    lines: list[str] = []
    for layer in dict.fromkeys(r.layer for r in catalog):
        rules_of = [r for r in catalog if r.layer == layer]
        if lines:
            lines.append("")
        lines.append(f"{layer} ({len(rules_of)})")
        for r in rules_of:
            lines += wrap(f"{r.title} ({r.name})", width, first=f"  {r.id:<{idw}}  ", rest=" " * (idw + 4))
    lines.append("")
    lines += wrap(
        f"{len(catalog)} rules. `clusterdoctor rules ID` explains one; --json lists them all.", width
    )
    return "\n".join(lines)


def _paragraphs(text: str) -> list[str]:
    """A docstring section as paragraphs (its hard line breaks joined)."""
    paras, cur = [], []
    for line in text.splitlines():
        if line.strip():
            cur.append(line.strip())
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    return paras


def explain_text(r, width: int) -> str:
    """One rule: identity, inputs, Symptom/Why/Fix/Verify and every threshold with its source."""
    from clusterdoctor.report.text import wrap

    sec = r.sections()
    lines = wrap(f"{r.id} {r.name} — {r.title}", width, rest="  ")
    lines += wrap(f"layer {r.layer}, default severity {r.severity}", width, first="  ")
    lines += wrap(f"needs: {', '.join(r.requires)}", width, rest="  ")
    for name in ("Symptom", "Why", "Fix", "Verify"):
        lines += ["", f"{name}:"]
        for para in _paragraphs(sec.get(name, "(missing)")) or ["(missing)"]:
            lines += wrap(para, width, first="  ")
    if r.thresholds:
        lines += ["", "Thresholds:"]
        for t in r.thresholds:
            lines += wrap(
                f"{t.name} = {t.display()}" + (f" — {t.meaning}" if t.meaning else ""),
                width,
                first="  ",
                rest="    ",
            )
            lines += wrap(f"source: {t.source}", width, first="    ", rest="      ")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    app.command("rules")(rules)
