"""``clusterdoctor serve``: long-running services (node agent; scheduler extender)."""

from __future__ import annotations

import importlib

import typer

from clusterdoctor.cli.common import EXIT_BAD_INPUT, CliExit

app = typer.Typer(
    help="Long-running services: the node agent (Prometheus exporter) and the scheduler extender.",
    no_args_is_help=True,
)


def _hostport(listen: str, default_port: int) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep:
        return listen, default_port
    try:
        return host.strip("[]") or "127.0.0.1", int(port)
    except ValueError:
        raise CliExit(EXIT_BAD_INPUT, f"error: --listen {listen!r}: port is not a number") from None


@app.command("agent")
def agent(
    listen: str = typer.Option(
        "127.0.0.1:9877", "--listen", help="HOST:PORT to bind (default loopback only)."
    ),
    sysfs_root: str = typer.Option("/", "--sysfs-root", help="Root holding sys/class/infiniband."),
    log: list[str] = typer.Option(
        [], "--log", help="Log (or pods/Flink/Kafka file) to read on every scrape (repeatable)."
    ),
    source_timeout: float = typer.Option(
        5.0, "--source-timeout", help="Seconds each source may take per scrape."
    ),
    proc_root: str = typer.Option(
        None,
        "--proc-root",
        help="Audit GPU/NIC processes' NUMA placement from this procfs (/host/proc in a pod).",
    ),
    pod_resources_socket: str = typer.Option(
        None,
        "--pod-resources-socket",
        help="Kubelet pod-resources socket: name pods and their GPUs (needs the k8s extra).",
    ),
    node_name: str = typer.Option(
        None, "--node-name", help="This node's name, to list its pods from the API server (in a pod)."
    ),
) -> None:
    """Expose this node's findings and derived gauges on /metrics for Prometheus."""
    from clusterdoctor.serve.agent import Agent, default_sources, serve

    host, port = _hostport(listen, 9877)
    a = Agent(
        default_sources(sysfs_root, list(log), source_timeout, proc_root, pod_resources_socket, node_name),
        pod_resources=bool(pod_resources_socket),
    )
    typer.echo(f"clusterdoctor agent on http://{host}:{port}/metrics", err=True)
    try:
        serve(a, host, port)
    except OSError as e:
        raise CliExit(EXIT_BAD_INPUT, f"error: cannot listen on {host}:{port}: {e.strerror or e}") from None


# --- scheduler extender: implemented by the simulator work in clusterdoctor.serve.extender -------------
@app.command("extender")
def extender(
    listen: str = typer.Option("127.0.0.1:8888", "--listen", help="HOST:PORT to bind."),
    policy: str = typer.Option(
        "", "--policy", help="Placement policy to score nodes with (default: the extender's first policy)."
    ),
    prometheus: str = typer.Option(
        None,
        "--prometheus",
        help="Prometheus URL with the agents' series: filter nodes with a critical GPU or straggler finding, "
        "score down warned ones, use the agents' free-GPU counts.",
    ),
) -> None:
    """Run the kube-scheduler extender (filter/prioritize over HTTP)."""
    try:
        mod = importlib.import_module("clusterdoctor.serve.extender")
    except ModuleNotFoundError as e:
        if e.name != "clusterdoctor.serve.extender":
            raise
        raise CliExit(
            EXIT_BAD_INPUT,
            "error: the scheduler extender is not part of this build (clusterdoctor.serve.extender missing)",
        ) from None
    run = getattr(mod, "run_extender", None)
    if run is None:
        raise CliExit(
            EXIT_BAD_INPUT, "error: clusterdoctor.serve.extender has no run_extender(host, port, policy)"
        )
    policies = tuple(getattr(mod, "POLICIES", ()))
    if not policy:
        policy = policies[0] if policies else ""
    if policies and policy not in policies:
        raise CliExit(EXIT_BAD_INPUT, f"error: --policy {policy!r}: expected one of {', '.join(policies)}")
    host, port = _hostport(listen, 8888)
    if prometheus:
        from clusterdoctor.serve.signals import PrometheusSignals

        run(host, port, policy, signals=PrometheusSignals(prometheus))
    else:
        run(host, port, policy)
