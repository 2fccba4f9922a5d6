"""Pastes from around a GPU job that are no program clusterdoctor reads, refused with what they look like.

An incident folder often holds, beside the tools' output, what the user typed and saw on the way: a
command line with nothing under it, ``echo $CUDA_VISIBLE_DEVICES``, the scheduler's ``sinfo`` table,
a Slurm configuration file. None of these is a program the README lists, so none is judged; but a
refusal says what the file looks like (one line, exit code of an input error), not only that it was
not recognised, so the user knows to give the tool's output instead. Listed last in
:mod:`clusterdoctor.observe.detect`: any reader that claims the text first wins, and the known
messages in a refused file are still read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import KNOWN_PROGRAMS, reads_as_message

__all__ = ["load_unlisted_gpu", "looks_like", "sniff_unlisted_gpu"]

_PROMPT = r"(?:[\w.\-]{1,64}@[\w.\-]{1,128}(?::[^\s$#>]{0,256})?[$#>%]|\[[^\]\n]{1,128}\][$#]|[$#>%]|➜\s{1,4}\S{1,64})"
_PROMPT_LINE = re.compile(r"^\s{0,4}(?:\([^)\n]{1,40}\)\s{0,4})?" + _PROMPT + r"\s{0,4}(?P<cmd>.{0,400})$")
_TOOLS = "|".join(re.escape(p) for p in sorted(KNOWN_PROGRAMS, key=len, reverse=True))
_BARE_CMD = re.compile(r"^\s{0,4}(?:sudo\s+)?(?:[\w./\-]*/)?(?:" + _TOOLS + r")(?:\s.{0,300})?$")
_ECHO_VAR = re.compile(r"^echo\s{1,4}\"?\$\{?(?P<var>[A-Z_][A-Z0-9_]{0,63})\}?\"?\s*$")
_SINFO = re.compile(r"^\s{0,4}PARTITION\s{1,8}AVAIL")
_SLURM_KEYS = (
    "CgroupAutomount", "CgroupMountpoint", "CgroupPlugin", "ConstrainCores", "ConstrainDevices",
    "ConstrainRAMSpace", "ConstrainSwapSpace", "AllowedRAMSpace", "AllowedSwapSpace", "TaskAffinity",
    "ClusterName", "SlurmctldHost", "ControlMachine", "SelectType", "SelectTypeParameters", "GresTypes",
    "ProctrackType", "TaskPlugin", "NodeName", "PartitionName",
)  # fmt: skip
_SLURM_CONF = re.compile(r"^\s{0,4}#?\s{0,2}(?P<k>" + "|".join(_SLURM_KEYS) + r")=\S{0,200}\s*$")


def _lines(text: str) -> list[str]:
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()][:200]


def _command(line: str) -> str | None:
    """The command a line types (after a prompt, or a bare known tool), or None."""
    m = _PROMPT_LINE.match(line)
    if m:
        return m.group("cmd").strip()
    return line.strip() if _BARE_CMD.match(line) and not reads_as_message(line) else None


def looks_like(text: str) -> str | None:
    """What the text looks like when it is one of this module's shapes (the refusal's reason), or None."""
    lines = _lines(text)
    if not lines or len(lines) > 120:
        return None
    if any(_SINFO.match(ln) for ln in lines[:4]):
        return "a Slurm sinfo table (partitions and node states), not a program clusterdoctor reads"
    conf = [m.group("k") for m in map(_SLURM_CONF.match, lines) if m]
    if len(conf) >= 2 and len(conf) + sum(
        ln.lstrip().startswith("#") or bool(_command(ln)) for ln in lines
    ) >= len(lines):
        return f"a Slurm configuration file ({', '.join(dict.fromkeys(conf[:3]))}, ...), not program output"
    cmds = [_command(ln) for ln in lines]
    # a paste whose prompt line the paste reader took off: the command is in input_commands()
    from clusterdoctor.observe.paste import input_commands

    typed_echo = [m for m in map(_ECHO_VAR.match, input_commands()) if m]
    if (
        typed_echo
        and len(lines) <= 2
        and all(c is None and len(ln.split()) <= 1 for c, ln in zip(cmds, lines))
    ):
        return (
            f"the value of ${typed_echo[0].group('var')} echoed in a shell, a variable and not a program's "
            "output clusterdoctor reads"
        )
    if all(c is not None for c in cmds):
        typed = [c for c in cmds if c]
        if typed:
            return f"only the command line(s) `{typed[0][:60]}`, none of the output: paste what it printed"
        return None
    # echo $VAR and its value (a line or two of no more than a word each)
    for i, c in enumerate(cmds):
        m = _ECHO_VAR.match(c or "")
        if m:
            rest = [ln for j, ln in enumerate(lines) if j != i and cmds[j] is None]
            if len(rest) <= 2 and all(len(ln.split()) <= 1 for ln in rest):
                return (
                    f"the value of ${m.group('var')} echoed in a shell, a variable and not a program's "
                    "output clusterdoctor reads"
                )
    return None


def sniff_unlisted_gpu(head: bytes, name: str = "") -> bool:
    if b"\x00" in head[:4096]:
        return False
    return looks_like(head[:16384].decode("utf-8", "replace")) is not None


def load_unlisted_gpu(path: str | Path) -> dict[str, Any]:
    """Always refuses: an :class:`InputError` whose reason says what the file looks like."""
    from clusterdoctor.observe.limits import read_head

    p = Path(path)
    why = looks_like(read_head(p, 16384).decode("utf-8", "replace")) or "not a program clusterdoctor reads"
    raise InputError(why, str(p))
