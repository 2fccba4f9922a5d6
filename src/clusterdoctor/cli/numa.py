"""``clusterdoctor numa``: topology, placement audit, binding plans, exec, the CI check and the probe."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from clusterdoctor.cli.common import ERROR_EXIT_CODES, CliExit, write_output

app = typer.Typer(
    help=(
        "NUMA / PCIe placement: where each process's CPUs and memory sit relative to its GPU and NIC.\n\n"
        "Every command reads this machine by default; --from FILE (hwloc XML, nvidia-smi topo -m, NCCL topo "
        "XML, numactl -H, sysfs tarball) or --sysfs-root DIR describe another machine."
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)

FROM_HELP = "Topology dump to use instead of this machine (detected by content)."
ROOT_HELP = "Read the topology from this sysfs root (a directory holding sys/)."

# numa check exit codes (DESIGN.md "Interfaces users and scripts rely on"; README "numa check")
CHECK_OK, CHECK_NO_NUMA, CHECK_UNBOUND, CHECK_MISPLACED, CHECK_BAD = 0, 1, 2, 3, 4
ERROR_EXIT_CODES["numa check"] = CHECK_BAD  # 2 means "not bound" there: usage errors and bad input give 4


def _topology(from_file: str | None, sysfs_root: str | None):
    from clusterdoctor.topology.build import load_any

    return load_any(from_file, sysfs_root)


@app.command()
def topology(
    from_file: str = typer.Option(None, "--from", help=FROM_HELP),
    sysfs_root: str = typer.Option(None, "--sysfs-root", help=ROOT_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the topology as JSON."),
) -> None:
    """Print the machine's NUMA nodes, distances, GPUs, NICs and GPU-to-NIC path classes.

    Anything the source does not state is shown as unknown — never guessed as node 0.
    """
    topo = _topology(from_file, sysfs_root)
    if as_json:
        typer.echo(json.dumps(topo.as_dict(), indent=2))
        return
    from clusterdoctor.report.text import terminal_width
    from clusterdoctor.topology.text import render_topology_text

    typer.echo(render_topology_text(topo, terminal_width()))
    from clusterdoctor.escape import shown

    for w in topo.warnings:
        typer.echo(f"warning: {shown(w)}", err=True)


def check_proc_root(proc_root: str) -> None:
    """--proc-root must be a directory (a procfs mount or a copy of one)."""
    if not os.path.isdir(proc_root):
        from clusterdoctor.errors import UsageError

        raise UsageError(f"--proc-root {proc_root}: no such directory (a procfs root such as /proc)")


def _audit(from_file, sysfs_root, pids, match, proc_root):
    from clusterdoctor import diagnosis

    check_proc_root(proc_root)
    topo = _topology(from_file, sysfs_root)
    placements = diagnosis.audit_processes(
        topo, pids=pids or None, match=match, proc_root=proc_root, sysfs_root=sysfs_root or "/"
    )
    return topo, placements


@app.command()
def audit(
    pid: list[int] = typer.Option(None, "--pid", help="Process id to audit (repeatable)."),
    match: str = typer.Option(None, "--match", help="Audit processes whose command line matches this regex."),
    from_file: str = typer.Option(None, "--from", help=FROM_HELP),
    sysfs_root: str = typer.Option(None, "--sysfs-root", help=ROOT_HELP),
    proc_root: str = typer.Option("/proc", "--proc-root", help="procfs root (for tests and containers)."),
    threads: bool = typer.Option(
        False, "--threads", help="Text output: list each thread's CPUs and nodes too."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the audit as JSON."),
) -> None:
    """Audit processes: CPUs and memory allowed, memory per node (numa_maps), GPUs/NICs used, scores.

    Without --pid/--match: every process that uses a GPU or RDMA NIC. A process that exits mid-scan or
    cannot be read is reported with its error, never a crash.
    """
    topo, placements = _audit(from_file, sysfs_root, pid, match, proc_root)
    # exit 1 when nothing could be audited (no process selected, or none of them readable), as
    # `numa check`: a script can tell "audited" from "nothing to audit"
    nothing = not any(not p.get("error") for p in placements)
    if as_json:
        typer.echo(
            json.dumps({"topology_source": topo.source, "processes": placements}, indent=2, default=str)
        )
        if nothing:
            raise typer.Exit(1)
        return
    from clusterdoctor.report.text import placement_row, raised_flags
    from clusterdoctor.topology.cpuset import format_cpulist

    if not placements:
        typer.echo("no matching process" if (pid or match) else "no process uses a GPU or RDMA NIC")
        raise typer.Exit(1)
    from clusterdoctor.report.text import terminal_width, wrap

    width = terminal_width()
    # 7+1+15+1+9+1+20+1+10+1+6 = 72 columns; flags that do not fit continue on the next line
    typer.echo(
        f"{'pid':>7} {'comm':<15} {'cpu nodes':<9} {'memory by node':<20} {'gpus':<10} {'remote':>6} flags"
    )
    for p in placements:
        row = placement_row(p)
        fl = ",".join(raised_flags(p)) or "-"
        if p.get("error"):
            fl = f"error: {p['error']}"
        head = (
            f"{row[0]:>7} {row[1][:15]:<15} {row[2][:9]:<9} {row[3][:20]:<20} {row[4][:10]:<10} {row[5]:>6} "
        )
        typer.echo("\n".join(wrap(fl.replace(",", ", "), width, first=head, rest=" " * 8)))
        if threads:
            for t in p.get("threads") or []:
                mark = "  MISMATCH" if t.get("mismatch") else ""
                cpus = format_cpulist(t.get("cpus") or [])
                typer.echo(
                    f"{'':9}tid {t.get('tid')} {str(t.get('name'))[:16]:<16} cpus {cpus:<14} nodes {t.get('cpu_nodes')}{mark}"
                )
    if nothing:
        from clusterdoctor.cli.common import quiet

        if not quiet():
            typer.echo("nothing audited: no selected process could be read (exit 1)", err=True)
        raise typer.Exit(1)


def _check_plan_options(gpus: str | None, policy: str) -> list[str] | None:
    """Check --policy and --gpus before reading any topology, so a wrong value is what the user hears."""
    from clusterdoctor.topology.plan import POLICIES, parse_gpu_list

    if policy not in POLICIES:
        raise CliExit(2, f"error: --policy {policy!r}: choose one of {', '.join(POLICIES)}")
    return parse_gpu_list(gpus) if gpus else None


@app.command()
def plan(
    gpus: str = typer.Option(
        None,
        "--gpus",
        help="GPUs, one per local rank, as the process sees them (0,1 or 0-3). Default: all visible.",
    ),
    policy: str = typer.Option("node", "--policy", help="node | socket | exclusive | core-complex"),
    from_file: str = typer.Option(None, "--from", help=FROM_HELP),
    sysfs_root: str = typer.Option(None, "--sysfs-root", help=ROOT_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """Plan per local rank: compute CPUs, a separate small set for communication/data threads (nearest
    the NIC that GPU should use), and the memory node — all local to the rank's GPU.

    Respects the cgroup cpuset (for a dump: that machine's CPUs) and CUDA_VISIBLE_DEVICES remapping.
    Refuses with a clear message when a plan is impossible (unknown GPU node, too few cores).
    """
    from clusterdoctor.topology.plan import make_plan

    gpu_keys = _check_plan_options(gpus, policy)
    topo = _topology(from_file, sysfs_root)
    live = not from_file and (sysfs_root in (None, "/"))
    allowed = tuple(sorted(os.sched_getaffinity(0))) if live else None
    p = make_plan(topo, gpu_keys, policy, allowed_cpus=allowed)
    if as_json:
        typer.echo(json.dumps(p.as_dict(), indent=2))
        return
    from clusterdoctor.report.text import terminal_width, wrap

    width = terminal_width()
    lines = wrap(f"plan ({p.policy} policy) for {topo.source}", width, rest="  ")
    for r in p.ranks:
        d = r.as_dict()
        lines += wrap(
            f"local rank {r.local_rank}: {r.gpu} on node {r.numa_node}; compute cpus {d['compute_cpulist']}; "
            f"comm cpus {d['comm_cpulist']}; memory node {r.memory_node if r.memory_node is not None else 'unset'}"
            + (f"; NIC {r.nic} ({r.nic_path or 'path unknown'})" if r.nic else ""),
            width,
            rest="  ",
        )
        for n in r.notes:
            lines += wrap(n, width, first="  note: ")
    for w in p.warnings:
        lines += wrap(w, width, first="warning: ", rest="  ")
    typer.echo("\n".join(lines))


@app.command("exec", context_settings={"allow_extra_args": True})
def exec_(
    ctx: typer.Context,
    local_rank: int = typer.Option(
        None, "--local-rank", min=0, help="Local rank to bind (default: $LOCAL_RANK)."
    ),
    gpus: str = typer.Option(None, "--gpus", help="GPUs of all local ranks, as for `plan`."),
    policy: str = typer.Option("node", "--policy", help="node | socket | exclusive | core-complex"),
    mem: str = typer.Option(
        "preferred", "--mem", help="Memory policy: preferred | bind | interleave | none."
    ),
    from_file: str = typer.Option(None, "--from", help=FROM_HELP),
    sysfs_root: str = typer.Option(None, "--sysfs-root", help=ROOT_HELP),
) -> None:
    """Bind this rank (CPUs with sched_setaffinity, memory with set_mempolicy) and exec CMD.

    Usage: clusterdoctor numa exec --local-rank 0 -- python train.py

    No numactl binary needed. Where the memory policy is refused (containers without CAP_SYS_NICE) a
    warning is printed and only CPUs are bound. The command sees CLUSTERDOCTOR_COMPUTE_CPUS,
    CLUSTERDOCTOR_COMM_CPUS and CLUSTERDOCTOR_NUMA_NODE in its environment (and NCCL_SET_THREAD_NAME=1
    unless set): inside the job, clusterdoctor.training.threads.bind_comm_threads(watch=True) after
    init_process_group moves the NCCL/gloo threads to the communication CPUs and the rest to the
    compute CPUs.
    """
    from clusterdoctor.topology.bind import MEM_MODES, exec_bound
    from clusterdoctor.topology.plan import make_plan

    gpu_keys = _check_plan_options(gpus, policy)
    if mem not in MEM_MODES:
        raise CliExit(2, f"error: --mem {mem!r}: choose one of {', '.join(MEM_MODES)}")
    argv = list(ctx.args)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise CliExit(2, "error: no command given; usage: clusterdoctor numa exec --local-rank N -- CMD ...")
    if local_rank is None:
        env_rank = os.environ.get("LOCAL_RANK")
        if env_rank is None or not env_rank.isdigit():
            raise CliExit(2, "error: give --local-rank N (or set LOCAL_RANK)")
        local_rank = int(env_rank)
    topo = _topology(from_file, sysfs_root)
    live = not from_file and (sysfs_root in (None, "/"))
    allowed = tuple(sorted(os.sched_getaffinity(0))) if live else None
    p = make_plan(topo, gpu_keys, policy, allowed_cpus=allowed)
    exec_bound(p.for_rank(local_rank), argv, mem)


@app.command()
def check(
    pid: list[int] = typer.Option(None, "--pid", help="Process id to check (repeatable)."),
    match: str = typer.Option(None, "--match", help="Check processes whose command line matches this regex."),
    expect_nodes: int = typer.Option(
        None,
        "--expect-nodes",
        envvar="NUMA_NODE_COUNT",
        min=1,
        help="Exit 1 unless the machine shows this many NUMA nodes.",
    ),
    junit: Path = typer.Option(None, "--junit", help="Write a JUnit XML report here."),
    archive: Path = typer.Option(
        None, "--archive", help="On failure, save /sys/devices/system/node and the audit JSON here."
    ),
    from_file: str = typer.Option(None, "--from", help=FROM_HELP),
    sysfs_root: str = typer.Option(None, "--sysfs-root", help=ROOT_HELP),
    proc_root: str = typer.Option("/proc", "--proc-root", help="procfs root."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """The one-command CI gate for NUMA placement.

    Exit codes: 0 at least one process checked and every checked process consistent; 1 nothing
    could be judged: no NUMA information, not --expect-nodes nodes, no process selected (--match
    matched nothing; no GPU/NIC process), or a selected process could not be read (a --pid that
    exited); 2 a checked process is not bound to one node; 3 a process is bound to CPUs or memory
    not local to its GPU/NIC; 4 bad usage or input (unknown option, bad value, unreadable --from).
    The worst code wins.

    Without --pid/--match it checks every process that uses a GPU or RDMA NIC.
    """
    from clusterdoctor.cli.numa_check import run_check

    # errors raised here (bad --from, unwritable --junit) become one line and exit 4 in run_app
    code, text = run_check(
        pids=pid or None,
        match=match,
        expect_nodes=expect_nodes,
        junit=junit,
        archive=archive,
        from_file=from_file,
        sysfs_root=sysfs_root,
        proc_root=proc_root,
        as_json=as_json,
    )
    write_output(text, None)
    raise typer.Exit(code)


@app.command()
def probe(
    as_json: bool = typer.Option(False, "--json", help="Print the measurements as JSON."),
    size_mb: int = typer.Option(256, "--size-mb", min=1, help="Bytes per bandwidth copy, in MiB."),
    repeats: int = typer.Option(10, "--repeats", min=1, help="Copies per measurement."),
    from_file: str = typer.Option(None, "--from", help=FROM_HELP),
    sysfs_root: str = typer.Option(None, "--sysfs-root", help=ROOT_HELP),
) -> None:
    """Measure, per GPU, pinned H2D/D2H bandwidth and small-copy latency with the host buffer on each
    NUMA node in turn (through torch), and flag remote penalties and asymmetric GPUs.

    Without an NVIDIA GPU (or torch) it says why it cannot run and exits 1: nothing was measured.
    """
    from clusterdoctor.topology.probe import run_probe

    topo = _topology(from_file, sysfs_root)
    result = run_probe(topo, size_bytes=size_mb << 20, repeats=repeats)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        from clusterdoctor.report.text import terminal_width, wrap
        from clusterdoctor.topology.probe import format_probe

        width = terminal_width()
        for line in format_probe(result).splitlines():
            typer.echo("\n".join(wrap(line, width, rest="  ")) if len(line) > width else line)
    raise typer.Exit(0 if result.get("ran") else 1)
