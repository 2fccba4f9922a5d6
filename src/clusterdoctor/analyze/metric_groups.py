"""Dumps of one target read at different times, grouped (see :meth:`MetricWindow.canonical`).

A dump that names itself maps to that name; dumps that do not (``_group_loose``) are compared by their
counters: one process read twice never sees a counter decrease and keeps its start time. The
comparison is linear in the series (one pass for every dump's counters) and looks only at the pairs
of dumps that can compare, at most :data:`GROUP_WORK` of them and within the ``seconds`` budget; past
either the dumps stay ungrouped and the window says so in a warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterdoctor.analyze.metric_window import MetricWindow

__all__ = ["GROUP_WORK", "group_dumps"]


def _counter_values(w: MetricWindow, instance: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The counters (``_total``, histogram ``_bucket``/``_count``, counter-typed) of one dump."""
    out = {}
    for name, lst in w.series.items():
        family = name.removesuffix("_bucket").removesuffix("_count")
        if (
            not (name.endswith(("_total", "_bucket", "_count")) or w.types.get(name) == "counter")
            or w.types.get(family) == "gauge"
        ):
            continue
        for s in lst:
            if s.labels.get("instance", "") == instance and s.points:
                rest = tuple(sorted((k, v) for k, v in s.labels.items() if k != "instance"))
                out[(name, rest)] = s.points[-1][1]
    return out


def _start_time(w: MetricWindow, instance: str) -> float | None:
    for s in w.series.get("process_start_time_seconds", []):
        if s.labels.get("instance", "") == instance and s.points:
            return s.points[-1][1]
    return None


def _order(a: dict, b: dict) -> int | None:
    """-1 when dump ``a`` can precede ``b`` in one process (b's counters ⊇ a's, none lower), 1 for the
    reverse, 0 when equal, None when they cannot be one process read twice."""
    if not a or not b:
        return None
    ka, kb = set(a), set(b)
    common = ka & kb
    if not common:
        return None
    if ka <= kb and all(b[k] >= a[k] for k in common):
        return 0 if ka == kb and all(b[k] == a[k] for k in common) else -1
    if kb <= ka and all(a[k] >= b[k] for k in common):
        return 1
    return None


def group_dumps(w: MetricWindow) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(instance -> the target it stands for, latest dump -> the earlier dumps it supersedes)."""
    canon = {i: key for i, key in w.instance_identity.items() if key}
    canon.update(_group_loose(w, sorted(i for i in w.snapshot_instances if i not in canon)))
    groups: dict[str, list[str]] = {}
    for i in sorted(w.snapshot_instances):
        groups.setdefault(canon.get(i, i), []).append(i)
    earlier: dict[str, list[str]] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        values = {i: _counter_values(w, i) for i in members}
        chain = _time_order(members, values)
        if chain is not None:
            earlier[chain[-1]] = chain[:-1]
    return canon, earlier


def _time_order(members: list[str], values: dict[str, dict]) -> list[str] | None:
    """The dumps of one target earliest first, when their counters order them (None otherwise:
    a restart between them, or dumps that do not compare)."""
    import functools

    def cmp(a: str, b: str) -> int:
        o = _order(values[a], values[b])
        if o is None:
            raise ValueError
        return o

    try:
        chain = sorted(members, key=functools.cmp_to_key(cmp))
    except ValueError:
        return None
    if any(_order(values[a], values[b]) not in (-1, 0) for a, b in zip(chain, chain[1:])):
        return None
    return chain


# pairs of loose dumps compared before the grouping gives up (each dump then stands for itself, with a
# warning): thousands of dumps without identity are an input no one took by hand, and comparing every
# pair of them is quadratic (a dump with 20k instances took minutes)
GROUP_WORK = 2_000_000


def _values_by_instance(w: MetricWindow, instances: set[str]) -> dict[str, dict]:
    """:func:`_counter_values` of every instance in ``instances``, in one pass over the series."""
    out: dict[str, dict] = {i: {} for i in instances}
    for name, lst in w.series.items():
        family = name.removesuffix("_bucket").removesuffix("_count")
        if (
            not (name.endswith(("_total", "_bucket", "_count")) or w.types.get(name) == "counter")
            or w.types.get(family) == "gauge"
        ):
            continue
        for s in lst:
            inst = s.labels.get("instance", "")
            if inst in out and s.points:
                rest = tuple(sorted((k, v) for k, v in s.labels.items() if k != "instance"))
                out[inst][(name, rest)] = s.points[-1][1]
    return out


def _starts_by_instance(w: MetricWindow, instances: set[str]) -> dict[str, float | None]:
    """:func:`_start_time` of every instance in ``instances`` (the first series of each wins)."""
    out: dict[str, float | None] = {}
    for s in w.series.get("process_start_time_seconds", []):
        inst = s.labels.get("instance", "")
        if inst in instances and inst not in out and s.points:
            out[inst] = s.points[-1][1]
    return {i: out.get(i) for i in instances}


class _TooMuch(Exception):
    pass


def _group_loose(
    w: MetricWindow, loose: list[str], work: int = GROUP_WORK, clock: Any = None
) -> dict[str, str]:
    """Dumps that do not name their target, grouped by process (see :meth:`MetricWindow.canonical`).

    Linear in the series (one pass for every dump's counters); the pairs compared are only those
    that can compare (their counter sets one within the other: found through each dump's rarest
    counter), at most ``work`` of them and within the ``seconds`` budget, past which the dumps are
    left ungrouped with a warning on ``w``. The same answer as comparing every pair in order: for
    each dump, the first earlier dump it precedes, else the first later dump that follows it."""
    canon: dict[str, str] = {}
    if len(loose) < 2:
        return canon
    from clusterdoctor.observe.limits import Budget, LimitExceeded

    budget = Budget(w.source or None, clock=clock) if clock is not None else Budget(w.source or None)
    wanted = set(loose)
    values = _values_by_instance(w, wanted)
    starts = _starts_by_instance(w, wanted)
    # every dump by each of its counters, and by its rarest counter (the candidates for a pair)
    holders: dict[Any, list[int]] = {}
    for n, i in enumerate(loose):
        for k in values[i]:
            holders.setdefault(k, []).append(n)
    rarest: dict[Any, list[int]] = {}
    for n, i in enumerate(loose):
        if values[i]:
            r = min(values[i], key=lambda k: (len(holders[k]), k))
            rarest.setdefault(r, []).append(n)
    later: dict[str, str] = {}  # dump -> a dump of the same process read later (or equal)
    done, next_check = 0, 1 << 14
    try:
        for n, d in enumerate(loose):
            vd = values[d]
            if not vd:
                continue
            # a dump comparable with d holds every counter of d (so d's rarest one) or only counters
            # of d (so its own rarest one is one of d's)
            r = min(vd, key=lambda k: (len(holders[k]), k))
            cands = set(holders[r])
            for k in vd:
                cands.update(rarest.get(k, ()))
            cands.discard(n)
            done += len(cands)
            if done > work:
                raise _TooMuch(f"would compare more than {work:,} pairs")
            if done >= next_check:
                next_check = done + (1 << 14)
                budget.check_time()
            found = None
            for j in sorted(cands):
                a, b = (loose[j], d) if j < n else (d, loose[j])
                if starts[a] is not None and starts[b] is not None and starts[a] != starts[b]:
                    continue
                o = _order(values[a], values[b])
                if o is None:
                    continue
                if j < n and o == 1:  # d precedes the earlier dump j: pair (j, d) made d "first"
                    found = loose[j]
                    break
                if j > n and o != 1:  # the pair (d, j) with d first
                    found = loose[j]
                    break
            if found is not None:
                later[d] = found
    except (LimitExceeded, _TooMuch) as e:
        what = f"took longer than {budget.limits.seconds:g} s" if isinstance(e, LimitExceeded) else str(e)
        w.warnings.append(
            f"{w.source or 'metrics'}: {len(loose):,} dumps without identity: grouping them {what}; "
            "each dump is read as its own target"
        )
        return {}
    for i in loose:
        j, seen = i, {i}
        while j in later and later[j] not in seen:
            j = later[j]
            seen.add(j)
        if j != i:
            canon[i] = j
    for i in loose:  # the latest dump of a group names the group
        if i in later and i not in canon:
            canon[i] = i
    return canon
