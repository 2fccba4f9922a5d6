"""The input budgets themselves: their names, defaults and environment variables (:data:`LIMITS`),
the values in force (:func:`current`, ``--limit`` through :func:`set_limit`), the :class:`Budget`
one input draws on as it is read, and :class:`LimitExceeded`, the one-line refusal naming the limit
and how to raise it.

The readers that draw on them (regular files only, inflation on the fly, lines, JSON, archives) are
:mod:`clusterdoctor.observe.limits`, which re-exports every name here; the table of budgets and how a
reader adopts them are in its docstring.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from clusterdoctor.errors import InputError


class _Def:
    __slots__ = ("default", "env", "kind", "name", "what")

    def __init__(self, name: str, env: str, default: float, kind: str, what: str) -> None:
        self.name, self.env, self.default, self.what = name, env, default, what
        self.kind = kind  # "size" | "count" | "seconds"


LIMITS: dict[str, _Def] = {
    d.name: d
    for d in (
        # a parsed metrics dump takes about 11x its size (13.9 MB of node exporter text held 157 MB)
        _Def("input", "CLUSTERDOCTOR_MAX_INPUT_BYTES", 256 << 20, "size", "bytes of one file read whole"),
        # Kineto traces of long jobs inflate to several GB (a 1 GB trace streams in 3.4 s, 164 MB)
        _Def(
            "inflated", "CLUSTERDOCTOR_MAX_INFLATED_BYTES", 8 << 30, "size", "bytes inflated from one stream"
        ),
        # a bundle of a 2-socket node with 8 RDMA ports holds about 5,000 files
        _Def("members", "CLUSTERDOCTOR_MAX_ARCHIVE_MEMBERS", 100_000, "count", "members of one archive"),
        _Def("archive", "CLUSTERDOCTOR_MAX_ARCHIVE_BYTES", 1 << 30, "size", "total size of one archive"),
        # collect writes flat bundles; a --file tarball inside one is the only legitimate nesting
        _Def("nesting", "CLUSTERDOCTOR_MAX_NESTING", 2, "count", "archives inside archives"),
        # hwloc XML < 20 levels, Kineto/Flight Recorder JSON < 10, pickles < 10
        _Def("depth", "CLUSTERDOCTOR_MAX_DEPTH", 100, "count", "nesting of values"),
        _Def("records", "CLUSTERDOCTOR_MAX_RECORDS", 10_000_000, "count", "records kept of one input"),
        _Def("seconds", "CLUSTERDOCTOR_MAX_SECONDS", 300, "seconds", "wall time reading one input"),
    )
}
MAX_INPUT_ENV = LIMITS["input"].env
DEFAULT_MAX_INPUT_BYTES = int(LIMITS["input"].default)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> float | None:
    """``"100K"``, ``"2m"``, ``"1GiB"``, ``"1.5M"``, ``"4096"`` → bytes (powers of 1024); None if not a
    positive finite size."""
    raw = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = raw[-1:] if raw[-1:] in _UNITS else ""
    try:
        n = float(raw[: len(raw) - len(unit)]) * _UNITS[unit]
    except ValueError:
        return None
    if not 0 < n < float("inf"):  # also NaN ("nan") and "inf", which float() accepts
        return None
    return n


class Limits:
    """The budgets in force (see the module docstring): one attribute per name of :data:`LIMITS`."""

    __slots__ = ("archive", "depth", "inflated", "input", "members", "nesting", "records", "seconds")

    def __init__(self, **values: float) -> None:
        for name, d in LIMITS.items():
            v = values.get(name, d.default)
            setattr(self, name, float(v) if d.kind == "seconds" else int(v))

    def __repr__(self) -> str:
        return "Limits(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in LIMITS) + ")"

    def describe(self) -> list[tuple[str, str, str, str]]:
        """(name, value, environment variable, what) per budget, for ``--help`` and docs."""
        out = []
        for name, d in LIMITS.items():
            v = getattr(self, name)
            shown = human_size(v) if d.kind == "size" else (f"{v:g} s" if d.kind == "seconds" else f"{v:,}")
            out.append((name, shown, d.env, d.what))
        return out


def _value(d: _Def) -> float:
    raw = os.environ.get(d.env, "")
    if not raw.strip():
        return d.default
    n = parse_size(raw)
    if n is None:
        return d.default  # a value that is not a number is ignored: the default applies
    return max(1, n) if d.kind != "seconds" else n


def current() -> Limits:
    """The limits in force now (read from the environment on each call: tests and ``--limit`` set it)."""
    return Limits(**{name: _value(d) for name, d in LIMITS.items()})


def set_limit(spec: str) -> None:
    """Apply ``NAME=VALUE`` (``--limit``) for this process and its children; ValueError if malformed."""
    name, eq, value = spec.partition("=")
    d = LIMITS.get(name.strip().lower())
    if not eq or d is None:
        raise ValueError(f"--limit {spec!r}: expected NAME=VALUE with NAME one of {', '.join(LIMITS)}")
    if parse_size(value) is None:
        raise ValueError(f"--limit {spec!r}: {value!r} is not a positive number")
    os.environ[d.env] = value.strip()


def max_input_bytes() -> int:
    """The ``input`` limit: ``$CLUSTERDOCTOR_MAX_INPUT_BYTES`` (bytes, or with a K/M/G suffix), else
    256 MiB. A value that is not a size is ignored (the default applies)."""
    return current().input


def human_size(n: float) -> str:
    """Bytes in words: ``133 KiB``, ``1.5 GiB``."""
    for unit, div in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return f"{n:.0f} bytes"


def limit_help(name: str) -> str:
    """How to raise a limit, in words: ``raise it with --limit inflated=SIZE or CLUSTERDOCTOR_...``."""
    d = LIMITS[name]
    arg = {"size": "SIZE", "count": "N", "seconds": "SECONDS"}[d.kind]
    return f"limit '{name}'; raise it with --limit {name}={arg} or {d.env}"


class LimitExceeded(InputError):
    """An input went over a budget. ``limit`` names the budget (a key of :data:`LIMITS`)."""

    def __init__(self, what: str, path: str | None, limit: str) -> None:
        self.limit = limit
        super().__init__(f"{what} ({limit_help(limit)})", path)


# --- the budget -------------------------------------------------------------------------------------


class Budget:
    """What one input has used so far; every ``add_*``/``check_*`` raises :class:`LimitExceeded` past
    its limit. ``clock`` is injectable (tests); wall time counts from construction."""

    def __init__(
        self, path: str | os.PathLike[str] | None, limits: Limits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.path = os.fspath(path) if path is not None else None
        self.limits = limits or current()
        self.clock = clock
        self.started = clock()
        self.inflated = 0
        self.records = 0
        self._next_time_check = 0

    def check_time(self) -> None:
        if self.clock() - self.started > self.limits.seconds:
            raise LimitExceeded(f"reading took longer than {self.limits.seconds:g} s", self.path, "seconds")

    def tick(self, every: int = 1024) -> None:
        """:meth:`check_time` once every ``every`` calls: for a loop over what a parser already holds
        (lines, series), so that the ``seconds`` budget also stops work done after the reading."""
        self._next_time_check -= 1
        if self._next_time_check <= 0:
            self._next_time_check = every
            self.check_time()

    def add_inflated(self, n: int) -> None:
        self.inflated += n
        if self.inflated > self.limits.inflated:
            raise LimitExceeded(
                f"inflates to more than {human_size(self.limits.inflated)}", self.path, "inflated"
            )

    def add_records(self, n: int = 1) -> None:
        self.records += n
        if self.records > self.limits.records:
            raise LimitExceeded(f"holds more than {self.limits.records:,} records", self.path, "records")

    def set_records(self, n: int) -> None:
        """Record the running total of a reader that counts its own kept records."""
        self.records = 0
        self.add_records(n)

    def check_depth(self, depth: int, what: str = "values") -> None:
        if depth > self.limits.depth:
            raise LimitExceeded(f"{what} nested deeper than {self.limits.depth} levels", self.path, "depth")


def bounded(value: Any, maximum: int, what: str, path: str | None = None, minimum: int = 0) -> int:
    """An integer taken from the input, checked to lie in ``minimum..maximum`` before anything is
    allocated in proportion to it; InputError naming ``what`` otherwise (also for NaN, inf, bool)."""
    if isinstance(value, bool):
        raise InputError(f"{what} {value!r} is not a number", path)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"{what} {value!r} is not a finite number", path)
        if not value.is_integer():
            raise InputError(f"{what} {value!r} is not a whole number", path)
        value = int(value)
    if not isinstance(value, int):
        raise InputError(f"{what} {str(value)[:40]!r} is not a number", path)
    if not minimum <= value <= maximum:
        raise InputError(f"{what} {value} is outside {minimum}..{maximum}", path)
    return value
