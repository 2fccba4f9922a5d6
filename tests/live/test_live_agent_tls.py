"""A real Prometheus on 127.0.0.1 scrapes the agent (the real CLI process) over HTTPS with a client
certificate: the agent's --web.config.file asks RequireAndVerifyClientCert, Prometheus's scrape
config has the CA and its client certificate (test certificates made with openssl, synthetic). A
second job without the client certificate is down with a TLS error, never scraped in clear."""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from tests.live.conftest import PROMETHEUS, Services, free_ports, need, prom_query, start, wait_http
from tests.serve.tls_certs import make_pki

pytestmark = [pytest.mark.live]


def _targets(port: int) -> dict[str, dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets", timeout=10) as r:
        return {t["labels"]["job"]: t for t in json.loads(r.read())["data"]["activeTargets"]}


_query = prom_query  # tests/live/conftest.py


def test_prometheus_scrapes_the_agent_over_tls_with_a_client_certificate(tmp_path):
    prom_exe = need(PROMETHEUS, "prometheus")
    pki = make_pki(tmp_path / "pki")
    (tmp_path / "root" / "sys").mkdir(parents=True)
    web = tmp_path / "web.yml"
    web.write_text(
        yaml.safe_dump(
            {
                "tls_server_config": {
                    "cert_file": str(pki.server_crt),
                    "key_file": str(pki.server_key),
                    "client_auth_type": "RequireAndVerifyClientCert",
                    "client_ca_file": str(pki.ca),
                }
            }
        )
    )
    agent_port, prom_port = free_ports(2)
    services = Services()
    try:
        agent = start(
            "agent",
            [sys.executable, "-m", "clusterdoctor.cli.main", "serve", "agent",
             f"--listen=127.0.0.1:{agent_port}", f"--sysfs-root={tmp_path / 'root'}",
             f"--web.config.file={web}", "--interval=1s"],
            tmp_path,
        )  # fmt: skip
        services.procs.append(agent)
        target = [f"127.0.0.1:{agent_port}"]
        cfg = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {"job_name": "agent-tls", "scheme": "https", "static_configs": [{"targets": target}],
                 "tls_config": {"ca_file": str(pki.ca), "cert_file": str(pki.client_crt),
                                "key_file": str(pki.client_key)}},
                {"job_name": "agent-no-client-cert", "scheme": "https", "static_configs": [{"targets": target}],
                 "tls_config": {"ca_file": str(pki.ca)}},
                {"job_name": "agent-plain", "static_configs": [{"targets": target}]},
            ],
        }  # fmt: skip
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        prom = start(
            "prometheus",
            [prom_exe, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
            tmp_path,
        )  # fmt: skip
        services.procs.append(prom)
        wait_http(f"http://127.0.0.1:{prom_port}/-/ready", 60)
        deadline = time.monotonic() + 180  # a cap on a hang, not a speed check
        t: dict[str, dict] = {}
        while time.monotonic() < deadline:
            t = _targets(prom_port)
            if (
                len(t) == 3
                and all(x["health"] != "unknown" for x in t.values())
                and t["agent-tls"]["health"] == "up"
            ):
                break
            time.sleep(0.5)
        logs = "\n".join(p.log.read_text(errors="replace")[-2000:] for p in (agent, prom))
        assert t.get("agent-tls", {}).get("health") == "up", (t, logs)
        assert t["agent-no-client-cert"]["health"] == "down", t["agent-no-client-cert"]
        assert t["agent-plain"]["health"] == "down", t["agent-plain"]
        res = _query(prom_port, 'clusterdoctor_build_info{job="agent-tls"}')
        assert res and res[0]["value"][1] == "1"
        assert not _query(
            prom_port, '{job=~"agent-no-client-cert|agent-plain", __name__=~"clusterdoctor_.*"}'
        )
    finally:
        services.stop_all()
