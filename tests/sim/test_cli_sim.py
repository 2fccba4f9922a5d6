"""`clusterdoctor sim` as users run it (real processes)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli, shared_fixture


def test_run_json_has_curve_and_final_allocation():
    shared_fixture("sched/alibaba_gpu_v2023/openb_pod_list_default.csv")
    r = run_cli(
        "sim", "run", "--trace", "openb-default", "--policy", "fgd", "--seed", "1", "--limit", "800", "--json"
    )
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["policy"] == "fgd" and d["pods_arrived"] == 800
    assert d["final_allocation"] == d["allocation_curve"][max(d["allocation_curve"], key=int)]
    assert d["cluster"]["gpus"] == 6212


def test_run_with_file_paths_and_html(tmp_path):
    pods = shared_fixture("sched/alibaba_gpu_v2023/openb_pod_list_gpushare40.csv")
    nodes = shared_fixture("sched/alibaba_gpu_v2023/openb_node_list_gpu_node.csv")
    out = tmp_path / "r.html"
    r = run_cli(
        "sim",
        "run",
        "--trace",
        str(pods),
        "--nodes",
        str(nodes),
        "--policy",
        "best-fit",
        "--limit",
        "300",
        "--html",
        "-o",
        str(out),
    )
    assert r.code == 0, r.err
    text = out.read_text()
    assert text.startswith("<!doctype html>") and "<svg" in text and "best-fit" in text


def test_builtin_trace_without_fixtures_is_one_line_exit_2(tmp_path):
    r = run_cli(
        "sim", "run", "--trace", "openb-default", env={"CLUSTERDOCTOR_FIXTURES": str(tmp_path / "none")}
    )
    assert r.code == 2
    assert (
        len(r.err.strip().splitlines()) == 1
        and "CLUSTERDOCTOR_FIXTURES" in r.err
        and "Traceback" not in r.err
    )


def test_bad_trace_file_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "pods.csv"
    bad.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,x,1,1,1\n")
    nodes = tmp_path / "nodes.csv"  # openb node-list layout, so the test runs without the shared fixtures
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nnode-0,64000,262144,2,P100\n")
    r = run_cli("sim", "run", "--trace", str(bad), "--nodes", str(nodes))
    assert r.code == 2 and "pods.csv:2" in r.err and "Traceback" not in r.err


def test_compare_prints_table_with_published_numbers():
    shared_fixture("sched/fgd_expected_results/analysis_allo_discrete.csv")
    r = run_cli(
        "sim", "compare", "--policies", "best-fit,first-fit", "--seeds", "42", "--workers", "2", timeout=240
    )
    if r.code != 0 and "ray" in r.err.lower() and any(w in r.err.lower() for w in ("start", "timed out")):
        pytest.skip(f"Ray could not start on this machine: {r.err.strip()[:200]}")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    bf = next(line for line in lines if line.startswith("best-fit"))
    assert "05-BestFit" in bf and "93.08" in bf  # published mean of 10 seeds at 130 %
    assert any(line.startswith("first-fit") for line in lines)


def test_unknown_policy_is_usage_error():
    shared_fixture("sched/alibaba_gpu_v2023/openb_pod_list_default.csv")
    r = run_cli("sim", "run", "--policy", "nope", "--trace", "openb-default")
    assert r.code == 2 and "unknown policy 'nope'" in r.err and "Traceback" not in r.err


def _tiny_trace(tmp_path):
    """A three-node cluster and 30 pods in openb's CSV layouts (so the test runs without the shared
    fixtures): whole and half GPUs, one and two GPUs per pod."""
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nnode-0,96000,393216,8,V100M32\n"
        "node-1,96000,393216,8,V100M32\nnode-2,64000,262144,2,P100\n"
    )
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli"]
    for i in range(30):
        g = 2 if i % 3 == 0 else 1
        rows.append(f"p{i},4000,8192,{g},{500 if g == 1 and i % 4 == 0 else 1000}")
    pods = tmp_path / "pods.csv"
    pods.write_text("\n".join(rows) + "\n")
    return pods, nodes


@pytest.mark.parametrize("workers", ["1", "2"])
def test_compare_reports_energy_per_policy(tmp_path, workers):
    pods, nodes = _tiny_trace(tmp_path)
    args = ["sim", "compare", "--trace", str(pods), "--nodes", str(nodes), "--policies", "fgd,best-fit"]
    args += ["--seeds", "1,2", "--published", "none", "--workers", workers]
    r = run_cli(*args, env={"COLUMNS": "80"}, timeout=240)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    at = next(i for i, line in enumerate(lines) if line.startswith("energy"))
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[at + 3 :] if ln.strip()}
    assert set(rows) == {"fgd", "best-fit"}
    for vals in rows.values():
        on, sleep = float(vals[0]), float(vals[1])
        assert on > 0 and 0 < sleep <= on  # empty nodes asleep never draw more than all on
    j = run_cli(*args, "--json", timeout=240)
    assert j.code == 0, j.err
    for p in json.loads(j.out)["policies"]:
        e = p["energy"]
        assert e["mean_kw_sleep"] <= e["mean_kw_all_on"] and e["j_per_tflop_all_on"] > 0


def test_run_html_summary_has_energy(tmp_path):
    import re

    pods, nodes = _tiny_trace(tmp_path)
    out = tmp_path / "r.html"
    args = ["sim", "run", "--trace", str(pods), "--nodes", str(nodes), "--policy", "fgd", "--html"]
    r = run_cli(*args, "-o", str(out))
    assert r.code == 0, r.err
    text = out.read_text()
    assert "mean kW (all on)" in text and "J per useful TFLOP" in text
    row = re.search(r"<tr><td>fgd</td>(.*?)</tr>", text).group(1)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert float(cells[-3]) >= float(cells[-2]) > 0 and float(cells[-1]) > 0


def test_run_timed_slack_clock_never_costs_more_busy_energy(tmp_path):
    """`sim run --timed --clock slack`: the clock policy reaches the engine from the CLI; lower clocks
    never raise the clock-dependent (busy-above-idle) energy and never speed a job up."""
    pods, nodes = _tiny_trace(tmp_path)
    base = ["sim", "run", "--trace", str(pods), "--nodes", str(nodes), "--timed", "--json"]
    top = run_cli(*base, timeout=240)
    slack = run_cli(*base, "--clock", "slack", "--beta", "0.5", timeout=240)
    assert top.code == 0 and slack.code == 0, top.err + slack.err
    a, b = json.loads(top.out), json.loads(slack.out)
    assert a["clock_policy"] == "max" and b["clock_policy"] == "slack"
    # the first jobs start on an empty cluster (nobody waits): slack lowers their clocks
    assert b["mean_clock_rel"] < 1.0 == a["mean_clock_rel"]
    assert b["energy_kwh_busy_above_idle"] < a["energy_kwh_busy_above_idle"]
    assert b["jct_s"]["p50"] >= a["jct_s"]["p50"]  # a lower clock never speeds a job up
    text = run_cli(*base[:-1], "--clock", "slack", "--beta", "0.5", env={"COLUMNS": "80"}, timeout=240)
    assert text.code == 0 and "clock slack: mean clock" in text.out, text.out


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--clock", "slack"], "need --timed"),
        (["--timed", "--clock", "fast"], "unknown clock policy 'fast'"),
        (["--timed", "--beta", "2"], "--beta 2.0: must be between 0 and 1"),
    ],
)
def test_run_clock_options_refused_in_one_line(tmp_path, args, msg):
    pods, nodes = _tiny_trace(tmp_path)
    r = run_cli("sim", "run", "--trace", str(pods), "--nodes", str(nodes), *args)
    assert r.code == 2 and msg in r.err and "Traceback" not in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1
