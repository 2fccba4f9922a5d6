"""`clusterdoctor rules`: every rule of the catalogue explains itself."""

from __future__ import annotations

import json


def test_every_rule_explains_itself_in_text_and_json():
    """`clusterdoctor rules ID [--json]` for every rule of the catalogue (in-process: one app, 100+ rules)."""
    from typer.testing import CliRunner

    from clusterdoctor.cli.main import app
    from clusterdoctor.rules.registry import load_all

    runner = CliRunner()
    for r in load_all():
        text = runner.invoke(app, ["rules", r.id], env={"COLUMNS": "80"})
        assert text.exit_code == 0, (r.id, text.output, text.exception)
        assert r.title in " ".join(text.output.split()) and "Prometheus alerts" in text.output
        doc = runner.invoke(app, ["rules", r.id, "--json"])
        assert doc.exit_code == 0, (r.id, doc.output, doc.exception)
        assert json.loads(doc.output)["alerts"], r.id  # every rule alerts, natively or via its findings
