"""The fail-slow alerts, as the catalogue renders them (``clusterdoctor rules --format prometheus``),
checked and unit-tested by the real promtool on a job whose straggler appears at minute 10 (the
catalogue's own promtool tests, tests/deploy/test_alerts.py, check the fires/healthy examples)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from clusterdoctor.report.prometheus_rules import rule_groups, to_yaml
from clusterdoctor.rules.failslow import failslow_rules
from tests.conftest import REPO

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

# 4 ranks of job "llm" scraped every 15 s: 1 step a second of 1 s; from minute 10, rank 2's collective
# wait drops to 0.1 s a step while the others wait 0.5 s for it (a straggler); rank 3 of job "ok" is fine.
TEST = """
rule_files: [alerts.yml]
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
{series}
    alert_rule_test:
      - eval_time: 9m
        alertname: TrainingStragglerPresent
        exp_alerts: []
      - eval_time: 20m
        alertname: TrainingStragglerPresent
        exp_alerts:
          - exp_labels: {{severity: warning, rule: FS001, layer: failslow, job: llm, rank: "2", host: h2, gpu: "0"}}
            exp_annotations:
              summary: "Rank 2 of job llm on h2 is a straggler"
              description: "For 5 minutes the other ranks of llm have waited for rank 2 (host h2, GPU 0) more than 0.2 of a step. `clusterdoctor watch --prometheus URL --job llm` names its class and onset."
              runbook: "clusterdoctor rules FS001"
      - eval_time: 20m
        alertname: TrainingRankSilent
        exp_alerts: []
"""


def _series() -> str:
    out = []
    for r in range(4):
        lab = f'job="llm",rank="{r}",host="h{r}",gpu="0"'
        out.append(f"      - series: 'clusterdoctor_watch_steps_total{{{lab}}}'\n        values: '0+15x160'")
        out.append(
            f"      - series: 'clusterdoctor_watch_step_seconds_total{{{lab}}}'\n        values: '0+15x160'"
        )
        # 0.1 s of wait a step for everybody; from minute 10 the others wait 0.5 s a step for rank 2
        wait = "0+1.5x40 61.5+1.5x119" if r == 2 else "0+1.5x40 67.5+7.5x119"
        out.append(
            f"      - series: 'clusterdoctor_watch_collective_wait_seconds_total{{{lab}}}'\n        values: '{wait}'"
        )
        out.append(
            f"      - series: 'clusterdoctor_watch_stall_seconds_total{{{lab}}}'\n        values: '0+0x160'"
        )
        out.append(
            f"      - series: 'clusterdoctor_watch_last_step_timestamp_seconds{{{lab}}}'\n        values: '0+15x160'"
        )
    return "\n".join(out)


def alert_rule_file() -> str:
    """The fail-slow rules' alerts only, as the catalogue renders them."""
    return to_yaml(rule_groups(rules=failslow_rules()))


def test_the_alerts_are_in_the_committed_prometheus_rule_file():
    committed = (REPO / "deploy/components/prometheusrule").rglob("*.yaml")
    text = "".join(p.read_text() for p in committed)
    assert "TrainingStragglerPresent" in text and "TrainingRankSilent" in text


def test_promtool_checks_and_fires_the_alert(tmp_path):
    if not shutil.which(PROMTOOL):
        pytest.skip("promtool not installed (apt-get install prometheus)")
    (tmp_path / "alerts.yml").write_text(alert_rule_file())
    chk = subprocess.run(
        [PROMTOOL, "check", "rules", str(tmp_path / "alerts.yml")], capture_output=True, text=True
    )
    assert chk.returncode == 0, chk.stdout + chk.stderr
    (tmp_path / "test.yml").write_text(TEST.format(series=_series()))
    res = subprocess.run(
        [PROMTOOL, "test", "rules", "test.yml"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert res.returncode == 0, res.stdout + res.stderr
