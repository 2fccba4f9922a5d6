"""The plain-file pass of the Prometheus text parser: C-level loops and no regular expression.

:func:`parse_blocks` reads what exporters write — every line a comment, blank, or
``name[{k="v",k2="v2"}] value[ timestamp]`` with canonical label sets (no escapes, no spacing, no
``}`` inside a value) — block by block, and returns None for anything else, which the careful
per-line loop (:mod:`clusterdoctor.observe.control.prom_careful`) then reads. Both give the same
result (tests/observe/control/test_prom_fast.py, on real dumps and line-level mutations).

How: each block is split into lines once (``str.split``); comment lines are picked with
``compress``; each sample line is cut at its last ``}`` (``str.rpartition``) into its series key
(``name{k="v"``) and the rest (value, timestamp). Series keys are split and validated column by
column (names with ``str.isidentifier``, label bodies by :func:`canonical_pairs`). In a file over
:data:`REMEMBER_ABOVE` characters (dumps put together, several scrapes of one target) a series key
seen in an earlier block maps to the same ``(name, labels)`` objects through one dict (bounded by
:data:`CACHE`), and so does a HELP/TYPE line to what it says: only new ones are read. Every sample's
value and timestamp are read from its own line (``map(float, ...)``); equal texts within a block share
one float. No regular expression is compiled or imported (``re`` costs ~6-10 ms of a fresh process,
issue 26).
"""

from __future__ import annotations

from itertools import accumulate, chain, compress, filterfalse, repeat, tee
from operator import add, attrgetter, getitem, is_, itemgetter, not_, sub, truediv
from sys import intern

from clusterdoctor.observe.control.prom_metrics import Family, PromSample

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from clusterdoctor.observe.control.prom_metrics import Labels

    # what _columns gives: (name, labels) of each sample, values, timestamps
    Columns = tuple[list[tuple[str, Labels]], list[float], Iterable[float | None]]

TYPES = frozenset(
    {"counter", "gauge", "histogram", "summary", "untyped", "unknown", "gaugehistogram", "stateset", "info"}
)
# Characters per block. Small blocks keep the per-block lists small and reuse their memory: parsing a
# 49 MB file took ~14,500 page faults at 256 Ki, ~16,700 at 1 Mi, ~33,000-45,000 at 4 Mi, and no more
# time at 256 Ki (16 Ki to 256 Ki were alike; issue 26, fifth round).
BLOCK = 1 << 18
# Series keys (and comment lines) remembered across blocks, at most: past this they are dropped and
# what follows is learnt again. A file whose series repeat (dumps put together, several
# scrapes of a target) reads each series' name and labels once; a file of distinct series (one scrape
# of a large fleet) gains nothing from them and must not pay ~300 bytes per series for them (on 49 MB of
# distinct series, unbounded: 280 MiB peak; with this bound: 155 MiB, and 25% less time).
CACHE = 50_000
# A file longer than this remembers series, comment lines, label pairs and label sets across blocks.
REMEMBER_ABOVE = 4 << 20


def good_name(s: str) -> bool:
    """Whether ``s`` is a metric name, ``[a-zA-Z_:][a-zA-Z0-9_:]*``."""
    return s.isascii() and s.replace(":", "_").isidentifier()


def good_label_name(s: str) -> bool:
    """Whether ``s`` is a label name, ``[a-zA-Z_][a-zA-Z0-9_]*``."""
    return s.isascii() and s.isidentifier()


def unescape_help(v: str) -> str:
    """HELP text unescaped: ``\\\\`` is a backslash and ``\\n`` a newline; any other backslash stays."""
    out = []
    i = 0
    n = len(v)
    while True:
        j = v.find("\\", i)
        if j < 0 or j + 1 >= n:
            out.append(v[i:])
            return "".join(out)
        c = v[j + 1]
        if c == "\\" or c == "n":
            out.append(v[i:j])
            out.append("\\" if c == "\\" else "\n")
            i = j + 2
        else:
            out.append(v[i : j + 1])
            i = j + 1


def _shape_keys(shape: str) -> tuple[str, ...] | None:
    """The label names of an emptied canonical body (``a="",b=""``); None unless it has that shape
    (``[a-zA-Z_][a-zA-Z0-9_]*=""`` joined by commas) with no name twice."""
    parts = shape.split(",")
    keys = tuple([p[:-3] for p in parts])
    for p, k in zip(parts, keys):
        if p[-3:] != '=""' or not good_label_name(k):
            return None
    if len(set(keys)) != len(keys):
        return None  # duplicate label name
    return keys


def canonical_pairs(joined: str) -> tuple[tuple[tuple[str, str], ...], list[int]] | None:
    """Every label pair of ``joined`` (label bodies, one per line) in order, and for each line the
    number of pairs up to and including it; None unless every body is canonical.

    Canonical: ``k="v",k2="v2"``, no backslash, no spacing, no duplicate name. Splitting on ``"``
    puts the values at odd positions and the ``k=`` / ``,k=`` separators at even ones; the
    separators, rejoined with the values emptied, must have the canonical shape — checked once per
    distinct label-name list, whose key strings every sample with that list then shares.
    """
    if "\\" in joined:
        return None
    pieces = joined.split('"')
    values = pieces[1::2]
    if "\n" in "".join(values):
        return None  # an odd number of quotes on some line: not canonical
    shapes = '""'.join(pieces[0::2]).split("\n")
    shape_keys: dict[str, tuple[str, ...]] = {"": ()}
    for shape in set(shapes).difference(shape_keys):
        keys = _shape_keys(shape)
        if keys is None:
            return None
        shape_keys[shape] = keys
    line_keys = list(map(shape_keys.__getitem__, shapes))
    pairs = tuple(zip(chain.from_iterable(line_keys), values))
    return pairs, list(accumulate(map(len, line_keys)))


def meta_of(comment: str) -> tuple[str, str, str] | None:
    """``(HELP|TYPE, name, text)`` of a well-formed ``# HELP name text`` / ``# TYPE name type`` line
    (the text may be empty), else None."""
    kw = comment[:7]
    if kw != "# HELP " and kw != "# TYPE ":
        return None
    name, _, arg = comment[7:].partition(" ")
    return (kw[2:6], name, arg) if good_name(name) else None


def only_plain_comments(lines: Iterable[str]) -> bool:
    """Whether every comment that is not a well-formed HELP/TYPE line is free text (not
    HELP/TYPE/UNIT/EOF, which the careful loop must see)."""
    for c in lines:
        if meta_of(c) is None and (c.startswith("# ") or c.startswith("#\t")):
            parts = c[2:].split(None, 1)
            if parts and parts[0] in ("HELP", "TYPE", "UNIT", "EOF"):
                return False
    return True


_UNTYPED = Family("", "untyped")  # the type before a family's first TYPE line


class Seen:
    """What one parse has read so far, shared by its blocks: the checked metric names (interned)
    and, in a file over :data:`REMEMBER_ABOVE` characters (dumps put together, several scrapes),
    series key (``name{body``) -> ``(name, labels)``, each distinct comment line -> :func:`meta_of`
    (0 for free text), and one copy of each label pair and label set (memory by what the file says).
    A single dump repeats nothing: it is read without these dicts."""

    __slots__ = ("series", "names", "comments", "shared")

    def __init__(self, remember: bool = False) -> None:
        self.names: dict[str, str] = {}
        self.series: dict[str, tuple[str, Labels]] | None = {} if remember else None
        self.comments: dict[str, tuple[str, str, str] | int] | None = {} if remember else None
        self.shared: dict[object, object] | None = {} if remember else None

    def full(self) -> bool:
        return self.series is not None and (len(self.series) > CACHE or len(self.comments or ()) > CACHE)

    def forget(self) -> None:
        """Drop the series keys, comment lines and shared pairs and label sets (the samples keep
        theirs; the names stay: one per metric)."""
        for d in (self.series, self.comments, self.shared):
            if d is not None:
                d.clear()


def _series_of(keys: list[str], seen: Seen) -> list[tuple[str, Labels]] | None:
    """``(name, labels)`` of each series key (``name{body``); None when one is not plain."""
    names, braces, bodies = zip(*map(str.partition, keys, repeat("{")))
    if "" in braces:
        return None  # a "}" without "{"
    good = seen.names
    for n in set(names).difference(good):
        if not good_name(n):
            return None
        good[n] = intern(n)  # one string per metric name, not per line
    joined = "\n".join(bodies)
    if "}" in joined:
        return None  # a "}" inside a value (the careful loop reads it)
    canon = canonical_pairs(joined)
    if canon is None:
        return None
    pairs, stops = canon
    shared = seen.shared
    if shared is not None:
        pairs = tuple(map(shared.setdefault, pairs, pairs))
    labels: Iterable[Labels] = map(pairs.__getitem__, map(slice, chain((0,), stops), stops))
    if shared is not None:
        one, two = tee(labels)
        labels = map(shared.setdefault, one, two)
    return list(zip(map(good.__getitem__, names), labels))


def _floats(tokens: list[str] | tuple[str, ...]) -> list[float]:
    """``float`` of each token. Values repeat within a dump (on the real ones 9-23% are distinct:
    zero buckets, 0/1 gauges): when most repeat, each distinct text is converted once and its float
    shared (fewer objects to allocate, collect and free). Raises ValueError."""
    distinct = set(tokens)
    if len(distinct) * 2 > len(tokens):
        return list(map(float, tokens))
    at = dict(zip(distinct, map(float, distinct)))
    return list(map(at.__getitem__, tokens))


def _seconds(tokens: Iterable[str]) -> list[float]:
    """Millisecond timestamps in seconds. The samples of one scrape share its timestamp: when most
    repeat, each distinct one is converted once and its float shared. Raises ValueError."""
    tokens = list(tokens)
    distinct = set(tokens)
    if len(distinct) * 2 > len(tokens):
        return list(map(truediv, map(int, tokens), repeat(1000.0)))
    at = dict(zip(distinct, map(truediv, map(int, distinct), repeat(1000.0))))
    return list(map(at.__getitem__, tokens))


def _values(
    rests: list[str], braces: tuple[str, ...], spaces: int
) -> tuple[list[float], Iterable[float | None]] | None:
    """Values and timestamps (seconds) of the text after each series key: `` value`` or
    `` value ms`` after a label set, ``value`` or ``value ms`` after a bare name (``braces``: "}" or
    ""); ``spaces``: how many spaces ``rests`` hold in all. None when one is something else."""
    if spaces == len(rests) - braces.count(""):  # one space per label set's rest: no timestamp
        try:
            return _floats(rests), repeat(None)  # " 1.5": float() ignores the spaces
        except ValueError:
            pass
    elif spaces == 2 * len(rests) - braces.count(""):  # one more space per line: timestamps everywhere?
        firsts, _, lasts = zip(*map(str.rpartition, rests, repeat(" ")))
        try:  # a line with no timestamp leaves "" to float(); one with two more, " 1 2" to float()
            return _floats(firsts), _seconds(lasts)
        except ValueError:
            pass
    if spaces != len(rests) - braces.count(""):
        # a space more than that: a timestamp, cut at the last space (" 1.5 1700000000000" -> " 1.5",
        # "1700000000000"); a line this does not read (tabs, three tokens) goes to the split below
        extra = list(map(sub, map(str.count, rests, repeat(" ")), map(len, braces)))
        if set(extra) <= {0, 1}:
            at = list(compress(range(len(rests)), extra))  # the lines with a timestamp
            firsts, _, lasts = zip(*map(str.rpartition, compress(rests, extra), repeat(" ")))
            vals = list(rests)
            times: list[float | None] = [None] * len(rests)
            try:
                for _ in map(vals.__setitem__, at, firsts):
                    pass
                for _ in map(times.__setitem__, at, _seconds(lasts)):
                    pass
                return _floats(vals), times
            except ValueError:
                pass
    toks = list(map(str.split, rests))
    lens = list(map(len, toks))
    widths = set(lens)
    try:
        if widths == {2}:
            vals, tss = zip(*toks)
            return list(map(float, vals)), list(map(truediv, map(int, tss), repeat(1000.0)))
        if widths == {1, 2}:  # some lines with a timestamp, some without (dumps put together)
            with_ts = list(map((2).__eq__, lens))
            ms = map(int, map(itemgetter(1), compress(toks, with_ts)))
            at = dict(zip(compress(range(len(toks)), with_ts), map(truediv, ms, repeat(1000.0))))
            return list(map(float, map(itemgetter(0), toks))), list(map(at.get, range(len(toks))))
    except ValueError:
        pass
    return None


def _samples(lines: list[str], seen: Seen) -> list[PromSample] | None:
    """The samples of ``lines`` (sample lines, none empty); None when one is not plain."""
    got = _columns(lines, seen)
    if got is None:
        return None
    keys, values, times = got
    return list(
        map(
            tuple.__new__,
            repeat(PromSample),
            zip(map(itemgetter(0), keys), map(itemgetter(1), keys), values, times),
        )
    )


def _columns(lines: list[str], seen: Seen) -> Columns | None:
    """The samples of ``lines`` as columns: ``(name, labels)`` of each (one tuple per series in a
    long file), values, timestamps (an endless ``repeat(None)`` when no line has one); None when a
    line is not plain."""
    heads, braces, rests = zip(*map(str.rpartition, lines, repeat("}")))
    # labelled lines: the text after "}" starts with one space (checked on one joined string)
    lab_rests = list(compress(rests, braces)) if "" in braces else rests
    joined = "\n" + "\n".join(lab_rests)
    if joined.count("\n ") != len(lab_rests):
        return None
    if "" in braces:  # lines without a label set: name, space, value; key "name{" as for "name{}"
        heads, rests = list(heads), list(rests)
        at = list(compress(range(len(lines)), map(not_, braces)))
        names, spaces, un_rests = zip(*map(str.partition, map(lines.__getitem__, at), repeat(" ")))
        if "" in spaces:
            return None
        for _ in map(heads.__setitem__, at, map(add, names, repeat("{"))):
            pass
        for _ in map(rests.__setitem__, at, un_rests):
            pass
        joined = "".join(un_rests) + joined
    if "_" in joined:
        return None  # Go's ParseFloat takes no digit separators
    series = seen.series
    if series is None:
        keys = _series_of(heads, seen)
        if keys is None:
            return None
    else:
        keys = list(map(series.get, heads))  # (name, labels) of each series seen before, else None
        if not all(keys):
            new = list(dict.fromkeys(compress(heads, map(not_, keys))))
            learnt = _series_of(new, seen)
            if learnt is None:
                return None
            series.update(zip(new, learnt))
            keys = list(map(series.__getitem__, heads))
    got = _values(rests, braces, joined.count(" "))
    if got is None:
        return None
    return keys, got[0], got[1]


_HELP_TYPE = frozenset({"# HELP ", "# TYPE "})


def _metas(lines: list[str], seen: Seen) -> list[tuple[str, str, str] | int]:
    """:func:`meta_of` of each of ``lines``, 0 for free text, by ``map``: the first seven characters
    say HELP or TYPE, the name is up to the next space and checked once."""
    heads = list(map(getitem, lines, repeat(slice(None, 7))))
    is_meta = list(map(_HELP_TYPE.__contains__, heads))
    meta_lines = list(compress(lines, is_meta))
    if not meta_lines:
        return [0] * len(lines)
    kws = map(getitem, compress(heads, is_meta), repeat(slice(2, 6)))
    names, _, args = zip(*map(str.partition, map(getitem, meta_lines, repeat(slice(7, None))), repeat(" ")))
    good = seen.names
    for n in set(names).difference(good):
        if good_name(n):
            good[n] = intern(n)
    metas: list[tuple[str, str, str] | int] = list(zip(kws, names, args))
    if not all(map(good.__contains__, names)):
        metas = [m if m[1] in good else 0 for m in metas]  # type: ignore[index]
    if len(metas) == len(lines):
        return metas
    out: list[tuple[str, str, str] | int] = [0] * len(lines)
    for _ in map(out.__setitem__, compress(range(len(lines)), is_meta), metas):
        pass
    return out


def _metadata(comments: list[str], families: dict[str, Family], seen: Seen) -> bool:
    """Apply the ``# HELP`` / ``# TYPE`` lines of a plain block; False when a comment needs the
    careful loop (a second TYPE that conflicts, a bad name, ``# UNIT``, ``# EOF``, an unknown type).

    Comment lines are read by :func:`_metas` (in a long file once per distinct line); HELP and TYPE
    texts are gathered in dicts (the last HELP wins, as in the loop) and each family is built once, in
    order of first mention.
    """
    cache = seen.comments  # comment line -> meta_of(line), or 0 when it is not a HELP/TYPE line
    if cache is None:
        metas = _metas(comments, seen)
    else:
        metas = list(map(cache.get, comments))
        if not all(metas):  # lines not seen before (None), or free text (0)
            unknown = list(set(compress(comments, map(is_, metas, repeat(None)))))
            if unknown:
                cache.update(zip(unknown, _metas(unknown, seen)))
                metas = list(map(cache.__getitem__, comments))
    if not all(metas):
        if not only_plain_comments(compress(comments, map(not_, metas))):
            return False
        metas = list(filter(None, metas))
    if not metas:
        return True
    kws, fnames, args = zip(*metas)
    is_type = list(map("TYPE".__eq__, kws))
    tnames = list(compress(fnames, is_type))
    ttypes = list(compress(args, is_type))
    types = dict(zip(tnames, ttypes))
    if not TYPES.issuperset(ttypes):
        return False  # an unknown type: the careful loop warns about it
    # TYPE again for a family (dumps put together): the careful loop takes the last one and warns
    # when two in a row differ and neither is untyped; then it must run
    if len(types) != len(tnames):  # a family typed twice in this block: in order
        last = {f: families[f].type for f in types if f in families}
        for f, typ in zip(tnames, ttypes):
            prev = last.get(f, "untyped")
            if prev not in ("untyped", typ) and typ != "untyped":
                return False
            last[f] = typ
    else:  # each (type before, type now) pair once
        before = map(attrgetter("type"), map(families.get, tnames, repeat(_UNTYPED)))
        for prev, typ in set(zip(before, ttypes)):
            if prev not in ("untyped", typ) and typ != "untyped":
                return False
    helps = dict(compress(zip(fnames, args), map(not_, is_type)))
    if "\\" in "".join(helps.values()):
        helps = {k: unescape_help(v) for k, v in helps.items()}
    # families an earlier block read: updated in place (setattr by map, no Python loop per family)
    for attr, new in (("type", types), ("help", helps)):
        old = list(filter(families.__contains__, new))
        for _ in map(setattr, map(families.__getitem__, old), repeat(attr), map(new.__getitem__, old)):
            pass
    order = list(filterfalse(families.__contains__, dict.fromkeys(fnames)))  # in order of first mention
    families.update(
        zip(order, map(Family, order, map(types.get, order, repeat("untyped")), map(helps.get, order)))
    )
    return True


def parse_block(text: str, families: dict[str, Family], seen: Seen) -> tuple[list[PromSample], int] | None:
    """All samples of one block of a plain text-format file and its number of lines; None when a
    line needs the careful per-line loop (``families`` is then left as it was)."""
    got = parse_block_columns(text, families, seen)
    if got is None:
        return None
    (keys, values, times), n_lines = got
    return (
        list(
            map(
                tuple.__new__,
                repeat(PromSample),
                zip(map(itemgetter(0), keys), map(itemgetter(1), keys), values, times),
            )
        ),
        n_lines,
    )


_NO_COLUMNS: Columns = ([], [], [])


def parse_block_columns(text: str, families: dict[str, Family], seen: Seen) -> tuple[Columns, int] | None:
    """:func:`parse_block` with the samples as :func:`_columns` gives them (no tuple per sample)."""
    lines = text.split("\n")
    if text[-1:] == "\n":
        lines.pop()  # the empty string after the last newline
    n_lines = len(lines)
    is_comment = list(map(str.startswith, lines, repeat("#")))
    comments = list(compress(lines, is_comment))
    body = list(compress(lines, map(not_, is_comment)))
    if "" in body:
        body = list(filter(None, body))  # blank lines
    samples: Columns | None = _NO_COLUMNS
    if body:
        samples = _columns(body, seen)
        if samples is None:
            kept = list(filter(str.strip, body))  # lines of spaces only are blank lines
            if len(kept) == len(body):
                return None
            samples = _columns(kept, seen) if kept else _NO_COLUMNS
            if samples is None:
                return None
    if not _metadata(comments, families, seen):
        return None
    return samples, n_lines


def parse_blocks(text: str, families: dict[str, Family]) -> tuple[list[PromSample], int] | None:
    """:func:`parse_block` on blocks of about :data:`BLOCK` characters, each cut after a newline, so
    that its lists stay bounded by the block, not the file: peak memory is the text and the samples.
    None (``families`` emptied) when any block needs the careful loop."""
    seen = Seen(remember=len(text) > REMEMBER_ABOVE)
    if len(text) <= BLOCK:
        got = parse_block(text, families, seen)
        if got is None:
            families.clear()
        return got
    samples: list[PromSample] = []
    n_lines = 0
    start = 0
    while start < len(text):
        end = text.find("\n", start + BLOCK)
        end = len(text) if end < 0 else end + 1
        got = parse_block(text[start:end], families, seen)
        if got is None:
            families.clear()
            return None
        samples += got[0]
        n_lines += got[1]
        start = end
        if seen.full():
            seen.forget()
    return samples, n_lines
