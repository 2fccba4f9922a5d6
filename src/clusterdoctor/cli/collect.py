"""``clusterdoctor collect -o BUNDLE``: capture this node's sources into one redacted bundle."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the top-level ``collect`` command to ``app``."""

    @app.command("collect")
    def collect(
        out: Path = typer.Option(..., "-o", "--output", help="Bundle to write (a zstd-compressed tar)."),
        scrape: list[str] = typer.Option([], "--scrape", help="A /metrics URL to scrape twice (repeatable)."),
        scrape_interval: float = typer.Option(
            5.0, "--scrape-interval", help="Seconds between the two scrapes."
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
        timeout: float = typer.Option(10.0, "--timeout", help="Seconds each source may take."),
        rdma_interval: float = typer.Option(
            2.0, "--rdma-interval", help="Seconds between the two RDMA counter reads."
        ),
    ) -> None:
        """Capture topology, placement, RDMA counters, metrics scrapes and logs into one bundle.

        Each source has its own timeout; failures are recorded in the bundle's manifest.json and do
        not stop the others. Secrets (tokens, passwords, keys) are redacted. Read it back with
        `clusterdoctor diagnose BUNDLE`.
        """
        from clusterdoctor.observe.node_collect import CollectOptions, collect_bundle

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
