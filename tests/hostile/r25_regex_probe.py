"""Issue 25: time every compiled pattern the parsers apply to untrusted lines on adversarial long lines.

Run as a child process (``python -m tests.hostile.r25_regex_probe``) so that a pattern that hangs
fails the test (the parent's timeout) instead of freezing it; the child prints one line per pattern
before it tries it, so the parent can name the pattern that hung.

The patterns: every :class:`re.Pattern` held at module level (directly or inside a tuple, list, dict
or set) by a module under ``clusterdoctor.observe``, by :mod:`clusterdoctor.redact`, and every
message catalogue entry's patterns (``rules/catalog``).

The lines are built from the pattern's own pieces: a minimal string it matches (from the parsed
pattern), cut after each of its top-level pieces and followed by a long run of one filler (spaces,
letters, digits, ``=``, quotes, dots, the characters of its own classes ...) and a character that
breaks an anchored end; each literal piece repeated; the minimal string repeated. Each line is
timed with ``findall`` (which also does the work of ``search`` and ``match``) at a screening length,
the slowest per pattern then at ``n`` and ``4n`` (1 MiB): each must finish within ``CAP`` seconds
and grow less than ``GROWTH`` times (or stay under ``FLOOR`` seconds).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import re._constants as C
import re._parser as P
import signal
import sys
import time
from typing import Any

SCREEN = 4 << 10  # characters of the screening line
BIG = 1 << 20  # the long line (1 MiB)
CAP = 20.0  # seconds one findall on a 1 MiB line may take (the slowest linear one: 0.7 s quiet; a backtracking one: hours); generous for a loaded machine
GROWTH = 8.0  # t(4n) / t(n) below this (linear: ~4; quadratic: ~16)
SCREEN_FAIL = 1.0  # seconds one screening line may take (linear: about a millisecond)
FLOOR = 1.0  # seconds under which the growth is not judged (timer noise, a loaded machine)

FILLERS = (" ", "\n", "a", "0", "=", '"', ".", "-", "\t", ":", "\\", "/", ",", "[", "(", "{", "a=", 'a="', "a ",
           "a.", "-a", "1.", "0x", "'")  # fmt: skip
BREAK = "\x01"


USES: dict[str, str] = {}  # where -> the methods to time it with (see _uses)


def _uses(mod: Any, attr: str) -> str:
    """The methods the module's source calls on ``attr`` when they are all anchored at the start
    (``match``, ``fullmatch``) and the pattern is used no other way; else ``findall`` (every position,
    which also does the work of ``search``, ``finditer``, ``sub`` and ``split``)."""
    import inspect

    try:
        src = inspect.getsource(mod)
    except (OSError, TypeError):
        return "findall"
    name = re.escape(attr)
    calls = re.findall(r"\b" + name + r"\.(\w+)\(", src)
    refs = len(re.findall(r"\b" + name + r"\b", src))
    if calls and set(calls) <= {"match", "fullmatch"} and refs == 1 + len(calls):
        return ",".join(sorted(set(calls)))
    return "findall"


def collect() -> list[tuple[str, re.Pattern[str] | re.Pattern[bytes]]]:
    """(where, pattern) for every pattern in scope, deduplicated by (pattern, flags)."""
    import clusterdoctor.observe as observe

    found: list[tuple[str, Any]] = []
    seen: set[tuple[Any, int]] = set()

    def add(where: str, v: Any, depth: int = 0) -> None:
        if isinstance(v, re.Pattern):
            key = (v.pattern, v.flags)
            if key not in seen:
                seen.add(key)
                found.append((where, v))
        elif depth < 3 and isinstance(v, (tuple, list, set, frozenset)):
            for i, x in enumerate(v):
                add(f"{where}[{i}]", x, depth + 1)
        elif depth < 3 and isinstance(v, dict):
            for k, x in v.items():
                add(f"{where}[{k!r}]", x, depth + 1)

    names = [observe.__name__]
    names += [m.name for m in pkgutil.walk_packages(observe.__path__, observe.__name__ + ".")]
    names.append("clusterdoctor.redact")
    for name in sorted(names):
        mod = importlib.import_module(name)
        for attr, v in sorted(vars(mod).items()):
            add(f"{name}.{attr}", v)
            if isinstance(v, re.Pattern):
                USES[f"{name}.{attr}"] = _uses(mod, attr)
    from clusterdoctor.rules.catalog import all_messages

    for m in all_messages():
        for i, rx in enumerate(m.regexes):
            add(f"catalog {m.code}[{i}]", rx)
        if m.context_regex is not None:
            add(f"catalog {m.code} context", m.context_regex)
    return found


# --- lines built from a pattern ----------------------------------------------------------------------

_CAT = {
    C.CATEGORY_DIGIT: "0", C.CATEGORY_NOT_DIGIT: "a", C.CATEGORY_SPACE: " ", C.CATEGORY_NOT_SPACE: "a",
    C.CATEGORY_WORD: "a", C.CATEGORY_NOT_WORD: " ", C.CATEGORY_LINEBREAK: "\n",
    C.CATEGORY_NOT_LINEBREAK: "a",
}  # fmt: skip


def _in_char(items: list[Any]) -> str:
    """A character of a character class."""
    if items and items[0][0] is C.NEGATE:
        banned = {chr(a) for op, a in items[1:] if op is C.LITERAL}
        for c in "a0 x=.-_/":
            if c not in banned:
                return c
        return "\x02"
    for op, a in items:
        if op is C.LITERAL:
            return chr(a)
        if op is C.RANGE:
            return chr(a[0])
        if op is C.CATEGORY:
            return _CAT.get(a, "a")
    return "a"


def _sample(seq: Any, chars: set[str], pieces: list[str]) -> str:
    """A short string the parsed sequence matches (best effort); collects class characters and
    literal runs on the way."""
    out: list[str] = []
    lit: list[str] = []

    def flush() -> None:
        if lit:
            pieces.append("".join(lit))
            lit.clear()

    for op, av in seq:
        if op is C.LITERAL:
            lit.append(chr(av))
            out.append(chr(av))
            continue
        flush()
        if op is C.NOT_LITERAL:
            out.append("a" if av != ord("a") else "b")
        elif op is C.IN:
            c = _in_char(av)
            chars.add(c)
            out.append(c)
        elif op is C.ANY:
            out.append("a")
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, _hi, sub = av
            s = _sample(sub, chars, pieces)
            out.append(s * max(lo, 1) if lo < 64 else s * lo)
        elif op is C.SUBPATTERN:
            out.append(_sample(av[-1], chars, pieces))
        elif op is C.ATOMIC_GROUP:
            out.append(_sample(av, chars, pieces))
        elif op is C.BRANCH:
            alts = av[1]
            out.append(_sample(alts[0], chars, pieces))
            for alt in alts[1:]:
                _sample(alt, chars, pieces)
        elif op is C.GROUPREF_EXISTS:
            out.append(_sample(av[1], chars, pieces))
    flush()
    return "".join(out)


def _top_pieces(seq: Any) -> list[Any]:
    """The pattern's top-level pieces, groups opened (so cut points fall inside them too)."""
    out: list[Any] = []
    for op, av in seq:
        if op is C.SUBPATTERN:
            out.extend(_top_pieces(av[-1]))
        else:
            out.append((op, av))
    return out


def shapes(rx: re.Pattern[Any]) -> list[tuple[str, str, str, str]]:
    """(label, head, unit, tail) per adversarial line of one pattern: ``head + unit * k + tail``."""
    parsed = P.parse(rx.pattern if isinstance(rx.pattern, str) else rx.pattern.decode("latin-1"), rx.flags)
    chars: set[str] = set()
    pieces: list[str] = []
    sample = _sample(parsed, chars, pieces)
    top = _top_pieces(list(parsed))
    heads = [""]
    acc = ""
    for node in top:
        acc += _sample([node], set(), [])
        if acc != heads[-1]:
            heads.append(acc)
    fillers = list(dict.fromkeys([*FILLERS, *sorted(chars)]))
    out = [(f"{h[:40]!r}+{f!r}*", h, f, BREAK) for h in heads[:8] for f in fillers]
    for p in [*sorted(set(pieces), key=len, reverse=True)[:6], *([sample] if sample else [])]:
        out.append((f"{p[:40]!r}*", "", p, ""))
        out.append((f"({p[:40]!r}+' ')*", "", p + " ", ""))
    return out


def line(rx: re.Pattern[Any], shape: tuple[str, str, str, str], n: int) -> str | bytes:
    """The line of ``shape`` about ``n`` characters long (bytes for a bytes pattern)."""
    _, head, unit, tail = shape
    s = head + unit * (n // len(unit) + 1) + tail
    return s.encode("utf-8", "replace") if isinstance(rx.pattern, bytes) else s


def lines(rx: re.Pattern[Any], n: int) -> list[tuple[str, str | bytes]]:
    """(label, line of about ``n`` characters) for one pattern."""
    return [(sh[0], line(rx, sh, n)) for sh in shapes(rx)]


class _Slow(Exception):
    pass


def _alarm(*_: Any) -> None:
    raise _Slow


def _time(rx: re.Pattern[Any], line: Any, how: str, limit: float) -> float:
    """Seconds one application took; ``inf`` past ``limit`` (the regex engine checks signals, so an
    interval timer stops a match that backtracks for hours)."""
    signal.setitimer(signal.ITIMER_REAL, limit)
    t0 = time.perf_counter()
    try:
        for method in how.split(","):
            getattr(rx, method)(line)
    except _Slow:
        return float("inf")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return time.perf_counter() - t0


def probe(where: str, rx: re.Pattern[Any]) -> dict[str, Any]:
    """The slowest screening line of one pattern, timed again at BIG/4 and BIG."""
    how = USES.get(where, "findall")
    res = {"where": where, "pattern": str(rx.pattern)[:120], "how": how}
    worst = (0, "", 0.0)
    all_shapes = shapes(rx)
    for i, sh in enumerate(all_shapes):
        t = _time(rx, line(rx, sh, SCREEN), how, SCREEN_FAIL)
        if t > worst[2]:
            worst = (i, sh[0], t)
        if t >= SCREEN_FAIL:  # superlinear already: a 1 MiB line would take minutes or hours
            return {**res, "line": sh[0], "screen_s": round(t, 4), "ok": False}
    i, label, t_screen = worst
    t_small = _time(rx, line(rx, all_shapes[i], BIG // 4), how, CAP)
    t_big = _time(rx, line(rx, all_shapes[i], BIG), how, CAP)
    ok = t_big < CAP and (t_big < FLOOR or t_big < GROWTH * max(t_small, 1e-4))
    if not ok and t_big < CAP:
        # a busy machine can stretch one of the two timings (CI once saw 9.5x for a linear pattern):
        # time both again, smaller first, and judge the fastest of each
        t_small = min(t_small, _time(rx, line(rx, all_shapes[i], BIG // 4), how, CAP))
        t_big = min(t_big, _time(rx, line(rx, all_shapes[i], BIG), how, CAP))
        ok = t_big < FLOOR or t_big < GROWTH * max(t_small, 1e-4)
    return {**res, "line": label, "screen_s": round(t_screen, 4), "n_s": round(t_small, 4),
            "4n_s": round(t_big, 4), "ok": ok}  # fmt: skip


def main(argv: list[str]) -> int:
    only = argv[0] if argv else ""
    signal.signal(signal.SIGALRM, _alarm)
    pats = [(w, rx) for w, rx in collect() if only in w]
    print(json.dumps({"patterns": len(pats)}), flush=True)
    for where, rx in pats:
        print(json.dumps({"start": where}), flush=True)
        print(json.dumps(probe(where, rx)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
