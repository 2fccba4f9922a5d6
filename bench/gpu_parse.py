"""GPU health parsing speed, each as a ratio to a plain read of the same bytes.

1. ``nvidia-smi -q`` of an 8-GPU node: the real 1,652-line capture
   ``fixtures/gpu/nvidia-smi-q_h100-sxm-x8_535.183.01_...txt`` (8x H100, driver 535.183.01), parsed by
   :func:`parse_nvidia_smi_q`. Target: < 20 ms.
2. A 10,000-GPU fleet's answer to the fleet queries (``observe/gpu/dcgm_fleet.py``): Prometheus API
   JSON built by REPLICATION of the label sets and values of the three real dcgm-exporter dumps in
   fixtures/gpu (1,250 hosts x 8 GPUs, each host's ``Hostname``, GPU index, UUID and bus id varied),
   one answer per context query (utilisation, SM clock, max SM clock, PCIe gen/width: 7 x 10,000
   series) plus the rule queries (a handful of sick GPUs, as a real fleet answers them). Timed: decoding
   every answer (:func:`decode_answer`, msgspec) and building the per-GPU model
   (:func:`fleet_reports`). Target: < 2 s. The GPU rules over that model are timed too, separately.

Baselines, measured in the same run: reading the same bytes from a file (``Path.read_bytes``) and
``json.loads`` of them.

Usage: python bench/gpu_parse.py [GPUS] (default 10000)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from _timing import best_of  # bench/_timing.py (the script's folder is on sys.path)
from clusterdoctor.observe.gpu.dcgm_fleet import FLEET_QUERIES, decode_answer, fleet_reports
from clusterdoctor.observe.gpu.nvidia_smi_q import parse_nvidia_smi_q
from clusterdoctor.testing import fixture_path

SMI_X8 = "gpu/nvidia-smi-q_h100-sxm-x8_535.183.01_sw-thermal-power-brake-on-one-gpu_pcie-replays.txt"
DUMPS = (
    "gpu/dcgm-exporter_l4_kops-aws_580.105.08_remap-fields-healthy.prom",
    "gpu/dcgm-exporter_l40s_upcloud_595.58.03_prof-fields-healthy.prom",
    "gpu/dcgm-exporter_rtx4000ada_lke_580.95.05_pod-labels.prom",
)


def bench_smi() -> dict:
    p = fixture_path(SMI_X8)
    if p is None:
        sys.exit("shared fixtures absent (../shared/fixtures/gpu)")
    data = p.read_bytes()
    lines = data.count(b"\n")
    t_read = best_of(lambda: p.read_bytes(), 20)
    t_parse = best_of(lambda: parse_nvidia_smi_q(p.read_bytes(), str(p)), 20)
    gpus = len(parse_nvidia_smi_q(data, str(p)).gpus)
    return {"lines": lines, "bytes": len(data), "gpus": gpus, "read_s": t_read, "parse_s": t_parse}


def _base_labels() -> list[tuple[dict[str, str], dict[str, float]]]:
    """(labels, {metric: value}) of each real dump's GPU."""
    from clusterdoctor.observe.control.prom_text import parse_prom_text

    out = []
    for rel in DUMPS:
        p = fixture_path(rel)
        if p is None:
            sys.exit("shared fixtures absent (../shared/fixtures/gpu)")
        ms = parse_prom_text(p.read_text(), str(p))
        labels: dict[str, str] = {}
        values: dict[str, float] = {}
        for s in ms.samples:
            d = dict(s.labels)
            d.pop("err_code", None)
            d.pop("err_msg", None)
            labels = labels or d
            values[s.name] = s.value
        out.append((labels, values))
    return out


def build_fleet_answers(n_gpus: int, end: float) -> list[tuple[object, bytes]]:
    bases = _base_labels()
    ctx_values = {
        "DCGM_FI_DEV_GPU_UTIL": 97.0,
        "DCGM_FI_DEV_MAX_SM_CLOCK": 1980.0,
        "DCGM_FI_DEV_PCIE_LINK_GEN": 5.0,
        "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": 5.0,
        "DCGM_FI_DEV_PCIE_LINK_WIDTH": 16.0,
        "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": 16.0,
    }
    gpus = []
    for i in range(n_gpus):
        host, k = divmod(i, 8)
        labels, values = bases[host % len(bases)]
        lab = dict(labels)
        lab["Hostname"] = f"node-{host:05d}"
        lab["gpu"] = str(k)
        lab["device"] = f"nvidia{k}"
        lab["UUID"] = f"GPU-{host:08x}-{k:04x}-0000-0000-{i:012x}"
        lab["pci_bus_id"] = f"00000000:{0x18 + 0x11 * k:02X}:00.0"
        lab["instance"] = f"10.{host // 256}.{host % 256}.1:9400"
        lab["job"] = "dcgm-exporter"
        gpus.append((lab, values))
    answers = []
    for q in FLEET_QUERIES:
        result = []
        if q.rule == "context":
            for lab, values in gpus:
                v = values.get(q.metric, ctx_values.get(q.metric, 0.0))
                kept = {k: lab[k] for k in (q.keep or lab) if k in lab}  # max by (...): only those labels
                result.append({"metric": kept, "value": [end, f"{v:g}"]})
        else:
            # a real fleet's rule queries return only the sick GPUs: a few per query
            for lab, _ in gpus[:: max(1, n_gpus // 4)]:
                m = dict(lab)
                if not q.counter:
                    m["__name__"] = q.metric
                result.append({"metric": m, "value": [end, "3"]})
        doc = {"status": "success", "data": {"resultType": "vector", "result": result}}
        answers.append((q, json.dumps(doc).encode()))
    return answers


def bench_fleet(n_gpus: int) -> dict:
    end = 1.7e9
    answers = build_fleet_answers(n_gpus, end)
    total = sum(len(b) for _, b in answers)
    exported = {f"node-{h:05d}": {q.metric for q in FLEET_QUERIES} for h in range(n_gpus // 8 + 1)}
    with tempfile.TemporaryDirectory() as td:
        paths = []
        for i, (_, b) in enumerate(answers):
            p = Path(td) / f"a{i}.json"
            p.write_bytes(b)
            paths.append(p)

        def read() -> None:
            for p in paths:
                p.read_bytes()

        def loads() -> None:
            for p in paths:
                json.loads(p.read_bytes())  # the stdlib decoder, for scale

        def parse() -> list:
            decoded = [(q, decode_answer(p.read_bytes(), str(p))) for (q, _), p in zip(answers, paths)]
            return fleet_reports(decoded, exported, end, 600.0, "bench")

        t_read = best_of(read, 3)
        t_json = best_of(loads, 3)
        t_parse = best_of(parse, 3)
        reports = parse()
    from clusterdoctor import diagnosis
    from clusterdoctor.rules.registry import load_all, run_rules

    rules = [r for r in load_all() if r.layer == "gpu"]

    def rules_run() -> int:
        obs = diagnosis.new_observations(clock=lambda: end)
        diagnosis.merge_into(obs, {"gpu_reports": reports})
        return len(run_rules(obs, rules)[0])

    t_rules = best_of(rules_run, 1)
    return {
        "gpus": sum(len(r.gpus) for r in reports),
        "nodes": len(reports),
        "bytes": total,
        "read_s": t_read,
        "json_s": t_json,
        "parse_s": t_parse,
        "rules_s": t_rules,
        "findings": rules_run(),
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    a = bench_smi()
    print(f"nvidia-smi -q, {a['gpus']} GPUs, {a['lines']:,} lines, {a['bytes'] / 1e3:.1f} kB (real capture)")
    print(f"  plain read        : {a['read_s'] * 1e3:8.3f} ms")
    print(
        f"  parse_nvidia_smi_q: {a['parse_s'] * 1e3:8.3f} ms  ({a['parse_s'] / a['read_s']:.0f}x the read; target < 20 ms: "
        f"{'PASS' if a['parse_s'] < 0.020 else 'FAIL'})"
    )
    b = bench_fleet(n)
    print(
        f"fleet query answers, {b['gpus']:,} GPUs on {b['nodes']:,} nodes, {len(FLEET_QUERIES)} queries, "
        f"{b['bytes'] / 1e6:.1f} MB of JSON (replicated from the real dumps)"
    )
    print(f"  plain read        : {b['read_s'] * 1e3:8.1f} ms")
    print(f"  json.loads        : {b['json_s'] * 1e3:8.1f} ms  ({b['json_s'] / b['read_s']:.0f}x the read)")
    print(
        f"  decode + model    : {b['parse_s'] * 1e3:8.1f} ms  ({b['parse_s'] / b['read_s']:.0f}x the read, "
        f"{b['parse_s'] / b['json_s']:.1f}x json.loads; target < 2 s: {'PASS' if b['parse_s'] < 2.0 else 'FAIL'})"
    )
    print(f"  GPU rules         : {b['rules_s'] * 1e3:8.1f} ms  ({b['findings']} findings)")


if __name__ == "__main__":
    main()
