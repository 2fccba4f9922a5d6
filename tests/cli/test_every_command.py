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
        r = run_cli(*argv, timeout=60)
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
    r = run_cli("collect", "-o", str(tmp_path / "missing" / "dir" / "x.tar.zst"), timeout=30)
    assert r.code == 2 and r.err.count("\n") == 1 and "does not exist" in r.err
    assert "sysfs-topology" not in r.err  # nothing was collected first
