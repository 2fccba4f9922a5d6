"""Every example script under examples/ runs as a new user runs it: from a clean clone after
`make run`, from another directory, with no virtualenv activated and nothing but /usr/bin:/bin on
PATH. Each script documents its exit code; a script that needs ../shared exits 77 (the automake
"skipped" code) saying so, and the test skips with that reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.report.test_text_width import too_wide

SCRIPTS = sorted(p for p in (REPO / "examples").rglob("*.sh"))
# Each script's exit code (documented in its header) and what its output must show.
EXPECTED = {
    # 1: the stall is a CRITICAL finding; the chain names the stall before the leader loss
    "incident-etcd-leader-stall/run.sh": (1, ["clusterdoctor diagnosis", "CHAIN001", "ETCDLOG002"]),
    # 1: the killed leader is a CRITICAL finding (ETCD009), ranked first
    "incident-etcd-member-down/run.sh": (1, ["clusterdoctor diagnosis", "1. CRITICAL ETCD009"]),
}
SKIP = 77


def test_examples_are_found():
    assert SCRIPTS, "no example scripts under examples/"
    assert {str(p.relative_to(REPO / "examples")) for p in SCRIPTS} <= set(EXPECTED), (
        "document the exit code of each new example script in EXPECTED"
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO / "examples")))
def test_example_runs_from_a_clean_shell(script, tmp_path):
    assert os.access(script, os.X_OK), f"{script} is not executable"
    path = "/usr/bin:/bin"
    if not (REPO / ".venv/bin/clusterdoctor").exists():  # a test run outside `make`'s .venv
        path = f"{Path(sys.executable).parent}:{path}"
    env = {"PATH": path, "HOME": str(tmp_path), "LANG": "C.UTF-8", "COLUMNS": "80"}
    for key in ("CLUSTERDOCTOR_FIXTURES", "LD_PRELOAD", "FAKETIME", "TZ"):  # keep the suite's own setup
        if key in os.environ:
            env[key] = os.environ[key]
    p = subprocess.run([str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    if p.returncode == SKIP:
        pytest.skip(p.stderr.strip() or "the example needs ../shared")
    code, shows = EXPECTED[str(script.relative_to(REPO / "examples"))]
    assert p.returncode == code, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert "Traceback" not in p.stderr
    for text in shows:
        assert text in p.stdout
    assert not too_wide(p.stdout)  # COLUMNS=80 honoured through the script
