"""``clusterdoctor serve``: long-running services (node agent; scheduler extender).

The CLI owns the boundary: it checks the options, binds (through the service's ``make_server``),
prints the URL only once the socket listens, and turns a refused bind (port in use, address not
here, port out of range) into one line and exit 2. The servers themselves live in ``serve/``.
"""

from __future__ import annotations

import importlib
import os
import threading
from typing import Any

import typer

from clusterdoctor.cli.common import EXIT_BAD_INPUT, CliExit

app = typer.Typer(
    help=(
        "Long-running services: the node agent (Prometheus exporter) and the scheduler extender.\n\n"
        "Exit codes: 0 stopped (Ctrl-C); 2 bad usage, or the address cannot be listened on."
    ),
    no_args_is_help=True,
)


def _hostport(listen: str, default_port: int) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep:
        host, port = listen, str(default_port)
    try:
        n = int(port)
    except ValueError:
        raise CliExit(EXIT_BAD_INPUT, f"error: --listen {listen!r}: port is not a number") from None
    if not 0 <= n <= 65535:
        raise CliExit(EXIT_BAD_INPUT, f"error: --listen {listen!r}: port {n} is not in 0-65535")
    return host.strip("[]") or "127.0.0.1", n


def _bind(make: Any, host: str, port: int, *args: Any) -> Any:
    """``make(..., host, port)`` — a bound, listening server — or one line and exit 2."""
    try:
        return make(*args, host, port)
    # EADDRINUSE, EADDRNOTAVAIL, unknown host name (waitress says so with a ValueError)
    except (OSError, OverflowError, ValueError) as e:
        why = getattr(e, "strerror", None) or str(e)
        raise CliExit(EXIT_BAD_INPUT, f"error: cannot listen on {host}:{port}: {why}") from None


def _url(srv: Any, path: str) -> str:
    host, port = srv.server_address[:2]
    host = f"[{host}]" if ":" in str(host) else host
    scheme = "https" if getattr(srv, "tls", False) else "http"
    return f"{scheme}://{host}:{port}{path}"


def _web_config(path: str | None) -> Any:
    """``--web.config.file`` loaded and checked (one line and exit 2 if unusable), or None."""
    if not path:
        return None
    from clusterdoctor.errors import InputError
    from clusterdoctor.serve.agent_web import load_web_config

    try:
        return load_web_config(path)
    except InputError as e:
        raise CliExit(EXIT_BAD_INPUT, f"error: --web.config.file {e}") from None


_WEB_HELP = (
    "exporter-toolkit web config: tls_server_config (HTTPS only; client certificates with "
    "client_auth_type and client_ca_file; min_version) and basic_auth_users (bcrypt hashes); "
    "see docs/kubernetes.md."
)


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM (kubelet, systemd) stops the service as Ctrl-C does


def _serve(srv: Any) -> None:
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass  # Ctrl-C or SIGTERM: how a service stops, exit 0
    finally:
        srv.server_close()


@app.command("agent")
def agent(
    listen: str = typer.Option(
        "127.0.0.1:9877", "--listen", help="HOST:PORT to bind (default loopback only; port 0: any free port)."
    ),
    sysfs_root: str = typer.Option("/", "--sysfs-root", help="Root holding sys/class/infiniband."),
    log: list[str] = typer.Option(
        [], "--log", help="Log (or pods/Flink/Kafka file) to read on every scrape (repeatable)."
    ),
    source_timeout: float = typer.Option(
        5.0, "--source-timeout", min=0.1, help="Seconds each source may take per scrape."
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
    kernel_log: list[str] = typer.Option(
        [],
        "--kernel-log",
        help="Kernel log for GPU events: /dev/kmsg, a kern.log/dmesg file or a journal directory; "
        "repeatable, the first readable is used (in the pod: /dev/kmsg, then /host/var/log/...).",
    ),
    event_window: str = typer.Option(
        "1h", "--event-window", help="Events older than this raise no finding (90s, 30m, 1h; default 1h)."
    ),
    interval: str = typer.Option(
        "30s", "--interval", help="Diagnose this often; scrapes get the last result."
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warn or error."),
    log_format: str = typer.Option("logfmt", "--log-format", help="logfmt or json (on stderr)."),
    web_config: str = typer.Option(
        None,
        "--web.config.file",
        "--web-config-file",
        help=_WEB_HELP,
    ),
) -> None:
    """Expose this node's findings and derived gauges on /metrics for Prometheus.

    Prints its URL on stderr once it listens.
    """
    host, port = _hostport(listen, 9877)
    if not os.path.isdir(os.path.join(sysfs_root, "sys")):
        raise CliExit(
            EXIT_BAD_INPUT,
            f"error: --sysfs-root {sysfs_root}: no sys/ under this directory (not a sysfs root)",
        )
    for f in log:
        if not os.path.isfile(f):
            why = "is a directory" if os.path.isdir(f) else "no such file"
            raise CliExit(EXIT_BAD_INPUT, f"error: --log {f}: {why}")
    if proc_root:
        from clusterdoctor.cli.kube_options import check_dir

        check_dir("--proc-root", proc_root)
    window_s = _seconds("--event-window", event_window)
    interval_s = _seconds("--interval", interval)
    from clusterdoctor.serve.agent_log import Logger

    try:
        logger = Logger(log_level, log_format)
    except ValueError as e:
        raise CliExit(EXIT_BAD_INPUT, f"error: {e}") from None
    web = _web_config(web_config)
    from clusterdoctor.serve.agent import Agent, default_sources, make_server

    a = Agent(
        default_sources(
            sysfs_root,
            list(log),
            source_timeout,
            proc_root,
            pod_resources_socket,
            node_name,
            kernel_logs=list(kernel_log),
            window_s=window_s,
        ),
        pod_resources=bool(pod_resources_socket),
        interval_s=interval_s,
        window_s=window_s,
        log=logger,
    )
    try:
        srv = _bind(lambda h, p: make_server(a, h, p, web=web), host, port)
        typer.echo(f"clusterdoctor agent on {_url(srv, '/metrics')}", err=True)
        logger.info(
            "listening",
            url=_url(srv, "/metrics"),
            interval=f"{interval_s:g}s",
            event_window=f"{window_s:g}s",
            basic_auth=bool(web and web.users),
            tls=bool(web and web.tls),
        )
        _serve(srv)
    finally:
        a.close()


def _seconds(flag: str, text: str) -> float:
    from clusterdoctor.observe.control.logs import parse_duration

    try:
        v = parse_duration(text.strip())
    except (ValueError, TypeError):
        v = None
    if v is None or not v > 0 or v != v or v > 30 * 86400:
        raise CliExit(
            EXIT_BAD_INPUT,
            f"error: {flag} {text!r}: not a duration between 0 and 30 days (e.g. 90s, 30m, 1h)",
        )
    return float(v)


@app.command("extender")
def extender(
    listen: str = typer.Option(
        "127.0.0.1:8888", "--listen", help="HOST:PORT to bind (port 0: any free port)."
    ),
    policy: str = typer.Option(
        "", "--policy", help="Placement policy to score nodes with (default: the extender's first policy)."
    ),
    prometheus: str = typer.Option(
        None,
        "--prometheus",
        help="Prometheus URL with the agents' series: filter nodes with a critical GPU or straggler finding, "
        "score down warned ones, use the agents' free-GPU counts.",
    ),
    web_config: str = typer.Option(
        None,
        "--web.config.file",
        "--web-config-file",
        help="exporter-toolkit web config with tls_server_config: serve HTTPS (kube-scheduler's "
        "enableHTTPS/tlsConfig; client certificates with client_auth_type). basic_auth_users are "
        "refused: kube-scheduler cannot send them.",
    ),
) -> None:
    """Run the kube-scheduler extender (filter/prioritize over HTTP).

    Prints its URL on stderr once it listens (examples/kube-scheduler-extender.yaml points
    kube-scheduler at it).
    """
    try:
        mod = importlib.import_module("clusterdoctor.serve.extender")
    except ModuleNotFoundError as e:
        if e.name != "clusterdoctor.serve.extender":
            raise
        raise CliExit(
            EXIT_BAD_INPUT,
            "error: the scheduler extender is not part of this build (clusterdoctor.serve.extender missing)",
        ) from None
    policies = tuple(getattr(mod, "POLICIES", ()))
    if not policy:
        policy = policies[0] if policies else ""
    if policies and policy not in policies:
        raise CliExit(EXIT_BAD_INPUT, f"error: --policy {policy!r}: expected one of {', '.join(policies)}")
    host, port = _hostport(listen, 8888)
    web = _web_config(web_config)
    if web is not None and web.users:
        raise CliExit(
            EXIT_BAD_INPUT,
            f"error: --web.config.file {web_config}: basic_auth_users: kube-scheduler's extender client "
            "sends no basic auth; authenticate it with a client certificate (client_auth_type)",
        )
    signals = None
    if prometheus:
        from clusterdoctor.cli.kube_options import check_http_url
        from clusterdoctor.serve.signals import PrometheusSignals

        signals = PrometheusSignals(check_http_url("--prometheus", prometheus))
    srv = _bind(lambda h, p: mod.make_server(h, p, policy, signals=signals, web=web), host, port)
    typer.echo(
        f"clusterdoctor scheduler extender ({policy}) on {_url(srv, '/scheduler')} (urlPrefix; verbs filter, prioritize)",
        err=True,
    )
    _serve(srv)
