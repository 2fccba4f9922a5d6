"""nccl-tests bandwidth rules: busbw against the baseline of its link class (COMM004), unstable rows and
wrong results (COMM005), copies run without MPI (COMM013), a run that printed nothing (COMM021). The baselines are read from the named files in
../shared/fixtures/comm (provenance in its SOURCES.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.comm_common import _logs, _one_per_instance
from clusterdoctor.rules.registry import Observations, rule

# -- baselines: all_reduce busbw at >= 1 GiB (or >= 256 MiB for the network runs), GB/s ----------------
# Each value is read from the named file in ../shared/fixtures/comm (provenance in its SOURCES.md).
BASELINES: dict[str, Threshold] = {
    "nvswitch_h100": Threshold(
        "busbw_nvswitch_h100",
        369.9,
        "GB/s",
        "fixtures/comm/nccl_tests_dgxh100_4gpu_nvswitch.txt (eugenesiow/LLM-Insights): DGX H100, 4 GPUs, "
        "'# Avg bus bandwidth : 369.941'",
        "all_reduce busbw over NVSwitch, H100",
    ),
    "nvswitch_a100": Threshold(
        "busbw_nvswitch_a100",
        222.1,
        "GB/s",
        "fixtures/comm/nccl_tests_dgxa100_4gpu_nvswitch.txt (eugenesiow/LLM-Insights): DGX A100, 4 GPUs, "
        "'# Avg bus bandwidth : 222.066'",
        "all_reduce busbw over NVSwitch, A100",
    ),
    "nvlink": Threshold(
        "busbw_nvlink_pair",
        47.45,
        "GB/s",
        "fixtures/comm/nccl_tests_a40_2gpu_nvlink.txt (eugenesiow/LLM-Insights): 2x A40 over NV4, "
        "'# Avg bus bandwidth : 47.4509'",
        "all_reduce busbw over a direct NVLink pair (A40, NV4)",
    ),
    "pcie": Threshold(
        "busbw_pcie_p2p_off_same_socket",
        3.86,
        "GB/s",
        "fixtures/comm/nccl_tests_a40_2gpu_p2pdisabled_node.txt (eugenesiow/LLM-Insights): 2x A40 on one CPU "
        "root (NODE), NCCL_P2P_DISABLE=1, '# Avg bus bandwidth : 3.85845'",
        "all_reduce busbw through host memory within one socket",
    ),
    "pcie_sys": Threshold(
        "busbw_pcie_across_sockets",
        1.40,
        "GB/s",
        "reference/comm.md section 3 (eugenesiow/LLM-Insights README, SYS path with P2P off); not a fixture file",
        "all_reduce busbw through host memory across sockets",
    ),
    "efa": Threshold(
        "busbw_efa_1gpu_per_node",
        2.83,
        "GB/s",
        "fixtures/comm/nccl_tests_2node_efa.log (aws-samples/aws-do-eks): 2 nodes x 1 T4, EFA, busbw 2.83 at "
        ">= 256 MiB",
        "all_reduce busbw between two single-GPU nodes over EFA",
    ),
    "socket": Threshold(
        "busbw_socket_1gpu_per_node",
        2.0,
        "GB/s",
        "fixtures/comm/nccl_tests_2node_socket_no_efa.log (aws-samples/aws-do-eks): 2 nodes x 1 T4, EFA "
        "disabled, busbw ~2.0 at >= 128 MiB",
        "all_reduce busbw between two single-GPU nodes over TCP sockets",
    ),
}
LINK_CLASSES = ("nvswitch", "nvlink", "pcie", "pcie_sys", "efa", "ib", "socket")
FAR_BELOW = Threshold(
    "busbw_far_below_fraction",
    0.5,
    "ratio",
    "clusterdoctor default: half the published baseline is far outside run-to-run noise (the fixtures' "
    "own rows vary by < 10%, e.g. 47.38-47.49 GB/s on the A40 NVLink run)",
    "measured busbw below this fraction of the link class's baseline is a finding",
)
ROW_OUTLIER = Threshold(
    "nccl_tests_row_outlier",
    0.2,
    "ratio",
    "clusterdoctor default; fixtures/comm/nccl_tests_dgxa100_4gpu_nvswitch.txt shows one in-place row at "
    "164.13 GB/s vs 232.81 GB/s out-of-place (-29%)",
    "relative busbw drop of one bandwidth-bound row against the median of the run",
)

# -- bandwidth -------------------------------------------------------------------------------------


MATCH_FACTOR = Threshold(
    "link_class_match_factor",
    2.0,
    "x",
    "clusterdoctor default: the intra-node reference classes of fixtures/comm are at least 2.8x apart "
    "(NVSwitch A100 222 / NVLink 47.5 = 4.7; NVLink 47.5 / host memory 3.86 = 12; 3.86 / 1.40 = 2.8), so "
    "within a factor of 2 a measurement matches one of them; EFA 2.83 and sockets 2.0 are closer and are "
    "reported as ambiguous when the measurement cannot tell them apart",
    "a busbw matches a link class when it is within this factor of the class's reference",
)


class LinkAssessment(NamedTuple):
    """What an nccl-tests run's busbw says about its link: where it ran, which class it matches, which
    class it should have used and why."""

    path: str
    busbw: float | None
    scope: str  # "intra-node", "inter-node" or "unknown"
    scope_why: str
    match: Any  # analyze.busbw.LinkMatch
    expected: str | None
    expected_why: str
    baseline: Threshold | None  # the expected class's reference, when there is one

    def as_dict(self) -> dict[str, Any]:
        from clusterdoctor.analyze.busbw import CLASS_NAMES, DEGRADED

        m = self.match
        return {
            "scope": self.scope,
            "scope_why": self.scope_why,
            "matches": m.cls,
            "matches_name": CLASS_NAMES.get(m.cls or "", None),
            "ambiguous_with": m.ambiguous_with,
            "degraded": m.cls in DEGRADED,
            "expected": self.expected,
            "expected_why": self.expected_why,
            "expected_baseline_gbs": float(self.baseline.value) if self.baseline is not None else None,
        }


def _class_ranges(scope: str) -> dict[str, tuple[float, float]]:
    from clusterdoctor.analyze.busbw import INTER_NODE, INTRA_NODE

    refs = {
        "nvswitch": (float(BASELINES["nvswitch_a100"].value), float(BASELINES["nvswitch_h100"].value)),
        "nvlink": (float(BASELINES["nvlink"].value),) * 2,
        "pcie": (float(BASELINES["pcie"].value),) * 2,
        "pcie_sys": (float(BASELINES["pcie_sys"].value),) * 2,
        "efa": (float(BASELINES["efa"].value),) * 2,
        "socket": (float(BASELINES["socket"].value),) * 2,
    }
    classes = {"inter-node": INTER_NODE, "intra-node": INTRA_NODE}.get(scope, INTRA_NODE + INTER_NODE)
    return {c: refs[c] for c in classes if c in refs}


def _baseline(link: str, models: Any) -> Threshold | None:
    if link == "nvswitch":
        text = " ".join(models).upper()
        h100 = any(x in text for x in ("H100", "H200", "H800", "B100", "B200", "B300", "GB200", "GB300"))
        return BASELINES["nvswitch_h100"] if h100 else BASELINES["nvswitch_a100"]
    return BASELINES.get(link)


def nccl_tests_link(obs: Observations, run: Any) -> LinkAssessment:
    """Where an nccl-tests run ran (one node or several), the link class its busbw matches and the one
    it was expected to use: stated with ``--link``, named by the NCCL log in the same file, or inferred
    from the GPU model on a single node."""
    from clusterdoctor.analyze.busbw import expected_link_for_gpu, match_link_class

    cache = obs.get("_nccl_tests_link")
    if cache is None:
        cache = {}
        obs.put("_nccl_tests_link", cache)
    if id(run) in cache:
        return cache[id(run)]
    peak = run.peak_busbw()
    log = next((lg for lg in _logs(obs) if lg.path == run.path), None)
    nets: set[str] = set()
    if log is not None:
        nets = {(t.net or "").lower() for t in log.net_transports()} | {n.lower() for n in log.networks}
    if len(run.hosts) > 1:
        scope, scope_why = "inter-node", f"the rank lines name {len(run.hosts)} hosts"
    elif log is not None and (log.net_transports() or (log.nnodes or 0) > 1):
        scope, scope_why = "inter-node", "the NCCL log shows network transports"
    elif len(run.hosts) == 1:
        scope, scope_why = "intra-node", f"the rank lines name one host ({next(iter(run.hosts))})"
    elif nets:
        scope, scope_why = "unknown", "the output names no host; NCCL initialised a network, so any class"
    else:
        scope, scope_why = "intra-node", "the output names no host and no network: one node assumed"
    expected, why = None, "unknown (pass --link to compare)"
    stated = obs.get("comm_link_class")
    if isinstance(stated, str) and stated:
        expected, why = stated, "stated with --link"
    elif scope != "intra-node" and nets:
        if any("libfabric" in n or "ofi" in n for n in nets):
            expected, why = "efa", "NCCL log: AWS Libfabric network"
        elif nets == {"socket"}:
            expected, why = "socket", "NCCL log: Socket network"
        elif "ib" in nets or any(n.startswith("ib") for n in nets):
            expected, why = "ib", "NCCL log: IB network"
    elif scope == "intra-node" and len(run.gpu_models) == 1:
        guess = expected_link_for_gpu(next(iter(run.gpu_models)))
        if guess is not None:
            expected, why = guess
    match = match_link_class(peak or 0.0, _class_ranges(scope), float(MATCH_FACTOR.value))
    base = None
    if expected is not None and not (expected == "pcie" and why != "stated with --link"):
        base = _baseline(expected, run.gpu_models)  # a PCIe card's P2P path has no reference here
    a = LinkAssessment(run.path, peak, scope, scope_why, match, expected, why, base)
    cache[id(run)] = a
    return a


def _run_subject(run: Any) -> str:
    if run.hosts:
        hosts = sorted(run.hosts)
        return (
            ("host " if len(hosts) == 1 else "hosts ")
            + ", ".join(hosts[:4])
            + (" …" if len(hosts) > 4 else "")
        )
    return run.path


@rule(
    id="COMM004",
    name="busbw-below-link-baseline",
    layer="comm",
    title="nccl-tests bus bandwidth below its link class, or on a degraded path",
    requires=("nccl_tests",),
    thresholds=(FAR_BELOW, MATCH_FACTOR, *BASELINES.values()),
    severity=Severity.CRITICAL,
)
def busbw_below_baseline(obs: Observations) -> Iterator[Finding]:
    """Measured all-reduce busbw (bandwidth-bound sizes) is below half the baseline of the expected link,
    or, with no expectation, matches a degraded class (host memory instead of P2P, TCP sockets).

    **Symptom**: all_reduce_perf plateaus at a few GB/s on GPUs that should talk over NVLink/NVSwitch, or
    well below the fabric's rate between nodes.
    **Why**: NCCL took a slower path: ``NCCL_P2P_DISABLE=1`` or a P2P-less PCIe topology sends traffic
    through host memory (DGX A100 5.2 GB/s instead of 222 GB/s; A40 3.9 instead of 47.4), GPUs on
    different sockets, or a socket fallback between nodes. The expected class comes from ``--link``, the
    NCCL log's network, or the GPU model the output names (SXM/HBM parts: NVSwitch; PCIe cards: PCIe).
    **Fix**: remove ``NCCL_P2P_DISABLE``/``NCCL_SHM_DISABLE`` overrides, check that NVLink/NVSwitch and the
    fabric manager are up (``nvidia-smi nvlink -s``, ``nvidia-smi -q | grep -i fabric``), keep a job's GPUs
    on one NVSwitch domain, enable PCIe P2P (ACS off, IOMMU passthrough) on PCIe cards, and fix the
    network plugin for inter-node runs.
    **Verify**: `all_reduce_perf -b 1G -e 8G -f 2 -g <ngpus>` and compare the busbw column with the
    baseline named in the evidence; `nvidia-smi topo -m` shows the path between the GPUs.
    """
    yield from _one_per_instance(_busbw_findings(obs))


def _busbw_causes(a: LinkAssessment) -> tuple[str, ...]:
    """The cause classes a low busbw points at, from the class it matches and the one expected: traffic
    through host memory (P2P unavailable), over TCP (no RDMA plugin or device), NVLink without the
    NVSwitch fabric, or a network below its rate."""
    m = a.match.cls
    if m in ("pcie", "pcie_sys") and a.scope != "inter-node":
        return ("nccl.p2p-unsupported",)
    if m == "socket":
        return ("nccl.gdr-or-plugin", "rdma.container-access")
    if a.expected == "nvswitch" and m == "nvlink":
        return ("nccl.fabric-manager", "gpu.nvlink-fault")
    if a.scope == "inter-node" and a.expected in ("ib", "efa"):
        return ("ib.link-degraded", "rdma.congestion", "rdma.hca-selection")
    return ()


def _busbw_findings(obs: Observations) -> Iterator[tuple[Any, Finding]]:
    from clusterdoctor.analyze.busbw import CLASS_NAMES, DEGRADED

    for run in obs.get("nccl_tests") or []:
        if run.collective not in (None, "all_reduce"):
            continue
        a = nccl_tests_link(obs, run)
        key = (_run_subject(run) if run.hosts else None, round(a.busbw or 0.0, 2), a.match.cls, a.expected)
        peak = a.busbw
        if peak is None:
            continue
        m = a.match
        matched = (
            f"it matches the '{m.cls}' class ({CLASS_NAMES[m.cls]}"
            + (f", or '{m.ambiguous_with}'" if m.ambiguous_with else "")
            + ")"
            if m.cls
            else "it matches no reference class within a factor of 2"
        )
        ev = [
            Evidence(
                "median busbw of bandwidth-bound rows",
                round(peak, 2),
                float(a.baseline.value) if a.baseline is not None else None,
                "GB/s",
                run.path,
            ),
            Evidence("matched link class", m.cls or "none", source=f"{a.scope}: {a.scope_why}"),
            Evidence("expected link class", a.expected or "unknown", source=a.expected_why),
        ]
        if run.gpu_models:
            ev.append(Evidence("GPU model", ", ".join(sorted(run.gpu_models)), source=run.path))
        ev.append(
            Evidence("printed Avg bus bandwidth (all sizes)", run.avg_busbw_gbs, unit="GB/s", source=run.path)
        )
        if a.baseline is not None:
            ratio = peak / float(a.baseline.value)
            if ratio >= float(FAR_BELOW.value):
                continue
            ev.append(Evidence("baseline source", a.baseline.source))
            yield (
                key,
                busbw_below_baseline.finding(
                    f"all_reduce busbw {peak:.2f} GB/s is {ratio * 100:.1f}% of the {a.expected} baseline "
                    f"({float(a.baseline.value):.1f} GB/s, {a.expected_why}); {matched} — traffic is not using "
                    "the expected link.",
                    evidence=ev,
                    severity=Severity.CRITICAL if ratio < 0.2 else Severity.WARNING,
                    confidence=0.9 if a.expected_why.startswith("stated") else 0.75,
                    subject=_run_subject(run),
                    causes=_busbw_causes(a),
                ),
            )
        elif m.cls in DEGRADED and a.expected != m.cls:
            ref = BASELINES[m.cls]
            ev.append(Evidence(f"'{m.cls}' reference", float(ref.value), unit="GB/s", source=ref.source))
            yield (
                key,
                busbw_below_baseline.finding(
                    f"all_reduce busbw {peak:.2f} GB/s: {matched}, a degraded path — {DEGRADED[m.cls]}"
                    + (f"; the expected class is {a.expected} ({a.expected_why})" if a.expected else "")
                    + ". Pass --link to compare with the link these GPUs should use.",
                    evidence=ev,
                    severity=Severity.WARNING,
                    confidence=0.5 if m.ambiguous_with else 0.65,
                    subject=_run_subject(run),
                    causes=_busbw_causes(a),
                ),
            )


def _best_below(run: Any, row: Any, label: str) -> float:
    """The highest busbw (out-of-place or in-place, as ``label``) of the run's rows smaller than ``row``;
    infinity when there is none (the row is then judged against the median alone)."""
    return _best_below_size(run, row.size_bytes, label)


def _best_below_size(run: Any, size: int, label: str) -> float:
    best = 0.0
    for r in run.rows:
        m = r.out_of_place if label == "out-of-place" else r.in_place
        if r.size_bytes < size and m.busbw_gbs:
            best = max(best, m.busbw_gbs)
    for z, sm in (getattr(run, "summary", None) or {}).items():  # rows past MAX_ROWS, per size
        if z < size:
            best = max([best, *sm.busbw(label)])
    return best if best > 0 else float("inf")


def _summarised_outliers(run: Any, med: float, low: float) -> Iterator[Finding]:
    """COMM005 on the rows a log of repeated runs held past ``MAX_ROWS`` (kept per size as value
    counts): one finding per size and placement, naming how many rows and the lowest one's line."""
    summary = getattr(run, "summary", None) or {}
    if not summary:
        return
    for z in run.large_sizes()[1]:
        sm = summary[z]
        for label in ("out-of-place", "in-place"):
            if label not in sm.lowest:
                continue
            bound = min(low * med, low * _best_below_size(run, z, label))
            n = sum(c for v, c in sm.busbw(label).items() if v and v < bound)
            if not n:
                continue
            v, line = sm.lowest[label]
            yield nccl_tests_outlier.finding(
                f"{n} {label} row(s) at {z} B past the first {len(run.rows)} rows ran below "
                f"{low * 100:.0f}% of the run's median {med:.2f} GB/s (lowest {v} GB/s).",
                evidence=[
                    Evidence(f"{label} busbw, size {z} (lowest)", v, med, "GB/s", f"{run.path}:{line}")
                ],
                subject=f"{run.path}:{line}",
                confidence=0.7,
            )


@rule(
    id="COMM005",
    name="nccl-tests-unstable-row",
    layer="comm",
    title="nccl-tests result with an outlier row or wrong results",
    requires=("nccl_tests",),
    thresholds=(ROW_OUTLIER,),
    severity=Severity.WARNING,
)
def nccl_tests_outlier(obs: Observations) -> Iterator[Finding]:
    """A bandwidth-bound row drops far below the run's median, or ``#wrong`` is non-zero.

    **Symptom**: one size (often in-place) much slower than its neighbours; or data validation errors.
    **Why**: a transient slowdown (another job on the GPUs, thermal/power capping, an NVLink or NIC
    retraining) during that row, or — for #wrong — corrupted data from a faulty link or GPU.
    **Fix**: rerun with more iterations (``-n 100``) on an idle node; check ``nvidia-smi -q -d
    PERFORMANCE,ECC`` and link error counters; drain the node if #wrong persists.
    **Verify**: `all_reduce_perf -b 1G -e 8G -f 2 -n 100 -c 1` twice; the row should match its neighbours.
    """
    for run in obs.get("nccl_tests") or []:
        from clusterdoctor.observe.comm.nccl_tests import counter_nth

        rows = run.large_rows()
        vals = run.large_busbw()
        n_vals = sum(vals.values())
        if n_vals >= 3:
            med = counter_nth(vals, n_vals // 2)
            low = 1 - float(ROW_OUTLIER.value)
            for r in rows:
                for label, m in (("out-of-place", r.out_of_place), ("in-place", r.in_place)):
                    # busbw never falls as the size grows on a steady link: a row below the median of
                    # rows still climbing to the plateau (no size >= 256 MiB in the run) is no outlier
                    # unless a smaller size ran faster
                    if (
                        m.busbw_gbs
                        and m.busbw_gbs < low * med
                        and m.busbw_gbs < low * _best_below(run, r, label)
                    ):
                        yield nccl_tests_outlier.finding(
                            f"{label} row at {r.size_bytes} B ran at {m.busbw_gbs} GB/s, "
                            f"{(1 - m.busbw_gbs / med) * 100:.0f}% below the run's median {med:.2f} GB/s.",
                            evidence=[
                                Evidence(
                                    f"{label} busbw, size {r.size_bytes}",
                                    m.busbw_gbs,
                                    med,
                                    "GB/s",
                                    f"{run.path}:{r.line}",
                                )
                            ],
                            subject=f"{run.path}:{r.line}",
                            confidence=0.7,
                        )
            yield from _summarised_outliers(run, med, low)
        wrong = [(r, m) for r in run.rows for m in (r.out_of_place, r.in_place) if m.wrong]
        n_wrong = len(wrong) + sum(sm.wrong for sm in (getattr(run, "summary", None) or {}).values())
        if n_wrong:
            if wrong:
                size, n, line = wrong[0][0].size_bytes, wrong[0][1].wrong, wrong[0][0].line
            else:  # only in the rows summarised past MAX_ROWS: the first of those
                line, size, n = min(
                    (sm.first_wrong[0], z, sm.first_wrong[1])
                    for z, sm in run.summary.items()
                    if sm.first_wrong is not None
                )
            yield nccl_tests_outlier.finding(
                f"nccl-tests reported {n_wrong} result(s) with wrong data (first at {size} B).",
                evidence=[Evidence("#wrong", n, 0, source=f"{run.path}:{line}")],
                severity=Severity.CRITICAL,
                confidence=0.95,
                subject=run.path,
                causes=("gpu.hw-faulty",),
            )


@rule(
    id="COMM013",
    name="nccl-tests-without-mpi",
    layer="comm",
    title="nccl-tests ran as independent single-process copies (built without MPI=1)",
    requires=("nccl_tests",),
    severity=Severity.CRITICAL,
    causes=("nccl-tests.no-mpi-build",),
)
def nccl_tests_without_mpi(obs: Observations) -> Iterator[Finding]:
    """One rank number is printed by processes on several hosts: each process ran its own copy of the test.

    **Symptom**: ``mpirun -np N all_reduce_perf`` across nodes prints N headers and N result tables, each
    with ``Rank 0``; the bandwidth is that of one node (or of one GPU), never of the network.
    **Why**: nccl-tests needs MPI to run one test over several processes (README: "NCCL tests rely on
    MPI to work on multiple processes, hence multiple nodes"); a binary built without ``MPI=1`` ignores
    the MPI launch, so every process runs its own test and no traffic crosses the nodes (so does one
    built against another MPI than the ``mpirun`` that starts it). When the device lists are cut, the
    copies show as output one run never prints: a second ``# nThread`` header before any device line,
    or a second ``# Avg bus bandwidth`` summary with no result row since the first (NVIDIA/nccl-tests#27,
    #213).
    **Fix**: rebuild with ``make MPI=1 MPI_HOME=<mpi> CUDA_HOME=<cuda> NCCL_HOME=<nccl>`` and rerun with the
    same ``mpirun`` command.
    **Verify**: `mpirun -np 2 -H host1,host2 ./build/all_reduce_perf -b 8 -e 1G -f 2 -g 1` prints one
    header whose device list holds Rank 0 and Rank 1 on the two hosts.
    """
    for run in obs.get("nccl_tests") or []:
        n = run.independent_copies
        if n < 2:
            k = getattr(run, "interleaved_copies", 1)
            if k >= 2:
                yield _interleaved_copies(run, k)
            continue
        hosts = sorted(run.hosts)
        yield nccl_tests_without_mpi.finding(
            f"{run.path}: the same rank number is printed by {n} processes on "
            f"{', '.join(hosts[:4])}{' …' if len(hosts) > 4 else ''}: each process ran the test alone, "
            "so nothing was measured between the nodes.",
            evidence=[
                Evidence("processes printing one rank number", n, 1, source=run.path),
                Evidence("test headers ('# nThread ...')", run.headers, source=run.path),
            ],
            subject=_run_subject(run),
            confidence=0.85,
        )


def _interleaved_copies(run: Any, k: int) -> Finding:
    """COMM013 told by the output's shape alone: headers or summaries printed again before any device
    line or result row (nccl-tests prints each once, from its main process, in one MPI run)."""
    what = (
        "'# nThread' header"
        if run.interleaved_headers >= run.interleaved_summaries
        else ("'# Avg bus bandwidth' summary")
    )
    return nccl_tests_without_mpi.finding(
        f"{run.path}: {k} copies of the test printed into one output (the {what} printed again "
        "with no device line or result row after the previous one): each process ran the test alone, "
        "so nothing was measured between the processes.",
        evidence=[
            Evidence("test headers ('# nThread ...')", run.headers, source=run.path),
            Evidence("summaries ('# Avg bus bandwidth')", run.summaries, 1, source=run.path),
        ],
        subject=_run_subject(run),
        confidence=0.7,
    )


_MPI_LAUNCHERS = ("mpirun", "mpiexec", "srun", "orterun", "prterun")


@rule(
    id="COMM021",
    name="nccl-tests-printed-nothing",
    layer="comm",
    title="nccl-tests printed nothing after its command line: the MPI start-up never finished",
    requires=("nccl_tests",),
    severity=Severity.WARNING,
    causes=("launcher.mpi-broken",),
)
def nccl_tests_printed_nothing(obs: Observations) -> Iterator[Finding]:
    """An nccl-tests command started with an MPI launcher and not one line of output after it.

    **Symptom**: ``mpirun ... all_reduce_perf ...`` hangs with no output at all, not even the ``# nThread``
    header.
    **Why**: nccl-tests (src/common.cu ``run()``) prints its header right after ``MPI_Init`` and one
    ``MPI_Allgather`` of the host names, before any NCCL call; with no header the processes never got
    through MPI itself: a rank did not start (ssh, hostfile, a path missing on the other node) or MPI's
    own transport between the nodes hangs (UCX/BTL device, firewall). NCCL is not involved yet.
    **Fix**: make MPI work first: run ``mpirun`` with the same options on ``hostname`` and on an MPI hello
    world; pick the transport and interface explicitly (``--mca pml ucx -x UCX_NET_DEVICES=...`` or
    ``--mca btl tcp,self --mca btl_tcp_if_include <iface>``), open the firewall between the nodes.
    **Verify**: `mpirun -np 2 -H host1,host2 hostname` returns both names; then the test prints its header.
    """
    runs = obs.get("nccl_tests") or []
    if any(r.rows or r.headers or r.ranks for r in runs) or _logs(obs):
        return  # another paste shows output of the run (or NCCL's own log): it got past MPI
    for run in runs:
        if not run.command_only or not run.command:
            continue
        words = set(run.command.replace("/", " ").split())
        if not words & set(_MPI_LAUNCHERS):
            continue  # one process without MPI prints its header at once: nothing to say
        yield nccl_tests_printed_nothing.finding(
            "the nccl-tests run printed nothing after its command line, not even the header it prints right "
            "after MPI start-up: the processes never got through MPI (launch or MPI's transport between the "
            "nodes), before any NCCL call.",
            evidence=[Evidence(f"{run.path}:{run.command_line}: {run.command[:120]}", source=run.path)],
            subject=run.path,
            confidence=0.6,
        )
