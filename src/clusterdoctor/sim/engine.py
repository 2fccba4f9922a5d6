"""The simulation engines: the FGD paper's arrival protocol and a timed discrete-event loop.

``run_fgd_protocol`` reproduces the FGD artifact's experiment (``scripts/generate_config_and_run.py``
with ``--shuffle-pod=true -tune 1.3``): the pod list is shuffled with the seed, then random copies of
its pods are appended until the requested GPUs reach ``tune`` x cluster GPU capacity; pods arrive one
by one and never leave; a pod that fits nowhere fails and is not retried. After every pod the
allocated GPU milli and the arrived GPU milli are recorded; the allocation curve is the FGD table row.

Both engines are deterministic for a seed: one ``numpy.random.Generator`` drives the shuffle, the
copies, the node order and every tie-break.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from clusterdoctor.sim.cluster import Cluster
from clusterdoctor.sim.frag import node_frag, typical_pods
from clusterdoctor.sim.metrics import discrete_curve
from clusterdoctor.sim.policies import get_policy
from clusterdoctor.sim.policies.base import Policy, SimContext
from clusterdoctor.sim.state import ClusterState, intern_specs
from clusterdoctor.sim.traces import PodTrace

FGD_TUNE = 1.3  # FGD artifact run_scripts/generate_run_scripts.py: tune_ratio 1.3
FGD_SEEDS = tuple(range(42, 52))  # tune seeds 42..51


@dataclass
class ProtocolResult:
    """Outcome of one FGD-protocol run."""

    policy: str
    seed: int
    tune: float
    total_gpus: int
    pods_arrived: int
    pods_failed: int
    arrived_milli: np.ndarray  # after each pod
    used_milli: np.ndarray
    frag_milli: np.ndarray
    allocation_curve: dict[int, float]
    frag_curve: dict[int, float]
    seconds: float
    notes: list[str] = field(default_factory=list)
    migrations: int = 0  # defrag policies: pods moved to make room
    restart_gpu_hours: float = 0.0  # what those moves cost (each pod's restart time x its GPUs)
    power_at_end: dict | None = None  # sim.energy.PowerSnapshot.as_dict() after the last arrival
    # {arrived % of capacity: (kW all nodes on, kW empty nodes asleep, useful TFLOPS)} at each whole percent
    power_curve: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    first_failed: int = -1  # arrival index of the first pod that failed (-1: none)

    def energy_summary(self) -> dict[str, float]:
        """Mean power over the arrivals (pods arrive at a steady rate: proportional to energy) with all
        nodes on and with empty nodes asleep, the same up to 80 % arrived, and joules per useful TFLOP."""
        if not self.power_curve:
            return {}
        v = np.array(list(self.power_curve.values()))
        low = np.array([x for k, x in self.power_curve.items() if k <= 80])
        tf = float(v[:, 2].sum())
        return {
            "mean_kw_all_on": round(float(v[:, 0].mean()), 2),
            "mean_kw_sleep": round(float(v[:, 1].mean()), 2),
            # up to 80 % arrived every policy places every pod: equal work, so power compares directly
            "mean_kw_all_on_to80": round(float(low[:, 0].mean()), 2) if len(low) else float("nan"),
            "mean_kw_sleep_to80": round(float(low[:, 1].mean()), 2) if len(low) else float("nan"),
            "j_per_tflop_all_on": round(float(v[:, 0].sum()) * 1000 / tf, 4) if tf else float("nan"),
            "j_per_tflop_sleep": round(float(v[:, 1].sum()) * 1000 / tf, 4) if tf else float("nan"),
        }

    @property
    def final_allocation(self) -> float:
        """Allocated GPUs (% of capacity) at the last column of the curve (130 % load by default)."""
        if not self.allocation_curve:
            return 0.0
        return self.allocation_curve[max(self.allocation_curve)]

    def as_dict(self) -> dict:
        return {
            "policy": self.policy,
            "seed": self.seed,
            "tune": self.tune,
            "total_gpus": self.total_gpus,
            "pods_arrived": self.pods_arrived,
            "pods_failed": self.pods_failed,
            "final_allocation": self.final_allocation,
            "allocation_curve": {str(k): v for k, v in self.allocation_curve.items()},
            "fragmentation_curve": {str(k): v for k, v in self.frag_curve.items()},
            "seconds": round(self.seconds, 3),
            "migrations": self.migrations,
            "restart_gpu_hours": round(self.restart_gpu_hours, 3),
            "power_at_end": self.power_at_end,
            "energy": self.energy_summary(),
            "notes": self.notes,
        }


def fgd_arrival_order(pods: PodTrace, total_gpus: int, tune: float, rng: np.random.Generator) -> np.ndarray:
    """Pod indices in arrival order: the trace shuffled, then random copies (with replacement) appended
    while the requested GPU milli stays within ``tune`` x capacity, or random pods dropped when the
    trace asks for more (FGD ``SortClusterPods`` + ``TunePodsByNodeTotalResource``)."""
    n = len(pods)
    names = np.array(pods.names, dtype=object)
    order = np.argsort(names, kind="stable")
    order = order[rng.permutation(n)]
    if tune <= 0:
        return order
    per_gpu = np.asarray(pods.gpu_milli, dtype=np.int64)
    total_req = np.asarray(pods.num_gpu, dtype=np.int64) * per_gpu
    target = tune * total_gpus * 1000
    cum = int(total_req.sum())
    if cum > target:
        keep = list(order)
        while cum > target and keep:
            j = int(rng.integers(len(keep)))
            cum -= int(total_req[keep[j]])
            keep.pop(j)
        return np.asarray(keep, dtype=np.int64)
    extra = []
    while True:  # FGD's tuneUpPods stops at the first copy whose per-GPU milli would overshoot
        j = int(rng.integers(n))
        if cum + int(per_gpu[j]) > target:
            break
        cum += int(total_req[j])
        extra.append(j)
    return np.concatenate([order, np.asarray(extra, dtype=np.int64)])


class _Sim:
    """Shared machinery: state, specs, policy and the score matrix."""

    def __init__(self, cluster: Cluster, pods: PodTrace, policy: Policy, rng: np.random.Generator,
                 typical_from: PodTrace | None = None, tie_break: str = "order", extra: dict | None = None) -> None:  # fmt: skip
        self.state = ClusterState(cluster)
        self.specs, self.pod_spec = intern_specs(pods, self.state.type_names)
        self.typical = typical_pods(typical_from or pods, self.state.type_names)
        node_rank = np.empty(self.state.n, dtype=np.int64)
        node_rank[rng.permutation(self.state.n)] = np.arange(self.state.n)
        self.ctx = SimContext(self.state, self.specs, self.typical, rng, node_rank, dict(extra or {}))
        self.policy = policy
        policy.bind(self.ctx)
        self.rng = rng
        self.tie_break = tie_break
        self.all_rows = np.arange(self.state.n)
        self.matrix = None if policy.random_node else policy.score_rows(self.all_rows)
        st = self.state
        self.frag = node_frag(st.cpu_left, st.gl, st.type_id, self.typical)
        self.frag_total = float(self.frag.sum())
        self.warnings = list(pods.warnings)
        dead = [c for c in range(len(self.specs.constraints)) if c and not self.specs.access[c].any()]
        if dead:  # pods that ask only for GPU models no node has: they can never be placed
            cnt = int(np.isin(self.specs.con[self.pod_spec], dead).sum())
            names = ", ".join(sorted(self.specs.constraints[c] for c in dead))[:80]
            self.warnings.append(f"{cnt} pods ask only for GPU models no node has ({names}): they never fit")

    def choose(self, s: int) -> int:
        """Node for a pod of full spec ``s``, or -1 when it fits nowhere."""
        feas = self.state.fits(self.specs, s)
        cand = np.flatnonzero(feas)
        if cand.size == 0:
            return -1
        if self.matrix is None:  # random node among feasible ones
            return int(cand[self.rng.integers(cand.size)]) if cand.size > 1 else int(cand[0])
        sc = self.matrix[cand, self.specs.score_id[s]]
        floor = getattr(self.policy, "min_score", None)
        if floor is not None:  # the policy would rather wait than take these nodes
            keep = sc >= floor
            if not keep.any():
                return -1
            cand, sc = cand[keep], sc[keep]
        cand = cand[sc == sc.max()]
        if cand.size == 1:
            return int(cand[0])
        if self.tie_break == "random":
            return int(cand[self.rng.integers(cand.size)])
        return int(cand[np.argmin(self.ctx.node_rank[cand])])

    def changed(self, node: int) -> None:
        st = self.state
        row = np.array([node])
        if self.matrix is not None:
            self.matrix[node] = self.policy.score_rows(row)[0]
        f = float(node_frag(st.cpu_left[row], st.gl[row], st.type_id[row], self.typical)[0])
        self.frag_total += f - self.frag[node]
        self.frag[node] = f

    def place(self, node: int, s: int) -> list[int]:
        sp = self.specs
        gpus = self.policy.pick_gpus(node, s)
        tag = int(sp.s_tag[sp.score_id[s]])
        self.state.place(node, int(sp.cpu[s]), int(sp.mem[s]), int(sp.milli[s]), gpus, tag)
        self.policy.placed(node, gpus, s)
        self.changed(node)
        return gpus

    def place_on(self, node: int, s: int, gpus: list[int]) -> None:
        """Place a pod of full spec ``s`` on the given GPUs of ``node`` (a migration's chosen target)."""
        sp = self.specs
        tag = int(sp.s_tag[sp.score_id[s]])
        self.state.place(node, int(sp.cpu[s]), int(sp.mem[s]), int(sp.milli[s]), gpus, tag)
        self.policy.placed(node, gpus, s)
        self.changed(node)

    def remove(self, node: int, s: int, gpus: list[int]) -> None:
        sp = self.specs
        tag = int(sp.s_tag[sp.score_id[s]])
        self.state.remove(node, int(sp.cpu[s]), int(sp.mem[s]), int(sp.milli[s]), gpus, tag)
        self.policy.removed(node, gpus, s)
        self.changed(node)


def run_fgd_protocol(cluster: Cluster, pods: PodTrace, policy: str | Policy = "fgd", seed: int = 42,
                     tune: float = FGD_TUNE, limit: int | None = None, progress=None) -> ProtocolResult:  # fmt: skip
    """One FGD-protocol run (see the module docstring). ``limit`` stops after that many arrivals (tests);
    ``progress(done, total)`` is called now and then."""
    t0 = time.perf_counter()
    pol = get_policy(policy) if isinstance(policy, str) else policy
    rng = np.random.default_rng(seed)
    total_gpus = cluster.total_gpus
    order = fgd_arrival_order(pods, total_gpus, tune, rng)
    if limit is not None:
        order = order[:limit]
    sim = _Sim(cluster, pods, pol, rng, typical_from=pods)
    sp = sim.specs
    dfg = None
    if getattr(pol, "defrag", None):
        from clusterdoctor.sim.defrag import Defragmenter

        dfg = Defragmenter(sim, **pol.defrag)
    n = len(order)
    arrived = np.empty(n, dtype=np.int64)
    used = np.empty(n, dtype=np.int64)
    frag = np.empty(n, dtype=np.float64)
    a = 0
    failed, first_failed = 0, -1
    pod_spec = sim.pod_spec
    step = max(1, n // 100)
    from clusterdoctor.sim.energy import PowerTable

    ptab = PowerTable(sim.state.type_names)
    pct_milli, next_pct, pcurve = total_gpus * 10, 1, {}
    for i, p in enumerate(order):
        s = int(pod_spec[p])
        a += int(sp.num[s] * sp.milli[s])
        node = sim.choose(s)
        if node >= 0:
            gpus = sim.place(node, s)
            if dfg is not None:
                dfg.placed_pod(int(p), node, s, gpus)
        elif dfg is not None and (node := dfg.try_admit(int(p), s)) >= 0:
            dfg.placed_pod(int(p), node, s, sim.place(node, s))
        else:
            if not failed:
                first_failed = i
            failed += 1
        arrived[i] = a
        used[i] = sim.state.used_milli
        frag[i] = sim.frag_total
        if a >= next_pct * pct_milli:  # power at each whole percent of capacity arrived
            snap = ptab.snapshot(sim.state)
            while a >= next_pct * pct_milli:
                pcurve[next_pct] = (snap.all_on_w / 1000, snap.sleep_w / 1000, snap.useful_tflops)
                next_pct += 1
        if progress is not None and i % step == 0:
            progress(i, n)
    if progress is not None:
        progress(n, n)
    notes = list(sim.warnings)
    if cluster.topology_synthetic:
        notes.append("intra-node topology is synthetic")
    if dfg is not None:
        d = dfg.stats
        notes.append(
            f"defrag: {d.migrations} migrations for {dfg.placed} placed pods (budget {pol.defrag['per_100']:g}"
            f"/100), {d.admitted} pods admitted by them, {d.gpu_seconds_lost / 3600:.2f} GPU-hours of restarts"
        )
    return ProtocolResult(
        pol.name, seed, tune, total_gpus, n, failed, arrived, used, frag,
        discrete_curve(arrived, used, total_gpus), discrete_curve(arrived, frag, total_gpus),
        time.perf_counter() - t0, notes,
        dfg.stats.migrations if dfg else 0, dfg.stats.gpu_seconds_lost / 3600 if dfg else 0.0,
        ptab.snapshot(sim.state).as_dict(), pcurve, first_failed,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# Timed discrete-event engine
# ---------------------------------------------------------------------------------------------------

DEFAULT_DURATION_S = 3600.0
_FINISH, _ARRIVE, _TICK = 0, 1, 2


@dataclass
class TimedResult:
    """Outcome of a timed run (queueing, JCT, energy, cost)."""

    policy: str
    seed: int
    jobs: int
    finished: int
    never_started: int
    makespan_s: float
    queue_delay_s: np.ndarray
    jct_s: np.ndarray
    timeline_t: np.ndarray
    timeline_used_milli: np.ndarray
    timeline_waiting: np.ndarray
    total_gpus: int
    gpu_hours: float
    energy_kwh: float
    cost_usd_fleet: float
    cost_usd_energy: float
    preemptions: int
    migrations: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    priority: np.ndarray | None = None  # per job, aligned with queue_delay_by_job
    queue_delay_by_job: np.ndarray | None = None  # nan: never started
    useful_tflop: float = 0.0  # FP16 TFLOP delivered by allocated GPU shares (sim.power.fp16_tflops)
    energy_kwh_sleep: float = 0.0  # the same run with the GPUs of nodes that run nothing switched off
    busy_energy_kwh: float = 0.0  # the busy-above-idle part of energy_kwh: what GPU clocks move
    clock_policy: str = "max"
    mean_clock_rel: float = 1.0  # started jobs' relative clock, weighted by allocated GPU share

    def queue_delay_by_priority(self) -> dict[str, dict[str, float | None]]:
        from clusterdoctor.sim.metrics import percentiles

        if self.priority is None or self.queue_delay_by_job is None:
            return {}
        return {
            str(int(p)): percentiles(self.queue_delay_by_job[self.priority == p])
            for p in np.unique(self.priority)
        }

    @property
    def mean_allocation(self) -> float:
        from clusterdoctor.sim.metrics import time_weighted_mean

        if self.timeline_t.size == 0:
            return 0.0
        end = float(self.timeline_t[-1])
        v = time_weighted_mean(
            self.timeline_t, self.timeline_used_milli, end if end > self.timeline_t[0] else end + 1
        )
        return 100.0 * v / (self.total_gpus * 1000)

    def as_dict(self) -> dict:
        from clusterdoctor.sim.metrics import percentiles

        alloc = 100.0 * self.timeline_used_milli / max(self.total_gpus * 1000, 1)
        idx = np.unique(np.linspace(0, max(len(alloc) - 1, 0), min(len(alloc), 400)).astype(np.int64))
        return {
            "policy": self.policy,
            "seed": self.seed,
            "jobs": self.jobs,
            "finished": self.finished,
            "never_started": self.never_started,
            "makespan_s": self.makespan_s,
            "queue_delay_s": percentiles(self.queue_delay_s),
            "queue_delay_s_by_priority": self.queue_delay_by_priority(),
            "jct_s": percentiles(self.jct_s),
            "mean_allocation_pct": round(self.mean_allocation, 3),
            "idle_share_pct": round(100.0 - self.mean_allocation, 3),
            "gpu_hours": round(self.gpu_hours, 3),
            "energy_kwh": round(self.energy_kwh, 3),
            "energy_kwh_idle_nodes_asleep": round(self.energy_kwh_sleep, 3),
            "energy_kwh_busy_above_idle": round(self.busy_energy_kwh, 3),
            "clock_policy": self.clock_policy,
            "mean_clock_rel": round(self.mean_clock_rel, 4),
            "j_per_useful_tflop": round(self.energy_kwh * 3.6e6 / self.useful_tflop, 4)
            if self.useful_tflop
            else None,
            "cost_usd": {"fleet": round(self.cost_usd_fleet, 2), "energy": round(self.cost_usd_energy, 2)},
            "preemptions": self.preemptions,
            "migrations": self.migrations,
            "allocation_timeline": [[float(self.timeline_t[i]), round(float(alloc[i]), 3)] for i in idx]
            if len(alloc)
            else [],
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
        }


def job_times(pods: PodTrace) -> tuple[np.ndarray, np.ndarray]:
    """(arrival, duration) per pod from the trace's creation/deletion times; pods without a usable
    deletion time run ``DEFAULT_DURATION_S`` (the result notes how many)."""
    n = len(pods)
    if pods.creation is None:
        return np.zeros(n), np.full(n, DEFAULT_DURATION_S)
    arr = np.asarray(pods.creation, dtype=np.float64)
    dele = np.asarray(pods.deletion, dtype=np.float64)
    dur = dele - arr
    bad = ~np.isfinite(dur) | (dur <= 0)
    dur[bad] = DEFAULT_DURATION_S
    return arr - np.nanmin(arr), dur


def run_timed(cluster: Cluster, pods: PodTrace, policy: str | Policy = "fgd", seed: int = 1,
              arrivals: np.ndarray | None = None, durations: np.ndarray | None = None,
              priorities: np.ndarray | None = None, usd_per_kwh: float | None = None, pue: float | None = None,
              speed: dict[str, dict[str, float]] | None = None, progress=None,
              clock=None, beta: float | np.ndarray | None = None) -> TimedResult:  # fmt: skip
    """Jobs arrive at their times, wait in a queue (per spec and priority, FIFO within each; any queued job
    that fits starts: greedy backfill), run for their duration and leave. Tidal adds a tick every 30 s:
    during the day (08-20 h) high-priority jobs that wait reclaim nodes from low-priority jobs, and one
    low-priority job per tick may migrate when its node's score is beaten by ``MIGRATION_MIN_GAIN``;
    reclaimed and migrated jobs lose their restart cost (``storage.restart_cost_s``) and are not moved again within
    ``MIGRATION_COOLDOWN_S``.

    ``speed`` ({app: {GPU model: relative speed}}, needs ``pods.app``) makes durations reference work:
    a job runs ``duration / speed`` on a node of that model (heterogeneity; missing entries: 1).

    ``clock`` (a :class:`clusterdoctor.sim.dvfs.ClockPolicy` or its name; default ``max``) sets each
    job's graphics clock at start within its GPU generation's DVFS range; ``beta`` (scalar or per job,
    default 1: compute-bound) says how much of the job's time follows the clock (Hsu-Feng). A lower
    clock lowers the job's busy-above-idle watts (``dvfs.power_factor``) and its progress rate
    (``dvfs.speed_factor``); useful TFLOP counts work done, so it does not change with the clock."""
    import heapq

    from clusterdoctor.sim import dvfs
    from clusterdoctor.sim import power as pw
    from clusterdoctor.sim.policies import tidal as td

    t0 = time.perf_counter()
    pol = get_policy(policy) if isinstance(policy, str) else policy
    rng = np.random.default_rng(seed)
    n = len(pods)
    if arrivals is None or durations is None:
        a2, d2 = job_times(pods)
        arrivals = a2 if arrivals is None else arrivals
        durations = d2 if durations is None else durations
    prio = np.asarray(priorities if priorities is not None else (pods.priority or [1] * n), dtype=np.int64)
    st0_types = sorted({nd.model for nd in cluster.nodes})
    apps = sorted(set(pods.app)) if pods.app else []
    speed_tab = np.ones((max(len(apps), 1), len(st0_types)))
    for ai, a in enumerate(apps):
        for ti, m in enumerate(st0_types):
            speed_tab[ai, ti] = float((speed or {}).get(a, {}).get(m, 1.0))
    sim = _Sim(cluster, pods, pol, rng, tie_break="order", extra={"speed": speed_tab, "speed_apps": apps})
    st, sp = sim.state, sim.specs
    job_app = (
        np.array([apps.index(a) for a in pods.app], dtype=np.int64) if pods.app else np.zeros(n, np.int64)
    )
    rate = np.ones(n)
    clk = dvfs.get_clock_policy(clock or "max") if isinstance(clock, str) or clock is None else clock
    beta_j = np.broadcast_to(np.asarray(dvfs.DEFAULT_BETA if beta is None else beta, dtype=np.float64), (n,))
    clock_of = np.ones(n)  # relative clock each job runs at (1: top clock)
    pfac_of = np.ones(n)  # its busy-above-idle watts as a share of the top clock's
    sf_of = np.ones(n)  # its progress rate as a share of the top clock's
    tidal = isinstance(pol, td.TidalPolicy)
    usd_kwh = pw.USD_PER_KWH if usd_per_kwh is None else usd_per_kwh
    pue_v = pw.PUE if pue is None else pue

    # power per node type
    models = st.type_names
    pm = [pw.power_model(m) for m in models]
    idle_w = np.array([p.idle_w for p in pm])
    dyn_w = np.array([p.peak_w - p.idle_w for p in pm])
    pm_clk = [clk.entry(p) for p in pm]
    gpus_by_type = np.bincount(st.type_id, weights=st.ngpu, minlength=len(models))
    used_by_type = np.zeros(len(models))
    dyn_by_type = np.zeros(len(models))  # allocated milli x power_factor of its job's clock
    work_by_type = np.zeros(len(models))  # allocated milli x speed_factor (useful work rate)
    fleet_rate = float(sum(gpus_by_type[i] * pm[i].usd_per_gpu_hour for i in range(len(models))))

    from clusterdoctor.sim.storage import restart_cost_s

    # a reclaimed or migrated job loses its restart cost, from the storage tier model, per GPU count
    _cost = {k: restart_cost_s(k) for k in set(pods.num_gpu)}
    restart_s = np.array([_cost[k] for k in pods.num_gpu], dtype=np.float64)
    node_of = np.full(n, -1, dtype=np.int64)
    gpus_of: list[list[int]] = [[] for _ in range(n)]
    start = np.full(n, np.nan)
    first_start = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    remaining = np.asarray(durations, dtype=np.float64).copy()
    version = np.zeros(n, dtype=np.int64)
    last_move = np.full(n, -np.inf)
    running_low: set[int] = set()
    on_node: list[set[int]] = [set() for _ in range(st.n)]
    queues: dict[tuple[int, int], list[int]] = {}
    qhead: dict[tuple[int, int], int] = {}
    waiting = 0

    events: list[tuple[float, int, int, int, int]] = []
    seq = 0
    for j in np.argsort(arrivals, kind="stable"):
        events.append((float(arrivals[j]), _ARRIVE, seq, int(j), 0))
        seq += 1
    heapq.heapify(events)
    tick_pending = False

    tl_t: list[float] = []
    tl_u: list[int] = []
    tl_w: list[int] = []
    energy_j = 0.0
    busy_dyn_j = 0.0  # the busy-above-idle part of energy_j (what clocks move)
    sleep_saved_j = 0.0
    tflop_done = 0.0
    tflops_by_type = np.array([pw.fp16_tflops(p) for p in pm])
    gpu_milli_s = 0.0
    last_t = float(arrivals.min()) if n else 0.0
    preempt = migr = 0

    def start_job(j: int, node: int, now: float) -> None:
        nonlocal seq
        s = int(sim.pod_spec[j])
        gpus = sim.place(node, s)
        node_of[j] = node
        gpus_of[j] = gpus
        start[j] = now
        t = int(st.type_id[node])
        x = clk.clock(pm_clk[t], float(beta_j[j]), waiting)
        sf = dvfs.speed_factor(pm_clk[t], x, float(beta_j[j]))
        clock_of[j], pfac_of[j], sf_of[j] = x, dvfs.power_factor(pm_clk[t], x), sf
        rate[j] = speed_tab[job_app[j], t] * sf
        if np.isnan(first_start[j]):
            first_start[j] = now
        used_by_type[st.type_id[node]] += sp.milli[s] * len(gpus)
        dyn_by_type[t] += sp.milli[s] * len(gpus) * pfac_of[j]
        work_by_type[t] += sp.milli[s] * len(gpus) * sf
        on_node[node].add(j)
        if prio[j] == 0:
            running_low.add(j)
        version[j] += 1
        heapq.heappush(events, (now + remaining[j] / rate[j], _FINISH, seq, j, int(version[j])))
        seq += 1

    def stop_job(j: int, now: float) -> None:
        node = int(node_of[j])
        s = int(sim.pod_spec[j])
        used_by_type[st.type_id[node]] -= sp.milli[s] * len(gpus_of[j])
        t = int(st.type_id[node])
        dyn_by_type[t] -= sp.milli[s] * len(gpus_of[j]) * pfac_of[j]
        work_by_type[t] -= sp.milli[s] * len(gpus_of[j]) * sf_of[j]
        sim.remove(node, s, gpus_of[j])
        on_node[node].discard(j)
        running_low.discard(j)
        node_of[j] = -1
        version[j] += 1

    def enqueue(j: int) -> None:
        nonlocal waiting
        key = (-int(prio[j]), int(sim.pod_spec[j]))
        queues.setdefault(key, []).append(j)
        qhead.setdefault(key, 0)
        waiting += 1

    def drain(now: float, node_hint: int | None) -> None:
        """Start queued jobs that fit now (all groups when ``node_hint`` is None, else those whose head
        fits on the node that just gained resources)."""
        nonlocal waiting
        for key in sorted(queues):
            q, h = queues[key], qhead[key]
            s = key[1]
            while h < len(q):
                if node_hint is not None and not st.fits(sp, s)[node_hint]:
                    break
                node = sim.choose(s)
                if node < 0:
                    break
                start_job(q[h], node, now)
                h += 1
                waiting -= 1
            if h >= len(q):
                del queues[key], qhead[key]
            else:
                qhead[key] = h

    def reclaim(now: float) -> None:
        """Daytime: free room for the oldest blocked high-priority job by stopping low-priority jobs."""
        nonlocal preempt
        hi = [k for k in sorted(queues) if -k[0] >= 2]
        if not hi or not running_low:
            return
        key = hi[0]
        j_hi = queues[key][qhead[key]]
        s = key[1]
        nodes = sorted({int(node_of[j]) for j in running_low})
        for node in nodes:
            lows = [
                j for j in on_node[node] if prio[j] == 0 and now - last_move[j] >= td.MIGRATION_COOLDOWN_S
            ]
            if not lows:
                continue
            cpu = st.cpu_left[node] + sum(int(sp.cpu[sim.pod_spec[j]]) for j in lows)
            mem = st.mem_left[node] + sum(int(sp.mem[sim.pod_spec[j]]) for j in lows)
            gl = st.gl[node].copy()
            for j in lows:
                gl[gpus_of[j]] += sp.milli[sim.pod_spec[j]]
            if cpu < sp.cpu[s] or mem < sp.mem[s] or (sp.num[s] and (gl >= sp.milli[s]).sum() < sp.num[s]):
                continue
            for j in lows:
                done = (now - start[j]) * rate[j]
                stop_job(j, now)
                remaining[j] = max(remaining[j] - done, 0.0) + restart_s[j]
                last_move[j] = now
                preempt += 1
                enqueue(j)
            drain(now, node)
            del j_hi
            return

    def migrate_one(now: float) -> None:
        nonlocal migr
        if not running_low:
            return
        cands = [j for j in running_low if now - last_move[j] >= td.MIGRATION_COOLDOWN_S]
        if not cands:
            return
        j = cands[int(rng.integers(len(cands)))]
        node = int(node_of[j])
        s = int(sim.pod_spec[j])
        here = float(pol.node_scores(np.array([node]))[0])
        feas = st.fits(sp, s)
        feas[node] = False
        cand = np.flatnonzero(feas)
        if cand.size == 0:
            return
        sc = pol.node_scores(cand)
        best = int(cand[int(np.argmax(sc))])
        if sc.max() - here < td.MIGRATION_MIN_GAIN:
            return
        done = (now - start[j]) * rate[j]
        stop_job(j, now)
        remaining[j] = max(remaining[j] - done, 0.0) + restart_s[j]
        last_move[j] = now
        start_job(j, best, now)
        migr += 1

    processed = 0
    total_events = n
    while events:
        now, kind, _, j, ver = heapq.heappop(events)
        dt = now - last_t
        if dt > 0:
            dyn_j = dt * float((dyn_by_type / 1000.0 * dyn_w).sum())
            energy_j += dt * float((gpus_by_type * idle_w).sum()) + dyn_j
            busy_dyn_j += dyn_j
            tflop_done += dt * float((work_by_type / 1000.0 * tflops_by_type).sum())
            empty = st.pods_on == 0
            sleep_saved_j += dt * float((st.ngpu[empty] * idle_w[st.type_id[empty]]).sum())
            gpu_milli_s += dt * st.used_milli
            last_t = now
        if kind == _FINISH:
            if ver != version[j]:
                continue
            node = int(node_of[j])
            stop_job(j, now)
            finish[j] = now
            drain(now, node)
        elif kind == _ARRIVE:
            processed += 1
            s = int(sim.pod_spec[j])
            key = (-int(prio[j]), s)
            node = -1 if key in queues else sim.choose(s)
            if node >= 0:
                start_job(j, node, now)
            else:
                enqueue(j)
            if progress is not None and processed % 2000 == 0:
                progress(processed, total_events)
        else:
            tick_pending = False
            hour = (now % 86400.0) / 3600.0
            if waiting and td.DAY_START_H <= hour < td.DAY_END_H:
                reclaim(now)
            migrate_one(now)
        tl_t.append(now)
        tl_u.append(st.used_milli)
        tl_w.append(waiting)
        # re-score every 30 s while something changes (an arrival or a finish) or jobs wait; a quiet
        # cluster gets one tick after its last change, not one every 30 s for months
        if tidal and not tick_pending and (waiting or (running_low and kind != _TICK)):
            nxt = (np.floor(now / td.RESCORE_INTERVAL_S) + 1) * td.RESCORE_INTERVAL_S
            heapq.heappush(events, (float(nxt), _TICK, seq, -1, 0))
            seq += 1
            tick_pending = True
    if progress is not None:
        progress(total_events, total_events)
    t_first = float(np.nanmin(arrivals)) if n else 0.0
    makespan = float(np.nanmax(finish) - t_first) if np.isfinite(finish).any() else 0.0
    hours = makespan / 3600.0
    notes = list(sim.warnings)
    if pods.creation is not None:
        bad = int((~np.isfinite(np.asarray(pods.deletion, dtype=float))).sum())
        if bad:
            notes.append(f"{bad} pods without a deletion time run {DEFAULT_DURATION_S:.0f} s")
    if tidal:
        notes.append(
            "tidal scores use a synthetic NVLink/PCIe layout (the trace has none); the loads on it "
            "come from where pods are placed"
        )
        notes.append(
            "a reclaimed or migrated job loses its restart cost from the storage tier model "
            f"({min(_cost.values()):.0f}-{max(_cost.values()):.0f} s by GPU count)"
        )
    energy_kwh = energy_j / 3.6e6 * pue_v
    started = np.isfinite(first_start)
    share = np.asarray(pods.num_gpu, dtype=np.float64) * np.asarray(pods.gpu_milli, dtype=np.float64) + 1e-9
    return TimedResult(
        pol.name, seed, n, int(np.isfinite(finish).sum()), int(np.isnan(first_start).sum()), makespan,
        (first_start - np.asarray(arrivals))[np.isfinite(first_start)],
        (finish - np.asarray(arrivals))[np.isfinite(finish)],
        np.asarray(tl_t), np.asarray(tl_u, dtype=np.float64), np.asarray(tl_w), st.total_gpus,
        gpu_milli_s / 1000.0 / 3600.0, energy_kwh, fleet_rate * hours, energy_kwh * usd_kwh, preempt, migr,
        time.perf_counter() - t0, notes, prio, first_start - np.asarray(arrivals), tflop_done,
        (energy_j - sleep_saved_j) / 3.6e6 * pue_v, busy_dyn_j / 3.6e6 * pue_v, clk.name,
        float(np.average(clock_of[started], weights=share[started])) if started.any() else 1.0,
    )  # fmt: skip
