"""Dumps of one target read at different times, grouped (see :meth:`MetricWindow.canonical`).

A dump that names itself maps to that name; dumps that do not (``_group_loose``) are compared by their
counters: one process read twice never sees a counter decrease and keeps its start time. One pass
over the series finds every dump's counters; dumps of one counter set are searched in O(n log n) (a
max-tree of their exact sums), other counter sets only where one lies within the other; at most
:data:`GROUP_WORK` comparisons and within the ``seconds`` budget, past either the dumps stay
ungrouped and the window says so in a warning. The answer is the all-pairs one (the hostile tests
keep that as their oracle).
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction
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
        values = _values_by_instance(w, set(members))
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


# comparisons of loose dumps made before the grouping gives up (each dump then stands for itself, with
# a warning): dumps of one counter set that all order in one chain take about three each (66k dumps:
# 4 s); the worst case (sums that tie, counters that never order two dumps) stops here in about 10 s
GROUP_WORK = 1_000_000


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


class _MaxTree:
    """The largest of ``vals[lo:hi]`` in O(log n): the first position whose value passes a bound."""

    def __init__(self, vals: list[Any]) -> None:
        size = 1
        while size < len(vals):
            size *= 2
        t: list[Any] = [-math.inf] * (2 * size)
        t[size : size + len(vals)] = vals
        for i in range(size - 1, 0, -1):
            t[i] = max(t[2 * i], t[2 * i + 1])
        self.size, self.t = size, t

    def first(self, lo: int, hi: int, x: Any, strict: bool) -> int:
        """The first position in ``[lo, hi)`` whose value is above ``x`` (``strict``) or at least
        ``x``; -1 when none."""
        t = self.t

        def go(node: int, nlo: int, nhi: int) -> int:
            if nhi <= lo or nlo >= hi or (t[node] <= x if strict else t[node] < x):
                return -1
            if nhi - nlo == 1:
                return nlo
            mid = (nlo + nhi) // 2
            r = go(2 * node, nlo, mid)
            return r if r >= 0 else go(2 * node + 1, mid, nhi)

        return go(1, 0, self.size)


class _Bucket:
    """The dumps with one set of counters and one start time, in input order: their counter vectors
    (in the order of ``keys``) and, for those of finite values, a max-tree of their sums (a dump
    that precedes another in one process has every counter at most the other's, so a sum at most
    the other's: the tree finds the candidates without looking at the others)."""

    def __init__(self, keys: tuple, start: float | None) -> None:
        self.keys, self.start = keys, start
        self.members: list[int] = []  # positions in ``loose``, ascending
        self.vecs: list[tuple[float, ...]] = []
        self.odd: list[int] = []  # members (indexes into members) whose values are not all finite
        self.tree: _MaxTree | None = None

    def seal(self) -> None:
        sums: list[Any] = []
        for m, v in enumerate(self.vecs):
            if all(math.isfinite(x) for x in v):
                sums.append(sum(Fraction(x) for x in v))  # exact: a rounded sum could tie
            else:
                sums.append(-math.inf)
                self.odd.append(m)
        self.tree = _MaxTree(sums)
        self.sums = sums


def _dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x >= y for x, y in zip(a, b))


def _group_loose(
    w: MetricWindow, loose: list[str], work: int = GROUP_WORK, clock: Any = None
) -> dict[str, str]:
    """Dumps that do not name their target, grouped by process (see :meth:`MetricWindow.canonical`).

    The same answer as comparing every pair in order (for each dump, the first earlier dump it
    precedes, else the first later dump that follows it), found in O(n log n) for dumps of the same
    counters (a max-tree of their sums per counter set and start time) and by looking only at the
    other counter sets one within the other; at most ``work`` comparisons and within the ``seconds``
    budget, past which the dumps are left ungrouped with a warning on ``w``."""
    canon: dict[str, str] = {}
    if len(loose) < 2:
        return canon
    from clusterdoctor.observe.limits import Budget, LimitExceeded

    budget = Budget(w.source or None, clock=clock) if clock is not None else Budget(w.source or None)
    wanted = set(loose)
    values = _values_by_instance(w, wanted)
    starts = _starts_by_instance(w, wanted)
    buckets: dict[tuple[frozenset, float | None], _Bucket] = {}
    where: list[tuple[_Bucket, int] | None] = []  # per dump: its bucket and its place in it
    for n, i in enumerate(loose):
        v = values[i]
        if not v:
            where.append(None)
            continue
        ks = frozenset(v)
        b = buckets.get((ks, starts[i]))
        if b is None:
            b = buckets[(ks, starts[i])] = _Bucket(tuple(sorted(v)), starts[i])
        where.append((b, len(b.members)))
        b.members.append(n)
        b.vecs.append(tuple(v[k] for k in b.keys))
    by_keys: dict[frozenset, list[_Bucket]] = {}
    for (ks, _), b in buckets.items():
        b.seal()
        by_keys.setdefault(ks, []).append(b)
    # the other counter sets one within the other, through each set's rarest counter
    holders: dict[Any, list[frozenset]] = {}
    for ks in by_keys:
        for k in ks:
            holders.setdefault(k, []).append(ks)
    rarest: dict[Any, list[frozenset]] = {}
    rare_of = {ks: min(ks, key=lambda k: (len(holders[k]), k)) for ks in by_keys}
    for ks, r in rare_of.items():
        rarest.setdefault(r, []).append(ks)
    later: dict[str, str] = {}  # dump -> a dump of the same process read later (or equal)
    spent = [0, 1 << 14]  # comparisons made, the next look at the clock

    def spend(k: int = 1) -> None:
        spent[0] += k
        if spent[0] > work:
            raise _TooMuch(f"would compare more than {work:,} pairs")
        if spent[0] >= spent[1]:
            spent[1] = spent[0] + (1 << 14)
            budget.check_time()

    def scan(b: _Bucket, n: int, sdv: dict, found: list[int]) -> None:
        """Each member of ``b`` compared with dump ``n`` one by one (``found``: first before, after)."""
        for j in b.members:
            spend()
            if j < n and j < found[0] and _order(values[loose[j]], sdv) == 1:
                found[0] = j
            elif n < j < found[1] and _order(sdv, values[loose[j]]) in (-1, 0):
                found[1] = j

    try:
        related: dict[frozenset, list[frozenset]] = {}
        for ks in by_keys:
            spend(len(holders[rare_of[ks]]) + len(ks))
            cands = {c for c in holders[rare_of[ks]] if c > ks}
            for k in ks:
                cands.update(c for c in rarest.get(k, ()) if c < ks)
            related[ks] = sorted(cands, key=sorted)
        for n, d in enumerate(loose):
            spend()
            place = where[n]
            if place is None:
                continue
            bd, md = place
            vd, sd, sdv = bd.vecs[md], bd.sums[md], values[d]
            found = [n, len(loose)]  # the first dump before n that d precedes; after n that follows d
            keys = frozenset(bd.keys)
            for b in by_keys[keys]:
                if b.start is not None and bd.start is not None and b.start != bd.start:
                    continue
                if not math.isfinite(sd) or b.odd:  # values not all finite: one by one
                    scan(b, n, sdv, found)
                    continue
                assert b.tree is not None
                pos = bisect.bisect_left(b.members, n)  # members before n: [0, pos)
                # an earlier dump of these counters that d precedes: every counter >=, one >, so
                # its (exact) sum > d's
                lo = 0
                while (m := b.tree.first(lo, pos, sd, True)) >= 0 and b.members[m] < found[0]:
                    spend()
                    if _dominates(b.vecs[m], vd):
                        found[0] = b.members[m]
                        break
                    lo = m + 1
                # a later dump of these counters that follows d: every counter >=, so its sum >=
                lo = pos + 1 if pos < len(b.members) and b.members[pos] == n else pos
                while (m := b.tree.first(lo, len(b.members), sd, False)) >= 0 and b.members[m] < found[1]:
                    spend()
                    if _dominates(b.vecs[m], vd):
                        found[1] = b.members[m]
                        break
                    lo = m + 1
            for ks in related[keys]:
                for b in by_keys[ks]:
                    if b.start is None or bd.start is None or b.start == bd.start:
                        scan(b, n, sdv, found)
            if found[0] < n:
                later[d] = loose[found[0]]
            elif found[1] < len(loose):
                later[d] = loose[found[1]]
    except (LimitExceeded, _TooMuch) as e:
        what = f"took longer than {budget.limits.seconds:g} s" if isinstance(e, LimitExceeded) else str(e)
        w.warnings.append(
            f"{w.source or 'metrics'}: {len(loose):,} dumps without identity: grouping them {what}; "
            "each dump is read as its own target"
        )
        return {}
    end = _chain_ends(loose, later)
    for i in loose:
        if end[i] != i:
            canon[i] = end[i]
    for i in loose:  # the latest dump of a group names the group
        if i in later and i not in canon:
            canon[i] = i
    return canon


def _chain_ends(loose: list[str], later: dict[str, str]) -> dict[str, str]:
    """Where following ``later`` from each dump ends (before a dump already passed), each chain
    walked once (walking it again from every dump of a 66k-long chain was quadratic)."""
    end: dict[str, str] = {}
    for i in loose:
        if i in end:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        j = i
        while j not in end and j not in on_path and j in later:
            path.append(j)
            on_path.add(j)
            j = later[j]
        if j in on_path:  # a cycle (counters never make one): each dump of the path walked alone
            for p in path:
                k, seen = p, {p}
                while k in later and later[k] not in seen:
                    k = later[k]
                    seen.add(k)
                end[p] = k
            continue
        tail = end.get(j, j)
        end[j] = tail
        for p in path:
            end[p] = tail
    return end
