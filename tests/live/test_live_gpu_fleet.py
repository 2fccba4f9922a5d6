"""Live: the fleet GPU check against a real Prometheus scraping dcgm-exporter dumps over HTTP.

Four "hosts", each an HTTP server on 127.0.0.1 (ephemeral port) serving a dump from fixtures/gpu,
each relabelled to its own ``Hostname`` by Prometheus (metric_relabel_configs):

- node-l4:   the L4 dump as published (row-remap fields, no XID/ECC/throttle fields);
- node-l40s: the L40S dump as published;
- node-ada:  the RTX 4000 Ada dump as published (pod labels, XID field 0);
- node-sick: the RTX 4000 Ada dump with faults written into it BY THIS TEST (a mutation of the real
  dump, not a real capture: no real dcgm-exporter scrape with non-zero fault fields exists, see
  fixtures/gpu/SOURCES.md "Known gaps"): DCGM_FI_DEV_XID_ERRORS 79, DCGM_FI_DEV_ROW_REMAP_FAILURE 1,
  and a DCGM_FI_DEV_PCIE_REPLAY_COUNTER that grows by 40 on every scrape.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from clusterdoctor.model import Severity
from clusterdoctor.observe.gpu.dcgm_fleet import collect_fleet
from tests.conftest import run_cli, shared_fixture
from tests.live.conftest import PROMETHEUS, Services, need, start, wait_http

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]

DUMPS = {
    "node-l4": "gpu/dcgm-exporter_l4_kops-aws_580.105.08_remap-fields-healthy.prom",
    "node-l40s": "gpu/dcgm-exporter_l40s_upcloud_595.58.03_prof-fields-healthy.prom",
    "node-ada": "gpu/dcgm-exporter_rtx4000ada_lke_580.95.05_pod-labels.prom",
    "node-sick": "gpu/dcgm-exporter_rtx4000ada_lke_580.95.05_pod-labels.prom",
}


def _sick(text: str, scrape: int) -> str:
    """The test's fault injection into the real Ada dump (see the module docstring)."""
    text = re.sub(
        r'(DCGM_FI_DEV_XID_ERRORS\{[^}]*)err_code="0",err_msg="No Error"',
        r'\1err_code="79",err_msg="GPU has fallen off the bus"',
        text,
    )
    text = re.sub(r"^(DCGM_FI_DEV_XID_ERRORS\{[^}]*\}) 0$", r"\1 79", text, flags=re.M)
    text = re.sub(r"^(DCGM_FI_DEV_ROW_REMAP_FAILURE\{[^}]*\}) 0$", r"\1 1", text, flags=re.M)
    return re.sub(
        r"^(DCGM_FI_DEV_PCIE_REPLAY_COUNTER\{[^}]*\}) 0$", rf"\g<1> {40 * scrape}", text, flags=re.M
    )


def _server(body_fn):
    count = {"n": 0}

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            count["n"] += 1
            data = body_fn(count["n"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    need(PROMETHEUS, "prometheus")
    tmp = tmp_path_factory.mktemp("gpufleet")
    servers = {}
    for host, rel in DUMPS.items():
        text = shared_fixture(rel).read_text()
        fn = (lambda n, t=text: _sick(t, n)) if host == "node-sick" else (lambda n, t=text: t)
        servers[host] = _server(fn)
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    prom_port = s.getsockname()[1]
    s.close()
    jobs = "".join(
        f"  - job_name: dcgm-{host}\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{srv.server_address[1]}']}}]\n"
        "    metric_relabel_configs:\n"
        f"      - {{source_labels: [Hostname], regex: '.*', target_label: Hostname, replacement: {host}}}\n"
        for host, srv in servers.items()
    )
    cfg = tmp / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n" + jobs)
    services = Services()
    try:
        prom = start(
            "prometheus",
            [
                PROMETHEUS,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            tmp,
        )
        services.procs.append(prom)
        url = f"http://127.0.0.1:{prom_port}"

        def ready(body: bytes) -> bool:
            res = json.loads(body)["data"]["result"]
            return len({r["metric"].get("Hostname") for r in res}) == 4 and all(
                len(r["values"]) >= 4 for r in res
            )

        q = urllib.request.quote("DCGM_FI_DEV_SM_CLOCK[30s]")
        wait_http(f"{url}/api/v1/query?query={q}", 60, ready)
        yield url
    finally:
        services.stop_all()
        for srv in servers.values():
            srv.shutdown()
            srv.server_close()


def test_fleet_queries_find_the_sick_gpu_and_only_it(fleet):
    res = collect_fleet(fleet, window_s=60, timeout=5)
    assert not res.errors, res.errors
    nodes = {r.node: r for r in res.reports}
    assert set(nodes) == {"node-l4", "node-l40s", "node-ada", "node-sick"}
    sick = nodes["node-sick"].gpus[0]
    assert sick.xid_last == 79 and sick.remap_failure is True
    assert sick.pod == "cuda-75454ffb9f-8ljq7"
    rates = [r for r in sick.readings if r.name == "pcie_replays"]
    assert len(rates) == 2 and rates[1].value > 0
    healthy = nodes["node-ada"].gpus[0]
    assert healthy.xid_last == 0 and healthy.remap_failure is False  # exported and clean
    l4 = nodes["node-l4"].gpus[0]
    assert l4.xid_last is None and l4.remap_failure is False  # XID not exported on that node: unknown
    # one query per rule: the rule queries returned only the sick GPU's series
    by_rule = {}
    for rule, _expr, n in res.queries:
        by_rule[rule] = by_rule.get(rule, 0) + n
    assert by_rule["GPU001"] == 1 and by_rule["GPU006"] == 1 and by_rule["GPU014"] == 1


def test_fleet_cli_table_of_sick_gpus_ranked(fleet):
    r = run_cli("gpu", "health", "--prometheus", fleet, "--window", "1m", "--format", "json", timeout=120)
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    assert len(doc["gpus"]) == 4
    sick = doc["sick_gpus"]
    assert sick and all("node-sick" in s["subject"] for s in sick)
    assert sick[0]["severity"] == "critical"
    rules = {f["rule"] for f in doc["findings"]}
    assert {"GPU001", "GPU006", "GPU014"} <= rules
    xid = next(f for f in doc["findings"] if f["rule"] == "GPU001")
    assert "Xid 79" in xid["summary"] and "cuda-75454ffb9f-8ljq7" in xid["summary"]
    grid = {g["node"]: g for g in doc["gpus"]}
    assert grid["node-l4"]["checks"]["xid"]["status"] == "unknown"
    assert grid["node-ada"]["checks"]["xid"]["status"] == "ok"
    assert Severity.parse(sick[0]["severity"]) == Severity.CRITICAL
    t = run_cli("gpu", "health", "--prometheus", fleet, "--window", "1m", env={"COLUMNS": "80"}, timeout=120)
    assert t.code == 1 and all(len(ln) <= 80 for ln in t.out.splitlines())
    assert "node-sick" in t.out.split("WORST", 1)[1].splitlines()[1]


def test_scrape_a_dcgm_exporter_twice_gives_rates():
    """`gpu health --scrape URL`: two reads of the (fault-injected, see module docstring) dump, 1 s apart."""
    text = shared_fixture(DUMPS["node-sick"]).read_text()
    srv = _server(lambda n: _sick(text, n))
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/metrics"
        r = run_cli(
            "gpu", "health", "--scrape", url, "--scrape-interval", "1", "--format", "json", timeout=60
        )
        assert r.code == 1, r.err
        doc = json.loads(r.out)
        rules = {f["rule"]: f for f in doc["findings"]}
        assert "GPU014" in rules and "replays in" in rules["GPU014"]["summary"]  # a rate, not a total
        assert "GPU001" in rules and "GPU006" in rules
        (row,) = doc["gpus"]
        assert row["node"] == "lke529760-766837-0a634ab30000" and row["pod"] == "cuda-75454ffb9f-8ljq7"
    finally:
        srv.shutdown()
        srv.server_close()
