"""Each command imports only what it uses (issue 26): the set of modules a command leaves in
``sys.modules``, run in a fresh child interpreter, must stay within an allow-list kept here.

The set is compared at a coarse grain so that adding a helper module does not break this test but
pulling in a new layer or a heavy library does: third-party packages by top-level name (numpy,
rich …), ``clusterdoctor`` modules by their first three components (``clusterdoctor.analyze.busbw``,
``clusterdoctor.observe.comm``), with ``clusterdoctor.cli.*`` and ``clusterdoctor.rules.*`` folded
into one entry each (every command group is registered at start-up; the rule catalogue is loaded as
a whole). The standard library is not counted.

When this test fails, a command started importing something new. If that is intended (it is cheap,
or the command needs it), add the entry to the command's allow-list below; if not, import it lazily
where it is used (measure with ``python -X importtime -m clusterdoctor.cli.main …``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusterdoctor.testing import fixture_path

# Runs the CLI in-process in the child and writes the coarse module set to argv[1].
CHILD = r"""
import runpy, sys
out = sys.argv[1]
sys.argv = ["clusterdoctor", *sys.argv[2:]]
try:
    runpy.run_module("clusterdoctor.cli.main", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
mods = list(sys.modules)
sig = set()
for m in mods:
    parts = m.split(".")
    if parts[0] == "clusterdoctor":
        keep = 2 if len(parts) > 1 and parts[1] in ("cli", "rules") else 3
        sig.add(".".join(parts[:keep]))
    elif parts[0] not in sys.stdlib_module_names and not parts[0].startswith("_"):
        sig.add(parts[0])
import json
with open(out, "w") as f:
    json.dump(sorted(sig), f)
"""

# What every command may import: typer and what it brings, the CLI modules, the budgets (--limit).
BASE = {
    "annotated_doc",
    "certifi",
    "shellingham",
    "typer",
    "clusterdoctor",
    "clusterdoctor.cli",
    "clusterdoctor.errors",
    "clusterdoctor.escape",
    "clusterdoctor.observe",
    "clusterdoctor.observe.budgets",  # split out of limits (LIMITS, Budget, LimitExceeded)
    "clusterdoctor.observe.confine",
    "clusterdoctor.observe.limits",
    "clusterdoctor.observe.warning_list",  # split out of limits (WarningList)
}

COMM_ONE_RANK = BASE | {
    "msgspec",
    "typing_extensions",
    "clusterdoctor.analyze",
    "clusterdoctor.analyze.busbw",
    "clusterdoctor.analyze.comm",
    "clusterdoctor.analyze.intervals",
    "clusterdoctor.model",
    "clusterdoctor.observe.comm",
    "clusterdoctor.observe.watch",
    "clusterdoctor.redact",
    "clusterdoctor.report",
    "clusterdoctor.report.comm_text",
    "clusterdoctor.rules",
    "clusterdoctor.topology",
    "clusterdoctor.topology.cpu",
    "clusterdoctor.topology.cpuset",
    "clusterdoctor.topology.model",
}

# The rule catalogue and what its rules import (no numpy: the detector is imported when it runs).
CATALOGUE = BASE | {
    "clusterdoctor.analyze",
    "clusterdoctor.analyze.clock_skew",
    "clusterdoctor.analyze.etcd_members",
    "clusterdoctor.analyze.failslow_params",
    "clusterdoctor.analyze.gpu_health",
    "clusterdoctor.analyze.metric_window",
    "clusterdoctor.analyze.pcie_traffic",
    "clusterdoctor.analyze.quantile",
    "clusterdoctor.analyze.rates",
    "clusterdoctor.analyze.topology_split",
    "clusterdoctor.model",
    "clusterdoctor.rules",
    "clusterdoctor.topology",
    "clusterdoctor.topology.cpu",
    "clusterdoctor.topology.cpuset",
    "clusterdoctor.topology.gpu",
    "clusterdoctor.topology.model",
}

# Every offline reader diagnose can detect by content, and the diagnosis itself.
DIAGNOSE = CATALOGUE | {
    "clusterdoctor.analyze.correlate",
    "clusterdoctor.diagnosis",
    "clusterdoctor.observe.app",
    "clusterdoctor.observe.bundle",
    "clusterdoctor.observe.comm",
    "clusterdoctor.observe.control",
    "clusterdoctor.observe.detect",
    "clusterdoctor.observe.event_sources",
    "clusterdoctor.observe.gpu",
    "clusterdoctor.observe.messages",
    "clusterdoctor.observe.network",
    "clusterdoctor.observe.node",
    "clusterdoctor.observe.paste",
    "clusterdoctor.observe.safe_xml",
    "clusterdoctor.observe.storage",
    "clusterdoctor.observe.watch",
    "clusterdoctor.redact",
    "clusterdoctor.report",
    "clusterdoctor.report.json",
    "clusterdoctor.report.text",
    "clusterdoctor.topology.build",
    "clusterdoctor.topology.probe",
    "rich",
}

HELP_COMMANDS = [
    ["--help"],
    ["--version"],
    ["diagnose", "--help"],
    ["rules", "--help"],
    ["collect", "--help"],
    ["watch", "--help"],
    ["numa", "--help"],
    ["numa", "plan", "--help"],
    ["comm", "--help"],
    ["comm", "analyze", "--help"],
    ["qat", "--help"],
    ["sim", "--help"],
    ["sim", "run", "--help"],
    ["serve", "--help"],
    ["gpu", "--help"],
    ["gpu", "health", "--help"],
]

NCCL_TESTS_LOG = "comm/nccl_tests_2node_efa.log"
ETCD_LOG = "ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log"
NVIDIA_SMI_Q = "gpu/nvidia-smi-q_h800_525.105.17_healthy.txt"

# (argv with {fixture} placeholders, the fixture, the allow-list)
RUNS = [
    (["comm", "analyze", "{f}"], NCCL_TESTS_LOG, COMM_ONE_RANK),
    (["comm", "analyze", "{f}", "--format", "json"], NCCL_TESTS_LOG, COMM_ONE_RANK),
    (["rules"], None, CATALOGUE | {"clusterdoctor.report", "clusterdoctor.report.text", "rich"}),
    (["diagnose", "{f}", "--format", "json"], ETCD_LOG, DIAGNOSE),
    (["gpu", "health", "{f}"], NVIDIA_SMI_Q, DIAGNOSE),
]


def import_set(argv: list[str], tmp_path: Path) -> set[str]:
    out = tmp_path / "modules.json"
    p = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), *argv], capture_output=True, text=True, timeout=300
    )
    assert out.exists(), f"{argv}: the child wrote no module list: {p.stderr[-800:]}"
    return set(json.loads(out.read_text()))


def _check(argv: list[str], got: set[str], allowed: set[str]) -> None:
    new = sorted(got - allowed)
    assert not new, (
        f"`clusterdoctor {' '.join(argv)}` now imports {new}: import it lazily where it is used, "
        "or add it to this command's allow-list in tests/cli/test_import_sets.py"
    )


@pytest.mark.parametrize("argv", HELP_COMMANDS, ids=lambda a: " ".join(a))
def test_help_imports_only_the_cli(argv: list[str], tmp_path: Path) -> None:
    _check(argv, import_set(argv, tmp_path), BASE)


@pytest.mark.parametrize(
    ("argv", "fixture", "allowed"), RUNS, ids=lambda a: " ".join(a) if isinstance(a, list) else ""
)
def test_command_import_set_stays_within_its_allow_list(
    argv: list[str], fixture: str | None, allowed: set[str], tmp_path: Path
) -> None:
    if fixture is not None:
        f = fixture_path(fixture)
        if f is None:
            pytest.skip(f"shared fixture {fixture} absent (set CLUSTERDOCTOR_FIXTURES)")
        argv = [a.replace("{f}", str(f)) for a in argv]
    _check(argv, import_set(argv, tmp_path), allowed)


def test_comm_analyze_on_one_rank_does_not_import_numpy(tmp_path: Path) -> None:
    f = fixture_path(NCCL_TESTS_LOG)
    if f is None:
        pytest.skip(f"shared fixture {NCCL_TESTS_LOG} absent (set CLUSTERDOCTOR_FIXTURES)")
    got = import_set(["comm", "analyze", str(f)], tmp_path)
    assert "numpy" not in got
    assert "clusterdoctor.analyze.failslow" not in got


def test_the_child_sees_a_heavy_import_when_there_is_one(tmp_path: Path) -> None:
    # two ranks' traces: the fail-slow detector runs, so numpy is imported and must be seen
    gloo = Path(__file__).parents[1] / "data" / "comm" / "gloo_2rank"
    got = import_set(["comm", "analyze", str(gloo), "--format", "json"], tmp_path)
    assert {"numpy", "clusterdoctor.analyze.failslow"} <= got
