"""Every command a user can reach, driven with bad flags, values, paths and ports.

The commands are enumerated from the Typer app itself, so a new command or option is covered the day
it is added: each command gets an unknown flag; each numeric option a non-number (and a value below
its minimum when it has one); each path a missing one; each port one that is in use; each string
option the bad value listed in ``BAD_VALUES`` — or a reason in ``FREE_FORM`` why any string is
valid. ``test_every_option_is_classified`` fails for an option that is none of these.

Every case must give ONE line on stderr (no traceback), nothing on stdout, the command's documented
exit code for bad input or usage (2; ``numa check``: 4 — ``clusterdoctor.cli.common.error_exit_code``)
and a message that names the bad flag, value or path.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass

import pytest
import typer.main

from clusterdoctor.cli.common import error_exit_code, run_app
from clusterdoctor.cli.main import app
from tests.conftest import run_cli

MISSING = "@MISSING@"  # replaced by a path under a folder that does not exist (in tmp_path)
A_FILE = "@FILE@"  # replaced by a regular file (where a directory is expected)
BUSY = "@BUSY@"  # replaced by 127.0.0.1:PORT of a socket this test holds open


def leaf_commands() -> dict[str, object]:
    """{"numa check": click.Command, ...} for every runnable command of the app."""
    out: dict[str, object] = {}

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            out[" ".join(path)] = cmd

    walk(typer.main.get_command(app), [])
    return out


COMMANDS = leaf_commands()

# Arguments a command needs so that the bad value, not a missing argument, is what fails.
NEEDS: dict[str, list[str]] = {
    "collect": ["-o", "@TMP@/bundle.tar.zst"],
    "comm analyze": ["@TMP@"],
    "qat report": ["@TMP@/state.json"],
    "numa exec": ["--local-rank", "0"],
}
TAIL: dict[str, list[str]] = {"numa exec": ["--", "true"]}  # after the options

# String options: a bad value per option (any command), or per "command option". A tuple adds
# arguments that make the command use the value.
BAD_VALUES: dict[str, str | tuple[str, list[str]]] = {
    "--format": "bogus",
    "--fail-on": "bogus",
    "--policy": "bogus",
    "--layer": "bogus",
    "--mem": "bogus",
    "--link": "bogus",
    "--gpus": "3-1",
    "--match": "(unclosed",
    "--seeds": "x-y",
    "--policies": "fgd,bogus",
    "--trace": "bogus-trace",
    "--scrape": "notaurl",
    "--prometheus": "notaurl",
    "--runbook-url": "notaurl",
    "--listen": "127.0.0.1:notaport",
    "sim run --clock": ("bogus", ["--timed"]),
    "diagnose --since": ("bogus", ["--prometheus", "http://127.0.0.1:9"]),
    "gpu health --window": ("bogus", ["--prometheus", "http://127.0.0.1:9"]),
    "rules rule_id": "NOPE999",
    "watch --since": "bogus",
    "serve agent --event-window": "bogus",
    "serve agent --interval": "bogus",
    "serve agent --log-level": "bogus",
    "serve agent --log-format": "bogus",
    "rules --agent-selector": "job=x}",
    "diagnose --header": "no colon",
    "gpu health --header": ("no colon", ["--prometheus", "http://127.0.0.1:9"]),
    "watch --header": ("no colon", ["--prometheus", "http://127.0.0.1:9", "--once"]),
    "rules --cluster-label": "a-b",
}
# Options and arguments whose value is a path (besides those Typer types as Path).
PATH_OPTIONS = {
    "--from",
    "--sysfs-root",
    "--proc-root",
    "--nodes",
    "--published",
    "--file",
    "--log",
    "--gpu",
    "--web.config.file",
    "--bearer-token-file",
    "--ca-file",
}
# Path options whose bad value is not a missing path (a missing --archive folder is created).
BAD_PATHS = {"numa check --archive": A_FILE}
# Options for which any string is a valid value, and why.
FREE_FORM: dict[str, str] = {
    "collect --unit": "a systemd unit name; a unit without a journal is recorded as 'nothing to collect'",
    "collect --since": "journalctl's own --since syntax; journalctl's error is recorded in the manifest",
    "diagnose --etcd-endpoints": "any host:port; an endpoint that does not answer is evidence, not bad usage",
    "watch --job": "any training job's name; a job without probe series is reported as such (exit 2)",
    "comm analyze --ray-address": "a Ray address (host:port, ray://..., auto); Ray's own error when it cannot connect",
    "diagnose --pod-resources-socket": "a missing or dead kubelet socket is a warning; the rest of the report still comes out (issue 14)",
    "serve agent --pod-resources-socket": "a missing or dead kubelet socket is a series (clusterdoctor_pod_resources_up 0) and a warning, never a crash loop of the DaemonSet pod (issue 14)",
    "diagnose --node-name": "any node name; one the API server does not know lists no pods, which the report says",
    "serve agent --node-name": "any node name; one the API server does not know lists no pods, which /metrics says",
    "serve agent --kernel-log": 'a list of fallbacks (/dev/kmsg, kern.log, the journal): one that cannot be read is skipped; none readable is clusterdoctor_source_up{source="kernel-log"} 0 and a warning, never a crash loop (issue 21)',
}
EXTRA_BUSY = {"--listen"}  # options that also get a port that is in use


@dataclass
class Case:
    command: str
    args: list[str]
    names: str  # what the one error line must mention
    in_process: bool = False  # rejected by the parser before the command runs
    positional: bool = False  # the case is about the command's own argument: NEEDS is not added


def _type_name(p) -> str:
    return type(p.type).__name__


def _is_path(p) -> bool:
    return _type_name(p) in ("TyperPath", "Path") or (p.opts and p.opts[0] in PATH_OPTIONS)


def _numeric(p) -> bool:
    return _type_name(p) in ("IntParamType", "FloatParamType", "IntRange", "FloatRange")


def _flag(p) -> str:
    return max(p.opts, key=len) if p.opts else p.name


def cases() -> list[Case]:
    out: list[Case] = []
    for path, cmd in COMMANDS.items():
        out.append(Case(path, ["--no-such-option"], "--no-such-option", in_process=True))
        for p in cmd.params:
            if getattr(p, "is_flag", False) or p.name in ("help",):
                continue
            flag = _flag(p)
            positional = not p.opts or not p.opts[0].startswith("-")
            opt = [] if positional else [flag]
            key = f"{path} {p.name if positional else flag}"
            if _numeric(p):
                out.append(Case(path, [*opt, "not-a-number"], "not-a-number", in_process=True))
                lo = getattr(p.type, "min", None)
                if lo is not None:
                    below = str(lo - 1) if _type_name(p) == "IntRange" else str(lo - 0.5)
                    out.append(Case(path, [*opt, below], flag, in_process=True))
            elif _is_path(p):
                bad = BAD_PATHS.get(key, MISSING)
                out.append(Case(path, [*opt, bad], bad, positional=positional))
            elif key in BAD_VALUES or flag in BAD_VALUES:
                v = BAD_VALUES.get(key, BAD_VALUES.get(flag))
                value, extra = (v, []) if isinstance(v, str) else v
                out.append(Case(path, [*opt, value, *extra], value.split(",")[-1], positional=positional))
            if flag in EXTRA_BUSY:
                out.append(Case(path, [flag, BUSY], "in use"))
    return out


CASES = cases()


def _id(c: Case) -> str:
    return f"{c.command} {' '.join(c.args)}".replace("@", "")


@pytest.fixture(scope="module")
def busy_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def _expand(args: list[str], tmp_path, port: int) -> list[str]:
    missing = str(tmp_path / "no-such-folder" / "x.out")
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    return [
        a.replace(MISSING, missing)
        .replace(A_FILE, str(a_file))
        .replace(BUSY, f"127.0.0.1:{port}")
        .replace("@TMP@", str(tmp_path))
        for a in args
    ]


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_bad_input_is_one_line_and_the_documented_code(case, tmp_path, busy_port, capfd):
    argv = [
        *case.command.split(),
        *([] if case.positional else _expand(NEEDS.get(case.command, []), tmp_path, busy_port)),
        *_expand(case.args, tmp_path, busy_port),
        *TAIL.get(case.command, []),
    ]
    if case.in_process:  # the parser rejects it before the command runs: no need for a process
        code = run_app(app, argv)
        out, err = capfd.readouterr()
    else:
        r = run_cli(*argv)  # run_cli's cap: generous on a loaded machine
        code, out, err = r.code, r.out, r.err
    expected = error_exit_code(case.command)
    names = _expand([case.names], tmp_path, busy_port)[0]
    assert code == expected, (argv, code, out, err)
    assert "Traceback" not in err, err
    assert err.endswith("\n") and err.count("\n") == 1, (argv, err)
    assert out == "", (argv, out)
    assert names.lower() in err.lower(), (argv, names, err)


def test_every_option_is_classified():
    """A new option must be numeric, a flag, a path, have a bad value above, or say why any string is fine."""
    unclassified = []
    for path, cmd in COMMANDS.items():
        for p in cmd.params:
            if getattr(p, "is_flag", False) or _numeric(p) or _is_path(p):
                continue
            positional = not p.opts or not p.opts[0].startswith("-")
            flag = _flag(p)
            key = f"{path} {p.name if positional else flag}"
            if key in BAD_VALUES or flag in BAD_VALUES or key in FREE_FORM:
                continue
            unclassified.append(key)
    assert not unclassified, f"add a bad value or a FREE_FORM reason for: {unclassified}"


def test_the_enumeration_sees_every_group():
    groups = {c.split()[0] for c in COMMANDS}
    assert {"diagnose", "rules", "collect", "numa", "comm", "qat", "sim", "serve"} <= groups
    assert len(CASES) > 3 * len(COMMANDS)


def test_documented_usage_codes_are_in_the_help():
    """A command whose bad-usage code is not 2 says so in its --help (numa check: 4)."""
    for path in COMMANDS:
        code = error_exit_code(path)
        if code != 2:
            r = run_cli(*path.split(), "--help")
            assert f"{code} bad usage" in " ".join(r.out.split()), path


def test_bad_choice_names_the_value_and_the_valid_ones_first(tmp_path):
    """Before loading anything (here: no shared fixtures at all, as in a fresh clone) the bad value
    and the valid ones are what the user reads."""
    empty = tmp_path / "no-fixtures"
    empty.mkdir()
    env = {"CLUSTERDOCTOR_FIXTURES": str(empty)}
    r = run_cli("rules", "--layer", "bogus", env=env)
    assert r.code == 2 and "'bogus'" in r.err and all(x in r.err for x in ("numa", "etcd", "rdma"))
    r = run_cli("sim", "run", "--policy", "bogus", env=env)
    assert r.code == 2 and "'bogus'" in r.err and all(x in r.err for x in ("fgd", "best-fit", "tidal"))
    r = run_cli("sim", "compare", "--policies", "fgd,bogus", env=env)
    assert r.code == 2 and "'bogus'" in r.err and "fgd" in r.err
    r = run_cli("numa", "plan", "--policy", "bogus", env=env)
    assert r.code == 2 and "'bogus'" in r.err and "exclusive" in r.err


def test_collect_to_a_missing_folder_fails_before_collecting(tmp_path):
    r = run_cli("collect", "-o", str(tmp_path / "missing" / "dir" / "x.tar.zst"), timeout=120)
    assert r.code == 2 and r.err.count("\n") == 1 and "does not exist" in r.err
    assert "sysfs-topology" not in r.err  # nothing was collected first


# ---------------------------------------------------------------------------------------------------
# The conventions every command follows (README "Conventions every command follows").

from tests.conftest import REPO  # noqa: E402

DATA = REPO / "examples" / "data"
TD = REPO / "tests" / "data"
XML = str(DATA / "24em64t-2n6c2t-pci.xml")
PROM = str(DATA / "kubelet_pod_start_sli_aks_before.prom")
H100 = str(DATA / "nvidia-smi-q_h100-sxm-x8_535.183.01_sw-thermal-power-brake-on-one-gpu_pcie-replays.txt")
COMM_LOG = str(TD / "comm" / "public" / "unige_hpc_4301_allgather_seq1_4rank.log")
FAILSLOW = str(TD / "failslow" / "quota-rank2")
SELF = "@SELF@"  # replaced by this test process's pid (a live, readable process)

# A real run of each command on inputs every clone has: (arguments, the JSON switch or None).
RUNS: dict[str, tuple[list[str], list[str] | None]] = {
    "diagnose": ([PROM], ["--format", "json"]),
    "rules": ([], ["--json"]),
    "watch": (["--from", FAILSLOW, "--once"], ["--format", "json"]),
    "numa topology": (["--from", XML], ["--json"]),
    "numa audit": (["--pid", SELF], ["--json"]),
    "numa plan": (["--from", XML, "--gpus", "0-2"], ["--json"]),
    "numa check": (["--from", XML, "--pid", SELF], ["--json"]),
    "numa probe": ([], ["--json"]),
    "comm analyze": ([COMM_LOG], ["--format", "json"]),
    "gpu health": ([H100], ["--format", "json"]),
    "sim policies": ([], None),
    "sim traces": ([], None),
}
# The exit codes a real run may give (README "Exit codes"): 0 or 1, unless listed.
CODES: dict[str, tuple[int, ...]] = {"numa check": (0, 1, 2, 3)}
# Commands not run here, and why (each is run by its own tests).
NOT_RUN: dict[str, str] = {
    "collect": "captures this whole machine (tests/cli/test_cli_common.py and tests/deploy run it)",
    "numa exec": "replaces itself with the command it runs (tests/topology run it)",
    "qat report": "needs a state saved by a torch DriftMonitor (tests/cli/test_qat_cli.py)",
    "sim run": "needs the openb traces, which are not shipped (tests/sim run it with the fixtures)",
    "sim compare": "needs the openb traces and the paper's table (tests/sim)",
    "serve agent": "a server: runs until stopped (tests/cli/test_serve_cli.py)",
    "serve extender": "a server: runs until stopped (tests/cli/test_serve_cli.py)",
}
# Where a file is read, `-` reads standard input: (arguments with "-", the file piped in, or the text
# itself when it starts with "{": an empty PodList, which lists no pods).
STDIN: dict[str, tuple[list[str], str]] = {
    "diagnose sources": (["-"], PROM),
    "diagnose --pods": ([PROM, "--pods", "-"], '{"apiVersion": "v1", "kind": "PodList", "items": []}'),
    "watch --gpu": (["--from", FAILSLOW, "--once", "--gpu", "-"], H100),
    "numa topology --from": (["--from", "-"], XML),
    "numa audit --from": (["--from", "-", "--pid", SELF], XML),
    "numa plan --from": (["--from", "-", "--gpus", "0"], XML),
    "numa check --from": (["--from", "-", "--pid", SELF], XML),
    "numa probe --from": (["--from", "-"], XML),
    "comm analyze paths": (["-"], COMM_LOG),
    "gpu health paths": (["-"], H100),
}
# Path parameters that are not a file to read, or are read by a command not run here.
NOT_STDIN: dict[str, str] = {
    "--output": "written, not read",
    "--junit": "written, not read",
    "--archive": "a folder written on failure",
    "--sysfs-root": "a folder (a sysfs tree), not a file",
    "--proc-root": "a folder (a procfs tree), not a file",
    "watch --from": "a folder of per-rank files (or a single file: --from - reads one)",
    "watch --topology": "read as --from of numa commands (covered there)",
    "collect --file": "collect is not run here (NOT_RUN)",
    "numa exec --from": "numa exec is not run here (NOT_RUN)",
    "qat report state_file": "qat report is not run here (NOT_RUN)",
    "sim run --nodes": "sim run is not run here (NOT_RUN)",
    "sim compare --nodes": "sim compare is not run here (NOT_RUN)",
    "sim compare --published": "sim compare is not run here (NOT_RUN)",
    "serve agent --log": "a server's log, followed while it runs (tests/serve)",
    "serve agent --web.config.file": "a server's configuration, read at start (tests/serve)",
    "serve extender --web.config.file": "a server's configuration, read at start (tests/serve)",
    "diagnose --bearer-token-file": "a credential file: never read from a pipe shared with the input",
    "diagnose --ca-file": "a CA bundle for TLS, read by the ssl module from a path",
    "gpu health --bearer-token-file": "as diagnose's (cli/prom_options.py)",
    "gpu health --ca-file": "as diagnose's (cli/prom_options.py)",
    "watch --bearer-token-file": "as diagnose's (cli/prom_options.py)",
    "watch --ca-file": "as diagnose's (cli/prom_options.py)",
}
# What each command does when there is nothing to check: (arguments, exit code); the README's table.
NOTHING: dict[str, tuple[list[str], int]] = {
    "numa audit": (["--pid", "999999"], 1),
    "numa check": (["--pid", "999999"], 1),
    "numa audit --match": (["--match", "no-process-is-called-this-8d3f"], 1),
}


def _args(args: list[str]) -> list[str]:
    return [str(os.getpid()) if a == SELF else a for a in args]


def _help_pages() -> list[str]:
    groups = {" ".join(c.split()[:1]) for c in COMMANDS if " " in c}
    return ["", *sorted(groups), *sorted(COMMANDS)]


@pytest.mark.parametrize("cols", ["80", "200"])
def test_every_help_fits_80_columns_and_never_breaks_a_word(cols, monkeypatch, capfd):
    """`--help` of the root, each group and each command: within 80 columns at any terminal width,
    wrapped at spaces only (never `--etcd-` / `endpoints`), a long example continued with ` \\`."""
    monkeypatch.setenv("COLUMNS", cols)
    bad = []
    for page in _help_pages():
        code = run_app(app, [*page.split(), "--help"])
        out, _ = capfd.readouterr()
        assert code == 0 and out, page
        lines = out.splitlines()
        for i, line in enumerate(lines):
            if len(line) > 80:
                bad.append(f"{page or 'clusterdoctor'}: {len(line)} columns: {line}")
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if re.search(r"[A-Za-z0-9]-$", line) and re.match(r"\s*[A-Za-z0-9]", nxt):
                bad.append(f"{page or 'clusterdoctor'}: a word cut at its hyphen: {line!r} / {nxt!r}")
    assert not bad, "\n".join(bad)


def test_every_command_is_run_or_says_why_not():
    assert set(RUNS) | set(NOT_RUN) == set(COMMANDS), set(COMMANDS) ^ (set(RUNS) | set(NOT_RUN))


@pytest.mark.parametrize("path", sorted(RUNS))
def test_text_and_json_and_no_color(path):
    """A real run: text within 80 columns with no colour under NO_COLOR (and none in a pipe), no
    Python repr; the JSON switch where the command offers one gives one JSON document."""
    args, as_json = RUNS[path]
    r = run_cli(*path.split(), *_args(args), env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert r.code in CODES.get(path, (0, 1)), (path, r.code, r.err)
    assert "\x1b[" not in r.out + r.err, path
    wide = [
        ln for ln in r.out.splitlines() if len(ln) > 80 and " " in ln.strip()
    ]  # a lone long path may stay whole
    assert not wide, (path, wide[:3])
    assert not re.search(r"\{'\w+': ", r.out), (path, "a Python dict in the text")
    if as_json:
        r = run_cli(*path.split(), *_args(args), *as_json)
        assert r.code in CODES.get(path, (0, 1)), (path, r.err)
        json.loads(r.out)


def test_color_always_and_never():
    """--color always keeps colour in a pipe; NO_COLOR or --color never drops it."""
    r = run_cli("--color", "always", "diagnose", PROM)
    assert r.code == 1 and "\x1b[" in r.out
    assert "\x1b[" not in run_cli("--color", "never", "diagnose", PROM).out
    assert "\x1b[" not in run_cli("diagnose", PROM, env={"NO_COLOR": "1"}).out


def test_every_file_read_takes_standard_input():
    """Each path parameter of a command run here is either in STDIN or says why not (NOT_STDIN)."""
    missing = []
    for path, cmd in COMMANDS.items():
        for p in cmd.params:
            if not _is_path(p):
                continue
            positional = not p.opts or not p.opts[0].startswith("-")
            key = f"{path} {p.name if positional else _flag(p)}"
            if key not in STDIN and key not in NOT_STDIN and _flag(p) not in NOT_STDIN:
                missing.append(key)
    assert not missing, f"add a `-` case to STDIN or a reason to NOT_STDIN for: {missing}"


@pytest.mark.parametrize("key", sorted(STDIN))
def test_dash_reads_standard_input(key):
    args, piped = STDIN[key]
    command = " ".join(key.split()[:-1])
    if piped.startswith("{"):
        data = piped
    else:
        with open(piped, encoding="utf-8", errors="replace") as f:
            data = f.read()
    r = run_cli(*command.split(), *_args(args), input=data, env={"COLUMNS": "80"})
    assert r.code in CODES.get(command, (0, 1)), (key, r.code, r.err)
    assert "no such file" not in r.err.lower() and "FIFO" not in r.err, (key, r.err)


def test_a_piped_dev_stdin_is_read_not_refused():
    with open(XML) as f:
        r = run_cli("numa", "topology", "--from", "/dev/stdin", input=f.read())
    assert r.code == 0 and "FIFO" not in r.err, r.err
    with open(PROM) as f:
        r = run_cli("diagnose", "/dev/stdin", input=f.read())
    assert r.code == 1 and "KUBELET003" in r.out, r.err


@pytest.mark.parametrize("key", sorted(NOTHING))
def test_nothing_to_check_exits_1(key):
    args, code = NOTHING[key]
    command = " ".join(w for w in key.split() if not w.startswith("-"))
    r = run_cli(*command.split(), *args)
    assert r.code == code, (key, r.code, r.out, r.err)


def test_gpu_health_without_a_source_exits_1_here():
    """No GPU on this machine and no file: nothing checked, exit 1 (as numa check), never 'healthy'."""
    r = run_cli("gpu", "health", "--format", "json")
    doc = json.loads(r.out)
    if doc["rules_run"]:
        pytest.skip("this machine has a GPU source: gpu health checked something")
    assert r.code == 1 and "nothing checked" in r.err


_NO_SHELL_DETECTION = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}


def test_quiet_and_completion():
    r = run_cli("--quiet", "diagnose", PROM)
    assert r.code == 1 and r.err == ""
    # Typer detects the shell from the parent process (shellingham): under `make` that is sh, which
    # it cannot complete; its test switch takes the shell as the option's value instead
    r = run_cli("--show-completion", "bash", env={"SHELL": "/bin/bash", **_NO_SHELL_DETECTION})
    assert r.code == 0 and "_clusterdoctor_completion" in r.out, (r.out[:200], r.err)


def test_install_completion_and_complete_a_command(tmp_path):
    """`--install-completion bash` installs a script that bash sources, and the completion protocol
    it uses completes `clusterdoctor numa a` to `audit`."""
    env = {"HOME": str(tmp_path), "SHELL": "/bin/bash", **_NO_SHELL_DETECTION}
    r = run_cli("--install-completion", "bash", env=env)
    assert r.code == 0, r.err
    script = tmp_path / ".bash_completions" / "clusterdoctor.sh"
    assert script.is_file() and str(script) in (tmp_path / ".bashrc").read_text()
    r = run_cli(
        env={
            "COMP_WORDS": "clusterdoctor numa a",
            "COMP_CWORD": "2",
            "_CLUSTERDOCTOR_COMPLETE": "complete_bash",
        }
    )
    assert r.code == 0 and r.out.split() == ["audit"], (r.out, r.err)
