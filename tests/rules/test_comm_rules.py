"""Each file in fixtures/comm yields the finding its SOURCES.md describes; topology joins; ncu rules."""

from __future__ import annotations

import pytest

from clusterdoctor.model import Severity
from clusterdoctor.observe.comm.nccl_log import parse_nccl_log
from clusterdoctor.observe.comm.ncu import parse_ncu_csv
from clusterdoctor.observe.comm.sources import load_comm_observations
from clusterdoctor.rules import comm as C
from clusterdoctor.rules.registry import Observations, load_all, parse_sections, run_rules
from clusterdoctor.topology.model import Device, NumaNode, PathInfo, Topology
from tests.conftest import TEST_DATA, shared_fixture


def _run(data: dict, **extra) -> list:
    obs = Observations(dict(data))
    for k, v in extra.items():
        obs.put(k, v)
    rules = [r for r in load_all() if r.layer == "comm"]
    findings, _skipped, _ran = run_rules(obs, rules)
    return findings


def _fixture(name: str, **extra) -> list:
    return _run(load_comm_observations(shared_fixture(f"comm/{name}")), **extra)


def _ids(findings) -> list[str]:
    return [f.rule for f in findings]


def test_socket_fallback_vs_efa() -> None:
    f = _fixture("nccl_tests_2node_socket_no_efa.log")
    sock = [x for x in f if x.rule == "COMM001"]
    assert len(sock) == 1 and "Socket" in sock[0].summary
    for name in ("nccl_tests_2node_efa.log", "nccl_efa_2node_t4_init_and_allreduce_perf.log"):
        assert "COMM001" not in _ids(_fixture(name)), name


def test_sockets_chosen_by_the_environment_are_info_not_a_fault() -> None:
    # dev control ok-nccl-003: a working 2-node job with NCCL_IB_DISABLE=1 set on purpose
    text = (TEST_DATA / "incidents" / "ok-nccl-003" / "paste.txt").read_text()
    (sock,) = [x for x in _run({"nccl_log": [parse_nccl_log(text, "p")]}) if x.rule == "COMM001"]
    assert sock.severity == Severity.INFO and "disables the RDMA transport" in sock.summary
    # the same log where the IB plugin looked and found nothing stays a fault
    no_dev = text.replace("NCCL_IB_DISABLE set by environment to 1.", "NET/IB : No device found.")
    (sock,) = [x for x in _run({"nccl_log": [parse_nccl_log(no_dev, "p")]}) if x.rule == "COMM001"]
    assert sock.severity >= Severity.WARNING


def test_sockets_without_an_ib_attempt_are_chosen_not_a_fault() -> None:
    # dev control ok-nccl-1001 (nccl#676): NCCL_NET=Socket, which this NCCL does not print; the log runs from
    # "Bootstrap : Using" to "NET/Socket : Using" with no NET/IB line, so the IB transport was never tried
    text = (TEST_DATA / "incidents" / "ok-nccl-1001" / "paste.txt").read_text()
    log = parse_nccl_log(text, "p")
    assert log.ib_transport_skipped
    (sock,) = [x for x in _run({"nccl_log": [log]}) if x.rule == "COMM001"]
    assert sock.severity == Severity.INFO
    # had IB been tried and found nothing, the fallback is a fault
    tried = text.replace(
        "NCCL INFO NET/Socket : Using",
        "NCCL INFO NET/IB : No device found.\ngpu01:124172:124172 [0] NCCL INFO NET/Socket : Using",
    )
    log = parse_nccl_log(tried, "p")
    assert not log.ib_transport_skipped
    (sock,) = [x for x in _run({"nccl_log": [log]}) if x.rule == "COMM001"]
    assert sock.severity >= Severity.WARNING
    # a paste that starts after the bootstrap line cannot say whether IB was tried
    cut = "\n".join(line for line in text.splitlines() if "Bootstrap :" not in line)
    assert not parse_nccl_log(cut, "p").ib_transport_skipped


def test_efa_runs_are_not_below_their_own_class() -> None:
    # The EFA log names its network (AWS Libfabric) and two hosts: compared with the EFA baseline, no finding.
    assert "COMM004" not in _ids(_fixture("nccl_efa_2node_t4_init_and_allreduce_perf.log"))


@pytest.mark.parametrize(
    "name,link,expect_ratio_below",
    [
        ("nccl_tests_dgxa100_4gpu_p2pdisabled.txt", "nvswitch", 0.05),  # 5.2 vs 222 GB/s
        ("nccl_tests_a40_2gpu_p2pdisabled_node.txt", "nvlink", 0.1),  # 3.9 vs 47.4 GB/s
    ],
)
def test_p2p_disabled_paths_far_below_baseline(name: str, link: str, expect_ratio_below: float) -> None:
    f = [x for x in _fixture(name, comm_link_class=link) if x.rule == "COMM004"]
    assert len(f) == 1
    assert f[0].severity == Severity.CRITICAL
    measured = f[0].evidence[0].value
    assert measured / f[0].evidence[0].threshold < expect_ratio_below
    assert "'pcie' class" in f[0].summary  # matches the host-memory (P2P off) baseline


@pytest.mark.parametrize(
    "name,link",
    [
        ("nccl_tests_dgxh100_4gpu_nvswitch.txt", "nvswitch"),
        ("nccl_tests_dgxa100_4gpu_nvswitch.txt", "nvswitch"),
        ("nccl_tests_a40_2gpu_nvlink.txt", "nvlink"),
    ],
)
def test_nvswitch_and_nvlink_baselines_are_healthy(name: str, link: str) -> None:
    assert "COMM004" not in _ids(_fixture(name, comm_link_class=link))


def test_baseline_constants_match_the_fixture_files() -> None:
    for key, name in (
        ("nvswitch_h100", "nccl_tests_dgxh100_4gpu_nvswitch.txt"),
        ("nvswitch_a100", "nccl_tests_dgxa100_4gpu_nvswitch.txt"),
        ("nvlink", "nccl_tests_a40_2gpu_nvlink.txt"),
        ("pcie", "nccl_tests_a40_2gpu_p2pdisabled_node.txt"),
    ):
        run = load_comm_observations(shared_fixture(f"comm/{name}"))["nccl_tests"][0]
        assert C.BASELINES[key].value == pytest.approx(run.avg_busbw_gbs, rel=0.01)
        assert name in C.BASELINES[key].source


def test_nvswitch_outlier_row() -> None:
    f = [x for x in _fixture("nccl_tests_dgxa100_4gpu_nvswitch.txt") if x.rule == "COMM005"]
    assert len(f) == 1 and "164.13" in f[0].summary and "in-place" in f[0].summary


def test_flight_recorder_missing_rank() -> None:
    f = [x for x in _fixture("torchfrtrace_not_all_ranks_joining_2rank.txt") if x.rule == "COMM009"]
    assert len(f) == 1 and f[0].severity == Severity.CRITICAL
    assert _ev(f[0], "culprit ranks").value == [1] and "missing ranks {1}" in f[0].summary


def test_flight_recorder_tutorial_dump_is_healthy() -> None:
    # One completed all_reduce; last enqueued == last completed: nothing to report.
    assert "COMM009" not in _ids(_fixture("torch_flight_recorder_dump_unpickled_example.txt"))


def test_real_fr_dumps_culprit() -> None:
    f = [x for x in _run(load_comm_observations(TEST_DATA / "comm" / "fr_gloo_2rank")) if x.rule == "COMM009"]
    assert len(f) == 1 and _ev(f[0], "culprit ranks").value == [1]


def test_kineto_exposed_communication() -> None:
    b = [x for x in _fixture("kineto/hta_sampled_rank-0_ws128.json.gz") if x.rule == "COMM006"]
    assert len(b) == 1 and b[0].evidence[0].value > 25  # 28.7% exposed (SendRecv not overlapped)
    assert "COMM006" not in _ids(_fixture("kineto/hta_nccl_data_rank0_ws2_allreduce.json.gz"))  # 4.7%


def test_straggler_on_real_gloo_traces() -> None:
    from clusterdoctor.analyze.comm import collectives_of
    from clusterdoctor.observe.comm.kineto import load_kineto

    # Oracle: the i-th collective of each rank, who entered it last and by how much.
    calls = [
        collectives_of(load_kineto(TEST_DATA / "comm" / "gloo_2rank" / f"rank{r}.json.gz")) for r in (0, 1)
    ]
    late = {0: [], 1: []}
    for c0, c1 in zip(*calls):
        r = 0 if c0.ts > c1.ts else 1
        late[r].append(abs(c0.ts - c1.ts))
    worst = max(late, key=lambda r: len(late[r]))
    share = len(late[worst]) / len(calls[0])
    mean = sum(late[worst]) / len(late[worst])
    assert share >= 0.5 and mean >= 100  # the committed capture: rank 0 was late 7 of 9 times
    f = [x for x in _run(load_comm_observations(TEST_DATA / "comm" / "gloo_2rank")) if x.rule == "COMM007"]
    assert len(f) == 1 and f[0].subject == f"rank {worst}"
    assert f[0].evidence[0].value == len(late[worst])


def _topo(gpu_node: int, nic_path: str | None = None) -> Topology:
    # A constructed two-socket machine for the join (not a captured topology).
    gpu = Device("GPU0", "gpu", pci="0000:35:00.0", numa_node=gpu_node, index=0)
    nic = Device("mlx5_0", "nic", pci="0000:36:00.0", numa_node=gpu_node, attrs={"rdma": True})
    t = Topology(
        source="constructed",
        source_kind="test",
        nodes=[
            NumaNode(0, tuple(range(0, 24)) + tuple(range(48, 72))),
            NumaNode(1, tuple(range(24, 48)) + tuple(range(72, 96))),
        ],
        gpus=[gpu],
        nics=[nic],
        hostname="test-nccl-efa-worker-0",
    )
    if nic_path:
        t.paths.append(PathInfo("GPU0", "mlx5_0", nic_path))
    return t


def test_affinity_off_the_gpu_node_with_topology() -> None:
    data = load_comm_observations(shared_fixture("comm/nccl_efa_2node_t4_init_and_allreduce_perf.log"))
    # worker-0's NCCL mask is CPUs 0-23,48-71 (node 0): a GPU on node 1 makes it remote, on node 0 it is fine.
    off = [x for x in _run(data, topology=_topo(gpu_node=1)) if x.rule == "COMM003"]
    assert len(off) == 1 and "node(s) [0]" in off[0].summary
    assert not [x for x in _run(data, topology=_topo(gpu_node=0)) if x.rule == "COMM003"]


def test_gdr_unused_where_path_allows() -> None:
    # Channel lines in NCCL's net.cc format (reference/comm.md section 3).
    def log(via: str):
        text = (
            "test-nccl-efa-worker-0:21:27 [0] NCCL INFO comm 0xa rank 0 nranks 2 cudaDev 0 busId 35000 - Init COMPLETE\n"
            f"test-nccl-efa-worker-0:21:27 [0] NCCL INFO Channel 00/0 : 1[36000] -> 0[35000] [receive] via {via}\n"
        )
        return parse_nccl_log(text, "constructed.log")

    hit = _run({"nccl_log": [log("NET/IB/0")], "comm": ["x"]}, topology=_topo(0, "PIX"))
    assert [x.rule for x in hit if x.rule == "COMM002"] == ["COMM002"]
    assert "COMM002" not in _ids(
        _run({"nccl_log": [log("NET/IB/0/GDRDMA")], "comm": ["x"]}, topology=_topo(0, "PIX"))
    )
    assert "COMM002" not in _ids(
        _run({"nccl_log": [log("NET/IB/0")], "comm": ["x"]}, topology=_topo(0, "SYS"))
    )


NCU_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",'
    '"Metric Name","Metric Unit","Metric Value"'
)


def _ncu(rows: list[tuple[str, str, str, str, str]]) -> object:
    # Constructed in ncu's long CSV layout (no real ncu capture of NCCL kernels is available).
    lines = [NCU_HEADER] + [
        f'"{i}","1","p","h","{k}","1","7","S","{m}","{u}","{v}"' for i, k, m, u, v in rows
    ]
    return parse_ncu_csv("\n".join(lines), "constructed.csv")


def test_ncu_l2_contention_needs_3ms() -> None:
    k = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    hot = _ncu([("0", k, "Duration", "msecond", "2.0"), ("0", k, "L2 Cache Throughput", "%", "95"),
                ("1", k, "Duration", "msecond", "1.5"), ("1", k, "L2 Cache Throughput", "%", "92")])  # fmt: skip
    assert "COMM010" in _ids(_run({"ncu": [hot]}))
    short = _ncu([("0", k, "Duration", "msecond", "2.0"), ("0", k, "L2 Cache Throughput", "%", "95")])
    assert "COMM010" not in _ids(_run({"ncu": [short]}))
    gemm = _ncu(
        [("0", "gemm", "Duration", "msecond", "9.0"), ("0", "gemm", "L2 Cache Throughput", "%", "99")]
    )
    assert "COMM010" not in _ids(_run({"ncu": [gemm]}))


def test_ncu_dram_throttle() -> None:
    k = "ncclKernel_AllReduce_RING_LL_Sum_float"
    rows = [
        ("0", k, "dram__bytes.sum.per_second", "Gbyte/second", "180"),
        ("0", k, "smsp__pcsamp_warps_issue_stalled_memory_throttle", "", "40"),
        ("0", k, "smsp__pcsamp_warps_issue_stalled_long_scoreboard", "", "60"),
    ]
    assert "COMM011" in _ids(_run({"ncu": [_ncu(rows)]}))
    fast = [(*r[:4], "900") if "dram" in r[2] else r for r in rows]
    assert "COMM011" not in _ids(_run({"ncu": [_ncu(fast)]}))


def test_every_comm_rule_is_documented() -> None:
    rules = [r for r in load_all() if r.fn.__module__.startswith("clusterdoctor.rules.comm")]
    # COMM016, COMM018 (comm_versions), COMM017, COMM022, COMM023, COMM024, COMM025 (comm_p2p), COMM019
    # COMM026, COMM027 (comm_ifaces), COMM020 (comm_local_peers)
    assert len(rules) == 27
    for r in rules:
        sec = parse_sections(r.doc)
        assert set(sec) >= {"Symptom", "Why", "Fix", "Verify"}, r.id
        verify = r.finding("x").verify
        assert verify, r.id
        for v in verify:  # each is a command line: a program (maybe after VAR=value) and its arguments
            words = [w for w in v.split() if "=" not in w.split("/")[0]]
            assert words and not v.startswith("/") and " " in v, (r.id, v)
        for t in r.thresholds:
            assert t.source, (r.id, t.name)


def test_busid_conversion() -> None:
    assert C.nccl_busid_to_pci("f5000") == "0000:f5:00.0"
    assert C.nccl_busid_to_pci("1b000") == "0000:1b:00.0"
    assert C.nccl_busid_to_pci("zz") is None


PUBLIC = TEST_DATA / "comm" / "public"
TORCHRUN = TEST_DATA / "comm" / "torchrun_gloo"


def _by_rule(findings, rule: str) -> list:
    return [f for f in findings if f.rule == rule]


def test_first_collective_never_completed_real_4_rank_log() -> None:
    f = _run(load_comm_observations(PUBLIC / "unige_hpc_4301_allgather_seq1_4rank.log"))
    (first,) = _by_rule(f, "COMM012")
    assert not _by_rule(f, "COMM009")  # one finding for the instance, not a hang and a first-collective one
    assert first.severity == Severity.CRITICAL and first.subject == "ranks 0-3"
    assert "very first collective never completed" in first.summary
    assert "every rank arrived" in first.summary  # all 4 ranks of the ALLGATHER (1 -> 4 elements) reported it
    ev = {e.description: e.value for e in first.evidence}
    assert ev["collective"] == "ALLGATHER" and ev["group / sequence"] == "0 / 1"
    assert ev["NumelIn / NumelOut"] == "1 / 4" and ev["timeout"] == 600000
    assert ev["last enqueued / last completed work"] == "1 / -1" and ev["ranks reporting it"] == [0, 1, 2, 3]
    text = " ".join([first.fix, *first.verify])
    for needed in ("TORCH_NCCL_TRACE_BUFFER_SIZE", "NCCL_DEBUG=INFO", "torchfrtrace"):
        assert needed in text


def test_timeout_mid_training_is_a_hang_not_a_first_collective() -> None:
    f = _run(load_comm_observations(PUBLIC / "basicsr_737_allreduce_seq808.log"))
    assert not _by_rule(f, "COMM012")
    (h,) = _by_rule(f, "COMM009")
    assert h.subject == "ranks 0-2" and "SeqNum=808" in h.summary and "NumelIn=9801523" in h.summary
    assert "last enqueued work 811, last completed 807" in h.summary


def test_op_mismatch_at_one_seqnum_names_both_ranks() -> None:
    (h,) = _by_rule(_run(load_comm_observations(PUBLIC / "nccl_1409_indented_op_mismatch.log")), "COMM009")
    assert h.subject == "ranks 3, 7" and "BROADCAST" in h.summary and "ALLREDUCE" in h.summary
    assert h.severity == Severity.WARNING  # two ranks: which one diverged is not known, nor their groups


def test_gloo_timeout_seen_in_console_and_tee_file_is_one_finding() -> None:
    data = load_comm_observations(TORCHRUN / "stuck_rank_tee")
    (h,) = _by_rule(_run(data), "COMM009")
    assert h.subject == "rank 0" and "gloo recv" in h.summary
    lines = _ev(h, "log lines it rests on")
    assert lines.value == 2 and "console.log" in lines.source and "stderr.log" in lines.source
    assert any("TORCH_DISTRIBUTED_DEBUG=DETAIL" in v for v in h.verify)


def test_gloo_debug_detail_names_the_culprit() -> None:
    f = _by_rule(_run(load_comm_observations(TORCHRUN / "stuck_rank_detail.log")), "COMM009")
    assert [x.subject for x in f] == ["rank 1"] and "did not reach gloo's monitoredBarrier" in f[0].summary


def test_rank_that_never_reached_init_process_group() -> None:
    (h,) = _by_rule(_run(load_comm_observations(TORCHRUN / "late_rank_plain.log")), "COMM012")
    assert h.subject == "rank 1" and "process group never formed" in h.summary


@pytest.mark.parametrize(
    "path,scope,matched",
    [
        # Expectations from fixtures/comm/SOURCES.md (what each run is) and the files' busbw columns.
        ("comm/nccl_tests_dgxh100_4gpu_nvswitch.txt", "intra-node", "nvswitch"),
        ("comm/nccl_tests_dgxa100_4gpu_nvswitch.txt", "intra-node", "nvswitch"),
        ("comm/nccl_tests_a40_2gpu_nvlink.txt", "intra-node", "nvlink"),
        ("comm/nccl_tests_a40_2gpu_p2pdisabled_node.txt", "intra-node", "pcie"),
        ("comm/nccl_tests_dgxa100_4gpu_p2pdisabled.txt", "intra-node", "pcie"),
        ("comm/nccl_efa_2node_t4_init_and_allreduce_perf.log", "inter-node", "efa"),
        ("comm/nccl_tests_2node_efa.log", "unknown", "efa"),
        ("comm/nccl_tests_2node_socket_no_efa.log", "unknown", "socket"),
    ],
)
def test_link_class_the_busbw_matches(path: str, scope: str, matched: str) -> None:
    obs = Observations(load_comm_observations(shared_fixture(path)))
    a = C.nccl_tests_link(obs, obs.get("nccl_tests")[0])
    assert (a.scope, a.match.cls) == (scope, matched)


@pytest.mark.parametrize(
    "name", ["nccl_tests_a40_2gpu_p2pdisabled_node.txt", "nccl_tests_dgxa100_4gpu_p2pdisabled.txt"]
)
def test_degraded_class_flagged_without_link(name: str) -> None:
    (f,) = _by_rule(_fixture(name), "COMM004")
    assert f.severity == Severity.WARNING and "'pcie' class" in f.summary and "degraded" in f.summary
    assert "host memory" in f.summary and "--link" in f.summary


@pytest.mark.parametrize(
    "name",
    [
        "nccl_tests_dgxh100_4gpu_nvswitch.txt",
        "nccl_tests_dgxa100_4gpu_nvswitch.txt",
        "nccl_tests_a40_2gpu_nvlink.txt",
        "nccl_tests_2node_efa.log",
        "nccl_efa_2node_t4_init_and_allreduce_perf.log",
    ],
)
def test_healthy_runs_are_not_flagged(name: str) -> None:
    assert "COMM004" not in _ids(_fixture(name))


def test_gpu_model_gives_the_expected_class() -> None:
    # NVIDIA/nccl-tests#290: 8x "NVIDIA H100 80GB HBM3" on one host, busbw ~465 GB/s (NVLS): NVSwitch, healthy.
    obs = Observations(load_comm_observations(PUBLIC / "nccl_tests_290_h100_1node_8gpu.txt"))
    a = C.nccl_tests_link(obs, obs.get("nccl_tests")[0])
    assert (a.scope, a.match.cls, a.expected) == ("intra-node", "nvswitch", "nvswitch")
    assert a.baseline is C.BASELINES["nvswitch_h100"] and "COMM004" not in _ids(_run(dict(obs.data)))
    # The same job on two hosts (srun -l " 0: " prefixes): inter-node, above every network reference.
    obs = Observations(load_comm_observations(PUBLIC / "nccl_tests_290_h100_2node_16gpu_srun.txt"))
    a = C.nccl_tests_link(obs, obs.get("nccl_tests")[0])
    assert a.scope == "inter-node" and a.match.cls is None and "COMM004" not in _ids(_run(dict(obs.data)))


def test_sxm_part_on_host_memory_is_critical() -> None:
    """Composed from two real outputs (not one run): the rank lines of nccl-tests#290's H100 node and the
    rows of the DGX A100 run with NCCL_P2P_DISABLE=1 — what an H100 node with P2P off prints."""
    from clusterdoctor.observe.comm.nccl_tests import parse_nccl_tests

    header = [
        ln for ln in (PUBLIC / "nccl_tests_290_h100_1node_8gpu.txt").read_text().splitlines() if "Rank" in ln
    ]
    rows = shared_fixture("comm/nccl_tests_dgxa100_4gpu_p2pdisabled.txt").read_text()
    run = parse_nccl_tests("\n".join(header) + "\n" + rows, "composed.txt")
    (f,) = _by_rule(_run({"nccl_tests": [run], "comm": ["composed.txt"]}), "COMM004")
    assert f.severity == Severity.CRITICAL and f.subject == "host node005"
    assert "nvswitch baseline (369.9 GB/s" in f.summary and "'pcie' class" in f.summary
    assert {e.description: e.value for e in f.evidence}["GPU model"] == "NVIDIA H100 80GB HBM3"


def test_same_instance_in_two_files_is_one_finding_with_both(tmp_path) -> None:
    """A log kept twice (console capture and a copy), an nccl-tests table pasted twice: one finding each,
    naming what it is about, with both files as evidence."""
    import shutil

    for name in ("a", "b"):
        shutil.copy(PUBLIC / "deepspeed_pdsh_accelerate_1317_socket.log", tmp_path / f"{name}.log")
        shutil.copy(shared_fixture("comm/nccl_tests_a40_2gpu_p2pdisabled_node.txt"), tmp_path / f"{name}.txt")
    f = _run(load_comm_observations(tmp_path))
    (sock,) = _by_rule(f, "COMM001")
    assert sock.subject == "hosts lambda-scalar02, lambda-scalar03" and sock.severity == Severity.CRITICAL
    assert {e.source for e in sock.evidence if e.description == "NCCL network"} == {
        str(tmp_path / "a.log"),
        str(tmp_path / "b.log"),
    }
    (bw,) = _by_rule(f, "COMM004")
    assert {e.source for e in bw.evidence if e.description.startswith("median busbw")} == {
        str(tmp_path / "a.txt"),
        str(tmp_path / "b.txt"),
    }


def test_every_comm_finding_names_its_subject() -> None:
    paths = [
        PUBLIC,
        TORCHRUN,
        TEST_DATA / "comm" / "gloo_2rank",
        TEST_DATA / "comm" / "fr_gloo_2rank",
        shared_fixture("comm"),
    ]
    findings = _run(load_comm_observations(paths))
    assert len(findings) > 10
    for f in findings:
        assert f.subject and "None" not in f.subject, (f.rule, f.summary)
    keys = [(f.rule, f.subject, f.summary) for f in findings]
    assert len(keys) == len(set(keys))  # never two identical findings


def _ev(finding, description: str):
    """The finding's evidence with this description (exactly one)."""
    (e,) = [e for e in finding.evidence if e.description == description]
    return e


def test_rising_curve_without_plateau_has_no_outlier_row() -> None:
    # dev case ok-nccl-011: sizes up to 32 MiB, busbw still climbing (3 -> 300 GB/s): not an outlier
    path = TEST_DATA / "incidents" / "ok-nccl-011" / "paste.txt"
    assert "COMM005" not in _ids(_run(load_comm_observations(str(path))))


def test_mpirun_nccl_tests_that_printed_nothing() -> None:
    # dev case nccl-030: the prompt and mpirun command line, nothing after it (the run hung in MPI)
    path = TEST_DATA / "incidents" / "nccl-030" / "paste.txt"
    f = [x for x in _run(load_comm_observations(str(path))) if x.rule == "COMM021"]
    assert len(f) == 1 and "launcher.mpi-broken" in f[0].causes


def test_command_line_with_output_after_it_is_not_command_only() -> None:
    from clusterdoctor.observe.comm.nccl_tests import parse_nccl_tests

    text = (
        "$ mpirun -np 2 ./all_reduce_perf -b 8 -e 128M\n# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728\n"
    )
    assert not parse_nccl_tests(text).command_only
    only = parse_nccl_tests("$ ./build/all_reduce_perf -b 8 -e 8 -g 1\n\n")
    assert only.command_only and not [x for x in _run({"nccl_tests": [only]}) if x.rule == "COMM021"]


def test_bootstrap_failure_over_ipoib_names_the_socket_interface() -> None:
    # dev case nccl-1001 (nccl#1000): the OOB/bootstrap interface is the IPoIB port ibp75s0 and the
    # bootstrap fails (misc/socket.cc -> bootstrap.cc:270 -> 2); the fix was NCCL_SOCKET_IFNAME=<ethernet>
    text = (TEST_DATA / "incidents" / "nccl-1001" / "paste.txt").read_text()
    log = parse_nccl_log(text, "p")
    assert log.bootstrap_ifs == {"ibp75s0"} and log.bootstrap_errors == ["bootstrap.cc:270 -> 2"]
    (f,) = _by_rule(_run({"nccl_log": [log]}), "COMM026")
    assert "ibp75s0" in f.summary and f.causes == ("nccl.socket-iface",)
    # an Ethernet bootstrap interface, or one the user set, is not this rule's
    eth = text.replace("OOB ibp75s0:", "OOB enp1s0:")
    assert not _by_rule(_run({"nccl_log": [parse_nccl_log(eth, "p")]}), "COMM026")
    env = "h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib\n" + text
    assert not _by_rule(_run({"nccl_log": [parse_nccl_log(env, "p")]}), "COMM026")
    # a healthy start-up (ok-nccl-1001) has no bootstrap error trace
    ok = (TEST_DATA / "incidents" / "ok-nccl-1001" / "paste.txt").read_text()
    assert not _by_rule(_run({"nccl_log": [parse_nccl_log(ok, "p")]}), "COMM026")


def test_forced_ifname_failing_on_one_host_names_the_socket_interface() -> None:
    # dev case nccl-1005 (nccl-tests#219): mpirun -x NCCL_SOCKET_IFNAME=enp6s0 to both hosts, one of which
    # names its NIC enp4s0; only that host reports 'internal error'
    from clusterdoctor.observe.comm.nccl_tests import parse_nccl_tests

    case = TEST_DATA / "incidents" / "nccl-1005"
    out = parse_nccl_tests((case / "paste.txt").read_text(), "paste.txt")
    cmd = parse_nccl_tests((case / "paste-2.txt").read_text(), "paste-2.txt")
    assert out.failures == [("fengyun", "internal error - please report this issue to the NCCL developers /")]
    assert "NCCL_SOCKET_IFNAME=enp6s0" in (cmd.command or "")
    (f,) = _by_rule(_run({"nccl_tests": [out, cmd]}), "COMM027")
    assert f.subject == "host fengyun" and f.causes == ("nccl.socket-iface",)
    # without the command, or with a list of names, it is not this rule's
    assert not _by_rule(_run({"nccl_tests": [out]}), "COMM027")
    cmd.command = (cmd.command or "").replace("=enp6s0", "=enp6s0,enp4s0")
    assert not _by_rule(_run({"nccl_tests": [out, cmd]}), "COMM027")
