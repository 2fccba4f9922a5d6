"""The careful per-line loop of the Prometheus text parser: any exposition, line by line.

:func:`parse_lines` reads what the plain-file pass (:mod:`clusterdoctor.observe.control.prom_fast`)
refuses: OpenMetrics bodies, escapes, odd spacing, exemplars, quoted UTF-8 names, garbled lines. One
regex splits each line into name, labels, value, timestamp, comment or other; the lines its pattern
refuses are read by a careful character-level parser (:func:`_slow_sample`), which either reads them or
records a warning with the line number. Imported only when a file needs it: a plain dump is read
without ``re`` (issue 26, fresh-process time).
"""

from __future__ import annotations

import math
import re

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.prom_fast import TYPES, canonical_pairs, good_name, unescape_help
from clusterdoctor.observe.control.prom_metrics import Exemplar, Family, Labels, MetricSet, PromSample

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LNAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_QSTR = r'"(?:[^"\\\n]|\\.)*"'
_QSTR_P = r'"(?:[^"\\\n]|\\.)*+"'  # possessive: whitespace is never given back (linear on any line)
_LABELBODY = rf"(?:[^\"}}\n]|{_QSTR})*"
_TOKEN = r"[^ \t\n#]+"

# One alternative per line kind: a sample (fast path), a comment, anything else (slow path).
# The fast path takes label sets without "}" inside and no exemplar; anything it refuses is
# re-read by _slow_sample, so a "}" inside a quoted value or an exemplar costs speed, not correctness.
_LINE_RE = re.compile(
    rf"^(?:({_NAME})(?:\{{([^}}\n]*)\}})?[ \t]+({_TOKEN})(?:[ \t]+({_TOKEN}))?[ \t]*|(#[^\n]*)|([^\n]*))$",
    re.MULTILINE,
)
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
_METRIC_NAME_RE = re.compile(_NAME)


def _unescape_label(v: str) -> str:
    return _ESC_RE.sub(lambda m: _ESC_MAP.get(m.group(1), "\\" + m.group(1)), v)


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


def parse_lines(text: str, ms: MetricSet) -> MetricSet:
    """Read ``text`` (decoded, ``\\r\\n`` already ``\\n``) line by line into ``ms`` (its
    ``openmetrics`` flag set). Raises :class:`InputError` when nothing valid is left."""
    path = ms.path
    openmetrics = ms.openmetrics
    warnings = ms.warnings
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
    lines = _LINE_RE.findall(text)
    # A text ending with "\n" yields one extra empty match after the final newline.
    if lines and text.endswith("\n") and lines[-1] == ("", "", "", "", "", ""):
        lines.pop()
    # Fast label path: when every label body in the file is canonical, they are split at once and
    # each sample takes its slice of the pairs.
    canon_pairs = canonical_pairs("\n".join([ln[1] for ln in lines]))
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
                if fam is None and good_name(fname):
                    fam = families[fname] = Family(fname)
                if fam is not None:
                    n_meta += 1
                    if kw == "# HELP ":
                        fam.help = unescape_help(arg) if "\\" in arg else arg
                        continue
                    if arg in TYPES and fam.type == "untyped":
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
                elif not good_name(fname):
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
                    if typ not in TYPES:
                        warnings.append(f"line {lineno}: unknown type {typ!r} for {fname}")
                        typ = "untyped"
                    if fam.type not in ("untyped", typ) and typ != "untyped":
                        warnings.append(f"line {lineno}: second TYPE for {fname} ({fam.type} then {typ})")
                    fam.type = typ
                elif kw == "HELP":
                    fam.help = unescape_help(arg) if "\\" in arg else arg
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


def sniff(head: bytes) -> bool:
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
