"""/proc/<pid>/cgroup → pod UID and container ID (cgroup v1/v2, systemd/cgroupfs drivers), and the join
with a real kubelet PodList and a real gRPC pod-resources server into namespace/pod/container."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.observe.control.kube_pods import list_node_pods, parse_pod_index
from clusterdoctor.observe.node.cgroup import parse_proc_cgroup
from clusterdoctor.observe.node.kube_context import KubeContext, collect_kube_context
from tests.conftest import shared_fixture
from tests.fake_kubelet import Allocation, start_fake_kubelet

PODLIST = "ctrl/app/pods/pods_kubelet_podlist_k8s1.35_minikube.json"
UID = "70565f42-b704-42f2-83fe-1ffb77a67800"
CID = "a678b5127d3f1a1bfd029818c628a8cd106d7b873ff64cd6bfaa7022579cbab5"

# Path shapes as real /proc/<pid>/cgroup files show them (module docstring of observe/node/cgroup.py
# names the public sources); one per driver/version/runtime/QoS combination.
CASES = [
    # cgroup v2, systemd driver, containerd, Burstable
    (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope\n",
     UID, "burstable", "systemd", CID, "containerd", 2),
    # cgroup v2, systemd, CRI-O, Guaranteed (no QoS slice)
    (f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/crio-{CID}.scope\n",
     UID, "guaranteed", "systemd", CID, "cri-o", 2),
    # cgroup v1 hybrid: the pod path on the v1 controllers, 0::/ on the unified tree
    (f"12:cpuset:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice/docker-{CID}.scope\n"
     "11:memory:/\n0::/\n", UID, "besteffort", "systemd", CID, "docker", 1),
    # cgroup v1, cgroupfs driver
    (f"11:blkio:/kubepods/burstable/pod{UID}/{CID}\n10:pids:/kubepods/burstable/pod{UID}/{CID}\n",
     UID, "burstable", "cgroupfs", CID, None, 1),
    # cgroup v1, cgroupfs, Guaranteed
    (f"4:cpuset:/kubepods/pod{UID}/{CID}\n", UID, "guaranteed", "cgroupfs", CID, None, 1),
    # containerd with systemd_cgroup off under a systemd-driver kubelet
    (f"13:memory:/system.slice/containerd.service/kubepods-besteffort-pod{UID.replace('-', '_')}.slice:cri-containerd:{CID}\n",
     UID, "besteffort", "systemd", CID, "containerd", 1),
    # kind: a kubelet inside a container nests its slices
    (f"0::/system.slice/docker-{'f' * 64}.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
     f"kubelet-kubepods-besteffort-pod{UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope\n",
     UID, "besteffort", "systemd", CID, "containerd", 2),
    # static pod: the UID is a 32-hex hash of the manifest
    ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod07bd11a0a13dfe5450a17a39eb8e32d2.slice/"
     f"cri-containerd-{CID}.scope\n", "07bd11a0a13dfe5450a17a39eb8e32d2", "burstable", "systemd", CID, "containerd", 2),
    # the pod's sandbox-level cgroup itself (no container)
    (f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice\n", UID, "guaranteed", "systemd", None, None, 2),
    # CRI-O's conmon is not the container
    (f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/crio-conmon-{CID}.scope\n",
     UID, "guaranteed", "systemd", None, None, 2),
]  # fmt: skip


@pytest.mark.parametrize("text,uid,qos,driver,cid,runtime,version", CASES)
def test_path_shapes(text, uid, qos, driver, cid, runtime, version):
    cg = parse_proc_cgroup(text)
    assert cg is not None
    assert (cg.pod_uid, cg.qos, cg.driver, cg.container_id, cg.runtime, cg.cgroup_version) == (
        uid,
        qos,
        driver,
        cid,
        runtime,
        version,
    )


@pytest.mark.parametrize(
    "text",
    [
        "0::/user.slice/user-1000.slice/session-3.scope\n",
        "0::/system.slice/docker-2fa3e04b676df750842faf017052dd37ea0cc5bc7259a3487a1718c7fe100c94.scope\n",
        "9:name=systemd:/\n4:memory:/process_api/f22736d48327f607a1654dc4661c832b\n0::/\n",
        "",
        "garbage without colons\n",
    ],
)
def test_not_in_a_pod(text):
    assert parse_proc_cgroup(text) is None


@given(st.text(max_size=400))
def test_never_raises(text):
    parse_proc_cgroup(text)


@given(st.uuids(), st.sampled_from(["", "burstable", "besteffort"]), st.booleans())
def test_any_uid_round_trips(uid, qos, systemd):
    u = str(uid)
    if systemd:
        q = f"kubepods-{qos}.slice/kubepods-{qos}-pod" if qos else "kubepods-pod"
        path = f"0::/kubepods.slice/{q}{u.replace('-', '_')}.slice/cri-containerd-{CID}.scope"
    else:
        path = f"3:cpuset:/kubepods/{qos + '/' if qos else ''}pod{u}/{CID}"
    cg = parse_proc_cgroup(path)
    assert cg is not None and cg.pod_uid == u and cg.qos == (qos or "guaranteed")


def _podlist():
    return shared_fixture(PODLIST).read_bytes()


def _pod(doc, name):
    return next(it for it in doc["items"] if it["metadata"]["name"] == name)


def test_pod_index_from_real_podlist():
    idx = parse_pod_index(_podlist(), PODLIST)
    assert len(idx) == 24
    sched = idx.get("07bd11a0a13dfe5450a17a39eb8e32d2")
    assert sched is not None and sched.key == "kube-system/kube-scheduler-datagen-1-35"
    assert sched.qos == "Burstable"
    assert "kube-scheduler" in sched.containers.values()


def _proc_tree(tmp_path, cgroups: dict[int, str]):
    root = tmp_path / "proc"
    for pid, text in cgroups.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "cgroup").write_text(text)
    return str(root)


def test_process_named_by_pod_and_container(tmp_path):
    """A process in the (real) e2e-statefulset-0 pod's container is named namespace/pod/container."""
    raw = _podlist()
    doc = json.loads(raw)
    pod = _pod(doc, "e2e-statefulset-0")
    uid = pod["metadata"]["uid"]
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    proc = _proc_tree(
        tmp_path,
        {
            4242: f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid.replace('-', '_')}.slice/cri-containerd-{cid}.scope\n",
            4343: "0::/system.slice/sshd.service\n",
            4444: f"0::/kubepods.slice/kubepods-pod{'1' * 8}_{'2' * 4}_{'3' * 4}_{'4' * 4}_{'5' * 12}.slice/cri-containerd-{cid}.scope\n",
        },
    )
    ctx = KubeContext(pods=parse_pod_index(raw, PODLIST))
    ref = ctx.ref_for_pid(4242, proc)
    assert ref is not None and ref.label == "scraper/e2e-statefulset-0/compute-pi-digits"
    assert ref.qos == "Burstable"
    assert ctx.ref_for_pid(4343, proc) is None
    unknown = ctx.ref_for_pid(4444, proc)  # a pod the list does not have: named by UID
    assert unknown is not None and unknown.label == "pod 11111111-2222-3333-4444-555555555555"
    assert ctx.ref_for_pid(99999, proc) is None  # gone
    placements = [{"pid": 4242, "comm": "python"}, {"pid": 4343, "comm": "sshd"}]
    ctx.annotate(placements, proc)
    assert placements[0]["pod"]["label"] == "scraper/e2e-statefulset-0/compute-pi-digits"
    assert "pod" not in placements[1]


def test_kube_context_joins_pod_resources(tmp_path):
    """cgroup → UID → (real PodList) name → (real gRPC pod-resources server) GPUs and CPUs."""
    pytest.importorskip("grpc")
    raw = _podlist()
    doc = json.loads(raw)
    pod = _pod(doc, "e2e-container-creating")  # a Guaranteed pod: exclusive CPUs possible
    uid = pod["metadata"]["uid"]
    cname = pod["status"]["containerStatuses"][0]["name"]
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    gpu = "GPU-6a1e5b0c-91d3-2e8f-aa47-5c3d2b1e0f99"

    sock = tmp_path / "k.sock"
    server = start_fake_kubelet(
        sock, [Allocation(pod["metadata"]["namespace"], pod["metadata"]["name"], cname, [gpu], [4, 5])], []
    )
    pods_file = tmp_path / "pods.json"
    pods_file.write_bytes(raw)
    try:
        ctx = collect_kube_context(None, str(sock), timeout_s=5, pods_file=str(pods_file))
    finally:
        server.stop(None)
    assert ctx.warnings == []
    proc = _proc_tree(tmp_path, {7: f"4:cpuset:/kubepods/pod{uid}/{cid}\n"})
    ref = ctx.ref_for_pid(7, proc)
    assert ref is not None
    assert ref.label == f"scraper/e2e-container-creating/{cname}"
    assert ref.gpus == (gpu,) and ref.cpu_ids == (4, 5)
    owner = ctx.gpu_owner(gpu + "::1")
    assert owner is not None and owner.label == f"scraper/e2e-container-creating/{cname}"


def test_kube_context_degrades_with_warnings(tmp_path):
    ctx = collect_kube_context(
        "gpu-node-7", str(tmp_path / "missing.sock"), timeout_s=1, api_url="http://127.0.0.1:9"
    )
    assert ctx.pods is None and ctx.resources is None
    assert any("pods on gpu-node-7 from the API server" in w for w in ctx.warnings)
    assert any("no kubelet pod-resources socket" in w for w in ctx.warnings)


def test_list_node_pods_asks_for_this_node_with_the_token(tmp_path):
    """The API request a pod's agent makes, answered by a local HTTP server with the real PodList."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    raw = _podlist()
    seen: dict[str, str] = {}

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            seen["path"] = self.path
            seen["auth"] = self.headers.get("Authorization", "")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *a):
            return

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        idx = list_node_pods("datagen-1-35", api_url=f"http://127.0.0.1:{srv.server_address[1]}", token="t0k")
    finally:
        srv.shutdown()
        srv.server_close()
    assert seen["path"] == "/api/v1/pods?fieldSelector=spec.nodeName%3Ddatagen-1-35"
    assert seen["auth"] == "Bearer t0k"
    assert len(idx) == 24 and "datagen-1-35" in idx.source


def test_gpu_health_states_named_by_pod_resources():
    """A real dcgm-exporter scrape without Kubernetes labels: the pod-resources API names the GPU's pod."""
    from clusterdoctor.observe.gpu.dcgm_exporter import parse_dcgm_exporter
    from clusterdoctor.observe.node.kube_context import name_gpu_pods
    from clusterdoctor.observe.node.podresources import ContainerAlloc, DeviceAlloc, PodResources
    from clusterdoctor.rules.registry import Observations

    rel = "gpu/dcgm-exporter_l4_kops-aws_580.105.08_remap-fields-healthy.prom"
    reports = parse_dcgm_exporter(shared_fixture(rel).read_bytes(), rel)
    g = reports[0].gpus[0]
    assert g.uuid and g.pod is None
    pr = PodResources(
        socket="/var/lib/kubelet/pod-resources/kubelet.sock",
        api="v1",
        containers=[
            ContainerAlloc("vision", "resnet-7", "trainer", (DeviceAlloc("nvidia.com/gpu", (g.uuid,)),))
        ],
    )
    obs = Observations()
    obs.put("gpu_reports", reports)
    assert name_gpu_pods(obs) == 0  # no pod resources observed: nothing to name
    obs.put("pod_resources", pr)
    assert name_gpu_pods(obs) == 1
    assert (g.namespace, g.pod, g.container) == ("vision", "resnet-7", "trainer")
    assert g.field_sources["pod"].startswith("kubelet pod-resources")
    from clusterdoctor.rules.gpu_common import _extra_ident

    assert any(
        e.description == "pod" and e.value == "vision/resnet-7 container trainer" for e in _extra_ident(g)
    )
