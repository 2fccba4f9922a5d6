"""Shared test helpers: real fixtures (skipped with a reason when absent) and running the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from clusterdoctor.testing import fixture_path, fixtures_root

# Property tests: in CI (.ci/run sets HYPOTHESIS_PROFILE=ci) every run draws the same examples, so a red
# run means the change broke something, not that a new random example was drawn; a developer's
# `make test` keeps drawing new ones (that is how the last parser bugs were found).
# No deadline in either: a property test asserts behaviour, and a loaded 2-core machine makes any
# per-example time limit fail at random (DeadlineExceeded / Flaky), which says nothing about the code.
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

REPO = Path(__file__).resolve().parents[1]

# pytest-xdist gives its workers COLUMNS=80 and LINES=24; a serial run has whatever the shell had.
# Take them away so that a test sees the same environment in both passes of `make test`.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

# `make test` runs the suite in two passes: in parallel (pytest-xdist), then these tests alone. They
# measure real time or inject real faults (SIGSTOP, CPU quotas, rate limits, servers under load,
# deadlines), start real services on ports they probe first, or time the probe's overhead: a test
# beside them would change what they measure. Everything with the `live` marker is serial too.
SERIAL_MODULES = (
    "tests/training/test_faultlab.py",
    "tests/training/test_watch_probe.py",
    "tests/hostile/test_servers.py",
    "tests/hostile/test_r25_servers.py",
    "tests/hostile/test_network.py",
    "tests/serve/",
    "tests/observe/comm/test_parallel_ray.py",  # starts a Ray cluster (GCS, raylet, workers)
)


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()
        if item.get_closest_marker("live") or rel.startswith(SERIAL_MODULES):
            item.add_marker(pytest.mark.serial)


# .ci/run runs the suite a second time under libfaketime (a year ahead, another time zone) so that no
# test depends on the date. libfaketime (Debian 12: 0.9.10) does not intercept sem_clockwait, which
# Python 3.11 uses for lock waits with a timeout: such a wait overruns by the fake offset. The few tests
# that measure a timed wait on a lock skip there, with this reason; everything else runs.
UNDER_FAKETIME = "faketime" in os.environ.get("LD_PRELOAD", "")
needs_real_lock_timeouts = pytest.mark.skipif(
    UNDER_FAKETIME, reason="libfaketime does not intercept sem_clockwait (timed lock waits overrun)"
)
TEST_DATA = REPO / "tests" / "data"


def shared_fixture(relpath: str) -> Path:
    """Path of a file under ../shared/fixtures, or skip the test saying why."""
    if fixtures_root() is None:
        pytest.skip("shared fixtures absent (set CLUSTERDOCTOR_FIXTURES or check out ../shared/fixtures)")
    p = fixture_path(relpath)
    if p is None:
        pytest.skip(f"shared fixture {relpath} absent")
    return p


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, input: str | None = None
) -> CliResult:
    """Run ``clusterdoctor ARGS`` as a real process (the way users run it). ``timeout`` is a cap on a
    hung process, never a speed check: generous, since the machine may be loaded."""
    full_env = dict(os.environ)
    full_env.setdefault("COLUMNS", "200")
    if env:
        full_env.update(env)
    p = subprocess.run(
        [sys.executable, "-m", "clusterdoctor.cli.main", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        input=input,
    )
    return CliResult(p.returncode, p.stdout, p.stderr)


def diagnose_text(directory: Path, text: str, name: str = "paste.txt") -> list:
    """The findings of a diagnosis of ``text`` written to ``directory/name`` (in process, fixed clock)."""
    from clusterdoctor import diagnosis

    p = directory / name
    p.write_text(text)
    obs = diagnosis.new_observations(lambda: 1_800_000_000.0)
    return diagnosis.run(obs, diagnosis.load_sources(obs, [str(p)])).findings


def cpu_busy_share(seconds: float = 1.0) -> float:
    """The share of this machine's CPU time spent busy over ``seconds`` (from /proc/stat; 0.0 where it
    cannot be read)."""
    import time

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            vals = [int(v) for v in f.readline().split()[1:]]
        idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
        return sum(vals[:8]), idle

    try:
        t0, i0 = sample()
        time.sleep(seconds)
        t1, i1 = sample()
    except (OSError, ValueError, IndexError):
        return 0.0
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


# The fault lab's verdicts are about one throttled rank among its peers: other programs burning the
# same CPUs slow every rank and change what is measured (bench/failslow.py runs a "loaded" condition
# and reports it). A lab test on a busy machine skips and says how busy it was, rather than assert
# what the neighbours decide.
LAB_MAX_BUSY = float(os.environ.get("CLUSTERDOCTOR_LAB_MAX_BUSY", "0.35"))


def require_quiet_machine() -> None:
    busy = cpu_busy_share(1.0)
    if busy > LAB_MAX_BUSY:
        pytest.skip(
            f"machine busy ({busy:.0%} of its CPUs before the lab started; at most {LAB_MAX_BUSY:.0%}): "
            "a fault-lab verdict would measure the neighbours (CLUSTERDOCTOR_LAB_MAX_BUSY changes it)"
        )


@pytest.fixture
def cli():
    return run_cli


def start_local_ray(ray, num_cpus: int = 2) -> None:
    """``ray.init(num_cpus=...)`` for a test, tried twice: on the loaded 2-core machine Ray's first
    start sometimes misses its own node-info deadline (`Failed to get node info`)."""
    for attempt in range(2):
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
            return
        except Exception as e:
            ray.shutdown()
            if attempt:
                pytest.skip(
                    f"Ray could not start on this machine (tried twice): {type(e).__name__}: {e}"[:300]
                )
