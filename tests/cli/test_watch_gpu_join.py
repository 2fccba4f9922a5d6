"""``clusterdoctor watch --gpu``: fail-slow findings joined to GPU health (issue 13 "joined to GPU health
when known"; issue 12 item 5 "a GPU finding on the node of a straggler is the cause in the chain").

Inputs: the fault lab's real probe files (tests/data/failslow, CPU gloo ranks) and the real GPU tool
outputs of ../shared/fixtures/gpu. They come from different machines, so each test makes the join
explicit, and says how:

* the probe ran on CPUs and labels each rank's GPU "cpu": the copies made here label it with the rank's
  local rank (what the probe records on a GPU job, ``torch.cuda.current_device()`` = ``LOCAL_RANK``);
* hosts: ``--gpu HOST=PATH`` says which host a file that names none (nvidia-smi -q, dmesg) is from;
  where the test needs several hosts, the copies rename the probe's hosts to the dcgm-exporter
  dump's ``Hostname``.

Nothing else of either input is changed.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import TEST_DATA, shared_fixture

DATA = TEST_DATA / "failslow"
H100_BRAKE = "gpu/nvidia-smi-q_h100-sxm-x8_535.183.01_sw-thermal-power-brake-on-one-gpu_pcie-replays.txt"
RTX_CAP = "gpu/nvidia-smi-q_rtx4090-x8_535.154.05_sw-power-cap-2-gpus_pcie-gen1-idle.txt"
L4_DCGM = "gpu/dcgm-exporter_l4_kops-aws_580.105.08_remap-fields-healthy.prom"
XID79 = "gpu/dmesg-xid_h100-sxm5_525.125.06_xid79-fallen-off-bus-crash-dump.log"


def relabel(
    src: Path, dst: Path, hosts: dict[int, str] | None = None, stop: dict[int, int] | None = None
) -> Path:
    """Copy probe files: GPU label = local rank; host renamed per rank (``hosts``); a rank's file cut
    after step ``stop[rank]`` (a rank that stopped reporting)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.glob("watch-rank*.jsonl")):
        out = []
        rank = None
        for line in f.read_text().splitlines():
            o = json.loads(line)
            if o.get("kind") == "start":
                rank = o["rank"]
                o["gpu"] = str(o["local_rank"])
                if hosts and rank in hosts:
                    o["host"] = hosts[rank]
                line = json.dumps(o, separators=(",", ":"))
            elif o.get("kind") == "step" and stop and rank in stop and o["step"] > stop[rank]:
                continue
            out.append(line)
        (dst / f.name).write_text("\n".join(out) + "\n")
    return dst


def _doc(r):
    assert "Traceback" not in r.err, r.err
    return json.loads(r.out)


def _ev(finding, description):
    return next(e for e in finding["evidence"] if e["description"] == description)


def test_power_brake_on_the_stragglers_gpu_is_the_cause(cli, tmp_path):
    """Rank 2 (CPU-throttled evenly from step 28: it finishes its own work late, tests/data/failslow/
    fr-quota-rank2-probe) on GPU 2 of host vm; the 8x H100 nvidia-smi -q whose GPU 2 (0000:75:00.0) has
    HW power brake, SW thermal slowdown and SW power cap active, stated to be from vm."""
    probe = relabel(DATA / "fr-quota-rank2-probe", tmp_path / "probe")
    r = cli("watch", "--from", str(probe), "--gpu", f"vm={shared_fixture(H100_BRAKE)}", "--format", "json")
    assert r.code == 1
    doc = _doc(r)
    fs = next(f for f in doc["findings"] if f["rule"] == "FS001")
    assert fs["subject"] == "rank 2, host vm, GPU 2"
    assert "compute-bound, GPU clock down" in fs["summary"] and "HW power brake" in fs["summary"]
    state = _ev(fs, "GPU2 on this host")["value"]
    assert "HW power brake" in state and "GPU009" in state and "0000:75:00.0" in state
    chain = _ev(fs, "evidence chain")["value"]
    assert chain.startswith("cause: GPU009") and "→ rank 2 (its GPU)" in chain
    assert fs["fix"].startswith("Its GPU is the likely cause (GPU009)") and "move the job off vm" in fs["fix"]
    assert fs["verify"][0] == "nvidia-smi -q -i 0000:75:00.0 -d PERFORMANCE,POWER,TEMPERATURE"
    # the GPU finding is the first stage of the chain: GPU019 ties it to the straggler
    (g,) = [f for f in doc["findings"] if f["rule"] == "GPU019"]
    assert g["subject"] == "rank 2" and g["severity"] == "critical"
    assert "rank 2 is the straggler (FS001) and its GPU is sick: cause: GPU009" in g["summary"]
    # the other ranks' GPUs are healthy but for PCIe replays read once (info): not joined as faults
    assert not [f for f in doc["findings"] if f["subject"] and f["subject"].startswith(("rank 0", "rank 1"))]
    assert doc["gpu_sources"] and doc["gpu_sources"][0].startswith("vm=")


def test_healthy_gpu_of_the_straggler_is_not_blamed(cli, tmp_path):
    """The 8x RTX 4090 nvidia-smi -q: GPUs 1 and 4 at their power cap while busy, GPU 2 healthy. Rank 2
    is the straggler; rank 1 (on the capped GPU 1) is not, so nothing is blamed on a GPU."""
    probe = relabel(DATA / "fr-quota-rank2-probe", tmp_path / "probe")
    r = cli("watch", "--from", str(probe), "--gpu", f"vm={shared_fixture(RTX_CAP)}", "--format", "json")
    doc = _doc(r)
    (fs,) = [f for f in doc["findings"] if f["rule"] == "FS001"]
    assert fs["subject"] == "rank 2, host vm, GPU 2" and "GPU clock down" not in fs["summary"]
    state = _ev(fs, "GPU2 on this host")["value"]
    assert state.startswith("GPU2 0000:41:00.0 on vm: no fault in") and "clocks" in state
    assert "not exported: xid" in state  # what nvidia-smi -q cannot say is not called healthy
    assert not [e for e in fs["evidence"] if e["description"] == "evidence chain"]
    assert not fs["fix"].startswith("Its GPU")
    assert not [f for f in doc["findings"] if f["rule"] == "GPU019"]


def test_without_gpu_sources_the_join_is_not_checked(cli):
    r = cli("watch", "--from", str(DATA / "fr-quota-rank2-probe"), "--format", "json")
    doc = _doc(r)
    assert any(s["rule"] == "GPU019" and "no GPU health source" in s["reason"] for s in doc["skipped"])
    fs = doc["findings"][0]
    assert not [e for e in fs["evidence"] if "on this host" in e["description"]]


def test_hosts_joined_by_the_dcgm_exporter_hostname(cli, tmp_path):
    """Two hosts: ranks 0-1 on "vm", ranks 2-3 renamed to the L4 dcgm-exporter dump's Hostname
    i-030791dc5a37cd257 (its one GPU, gpu="0", is rank 2's: local rank 0 there). The dump names its
    host, so no HOST= is needed; an nvidia-smi -q given without one cannot be placed in a two-host job."""
    probe = DATA / "fr-quota-rank2-probe"
    node = "i-030791dc5a37cd257"
    out = relabel(probe, tmp_path / "probe", hosts={2: node, 3: node})
    for f in out.glob("watch-rank[23].jsonl"):  # local ranks 0 and 1 on the second host
        lines = f.read_text().splitlines()
        head = json.loads(lines[0])
        head["local_rank"] = head["rank"] - 2
        head["gpu"] = str(head["local_rank"])
        f.write_text("\n".join([json.dumps(head, separators=(",", ":")), *lines[1:]]) + "\n")
    r = cli(
        "watch", "--from", str(out), "--gpu", str(shared_fixture(L4_DCGM)), "--gpu",
        str(shared_fixture(H100_BRAKE)), "--format", "json",
    )  # fmt: skip
    doc = _doc(r)
    fs = next(f for f in doc["findings"] if f["rule"] == "FS001")
    assert fs["subject"] == f"rank 2, host {node}, GPU 0"
    state = _ev(fs, "GPU0 on this host")["value"]
    assert state.startswith("GPU0 ") and f"on {node}: no fault in" in state
    assert not [f for f in doc["findings"] if f["rule"] == "GPU019"]
    assert any("--gpu HOST=PATH" in w for w in doc["warnings"])


def test_silent_rank_whose_gpu_fell_off_the_bus(tmp_path):
    """Rank 1 of the clean run stops reporting after step 40 (its file cut there: a derived copy); the
    H100 kernel log with Xid 79 (GPU 0000:5d:00.0 fallen off the bus), stated to be from vm. The run
    lasted seconds, so the rules run with FS006's silence threshold lowered from 30 s to 1 s (a
    parameter, not what is tested here). The log names the GPU by bus id only, so it is tied to rank 1
    through its node ("a GPU of its node")."""
    import dataclasses

    from clusterdoctor.analyze.failslow import DEFAULTS, table_from_records
    from clusterdoctor.cli.watch import load_gpu_reports
    from clusterdoctor.observe.watch.records import load_watch_dir
    from clusterdoctor.rules.failslow import run_failslow_rules
    from clusterdoctor.rules.registry import Observations

    wf = load_watch_dir(str(relabel(DATA / "clean", tmp_path / "probe", stop={1: 40})))
    obs = Observations()
    obs.put("watch", table_from_records(wf.steps, wf.identities, wf.links, wf.warnings))
    obs.put("watch_params", dataclasses.replace(DEFAULTS, silent_after_s=1.0))
    obs.put("gpu_reports", load_gpu_reports([("vm", shared_fixture(XID79))]).reports)
    findings, _skipped, ran = run_failslow_rules(obs)
    assert "GPU019" in ran
    fs = next(f for f in findings if f.rule == "FS006")
    assert fs.subject.startswith("rank 1") and "Xid" in fs.summary
    chain = next(e for e in fs.evidence if e.description == "evidence chain").value
    assert chain.startswith("cause: GPU001") and "rank 1 (a GPU of its node) stopped reporting" in chain
    assert fs.fix.startswith("Its GPU is the likely cause (GPU001)")
    (g,) = [f for f in findings if f.rule == "GPU019"]
    assert "rank 1 is the straggler (FS006) and a GPU of its node is sick" in g.summary
    assert g.confidence <= 0.6  # tied by node only


def test_bad_gpu_inputs_are_one_line_and_exit_2(cli, tmp_path):
    r = cli("watch", "--from", str(DATA / "clean"), "--gpu", str(tmp_path / "nope.txt"))
    assert r.code == 2 and r.err.count("\n") == 1 and "nope.txt" in r.err
    r = cli("watch", "--from", str(DATA / "clean"), "--gpu", f"vm={tmp_path / 'nope.txt'}")
    assert r.code == 2 and "nope.txt" in r.err
    r = cli("watch", "--from", str(DATA / "clean"), "--gpu", str(DATA / "clean" / "watch-rank0.jsonl"))
    assert (
        r.code == 2 and r.err.count("\n") == 1 and "watch-rank0.jsonl" in r.err and "Traceback" not in r.err
    )
