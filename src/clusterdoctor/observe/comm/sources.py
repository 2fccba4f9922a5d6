"""Communication inputs by content: NCCL logs, nccl-tests output, Kineto traces, Flight Recorder, ncu CSV.

:func:`sniff_comm` tells ``clusterdoctor diagnose`` (via :mod:`clusterdoctor.observe.detect`) whether a
file is one of them; :func:`discover_comm_inputs` walks the files and directories a user gave (the one
place that walks directories, so that other analyses reuse it) and sorts each file into recognised,
with its kinds, or unrecognised, with the reason; :func:`load_comm_observations` loads the recognised
files into observation kinds, each a list so that many files (one per rank) accumulate:

``kineto`` (:class:`~clusterdoctor.observe.comm.kineto.KinetoTrace`), ``nccl_log``
(:class:`~clusterdoctor.observe.comm.nccl_log.NcclLog`: NCCL debug output and PyTorch distributed
errors, behind any launcher prefix), ``nccl_tests`` (:class:`~clusterdoctor.observe.comm.nccl_tests.NcclTestsRun`),
``flight_recorder`` (dumps and ``torchfrtrace`` reports), ``ncu``
(:class:`~clusterdoctor.observe.comm.ncu.NcuReport`), ``train_log``
(:class:`~clusterdoctor.observe.comm.train_log.TrainLog`: training progress lines), ``py_traceback``
(:class:`~clusterdoctor.observe.comm.pytraceback.TracebackLog`), ``comm`` (the paths read), ``unrecognised``
(``(path, reason)`` of every file that was skipped) and ``warnings``. A file may yield two kinds: an
nccl-tests run with ``NCCL_DEBUG=INFO`` is both an NCCL log and an nccl-tests result.

An incident folder holds unrelated files: each unrecognised or unreadable file is listed with its reason
and the others are read; only when nothing at all is recognised does loading fail (InputError naming
what was given).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from clusterdoctor.errors import InputError

HEAD_BYTES = 64 << 10
PROGRESS_BYTES = 4 << 20  # progress bars are looked for in a log's first 4 MiB
KINDS = (
    "kineto",
    "nccl_log",
    "nccl_tests",
    "flight_recorder",
    "ncu",
    "train_log",
    "py_traceback",
    "python_packages",
    "p2p_test",
    "launcher_log",
    "torch_env",
    "net_ifaces",
    "nccl_env",
)
WHAT = (
    "NCCL log, PyTorch distributed log, nccl-tests output, Kineto trace, Flight Recorder dump, ncu CSV or "
    "training progress log"
)
_JSON_CHECK_CHARS = 4096  # a JSON document is told from a log whose first line starts with "[" by this much


class InputFile(NamedTuple):
    """One file found under what the user gave: its kinds (empty when unrecognised) and why not."""

    path: str
    kinds: tuple[str, ...]
    reason: str | None = None  # set when kinds is empty


def classify(head: bytes, name: str) -> list[str]:
    """Which comm kinds a file holds, judged from its first bytes and name (empty: none).

    Each parser module is imported only when the file may be of its kind. A file that starts with
    ``{`` or ``[`` is JSON only if its start parses as JSON: ``[rank0]:``, ``[default0]:`` and
    ``[2024-05-01 10:00:00,123] [INFO]`` are launcher prefixes of a log.
    """
    if head[:2] == b"\x1f\x8b" or (head.lstrip()[:1] in (b"{", b"[") and looks_like_json(head)):
        from clusterdoctor.observe.comm.kineto import sniff_kineto

        if sniff_kineto(head):
            return ["kineto"]
        from clusterdoctor.observe.comm.flight_recorder import sniff_flight_recorder

        return ["flight_recorder"] if sniff_flight_recorder(head, name) else []
    if head[:1] == b"\x80":
        from clusterdoctor.observe.comm.flight_recorder import sniff_flight_recorder

        return ["flight_recorder"] if sniff_flight_recorder(head, name) else []
    from clusterdoctor.observe.comm.flight_recorder import sniff_flight_recorder
    from clusterdoctor.observe.comm.nccl_log import sniff_nccl_log
    from clusterdoctor.observe.comm.nccl_tests import sniff_nccl_tests
    from clusterdoctor.observe.comm.ncu import sniff_ncu

    if sniff_ncu(head):
        return ["ncu"]
    if sniff_flight_recorder(head, name):
        return ["flight_recorder"]
    from clusterdoctor.observe.comm.pytraceback import sniff_tracebacks
    from clusterdoctor.observe.comm.train_log import sniff_train_log

    kinds = []
    if sniff_nccl_log(head):
        kinds.append("nccl_log")
    if sniff_nccl_tests(head):
        kinds.append("nccl_tests")
    if sniff_train_log(head):
        kinds.append("train_log")
    if sniff_tracebacks(head):
        kinds.append("py_traceback")
    if not kinds:
        from clusterdoctor.observe.comm.collect_env import sniff_collect_env

        if sniff_collect_env(head):  # python -m torch.utils.collect_env
            return ["torch_env"]
        from clusterdoctor.observe.comm.ifaces import sniff_ifaces

        if sniff_ifaces(head) and not _other_listing(
            head
        ):  # ip addr / ifconfig: what NCCL_SOCKET_IFNAME can match
            return ["net_ifaces"]
        from clusterdoctor.observe.comm.env_listing import sniff_env_listing

        if sniff_env_listing(head):  # env | grep NCCL, /etc/nccl.conf
            return ["nccl_env"]
        from clusterdoctor.observe.comm.pip_freeze import sniff_packages

        if sniff_packages(head):  # pip freeze / pip list of a node: its NCCL and torch versions
            kinds.append("python_packages")
        from clusterdoctor.observe.comm.p2p_test import sniff_p2p_test

        if sniff_p2p_test(head):  # the CUDA samples' p2pBandwidthLatencyTest
            kinds.append("p2p_test")
    if not kinds:
        from clusterdoctor.observe.comm.launcher import sniff_launcher_log

        # torchrun / srun / DeepSpeed launcher lines and nothing else of ours; a paste that the GPU, RDMA
        # or log readers claim (an srun job's kernel log) stays theirs
        if sniff_launcher_log(head) and not _other_listing(head) and not _other_reader(head, name):
            kinds.append("launcher_log")
    return kinds


# JSON tokens, for telling a JSON document from a log line that starts with "[" (json.loads cannot
# judge a 64 KiB head of a larger file: it is cut in the middle of a value).
_TOKEN = re.compile(
    r'\s*(?:(?P<s>"(?:[^"\\\x00-\x1f]|\\.)*")|(?P<n>-?\d+(?:\.\d*)?(?:[eE][-+]?\d*)?)'
    r"|(?P<lit>true|false|null)|(?P<p>[{}\[\]:,]))"
)
_PARTIAL_TAIL = re.compile(
    r'\s*+(?:"(?:[^"\\\x00-\x1f]|\\.)*+\\?|-?[\d.eE+-]*|t(?:r(?:u)?)?|f(?:a(?:l(?:s)?)?)?|n(?:u(?:l)?)?)\s*'
)  # possessive: leading and string spaces are never given back to the trailing \s* (quadratic)


def looks_like_json(head: bytes) -> bool:
    """Whether ``head`` (a whole file, or the first bytes of one) is JSON, or a prefix of a JSON document.

    The first few KiB are checked token by token against JSON's grammar (objects, arrays, strings,
    numbers, literals); text cut in the middle of a token at the end of the head is accepted.
    """
    text = head[: _JSON_CHECK_CHARS * 4].decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    complete = len(head) < HEAD_BYTES and len(text) <= _JSON_CHECK_CHARS
    if complete:
        try:
            json.loads(text)
            return True
        except ValueError:
            return False
    text = text[:_JSON_CHECK_CHARS]
    return _json_prefix(text)


def _json_prefix(text: str) -> bool:
    stack: list[str] = []  # "{" or "["
    expect = "value"  # value | key | colon | sep (comma or close) | key_or_close | value_or_close | end
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            rest = text[pos:]
            if not rest.strip():
                break
            return expect not in ("colon", "sep", "end") and _PARTIAL_TAIL.fullmatch(rest) is not None
        pos = m.end()
        kind = m.lastgroup
        tok = m.group(kind) if kind else ""
        if kind == "p":
            if tok in "{[":
                if expect not in ("value", "value_or_close"):
                    return False
                stack.append(tok)
                expect = "key_or_close" if tok == "{" else "value_or_close"
            elif tok in "}]":
                want = "{" if tok == "}" else "["
                if not stack or stack[-1] != want or expect not in ("sep", "key_or_close", "value_or_close"):
                    return False
                stack.pop()
                expect = "sep" if stack else "end"
            elif tok == ":":
                if expect != "colon":
                    return False
                expect = "value"
            else:  # ","
                if expect != "sep" or not stack:
                    return False
                expect = "key" if stack[-1] == "{" else "value"
        else:
            if expect in ("key", "key_or_close"):
                if kind != "s":
                    return False
                expect = "colon"
            elif expect in ("value", "value_or_close"):
                expect = "sep" if stack else "end"
            else:
                return False
    return bool(stack) or expect == "end"


def _other_listing(head: bytes) -> bool:
    """A paste that an RDMA listing reader claims (ibdev2netdev beside ifconfig in one session): left to it."""
    from clusterdoctor.observe.network.ibports import sniff_ib_listing

    return bool(sniff_ib_listing(head))


def _other_reader(head: bytes, name: str) -> bool:
    """A paste that the GPU-health or the log reader (kernel, kubelet, etcd lines) claims."""
    from clusterdoctor.observe.event_sources import sniff_events
    from clusterdoctor.observe.gpu.load import sniff_gpu

    return bool(sniff_gpu(head, name) or sniff_events(head, name))


def sniff_comm(head: bytes, name: str = "") -> bool:
    """Whether a file is a communication input this module can load."""
    return bool(classify(head, name))


def why_unrecognised(head: bytes) -> str:
    """A short reason why a file is not a communication input, for the report's warnings."""
    if not head:
        return "empty file"
    if head[:2] == b"\x1f\x8b":
        return "gzip data that is not a Kineto trace"
    if head[:1] == b"\x80":
        return "a pickle that is not a Flight Recorder dump"
    if head.lstrip()[:1] in (b"{", b"[") and looks_like_json(head):
        return "JSON, but not a Kineto trace or Flight Recorder dump"
    sample = head[:4096]
    if b"\x00" in sample or sum(b < 9 or 13 < b < 32 for b in sample) > len(sample) // 10:
        return "binary data"
    return "text without NCCL, PyTorch distributed, nccl-tests or ncu lines"


def _load_file(p: str, kinds: Iterable[str], out: dict[str, list[Any]]) -> None:
    kinds = list(kinds)
    loaded: dict[str, Any] = {}
    for kind in kinds:
        if kind == "kineto":
            from clusterdoctor.observe.comm.kineto import load_kineto

            loaded[kind] = load_kineto(p)
        elif kind == "nccl_log":
            from clusterdoctor.observe.comm.nccl_log import load_nccl_log

            loaded[kind] = load_nccl_log(p)
        elif kind == "nccl_tests":
            from clusterdoctor.observe.comm.nccl_tests import load_nccl_tests

            try:
                loaded[kind] = load_nccl_tests(p)
            except InputError:
                if "nccl_log" in kinds:
                    continue  # a log that mentions nccl-tests headers but holds no rows
                raise
        elif kind == "flight_recorder":
            from clusterdoctor.observe.comm.flight_recorder import load_flight_recorder

            loaded[kind] = load_flight_recorder(p)
        elif kind == "ncu":
            from clusterdoctor.observe.comm.ncu import load_ncu_csv

            loaded[kind] = load_ncu_csv(p)
        elif kind == "train_log":
            from clusterdoctor.observe.comm.train_log import load_train_log

            loaded[kind] = load_train_log(p)
        elif kind == "py_traceback":
            from clusterdoctor.observe.comm.pytraceback import load_tracebacks

            loaded[kind] = load_tracebacks(p)
        elif kind == "python_packages":
            from clusterdoctor.observe.comm.pip_freeze import load_packages

            loaded[kind] = load_packages(p)
        elif kind == "p2p_test":
            from clusterdoctor.observe.comm.p2p_test import load_p2p_test

            loaded[kind] = load_p2p_test(p)
        elif kind == "torch_env":
            from clusterdoctor.observe.comm.collect_env import load_collect_env

            env = load_collect_env(p)
            loaded[kind] = env
            if env.packages is not None:  # its [pip3] lines: the NCCL wheel of this node
                loaded["python_packages"] = env.packages
        elif kind == "net_ifaces":
            from clusterdoctor.observe.comm.ifaces import load_ifaces

            loaded[kind] = load_ifaces(p)
        elif kind == "nccl_env":
            from clusterdoctor.observe.comm.env_listing import load_env_listing

            loaded[kind] = load_env_listing(p)
        elif kind == "launcher_log":
            from clusterdoctor.observe.comm.launcher import load_launcher_log

            loaded[kind] = load_launcher_log(p)
    # Only a file whose every kind loaded contributes (no half-read file).
    for kind, value in loaded.items():
        out[kind].append(value)
        out["warnings"].extend(getattr(value, "warnings", []))
    if "nccl_log" in loaded:  # what the ranks were busy with (progress bars), for the hang rules
        from clusterdoctor.observe.comm.progress import scan_progress
        from clusterdoctor.observe.limits import read_head

        bars = scan_progress(read_head(p, PROGRESS_BYTES).decode("utf-8", "replace"), p)
        if bars:
            out.setdefault("rank_progress", []).extend(bars)
    t = loaded.get("kineto")
    if t is not None and (t.truncated or t.events_read == 0):
        # analysed, but the CLI's exit code says the input was cut or empty
        why = "truncated" if t.truncated else "holds no events"
        out.setdefault("incomplete_inputs", []).append(f"{p}: {why}")
    out["comm"].append(p)


TOML_DOCUMENT = "a TOML document (settings or metadata, such as an incident case's case.toml), not a log"
_TOML_BYTES = 1 << 20


def is_toml_document(p: str | os.PathLike[str]) -> bool:
    """A ``*.toml`` file that parses as TOML with at least one key: settings or metadata, never read as
    a log, even where its strings quote log lines (an incident case's ``cause_quote``). A log that is
    merely named ``.toml`` does not parse, and is read as usual."""
    if not os.fspath(p).lower().endswith(".toml"):
        return False
    import tomllib

    from clusterdoctor.observe import limits

    try:
        raw = limits.read_head(p, _TOML_BYTES + 1)
        if len(raw) > _TOML_BYTES:
            return False
        return bool(tomllib.loads(raw.decode("utf-8")))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, InputError):
        return False


def _head(p: str) -> bytes:
    from clusterdoctor.observe.limits import read_head

    return read_head(p, HEAD_BYTES)


def files_under(d: str) -> list[str]:
    """Every file under directory ``d``, recursively, in path order (pathlib is not imported: the
    whole-process cost of a small analysis is mostly imports)."""
    found = []
    for root, dirs, files in os.walk(d):
        dirs.sort()
        paths = (os.path.join(root, f) for f in files)
        found.extend(f for f in paths if os.path.isfile(f))
    return sorted(found, key=lambda f: f.split(os.sep))


def discover_comm_inputs(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> list[InputFile]:
    """Every file given or found under a given directory (recursively), with its comm kinds.

    Never raises for one bad file: a missing path, an unreadable file or an unknown format is an
    :class:`InputFile` with no kinds and the reason. The order is the order given, each directory's
    files in path order.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[InputFile] = []
    seen: set[str] = set()
    for path in paths:
        p = os.fspath(path)
        if not os.path.exists(p):
            out.append(InputFile(p, (), "no such file or directory"))
            continue
        for f in files_under(p) if os.path.isdir(p) else [p]:
            key = os.path.realpath(f)
            if key in seen:
                continue  # the same file given twice (a file and its folder)
            seen.add(key)
            if is_toml_document(f):
                out.append(InputFile(f, (), TOML_DOCUMENT))
                continue
            try:
                head = _head(f)
            except InputError as e:
                out.append(InputFile(f, (), e.reason))
                continue
            kinds = tuple(classify(head, os.path.basename(f)))
            out.append(InputFile(f, kinds, None if kinds else why_unrecognised(head)))
    return out


def load_comm_observations(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> dict[str, Any]:
    """Load files and directories (searched recursively) of communication inputs, by content.

    Files that are not communication inputs, or that fail to load, are skipped and listed in
    ``unrecognised`` and ``warnings`` with the reason. Raises InputError only when no file could be
    used: for a single file, its own problem; otherwise one line naming what was given.
    """
    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    inputs = discover_comm_inputs(given)
    out, problems = load_comm_inputs(inputs)
    return finish_comm_observations(out, problems, inputs, given)


def empty_observations() -> dict[str, list[Any]]:
    return {k: [] for k in (*KINDS, "comm", "unrecognised", "warnings")}


def load_comm_inputs(inputs: Iterable[InputFile]) -> tuple[dict[str, list[Any]], list[InputError]]:
    """Load the recognised files of ``inputs`` (in order): the observation lists, and each file's problem."""
    out = empty_observations()
    problems: list[InputError] = []
    for item in inputs:
        if not item.kinds:
            problems.append(InputError(item.reason or "not recognised", item.path))
            continue
        try:
            _load_file(item.path, item.kinds, out)
        except InputError as e:
            problems.append(e.with_path(item.path))
    return out, problems


def finish_comm_observations(
    out: dict[str, list[Any]],
    problems: list[InputError],
    inputs: list[InputFile],
    given: list[str | os.PathLike[str]],
) -> dict[str, Any]:
    """What :func:`load_comm_observations` returns from loaded lists (also loaded in parallel, see
    :mod:`clusterdoctor.observe.comm.parallel`): skipped files listed, InputError when none was used."""
    for e in problems:
        out["unrecognised"].append((e.path, e.reason))
        out["warnings"].append(f"{e.path}: {e.reason}; skipped")
    if not out["comm"]:
        if len(inputs) == 1 and problems and not os.path.isdir(os.fspath(given[0])):
            e = problems[0]
            if e.reason.startswith(("text without", "binary", "empty", "JSON,", "gzip", "a pickle")):
                raise InputError(f"not a communication input ({e.reason}): expected an {WHAT}", e.path)
            raise e
        names = ", ".join(os.fspath(p) for p in given[:3]) + (
            f" and {len(given) - 3} more" if len(given) > 3 else ""
        )
        if not inputs:
            raise InputError(f"no {WHAT} found: the folder holds no files", names)
        shown = "; ".join(f"{os.path.basename(e.path or '')}: {e.reason}" for e in problems[:2])
        more = f"; {len(problems) - 2} more" if len(problems) > 2 else ""
        raise InputError(f"no {WHAT} found ({len(inputs)} file(s) looked at: {shown}{more})", names)
    return {k: v for k, v in out.items() if v}
