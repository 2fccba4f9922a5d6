"""Undo what pasting does to program output, before anything else reads it.

What an on-call engineer hands over is rarely the file a program wrote: it is a copy from a terminal,
an issue thread or a chat, with the shell prompt and the command line on top, Markdown code fences,
``> `` quote marks, ANSI colours, CRLF line ends, progress lines overwritten with ``\\r``, and lines the
user cut out and replaced by ``...``. :func:`clean` undoes each of these and **records** what it did,
so that the parsers see the program's output and a finding can say "lines 12-40 elided, not judged":

* ``commands``: the command lines found after a shell prompt (``$ nvidia-smi -q``, ``root@h:~# ibstat``,
  ``[user@h ~]$ etcdctl ...``, ``user@h:~> ...`` (SUSE), ``/work/dir# ibstat``, ``(venv) PS C:\\> ...``), or typed
  on the paste's first line without one (``ulimit -a``, ``sudo ibv_devinfo``): they say which program
  printed what follows;
* ``elided``: the line ranges of the paste where the user cut lines out (a line holding only ``...``,
  ``……``, ``[...]``, ``<snip>``, ``(truncated)``, ``--`` from ``grep -A``), and ``gaps``, where those cuts
  fall in the cleaned text: the text there is incomplete, so a count taken from it is a lower bound,
  never evidence of absence;
* ``undone``: what was undone, in words (for the report's warnings).

Launcher and collector prefixes (``[rank0]:``, ``[default3]:``, ``worker-1:``, journald's
``Dec 02 10:00:01 host kernel:``) are **not** removed here: they carry the rank and the host, and the
log parsers read them (:mod:`clusterdoctor.observe.comm.launcher`, :mod:`clusterdoctor.observe.control.logs`).
Program output whose every line carries the same ``host:`` prefix of ``pdsh``/``clush`` is unwrapped by
:func:`strip_host_prefix` for table parsers that need the bare output.

Every pattern here is linear on any line (no nested or overlapping quantifiers); lines longer than
:data:`MAX_LINE` are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = [
    "MAX_PASTE_BYTES",
    "PasteInfo",
    "Pasted",
    "clean",
    "input_commands",
    "input_origin",
    "looks_pasted",
    "numbered",
    "pasted_commands",
    "strip_host_prefix",
]

# A paste is small: a file above this is a log a program wrote, and is read as it is.
MAX_PASTE_BYTES = 16 << 20
MAX_LINE = 4096

# CSI (colours, cursor moves) and OSC (window titles, hyperlinks) escape sequences, and other C0
# controls but tab; ESC [ params intermediates final (ECMA-48 §5.4)
_ANSI = re.compile(r"\x1b\[[0-?]{0,32}[ -/]{0,8}[@-~]|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_FENCE = re.compile(r"^\s{0,3}(?:```|~~~)")
_QUOTE = re.compile(r"^\s{0,3}> ?")
# a whole line in one inline code span: `...` (not a fence, no other backtick inside)
_INLINE_CODE = re.compile(r"^\s{0,3}`(?!`)(?P<body>[^`\n]{1,4000})`\s*$")

# A shell prompt that ends in $, # or > followed by a command: user@host:path$ cmd, [user@host dir]# cmd,
# (venv) user@host:~$ cmd, host$ cmd, $ cmd, PS C:\x> cmd, bash-5.1# cmd. The prompt part has no spaces
# except inside [...] or (...) groups; '#' alone (no user@host) is a prompt only when what follows
# looks like a command we know, since '# ' starts comments (and Prometheus '# HELP').
_PROMPT = re.compile(
    r"^\s{0,4}(?:\([\w.\-]{1,64}\)\s)?"  # (venv)
    r"(?:"
    r"\[[^\]\n]{1,128}\][$#]"  # [user@host dir]$
    r"|[\w.\-]{1,64}@[\w.\-]{1,128}(?::[^\s$#>]{0,256})?[$#>]"  # user@host:~/dir$ (SUSE: user@host:~>)
    r"|(?:[\w.\-]{1,64}:)?~[^\s$#]{0,256}[$#]"  # host:~/dir$ or ~/dir$
    r"|bash-[\d.]{1,10}[$#]|sh-[\d.]{1,10}[$#]"
    r"|PS [A-Za-z]:\\[^>\n]{0,256}>"
    r"|\$"
    r")\s(?P<cmd>\S.*)$"
)
_ROOT_PROMPT = re.compile(r"^\s{0,4}#\s(?P<cmd>\S.*)$")
# the host a prompt names: user@host:~$, [user@host dir]#
_PROMPT_HOST = re.compile(
    r"^\s{0,4}(?:\([\w.\-]{1,64}\)\s)?\[?[\w.\-]{1,64}@(?P<host>[\w.\-]{1,128})[\s:\]$#>]"
)
# curl's progress meter (on stderr, pasted with the output): its two header lines, and the meter line,
# which the output's first line may follow on the same line (the meter ends in CR, not a newline)
_CURL_HEAD = re.compile(
    r"^\s*% Total\s+% Received % Xferd\s+Average Speed|^\s{8,}Dload\s+Upload\s+Total\s+Spent"
)
_T = r"(?:--:--:--|\d{1,2}:\d\d:\d\d|\d{1,5}d \d\dh)"
_CURL_METER = re.compile(
    r"^\s{0,4}\d{1,3}\s+[\d.]{1,6}[kMGT]?\s+\d{1,3}\s+[\d.]{1,6}[kMGT]?\s+\d{1,3}\s+[\d.]{1,6}[kMGT]?\s+"
    r"[\d.]{1,6}[kMGT]?\s+[\d.]{1,6}[kMGT]?\s+" + _T + r"\s+" + _T + r"\s+" + _T + r"\s+[\d.]{1,6}[kMGT]?"
)
_EMPTY_PROMPT = re.compile(
    r"^\s{0,4}(?:\[[^\]\n]{1,128}\][$#]|[\w.\-]{1,64}@[\w.\-]{1,128}(?::[^\s$#>]{0,256})?[$#>]|\$)\s*$"
)

# Programs whose command line, after a bare "# " root prompt, marks a command and not a comment.
KNOWN_PROGRAMS = (
    "nvidia-smi", "nvidia-bug-report", "dcgmi", "ibstat", "ibstatus", "ibv_devinfo", "ibv_devices",
    "ibdev2netdev", "show_gids", "rdma", "ethtool", "lspci", "dmesg", "journalctl", "etcdctl", "kubectl",
    "crictl", "systemctl", "cat", "grep", "egrep", "tail", "head", "less", "numactl", "lstopo",
    "nvidia-fabricmanager", "nv-fabricmanager", "torchrun", "python", "python3", "mpirun", "srun",
    "ib_write_bw", "ib_read_bw", "ib_send_bw", "ibv_rc_pingpong", "ibdiagnet", "perfquery", "iblinkinfo",
    "all_reduce_perf", "sudo", "docker", "helm", "ls", "df", "free", "uname", "modinfo", "lsmod",
    "kubeadm", "etcdutl", "ctr", "nerdctl", "k3s", "microk8s", "calicoctl", "swapon", "chronyc", "timedatectl",
    "ulimit", "ucx_info", "lshca", "ifconfig", "ibv_devices", "ofed_info", "mlxlink", "sminfo",
    "ibqueryerrors", "show_counters", "quota", "lfs", "mmlsquota", "curl", "wget",
)  # fmt: skip
_KNOWN_CMD = re.compile(
    r"^(?:sudo\s+)?(?:[\w./\-]*/)?(?:" + "|".join(re.escape(p) for p in KNOWN_PROGRAMS) + r")\b"
)

# A line that stands for lines the user cut out.
_ELISION = re.compile(
    r"^\s{0,16}(?:\.{3,}|…+|\[\s?(?:\.{3}|…)\s?\]|\(\s?(?:\.{3}|…)\s?\)|<\s?(?:\.{3}|…)\s?>|<snip>|\[snip\]"
    r"|\(snip\)|<\s?snipped\s?>|\[\s?snipped\s?\]|\(truncated\)|\[truncated\]|-- ?more ?--|--"
    r"|(?:\.{3}|…)\s?(?:\(?\s?\d+ (?:more )?lines? (?:omitted|skipped|removed|elided)\s?\)?|omitted|skipped|more)"
    r"\s?(?:\.{3}|…)?)\s{0,16}$",
    re.I,
)


@dataclass
class Pasted:
    """The program output inside a paste, and what was undone to get it."""

    text: str
    commands: list[str] = field(default_factory=list)
    # the elision marks: 1-based inclusive line ranges of the original paste
    elided: list[tuple[int, int]] = field(default_factory=list)
    undone: list[str] = field(default_factory=list)
    # for each line of ``text``, its 1-based line number in the original
    origin: list[int] = field(default_factory=list)
    # where lines were cut out: the 1-based line of ``text`` that follows each cut (len+1: at the end)
    gaps: list[int] = field(default_factory=list)
    # the hosts the shell prompts name (user@host:~$), in order, once each
    hosts: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.undone)

    @property
    def elisions(self) -> int:
        return len(self.gaps)


def looks_pasted(head: str) -> bool:
    """Cheap test on the start of a text: does it carry anything :func:`clean` would undo?"""
    if "\r" in head or "\x1b" in head:
        return True
    for line in head.splitlines()[:400]:
        if len(line) > MAX_LINE:
            continue
        if _FENCE.match(line) or _ELISION.match(line) or _EMPTY_PROMPT.match(line) or _CURL_HEAD.match(line):
            return True
        if _PROMPT.match(line) or _is_root_command(line):
            return True
    if _first_command(head.splitlines()) is not None:
        return True
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    need = max(2, int(0.8 * len(lines)))
    return bool(lines) and (
        sum(1 for ln in lines if _QUOTE.match(ln)) >= need
        or sum(1 for ln in lines if _INLINE_CODE.match(ln)) >= need
    )


def _is_root_command(line: str) -> bool:
    m = _ROOT_PROMPT.match(line) or _PATH_PROMPT.match(line)
    return bool(m and _KNOWN_CMD.match(m.group("cmd")))


# A prompt that is only the working directory (a container's PS1='\w# '): /export/home/me/src# ibstat.
# Like a bare '# ', taken as a prompt only before a program we know.
_PATH_PROMPT = re.compile(r"^\s{0,4}/[^\s$#]{0,256}[$#]\s(?P<cmd>\S.*)$")
# The command typed on the paste's first line without any prompt ("ulimit -a", "sudo ibv_devinfo"): a
# known program, then arguments or nothing -- never "cat: /x: No such file" (a program's own message).
_BARE_CMD = re.compile(
    r"^\s{0,4}(?:sudo\s+)?(?:[\w./\-]*/)?(?:"
    + "|".join(re.escape(p) for p in KNOWN_PROGRAMS)
    + r")(?:\s+[^\s:][^\n]{0,400}+)?\s*$"
)


# a program's own message ("nvidia-smi GPU ... failed to determine ...: invalid ..."), not arguments: words
# joined by ": " outside quotes (commands put such text in quotes: grep "failed: ")
_QUOTED = re.compile(r"'[^'\n]{0,400}'|\"[^\"\n]{0,400}\"")
_MESSAGE_COLON = re.compile(r"[A-Za-z0-9)\]]: [A-Za-z]")


def reads_as_message(line: str) -> bool:
    """Whether ``line`` holds words joined by ": " outside quotes: a program's message, not arguments."""
    return _MESSAGE_COLON.search(_QUOTED.sub("", line)) is not None


def is_bare_command(line: str) -> bool:
    """Whether ``line`` is a command typed without a prompt: a known program and its arguments."""
    return len(line) <= MAX_LINE and _BARE_CMD.match(line) is not None and not reads_as_message(line)


def _first_command(lines: list[str]) -> int | None:
    """Index of the paste's first content line when it is a bare command line, else None."""
    for i, line in enumerate(lines[:50]):
        if not line.strip() or _FENCE.match(line):
            continue
        return i if is_bare_command(line) else None
    return None


def _overwrite(line: str) -> str:
    """A line with bare CRs (a progress bar redrawn in place) shows what was printed last."""
    if "\r" not in line:
        return line
    parts = [p for p in line.split("\r") if p.strip()]
    return parts[-1] if parts else ""


def clean(text: str) -> Pasted:
    """Undo pasting (see the module docstring); ``text`` unchanged when there is nothing to undo."""
    undone: list[str] = []
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
        undone.append("CRLF line ends")
    if "\x1b" in text:
        stripped = _ANSI.sub("", text)
        if stripped != text:
            undone.append("ANSI colour/escape codes")
            text = stripped
    raw = text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    # quotes: only when (nearly) every non-empty line is quoted, as when a whole block was quoted
    nonempty = [ln for ln in raw if ln.strip()]
    if nonempty and sum(1 for ln in nonempty if _QUOTE.match(ln)) >= max(2, int(0.8 * len(nonempty))):
        raw = [_QUOTE.sub("", ln, count=1) for ln in raw]
        undone.append("'> ' quote marks")
    # each line its own Markdown inline code span (`line`), as when a table is pasted into prose
    nonempty = [ln for ln in raw if ln.strip()]
    if nonempty and sum(1 for ln in nonempty if _INLINE_CODE.match(ln)) >= max(2, int(0.8 * len(nonempty))):
        raw = [(m.group("body") if (m := _INLINE_CODE.match(ln)) else ln) for ln in raw]
        undone.append("'`' inline code marks")
    out: list[str] = []
    origin: list[int] = []
    commands: list[str] = []
    elided: list[tuple[int, int]] = []
    gaps: list[int] = []
    hosts: list[str] = []
    fences = prompts = cr = meters = 0
    bare = _first_command(raw)
    for i, line in enumerate(raw, 1):
        if bare is not None and i == bare + 1:
            commands.append(line.strip())
            prompts += 1
            continue
        if len(line) > MAX_LINE:
            out.append(line)
            origin.append(i)
            continue
        if "\r" in line:
            line = _overwrite(line)
            cr += 1
        if _FENCE.match(line):
            fences += 1
            continue
        m = _PROMPT.match(line)
        if m is None and _is_root_command(line):
            m = _ROOT_PROMPT.match(line) or _PATH_PROMPT.match(line)
        if m is not None:
            commands.append(m.group("cmd").strip())
            prompts += 1
            h = _PROMPT_HOST.match(line)
            if h is not None and h.group("host") not in hosts:
                hosts.append(h.group("host"))
            continue
        if _CURL_HEAD.match(line):
            meters += 1
            continue
        cm = _CURL_METER.match(line) if meters else None
        if cm is not None:
            meters += 1
            line = line[cm.end() :]
            if not line.strip():
                continue
        if _EMPTY_PROMPT.match(line):
            prompts += 1
            continue
        if _ELISION.match(line):
            if elided and elided[-1][1] == i - 1:
                elided[-1] = (elided[-1][0], i)
            else:
                elided.append((i, i))
            gap = len(out) + 1  # the cut sits before this line of the cleaned text
            if not gaps or gaps[-1] != gap:
                gaps.append(gap)
            continue
        out.append(_CTRL.sub("", line) if "\x1b" not in line else line)
        origin.append(i)
    if fences:
        undone.append(f"{fences} Markdown fence line(s)")
    if prompts:
        undone.append(f"{prompts} shell prompt/command line(s)")
    if cr:
        undone.append("progress lines redrawn with CR")
    if meters:
        undone.append(f"{meters} curl progress meter line(s)")
    if elided:
        n = len(elided)
        undone.append(f"{n} elision mark(s) ('...'): the lines cut out there are not judged")
    return Pasted("\n".join(out) + ("\n" if out else ""), commands, elided, undone, origin, gaps, hosts)


_HOST_PREFIX = re.compile(r"^(?P<host>[A-Za-z0-9][\w.\-]{0,127}): ")


def strip_host_prefix(text: str) -> tuple[str, str | None]:
    """``pdsh``/``clush`` output (``host: line`` on every line, one host) without the prefix, and the host;
    ``(text, None)`` when the lines do not all carry the same one."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        return text, None
    first = _HOST_PREFIX.match(lines[0])
    if first is None:
        return text, None
    host = first.group("host")
    tag = host + ": "
    if not all(ln.startswith(tag) or ln == host + ":" for ln in lines):
        return text, None
    body = "\n".join(ln[len(tag) :] if ln.startswith(tag) else "" for ln in text.splitlines())
    return body + ("\n" if text.endswith("\n") else ""), host


@dataclass(frozen=True)
class PasteInfo:
    """What undoing a paste found in one input (the ``pastes`` observation)."""

    path: str
    commands: tuple[str, ...]
    elided: tuple[tuple[int, int], ...]
    gaps: tuple[int, ...]
    undone: tuple[str, ...]
    hosts: tuple[str, ...] = ()

    @classmethod
    def of(cls, path: str, p: Pasted) -> PasteInfo:
        return cls(path, tuple(p.commands), tuple(p.elided), tuple(p.gaps), tuple(p.undone), tuple(p.hosts))


# The paste being loaded, for its loader: the command lines (whose arguments say what the output is about:
# ``ethtool -S ens1f0`` names the port, ``ibv_devinfo -d mlx5_0`` the device of a GID excerpt) and the line
# numbers the user sees (the cleaned text has lost its prompt, fence and elision lines).
_INPUT: ContextVar[tuple[tuple[str, ...], tuple[int, ...]]] = ContextVar(
    "clusterdoctor_paste", default=((), ())
)


@contextmanager
def pasted_commands(commands: Iterable[str], origin: Iterable[int] = ()) -> Iterator[None]:
    """While loading one paste: :func:`input_commands` and :func:`input_line` describe it."""
    token = _INPUT.set((tuple(commands), tuple(origin)))
    try:
        yield
    finally:
        _INPUT.reset(token)


def input_commands() -> tuple[str, ...]:
    """The command lines of the paste being loaded (empty outside :func:`pasted_commands`)."""
    return _INPUT.get()[0]


def input_origin() -> list[int] | None:
    """For each line of the cleaned text being loaded, its line number in the paste (None: not a paste)."""
    origin = _INPUT.get()[1]
    return list(origin) if origin else None


def numbered(text: str, origin: list[int] | None = None) -> Iterator[tuple[int, str]]:
    """The lines of ``text`` with the numbers the user sees: ``origin[i]`` for line ``i + 1`` of a cleaned
    paste (:func:`input_origin`), else their own. Split on newlines only, as :func:`clean` does."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for i, line in enumerate(lines):
        yield (origin[i] if origin is not None and i < len(origin) else i + 1), line.rstrip("\r")


def lines_not_read(path: str, skipped: list[int], what: str) -> str:
    """The warning a reader gives for the lines of a paste it skipped: ``PATH: line(s) 3, 7 not read
    (not WHAT)``, at most the first six numbers."""
    return f"{path}: line(s) {', '.join(map(str, skipped[:6]))} not read (not {what})"
