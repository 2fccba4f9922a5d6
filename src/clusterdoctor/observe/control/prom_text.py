"""Prometheus text exposition (0.0.4) and OpenMetrics 1.0 parser.

:func:`parse_prom_text` turns a ``/metrics`` body (a live scrape, ``kubectl get --raw /metrics``
output, a grep'd excerpt) into a :class:`MetricSet`: every sample as a :class:`PromSample`
``(name, labels, value, timestamp)``, the metric families with their TYPE/HELP/UNIT, exemplars,
and helpers that group ``_bucket``/``_sum``/``_count`` rows into
:class:`clusterdoctor.model.Histogram` objects.

Two readers give the same result (tested on real dumps and line-level mutations of them):

* a plain text-format file (canonical label sets ``k="v",k2="v2"``, no escapes, exemplars or odd
  spacing — what exporters write) is read block by block with C-level loops and no regular
  expression (:mod:`~clusterdoctor.observe.control.prom_fast`);
* anything else by the careful per-line loop (:mod:`~clusterdoctor.observe.control.prom_careful`,
  imported only then), whose lines its pattern refuses go to a character-level parser (quoted UTF-8
  names, odd spacing), which either reads them or records a warning with the line number.

Garbled or truncated lines are skipped with a warning; :class:`~clusterdoctor.errors.InputError` is
raised only when nothing valid is left or the input is not an exposition at all.

Timestamps are returned in seconds: the text format writes milliseconds, OpenMetrics seconds.

A saved file can be read in blocks instead of whole (:mod:`~clusterdoctor.observe.control.prom_stream`:
the same result, samples packed as columns; ``prom_series.read_series``: what ``diagnose`` keeps of
a dump, its series, with no sample kept).

The records returned (:class:`MetricSet` and its lookups, the histogram grouping) are
:mod:`clusterdoctor.observe.control.prom_metrics`, re-exported here. Reading a plain dump in a fresh
process imports neither ``re``, ``collections`` nor ``typing`` (issue 26: whole-process time).
"""

from __future__ import annotations

import gc

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control import prom_fast
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
    "Labels",
    "MetricSet",
    "PromSample",
    "parse_prom_text",
    "sniff_prom_text",
]


def _decode(data: bytes | str, warnings: list[str]) -> str:
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
    text = _decode(data, warnings)
    if "\r" in text and "\r\n" in text:  # one character is found by memchr: ~10x faster on 49 MB
        text = text.replace("\r\n", "\n")
    # OpenMetrics when told, or with a final "# EOF" or any "# UNIT" line. The plain pass refuses a file
    # with a "# UNIT" line, so the search for one through the whole text waits until it has.
    maybe_om = openmetrics
    if openmetrics is None:
        maybe_om = text[-256:].rstrip().endswith("# EOF") or text.startswith("# UNIT ")
    if not maybe_om:
        got = prom_fast.parse_blocks(text, ms.families)
        if got is not None:
            ms.samples, n_lines = got
            if not text.endswith("\n"):
                warnings.append(f"line {n_lines}: last line has no newline (file may be truncated)")
            if not ms.samples and not ms.families:
                if not text.strip():
                    raise InputError("empty input, no metrics", path)
                raise InputError("not a Prometheus text exposition (0 unreadable lines, no samples)", path)
            return ms
    ms.openmetrics = bool(maybe_om) or (openmetrics is None and "\n# UNIT " in text)
    from clusterdoctor.observe.control.prom_careful import parse_lines

    return parse_lines(text, ms)


def sniff_prom_text(head: bytes) -> bool:
    """Whether ``head`` (the first KiB of a file) looks like a Prometheus/OpenMetrics exposition: a
    well-formed ``# HELP``/``# TYPE`` line, or sample lines (and comments) only, in the exact shape the
    text formats define. Configuration tables such as /etc/ethertypes or /etc/protocols (a name, a
    number and more words) are not."""
    from clusterdoctor.observe.control.prom_careful import sniff

    return sniff(head)
