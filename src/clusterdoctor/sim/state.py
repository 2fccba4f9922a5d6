"""The cluster's mutable state as numpy arrays, and the interned pod specs the policies score.

Scoring is cached per (node, pod spec): a pod's score on a node depends only on the node's state and
the pod's resource spec, traces have few distinct specs (openb default: 91), and a placement changes
one node. So a policy scores a whole row (one node against every spec) when that node changes and a
pod's placement is an argmax over one column. That is what makes 10,000 GPUs x 100,000 jobs fast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clusterdoctor.sim.cluster import Cluster
from clusterdoctor.sim.traces import MILLI, PodTrace

# GPU-affinity tags (FGD's GpuClustering): share-gpu, 1-gpu, 2-gpu, 4-gpu, 8-gpu, other multi-GPU.
TAG_NONE = -1
TAG_SHARE, TAG_1, TAG_2, TAG_4, TAG_8, TAG_OTHER = range(6)
N_TAGS = 6

# kube-scheduler's GetNonzeroRequests: a container without a CPU request counts as 100 millicores.
DEFAULT_MILLI_CPU = 100


def gpu_tag(num_gpu: int, gpu_milli: int) -> int:
    """The FGD GPU-affinity tag of a pod spec."""
    if num_gpu == 0:
        return TAG_NONE
    if num_gpu == 1 and gpu_milli < MILLI:
        return TAG_SHARE
    return {1: TAG_1, 2: TAG_2, 4: TAG_4, 8: TAG_8}.get(num_gpu, TAG_OTHER)


@dataclass
class Specs:
    """Distinct pod specs. ``full`` ids key feasibility (CPU, memory, GPUs, model constraint);
    ``score`` ids key scoring (memory does not enter any score)."""

    cpu: np.ndarray  # per full spec
    mem: np.ndarray
    num: np.ndarray
    milli: np.ndarray
    con: np.ndarray  # constraint id (0 = any model)
    score_id: np.ndarray  # full spec -> score spec
    s_cpu: np.ndarray  # per score spec (CPU with kube's non-zero default)
    s_num: np.ndarray
    s_milli: np.ndarray
    s_con: np.ndarray
    s_tag: np.ndarray
    access: np.ndarray  # (constraints, node types) bool
    constraints: list[str]
    s_app: np.ndarray | None = None  # per score spec: application index (-1: none)
    apps: list[str] | None = None

    @property
    def n_score(self) -> int:
        return len(self.s_cpu)


def intern_specs(pods: PodTrace, type_names: list[str]) -> tuple[Specs, np.ndarray]:
    """(Specs, spec id of each pod)."""
    constraints: dict[str, int] = {"": 0}
    apps: dict[str, int] = {}
    full: dict[tuple, int] = {}
    score: dict[tuple, int] = {}
    pod_spec = np.empty(len(pods), dtype=np.int64)
    f_rows: list[tuple] = []
    f_score: list[int] = []
    s_rows: list[tuple] = []
    for i in range(len(pods)):
        con = constraints.setdefault(pods.gpu_spec[i], len(constraints))
        app = apps.setdefault(pods.app[i], len(apps)) if pods.app else -1
        key = (pods.cpu_milli[i], pods.memory_mib[i], pods.num_gpu[i], pods.gpu_milli[i], con, app)
        fid = full.get(key)
        if fid is None:
            fid = full[key] = len(f_rows)
            f_rows.append(key[:5])
            skey = (pods.cpu_milli[i] or DEFAULT_MILLI_CPU, pods.num_gpu[i], pods.gpu_milli[i], con, app)
            sid = score.get(skey)
            if sid is None:
                sid = score[skey] = len(s_rows)
                s_rows.append(skey)
            f_score.append(sid)
        pod_spec[i] = fid
    con_names = list(constraints)
    access = np.ones((len(con_names), len(type_names)), dtype=bool)
    for cid, cname in enumerate(con_names):
        if cname:
            allowed = set(cname.split("|"))
            access[cid] = [t in allowed for t in type_names]
    fa = np.array(f_rows, dtype=np.int64).reshape(-1, 5)
    sa = np.array(s_rows, dtype=np.int64).reshape(-1, 5)
    tags = np.array([gpu_tag(int(n), int(m)) for _, n, m, _, _ in s_rows], dtype=np.int64)
    specs = Specs(
        fa[:, 0], fa[:, 1], fa[:, 2], fa[:, 3], fa[:, 4], np.array(f_score, dtype=np.int64),
        sa[:, 0], sa[:, 1], sa[:, 2], sa[:, 3], tags, access, con_names, sa[:, 4], list(apps),
    )  # fmt: skip
    return specs, pod_spec


class ClusterState:
    """Free CPU, memory and per-GPU milli of every node, plus GPU-affinity tag counts."""

    def __init__(self, cluster: Cluster) -> None:
        nodes = cluster.nodes
        self.names = [n.name for n in nodes]
        self.type_names: list[str] = sorted({n.model for n in nodes})
        tix = {t: i for i, t in enumerate(self.type_names)}
        self.n = len(nodes)
        self.g = max(1, max(n.gpus for n in nodes))
        self.cpu_cap = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.mem_cap = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.ngpu = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.type_id = np.array([tix[n.model] for n in nodes], dtype=np.int64)
        self.gpu_exists = np.arange(self.g)[None, :] < self.ngpu[:, None]
        self.total_gpus = int(self.ngpu.sum())
        self.reset()

    def reset(self) -> None:
        self.cpu_left = self.cpu_cap.copy()
        self.mem_left = self.mem_cap.copy()
        self.gl = np.where(self.gpu_exists, MILLI, 0).astype(np.int64)
        self.maxl = self.gl.max(axis=1)
        self.nfree = self.ngpu.copy()
        self.tags = np.zeros((self.n, N_TAGS), dtype=np.int64)
        self.used_milli = 0
        self.pods_on = np.zeros(self.n, dtype=np.int64)

    def fits(self, specs: Specs, s: int) -> np.ndarray:
        """Boolean mask of nodes where a pod of full spec ``s`` fits now."""
        ok = (self.cpu_left >= specs.cpu[s]) & (self.mem_left >= specs.mem[s])
        num = specs.num[s]
        if num:
            m = specs.milli[s]
            if num == 1:
                ok &= self.maxl >= m
            elif m >= MILLI:
                ok &= self.nfree >= num
            else:
                ok &= (self.gl >= m).sum(axis=1) >= num
            con = specs.con[s]
            if con:
                ok &= specs.access[con][self.type_id]
        return ok

    def default_gpus(self, node: int, num: int, milli: int) -> list[int]:
        """FGD's default GPU choice: the tightest-fitting GPU for a shared pod, the first fully free
        GPUs for whole-GPU pods."""
        row = self.gl[node]
        if num == 0:
            return []
        if milli < MILLI:
            cand = np.flatnonzero(row >= milli)
            return [int(cand[np.argmin(row[cand])])]
        return [int(i) for i in np.flatnonzero(row == MILLI)[:num]]

    def place(self, node: int, cpu: int, mem: int, milli: int, gpus: list[int], tag: int) -> None:
        self.cpu_left[node] -= cpu
        self.mem_left[node] -= mem
        if gpus:
            self.gl[node, gpus] -= milli
            row = self.gl[node]
            self.maxl[node] = row.max()
            self.nfree[node] = int((row == MILLI).sum())
            self.used_milli += milli * len(gpus)
        if tag >= 0:
            self.tags[node, tag] += 1
        self.pods_on[node] += 1

    def remove(self, node: int, cpu: int, mem: int, milli: int, gpus: list[int], tag: int) -> None:
        self.cpu_left[node] += cpu
        self.mem_left[node] += mem
        if gpus:
            self.gl[node, gpus] += milli
            row = self.gl[node]
            self.maxl[node] = row.max()
            self.nfree[node] = int((row == MILLI).sum())
            self.used_milli -= milli * len(gpus)
        if tag >= 0:
            self.tags[node, tag] -= 1
        self.pods_on[node] -= 1
