"""Trace loaders on the real openb files (expectations read from the files, see SOURCES.md)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.sim.cluster import synthetic_topology, with_synthetic_topology
from clusterdoctor.sim.traces import load_openb_nodes, load_openb_pods, parse_openb_nodes, parse_openb_pods
from tests.conftest import shared_fixture

OPENB = "sched/alibaba_gpu_v2023"


def test_openb_default_pods_match_the_file():
    pods = load_openb_pods(shared_fixture(f"{OPENB}/openb_pod_list_default.csv"))
    assert len(pods) == 8152  # 8153 lines with the header
    # first data row: openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0
    assert (pods.names[0], pods.cpu_milli[0], pods.memory_mib[0], pods.num_gpu[0], pods.gpu_milli[0]) == (
        "openb-pod-0000",
        12000,
        16384,
        1,
        1000,
    )
    assert pods.creation[0] == 0 and pods.deletion[0] == 12537496
    # second row shares a GPU: 460 milli
    assert pods.gpu_milli[1] == 460
    assert sum(1 for n in pods.num_gpu if n == 0) == 1088
    assert sum(1 for n, m in zip(pods.num_gpu, pods.gpu_milli) if n == 1 and m < 1000) == 3078
    assert sum(1 for n in pods.num_gpu if n == 8) == 44
    i = pods.names.index("openb-pod-0017")  # openb-pod-0017,88000,327680,8,1000,,Burstable,...
    assert (pods.cpu_milli[i], pods.num_gpu[i], pods.gpu_milli[i], pods.priority[i]) == (88000, 8, 1000, 1)


def test_openb_node_list_matches_the_file():
    c = load_openb_nodes(shared_fixture(f"{OPENB}/openb_node_list_gpu_node.csv"))
    assert len(c.nodes) == 1213 and c.total_gpus == 6212
    assert c.nodes[0].name == "openb-node-0000" and c.nodes[0].model == "P100" and c.nodes[0].gpus == 2
    assert c.nodes[-1].name == "openb-node-1212" and c.nodes[-1].gpus == 8 and c.nodes[-1].model == "G2"
    assert c.gpus_by_model()["G2"] == 4392 and c.gpus_by_model()["T4"] == 842


def test_multigpu_variant_has_five_columns_and_no_times():
    pods = load_openb_pods(shared_fixture(f"{OPENB}/openb_pod_list_multigpu20.csv"))
    assert pods.creation is None and pods.names[1] == "openb-pod-0001" and pods.gpu_milli[1] == 460


def test_synthetic_topology_is_marked():
    c = load_openb_nodes(shared_fixture(f"{OPENB}/openb_node_list_gpu_node.csv"))
    t = with_synthetic_topology(c)
    assert t.topology_synthetic and any("synthetic" in n for n in t.notes)
    assert synthetic_topology("T4", 2)[0] == ()
    assert synthetic_topology("G2", 8)[0] == (tuple(range(8)),)


@pytest.mark.parametrize(
    "text,reason",
    [
        ("", "empty file"),
        ("sn,cpu_milli\nx,1\n", "missing column"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn1,abc,1,1,T4\n", "not a number"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1,T4\nn1,1,1,1,T4\n", "duplicate"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1\n", "expected 5 fields"),
    ],
)
def test_bad_node_lists_raise_input_error(text, reason):
    with pytest.raises(InputError) as e:
        parse_openb_nodes(text, "nodes.csv")
    assert reason in e.value.reason and e.value.path == "nodes.csv"


def test_bad_pod_rows_name_the_line():
    text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,500\np1,1,1,2,500\n"
    with pytest.raises(InputError) as e:
        parse_openb_pods(text, "pods.csv")
    assert e.value.line == 3 and "share one GPU" in e.value.reason


def test_gpu_milli_above_1000_is_clamped_like_fgd():
    pods = parse_openb_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,1500\np1,1,1,0,300\n")
    assert pods.gpu_milli == [1000, 0]


_REAL_HEAD: list[bytes] = []


def _real_head() -> bytes:
    if not _REAL_HEAD:
        p = shared_fixture(f"{OPENB}/openb_pod_list_default.csv")
        _REAL_HEAD.append(p.read_bytes()[:3000])
    return _REAL_HEAD[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_fuzz_random_bytes_only_input_error(data):
    for parse in (parse_openb_pods, parse_openb_nodes):
        try:
            parse(data)
        except InputError:
            pass


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2999), st.binary(min_size=1, max_size=8), st.integers(0, 40))
def test_fuzz_mutated_real_trace_only_input_error(pos, junk, cut):
    head = _real_head()
    data = head[:pos] + junk + head[pos + cut :]
    try:
        pods = parse_openb_pods(data)
        assert len(pods) >= 1
    except InputError:
        pass
