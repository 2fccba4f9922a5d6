"""A real Prometheus over a backfilled TSDB, shared by the benchmarks that query one (imported by them;
not a benchmark itself): `promtool tsdb create-blocks-from openmetrics`, then the server on a free
127.0.0.1 port until it answers /-/ready, stopped when the block ends."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backfill(promtool: str, om: Path, tsdb: Path) -> None:
    """Write OpenMetrics file ``om`` into TSDB blocks under ``tsdb`` (created)."""
    tsdb.mkdir()
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(om), str(tsdb)],
        check=True,
        capture_output=True,
    )


@contextmanager
def serving(prom: str, tsdb: Path, tmp: Path, ready_s: float = 60, poll_s: float = 0.2) -> Iterator[str]:
    """Prometheus serving ``tsdb`` (no scrapes, 10-year retention); yields its URL once ready."""
    cfg = tmp / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp / "prometheus.log").open("wb") as log:
        p = subprocess.Popen(
            [
                prom,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={tsdb}",
                "--storage.tsdb.retention.time=3650d",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + ready_s
            while True:
                try:
                    urllib.request.urlopen(f"{url}/-/ready", timeout=1).read()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(poll_s)
            yield url
        finally:
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
