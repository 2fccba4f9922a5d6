"""``clusterdoctor gpu health``: the sick GPUs of a node, a set of files, or the whole fleet via Prometheus."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from clusterdoctor.cli.common import EXIT_FINDINGS, EXIT_OK, CliExit
from clusterdoctor.cli.prom_options import BEARER_TOKEN_FILE, CA_FILE, HEADER, prom_auth

app = typer.Typer(
    help="GPU health: Xid, ECC and row remapping, throttling, NVLink and PCIe faults.", no_args_is_help=True
)

SCHEMA = "clusterdoctor.gpu_health/1"
FORMATS = ("text", "json", "html")


@app.command("health")
def health(
    paths: list[Path] = typer.Argument(
        None,
        help="Files, sysfs trees or bundles: nvidia-smi -q / -q -x / --query-gpu CSV, dmesg or journalctl -k "
        "with NVRM Xid lines, nvidia-smi nvlink -s/-e, lspci -vv, dcgmi diag/discovery/health, dcgm-exporter "
        "/metrics dumps, sysfs trees, clusterdoctor bundles. Detected by content. None: this node, live.",
        show_default=False,
    ),
    prometheus: str = typer.Option(
        None,
        "--prometheus",
        help="Prometheus URL holding dcgm-exporter series and/or the clusterdoctor agents' "
        "(their GPU findings, sources down): check every GPU of the fleet.",
    ),
    window: str = typer.Option(
        "10m", "--window", help="With --prometheus: window for counter increases (90s, 10m, 1h)."
    ),
    bearer_token_file: str = BEARER_TOKEN_FILE,
    ca_file: str = CA_FILE,
    header: list[str] = HEADER,
    scrape: list[str] = typer.Option(
        None, "--scrape", help="A dcgm-exporter /metrics URL to scrape (repeatable)."
    ),
    scrape_interval: float = typer.Option(
        10.0, "--scrape-interval", help="Seconds between the two scrapes (counter rates; 0: one scrape)."
    ),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json | html"),
    output: Path = typer.Option(None, "--output", "-o", help="Write the report here instead of stdout."),
    fail_on: str = typer.Option(
        "critical", "--fail-on", help="Exit 1 at or above: info | warning | critical."
    ),
    sysfs_root: str = typer.Option("/", "--sysfs-root", help="Live: read PCIe links from this sysfs root."),
) -> None:
    """Check GPUs for Xid/SXid errors, uncorrectable ECC and row-remap state, throttle reasons under load,
    NVLinks down, PCIe links below capability while busy, and DCGM diag/health failures; one finding per
    sick GPU with its node, rank/pod, cost, fix and verify commands.

    Facts a source does not export are reported as not checked, never as healthy. With --prometheus
    the node agents' GPU findings (`clusterdoctor serve agent`) are ranked with the rest; an agent
    source down, or an agent no longer scraped, is a warning.

    Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it; 2 bad input or usage.

    Examples:

      clusterdoctor gpu health

      clusterdoctor gpu health nvidia-smi-q.txt dmesg.log lspci.txt

      clusterdoctor gpu health --prometheus http://prometheus:9090 --format json
    """
    from clusterdoctor import diagnosis
    from clusterdoctor.model import Severity, SourceRef

    if fmt not in FORMATS:
        raise CliExit(2, f"error: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    try:
        threshold = Severity.parse(fail_on)
    except ValueError as e:
        raise CliExit(2, f"error: --fail-on: {e}") from None
    if not Path(sysfs_root).is_dir():
        raise CliExit(2, f"{sysfs_root}: --sysfs-root is not a directory")
    obs = diagnosis.new_observations()
    refs: list[SourceRef] = []
    queries: list[tuple[str, str, int]] = []
    agents: Any = None
    auth = prom_auth(bearer_token_file, ca_file, header)  # checked now: one line, exit 2
    if prometheus:
        from clusterdoctor.cli.common import quiet
        from clusterdoctor.observe.control.prom_api import PromClient
        from clusterdoctor.observe.gpu.dcgm_fleet import collect_fleet
        from clusterdoctor.redact import redact_urls

        tty = sys.stderr.isatty() and not quiet()
        window_s = diagnosis.parse_since(window)
        client = auth.client(prometheus) if auth is not None else PromClient(prometheus)
        res = collect_fleet(
            prometheus,
            window_s,
            client=client,
            progress=(lambda m: print(f"querying {m}", file=sys.stderr)) if tty else None,
        )
        diagnosis.merge_into(obs, {"gpu_reports": res.reports})
        shown = redact_urls(prometheus)
        obs.get("warnings_list").extend(redact_urls(f"prometheus {shown}: {e}") for e in res.errors)
        queries = res.queries
        detail = f"{len(res.queries)} queries, {sum(len(r.gpus) for r in res.reports)} GPUs"
        agents = read_agents(obs, client, window_s, shown)
        if agents is not None:
            detail += f"; agents: {len(agents.findings)} GPU findings on {len(agents.nodes)} nodes"
        refs.append(SourceRef("prometheus", redact_urls(res.url), detail))
    if scrape:
        refs.append(diagnosis.add_scrapes(obs, scrape, scrape_interval))
    if paths:
        refs += diagnosis.load_sources(obs, paths)
    if not refs:
        from clusterdoctor.topology.build import from_sysfs

        try:
            diagnosis.add_topology(obs, from_sysfs(sysfs_root))
        except Exception as e:  # a container without /sys/devices/system still has GPUs to check
            obs.get("warnings_list").append(f"topology not read: {e}")
        diagnosis.add_live_gpu(obs, sysfs_root, refs)
        if not refs:
            refs.append(SourceRef("gpu", "live", "nothing readable"))
    diag = run_gpu_rules(obs, refs)
    _emit(diag, fmt, output, queries, agents)
    if not diag.rules_run and not diag.gpu_grid and not agents_checked(agents):  # never OK
        from clusterdoctor.cli.common import quiet

        if not quiet():
            print("clusterdoctor gpu health: nothing checked (no GPU source could be read)", file=sys.stderr)
        raise typer.Exit(EXIT_FINDINGS)
    worst = diag.worst()
    raise typer.Exit(EXIT_FINDINGS if worst is not None and worst >= threshold else EXIT_OK)


def read_agents(obs: Any, client: Any, window_s: float, shown: str, warn: bool = True) -> Any:
    """The clusterdoctor agents' GPU findings and source states over the window
    (:func:`clusterdoctor.observe.node.prom_fleet.agent_fleet`), where the server has agent series:
    the findings go to ``obs["agent_findings"]``, a source down or an agent gone is a warning
    (``warn``). None when the server has no agent series, or could not answer (a warning)."""
    from clusterdoctor.errors import CollectError, InputError
    from clusterdoctor.observe.node import prom_fleet
    from clusterdoctor.redact import redact_urls

    warnings = obs.get("warnings_list")
    try:
        names = client.metric_names()
        if not {"clusterdoctor_finding", "clusterdoctor_source_up"} & names:
            return None
        agents = prom_fleet.agent_fleet(client, window_s, client.server_time())
    except (CollectError, InputError) as e:
        warnings.append(redact_urls(f"prometheus {shown}: agent series: {e}"))
        return None
    obs.put("agent_findings", agents.findings)
    if warn:
        warnings.extend(agents.warnings())
    return agents


def agents_checked(agents: Any) -> bool:
    """Whether the agents checked a GPU: one read a GPU source at the end of the window, or raised
    a GPU finding in it."""
    return agents is not None and bool(agents.gpu_checked() or agents.findings)


def run_gpu_rules(obs: Any, refs: list[Any]) -> Any:
    """Run the GPU rules only (and the GPU/comm join) over ``obs``: a Diagnosis with the health grid;
    the agents' findings read from Prometheus (``obs["agent_findings"]``) ranked among them."""
    import datetime as _dt

    from clusterdoctor.diagnosis import agent_finding_objects, gpu_grid
    from clusterdoctor.model import Diagnosis
    from clusterdoctor.rules.registry import load_all, rank_key, run_rules

    rules = [r for r in load_all() if r.layer == "gpu"]
    findings, skipped, ran = run_rules(obs, rules)
    remote = agent_finding_objects(obs)
    if remote:
        findings = sorted(findings + remote, key=rank_key)
    topo = obs.get("topology")
    return Diagnosis(
        host=(topo.hostname if topo is not None and topo.hostname else "fleet / offline sources"),
        generated_at=_dt.datetime.fromtimestamp(obs.get("now"), _dt.timezone.utc)
        .replace(microsecond=0)
        .isoformat(),
        sources=refs,
        findings=findings,
        skipped=skipped,
        warnings=list(obs.get("warnings_list") or []),
        rules_run=ran,
        gpu_grid=gpu_grid(obs, findings),
    )


def _emit(
    diag: Any, fmt: str, output: Path | None, queries: list[tuple[str, str, int]], agents: Any = None
) -> None:
    from clusterdoctor.cli.common import write_output

    if fmt == "json":
        doc = {**diag.as_dict(), "schema": SCHEMA}
        doc["gpus"] = doc.pop("gpu_health", [])
        doc["sick_gpus"] = sick_table(diag)
        if agents is not None:
            doc["agents"] = agents.as_dict()
        if queries:
            doc["queries"] = [{"rule": r, "expr": e, "series": n} for r, e, n in queries]
        from clusterdoctor.report.json import iter_json

        write_output("".join(iter_json(doc)), output)  # 10,000 GPUs: the C encoder, one GPU a line
    elif fmt == "html":
        from clusterdoctor.report.html import render_html

        write_output(render_html(diag, title="clusterdoctor GPU health"), output)
    else:
        write_output(render_text(diag, agents), output)


def sick_table(diag: Any) -> list[dict[str, Any]]:
    """Sick GPUs (or nodes) ranked by their worst finding: severity, then score."""
    by_subject: dict[str, list[Any]] = {}
    for f in diag.findings:
        by_subject.setdefault(f.subject or "?", []).append(f)
    rows = []
    for subject, fs in by_subject.items():
        worst = max(fs, key=lambda f: (int(f.severity), f.score))
        rows.append(
            {
                "subject": subject,
                "severity": str(worst.severity),
                "rules": sorted({f.rule for f in fs}),
                "worst": worst.summary,
                "findings": len(fs),
                "_key": (-int(worst.severity), -worst.score, subject),
            }
        )
    rows.sort(key=lambda r: r["_key"])
    for r in rows:
        del r["_key"]
    return rows


def _n(k: int, what: str) -> str:
    return f"{k} {what}{'' if k == 1 else 's'}"


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: max(0, n - 1)] + "…"


def render_text(diag: Any, agents: Any = None) -> str:
    """The sick GPUs ranked by severity (a table, one row a GPU or node), then every finding, the
    skipped checks and the warnings as ``diagnose`` prints them, fitted to the terminal width;
    ``agents``: the clusterdoctor agents read from Prometheus (one line)."""
    from clusterdoctor.report.text import render_text as render_diagnosis
    from clusterdoctor.report.text import terminal_width, wrap

    w = max(60, terminal_width())
    table = sick_table(diag)
    sick = [r for r in table if r["severity"] != "info"]
    lines = [f"GPUs seen: {len(diag.gpu_grid)}; sick (warning or worse): {len(sick)}"]
    if agents is not None:
        down, gone = agents.down(), agents.gone()
        lines += wrap(
            f"clusterdoctor agents: {_n(len(agents.nodes), 'node')}, GPU health read on "
            f"{len(agents.gpu_checked())}; {_n(len(agents.findings), 'GPU finding')}"
            + (f"; {_n(len(down), 'source')} down" if down else "")
            + (f"; {_n(len(gone), 'agent')} gone" if gone else ""),
            w,
            rest="   ",
        )
        if not diag.rules_run and agents_checked(agents) and diag.skipped:
            # no GPU source of this command's own: the agents judged their nodes; the skipped
            # rules stay in --format json, one line here instead of a page
            import dataclasses

            from clusterdoctor.model import Skipped

            n = len(diag.skipped)
            why = "no dcgm-exporter or other GPU source here, only the agents' findings; list: --format json"
            diag = dataclasses.replace(diag, skipped=[Skipped(f"{n} GPU rules", why)])
    if not diag.rules_run and not diag.gpu_grid and not agents_checked(agents):
        lines += wrap("Nothing was checked: no GPU source could be read (skipped checks below).", w)
    elif not sick:
        lines += wrap("No sick GPU found by the checks that ran (skipped checks below were NOT made).", w)
    if table:
        # the table is an index: one row per GPU/node, its worst finding cut to the width (all of
        # it is below)
        lines.append(f"{'SEV':<8} {'GPU / NODE':<34} {'RULES':<14} WORST")
        for r in table:
            head = f"{r['severity'].upper():<8} {_cut(r['subject'], 34):<34} {_cut(','.join(r['rules']), 14):<14} "
            worst = r["worst"].split(": ", 1)[1] if r["worst"].startswith(r["subject"] + ": ") else r["worst"]
            lines.append(head + _cut(worst, max(10, w - len(head))))
    unknown: dict[str, int] = {}
    for row in diag.gpu_grid:
        for cid, c in row["checks"].items():
            if c["status"] == "unknown":
                unknown[cid] = unknown.get(cid, 0) + 1
    if unknown:
        lines.append("")
        lines += wrap(
            "not exported (not checked) on: " + ", ".join(f"{k} {v} GPU(s)" for k, v in unknown.items()),
            w,
            rest="   ",
        )
    return render_diagnosis(diag, width=w, title="clusterdoctor gpu health", summary_lines=lines)
