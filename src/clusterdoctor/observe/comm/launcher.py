"""Line prefixes that launchers put before each line of a job's output, as a regular expression.

Seen on real output (fixtures and tests/data/comm): Open MPI ``--tag-output`` ``[1,0]<stdout>:``;
torchrun ``--tee`` ``[default0]:`` and ``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE`` brackets such as
``[default-r0-l0]:``; PyTorch's own ``[rank0]:``; Slurm ``srun -l`` `` 0: ``; DeepSpeed's pdsh
launcher ``worker-0: `` / ``104.171.201.171: ``; log viewers' ``[80746] `` line numbers; Markdown
indentation. Any number of them may be stacked (``[default0]:[rank0]:``).

:data:`LINE_PREFIX` matches such a stack at the start of a line (possibly empty); parsers anchor their
own line grammar after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

LINE_PREFIX = r"(?:[ \t]*(?:\[\d+,\d+\]<std(?:out|err)>:|\[[A-Za-z_][\w.\-]*\]:|\[\d+\][ \t]|\d+:|[A-Za-z0-9][\w.\-]*:[ \t]))*"


# --- the launchers' own console lines -------------------------------------------------------------------
#
# What a launcher prints about the job it starts, as a paste shows it beside (or instead of) the job's own
# output: torchrun / torch.distributed.launch (``torch/distributed/run.py``, ``torch/distributed/elastic/``
# loggers: ``[2024-03-22 03:18:07,974] torch.distributed.run: [WARNING] Setting OMP_NUM_THREADS ...``,
# ``INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group``), Slurm's srun and
# salloc (``src/srun/``: ``srun: job 8375613 queued and waiting for resources``, ``srun: job N has been
# allocated resources``, ``srun: error: ...``, ``srun: Job step aborted``) and DeepSpeed's launcher
# (``[INFO] [launch.py:...] ...``, ``[INFO] [runner.py:...] ...``). They say how the job was started, not why
# it failed: a file of them is read (not refused) and judged by the messages it holds (rules/catalog).

_LAUNCHER_LINE = re.compile(
    r"(?P<torchrun>torch\.distributed\.(?:run|launch|elastic(?:\.[a-z_]{1,40}){1,6}): ?\[?(?:WARNING|INFO|ERROR)"
    r"|(?:WARNING|INFO|ERROR):torch\.distributed\.(?:run|launch|elastic(?:\.[a-z_]{1,40}){1,6}):)"
    r"|^(?P<slurm>s(?:run|alloc|batch): (?:job \d{1,12} |Job \d{1,12} |error: |Job step |Jobstep |"
    r"Requested partition|Pending job allocation|Granted job allocation|Relinquishing job allocation|"
    r"Force Terminated|got SIGCONT|lua:|launch/slurm|Step created|step creation))"
    r"|(?P<deepspeed>\[(?:INFO|WARNING|ERROR)\] \[(?:launch|runner|launcher_helper)\.py:\d{1,6}:[\w]{1,60}\])",
)
_SNIFF_LAUNCHER = re.compile(
    rb"torch\.distributed\.(?:run|launch|elastic\.[a-z_.]{1,120}): ?\[?(?:WARNING|INFO|ERROR)"
    rb"|(?:WARNING|INFO|ERROR):torch\.distributed\.(?:run|launch|elastic)"
    rb"|(?m:^s(?:run|alloc): (?:job \d{1,12} (?:queued and waiting for resources|has been allocated resources)"
    rb"|Pending job allocation|Granted job allocation))"
    rb"|\[(?:INFO|WARNING)\] \[(?:launch|runner)\.py:\d{1,6}:main\]"
)


@dataclass
class LauncherLog:
    """A launcher's console lines in a file: which launchers, how many lines, the other lines not read."""

    path: str
    launchers: set[str] = field(default_factory=set)
    lines: int = 0
    other_lines: int = 0
    warnings: list[str] = field(default_factory=list)


def parse_launcher_log(text: str, path: str = "<launcher>") -> LauncherLog:
    """The launcher lines of ``text``; InputError when none is there."""
    from clusterdoctor.errors import InputError

    out = LauncherLog(path)
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _LAUNCHER_LINE.search(line, 0, 400)
        if m is None:
            out.other_lines += 1
            continue
        out.lines += 1
        out.launchers.add(next(k for k, v in m.groupdict().items() if v is not None))
    if not out.lines:
        raise InputError("no torchrun, srun or DeepSpeed launcher line", path)
    if out.other_lines:
        out.warnings.append(
            f"{path}: {out.other_lines} line(s) beside the launcher's ({', '.join(sorted(out.launchers))}) are "
            "the job's own output and are read only for known messages"
        )
    return out


def sniff_launcher_log(head: bytes) -> bool:
    return _SNIFF_LAUNCHER.search(head[:65536]) is not None


def load_launcher_log(path: str | Path) -> LauncherLog:
    from clusterdoctor.observe.limits import read_text

    p = Path(path)
    return parse_launcher_log(read_text(p), str(p))
