"""``clusterdoctor diagnose``: run every rule that can run, on this machine or on given sources."""

from __future__ import annotations

from pathlib import Path

import typer

from clusterdoctor.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_OK, CliExit
from clusterdoctor.cli.prom_options import BEARER_TOKEN_FILE, CA_FILE, HEADER, prom_auth


def diagnose(
    sources: list[Path] = typer.Argument(
        None,
        help="Files or folders to diagnose offline, detected by content: metrics dumps, Prometheus query "
        "answers, etcd/kubelet/containerd logs, etcdctl output (endpoint status/health, member list), "
        "bundles from `clusterdoctor collect`, sysfs trees or tarballs, hwloc XML, nvidia-smi topo -m, "
        "NCCL topology XML, numactl -H, NCCL logs, traces. A folder (an incident folder) is read "
        "recursively; files it cannot use are listed in the report's warnings, hidden files and "
        "editor backups are skipped. Without SOURCE: this machine, live.",
        show_default=False,
    ),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json | html | junit"),
    output: Path = typer.Option(None, "--output", "-o", help="Write the report here instead of stdout."),
    fail_on: str = typer.Option(
        "critical",
        "--fail-on",
        help="Exit 1 when a finding is at or above this severity: info | warning | critical.",
    ),
    sysfs_root: str = typer.Option(
        "/", "--sysfs-root", help="Read topology from this sysfs root (live only)."
    ),
    prometheus: str = typer.Option(
        None, "--prometheus", help="Prometheus server URL to pull control-plane series from."
    ),
    since: str = typer.Option("2h", "--since", help="With --prometheus: how far back (90s, 30m, 2h, 1d)."),
    step: float = typer.Option(
        None, "--step", help="With --prometheus: query_range step in seconds (default: since/720, >= 15)."
    ),
    bearer_token_file: str = BEARER_TOKEN_FILE,
    ca_file: str = CA_FILE,
    header: list[str] = HEADER,
    scrape: list[str] = typer.Option(
        None, "--scrape", help="A /metrics URL to scrape directly (repeatable)."
    ),
    scrape_interval: float = typer.Option(
        5.0, "--scrape-interval", help="Seconds between the two scrapes (0: one scrape)."
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help="Do not verify TLS certificates of --scrape URLs."
    ),
    etcd_endpoints: str = typer.Option(
        None, "--etcd-endpoints", help="Comma-separated etcd endpoints for etcdctl endpoint status/health."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Text report: include the placement table."),
    proc_root: str = typer.Option(
        "/proc",
        "--proc-root",
        help="Read processes from this procfs (live only; /host/proc in the agent pod).",
    ),
    pod_resources_socket: str = typer.Option(
        None,
        "--pod-resources-socket",
        help="Kubelet pod-resources socket (/var/lib/kubelet/pod-resources/kubelet.sock): name pods and "
        "their GPUs instead of pids (live only; needs the k8s extra).",
    ),
    node_name: str = typer.Option(
        None,
        "--node-name",
        help="This node's name: list its pods from the API server (in a pod, with its service account) "
        "to map processes to namespace/pod/container.",
    ),
    pods: Path = typer.Option(
        None,
        "--pods",
        help="A PodList (kubectl get pods -o json) to map processes to pods instead of the API.",
    ),
) -> None:
    """Find what slows this node (or the given captures) down; rank causes with evidence and fixes.

    Rules whose inputs are missing are listed as skipped, with what they need — never as healthy.

    A file that cannot be used (unrecognised, unreadable, malformed) does not stop the others: it
    is listed in the report's warnings with the reason. Only when nothing at all can be used does
    diagnose stop, with one line and exit code 2.

    Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it; 2 bad input or usage,
    or an input that was empty or truncated (the report is printed and its warnings say which).

    Examples:

      clusterdoctor diagnose

      clusterdoctor diagnose --format html -o report.html

      clusterdoctor diagnose topo.xml nvidia-smi-topo.txt --format json

      clusterdoctor diagnose incident-2026-12-01/

      clusterdoctor diagnose --prometheus http://prometheus:9090 --since 2h

      clusterdoctor diagnose --scrape http://127.0.0.1:2379/metrics --etcd-endpoints 127.0.0.1:2379
    """
    from clusterdoctor import diagnosis
    from clusterdoctor.cli.report_choice import check_choice, emit
    from clusterdoctor.errors import CollectError
    from clusterdoctor.model import Severity

    check_choice(fmt, output)
    try:
        threshold = Severity.parse(fail_on)
    except ValueError as e:
        raise CliExit(2, f"error: --fail-on: {e}") from None
    auth = prom_auth(bearer_token_file, ca_file, header)  # checked now: one line, exit 2
    obs = diagnosis.new_observations()
    refs = []
    if prometheus:
        try:
            refs.append(
                diagnosis.add_prometheus(obs, prometheus, diagnosis.parse_since(since), step, auth=auth)
            )
        except CollectError as e:
            if not (sources or scrape or etcd_endpoints):
                raise  # nothing else to report on: one line, exit 2 (the CLI's error boundary)
            # a dead Prometheus beside other inputs: their report, this warning, and exit 2
            from clusterdoctor.redact import redact_urls

            why = redact_urls(f"prometheus not read: {e}")
            obs.data.setdefault("warnings_list", []).append(why)
            obs.data.setdefault("incomplete_inputs", []).append(why)
            typer.echo(f"clusterdoctor: warning: {why}", err=True)  # every format, junit's too
    if scrape:
        refs.append(diagnosis.add_scrapes(obs, scrape, scrape_interval, insecure))
    if etcd_endpoints:
        refs.append(diagnosis.add_etcd_endpoints(obs, [e for e in etcd_endpoints.split(",") if e.strip()]))
    if sources:
        from clusterdoctor.cli.progress import Progress

        with Progress("reading") as progress:
            refs += diagnosis.load_sources(obs, sources, progress=progress)
        diag = diagnosis.run(obs, refs)
    elif refs:
        diag = diagnosis.run(obs, refs)  # remote sources only: this machine is not what was asked about
    else:
        from clusterdoctor.cli.kube_options import check_dir, check_pods_file

        check_dir("--proc-root", proc_root)
        if pods:
            check_pods_file(pods)
        kube = None
        if pod_resources_socket or node_name or pods:
            from clusterdoctor.observe.node.kube_context import collect_kube_context

            kube = collect_kube_context(
                node_name, pod_resources_socket, pods_file=str(pods) if pods else None
            )
        diag = diagnosis.diagnose_local(sysfs_root=sysfs_root, proc_root=proc_root, obs=obs, kube=kube)
    emit(diag, fmt, output, verbose=verbose)
    if obs.get("incomplete_inputs"):  # the report has said which (its warnings); the exit code says so too
        raise typer.Exit(EXIT_BAD_INPUT)
    worst = diag.worst()
    raise typer.Exit(EXIT_FINDINGS if worst is not None and worst >= threshold else EXIT_OK)


def register(app: typer.Typer) -> None:
    app.command("diagnose")(diagnose)
