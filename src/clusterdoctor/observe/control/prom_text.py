"""Prometheus text exposition (0.0.4) and OpenMetrics 1.0 parser.

:func:`parse_prom_text` turns a ``/metrics`` body (a live scrape, ``kubectl get --raw /metrics``
output, a grep'd excerpt) into a :class:`MetricSet`: every sample as a :class:`PromSample`
``(name, labels, value, timestamp)``, the metric families with their TYPE/HELP/UNIT, exemplars,
and helpers that group ``_bucket``/``_sum``/``_count`` rows into
:class:`clusterdoctor.model.Histogram` objects.

Speed: a plain text-format file (canonical label sets ``k="v",k2="v2"``, no escapes, exemplars
or odd spacing — what exporters write) is read by one regex pass (``re.findall``, in C) that splits
each line into name, label body and the rest, then column by column with C-level loops: all label
bodies are split on ``"`` at once, each distinct label-name list is validated once, and samples are
built with ``map``/``zip`` instead of a Python loop per line. Anything else goes through a per-line
loop; the lines its fast pattern refuses are read by a careful character-level parser (quoted UTF-8
names, odd spacing), which either reads them or records a warning with the line number. Both paths
give the same result (tested on real dumps and line-level mutations of them). Garbled or truncated
lines are skipped with a warning; :class:`~clusterdoctor.errors.InputError` is raised only when
nothing valid is left or the input is not an exposition at all.

Timestamps are returned in seconds: the text format writes milliseconds, OpenMetrics seconds.

This module is the parser; the records it returns (:class:`MetricSet` and its lookups, the
histogram grouping) are :mod:`clusterdoctor.observe.control.prom_metrics`, re-exported here.
"""

from __future__ import annotations

import gc
import math
import re
from collections.abc import Iterable
from itertools import accumulate, chain, compress, repeat, tee
from operator import itemgetter, not_, truediv
from sys import intern

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.prom_metrics import (  # the parsed records, re-exported
    Exemplar,
    Family,
    Labels,
    MetricSet,
    PromSample,
)
from clusterdoctor.observe.control.prom_metrics import histograms_from_samples as histograms_from_samples
from clusterdoctor.observe.control.prom_metrics import iter_series_keys as iter_series_keys

__all__ = [
    "Exemplar",
    "Family",
    "MetricSet",
    "PromSample",
    "parse_prom_text",
    "sniff_prom_text",
]

_TYPES = frozenset(
    {"counter", "gauge", "histogram", "summary", "untyped", "unknown", "gaugehistogram", "stateset", "info"}
)


# ---------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LNAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_QSTR = r'"(?:[^"\\\n]|\\.)*"'
_QSTR_P = r'"(?:[^"\\\n]|\\.)*+"'  # possessive: whitespace is never given back (linear on any line)
_LABELBODY = rf"(?:[^\"}}\n]|{_QSTR})*"
_TOKEN = r"[^ \t\n#]+"

# One alternative per line kind: a sample (fast path), a comment, anything else (slow path).
# The fast path takes label sets without "}" inside and no exemplar; anything it refuses is
# re-read by _slow_sample, so a "}" inside a quoted value or an exemplar costs speed, not correctness.
# Compiled on first use (~8 ms to compile, most of the module's import): the real dumps are read by
# the bulk pattern below and never need it (issue 26: whole-process time).
_LINE_SRC = (
    rf"^(?:({_NAME})(?:\{{([^}}\n]*)\}})?[ \t]+({_TOKEN})(?:[ \t]+({_TOKEN}))?[ \t]*|(#[^\n]*)|([^\n]*))$"
)
_LINE_RE: re.Pattern[str] | None = None
# The plain-file pattern tried first (see _bulk_parse): name, label body, and the rest of a sample
# line after one space (value and optional timestamp), or a comment, or anything else.
_BULK_LINE_RE = re.compile(
    rf"^(?:({_NAME})(?:\{{([^}}\n]*)\}})?( [^\n]*)|(#[^\n]*)|([^\n]*))$",
    re.MULTILINE,
)
# A label body with every value emptied (k="",k2=""): the shape of a canonical body (k="v",k2="v2").
_EMPTIED_PAIR = rf'{_LNAME}=""'
_BODY_SHAPE_RE = re.compile(rf"{_EMPTIED_PAIR}(?:,{_EMPTIED_PAIR})*")
_TAIL_PAIR_RE = re.compile(  # from the start of the spaces, else of the name (past its digits): linear
    rf"(?:(?<![ \t])[ \t]++|(?<![a-zA-Z0-9_ \t])[0-9]*+)({_LNAME})=\"([^\"\\\n]*+)\""
)
_LABELS_FULL_RE = re.compile(
    rf"(?:[ \t]*+{_LNAME}[ \t]*+=[ \t]*+{_QSTR_P}[ \t]*+,)*+(?:[ \t]*+{_LNAME}[ \t]*+=[ \t]*+{_QSTR_P})?[ \t]*+(?:,[ \t]*+)?"
)
# a name from the first non-digit of its run only (a later start ends where it did): linear
_LABEL_PAIR_RE = re.compile(rf"(?<![a-zA-Z0-9_])[0-9]*+({_LNAME})[ \t]*+=[ \t]*+\"((?:[^\"\\\n]|\\.)*+)\"")
_ESC_RE = re.compile(r"\\(.)")
_ESC_MAP = {"\\": "\\", '"': '"', "n": "\n"}
_HELP_ESC_RE = re.compile(r"\\([\\n])")
_METRIC_NAME_RE = re.compile(_NAME)
# A well-formed "# HELP name text" / "# TYPE name type" line (the text may be empty).
_META_RE = re.compile(rf"^# (HELP|TYPE) ({_NAME})(?: ([^\n]*))?$", re.MULTILINE)
_GOOD_NAME_RE = re.compile(rf"{_NAME}\Z")
# A sample line as the exposition formats define it, and nothing after it: name, labels, value, an
# optional timestamp, an optional OpenMetrics exemplar (`# {...} v`). Text after the value that is none
# of these (`IPv4  0800  ip ip4  # IP` in /etc/ethertypes) makes the line not a sample.
_SNIFF_SAMPLE_RE = re.compile(
    rf"{_NAME}(?:\{{{_LABELBODY}\}})?[ \t]+[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+"
    rf"(?:[eE][-+]?[0-9]+)?|[Ii]nf|NaN|nan)(?:[ \t]+-?[0-9]{{1,20}}(?:\.[0-9]{{1,9}})?)?"
    rf"(?:[ \t]+#[ \t]+\{{[^\n]*)?[ \t]*$"
)
# "# TYPE name type" with a type the formats define; "# HELP name text"
_SNIFF_META_RE = re.compile(
    rf"^# (?:TYPE {_NAME} (?:counter|gauge|histogram|gaugehistogram|summary|untyped|unknown|info|stateset)[ \t]*$"
    rf"|HELP {_NAME}(?: |$)|UNIT {_NAME} )"
)


def _unescape_label(v: str) -> str:
    return _ESC_RE.sub(lambda m: _ESC_MAP.get(m.group(1), "\\" + m.group(1)), v)


def _unescape_help(v: str) -> str:
    return _HELP_ESC_RE.sub(lambda m: "\\" if m.group(1) == "\\" else "\n", v)


class _BadLine(ValueError):
    pass


def _parse_labels(body: str) -> Labels:
    """Parse ``a="1",b="x\\"y"`` (the text between braces). Raises _BadLine."""
    if not body or body.isspace():
        return ()
    if _LABELS_FULL_RE.fullmatch(body) is None:
        raise _BadLine(f"malformed label set {{{body[:60]}}}")
    pairs = _LABEL_PAIR_RE.findall(body)
    if "\\" in body:
        pairs = [(k, _unescape_label(v)) for k, v in pairs]
    if len({k for k, _ in pairs}) != len(pairs):
        raise _BadLine(f"duplicate label name in {{{body[:60]}}}")
    return tuple(pairs)


def _cached_labels(body: str, cache: dict[str, Labels]) -> Labels:
    """Labels of ``body`` not found in ``cache``. Canonical bodies (``k="v",k2="v2"``, no
    backslash) are split directly; anything else goes through the validating regex. Raises _BadLine."""
    if "\\" not in body:
        parts = body.split('",')
        last = parts[-1]
        if last == "":
            parts.pop()
        elif last[-1:] == '"':
            parts[-1] = last[:-1]
        else:
            parts = []
        out = []
        for part in parts:
            k, eq, v = part.partition('="')
            if not eq or '"' in v or "\n" in v or not k.isidentifier() or not k.isascii():
                break
            out.append((k, v))
        else:
            if out and len(dict(out)) == len(out):
                return tuple(out)
    return _parse_labels(body)


def _parse_value(tok: str) -> float:
    """A sample value as Go's ParseFloat reads it (NaN, ±Inf included); no underscores."""
    if "_" in tok:
        raise _BadLine(f"invalid value {tok!r}")
    try:
        return float(tok)
    except ValueError:
        raise _BadLine(f"invalid value {tok!r}") from None


def _parse_ts(tok: str, openmetrics: bool) -> float:
    if openmetrics:
        v = _parse_value(tok)
        if not math.isfinite(v):
            raise _BadLine(f"invalid timestamp {tok!r}")
        return v
    try:
        return int(tok) / 1000.0
    except ValueError:
        # Some exporters write float milliseconds; accept them.
        v = _parse_value(tok)
        if not math.isfinite(v):
            raise _BadLine(f"invalid timestamp {tok!r}") from None
        return v / 1000.0


_LNAME_RE = re.compile(_LNAME)


def _read_quoted(s: str, i: int, n: int, unterminated: str) -> tuple[str, int]:
    """The unescaped content of the quoted string starting at ``s[i] == '"'``, and the index after it."""
    j = i + 1
    buf = []
    while j < n and s[j] != '"':
        if s[j] == "\\" and j + 1 < n:
            buf.append(_ESC_MAP.get(s[j + 1], "\\" + s[j + 1]))
            j += 2
            continue
        buf.append(s[j])
        j += 1
    if j >= n:
        raise _BadLine(unterminated)
    return "".join(buf), j + 1


def _slow_sample(line: str) -> tuple[str, Labels, str, str | None, str | None]:
    """Character-level parse of a sample line the fast pattern refused.

    Handles the UTF-8 quoted-name syntax (``{"my.metric", a="b"} 1``) and spacing variants.
    Returns ``(name, labels, value_token, ts_token, exemplar_text)``; raises _BadLine.
    """
    s = line.strip()
    i = 0
    n = len(s)
    name = ""
    labels: list[tuple[str, str]] = []
    m = _METRIC_NAME_RE.match(s)
    if m:
        name = m.group(0)
        i = m.end()
    while i < n and s[i] in " \t":
        i += 1
    if i < n and s[i] == "{":
        i += 1
        while True:
            while i < n and s[i] in " \t":
                i += 1
            if i >= n:
                raise _BadLine("unterminated label set")
            if s[i] == "}":
                i += 1
                break
            # label name, plain or quoted
            if s[i] == '"':
                key, i = _read_quoted(s, i, n, "unterminated quoted name")
            else:
                lm = _LNAME_RE.match(s, i)
                if not lm:
                    raise _BadLine(f"bad label name at column {i + 1}")
                key = lm.group(0)
                i = lm.end()
            while i < n and s[i] in " \t":
                i += 1
            if i < n and s[i] in ",}":
                # a bare quoted string is the metric name (UTF-8 syntax)
                if name:
                    raise _BadLine("metric name given twice")
                name = key
            else:
                if i >= n or s[i] != "=":
                    raise _BadLine(f"expected '=' at column {i + 1}")
                i += 1
                while i < n and s[i] in " \t":
                    i += 1
                if i >= n or s[i] != '"':
                    raise _BadLine(f"label value not quoted at column {i + 1}")
                value, i = _read_quoted(s, i, n, "unterminated label value")
                labels.append((key, value))
            while i < n and s[i] in " \t":
                i += 1
            if i < n and s[i] == ",":
                i += 1
            elif i < n and s[i] == "}":
                continue
            elif i >= n:
                raise _BadLine("unterminated label set")
            else:
                raise _BadLine(f"unexpected {s[i]!r} in label set")
    if not name:
        raise _BadLine("no metric name")
    if len({k for k, _ in labels}) != len(labels):
        raise _BadLine("duplicate label name")
    rest = s[i:]
    exemplar = None
    hash_pos = rest.find("#")
    if hash_pos >= 0:
        exemplar = rest[hash_pos + 1 :].strip()
        rest = rest[:hash_pos]
    toks = rest.split()
    if not toks or len(toks) > 2:
        raise _BadLine("expected a value and an optional timestamp")
    return name, tuple(labels), toks[0], (toks[1] if len(toks) == 2 else None), exemplar


def _canonical_pairs(joined: str) -> tuple[tuple[tuple[str, str], ...], list[int]] | None:
    """Every label pair of ``joined`` (all label bodies of a file, one per line) in order, and for
    each line the number of pairs up to and including it; None unless every body is canonical.

    Canonical: ``k="v",k2="v2"``, no backslash, no spacing, no duplicate name. Splitting on ``"`` puts the values at odd positions and the ``k=`` / ``,k=`` separators
    at even ones; the separators, rejoined with the values emptied, must have the canonical shape.
    Everything runs in C (split, slicing, one regex on the short emptied text).
    """
    if "\\" in joined:
        return None
    pieces = joined.split('"')
    values = pieces[1::2]
    if "\n" in "".join(values):
        return None  # an odd number of quotes on some line: not canonical
    seps = pieces[0::2]
    emptied = '""'.join(seps)
    # Checked once per distinct label-name list ('a="",b=""'), not once per sample; the key
    # strings of a list are shared by every sample that has it.
    shapes = emptied.split("\n")
    shape_keys: dict[str, tuple[str, ...]] = {"": ()}
    for shape in set(shapes).difference(shape_keys):
        if _BODY_SHAPE_RE.fullmatch(shape) is None:
            return None
        keys = tuple(shape.replace('=""', "").split(","))
        if len(set(keys)) != len(keys):
            return None  # duplicate label name
        shape_keys[shape] = keys
    line_keys = list(map(shape_keys.__getitem__, shapes))
    pairs = tuple(zip(chain.from_iterable(line_keys), values))
    return pairs, list(accumulate(map(len, line_keys)))


_BULK_BLOCK = 4 << 20  # characters per block of the plain-file pass: its lists stay this size


def _bulk_blocks(text: str, families: dict[str, Family]) -> tuple[list[PromSample], int] | None:
    """:func:`_bulk_parse` block by block (about _BULK_BLOCK characters, cut after a newline), so that
    its intermediate lists stay bounded by the block, not the file: peak memory is the text and the
    samples. None (``families`` emptied) when any block needs the careful loop."""
    if len(text) <= _BULK_BLOCK:
        return _bulk_parse(text, families)
    samples: list[PromSample] = []
    n_lines = 0
    start = 0
    shared: dict[object, object] = {}  # label pairs and label sets repeat from block to block
    while start < len(text):
        end = text.find("\n", start + _BULK_BLOCK)
        end = len(text) if end < 0 else end + 1
        got = _bulk_parse(text[start:end], families, shared)
        if got is None:
            families.clear()
            return None
        samples.extend(got[0])
        n_lines += got[1]
        start = end
    return samples, n_lines


def _bulk_parse(
    text: str, families: dict[str, Family], shared: dict[object, object] | None = None
) -> tuple[list[PromSample], int] | None:
    """All samples of a plain text-format file and its number of lines, built with C-level loops;
    None when any line needs the careful per-line loop (then ``families`` is left empty for it).

    Plain: every line is a comment, blank, or ``name[{canonical labels}] value[ timestamp]`` with
    single spaces. One regex splits each sample line into name, label body and the rest; values
    (and millisecond timestamps) are converted with ``map``; labels come from
    :func:`_canonical_pairs`. ``shared``: one copy of each label pair and label set, kept across the
    blocks of a large file (dumps put together repeat them; memory by what the file says).
    """
    lines = _BULK_LINE_RE.findall(text)
    if lines and text.endswith("\n") and lines[-1] == ("", "", "", "", ""):
        lines.pop()
    if not lines:
        return None
    names, bodies, rests, comments, others = zip(*lines)
    if "".join(others).strip():
        return None  # a line the plain pattern refused
    canon = _canonical_pairs("\n".join(bodies))
    if canon is None:
        return None
    pairs, line_stops = canon
    if not _bulk_metadata(comments, families):
        families.clear()
        return None
    rests_s = list(compress(rests, names))
    if "_" in "".join(rests_s):
        return None  # Go's ParseFloat takes no digit separators
    times: Iterable[float | None] = repeat(None)
    try:
        values = list(map(float, rests_s))  # " 1.5": float() ignores the leading space
    except ValueError:
        # with timestamps: exactly two tokens per line, the second integer milliseconds
        toks = list(map(str.split, rests_s))
        widths = set(map(len, toks))
        if widths == {2}:
            vals, tss = zip(*toks)
            try:
                values = list(map(float, vals))
                times = list(map(truediv, map(int, tss), repeat(1000.0)))
            except ValueError:
                return None
        elif widths == {1, 2}:  # some lines with a timestamp, some without (dumps put together)
            try:
                values = list(map(float, map(itemgetter(0), toks)))
                times = [int(t[1]) / 1000.0 if len(t) == 2 else None for t in toks]
            except ValueError:
                return None
        else:
            return None
    names_s = list(map(intern, filter(None, names)))  # one string per metric name, not per line
    stops = list(compress(line_stops, names))
    labels: Iterable[Labels] = map(pairs.__getitem__, map(slice, chain((0,), stops), stops))
    if shared is not None:
        pairs = tuple(map(shared.setdefault, pairs, pairs))
        labels = map(pairs.__getitem__, map(slice, chain((0,), stops), stops))
        one, two = tee(labels)
        labels = map(shared.setdefault, one, two)
    return list(map(tuple.__new__, repeat(PromSample), zip(names_s, labels, values, times))), len(lines)


def _bulk_metadata(comments: Iterable[str], families: dict[str, Family]) -> bool:
    """Apply the ``# HELP`` / ``# TYPE`` lines of a plain file; False when a comment needs the
    careful loop (a second TYPE, a bad name, ``# UNIT``, ``# EOF``, escaped quoted names).

    One regex reads every well-formed HELP/TYPE line; HELP and TYPE texts are gathered in dicts (the
    last HELP wins, as in the loop) and each family is built once, in order of first mention.
    """
    lines = list(filter(None, comments))
    meta = _META_RE.findall("\n".join(lines))
    if len(meta) != len(lines) and not _only_plain_comments(lines):
        return False
    if not meta:
        return True
    kws, fnames, args = zip(*meta)
    is_type = list(map("TYPE".__eq__, kws))
    type_lines = list(compress(zip(fnames, args), is_type))
    types = dict(type_lines)
    if not _TYPES.issuperset(types.values()):
        return False  # an unknown type: the careful loop warns about it
    if len(types) != len(type_lines) or any(map(families.__contains__, types)):
        # TYPE again for a family, as in dumps put together: the careful loop takes the last one and
        # warns only when two in a row are different and neither is untyped; then it must run
        last: dict[str, str] = {f: families[f].type for f in types if f in families}
        for f, typ in type_lines:
            prev = last.get(f, "untyped")
            if prev not in ("untyped", typ) and typ != "untyped":
                return False
            last[f] = typ
    helps = dict(compress(zip(fnames, args), map(not_, is_type)))
    if "\\" in "".join(helps.values()):
        helps = {k: _unescape_help(v) for k, v in helps.items()}
    order = list(dict.fromkeys(fnames))
    seen = [f for f in order if f in families]
    if seen:  # a later block of the same file: merge into what the earlier blocks read
        for f in seen:
            fam = families[f]
            if f in types:
                fam.type = types[f]
            if f in helps:
                fam.help = helps[f]
        order = [f for f in order if f not in families]
    families.update(
        zip(order, map(Family, order, map(types.get, order, repeat("untyped")), map(helps.get, order)))
    )
    return True


def _only_plain_comments(lines: list[str]) -> bool:
    """Whether every comment that is not a well-formed HELP/TYPE line is free text (not
    HELP/TYPE/UNIT/EOF, which the careful loop must see)."""
    for c in lines:
        if _META_RE.fullmatch(c) is None and (c.startswith("# ") or c.startswith("#\t")):
            parts = c[2:].split(None, 1)
            if parts and parts[0] in ("HELP", "TYPE", "UNIT", "EOF"):
                return False
    return True


def _decode(data: bytes | str, path: str | None, warnings: list[str]) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        warnings.append(f"invalid UTF-8 at byte {e.start}; undecodable bytes replaced")
        return data.decode("utf-8", errors="replace")


def parse_prom_text(data: bytes | str, path: str | None = None, openmetrics: bool | None = None) -> MetricSet:
    """Parse a Prometheus text exposition or an OpenMetrics body.

    ``openmetrics`` None: detected (a ``# EOF`` line or ``# UNIT`` metadata means OpenMetrics,
    whose timestamps are seconds; otherwise milliseconds). Skipped lines become warnings
    (``line N: reason``). Raises :class:`InputError` when no sample and no metadata line could be
    read, or the data is binary.

    The cyclic garbage collector is paused while parsing: the parser allocates thousands of
    tuples and strings that form no cycles, and each automatic collection would walk them all.
    """
    if not gc.isenabled():
        return _parse(data, path, openmetrics)
    gc.disable()
    try:
        return _parse(data, path, openmetrics)
    finally:
        gc.enable()


def _parse(data: bytes | str, path: str | None, openmetrics: bool | None) -> MetricSet:
    """The body of :func:`parse_prom_text`."""
    ms = MetricSet(path=path)
    warnings = ms.warnings
    text = _decode(data, path, warnings)
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if openmetrics is None:
        tail = text[-256:].rstrip()
        openmetrics = tail.endswith("# EOF") or "\n# UNIT " in text or text.startswith("# UNIT ")
    ms.openmetrics = openmetrics

    samples: list[PromSample] = []
    append = samples.append
    families = ms.families
    exemplars = ms.exemplars
    label_cache: dict[str, Labels] = {"": ()}
    n_meta = 0
    n_bad = 0
    eof_line = 0
    eof_warned = False
    ts_ms = not openmetrics
    lineno = 0
    raw_lines: list[str] | None = None
    if not openmetrics:
        bulk = _bulk_blocks(text, families)
        if bulk is not None:
            ms.samples, n_lines = bulk
            if not text.endswith("\n"):
                warnings.append(f"line {n_lines}: last line has no newline (file may be truncated)")
            if not ms.samples and not families:
                if not text.strip():
                    raise InputError("empty input, no metrics", path)
                raise InputError("not a Prometheus text exposition (0 unreadable lines, no samples)", path)
            return ms
    global _LINE_RE
    if _LINE_RE is None:
        _LINE_RE = re.compile(_LINE_SRC, re.MULTILINE)
    lines = _LINE_RE.findall(text)
    # A text ending with "\n" yields one extra empty match after the final newline.
    if lines and text.endswith("\n") and lines[-1] == ("", "", "", "", "", ""):
        lines.pop()
    # Fast label path: when every label body in the file is canonical, they are split at once and
    # each sample takes its slice of the pairs.
    canon_pairs = _canonical_pairs("\n".join([ln[1] for ln in lines]))
    canon = canon_pairs is not None
    pairs, _ = canon_pairs or ((), [])
    pos = 0
    new = tuple.__new__
    eof_count = -1  # number of samples read when '# EOF' was seen
    for name, lab, val, ts, comment, other in lines:
        lineno += 1
        if name:
            # Fast path: the common sample line. Anything unusual drops to the careful parser.
            if lab:
                if canon:
                    n = lab.count('"') >> 1  # canonical values hold no '"': two quotes per pair
                    labels = pairs[pos : pos + n]
                    pos += n
                    if n > 1 and len(dict(labels)) != n:
                        labels = None  # duplicate label name: the careful parser reports it
                else:
                    labels = label_cache.get(lab)
                    if labels is None:
                        try:
                            labels = label_cache[lab] = _cached_labels(lab, label_cache)
                        except _BadLine:
                            labels = None
            else:
                labels = ()
            if labels is not None and "_" not in val:
                try:
                    value = float(val)
                    if ts:
                        if "_" in ts:
                            raise ValueError(ts)
                        t = int(ts) / 1000.0 if ts_ms else float(ts)
                        if t - t != 0.0:  # NaN or ±Inf timestamp
                            raise ValueError(ts)
                    else:
                        t = None
                except ValueError:
                    pass
                else:
                    append(new(PromSample, (name, labels, value, t)))
                    continue
            if labels is not None:
                try:
                    if len(dict(labels)) != len(labels):
                        raise _BadLine(f"duplicate label name in {{{lab[:60]}}}")
                    value = _parse_value(val)
                    t = (_parse_ts(ts, False) if ts_ms else _parse_ts(ts, True)) if ts else None
                except _BadLine:
                    pass
                else:
                    append(new(PromSample, (name, labels, value, t)))
                    continue
            if raw_lines is None:
                raw_lines = text.split("\n")
            other = raw_lines[lineno - 1]
        if eof_line and (comment or other.strip()):
            if not eof_warned:
                warnings.append(f"line {lineno}: content after '# EOF' ignored")
                eof_warned = True
            continue
        if comment:
            # Fast path for the usual "# HELP name text" / "# TYPE name type" of a known-good name.
            kw = comment[:7]
            if kw == "# HELP " or kw == "# TYPE ":
                fname, sp, arg = comment[7:].partition(" ")
                fam = families.get(fname)
                if fam is None and _GOOD_NAME_RE.match(fname) is not None:
                    fam = families[fname] = Family(fname)
                if fam is not None:
                    n_meta += 1
                    if kw == "# HELP ":
                        fam.help = _unescape_help(arg) if "\\" in arg else arg
                        continue
                    if arg in _TYPES and fam.type == "untyped":
                        fam.type = arg
                        continue
                    n_meta -= 1
            if comment.startswith("# ") or comment.startswith("#\t"):
                parts = comment[2:].lstrip().split(None, 2)
                if not parts:
                    continue
                kw = parts[0]
                if kw == "EOF" and len(parts) == 1:
                    eof_line = lineno
                    eof_count = len(samples)
                    n_meta += 1
                    continue
                if kw not in ("HELP", "TYPE", "UNIT"):
                    continue
                if len(parts) < 2:
                    warnings.append(f"line {lineno}: '# {kw}' without a metric name")
                    n_bad += 1
                    continue
                fname = parts[1]
                if fname.startswith('"') and fname.endswith('"') and len(fname) >= 2:
                    fname = _unescape_label(fname[1:-1])
                elif _GOOD_NAME_RE.match(fname) is None:
                    warnings.append(f"line {lineno}: invalid metric name {fname[:60]!r} in # {kw}")
                    n_bad += 1
                    continue
                arg = parts[2] if len(parts) > 2 else ""
                fam = families.get(fname)
                if fam is None:
                    fam = families[fname] = Family(fname)
                n_meta += 1
                if kw == "TYPE":
                    typ = arg.strip()
                    if typ not in _TYPES:
                        warnings.append(f"line {lineno}: unknown type {typ!r} for {fname}")
                        typ = "untyped"
                    if fam.type not in ("untyped", typ) and typ != "untyped":
                        warnings.append(f"line {lineno}: second TYPE for {fname} ({fam.type} then {typ})")
                    fam.type = typ
                elif kw == "HELP":
                    fam.help = _unescape_help(arg) if "\\" in arg else arg
                else:
                    fam.unit = arg.strip()
        elif other:
            if other.isspace():
                continue
            try:
                sname, labels, vtok, ttok, extxt = _slow_sample(other)
                value = _parse_value(vtok)
                t = _parse_ts(ttok, not ts_ms) if ttok else None
                if extxt:
                    ex = _slow_sample("x" + extxt if extxt.startswith("{") else extxt)
                    exemplars[len(samples)] = Exemplar(
                        ex[1], _parse_value(ex[2]), _parse_ts(ex[3], True) if ex[3] else None
                    )
            except _BadLine as e:
                n_bad += 1
                warnings.append(f"line {lineno}: {e}: {other.strip()[:80]!r}")
                continue
            append(new(PromSample, (sname, labels, value, t)))
    if eof_count >= 0 and len(samples) > eof_count:
        if not eof_warned:
            warnings.append(f"line {eof_line}: samples after '# EOF' ignored")
        del samples[eof_count:]
    if openmetrics and not eof_line and text.strip():
        warnings.append("OpenMetrics body does not end with '# EOF' (truncated?)")
    if text and not text.endswith("\n") and not eof_line:
        warnings.append(f"line {lineno}: last line has no newline (file may be truncated)")
    if not samples and not n_meta:
        if not text.strip():
            raise InputError("empty input, no metrics", path)
        raise InputError(
            f"not a Prometheus text exposition ({n_bad} unreadable line{'s' if n_bad != 1 else ''}, no samples)",
            path,
            _first_bad_line(warnings),
        )
    ms.samples = samples
    return ms


def _first_bad_line(warnings: list[str]) -> int | None:
    for w in warnings:
        if w.startswith("line "):
            try:
                return int(w[5:].split(":", 1)[0])
            except ValueError:
                return None
    return None


def sniff_prom_text(head: bytes) -> bool:
    """Whether ``head`` (the first KiB of a file) looks like a Prometheus/OpenMetrics exposition: a
    well-formed ``# HELP``/``# TYPE`` line, or sample lines (and comments) only, in the exact shape the
    text formats define. Configuration tables such as /etc/ethertypes or /etc/protocols (a name, a
    number and more words) are not."""
    if b"\x00" in head:
        return False
    text = head.decode("utf-8", errors="replace")
    seen = named = 0
    for line in text.splitlines()[:40]:
        s = line.strip()
        if not s:
            continue
        if _SNIFF_META_RE.match(s):
            return True
        if s.startswith("#"):
            continue  # a comment: the formats allow them, and they say nothing either way
        if _SNIFF_SAMPLE_RE.match(s):
            seen += 1
            # a metric name with an underscore or a label set: the names exporters use
            named += "_" in s.split("{", 1)[0].split()[0] or "{" in s
            if seen >= 2 and named:
                return True
            continue
        return False  # a line that is neither a sample nor a comment: not an exposition
    return seen >= 1 and named >= 1
