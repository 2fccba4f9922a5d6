"""Live: `clusterdoctor watch --prometheus` with its defaults against a real Prometheus whose probe
series were scraped every 15 s or every 30 s (the usual production intervals). The samples are
written into Prometheus' own TSDB with `promtool tsdb create-blocks-from openmetrics` (Prometheus'
backfilling), so the test needs no 20-minute wait; Prometheus then serves them as it would scraped
ones. Before the window followed the scrape interval, `increase(...[2s])` found nothing at these
intervals and watch said "no fail-slow probe series"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from tests.live.conftest import PROMETHEUS, Services, free_ports, need, start, wait_http

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]

RANKS = 4
MINUTES = 20
STRAGGLER, FROM_MINUTE = 2, 10


def _openmetrics(interval: int, end: float) -> str:
    """Four ranks of job "llm" making one 1 s step a second; from minute 10 rank 2's own work takes
    0.5 s longer a step and the others wait that long for it in the collectives (their step is 1.5 s)."""
    out = []
    fams = {
        "clusterdoctor_watch_steps_total": "counter",
        "clusterdoctor_watch_step_seconds_total": "counter",
        "clusterdoctor_watch_own_seconds_total": "counter",
        "clusterdoctor_watch_collective_seconds_total": "counter",
        "clusterdoctor_watch_collective_wait_seconds_total": "counter",
        "clusterdoctor_watch_data_wait_seconds_total": "counter",
        "clusterdoctor_watch_stall_seconds_total": "counter",
        "clusterdoctor_watch_step": "gauge",
        "clusterdoctor_watch_last_step_timestamp_seconds": "gauge",
    }
    n = MINUTES * 60 // interval
    t0 = end - n * interval
    rows: dict[str, list[str]] = {f: [] for f in fams}
    for r in range(RANKS):
        lab = f'job="llm",rank="{r}",local_rank="{r}",host="h{r}",gpu="0"'
        steps = wall = own = coll = wait = 0.0
        for i in range(n + 1):
            t = t0 + i * interval
            if i:
                slow = t - t0 >= FROM_MINUTE * 60
                step_s = 1.5 if slow else 1.0
                k = interval / step_s  # steps in this interval
                steps += k
                wall += k * step_s
                o = 0.6 + (0.5 if slow and r == STRAGGLER else 0.0)
                w = 0.1 + (0.5 if slow and r != STRAGGLER else 0.0)
                own += k * o
                coll += k * (step_s - o)
                wait += k * w
            vals = {
                "clusterdoctor_watch_steps_total": steps,
                "clusterdoctor_watch_step_seconds_total": wall,
                "clusterdoctor_watch_own_seconds_total": own,
                "clusterdoctor_watch_collective_seconds_total": coll,
                "clusterdoctor_watch_collective_wait_seconds_total": wait,
                "clusterdoctor_watch_data_wait_seconds_total": 0.0,
                "clusterdoctor_watch_stall_seconds_total": 0.0,
                "clusterdoctor_watch_step": int(steps),
                "clusterdoctor_watch_last_step_timestamp_seconds": t,
            }
            for f, v in vals.items():
                rows[f].append(f"{f}{{{lab}}} {v:.6f} {t:.3f}")
    for f, kind in fams.items():
        out.append(f"# TYPE {f} {kind}")
        out += rows[f]
    out.append("# EOF")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("interval", [15, 30])
def test_watch_defaults_work_at_production_scrape_intervals(tmp_path, cli, interval):
    need(PROMETHEUS, "prometheus")
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (apt-get install prometheus)")
    if "faketime" in os.environ.get("LD_PRELOAD", ""):
        # the series are stamped from this process's clock and read by Prometheus, a Go binary whose
        # clock libfaketime does not move: under `make test-clock` they would lie a year in its future
        pytest.skip("the clock is moved by libfaketime, Prometheus' is not (covered by `make test`)")
    end = time.time() - 5
    data = tmp_path / "probe.om"
    data.write_text(_openmetrics(interval, end))
    tsdb = tmp_path / "tsdb"
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(data), str(tsdb)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (port,) = free_ports(1)
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(f"global:\n  scrape_interval: {interval}s\n")
    services = Services()
    try:
        services.procs.append(
            start(
                "prometheus",
                [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tsdb}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                tmp_path,
            )
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/-/ready", 30)
        # the defaults: no --step (since/600 would be 2 s, shorter than the scrape interval)
        r = cli("watch", "--prometheus", url, "--job", "llm", "--once", "--since", "20m",
                "--fail-on", "warning", "--format", "json", timeout=120)  # fmt: skip
        assert r.code == 1, r.out[-3000:] + r.err
        doc = json.loads(r.out)
        (job,) = doc["jobs"]
        assert job["unit"] == "sample" and job["columns"] >= MINUTES * 60 // interval - 2
        first = doc["findings"][0]
        assert first["rule"] == "FS001" and first["subject"].startswith(f"rank {STRAGGLER}"), doc["findings"]
        (ep,) = [e for e in job["episodes"] if e["kind"] == "compute"]
        # the onset column's step index is the probe's step at minute 10 (one step a second)
        assert abs(ep["onset_step"] - FROM_MINUTE * 60) <= 3 * interval
    finally:
        services.stop_all()
