"""Communication inputs read in parallel, each file once (issue 21 item 6): local processes give what
the serial load gives, shares are contiguous and balanced, shipped bytes are reported under the
driver's paths (the Ray path: test_parallel_ray.py)."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.cli.comm import build_report
from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.parallel import load_comm_parallel, load_share, split_shares
from clusterdoctor.observe.comm.sources import InputFile, discover_comm_inputs, load_comm_observations
from clusterdoctor.observe.watch.traces import join_step_sources, steps_from_loaded
from clusterdoctor.rules.comm import comm_analysis, run_comm_rules
from clusterdoctor.rules.registry import Observations
from tests.conftest import shared_fixture


def comm_dir(tmp_path):
    """The real comm fixtures, and a file that is no comm input."""
    src = shared_fixture("comm")  # skips, saying why, in a clone without ../shared
    d = tmp_path / "in"
    shutil.copytree(src, d)
    (d / "notes.bin").write_bytes(b"\x00\x01\x02" * 100)
    return d


def report(data):
    obs = Observations(dict(data))
    findings, skipped = run_comm_rules(obs)
    return json.loads(json.dumps(build_report(data, comm_analysis(obs), findings, skipped, obs), default=str))


def test_local_processes_give_the_serial_load(tmp_path):
    d = comm_dir(tmp_path)
    serial = load_comm_observations([d])
    data, results = load_comm_parallel([d], workers=2)
    assert report(data) == report(serial)
    assert data["comm"] == serial["comm"] and data["unrecognised"] == serial["unrecognised"]
    assert any(p.endswith("notes.bin") for p, _ in data["unrecognised"])
    # the workers' step summaries are what the driver would make of the loaded traces
    assert join_step_sources(results) == steps_from_loaded(
        serial.get("kineto", []), serial.get("flight_recorder", [])
    )


def test_shipped_bytes_are_reported_under_the_drivers_paths(tmp_path):
    d = comm_dir(tmp_path)
    items = [i for i in discover_comm_inputs([d]) if i.kinds]
    by_path, _, _ = load_share([(i.path, tuple(i.kinds), None) for i in items])
    shipped, problems, steps = load_share(
        [(i.path, tuple(i.kinds), open(i.path, "rb").read()) for i in items]
    )
    assert problems == []
    assert shipped["comm"] == by_path["comm"] == [i.path for i in items]
    assert [t.path for t in shipped["kineto"]] == [t.path for t in by_path["kineto"]]
    assert shipped["warnings"] == by_path["warnings"]
    assert all(p.startswith(str(d)) for p, *_ in steps)


def test_a_file_that_fails_is_a_problem_not_a_crash(tmp_path):
    bad = tmp_path / "all_reduce_perf.txt"
    bad.write_text("# nThread 1 nGpus 1\n#  size count type\n")  # nccl-tests header, no rows
    out, problems, steps = load_share([(str(bad), ("nccl_tests",), None)])
    assert problems == [("no nccl-tests result rows found", str(bad))]
    assert not any(out.values()) and steps == []


def test_nothing_recognised_is_one_input_error(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x00" * 64)
    with pytest.raises(InputError) as e:
        load_comm_parallel([tmp_path], workers=2)
    assert "no " in str(e.value) and "\n" not in e.value.one_line()


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(0, 10_000), max_size=40), n=st.integers(1, 12))
def test_shares_are_contiguous_balanced_and_complete(sizes, n):
    items = [InputFile(f"f{k:03d}", ("kineto",), None) for k in range(len(sizes))]
    shares = split_shares(items, n, sizes)
    assert [i for s in shares for i in s] == items  # contiguous, in order, nothing lost
    assert len(shares) <= max(1, min(n, len(items))) and all(shares)
    if items:
        size = dict(zip(items, (max(1, s) for s in sizes)))
        per = sum(size.values()) / min(n, len(items))
        # a share closes once it reaches its quota: without its last file it is under one quota
        assert all(sum(size[i] for i in s[:-1]) < per + 1 or len(s) == 1 for s in shares[:-1])
