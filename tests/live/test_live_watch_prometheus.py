"""Live: a real Prometheus on 127.0.0.1 scrapes the probes of a real 4-rank DDP job (gloo, CPU); one
rank is CPU-throttled from outside (cgroup quota) mid-run; `clusterdoctor watch --prometheus` names it."""

from __future__ import annotations

import json
import time

import pytest

from tests.live.conftest import PROMETHEUS, Services, free_ports, need, start, wait_http

pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.torch, pytest.mark.timeout(420)]


def test_prometheus_scrapes_the_probes_and_watch_names_the_straggler(tmp_path, cli):
    from tests.conftest import require_quiet_machine

    require_quiet_machine()
    from clusterdoctor.training.faultlab import CpuQuota, Lab, lab_available

    why = lab_available()
    if why:
        pytest.skip(why)
    need(PROMETHEUS, "prometheus")
    ports = free_ports(5)
    rank_ports, prom_port = ports[:4], ports[4]
    cfg = tmp_path / "prometheus.yml"
    targets = ", ".join(f"'127.0.0.1:{p}'" for p in rank_ports)
    cfg.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "rule_files: [alerts.yml]\n"
        "scrape_configs:\n"
        f"  - job_name: clusterdoctor-watch\n    honor_labels: true\n    static_configs: [{{targets: [{targets}]}}]\n"
    )
    from tests.rules.test_failslow_alerts import alert_rule_file  # FS001/FS006 as the catalogue renders them

    (tmp_path / "alerts.yml").write_text(alert_rule_file())
    services = Services()
    lab = Lab(tmp_path / "lab", world=4, netns=False)
    try:
        prom = start(
            "prometheus",
            [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            tmp_path,
        )  # fmt: skip
        services.procs.append(prom)
        url = f"http://127.0.0.1:{prom_port}"
        wait_http(f"{url}/-/ready", 30)
        lab.start()
        res = lab.episode(700, CpuQuota(2, 0.05), onset_step=300, extra={"ports": rank_ports})
        assert res.error is None, res.error
        job = f"lab-{lab.tag}-e0"
        # the probes were scraped while the job ran: every rank, with the probe's labels
        up = json.loads(
            wait_http(f"{url}/api/v1/query?query=max_over_time(clusterdoctor_watch_steps_total%5B5m%5D)", 10)
        )
        got = {(s["metric"]["job"], s["metric"]["rank"]) for s in up["data"]["result"]}
        assert got == {(job, str(r)) for r in range(4)}
        rules = json.loads(wait_http(f"{url}/api/v1/rules", 10))["data"]["groups"][0]["rules"]
        # the probe's own alerts (the other fail-slow rules alert through the agent's finding series)
        assert {"TrainingStragglerPresent", "TrainingRankSilent"} <= {r["name"] for r in rules}
        assert all(r["health"] == "ok" for r in rules), rules
        time.sleep(2)
        # how much slower the throttled rank gets depends on the machine's load (WARNING or CRITICAL):
        # --fail-on warning makes exit 1 mean "a straggler was named" either way
        r = cli("watch", "--prometheus", url, "--job", job, "--once", "--since", "3m", "--step", "1",
                "--fail-on", "warning", "--format", "json", timeout=120)  # fmt: skip
        assert r.code == 1, r.out[-4000:] + r.err
        doc = json.loads(r.out)
        first = doc["findings"][0]
        assert first["rule"] == "FS001" and first["subject"].startswith("rank 2"), doc["findings"]
        text = cli("watch", "--prometheus", url, "--job", job, "--once", "--since", "3m", "--step", "1")
        assert "FS001" in text.out and "rank 2" in text.out
        bad = cli("watch", "--prometheus", url, "--job", "no-such-job", "--once")
        assert bad.code == 2 and "no fail-slow probe series" in bad.err
    finally:
        lab.close()
        services.stop_all()
