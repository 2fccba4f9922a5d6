"""The detector on the kinds of fail-slow it was not first tuned on (issue 20): a rank slow from step
1, two stragglers at once, short periodic stops, a checkpoint every few steps (storage), a slow link
that costs the job little but that the link tests localise, and contention that passed (info, not an
alarm). Synthetic step tables with the noise of the bench's clean runs (fixed seeds), so each test
takes milliseconds; the real runs of each of these faults are in bench/failslow.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.failslow import StepTable, detect
from clusterdoctor.observe.watch.records import LinkRecord

STEP = 0.040  # 40 ms steps, as the lab's job on a shared 2-core machine


def _table(R=4, S=100, seed=0, noise=0.1, late=None, spikes=None, io=None, links=(), slow_coll=None):
    """R ranks x S steps of a synchronous job. ``late``: {rank: (from_col, seconds)} own work added (the
    others wait that long); ``spikes``: {rank: (cols, seconds, stall)}; ``io``: {rank: (cols, bytes)};
    ``slow_coll``: (from_col, seconds) added to every rank's collective."""
    rng = np.random.default_rng(seed)
    own = STEP * 0.4 * (1 + noise * np.abs(rng.standard_normal((R, S))))
    coll0 = STEP * 0.5 * (1 + noise * np.abs(rng.standard_normal((R, S))))
    stall = np.zeros((R, S))
    extra = np.zeros((R, S))
    for r, (c0, s) in (late or {}).items():
        extra[r, c0:] += s
    for r, (cols, s, stalled) in (spikes or {}).items():
        extra[r, cols] += s
        if stalled:
            stall[r, cols] += s
    own = own + extra
    ready = own.max(axis=0)
    wait = ready[None, :] - own + STEP * 0.05  # the others wait for the last one to be ready
    comm = np.zeros(S)
    if slow_coll is not None:
        comm[slow_coll[0] :] = slow_coll[1]
    wait = wait + comm[None, :]
    coll = coll0 * 0 + wait + STEP * 0.05
    wall = own + coll
    t = 1.7e9 + np.cumsum(wall.max(axis=0))[None, :].repeat(R, 0)
    data = np.full((R, S), STEP * 0.05)
    iot = None
    if io:
        iot = np.zeros((R, S))
        for r, (cols, b) in io.items():
            iot[r, cols] += b
    return StepTable(
        list(range(R)), np.arange(1, S + 1), t, wall, own, coll, wait, data, stall, io=iot, links=list(links)
    )


def _alarms(res):
    return [e for e in res.episodes if e.level != "info"]


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000))
def test_clean_job_raises_no_alarm(seed):
    assert _alarms(detect(_table(seed=seed, noise=0.3))) == []


def test_rank_slow_from_its_first_step_is_named_with_onset_at_the_start():
    """More work per batch from step 1: no healthy past of its own, but slower than its peers at the
    same step; named a compute straggler (not 'its process did not run'), onset at step 1."""
    res = detect(_table(late={3: (0, 0.5 * STEP)}))
    (ep,) = _alarms(res)
    assert (ep.kind, ep.rank, ep.onset_step) == ("compute", 3, 1)
    assert ep.detail["stall_s"] == 0 and ep.factor > 1.3
    assert "no rank that was not late" in ep.why


def test_two_stragglers_at_once_are_both_named():
    res = detect(_table(late={1: (40, 0.6 * STEP), 3: (40, 0.6 * STEP)}))
    named = sorted((e.kind, e.rank) for e in _alarms(res))
    assert named == [("compute", 1), ("compute", 3)]
    assert all(38 <= e.onset_step <= 45 for e in _alarms(res))


def test_short_periodic_stops_are_accumulated_per_period():
    """A 300 ms stop of one rank every 25 steps: each one step, far too short for the change point."""
    cols = list(range(20, 200, 25))
    res = detect(_table(S=200, spikes={2: (cols, 0.3, True)}))
    (ep,) = _alarms(res)
    assert (ep.kind, ep.periodic_of, ep.rank) == ("periodic", "compute", 2)
    assert ep.period_steps == 25 and ep.recurrences == len(cols)
    assert ep.onset_step == 21 and ep.detect_step == cols[3] + 1  # the fourth stop makes the period


def test_checkpoint_every_ten_steps_is_storage():
    cols = list(range(25, 100, 10))
    res = detect(_table(spikes={0: (cols, 2.5 * STEP, False)}, io={0: (cols, 32 << 20)}))
    (ep,) = _alarms(res)
    assert (ep.kind, ep.rank) == ("storage", 0)
    assert ep.period_steps == 10 and "MiB of storage" in ep.why


def test_random_spikes_are_not_a_period():
    rng = np.random.default_rng(5)
    cols = sorted(rng.choice(np.arange(5, 200), 8, replace=False).tolist())
    res = detect(_table(S=200, spikes={1: (cols, 0.3, True)}))
    assert _alarms(res) == []


def test_contention_that_passed_is_info_not_an_alarm():
    """Twelve steps of outside load on one rank, then back to normal: reported, as info."""
    res = detect(_table(late={2: (40, 0.8 * STEP)}, spikes={2: (list(range(52, 100)), -0.8 * STEP, False)}))
    eps = [e for e in res.episodes if e.rank == 2]
    assert eps and all(e.level == "info" for e in eps)
    assert _alarms(res) == []


def _links(slow: int, t0: float, t1: float) -> list[LinkRecord]:
    out = []
    for t in np.linspace(t0, t1, 6):
        for src in range(4):
            for dst in ((src + 1) % 4, (src - 1) % 4):
                s = 0.004 if slow in (src, dst) else 0.001
                out.append(LinkRecord(src, dst, 1 << 20, s, float(t)))
    return out


def test_slow_link_that_costs_little_is_reported_when_the_link_tests_localise_it():
    """A 1.4x collective slowdown (an htb limit on one rank's link): below the 1.8x an unlocalised
    collective slowdown needs, but the probe's link tests name the rank."""
    tb = _table(S=120, slow_coll=(50, 0.25 * STEP))
    t = np.nanmedian(tb.t, axis=0)
    tb.links = _links(1, float(t[50]), float(t[-1]))
    (ep,) = _alarms(detect(tb))
    assert (ep.kind, ep.rank) == ("communication", 1)
    assert 1.2 < ep.factor < 1.6 and "link tests" in ep.why


def test_slow_collective_without_link_tests_names_no_rank():
    """Without per-link times the collectives' slowdown is the job's: no rank (never a victim) named."""
    res = detect(_table(S=120, slow_coll=(50, 1.2 * STEP)))
    assert [(e.kind, e.rank) for e in _alarms(res)] == [("communication", None)]


@pytest.mark.parametrize("kind", ["compute", "data"])
def test_every_alarm_says_why_this_rank(kind):
    tb = _table(late={1: (30, 0.7 * STEP)})
    if kind == "data":
        tb.data[1, 30:] += 0.7 * STEP
    (ep,) = _alarms(detect(tb))
    assert (ep.kind, ep.rank) == (kind, 1) and ep.why
