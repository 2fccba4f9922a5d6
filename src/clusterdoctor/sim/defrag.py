"""Defragmentation by migration under a budget, for the FGD paper's packing protocol.

In the FGD protocol pods arrive and never leave, so a placement-only policy cannot undo the slivers
earlier pods left (docs/sim.md). The defragmenter acts only when a pod fits nowhere: it looks for a
node where the pod *would* fit if at most ``max_victims`` pods already there moved elsewhere, and each
of those pods fits on another node now (placed there by the run's own policy score). It then moves
them and places the pod. The budget: ``migrations <= placed pods x per_100 / 100`` at every moment
(migrations not spent are kept), and a move is made only when it brings at least ``min_gain_milli``
of GPU allocation per migrated pod. Every migration costs its pod's restart time (``restart_s`` x its
GPUs, as GPU-seconds lost); nothing else of the protocol changes.

Among the nodes that qualify, the move chosen is the one with the fewest migrated pods, then the
smallest GPU share moved, then the node order (deterministic for a seed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from clusterdoctor.sim.traces import MILLI

DEFAULT_PER_100 = 1.0  # <= 1 migration per 100 placed pods (issue 24)
DEFAULT_RESTART_S = 120.0  # progress a migrated pod loses (restart from its last checkpoint)
MAX_CANDIDATES = 64  # nodes examined per failed pod (fewest pods first)


@dataclass
class DefragStats:
    migrations: int = 0
    admitted: int = 0  # pods placed thanks to a migration
    searches: int = 0
    repacks: int = 0  # migrations made to lower fragmentation (not for a waiting pod)
    gpu_seconds_lost: float = 0.0
    moves: list[tuple[int, int, int]] = field(default_factory=list)  # (pod, from node, to node)


class Defragmenter:
    """Owns the pods-per-node table of a protocol run and makes room for pods that fit nowhere.

    The table is numpy arrays (node x slot): CPU, memory, GPU milli per GPU and GPU mask of each pod, so
    "which single pod, once moved, lets this pod fit on its node" is one vectorised test over the
    cluster."""

    def __init__(self, sim, per_100: float = DEFAULT_PER_100, max_victims: int = 2,
                 min_gain_milli: int = MILLI, restart_s: float = DEFAULT_RESTART_S,
                 repack_every: int = 0, min_frag_gain: float = 50.0,
                 start_alloc: float = 0.0, mode: str = "repack", max_left: int = 200,
                 min_cpu_left: int = 11_000) -> None:  # fmt: skip
        self.sim = sim
        self.mode, self.max_left, self.min_cpu_left = mode, max_left, min_cpu_left
        self.start_milli = start_alloc * sim.state.total_gpus * MILLI
        self.repack_every = repack_every
        self.min_frag_gain = min_frag_gain
        self.per_100 = per_100
        self.max_victims = max_victims
        self.min_gain = min_gain_milli
        self.restart_s = restart_s
        self.placed = 0
        self.stats = DefragStats()
        self._st, self._sp = sim.state, sim.specs
        self._cap_ok_cache: dict[int, np.ndarray] = {}
        self._alloc(8)

    def _alloc(self, slots: int) -> None:
        n, g = self._st.n, self._st.g
        old = getattr(self, "pod", None)
        pod = np.full((n, slots), -1, dtype=np.int64)
        spec = np.zeros((n, slots), dtype=np.int64)
        mask = np.zeros((n, slots, g), dtype=bool)
        if old is not None:
            k = old.shape[1]
            pod[:, :k], spec[:, :k], mask[:, :k] = old, self.spec, self.mask
        self.pod, self.spec, self.mask = pod, spec, mask

    # bookkeeping -----------------------------------------------------------------------------------
    def _add(self, pod: int, node: int, s: int, gpus: list[int]) -> None:
        free = np.flatnonzero(self.pod[node] < 0)
        if free.size == 0:
            self._alloc(self.pod.shape[1] * 2)
            free = np.flatnonzero(self.pod[node] < 0)
        k = int(free[0])
        self.pod[node, k], self.spec[node, k] = pod, s
        self.mask[node, k] = False
        self.mask[node, k, gpus] = True

    def _drop(self, node: int, k: int) -> None:
        self.pod[node, k] = -1
        self.mask[node, k] = False

    def placed_pod(self, pod: int, node: int, s: int, gpus: list[int]) -> None:
        self._add(pod, node, s, gpus)
        self.placed += 1
        if (
            self.repack_every
            and self.placed % self.repack_every == 0
            and self._st.used_milli >= self.start_milli
        ):
            if self.mode == "consolidate":
                self.consolidate()
            elif self.mode == "both":
                self.consolidate() or self.repack()
            else:
                self.repack()

    def budget(self) -> int:
        return int(self.placed * self.per_100 // 100) - self.stats.migrations

    # search ----------------------------------------------------------------------------------------
    def _cap_ok(self, s: int) -> np.ndarray:
        """Nodes that could host spec ``s`` when empty."""
        ok = self._cap_ok_cache.get(s)
        if ok is None:
            st, sp = self._st, self._sp
            ok = (st.cpu_cap >= sp.cpu[s]) & (st.mem_cap >= sp.mem[s]) & (st.ngpu >= sp.num[s])
            if sp.con[s]:
                ok &= sp.access[sp.con[s]][st.type_id]
            self._cap_ok_cache[s] = ok
        return ok

    def _dest(self, v_spec: int, exclude: int) -> int:
        """Node the policy would give a pod of spec ``v_spec`` now, other than ``exclude``; -1: none."""
        sim = self.sim
        feas = sim.state.fits(sim.specs, v_spec)
        feas[exclude] = False
        cand = np.flatnonzero(feas)
        if cand.size == 0:
            return -1
        if sim.matrix is not None:
            sc = sim.matrix[cand, sim.specs.score_id[v_spec]]
            cand = cand[sc == sc.max()]
        return int(cand[np.argmin(sim.ctx.node_rank[cand])])

    def _singles(self, s: int) -> list[tuple[int, int, int]]:
        """(GPU milli moved, node rank, node, slot) of every pod whose move alone lets spec ``s`` fit."""
        st, sp = self._st, self._sp
        nodes = np.flatnonzero(self._cap_ok(s) & (st.pods_on >= 1))
        if nodes.size == 0:
            return []
        pod, spec = self.pod[nodes], self.spec[nodes]
        valid = pod >= 0
        cpu = st.cpu_left[nodes, None] + np.where(valid, sp.cpu[spec], 0)
        mem = st.mem_left[nodes, None] + np.where(valid, sp.mem[spec], 0)
        ok = valid & (cpu >= sp.cpu[s]) & (mem >= sp.mem[s])
        num = int(sp.num[s])
        vm = np.where(valid, sp.milli[spec], 0)
        if num:
            gl = st.gl[nodes, None, :] + vm[:, :, None] * self.mask[nodes]
            ok &= (gl >= int(sp.milli[s])).sum(axis=2) >= num
        ni, ki = np.nonzero(ok)
        if ni.size == 0:
            return []
        # keep the pods that fit somewhere else now (feasibility elsewhere does not depend on their node)
        vspec = spec[ni, ki]
        has_dest = np.zeros(ni.size, dtype=bool)
        for v in np.unique(vspec):
            f = st.fits(sp, int(v))
            cnt = int(f.sum())
            sel = vspec == v
            has_dest[sel] = cnt - f[nodes[ni[sel]]] > 0
        ni, ki = ni[has_dest], ki[has_dest]
        if ni.size == 0:
            return []
        moved = vm[ni, ki] * sp.num[spec[ni, ki]]
        rank = self.sim.ctx.node_rank[nodes[ni]]
        order = np.lexsort((rank, moved))
        return [(int(nodes[ni[i]]), int(ki[i])) for i in order]

    def try_admit(self, pod: int, s: int) -> int:
        """Make room for ``pod`` (spec ``s``) that fits nowhere; the node it was placed on, or -1."""
        sp = self._sp
        gain = int(sp.num[s]) * int(sp.milli[s])
        budget = self.budget()
        if budget < 1 or gain < self.min_gain:
            return -1
        self.stats.searches += 1
        for node, k in self._singles(s)[:MAX_CANDIDATES]:
            if self._apply(s, node, [k]):
                return node
        k_max = min(self.max_victims, budget, gain // self.min_gain)
        if k_max >= 2 and sp.num[s] >= 2:
            for node, ks in self._groups(s, k_max):
                if self._apply(s, node, ks):
                    return node
        return -1

    def repack(self) -> bool:
        """One fragmentation-reducing migration, when the budget allows: the placed pod whose move to
        the node the policy likes best for it lowers the cluster's FGD fragmentation most (by at least
        ``min_frag_gain`` milli). Needs the policy's exact frag deltas (``policy.delta``)."""
        delta = getattr(self.sim.policy, "delta", None)
        if delta is None or self.budget() < 1:
            return False
        from clusterdoctor.sim.frag import node_frag

        sim, st, sp = self.sim, self._st, self._sp
        ni, ki = np.nonzero(self.pod >= 0)
        if ni.size == 0:
            return False
        vspec = self.spec[ni, ki]
        vm = sp.milli[vspec]
        cpu = st.cpu_left[ni] + sp.cpu[vspec]
        gl = st.gl[ni] + vm[:, None] * self.mask[ni, ki]
        removal = sim.frag[ni] - node_frag(cpu, gl, st.type_id[ni], sim.typical)  # frag saved at home
        best_dest = np.full(ni.size, -1, dtype=np.int64)
        best_gain = np.full(ni.size, -np.inf)
        sid = sp.score_id
        for v in np.unique(vspec):
            sel = np.flatnonzero(vspec == v)
            feas = st.fits(sp, int(v))
            if not feas.any():
                continue
            col = np.where(feas, delta[:, sid[v]], -np.inf)
            top2 = np.argsort(-col)[:2]  # the best node, and the next one for pods living on the best
            b0 = int(top2[0])
            b1 = int(top2[1]) if top2.size > 1 else -1
            home = ni[sel]
            dest = np.where(home == b0, b1, b0)
            g = np.where(dest >= 0, col[np.maximum(dest, 0)], -np.inf)
            best_dest[sel], best_gain[sel] = dest, g
        net = removal + best_gain
        i = int(np.argmax(net))
        if not np.isfinite(net[i]) or net[i] < self.min_frag_gain:
            return False
        n, k, d = int(ni[i]), int(ki[i]), int(best_dest[i])
        v, vs = int(self.pod[n, k]), int(self.spec[n, k])
        vg = [int(g) for g in np.flatnonzero(self.mask[n, k])]
        sim.remove(n, vs, vg)
        self._drop(n, k)
        g = sim.place(d, vs)
        self._add(v, d, vs, g)
        self.stats.migrations += 1
        self.stats.repacks += 1
        self.stats.gpu_seconds_lost += self.restart_s * int(sp.num[vs]) * int(sp.milli[vs]) / MILLI
        self.stats.moves.append((v, n, d))
        return True

    def consolidate(self) -> bool:
        """One consolidating migration, when the budget allows: a GPU-sharing pod alone on its GPU moves
        onto another partly used GPU where it fits tightest (at most ``max_left`` milli left there), so
        its own GPU becomes whole again, on a node that keeps at least ``min_cpu_left`` free CPU for a
        whole-GPU pod. The pair with the least milli left at the target wins (then node order)."""
        if self.budget() < 1:
            return False
        st, sp = self._st, self._sp
        valid = self.pod >= 0
        per_gpu = self.mask.sum(axis=1)  # (N, G) pods on each GPU
        ni, ki = np.nonzero(valid)
        vs = self.spec[ni, ki]
        share = (sp.num[vs] == 1) & (sp.milli[vs] < MILLI)
        ni, ki, vs = ni[share], ki[share], vs[share]
        g_of = np.argmax(self.mask[ni, ki], axis=1)
        lone = per_gpu[ni, g_of] == 1
        lone &= st.cpu_left[ni] + sp.cpu[vs] >= self.min_cpu_left
        ni, ki, vs, g_of = ni[lone], ki[lone], vs[lone], g_of[lone]
        if ni.size == 0:
            return False
        partial = (per_gpu > 0) & st.gpu_exists
        best = None  # (left, rank, src node, slot, gpu, dest node, dest gpu)
        for v in np.unique(vs):
            v = int(v)
            m = int(sp.milli[v])
            ok = (st.cpu_left >= sp.cpu[v]) & (st.mem_left >= sp.mem[v])
            if sp.con[v]:
                ok &= sp.access[sp.con[v]][st.type_id]
            left = np.where(partial & ok[:, None] & (st.gl >= m), st.gl - m, MILLI + 1)
            flat = np.argsort(left, axis=None, kind="stable")[:2]
            for i in np.flatnonzero(vs == v):
                for f in flat:
                    dn, dg = divmod(int(f), st.g)
                    lv = int(left[dn, dg])
                    if lv > self.max_left or dn == int(ni[i]):
                        continue
                    key = (lv, int(self.sim.ctx.node_rank[ni[i]]))
                    if best is None or key < best[:2]:
                        best = (*key, int(ni[i]), int(ki[i]), int(g_of[i]), dn, dg)
                    break
        if best is None:
            return False
        _, _, n, k, g, d, dg = best
        v, vsp = int(self.pod[n, k]), int(self.spec[n, k])
        self.sim.remove(n, vsp, [g])
        self._drop(n, k)
        self.sim.place_on(d, vsp, [dg])
        self._add(v, d, vsp, [dg])
        self.stats.migrations += 1
        self.stats.repacks += 1
        self.stats.gpu_seconds_lost += self.restart_s * int(sp.milli[vsp]) / MILLI
        self.stats.moves.append((v, n, d))
        return True

    def _groups(self, s: int, k_max: int):
        """(node, slots) of up to ``k_max`` pods whose joint move lets spec ``s`` fit on that node, for
        every node where a greedy plan finds one (GPUs with the fewest pods freed first, then the pods
        using the most CPU when CPU is short), fewest pods first, then node order."""
        st, sp = self._st, self._sp
        nodes = np.flatnonzero(self._cap_ok(s) & (st.pods_on >= 2))
        num, m = int(sp.num[s]), int(sp.milli[s])
        c_need, m_need = int(sp.cpu[s]), int(sp.mem[s])
        plans = []
        for n in nodes:
            n = int(n)
            slots = np.flatnonzero(self.pod[n] >= 0)
            if slots.size < 2:
                continue
            specs = self.spec[n, slots]
            mask = self.mask[n, slots]  # (P, G)
            gl = st.gl[n].astype(np.int64).copy()
            chosen: list[int] = []
            if num:
                room = gl >= m
                short = num - int(room.sum())
                if short > 0:
                    per_gpu = mask.sum(axis=0)  # pods on each GPU
                    gpus = [g for g in np.argsort(per_gpu, kind="stable") if not room[g] and g < st.ngpu[n]]
                    for g in gpus:
                        on_g = [int(i) for i in np.flatnonzero(mask[:, g]) if int(i) not in chosen]
                        chosen.extend(on_g)
                        for i in on_g:
                            gl = gl + sp.milli[specs[i]] * mask[i]
                        if len(chosen) > k_max:
                            break
                        if int((gl >= m).sum()) >= num:
                            break
                    if len(chosen) > k_max or int((gl >= m).sum()) < num:
                        continue
            cpu = int(st.cpu_left[n]) + int(sp.cpu[specs[chosen]].sum())
            mem = int(st.mem_left[n]) + int(sp.mem[specs[chosen]].sum())
            if cpu < c_need or mem < m_need:
                rest = [int(i) for i in np.argsort(-sp.cpu[specs], kind="stable") if int(i) not in chosen]
                for i in rest:
                    if cpu >= c_need and mem >= m_need:
                        break
                    chosen.append(i)
                    cpu += int(sp.cpu[specs[i]])
                    mem += int(sp.mem[specs[i]])
                if cpu < c_need or mem < m_need or len(chosen) > k_max:
                    continue
            if 2 <= len(chosen) <= k_max:
                plans.append(
                    (len(chosen), int(self.sim.ctx.node_rank[n]), n, [int(slots[i]) for i in chosen])
                )
        plans.sort()
        for _, _, n, ks in plans[:MAX_CANDIDATES]:
            yield n, ks

    def _apply(self, s: int, n: int, slots: list[int]) -> bool:
        """Move the pods in ``slots`` off node ``n`` (each to where the policy puts it) when every one
        has somewhere to go and ``s`` then fits on ``n``; False (nothing changed) otherwise."""
        sim, sp = self.sim, self._sp
        group = [(int(self.pod[n, k]), int(self.spec[n, k]), [int(g) for g in np.flatnonzero(self.mask[n, k])])
                 for k in slots]  # fmt: skip
        for _, vs, vg in group:
            sim.remove(n, vs, vg)
        done: list[tuple[int, int, list[int]]] = []
        for _, vs, _vg in group:
            d = self._dest(vs, n)
            if d < 0:
                break
            done.append((vs, d, sim.place(d, vs)))
        if len(done) < len(group) or not sim.state.fits(sim.specs, s)[n]:
            for vs, d, g in done:  # undo
                sim.remove(d, vs, g)
            for _, vs, vg in group:
                sim.state.place(n, int(sp.cpu[vs]), int(sp.mem[vs]), int(sp.milli[vs]), vg,
                                int(sp.s_tag[sp.score_id[vs]]))  # fmt: skip
            sim.changed(n)
            return False
        for k in slots:
            self._drop(n, k)
        for (v, vs, _vg), (_, d, g) in zip(group, done, strict=True):
            self._add(v, d, vs, g)
            self.stats.migrations += 1
            self.stats.gpu_seconds_lost += self.restart_s * int(sp.num[vs]) * int(sp.milli[vs]) / MILLI
            self.stats.moves.append((v, n, d))
        self.stats.admitted += 1
        return True
