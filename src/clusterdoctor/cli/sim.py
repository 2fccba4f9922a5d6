"""``clusterdoctor sim``: run the cluster simulator on a real trace and compare placement policies.

Thin: parse options, resolve traces, call :mod:`clusterdoctor.sim`, print. numpy and the simulator are
imported inside the commands so ``clusterdoctor --help`` stays fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from clusterdoctor.errors import InputError, UsageError

app = typer.Typer(
    help="Trace-driven GPU cluster simulator: allocation, fragmentation, queueing, energy and cost per policy.",
    no_args_is_help=True,
    add_completion=False,
)

OPENB_DIR = "sched/alibaba_gpu_v2023"
DEFAULT_NODES = f"{OPENB_DIR}/openb_node_list_gpu_node.csv"
PUBLISHED = "sched/fgd_expected_results/analysis_allo_discrete.csv"
OPENB_VARIANTS = (
    "default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare40", "gpushare60", "gpushare80", "gpushare100",
    "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu30", "multigpu40", "multigpu50",
)  # fmt: skip
# where the openb traces are published (the commit clusterdoctor's results were made with)
OPENB_URL = (
    "https://raw.githubusercontent.com/alibaba/clusterdata/"
    "7a6c496e4f4b6ce6150be8f881cb051bf2abff42/cluster-trace-gpu-v2023/csv"
)
OPENB_PAGE = "https://github.com/alibaba/clusterdata/tree/master/cluster-trace-gpu-v2023/csv"
BUILTIN_TRACES = {f"openb-{v}": f"{OPENB_DIR}/openb_pod_list_{v}.csv" for v in OPENB_VARIANTS}


def _fixture(rel: str, what: str) -> Path:
    from clusterdoctor.testing import ENV_VAR, fixture_path, fixtures_root

    p = fixture_path(rel)
    if p is None:
        where = fixtures_root()
        url = f"{OPENB_URL}/{Path(rel).name}" if rel.startswith(OPENB_DIR) else None
        hint = (
            f"it is not shipped (alibaba/clusterdata publishes no licence for it): download {url} "
            f"and pass it with --trace FILE (the node list: --nodes FILE), or set {ENV_VAR} to a folder "
            f"holding {rel}"
            if url
            else f"set {ENV_VAR} to the project's fixture folder or pass a file path"
        )
        if where is not None:
            hint = f"{rel} is not under {where}; " + hint
        raise UsageError(f"built-in {what} needs {rel}: {hint}")
    return p


def resolve_trace(value: str) -> tuple[Path, str | None]:
    """(pod-list path, built-in name or None) for ``--trace``: an existing file wins over a name."""
    from clusterdoctor.observe.limits import check_regular

    p = Path(value)
    if p.exists():
        check_regular(p)  # a device or FIFO is refused here, before any built-in input is looked up
        return p, None
    if value in BUILTIN_TRACES:
        return _fixture(BUILTIN_TRACES[value], f"trace {value!r}"), value
    if value.endswith(".csv") or "/" in value:
        raise InputError("no such file", value)
    raise UsageError(
        f"unknown trace {value!r}: give a pod-list CSV path or one of {', '.join(BUILTIN_TRACES)}"
    )


def resolve_nodes(value: str | None) -> Path:
    if value is None:
        return _fixture(DEFAULT_NODES, "node list (openb, 6212 GPUs)")
    from clusterdoctor.observe.limits import check_regular

    p = Path(value)
    if not p.exists():
        raise InputError("no such file", value)
    check_regular(p)  # a device or FIFO is refused here, before any built-in input is looked up
    return p


def parse_seeds(text: str) -> list[int]:
    """'42-51' or '1,2,5' -> list of ints."""
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                a, b = (
                    part.split("-", 1)
                    if not part.startswith("-")
                    else ("-" + part[1:].split("-", 1)[0], part[1:].split("-", 1)[1])
                )
                out.extend(range(int(a), int(b) + 1))
            elif part:
                out.append(int(part))
    except ValueError:
        raise UsageError(f"bad --seeds {text!r} (use e.g. 42-51 or 1,2,3)") from None
    if not out:
        raise UsageError("no seeds given")
    return out


def _progress():
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty() or _quiet(),
    )  # fmt: skip


def _percentiles(p: object) -> str:
    """``{'p50': 2837.0, 'p90': 13175.3}`` as ``p50 2,837 s, p90 13,175 s`` (never a Python repr)."""
    if not isinstance(p, dict) or not p:
        return "n/a"
    return ", ".join(f"{k} {v:,.0f} s" if isinstance(v, (int, float)) else f"{k} n/a" for k, v in p.items())


def _quiet() -> bool:
    from clusterdoctor.cli.common import quiet

    return quiet()


def _emit(text: str, out: Path | None) -> None:
    from clusterdoctor.cli.common import write_output

    write_output(text, out)


@app.command("run")
def run(
    trace: str = typer.Option(
        "openb-default", "--trace", help="Built-in trace name (openb-default, ...) or a pod-list CSV."
    ),
    nodes: str = typer.Option(
        None,
        "--nodes",
        help="Node-list CSV, or design-mix (10,000 GPUs: 42 % A100, 58 % H100); default openb.",
    ),
    policy: str = typer.Option("fgd", "--policy", help="Placement policy (see `sim policies`)."),
    seed: int = typer.Option(1, "--seed", help="Seed: drives shuffle, copies, node order and tie-breaks."),
    tune: float = typer.Option(
        1.3, "--tune", help="FGD protocol: arriving load as a multiple of GPU capacity."
    ),
    timed: bool = typer.Option(
        False, "--timed", help="Timed run (trace arrival/deletion times): queueing, JCT, energy, cost."
    ),
    limit: int = typer.Option(
        None, "--limit", min=1, help="Stop after this many arriving pods (FGD protocol)."
    ),
    time_scale: float = typer.Option(
        1.0,
        "--time-scale",
        help="Timed: multiply arrival times (e.g. 0.01 packs a 149-day trace into 1.5 days).",
    ),
    clock: str = typer.Option(
        "max",
        "--clock",
        help="Timed: GPU clock policy, max (top clock) or slack (lower clocks while no job waits; "
        "docs/sim.md, GPU clocks).",
    ),
    beta: float = typer.Option(
        1.0, "--beta", help="Timed: share of a job's time that follows the clock (1 compute-bound, 0 none)."
    ),
    max_slowdown: float = typer.Option(
        0.10, "--max-slowdown", help="Timed, --clock slack: how much longer a job may run (0.1 = 10 %)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    as_html: bool = typer.Option(False, "--html", help="Print a self-contained HTML report."),
    output: Path = typer.Option(None, "-o", "--output", help="Write the report to this file."),
) -> None:
    """Run one policy on one trace (default: the FGD paper's protocol at 130 % load)."""
    from clusterdoctor.cli.common import check_writable
    from clusterdoctor.sim.policies import get_policy
    from clusterdoctor.sim.traces import load_openb_nodes, load_openb_pods

    # options first (cheap, and a wrong value is named before anything is loaded), then the inputs
    if as_json and as_html:
        raise UsageError("choose one of --json and --html")
    try:
        pol = get_policy(policy)
    except UsageError as e:
        raise UsageError(f"--policy: {e}") from None
    if tune <= 0:
        raise UsageError(f"--tune {tune}: must be positive (1.3 is the FGD paper's 130 % load)")
    if time_scale <= 0:
        raise UsageError(f"--time-scale {time_scale}: must be positive")
    if not 0.0 <= beta <= 1.0:
        raise UsageError(f"--beta {beta}: must be between 0 and 1")
    if (clock != "max" or beta != 1.0) and not timed:
        raise UsageError("--clock and --beta need --timed (the FGD protocol has no job durations)")
    from clusterdoctor.sim.dvfs import get_clock_policy

    try:
        clk = get_clock_policy(clock, max_slowdown)
    except ValueError as e:
        raise UsageError(f"--clock/--max-slowdown: {e}") from None
    check_writable(output, "--output")
    mix = nodes == "design-mix" and not Path(nodes).exists()
    nodes_path = resolve_nodes(nodes) if nodes and not mix else None  # the user's paths before built-ins
    pods_path, _ = resolve_trace(trace)
    if mix:
        from clusterdoctor.sim.synthetic import design_mix_cluster

        cluster = design_mix_cluster()
    else:
        cluster = load_openb_nodes(nodes_path or resolve_nodes(None))
    pods = load_openb_pods(pods_path)
    with _progress() as prog:
        task = prog.add_task(f"{pol.name} seed {seed}", total=None)

        def tick(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        if timed:
            from clusterdoctor.sim.engine import job_times, run_timed

            arr, dur = job_times(pods)
            res = run_timed(
                cluster, pods, pol, seed, arrivals=arr * time_scale, durations=dur, progress=tick,
                clock=clk, beta=beta,
            )  # fmt: skip
        else:
            from clusterdoctor.sim.engine import run_fgd_protocol

            res = run_fgd_protocol(cluster, pods, pol, seed, tune, limit=limit, progress=tick)
    d = res.as_dict()
    d["trace"] = str(pods_path)
    d["cluster"] = cluster.summary()
    if as_json:
        _emit(json.dumps(d, indent=2), output)
        return
    if as_html:
        from clusterdoctor.sim.report_html import protocol_report, timed_report

        _emit(timed_report([res]) if timed else protocol_report([res]), output)
        return
    lines = [
        f"trace {pods_path} on {cluster.total_gpus} GPUs ({len(cluster.nodes)} nodes), policy {res.policy}, seed {seed}"
    ]
    if timed:
        lines += [
            f"jobs {res.jobs}  finished {res.finished}  makespan {res.makespan_s / 3600:.1f} h",
            f"queueing delay {_percentiles(d['queue_delay_s'])}",
            f"JCT {_percentiles(d['jct_s'])}",
            f"mean allocation {d['mean_allocation_pct']:.2f} %  idle {d['idle_share_pct']:.2f} %",
            f"GPU-hours {res.gpu_hours:.0f}  energy {res.energy_kwh:.0f} kWh  cost ${res.cost_usd_fleet + res.cost_usd_energy:,.0f}",
        ]
        if res.clock_policy != "max":
            lines.append(f"clock {res.clock_policy}: mean clock {100 * res.mean_clock_rel:.1f} % of the top")
    else:
        c = res.allocation_curve
        pts = "  ".join(f"{k}%:{c[k]:.2f}" for k in (50, 80, 90, 95, 100, 110, 120, 130) if k in c)
        lines += [
            f"pods arrived {res.pods_arrived}  failed {res.pods_failed}  ({res.seconds:.1f} s)",
            f"allocated GPU % by arriving load: {pts}",
            f"final allocation: {res.final_allocation:.2f} %",
        ]
        e = res.energy_summary()
        if e:
            lines.append(
                f"power over the arrivals (mean, PUE incl.): {e['mean_kw_all_on']:,.0f} kW all nodes on, "
                f"{e['mean_kw_sleep']:,.0f} kW empty nodes asleep; {e['j_per_tflop_all_on']:.2f} / "
                f"{e['j_per_tflop_sleep']:.2f} J per useful TFLOP"
            )
    lines += [f"note: {n}" for n in res.notes]
    from clusterdoctor.report.text import terminal_width, wrap

    width = terminal_width()
    _emit("\n".join(w for ln in lines for w in wrap(ln, width, rest="  ")), output)


def _sweep(
    nodes_path: Path, pods_path: Path, policies: list[str], seeds: list[int], tune: float, workers: int,
    use_ray: bool = False, on_done=None,
):  # fmt: skip
    """{policy: {seed: allocation curve}}; ``on_done`` gets each run's whole tuple (see reproduce._one)."""
    from clusterdoctor.sim.reproduce import _one, run_sweep

    if use_ray:  # only when asked (--ray): a local Ray start costs tens of seconds here
        from clusterdoctor.ray_cluster import start_ray

        ray, _mine = start_ray(None, max(1, workers))  # a start-up failure: one line, exit 2
        remote = ray.remote(_one)
        refs = [remote.remote((str(nodes_path), str(pods_path), p, s, tune)) for p in policies for s in seeds]
        out: dict[str, dict[int, dict[int, float]]] = {}
        with _progress() as prog:
            task = prog.add_task("sweep (ray)", total=len(refs))
            pending = list(refs)
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                r = ray.get(done[0])
                out.setdefault(r[0], {})[r[1]] = r[2]
                if on_done:
                    on_done(r)
                prog.advance(task)
        return out
    with _progress() as prog:
        task = prog.add_task(
            f"sweep ({workers} process{'es' if workers > 1 else ''})", total=len(policies) * len(seeds)
        )

        def _done(r) -> None:
            prog.advance(task)
            if on_done:
                on_done(r)

        return run_sweep(nodes_path, pods_path, policies, seeds, tune, workers, on_done=_done)


@app.command("compare")
def compare(
    policies: str = typer.Option(
        "random,dot-product,gpu-clustering,gpu-packing,best-fit,fgd,tidal,fgd-cpu", "--policies",
        help="Comma-separated policies."),
    trace: str = typer.Option("openb-default", "--trace", help="Built-in trace name or a pod-list CSV."),
    nodes: str = typer.Option(None, "--nodes", help="Node-list CSV (default: openb's 6212-GPU node list)."),
    seeds: str = typer.Option("42-51", "--seeds", help="Seeds, e.g. 42-51 (the FGD paper's) or 1,2,3."),
    tune: float = typer.Option(1.3, "--tune", help="Arriving load as a multiple of GPU capacity."),
    workers: int = typer.Option(1, "--workers", help="Parallel runs (local processes)."),
    ray: bool = typer.Option(False, "--ray", help="Run them on a local Ray cluster instead (extra `sim`)."),
    published: str = typer.Option("auto", "--published", help="FGD analysis_allo_discrete.csv to compare with ('auto': the shared fixture when present, 'none')."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    output: Path = typer.Option(None, "-o", "--output", help="Write the table to this file."),
) -> None:  # fmt: skip
    """Run several policies over several seeds (FGD protocol) and print mean allocation per policy, next to
    the FGD paper's published numbers for the same workload when available."""
    from clusterdoctor.sim.policies import FGD_LABELS, get_policy
    from clusterdoctor.sim.reproduce import average_curves, mean_energy, parse_published
    from clusterdoctor.sim.reproduce import compare as cmp

    pols = [get_policy(p).name for p in policies.split(",") if p.strip()]
    if not pols:
        raise UsageError("no policies given")
    if workers < 1:
        raise UsageError("--workers must be at least 1")
    if tune <= 0:
        raise UsageError(f"--tune {tune}: must be positive (1.3 is the FGD paper's 130 % load)")
    seed_list = parse_seeds(seeds)
    from clusterdoctor.cli.common import check_writable

    check_writable(output, "--output")
    if published not in ("auto", "none") and not Path(published).is_file():
        raise InputError("no such file" if not Path(published).exists() else "not a file", published)
    user_nodes = resolve_nodes(nodes) if nodes else None  # the user's paths before the built-in ones
    pods_path, builtin = resolve_trace(trace)
    nodes_path = user_nodes or resolve_nodes(None)
    pub_curves: dict = {}
    workload = pods_path.stem
    if published != "none":
        from clusterdoctor.testing import fixture_path

        pub_path = Path(published) if published != "auto" else fixture_path(PUBLISHED)
        if pub_path is not None:
            from clusterdoctor.observe.limits import read_input

            pub_curves = parse_published(read_input(pub_path), str(pub_path)).get(workload, {})
    energies: dict[str, list[dict[str, float]]] = {}

    def _energy(r) -> None:
        if len(r) > 6 and r[6]:
            energies.setdefault(r[0], []).append(r[6])

    sweep = _sweep(nodes_path, pods_path, pols, seed_list, tune, workers, ray, on_done=_energy)
    energy = {p: mean_energy(v) for p, v in energies.items()}
    comps = cmp({p: average_curves(sweep[p]) for p in pols}, pub_curves, FGD_LABELS)
    if as_json:
        doc = {
            "workload": workload,
            "seeds": seed_list,
            "tune": tune,
            "policies": [
                {
                    "policy": c.policy,
                    "fgd_label": c.label,
                    "final_allocation": round(c.final_ours, 2),
                    "published_final_allocation": round(c.final_published, 2) if c.published else None,
                    "max_abs_diff_over_curve": round(c.max_abs_diff, 3) if c.published else None,
                    "allocation_curve": {str(k): round(v, 3) for k, v in c.ours.items()},
                    "energy": energy.get(c.policy) or None,
                }
                for c in comps
            ],
        }
        _emit(json.dumps(doc, indent=2), output)
        return
    head = f"{'policy':<16}{'FGD label':<18}{'ours @130%':>11}{'published':>11}{'diff':>7}{'max|diff| 0-130':>17}"
    lines = [f"{workload}: mean GPU allocation (%) over seeds {seeds}, tune {tune}", head, "-" * len(head)]
    for c in comps:
        pubv = f"{c.final_published:.2f}" if c.published else "-"
        diff = f"{c.final_ours - c.final_published:+.2f}" if c.published else "-"
        mx = f"{c.max_abs_diff:.2f} (at {c.worst_column})" if c.published else "-"
        lines.append(f"{c.policy:<16}{c.label:<18}{c.final_ours:>11.2f}{pubv:>11}{diff:>7}{mx:>17}")
    if energy:
        lines += ["", _energy_table(comps, energy)]
    _emit("\n".join(lines), output)


def _energy_table(comps, energy: dict[str, dict[str, float]]) -> str:
    """Mean power per policy (seed means): all nodes on and empty nodes asleep, over the whole run and
    up to 80 % arrived (where every policy places every pod, so equal work), and J per useful TFLOP."""
    head = f"{'policy':<16}{'kW on':>10}{'kW sleep':>10}{'on <=80%':>10}{'sleep<=80%':>11}{'J/TFLOP on':>11}{'sleep':>8}"
    out = ["energy (seed means; 'sleep': empty nodes asleep; '<=80%': equal work)", head, "-" * len(head)]

    def f(v: float | None, w: int, d: int) -> str:
        return f"{v:>{w}.{d}f}" if v is not None else f"{'-':>{w}}"

    for c in comps:
        e = energy.get(c.policy) or {}
        out.append(
            f"{c.policy:<16}{f(e.get('mean_kw_all_on'), 10, 1)}{f(e.get('mean_kw_sleep'), 10, 1)}"
            f"{f(e.get('mean_kw_all_on_to80'), 10, 1)}{f(e.get('mean_kw_sleep_to80'), 11, 1)}"
            f"{f(e.get('j_per_tflop_all_on'), 11, 2)}{f(e.get('j_per_tflop_sleep'), 8, 2)}"
        )
    return "\n".join(out)


@app.command("policies")
def policies_cmd() -> None:
    """List the placement policies."""
    from clusterdoctor.sim.policies import FGD_LABELS, POLICY_NAMES

    published = {"pwr": "PWR (CCGrid'25)", "pwr-fgd": "PWR+FGD (CCGrid'25)"}
    for p in POLICY_NAMES:
        typer.echo(f"{p:<16}{FGD_LABELS.get(p) or published.get(p) or '(ours)'}")


@app.command("traces")
def traces_cmd() -> None:
    """List the built-in trace names and whether their files are present."""
    from clusterdoctor.testing import fixture_path

    absent = False
    typer.echo(f"built-in traces, files under $CLUSTERDOCTOR_FIXTURES/{OPENB_DIR}/:")
    for name, rel in BUILTIN_TRACES.items():
        here = fixture_path(rel)
        absent |= here is None
        typer.echo(f"  {name:<19}{'present' if here else 'absent':<9}{Path(rel).name}")
    if absent:
        from clusterdoctor.report.text import terminal_width, wrap

        note = (
            "Absent traces are not shipped (alibaba/clusterdata publishes no licence for them): download "
            f"them from {OPENB_PAGE} (the file named last on each line above; the node list is "
            "openb_node_list_gpu_node.csv) and pass them with --trace FILE --nodes NODES.csv."
        )
        typer.echo("\n".join(wrap(note, terminal_width())))
