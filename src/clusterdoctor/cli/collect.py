"""``clusterdoctor collect -o BUNDLE``: capture this node's sources into one redacted bundle."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from clusterdoctor.cli.common import check_writable
from clusterdoctor.errors import UsageError


def _check_options(out: Path, files: list[str], sysfs_root: str, scrape: list[str]) -> None:
    """Refuse, before collecting for seconds, what would make the bundle useless or unwritable."""
    check_writable(out, "-o/--output")
    for f in files:
        if not os.path.isfile(f):
            if os.path.isdir(f):
                why = "is a directory"
            elif os.path.exists(f):  # a device, FIFO or socket: reading it could never end
                why = "not a regular file; refused before reading"
            else:
                why = "no such file"
            raise UsageError(f"--file {f}: {why}")
        if not os.access(f, os.R_OK):
            raise UsageError(f"--file {f}: permission denied")
    if not os.path.isdir(os.path.join(sysfs_root, "sys")):
        raise UsageError(f"--sysfs-root {sysfs_root}: no sys/ under this directory (not a sysfs root)")
    for url in scrape:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--scrape {url!r}: not an http(s) URL of a /metrics endpoint")


def register(app: typer.Typer) -> None:
    """Add the top-level ``collect`` command to ``app``."""

    @app.command("collect")
    def collect(
        out: Path = typer.Option(..., "-o", "--output", help="Bundle to write (a zstd-compressed tar)."),
        scrape: list[str] = typer.Option([], "--scrape", help="A /metrics URL to scrape twice (repeatable)."),
        scrape_interval: float = typer.Option(
            5.0, "--scrape-interval", min=0, help="Seconds between the two scrapes."
        ),
        unit: list[str] = typer.Option(
            [],
            "--unit",
            help="systemd unit whose journal to include (repeatable; default etcd, kubelet, containerd, kube-apiserver).",
        ),
        since: str = typer.Option("-2h", "--since", help="journalctl --since value."),
        file: list[str] = typer.Option(
            [], "--file", help="Extra file to include, redacted (logs, pods JSON, kubeconfig)."
        ),
        sysfs_root: str = typer.Option("/", "--sysfs-root", help="Root holding sys/ (for saved trees)."),
        timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Seconds each source may take."),
        rdma_interval: float = typer.Option(
            2.0, "--rdma-interval", min=0, help="Seconds between the two RDMA counter reads."
        ),
    ) -> None:
        """Capture topology, placement, RDMA counters, metrics scrapes and logs into one bundle.

        Each source has its own timeout; failures are recorded in the bundle's manifest.json and do
        not stop the others. Secrets (tokens, passwords, keys) are redacted. Read it back with
        `clusterdoctor diagnose BUNDLE`.
        """
        from clusterdoctor.observe.node_collect import CollectOptions, collect_bundle

        _check_options(out, file, sysfs_root, scrape)
        opts = CollectOptions(
            sysfs_root=sysfs_root,
            scrape=list(scrape),
            scrape_interval_s=scrape_interval,
            rdma_interval_s=rdma_interval,
            since=since,
            files=list(file),
            timeout_s=timeout,
        )
        if unit:
            opts.journal_units = list(unit)
        man = collect_bundle(out, opts)
        for s in man["sources"]:
            extra = f" ({s['error']})" if s.get("error") else ""
            typer.echo(
                f"{s['status']:>8}  {s['name']}  {len(s['files'])} file(s), {s['seconds']:.2f} s{extra}",
                err=True,
            )
        typer.echo(str(out))
