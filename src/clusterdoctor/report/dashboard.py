"""The clusterdoctor Grafana dashboard, generated with the Grafana Foundation SDK (grafana-foundation-sdk).

One row per layer — control plane, GPU health, RDMA/NIC, NUMA placement, the agent itself, fail-slow — over the series
the alerts use (etcd, kube-scheduler, apiserver, kubelet, node exporter, dcgm-exporter) and the
agent's own (``clusterdoctor_finding``, ``clusterdoctor_rdma_counter_total``, ``clusterdoctor_gpu_allocation``,
``clusterdoctor_node_gpus``). ``python -m clusterdoctor.report.dashboard`` prints the JSON that
deploy/components/grafana-dashboard/clusterdoctor.json holds (``make deploy-generate``); tests/deploy
checks the file is current and runs every query against a real Prometheus.

The SDK is a development dependency: the dashboard is generated once and shipped as JSON.
"""

from __future__ import annotations

import json
from typing import Any

from clusterdoctor.rules.alerts import counter_rates
from clusterdoctor.rules.failslow import LATENESS_EXPR

__all__ = ["ROWS", "build", "queries", "to_json"]

DS = {"type": "prometheus", "uid": "${datasource}"}
NODE = 'node=~"$node"'
# The fail-slow probe's series, with the alert's own expressions (one definition: rules/failslow.py).
_PROBE_STEP = "rate(clusterdoctor_watch_step_seconds_total[2m]) / rate(clusterdoctor_watch_steps_total[2m])"
_LATENESS = LATENESS_EXPR.replace("\n", " ")
_IB_LINK_RATES = counter_rates(
    tuple(
        f"node_infiniband_{n}_total"
        for n in ("link_downed", "link_error_recovery", "port_errors_received", "symbol_error")
    )
)

# (row title, [(panel kind, title, unit, [(PromQL, legend)], description)])
ROWS: list[tuple[str, list[tuple[str, str, str, list[tuple[str, str]], str]]]] = [
    (
        "Control plane",
        [
            ("timeseries", "etcd WAL fsync p99", "s",
             [("histogram_quantile(0.99, sum by (instance, le) (rate(etcd_disk_wal_fsync_duration_seconds_bucket[5m])))", "{{instance}}")],
             "ETCD001: above 10 ms the disk holds up every write; the etcd mixin pages at 1 s."),
            ("timeseries", "etcd backend commit p99", "s",
             [("histogram_quantile(0.99, sum by (instance, le) (rate(etcd_disk_backend_commit_duration_seconds_bucket[5m])))", "{{instance}}")],
             "ETCD002: above 25 ms writes and compaction slow down."),
            ("timeseries", "etcd leader changes (15 min)", "short",
             [("increase(etcd_server_leader_changes_seen_total[15m])", "{{instance}}"),
              ("min by (instance) (etcd_server_has_leader)", "has leader {{instance}}")],
             "ETCD004/ETCD005: each change stalls writes for an election timeout."),
            ("timeseries", "kube-scheduler attempt and pod scheduling p99", "s",
             [("histogram_quantile(0.99, sum by (instance, le) (rate(scheduler_scheduling_attempt_duration_seconds_bucket[5m])))", "attempt {{instance}}"),
              ("histogram_quantile(0.99, sum by (instance, le) (rate(scheduler_pod_scheduling_sli_duration_seconds_bucket[5m])))", "queue to bound {{instance}}")],
             "CP001: one attempt takes milliseconds when healthy; pods waiting seconds retry or are unschedulable."),
            ("timeseries", "Pending pods by queue", "short",
             [("sum by (queue) (scheduler_pending_pods)", "{{queue}}")],
             "CP002: unschedulable pods stay pending until something changes."),
            ("timeseries", "apiserver p99 by verb", "s",
             [('histogram_quantile(0.99, sum by (verb, le) (rate(apiserver_request_sli_duration_seconds_bucket{verb!~"WATCH|WATCHLIST|CONNECT"}[5m])))', "{{verb}}")],
             "CP003: SLO bounds 1 s (resource reads, writes), 5 s (namespace lists), 30 s (cluster lists)."),
            ("timeseries", "Pod start p99 (kubelet SLI, no image pulls)", "s",
             [(f"histogram_quantile(0.99, sum by (node, le) (rate(kubelet_pod_start_sli_duration_seconds_bucket{{{NODE}}}[10m])))", "{{node}}")],
             "KUBELET003: the SLO is 5 s p99; above 30 s is a finding."),
        ],
    ),
    (
        "GPU health",
        [
            ("timeseries", "GPUs free per node", "short",
             [(f'sum by (node) (clusterdoctor_node_gpus{{state="free",{NODE}}})', "{{node}}")],
             "From the kubelet pod-resources API (allocatable minus allocated); the scheduler extender reads the same series."),
            ("table", "GPU → pod", "short",
             [(f"max by (node, gpu, namespace, pod, container) (clusterdoctor_gpu_allocation{{{NODE}}})", "")],
             "Which container holds which GPU (kubelet pod-resources API)."),
            ("timeseries", "XID errors (dcgm-exporter)", "short",
             [("max by (Hostname, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS)", "{{Hostname}} GPU {{gpu}}")],
             "The last XID a GPU reported; see `clusterdoctor rules` for the XID catalogue."),
            ("timeseries", "Remapped rows and remap failures (dcgm-exporter)", "short",
             [("max by (Hostname, gpu) (DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS)", "uncorrectable {{Hostname}} GPU {{gpu}}"),
              ("max by (Hostname, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE)", "remap failure {{Hostname}} GPU {{gpu}}")],
             "Uncorrectable ECC errors are remapped to spare rows; a remap failure means the GPU needs service."),
            ("timeseries", "GPU temperature", "celsius",
             [("max by (Hostname, gpu) (DCGM_FI_DEV_GPU_TEMP)", "{{Hostname}} GPU {{gpu}}")],
             "Thermal slowdown starts near the GPU's slowdown temperature (nvidia-smi -q)."),
            ("timeseries", "PCIe replays (rate)", "ops",
             [("sum by (Hostname, gpu) (rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[5m]))", "{{Hostname}} GPU {{gpu}}")],
             "Replays mean a marginal PCIe link: the GPU's bandwidth drops."),
            ("table", "GPU findings", "short",
             [(f'max by (node, rule, subject, severity) (clusterdoctor_finding{{layer=~"gpu|pcie",{NODE}}})', "")],
             "Findings of the GPU-health and PCIe rules, by node and subject."),
        ],
    ),
    (
        "RDMA / NIC",
        [
            ("timeseries", "RDMA error and congestion counters (agent, per second)", "ops",
             [(f'sum by (node, device, port, counter) (rate(clusterdoctor_rdma_counter_total{{counter!~".*(bytes|packets|data).*",{NODE}}}[5m]))', "{{node}} {{device}}/{{port}} {{counter}}")],
             "RDMA001-005: drops, ECN/CNP, retransmissions, link and completion errors; 0 on a healthy lossless fabric."),
            ("timeseries", "InfiniBand link errors (node exporter)", "ops",
             [(f"sum by (instance, device, port, counter) ({_IB_LINK_RATES})", "{{instance}} {{device}}/{{port}} {{counter}}")],
             "RDMA004 from node exporter's InfiniBand collector."),
            ("timeseries", "InfiniBand transmit wait and data (node exporter)", "Bps",
             [("sum by (instance, device, port) (rate(node_infiniband_port_data_received_bytes_total[5m]))", "rx {{instance}} {{device}}/{{port}}"),
              ("sum by (instance, device, port) (rate(node_infiniband_port_transmit_wait_total[5m]))", "xmit wait {{instance}} {{device}}/{{port}}")],
             "RDMA002: transmit wait grows when the fabric is congested."),
        ],
    ),
    (
        "NUMA placement",
        [
            ("table", "Placement findings by pod", "short",
             [(f'max by (node, rule, subject, severity) (clusterdoctor_finding{{layer="numa",{NODE}}})', "")],
             "NUMA001-007: each subject is namespace/pod/container (pid) when the agent runs in Kubernetes."),
            ("timeseries", "Findings by severity", "short",
             [(f"sum by (node, severity) (clusterdoctor_findings{{{NODE}}})", "{{node}} {{severity}}")],
             "All of the agent's findings; info is not alerted."),
            ("timeseries", "Agent sources up", "short",
             [(f"min by (node, source) (clusterdoctor_source_up{{{NODE}}})", "{{node}} {{source}}"),
              (f"min by (node) (clusterdoctor_pod_resources_up{{{NODE}}})", "{{node}} pod-resources")],
             "A source at 0 did not answer within its timeout: its rules are skipped, not healthy."),
        ],
    ),
    (
        "Agent",
        [
            ("timeseries", "Agents up", "short",
             [(f'min by (node, instance) (up{{job="clusterdoctor-agent",{NODE}}})', "{{node}}")],
             "ClusterdoctorAgentDown: an agent Prometheus cannot scrape takes its node's findings (and alerts) with it."),
            ("timeseries", "Age of the last diagnosis", "s",
             [(f"time() - max by (node) (clusterdoctor_diagnosis_timestamp_seconds{{{NODE}}})", "{{node}}")],
             "The agent diagnoses every --interval (30 s); ClusterdoctorDiagnosisStale fires past 10 minutes."),
            ("timeseries", "Events read per minute", "short",
             [(f"sum by (node, kind) (rate(clusterdoctor_events_total{{{NODE}}}[5m])) * 60", "{{node}} {{kind}}")],
             "Kernel-log (gpu.xid, gpu.fell_off_bus …) and log events the agent read; findings keep them for --event-window."),
            ("timeseries", "Agent memory and CPU", "short",
             [(f'max by (node) (process_resident_memory_bytes{{job="clusterdoctor-agent",{NODE}}}) / 2^20', "{{node}} RSS MiB"),
              (f'max by (node) (rate(process_cpu_seconds_total{{job="clusterdoctor-agent",{NODE}}}[5m]))', "{{node}} CPU cores")],
             "Against the DaemonSet's limits (512 MiB, 1 CPU; deploy/components/resources-large for big nodes)."),
        ],
    ),
    (
        "Fail-slow",
        [
            ("timeseries", "Step time per rank (fail-slow probe)", "s",
             [(f"{_PROBE_STEP}", "{{job}} rank {{rank}} ({{host}})")],
             "Seconds per training step of each rank (clusterdoctor.training.watch): one rank above the others is a straggler."),
            ("timeseries", "How long the others wait for each rank (fail-slow probe)", "s",
             [(f"{_LATENESS}", "{{job}} rank {{rank}} ({{host}})")],
             "The expression of the TrainingStragglerPresent alert (FS001), per step; `clusterdoctor watch --prometheus URL --job JOB` names the class and onset."),
            ("table", "Straggler and communication findings", "short",
             [(f'max by (node, rule, subject, severity) (clusterdoctor_finding{{layer=~"comm|failslow",{NODE}}})', "")],
             "COMM007 (one rank arrives last at most collectives) and the fail-slow rules, by subject."),
            ("timeseries", "Skipped rules (missing input)", "short",
             [(f"count by (node) (clusterdoctor_rule_skipped{{{NODE}}})", "{{node}}")],
             "Rules that could not run: not checked is not healthy."),
        ],
    ),
]  # fmt: skip


def build() -> Any:
    """The dashboard (a Grafana Foundation SDK ``Dashboard`` model)."""
    from grafana_foundation_sdk.builders import dashboard, prometheus, table, timeseries
    from grafana_foundation_sdk.models.dashboard import DataSourceRef, GridPos

    ds = DataSourceRef(type_val=DS["type"], uid=DS["uid"])
    d = (
        dashboard.Dashboard("clusterdoctor")
        .uid("clusterdoctor")
        .description(
            "Why is the GPU cluster slow: control plane, GPU health, RDMA/NIC, NUMA placement, fail-slow."
        )
        .tags(["clusterdoctor", "gpu", "kubernetes"])
        .refresh("1m")
        .time("now-6h", "now")
        .timezone("browser")
        .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
        .with_variable(
            dashboard.QueryVariable("node")
            .label("Node")
            .datasource(ds)
            .query("label_values(clusterdoctor_source_up, node)")
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )
    )
    y = 0
    for title, panels in ROWS:
        d = d.with_row(dashboard.Row(title).grid_pos(GridPos(h=1, w=24, x=0, y=y)))
        y += 1
        for i, (kind, ptitle, unit, targets, desc) in enumerate(panels):
            p = (
                (timeseries.Panel() if kind == "timeseries" else table.Panel())
                .title(ptitle)
                .description(desc)
            )
            p = (
                p.datasource(ds)
                .unit(unit)
                .grid_pos(
                    GridPos(h=8, w=12 if kind == "timeseries" else 12, x=12 * (i % 2), y=y + 8 * (i // 2))
                )
            )
            for j, (expr, legend) in enumerate(targets):
                q = prometheus.Dataquery().expr(expr).ref_id(chr(ord("A") + j)).datasource(ds)
                if kind == "table":
                    q = q.instant().format("table")
                elif legend:
                    q = q.legend_format(legend)
                p = p.with_target(q)
            d = d.with_panel(p)
        y += 8 * ((len(panels) + 1) // 2)
    return d.build()


def to_json(model: Any | None = None) -> str:
    """The dashboard as stable, indented JSON (what deploy/ holds)."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    return (
        json.dumps(
            json.loads(JSONEncoder().encode(model if model is not None else build())),
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )


def queries(doc: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard JSON (panel targets and query variables)."""
    out: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for p in panels:
            for t in p.get("targets") or []:
                if t.get("expr"):
                    out.append(t["expr"])
            walk(p.get("panels") or [])

    walk(doc.get("panels") or [])
    return out


if __name__ == "__main__":
    print(to_json(), end="")
