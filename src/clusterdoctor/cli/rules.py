"""``clusterdoctor rules [ID]``: the rule catalog, and one rule explained with its thresholds."""

from __future__ import annotations

import json

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
) -> None:
    """List every rule (id, layer, title, inputs), or explain one: symptom, why, fix, verify, thresholds.

    `--format prometheus` prints the catalogue as Prometheus alerting rules (deploy/ holds the output).
    """
    from clusterdoctor.rules.registry import get_rule, load_all

    if fmt in ("prometheus", "prometheus-operator", "promtool-tests"):
        from clusterdoctor.cli.rules_export import export_alerts

        typer.echo(export_alerts(fmt, runbook_url, rule_id, layer), nl=False)
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
                    },
                    indent=2,
                )
            )
            return
        typer.echo(f"{r.id} {r.name} — {r.title}  [layer {r.layer}, default severity {r.severity}]")
        typer.echo(f"needs: {', '.join(r.requires)}")
        for name in ("Symptom", "Why", "Fix", "Verify"):
            typer.echo(f"\n{name}:\n  " + sec.get(name, "(missing)").replace("\n", "\n  "))
        if r.thresholds:
            typer.echo("\nThresholds:")
            for t in r.thresholds:
                typer.echo(f"  {t.name} = {t.display()}" + (f" — {t.meaning}" if t.meaning else ""))
                typer.echo(f"    source: {t.source}")
        return
    catalog = [r for r in load_all() if layer is None or r.layer == layer]
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
    for r in catalog:
        typer.echo(f"{r.id:<9} {r.layer:<14} {r.name:<36} {r.title}")
    typer.echo(f"\n{len(catalog)} rules. `clusterdoctor rules ID` explains one.")


def register(app: typer.Typer) -> None:
    app.command("rules")(rules)
