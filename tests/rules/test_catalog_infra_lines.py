"""Real lines of the GPU, RDMA and control-plane catalogue families, each read as its entry's code:
the variants an entry's own example does not show (older wordings, other programs' forms). Each line
is quoted from a public thread (the incident case that holds it) or the program's source."""

from __future__ import annotations

import pytest

from clusterdoctor.observe.messages import scan_text
from clusterdoctor.rules.messages import hit_groups

LINES = (
    # nvidia-smi of newer drivers puts the GPU's index before its bus id (quoted in public Xid 79
    # incident notes: "lost until a cold boot (Unable to determine the device handle for GPU0: ...)")
    ("NVML103", "Unable to determine the device handle for GPU0: 0000:81:00.0: Unknown Error", "notes"),
    # the GPU operator's mig-manager (same go-nvml error; quoted in a public troubleshooting guide)
    (
        "DEVPLG101",
        "Error applying MIG configuration with hooks: error initializing NVML: ERROR_LIBRARY_NOT_FOUND",
        "guide",
    ),
    # etcdctl check perf's other failure lines (the same public write-up)
    ("ETCD117", "Slowest request took too long: 1.354317s", "blog"),
    ("ETCD117", "    Stddev too high: 0.177526s", "guide"),
    # aer.c port info of a non-fatal and a corrected error (quoted on linux-pci)
    (
        "AER103",
        "pcieport 0000:00:1d.0: AER: Multiple Uncorrected (Non-Fatal) error received: 0000:00:1d.0",
        "linux-pci",
    ),
    ("AER104", "[53409.891789] pcieport 0000:00:1d.0: AER: Corrected error received: 0000:02:00.0", "github"),
    # containerd's resolver: the tag does not exist / the repository needs credentials (kubectl
    # describe events quoted in public Kubernetes tutorials)
    (
        "KUBELET120",
        '  Warning  Failed     51s (x4 over 2m25s)  kubelet            Failed to pull image "nginx:latests": rpc '
        'error: code = NotFound desc = failed to pull and unpack image "docker.io/library/nginx:latests": failed '
        'to resolve reference "docker.io/library/nginx:latests": docker.io/library/nginx:latests: not found',
        "github",
    ),
    (
        "KUBELET120",
        '  Warning  Failed     10s   kubelet, kind-control-plane  Failed to pull image "non-existent": rpc error: '
        'code = Unknown desc = failed to pull and unpack image "docker.io/library/non-existent:latest": failed to '
        'resolve reference "docker.io/library/non-existent:latest": pull access denied, repository does not exist '
        "or may require authorization: server message: insufficient_scope: authorization failed",
        "github",
    ),
    # the apiserver's forbidden message before 1.14: resource not quoted, "at the cluster scope"
    # (tests/data/incidents/ctrl-065, openshift-ansible#7856)
    (
        "APISRV101",
        'E0406 09:24:55.434670       1 manager.go:160] failed to update node conditions: nodes "172.16.186.37" '
        'is forbidden: User "system:serviceaccount:openshift-infra:node-problem-detector" cannot patch '
        "nodes/status at the cluster scope",
        "incidents/ctrl-065",
    ),
    # the memcg OOM path in the kernel's call trace (tests/data/incidents/ctrl-050, kubernetes#1962)
    (
        "KUBELET117",
        "Oct 21 21:08:58 kubernetes-minion-2 kernel: [75254.231977]  [<ffffffff811b1faf>] ? "
        "mem_cgroup_oom_synchronize+0x50f/0x580",
        "incidents/ctrl-050",
    ),
    # kubelet 1.20+ structured form (as quoted in a fluentd kubelet-parser test)
    (
        "KUBELET116",
        'I0527 09:00:05.110852    1025 eviction_manager.go:167] "Failed to admit pod to node" '
        'pod="monitoring/prometheus-k8s-0" nodeCondition=[DiskPressure]',
        "github",
    ),
    # etcdctl v2's repeated error list (tests/data/incidents/ctrl-024)
    ("ETCD114", 'error #1: malformed HTTP response "\\x15\\x03\\x01\\x00\\x02\\x02"', "incidents/ctrl-024"),
    # mlx5_core health.c since 5.x prints the function and line (mlx5_core_err), as quoted in a
    # GitHub project's tests of the kernel line
    (
        "IB153",
        "mlx5_core 0000:d2:00.0: poll_health:825: device's health compromised - reached miss count.",
        "github",
    ),
    # k8s-device-plugin 1.x main.go: log.Printf("Failed to start nvml with error: %s.", err)
    ("DEVPLG101", "Failed to start nvml with error:  could not load NVML library", "incidents/gpu-014"),
    # Linux aer.c aer_print_port_info (4.x): "%s%s error received: %04x:%02x:%02x.%d"
    (
        "AER101",
        "[  +0.000001] pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: 0000:00:03.0",
        "incidents/gpu-022",
    ),
    # 4.19+: the "AER: " prefix before the bus error (a Linux bug report quoted on GitHub)
    (
        "AER104",
        "pcieport 0000:00:1c.5: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Transmitter ID)",
        "github",
    ),
    # pre-4.x: id=<hex>(agent)
    (
        "AER104",
        "[  283.805260] pcieport 0000:00:1d.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
        "id=00e8(Receiver ID)",
        "github",
    ),
)


@pytest.mark.parametrize(("code", "line", "where"), LINES, ids=[f"{c}-{w}" for c, _, w in LINES])
def test_real_line_is_read_as_its_code(code, line, where):
    hits = scan_text(line + "\n", where)
    assert hits and hits[0].code == code, [h.code for h in hits]


# normal lines that quote a catalogued text: nothing
QUIET = (
    # the RDMA shared device plugin starting and finding its NICs (Mellanox/k8s-rdma-shared-dev-plugin#108)
    "2024/05/17 09:54:41 Starting K8s RDMA Shared Device Plugin version= master",
    "2024/05/17 09:54:41 DiscoverHostDevices(): device found: 0000:07:00.0   02              Mellanox "
    "Technolo...    MT27800 Family [ConnectX-5]             ",
    # dcgm-exporter connecting to its remote host engine (NVIDIA/gpu-operator#414), before it fails
    'time="2022-09-29T12:09:09Z" level=info msg="Attemping to connect to remote hostengine at localhost:5555"',
    # a registry out of reach is not a missing image
    '  Warning Failed 7m1s (x41 over 173m) kubelet  Failed to pull image "busybox:1.36.1": rpc error: code = '
    'DeadlineExceeded desc = failed to pull and unpack image "docker.io/library/busybox:1.36.1": failed to '
    'resolve reference "docker.io/library/busybox:1.36.1": failed to do request: dial tcp 199.59.150.43:443: '
    "i/o timeout",
    # dcgm-exporter 3.x/4.x carries on without the CPU/DCP collectors (info level)
    'time="2024-02-28T16:29:11+01:00" level=info msg="Not collecting CPU metrics; Error retrieving DCGM MIG '
    'hierarchy: This request is serviced by a module of DCGM that is not currently loaded"',
    'time=2026-08-13T05:29:31.413Z level=INFO msg="Not collecting CPU Core metrics; error retrieving DCGM CPU '
    'hierarchy: This request is serviced by a module of DCGM that is not currently loaded"',
)


@pytest.mark.parametrize("line", QUIET)
def test_normal_line_is_not_a_hit(line):
    assert not scan_text(line + "\n", "quiet")


def test_scheduler_reason_of_the_targeted_nodes_leads_the_selector():
    # k9s events of github.com/openzim/zimfarm (tests/data/incidents/ctrl-035): the selector excludes 4
    # nodes by design; the one node the pod targets lacks cpu
    from clusterdoctor.rules.registry import Observations, get_rule, run_rules

    line = (
        "Warning  FailedScheduling   3m32s   default-scheduler   0/5 nodes are available: 1 Insufficient cpu, "
        "4 node(s) didn't match Pod's node affinity/selector. preemption: 0/5 nodes are available: 1\n"
    )
    obs = Observations({"messages": scan_text(line, "ev.txt")})
    found, _, _ = run_rules(obs, [get_rule("SCHED101"), get_rule("SCHED106")])
    assert [f.rule for f in sorted(found, key=lambda f: -f.score)] == ["SCHED101", "SCHED106"]


def test_aer_subject_is_the_port_whichever_line_names_it():
    hits = scan_text(
        "pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: 0000:00:03.0\n", "k"
    )
    assert hits[0].code == "AER101" and hit_groups(hits[0])["pci"] == "0000:00:03.0"
