"""``clusterdoctor watch``: name the slow rank, link or data loader of a running job, and since when."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import typer

from clusterdoctor.cli.common import EXIT_FINDINGS, EXIT_OK, CliExit
from clusterdoctor.cli.prom_options import BEARER_TOKEN_FILE, CA_FILE, HEADER, prom_auth

SCHEMA = "clusterdoctor.watch/1"


def watch(
    from_dir: Path = typer.Option(
        None, "--from", help="Directory of the probe's JSON-lines files (watch-rank<N>.jsonl), or one file."
    ),
    prometheus: str = typer.Option(None, "--prometheus", help="Prometheus server that scrapes the probes."),
    job: str = typer.Option(
        None, "--job", help="With --prometheus: the training job (the probes' job label)."
    ),
    since: str = typer.Option("15m", "--since", help="With --prometheus: how far back (90s, 30m, 2h)."),
    step: float = typer.Option(
        None,
        "--step",
        help="With --prometheus: query step in seconds (default since/600, >= 2 and >= the probes' scrape interval).",
    ),
    bearer_token_file: str = BEARER_TOKEN_FILE,
    ca_file: str = CA_FILE,
    header: list[str] = HEADER,
    follow: bool = typer.Option(
        False, "--follow", help="With --from: keep reading the files as they grow, and refresh."
    ),
    once: bool = typer.Option(
        False, "--once", help="One report and exit (the default for --from without --follow)."
    ),
    interval: float = typer.Option(5.0, "--interval", help="Seconds between refreshes."),
    count: int = typer.Option(0, "--count", help="Stop after this many refreshes (0: until Ctrl-C)."),
    topology: Path = typer.Option(
        None,
        "--topology",
        help="A topology source (hwloc XML, nvidia-smi topo -m, ...) to name GPUs and NICs.",
    ),
    gpu: list[str] = typer.Option(
        None,
        "--gpu",
        help="GPU health source to join to the ranks (repeatable): nvidia-smi -q / -q -x / --query-gpu CSV, "
        "dcgm-exporter /metrics dump, dmesg/journalctl with Xid lines, lspci -vv, nvidia-smi nvlink, dcgmi "
        "output, or a folder of them. HOST=PATH says which host a file is from (nvidia-smi and dmesg "
        "do not say; dcgm-exporter's Hostname label does).",
    ),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json"),
    output: Path = typer.Option(None, "--output", "-o", help="Write the report here instead of stdout."),
    fail_on: str = typer.Option(
        "critical", "--fail-on", help="Exit 1 at or above: info | warning | critical."
    ),
) -> None:
    """Watch a training job's fail-slow probe: the straggler rank and its class (compute, communication,
    data loader, whole job, periodic), since when, how much slower, what it cost, what to do.

    The probe runs inside the job (`from clusterdoctor.training import watch; w = watch.install(model)`,
    `w.step()` each step). Read its files with --from, or its metrics through Prometheus.

    --gpu joins GPU health to the ranks by host and GPU index (the probe's labels): a straggler's
    evidence then names its GPU's state, and a GPU fault that can slow it (a clock held down, Xid,
    ECC, a degraded PCIe/NVLink link) becomes the cause in its evidence chain (rule GPU019).

    --prometheus refreshes every --interval seconds until Ctrl-C (--once: one report); --from reads the
    files once (--follow: keep reading and refresh). With --prometheus the node agents' GPU findings
    and sources down (`clusterdoctor serve agent`) on the job's hosts are added (the probe's host
    label is matched to the agent's node label; when none matches, every agent's are shown).

    Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it; 2 bad input or usage.

    Examples:

      clusterdoctor watch --from /shared/job-42/watch --once

      clusterdoctor watch --from /shared/job-42/watch --follow

      clusterdoctor watch --prometheus http://prometheus:9090 --job llm-7b --since 30m

      clusterdoctor watch --from /shared/job-42/watch --gpu gpu-a12=nvidia-smi-q.txt --gpu dcgm.prom
    """
    from clusterdoctor.cli.common import check_writable
    from clusterdoctor.diagnosis import parse_since
    from clusterdoctor.errors import InputError
    from clusterdoctor.model import Severity

    # each value on its own first (the error names it), then how they combine
    if fmt not in ("text", "json"):
        raise CliExit(2, f"error: unknown format {fmt!r}; choose text or json")
    try:
        threshold = Severity.parse(fail_on)
    except ValueError as e:
        raise CliExit(2, f"error: --fail-on: {e}") from None
    if interval <= 0:
        raise CliExit(2, f"error: --interval {interval:g}: must be positive")
    if step is not None and step <= 0:
        raise CliExit(2, f"error: --step {step:g}: must be positive")
    since_s = parse_since(since)
    check_writable(output, "--output")
    if topology is not None and not topology.exists():
        raise InputError("no such file or directory", str(topology))
    if from_dir is not None and not from_dir.exists():
        raise InputError("no such file or directory", str(from_dir))
    gpu_sources = [_gpu_arg(v) for v in gpu or []]
    for _host, path in gpu_sources:
        if not path.exists():
            raise InputError("no such file or directory", str(path))
    if prometheus is not None and not prometheus.startswith(("http://", "https://")):
        raise CliExit(2, f"error: --prometheus {prometheus!r}: not an http(s) URL")
    auth = prom_auth(bearer_token_file, ca_file, header)  # checked first: one line, exit 2
    if (from_dir is None) == (prometheus is None):
        raise CliExit(2, "error: give exactly one of --from DIR or --prometheus URL")
    if follow and prometheus:
        raise CliExit(
            2, "error: --follow is for --from (with --prometheus the report refreshes unless --once)"
        )
    topo = _load_topology(topology) if topology else None
    gpus = load_gpu_reports(gpu_sources) if gpu_sources else None
    refresh = (follow or prometheus is not None) and not once
    source: Any
    if from_dir is not None:
        source = _FileSource(str(from_dir))
    else:
        source = _PromSource(prometheus, job, since_s, step, auth)
    code = EXIT_OK
    n = 0
    try:
        while True:
            report = source.report(topo, live=refresh, gpus=gpus)
            worst = max((Severity.parse(f["severity"]) for f in report["findings"]), default=None)
            code = EXIT_FINDINGS if worst is not None and worst >= threshold else EXIT_OK
            _emit(report, fmt, output, clear=refresh and output is None and sys.stdout.isatty())
            n += 1
            if not refresh or (count and n >= count):
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    raise typer.Exit(code)


def _gpu_arg(value: str) -> tuple[str | None, Path]:
    """``HOST=PATH`` or ``PATH`` (a path that exists as written is a path, "=" or not)."""
    if "=" in value and not Path(value).exists():
        host, _, path = value.partition("=")
        if host and "/" not in host and path:
            return host, Path(path)
    return None, Path(value)


class GpuSources:
    """GPU reports loaded for a watch (what ``obs["gpu_reports"]`` takes), their warnings and names."""

    def __init__(self) -> None:
        self.reports: list[Any] = []
        self.warnings: list[str] = []
        self.refs: list[str] = []


def load_gpu_reports(sources: list[tuple[str | None, Path]]) -> GpuSources:
    """Load each GPU source as ``diagnose`` does (by content; folders walked); dcgm-exporter dumps
    become reports through the metrics loader. ``HOST=``: every GPU of that source is on HOST."""
    from clusterdoctor import diagnosis
    from clusterdoctor.analyze.gpu_health import collect_reports
    from clusterdoctor.errors import InputError

    out = GpuSources()
    for host, path in sources:
        obs = diagnosis.new_observations()
        refs = diagnosis.load_sources(obs, [path])
        reps = collect_reports(obs)
        if not reps:
            raise InputError(
                "no GPU health source in it (nvidia-smi, dcgm-exporter, Xid log, ...)", str(path)
            )
        for rep in reps:
            if host:
                rep.node = host
                for g in rep.gpus:
                    g.node = host
            out.reports.append(rep)
        out.warnings += [str(w) for w in obs.get("warnings_list") or []]
        out.refs += [f"{host + '=' if host else ''}{r.location}" for r in refs]
    return out


def _load_topology(path: Path) -> Any:
    from clusterdoctor.observe.detect import load_path

    _what, data = load_path(path)
    topo = data.get("topology")
    if topo is None:
        raise CliExit(2, f"error: {path}: not a topology source")
    return topo


class _FileSource:
    def __init__(self, path: str) -> None:
        import os

        from clusterdoctor.errors import InputError
        from clusterdoctor.observe.watch.records import WatchFileReader, WatchFiles

        if not os.path.exists(path):
            raise InputError("no such file or directory", path)
        self.path = path
        self.reader = WatchFileReader(path) if os.path.isdir(path) else None
        self.acc = WatchFiles()

    def report(self, topo: Any, live: bool, gpus: Any = None) -> dict[str, Any]:
        from clusterdoctor.errors import InputError
        from clusterdoctor.observe.watch.records import load_watch_dir

        if self.reader is None:
            got = load_watch_dir(self.path)
            self.acc = got
        else:
            got = self.reader.poll(final=not live)
            self.acc.extend(got)
            self.acc.warnings = _dedup(self.acc.warnings)
        if not self.acc.steps:
            if live:
                return _empty_report(self.path, "waiting for the probe's step records")
            raise InputError("no fail-slow probe file (watch-rank<N>.jsonl) with step records", self.path)
        from clusterdoctor.analyze.failslow import table_from_records

        tables = {
            job: table_from_records(wf.steps, wf.identities, wf.links, wf.warnings)
            for job, wf in self.acc.by_job().items()
        }
        return build_report(
            tables,
            f"files:{self.path}",
            topo,
            live,
            now=time.time() if live else None,
            gpus=gpus,
        )


class _PromSource:
    def __init__(self, url: str, job: str | None, since: float, step: float | None, auth: Any = None) -> None:
        self.url, self.job, self.since, self.step, self.auth = url, job, since, step, auth

    def report(self, topo: Any, live: bool, gpus: Any = None) -> dict[str, Any]:
        from clusterdoctor.observe.control.prom_api import PromClient
        from clusterdoctor.observe.watch.prom import load_watch_prometheus

        client = self.auth.client(self.url) if self.auth is not None else PromClient(self.url)
        tables, now = load_watch_prometheus(self.url, self.job, self.since, self.step, client=client)
        from clusterdoctor.redact import redact_urls

        # the report names the server, never its credentials
        shown = redact_urls(self.url)
        report = build_report(tables, f"prometheus:{shown}", topo, True, now=now, gpus=gpus)
        add_agents(report, client, self.since, tables, shown)
        return report


def add_agents(report: dict[str, Any], client: Any, since: float, tables: dict[str, Any], shown: str) -> None:
    """Add what the clusterdoctor agents say about the job's GPUs (their GPU findings over the
    window, their sources down, agents gone) to a ``--prometheus`` report, where the server has
    agent series. Joined by name, the probe's ``host`` label to the agent's ``node``: when some
    of the job's hosts have an agent, the other nodes are one line; when none does (a probe in a
    pod names the pod, not the node), every agent's GPU findings are shown and a warning says why."""
    from clusterdoctor.cli.gpu import read_agents
    from clusterdoctor.diagnosis import agent_finding_objects
    from clusterdoctor.observe.node.prom_fleet import AgentFleet
    from clusterdoctor.rules.registry import Observations

    obs = Observations()
    obs.put("warnings_list", [])
    agents = read_agents(obs, client, since, shown, warn=False)
    warnings: list[str] = list(obs.get("warnings_list"))  # the server's own errors only
    if agents is not None:
        hosts = {i.host for t in tables.values() for i in t.identities.values() if i.host}
        joined = bool(hosts & set(agents.nodes))
        shown_fleet = agents
        if joined:
            shown_fleet = AgentFleet(
                [f for f in agents.findings if f.node in hosts],
                {n: srcs for n, srcs in agents.sources.items() if n in hosts},
            )
        warnings += shown_fleet.warnings()
        others = sorted(set(agents.nodes) - set(shown_fleet.nodes))
        if others:
            n_other = len(agents.findings) - len(shown_fleet.findings)
            warnings.append(
                f"agents on nodes outside the job ({len(others)}): GPU findings not shown ({n_other}) "
                "(clusterdoctor gpu health --prometheus lists them)"
            )
        elif not joined and agents.nodes:
            warnings.append(
                f"no agent's node is one of the job's hosts ({', '.join(sorted(hosts)) or 'none named'}): "
                f"the GPU findings of all {len(agents.nodes)} agents are shown"
            )
        obs.put("agent_findings", shown_fleet.findings)
        found = [f.as_dict() for f in agent_finding_objects(obs)]
        report["findings"] = sorted(
            report["findings"] + found, key=lambda f: (-f["score"], f["rule"], f.get("subject") or "")
        )
        report["agents"] = {**shown_fleet.as_dict(), "joined_to_job_hosts": joined, "other_nodes": others}
    report["warnings"] = _dedup(report["warnings"] + warnings)


def _dedup(items: list[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in items if not (x in seen or seen.add(x))]  # type: ignore[func-returns-value]


def _empty_report(source: str, why: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "source": source, "jobs": [], "findings": [], "skipped": [], "warnings": [why]}


def build_report(
    tables: dict[str, Any],
    source: str,
    topo: Any = None,
    live: bool = False,
    now: float | None = None,
    gpus: GpuSources | None = None,
) -> dict[str, Any]:
    """Run the fail-slow rules (and, joined to GPU health, GPU019) on each job's table: the JSON
    document (findings in diagnosis format)."""
    from clusterdoctor.rules.failslow import failslow_analysis, run_failslow_rules
    from clusterdoctor.rules.registry import Observations

    findings, skipped, jobs, warnings = [], [], [], []
    for job, table in sorted(tables.items()):
        obs = Observations()
        obs.put("watch", table)
        obs.put("watch_source", source)
        obs.put("watch_live", live)
        if now is not None:
            obs.put("now", now)
        if topo is not None:
            obs.put("topology", topo)
        if gpus is not None:
            obs.put("gpu_reports", list(gpus.reports))
            hosts = {i.host for i in table.identities.values() if i.host}
            if len(hosts) > 1 and any(not r.node for r in gpus.reports):
                warnings.append(
                    f"{job}: GPU sources that name no host (nvidia-smi -q, dmesg, lspci) are not joined to a "
                    f"job on {len(hosts)} hosts: say which host each is from with --gpu HOST=PATH"
                )
        got, sk, _ran = run_failslow_rules(obs)
        res = failslow_analysis(obs)
        for f in got:
            if len(tables) > 1:
                f.subject = f"job {job}: {f.subject}" if f.subject else f"job {job}"
        findings += got
        skipped = [s.as_dict() for s in sk]
        last = max(table.last_step.values(), default=None)
        jobs.append(
            {
                "job": job,
                "ranks": len(table.ranks),
                "columns": table.shape[1],
                "unit": table.unit,
                "last_step": last,
                "baseline_step_s": res.baseline_s,
                "episodes": [e.as_dict() for e in res.episodes],
                "silent": [s.__dict__ for s in res.silent],
            }
        )
        warnings += [f"{job}: {w}" if len(tables) > 1 else w for w in res.warnings]
    findings.sort(key=lambda f: (-f.score, f.rule, f.subject or ""))
    if gpus is not None:
        warnings += gpus.warnings
    return {
        "schema": SCHEMA,
        "source": source,
        **({"gpu_sources": gpus.refs} if gpus is not None else {}),
        "jobs": jobs,
        "findings": [f.as_dict() for f in findings],
        "skipped": skipped,
        "warnings": _dedup(warnings),
    }


def _emit(report: dict[str, Any], fmt: str, output: Path | None, clear: bool) -> None:
    from clusterdoctor.cli.common import write_output

    if fmt == "json":
        import json

        text = json.dumps(report, indent=2, default=str)
    else:
        from clusterdoctor.report.watch_text import render_watch_text

        text = render_watch_text(report)
        if clear:
            from clusterdoctor.escape import write_trusted

            write_trusted(sys.stdout, "\x1b[H\x1b[2J")  # our own screen clear, past the output filter
    write_output(text, output)
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    app.command("watch")(watch)
