"""Processes as the kernel shows them in ``/proc``: status, numa_maps, environment, open devices, threads.

Pure parsers (:func:`parse_status`, :func:`parse_numa_maps`) raise only
:class:`~clusterdoctor.errors.InputError`. Live collectors (:func:`collect_process`,
:func:`list_pids`, :func:`find_pids`) read a proc tree at a configurable root (``/proc`` for this
machine; a copied tree in tests and benchmarks) and never raise for a process that exits mid-scan or
cannot be read: the :class:`ProcessInfo` carries ``error`` instead.

Formats (torvalds/linux ``Documentation/filesystems/proc.rst``, ``fs/proc/task_mmu.c``
``show_numa_map``, ``mm/mempolicy.c`` ``mpol_to_str``; numactl ``numa_maps.5``):

* ``numa_maps``: one line per VMA, ``<hex start> <policy> <items...>``. The policy is a mode from
  ``policy_modes[]`` (``default``, ``prefer``, ``bind``, ``interleave``, ``weighted interleave``,
  ``local``, ``prefer (many)`` -- two contain a space), optionally ``=static|relative|balancing``
  flags and ``:<nodelist>``. Items: ``file=`` (path with space, tab, newline and ``=`` escaped as
  octal), ``heap``, ``stack``, ``huge``, ``anon=``, ``dirty=``, ``mapped=``, ``mapmax=``,
  ``swapcache=``, ``active=``, ``writeback=``, ``N<node>=<pages>`` and, last,
  ``kernelpagesize_kB=``. ``N<node>`` counts are pages of that line's ``kernelpagesize_kB``
  (4 kB normally, 2048 kB or 1 GB for hugetlb VMAs), so bytes = pages * kernelpagesize_kB * 1024.
  A VMA with no resident pages prints neither ``N`` items nor ``kernelpagesize_kB``.
* ``status``: ``Key:<TAB>value`` lines; ``Name`` is the comm with ``\\n`` and ``\\\\`` escaped.
"""

from __future__ import annotations

import errno
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.errors import InputError, UsageError
from clusterdoctor.redact import is_secret_name, redact_argv, redact_env
from clusterdoctor.topology.cpuset import parse_cpulist

__all__ = [
    "MemPolicy",
    "NumaMaps",
    "ProcessInfo",
    "ThreadInfo",
    "VmaPolicy",
    "collect_process",
    "collect_processes",
    "find_pids",
    "is_secret_name",
    "list_pids",
    "parse_numa_maps",
    "parse_policy",
    "parse_status",
    "redact_cmdline",
    "redact_env",
    "uverbs_ibdev",
]

# -- numa_maps ---------------------------------------------------------------------------------

# mm/mempolicy.c policy_modes[] (kernel 6.9+ adds "weighted interleave"; 5.15+ "prefer (many)").
POLICY_MODES = frozenset(
    {"default", "prefer", "bind", "interleave", "weighted interleave", "local", "prefer (many)"}
)
# mpol_to_str(): "=" then "static" or "relative", and/or "balancing" ("|" between two flags).
POLICY_FLAGS = frozenset({"static", "relative", "balancing"})
# Modes that pin or steer memory to chosen nodes (what a "memory binding" report looks for).
BINDING_MODES = frozenset({"bind", "prefer", "prefer (many)", "interleave", "weighted interleave"})

_HEX = "0123456789abcdef"
_PAGE_PREFIX = "kernelpagesize_kB="
_PAGE_PREFIX_LEN = len(_PAGE_PREFIX)
_N_ITEM_RE = re.compile(r" N\d+=")


@dataclass(frozen=True)
class MemPolicy:
    """One parsed policy string: ``bind=static:0-1`` -> mode ``bind``, flags ``(static,)``, nodes 0, 1."""

    text: str
    mode: str
    flags: tuple[str, ...] = ()
    nodes: tuple[int, ...] = ()

    @property
    def binds(self) -> bool:
        """True when the policy steers memory to chosen nodes (bind, prefer, interleave...)."""
        return self.mode in BINDING_MODES


@dataclass(frozen=True)
class VmaPolicy:
    """A VMA whose memory policy is not ``default``, with the bytes it holds per node."""

    start: int
    policy: MemPolicy
    bytes_by_node: dict[int, int]
    huge: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "start": f"{self.start:x}",
            "policy": self.policy.text,
            "mode": self.policy.mode,
            "flags": list(self.policy.flags),
            "nodes": list(self.policy.nodes),
            "bytes_by_node": {str(k): v for k, v in sorted(self.bytes_by_node.items())},
            "huge": self.huge,
        }


@dataclass
class NumaMaps:
    """A process's resident memory by NUMA node, from ``/proc/<pid>/numa_maps``.

    ``bytes_by_node``: resident bytes per node, summed over VMAs through each line's page size.
    ``policy_bytes``: resident bytes per policy string (``default``, ``bind:0``...).
    ``policy_vmas``: every VMA whose policy is not ``default`` (so a bind/preferred policy can be
    reported with its address). ``huge_bytes_by_node``: the part of ``bytes_by_node`` in hugetlb VMAs.
    """

    bytes_by_node: dict[int, int] = field(default_factory=dict)
    vma_count: int = 0
    policy_bytes: dict[str, int] = field(default_factory=dict)
    policy_vmas: list[VmaPolicy] = field(default_factory=list)
    huge_bytes_by_node: dict[int, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_by_node.values())

    def policies(self) -> list[MemPolicy]:
        """The distinct non-default policies, in order of first appearance."""
        seen: dict[str, MemPolicy] = {}
        for v in self.policy_vmas:
            seen.setdefault(v.policy.text, v.policy)
        return list(seen.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "bytes_by_node": {str(k): v for k, v in sorted(self.bytes_by_node.items())},
            "total_bytes": self.total_bytes,
            "vma_count": self.vma_count,
            "policy_bytes": dict(self.policy_bytes),
            "policy_vmas": [v.as_dict() for v in self.policy_vmas],
            "huge_bytes_by_node": {str(k): v for k, v in sorted(self.huge_bytes_by_node.items())},
            "warnings": list(self.warnings),
        }


_POLICY_CACHE: dict[str, MemPolicy] = {"default": MemPolicy("default", "default")}
_PAGE_CACHE: dict[str, int] = {"kernelpagesize_kB=4": 4096}


def parse_policy(text: str, path: str | None = None, line: int | None = None) -> MemPolicy:
    """Parse a numa_maps policy string such as ``prefer (many)=static:0,2`` (cached)."""
    hit = _POLICY_CACHE.get(text)
    if hit is not None:
        return hit
    head, _, nodelist = text.partition(":")
    mode, eq, flag_text = head.partition("=")
    if mode not in POLICY_MODES:
        raise InputError(f"unknown memory policy {text[:60]!r}", path, line)
    flags: tuple[str, ...] = ()
    if eq:
        flags = tuple(flag_text.split("|"))
        if not flag_text or any(f not in POLICY_FLAGS for f in flags):
            raise InputError(f"bad memory policy flags in {text[:60]!r}", path, line)
    try:
        nodes = parse_cpulist(nodelist, path=path) if nodelist else ()
    except InputError:
        raise InputError(f"bad node list in memory policy {text[:60]!r}", path, line) from None
    pol = MemPolicy(text, mode, flags, nodes)
    if len(_POLICY_CACHE) < 4096:
        _POLICY_CACHE[text] = pol
    return pol


def _page_bytes(token: str, path: str | None, line: int) -> int:
    hit = _PAGE_CACHE.get(token)
    if hit is not None:
        return hit
    digits = token[_PAGE_PREFIX_LEN:]
    if not (digits.isascii() and digits.isdigit()) or int(digits) == 0:
        raise InputError(f"bad {token[:60]!r}", path, line)
    value = int(digits) * 1024
    if len(_PAGE_CACHE) < 64:
        _PAGE_CACHE[token] = value
    return value


def parse_numa_maps(text: str | bytes, path: str | None = None) -> NumaMaps:
    """Parse ``/proc/<pid>/numa_maps`` text into resident bytes per node and per policy.

    Empty text (kernel threads, zombies) gives an empty :class:`NumaMaps`. A last line cut short
    (no newline, page size missing) is dropped with a warning. Anything that is not numa_maps --
    a line without a hex address, an unknown policy, a malformed ``N<node>=`` or page size --
    raises :class:`InputError` naming the line. Unknown items are ignored.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "surrogateescape")
    try:
        return _parse_fast(text, path)
    except (_Fallback, InputError):
        # Anything unusual: the line-by-line parser says exactly what (and where), or copes.
        return _parse_slow(text, path)


class _Fallback(Exception):
    pass


def _add_line(out: NumaMaps, line: str, lineno: int, path: str | None, last_line: bool) -> bool:
    """Account one numa_maps line in ``out``; False when it is a cut-short last line (dropped)."""
    parts = line.split(" ")
    addr = parts[0]
    if not addr or addr.strip(_HEX) or len(parts) < 2:
        raise InputError(f"not a numa_maps line: {line[:60]!r}", path, lineno)
    pol_text = parts[1]
    k = 2
    if pol_text == "weighted" or (pol_text == "prefer" and len(parts) > 2 and parts[2][:6] == "(many)"):
        if len(parts) < 3:
            raise InputError(f"not a numa_maps line: {line[:60]!r}", path, lineno)
        pol_text = pol_text + " " + parts[2]
        k = 3
    pol = _POLICY_CACHE.get(pol_text)
    if pol is None:
        pol = parse_policy(pol_text, path, lineno)
    last = parts[-1]
    page = _PAGE_CACHE.get(last)
    if page is None:
        if last.startswith(_PAGE_PREFIX):
            page = _page_bytes(last, path, lineno)
        else:
            if _N_ITEM_RE.search(line) is not None:
                if last_line:
                    return False
                raise InputError("N<node>= counts without kernelpagesize_kB", path, lineno)
            out.policy_bytes.setdefault(pol.text, 0)
            if pol.mode != "default":
                out.policy_vmas.append(VmaPolicy(int(addr, 16), pol, {}))
            return True
    # N<node>=<pages> items sit just before kernelpagesize_kB (show_numa_map order).
    by_node = out.bytes_by_node
    line_bytes = 0
    vma_nodes: dict[int, int] | None = None if pol.mode == "default" else {}
    huge = page != 4096 and (" huge " in line)
    j = len(parts) - 2
    while j >= k:
        tok = parts[j]
        if tok[:1] != "N":
            break
        node_s, eq, pages_s = tok[1:].partition("=")
        if not eq or not (node_s.isdigit() and pages_s.isdigit() and tok.isascii()):
            if not node_s[:1].isdigit():
                break  # an unknown item that happens to start with N
            raise InputError(f"bad node count {tok[:60]!r}", path, lineno)
        node = int(node_s)
        nbytes = int(pages_s) * page
        by_node[node] = by_node.get(node, 0) + nbytes
        line_bytes += nbytes
        if vma_nodes is not None:
            vma_nodes[node] = vma_nodes.get(node, 0) + nbytes
        if huge:
            out.huge_bytes_by_node[node] = out.huge_bytes_by_node.get(node, 0) + nbytes
        j -= 1
    out.policy_bytes[pol.text] = out.policy_bytes.get(pol.text, 0) + line_bytes
    if vma_nodes is not None:
        out.policy_vmas.append(VmaPolicy(int(addr, 16), pol, vma_nodes, huge))
    return True


def _parse_slow(text: str, path: str | None) -> NumaMaps:
    """Line by line; exact errors with line numbers; drops a cut-short last line with a warning."""
    out = NumaMaps()
    lines = text.split("\n")
    last_index = len(lines) - 1  # text ending in "\n" leaves an empty last element
    for i, line in enumerate(lines):
        if not line:
            continue
        if _add_line(out, line, i + 1, path, i == last_index):
            out.vma_count += 1
        else:
            out.warnings.append(f"line {i + 1}: truncated, dropped")
    return out


# The fast path's whole-text scans. Each starts with a literal ("\n", " N") that the regex engine
# jumps between, so none is a Python loop per line.
# Every newline: "" where the next line is "<hex address> default..." (or at the end), else the
# next line itself ("\n" for a blank one, which _add_line rejects: the slow path then skips it).
_LINE_START_RE = re.compile(r"\n(?:[0-9a-f]+ default(?=[ \n])|([^\n]+|\n?))")
_DEFAULT_LINE_START_RE = re.compile(r"[0-9a-f]+ default[ \n]")  # the first line (no newline before)
_NOT_DEFAULT_LINE_RE = re.compile(r"\n(?![0-9a-f]+ default[ \n]|\Z)")
# Every " N": the N<node>=<pages> run ending a 4 kB line (without its first "N"), or "" for any
# other N item (a hugetlb line's run, a malformed or misplaced item) that only the line parser judges.
_N_RUN_RE = re.compile(r" N(?:([0-9]+=[0-9]+(?: N[0-9]+=[0-9]+)*) kernelpagesize_kB=4\n)?")
# A page size other than "kernelpagesize_kB=4" ending its line (hugetlb VMAs, or garbage).
_ODD_PAGE_RE = re.compile(r"kernelpagesize_kB=(?!4\n)")


def _parse_fast(text: str, path: str | None) -> NumaMaps:
    """The common case in a few whole-text scans at C speed, with no Python loop per line.

    ``default``-policy lines with 4 kB pages are never visited one by one: one scan checks every
    line start, counts the lines and returns the other lines (another policy, or not numa_maps);
    one collects the ``N0=5 N1=2`` run before each ``kernelpagesize_kB=4`` into a Counter, whose
    distinct runs are parsed once. Lines with another page size are located by one more scan, run
    only when the page-size count says they exist. Those lines go through :func:`_add_line`, in
    file order. Every ``N`` item must be in a counted run or in such a line. Anything unexpected
    raises :class:`_Fallback` (or InputError) and the caller re-parses with :func:`_parse_slow`,
    which reports the exact problem.
    """
    if not text:
        return NumaMaps()
    if text[-1] != "\n":
        raise _Fallback()  # maybe cut short: let the slow path judge
    after_newline = _LINE_START_RE.findall(text)  # one per newline, the last one ""
    runs = Counter(_N_RUN_RE.findall(text))
    stray = runs.pop("", 0)
    unusual: list[str]  # the lines for _add_line, in file order
    if text.count("kernelpagesize_kB=") == runs.total():  # every page size is a 4 kB run's
        unusual = list(filter(None, after_newline))
        if _DEFAULT_LINE_START_RE.match(text) is None:
            unusual.insert(0, text[: text.index("\n")])
    else:  # some line has another page size: locate both kinds by offset, merge in file order
        offsets = {m.start() + 1: None for m in _NOT_DEFAULT_LINE_RE.finditer(text)}
        offsets.update((text.rfind("\n", 0, m.start()) + 1, None) for m in _ODD_PAGE_RE.finditer(text))
        if _DEFAULT_LINE_START_RE.match(text) is None:
            offsets[0] = None
        unusual = [text[i : text.index("\n", i)] for i in sorted(offsets)]
    out = NumaMaps()
    for line in unusual:
        _add_line(out, line, 0, path, False)  # a blank line raises here: the slow path skips it
        for run in _N_RUN_RE.findall(line + "\n"):  # its N items are accounted for already
            if run:
                runs[run] -= 1
            else:
                stray -= 1
    if stray:
        raise _Fallback()  # an N item outside the runs of 4 kB lines: the line parser decides
    by_node = out.bytes_by_node
    default_bytes = 0
    for run, n in runs.items():
        for item in run.split(" N"):
            node_s, _, pages_s = item.partition("=")
            node = int(node_s)
            nbytes = int(pages_s) * 4096 * n
            by_node[node] = by_node.get(node, 0) + nbytes
            default_bytes += nbytes
    out.vma_count = len(after_newline)  # the text ends in a newline: lines = newlines
    if out.vma_count > len(unusual):  # some default lines were not visited one by one
        out.policy_bytes["default"] = out.policy_bytes.get("default", 0) + default_bytes
    return out


# -- status ------------------------------------------------------------------------------------

_STATUS_INT_KEYS = ("Pid", "Tgid", "PPid", "Threads", "Kthread")
_STATUS_KB_KEYS = ("VmRSS", "VmHWM", "VmSize", "RssAnon", "RssFile", "HugetlbPages")


def parse_status(text: str | bytes, path: str | None = None) -> dict[str, Any]:
    """Parse ``/proc/<pid>/status`` (or ``task/<tid>/status``).

    Returns a dict keyed by the kernel's field names: ``Name`` (str), ``State`` (str, e.g.
    ``"S (sleeping)"``), ``Pid``, ``Tgid``, ``PPid``, ``Threads``, ``Kthread`` (int or absent),
    ``Cpus_allowed_list`` and ``Mems_allowed_list`` (sorted tuples of ids, or absent on kernels
    that do not print them), ``VmRSS``/``VmHWM``/``VmSize``/``RssAnon``/``RssFile``/``HugetlbPages``
    in BYTES (absent for kernel threads). ``Pid`` is required.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "surrogateescape")
    raw: dict[str, str] = {}
    for i, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        key, colon, value = line.partition(":")
        if not colon or not key or " " in key:
            raise InputError(f"not a status line: {line[:60]!r}", path, i)
        raw[key] = value
    if "Pid" not in raw:
        raise InputError("no Pid field: not a /proc/<pid>/status file", path)
    out: dict[str, Any] = {}
    if "Name" in raw:
        name = raw["Name"]
        name = name[1:] if name.startswith("\t") else name.lstrip(" ")
        out["Name"] = name.replace("\\n", "\n").replace("\\\\", "\\")
    if "State" in raw:
        out["State"] = raw["State"].strip()
    for key in _STATUS_INT_KEYS:
        if key in raw:
            v = raw[key].strip()
            if not (v.isascii() and v.isdigit()):
                raise InputError(f"bad {key} {v[:40]!r}", path)
            out[key] = int(v)
    for key in _STATUS_KB_KEYS:
        if key in raw:
            num, _, unit = raw[key].strip().partition(" ")
            if not (num.isascii() and num.isdigit()) or unit.strip() not in ("kB", ""):
                raise InputError(f"bad {key} {raw[key].strip()[:40]!r}", path)
            out[key] = int(num) * 1024
    for key in ("Cpus_allowed_list", "Mems_allowed_list"):
        if key in raw:
            out[key] = parse_cpulist(raw[key], path=path)
    return out


# -- redaction: one implementation for the whole project, in clusterdoctor.redact ----------------

redact_cmdline = redact_argv  # the name this module has always exported


# -- live collection ---------------------------------------------------------------------------

# Environment variables kept from /proc/<pid>/environ (everything else is never stored).
ENV_KEEP = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "LOCAL_RANK",
        "RANK",
        "LOCAL_WORLD_SIZE",
        "WORLD_SIZE",
        "OMP_NUM_THREADS",
    }
)
ENV_KEEP_PREFIXES = ("NCCL_",)

_NVIDIA_DEV_RE = re.compile(r"^/dev/nvidia(\d+)$")
_UVERBS_DEV_RE = re.compile(r"^/dev/infiniband/uverbs(\d+)$")


@dataclass
class ThreadInfo:
    """One thread (``task/<tid>``) of a process: its name and allowed CPUs."""

    tid: int
    name: str | None
    cpus_allowed: tuple[int, ...] | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "tid": self.tid,
            "name": self.name,
            "cpus_allowed": list(self.cpus_allowed) if self.cpus_allowed is not None else None,
        }


@dataclass
class ProcessInfo:
    """What ``/proc`` says about one process, already redacted.

    ``error`` is set ("vanished", "permission denied: <file>", "bad input: <reason>") when the
    process could not be read at all; other fields are then mostly empty. ``unreadable`` maps a
    source (``numa_maps``, ``environ``, ``fd``, ``task``...) that could not be read while the rest
    could, to why. ``env`` holds only the variables in :data:`ENV_KEEP` and ``NCCL_*`` (secret-looking
    names redacted). ``nvidia_devices`` are the N of open ``/dev/nvidiaN``; ``uverbs`` maps the N of
    open ``/dev/infiniband/uverbsN`` to its RDMA device name (``mlx5_0``) or None when sysfs does
    not say. ``nvml_gpus`` are NVML GPU indices with a context of this pid (None: NVML not asked).
    """

    pid: int
    comm: str | None = None
    cmdline: list[str] = field(default_factory=list)
    state: str | None = None
    tgid: int | None = None
    ppid: int | None = None
    kernel_thread: bool = False
    cpus_allowed: tuple[int, ...] | None = None
    mems_allowed: tuple[int, ...] | None = None
    vm_rss_bytes: int | None = None
    numa_maps: NumaMaps | None = None
    env: dict[str, str] = field(default_factory=dict)
    nvidia_devices: tuple[int, ...] = ()
    uverbs: dict[int, str | None] = field(default_factory=dict)
    nvml_gpus: tuple[int, ...] | None = None
    threads: list[ThreadInfo] = field(default_factory=list)
    error: str | None = None
    unreadable: dict[str, str] = field(default_factory=dict)
    source: str = "/proc"

    def as_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "comm": self.comm,
            "cmdline": list(self.cmdline),
            "state": self.state,
            "tgid": self.tgid,
            "ppid": self.ppid,
            "kernel_thread": self.kernel_thread,
            "cpus_allowed": list(self.cpus_allowed) if self.cpus_allowed is not None else None,
            "mems_allowed": list(self.mems_allowed) if self.mems_allowed is not None else None,
            "vm_rss_bytes": self.vm_rss_bytes,
            "numa_maps": self.numa_maps.as_dict() if self.numa_maps is not None else None,
            "env": dict(self.env),
            "nvidia_devices": list(self.nvidia_devices),
            "uverbs": {str(k): v for k, v in sorted(self.uverbs.items())},
            "nvml_gpus": list(self.nvml_gpus) if self.nvml_gpus is not None else None,
            "threads": [t.as_dict() for t in self.threads],
            "error": self.error,
            "unreadable": dict(self.unreadable),
            "source": self.source,
        }


class _Vanished(Exception):
    pass


def _read_bytes(path: str) -> bytes:
    from clusterdoctor.observe.limits import max_input_bytes, read_bounded

    return read_bounded(path, max_input_bytes())


def _why(e: OSError) -> str:
    if isinstance(e, PermissionError):
        return "permission denied"
    return e.strerror or type(e).__name__


def _optional(pid_dir: str, rel: str, unreadable: dict[str, str]) -> bytes | None:
    """Read ``pid_dir/rel``; None (recorded in ``unreadable``) if it cannot be read.

    Raises :class:`_Vanished` when the process directory itself is gone (the process exited).
    """
    try:
        return _read_bytes(f"{pid_dir}/{rel}")
    except (FileNotFoundError, ProcessLookupError):
        if not os.path.isdir(pid_dir):
            raise _Vanished() from None
        unreadable[rel] = "missing"
    except OSError as e:
        if e.errno == errno.ESRCH:  # the task is exiting
            raise _Vanished() from None
        unreadable[rel] = _why(e)
    return None


def _select_env(raw: bytes) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        name_b, eq, value_b = entry.partition(b"=")
        if not eq:
            continue
        name = name_b.decode("utf-8", "replace")
        if name in ENV_KEEP or name.startswith(ENV_KEEP_PREFIXES):
            env[name] = value_b.decode("utf-8", "replace")
    return redact_env(env)


def _open_devices(pid_dir: str, unreadable: dict[str, str]) -> tuple[list[int], list[int]]:
    gpus: set[int] = set()
    verbs: set[int] = set()
    fd_dir = f"{pid_dir}/fd"
    try:
        names = os.listdir(fd_dir)
    except (FileNotFoundError, ProcessLookupError):
        if not os.path.isdir(pid_dir):
            raise _Vanished() from None
        unreadable["fd"] = "missing"
        return [], []
    except OSError as e:
        unreadable["fd"] = _why(e)
        return [], []
    for name in names:
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue  # closed meanwhile
        if not target.startswith("/dev/"):
            continue
        m = _NVIDIA_DEV_RE.match(target)
        if m:
            gpus.add(int(m.group(1)))
            continue
        m = _UVERBS_DEV_RE.match(target)
        if m:
            verbs.add(int(m.group(1)))
    return sorted(gpus), sorted(verbs)


def uverbs_ibdev(index: int, sysfs_root: str = "/") -> str | None:
    """The RDMA device (``mlx5_0``) behind ``/dev/infiniband/uverbs<index>``, from sysfs; None if unknown."""
    p = os.path.join(sysfs_root, "sys/class/infiniband_verbs", f"uverbs{index}", "ibdev")
    try:
        from clusterdoctor.observe.limits import read_bounded

        name = read_bounded(p, 4096, prefix=True).decode("utf-8", "replace").strip()
    except (OSError, InputError):
        return None
    return name or None


def _collect_threads(pid_dir: str, unreadable: dict[str, str]) -> list[ThreadInfo]:
    task_dir = f"{pid_dir}/task"
    try:
        tids = sorted(int(t) for t in os.listdir(task_dir) if t.isdigit())
    except (FileNotFoundError, ProcessLookupError):
        if not os.path.isdir(pid_dir):
            raise _Vanished() from None
        unreadable["task"] = "missing"
        return []
    except OSError as e:
        unreadable["task"] = _why(e)
        return []
    threads = []
    for tid in tids:
        try:
            st = parse_status(_read_bytes(f"{task_dir}/{tid}/status"), f"{task_dir}/{tid}/status")
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread exited meanwhile: normal
        except OSError as e:
            unreadable[f"task/{tid}/status"] = _why(e)
            continue
        except InputError as e:
            unreadable[f"task/{tid}/status"] = f"bad input: {e.reason}"
            continue
        threads.append(ThreadInfo(tid, st.get("Name"), st.get("Cpus_allowed_list")))
    return threads


def collect_process(
    pid: int,
    proc_root: str = "/proc",
    *,
    threads: bool = True,
    sysfs_root: str = "/",
    environ: bool = True,
    fds: bool = True,
) -> ProcessInfo:
    """Read one process from ``proc_root/<pid>``; never raises for a vanished or unreadable process.

    ``error`` is "vanished" when the process exits before or during the scan, "permission denied:
    status" when its status cannot be read, "bad input: ..." when status/numa_maps are not what
    the kernel writes. numa_maps, environ, fds or threads that cannot be read while status can are
    listed in ``unreadable`` (numa_maps of another user's process needs ptrace access).
    """
    pid_dir = f"{proc_root.rstrip('/') or '/'}/{pid}"
    info = ProcessInfo(pid=pid, source=proc_root)
    unreadable = info.unreadable
    try:
        try:
            status_raw = _read_bytes(f"{pid_dir}/status")
        except (FileNotFoundError, ProcessLookupError):
            raise _Vanished() from None
        except PermissionError:
            info.error = "permission denied: status"
            return info
        except OSError as e:
            if e.errno == errno.ESRCH:
                raise _Vanished() from None
            info.error = f"{_why(e)}: status"
            return info
        st = parse_status(status_raw, f"{pid_dir}/status")
        info.comm = st.get("Name")
        info.state = st.get("State")
        info.tgid = st.get("Tgid")
        info.ppid = st.get("PPid")
        info.cpus_allowed = st.get("Cpus_allowed_list")
        info.mems_allowed = st.get("Mems_allowed_list")
        info.vm_rss_bytes = st.get("VmRSS")
        kthread = st.get("Kthread")
        if kthread is not None:
            info.kernel_thread = bool(kthread)
        else:  # older kernels: no memory fields and not a zombie
            info.kernel_thread = "VmRSS" not in st and not (info.state or "").startswith("Z")

        comm = _optional(pid_dir, "comm", unreadable)
        if comm is not None:
            info.comm = comm.decode("utf-8", "replace").rstrip("\n")
        if info.kernel_thread:  # no address space: no cmdline, memory map, environment or fds
            info.numa_maps = NumaMaps()
            if threads:
                info.threads = _collect_threads(pid_dir, unreadable)
            return info
        cmd = _optional(pid_dir, "cmdline", unreadable)
        if cmd:
            info.cmdline = redact_cmdline(
                a.decode("utf-8", "replace") for a in cmd.rstrip(b"\0").split(b"\0")
            )
        nm = _optional(pid_dir, "numa_maps", unreadable)
        if nm is not None:
            info.numa_maps = parse_numa_maps(nm, f"{pid_dir}/numa_maps")
        if environ:
            env_raw = _optional(pid_dir, "environ", unreadable)
            if env_raw:
                info.env = _select_env(env_raw)
        if fds:
            gpus, verbs = _open_devices(pid_dir, unreadable)
            info.nvidia_devices = tuple(gpus)
            info.uverbs = {v: uverbs_ibdev(v, sysfs_root) for v in verbs}
        if threads:
            info.threads = _collect_threads(pid_dir, unreadable)
        if not os.path.isdir(pid_dir):
            raise _Vanished()
    except _Vanished:
        return ProcessInfo(pid=pid, comm=info.comm, error="vanished", source=proc_root)
    except InputError as e:
        info.error = f"bad input: {e.one_line()}"
    return info


def collect_processes(
    pids: Iterable[int],
    proc_root: str = "/proc",
    *,
    threads: bool = True,
    sysfs_root: str = "/",
    nvml: bool = True,
) -> list[ProcessInfo]:
    """:func:`collect_process` for each pid, plus the NVML GPU list of each when NVML is present."""
    infos = [collect_process(p, proc_root, threads=threads, sysfs_root=sysfs_root) for p in pids]
    if nvml:
        from clusterdoctor.observe.node.nvml import gpu_processes

        by_pid = gpu_processes()
        if by_pid:
            for info in infos:
                info.nvml_gpus = tuple(sorted(set(by_pid.get(info.pid, ()))))
    return infos


def list_pids(proc_root: str = "/proc") -> list[int]:
    """The numeric entries of ``proc_root`` (processes), sorted; [] when it cannot be listed."""
    try:
        names = os.listdir(proc_root)
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isascii() and n.isdigit())


def find_pids(regex: str, proc_root: str = "/proc", *, exclude_self: bool = True) -> list[int]:
    """Pids whose comm or command line (arguments joined by spaces) matches ``regex`` (re.search).

    With ``exclude_self``: never this process or the ones above it (the shell, ``timeout``, ``make``
    that started it; live ``/proc`` only), a clusterdoctor process, or a wrapper that only waits for
    its child (:data:`WRAPPERS`: ``timeout 60 python train.py`` selects the python). Raises UsageError
    for a bad regex.
    """
    try:
        pattern = re.compile(regex)
    except re.error as e:
        raise UsageError(f"bad process regex {regex!r}: {e}") from None
    live = os.path.realpath(proc_root) == "/proc"
    mine = _self_and_ancestors(proc_root) if exclude_self and live else set()
    out = []
    for pid in list_pids(proc_root):
        if pid in mine:
            continue
        base = f"{proc_root}/{pid}"
        try:
            comm = _read_bytes(f"{base}/comm").decode("utf-8", "replace").rstrip("\n")
            raw = _read_bytes(f"{base}/cmdline")
        except OSError:
            continue
        argv = [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")] if raw else []
        if exclude_self and (comm in WRAPPERS or _is_clusterdoctor(argv)):
            continue  # `timeout 60 python train.py`: the python is checked, not the timeout around it
        if pattern.search(comm) or (argv and pattern.search(" ".join(argv))):
            out.append(pid)
    return out


# Programs that only run another program and wait for it: never the process a --match means.
WRAPPERS = frozenset({"timeout", "nice", "ionice", "nohup", "setsid", "stdbuf", "env", "time", "sudo", "su", "runuser", "chrt", "prlimit", "flock", "xargs"})  # fmt: skip


def _is_clusterdoctor(argv: list[str]) -> bool:
    """A clusterdoctor process (its own checks, an agent, a test run of it): not a workload."""
    if not argv:
        return False
    prog = os.path.basename(argv[0])
    if prog == "clusterdoctor":
        return True
    if prog.startswith("python") and len(argv) > 2 and argv[1] == "-m":
        return argv[2].split(".")[0] == "clusterdoctor"
    return prog.startswith("python") and len(argv) > 1 and os.path.basename(argv[1]) == "clusterdoctor"


def _self_and_ancestors(proc_root: str) -> set[int]:
    """This process and every process above it (the shell, ``timeout``, ``make`` that started it)."""
    out: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = _read_bytes(f"{proc_root}/{pid}/stat").decode("utf-8", "replace")
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out
