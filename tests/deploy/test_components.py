"""deploy/components: each install choice renders on top of an overlay, validates like the overlays,
and changes what it says and nothing else; the image override a user writes with `kustomize edit set
image` reaches both clusterdoctor containers; every component is documented."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml

from tests.deploy.test_manifests import DEPLOY, REPO, by_kind, kubectl, render

COMPONENTS = sorted(p.name for p in (DEPLOY / "components").iterdir() if (p / "kustomization.yaml").exists())
# the install choices (the rest are what the overlays are made of)
CHOICES = {
    "gpu-nodes",
    "tolerate-all-taints",
    "priority-class",
    "resources-large",
    "monitor-release-label",
    "nvidia-runtime-class",
    "kmsg-privileged",
}
IMAGE = "ghcr.io/clusterdoctor/clusterdoctor"


def render_with(tmp_path: Path, overlay: str, components: list[str], extra: dict[str, Any] | None = None):
    """Render a user's overlay: ours as its resource, plus components (relative paths, as kustomize
    requires)."""
    root = tmp_path / "my-overlay"
    root.mkdir(exist_ok=True)
    rel = os.path.relpath(DEPLOY, root)
    k = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [f"{rel}/overlays/{overlay}"],
        "components": [f"{rel}/components/{c}" for c in components],
        **(extra or {}),
    }
    (root / "kustomization.yaml").write_text(yaml.safe_dump(k))
    out = subprocess.run([kubectl(), "kustomize", str(root)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def agent_spec(objs):
    return by_kind(objs, "DaemonSet", "clusterdoctor-agent")[0]["spec"]["template"]["spec"]


def _overlay_for(component: str) -> str:
    return "prometheus-operator" if component == "monitor-release-label" else "plain-prometheus"


def test_every_choice_is_there():
    assert CHOICES <= set(COMPONENTS)


@pytest.mark.parametrize("component", sorted(CHOICES))
def test_component_renders_and_validates(component, tmp_path):
    kv = pytest.importorskip("kubernetes_validate")
    objs = render_with(tmp_path, _overlay_for(component), [component])
    base = render(_overlay_for(component))
    assert len(objs) == len(base)  # a choice adds no object and drops none
    for o in objs:
        if o["kind"] in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
            continue
        for v in ("1.30", kv.latest_version()):
            try:
                kv.validate(o, v, strict=True)
            except kv.ValidationError as e:
                pytest.fail(f"{component}: {o['kind']}/{o['metadata']['name']} invalid for {v}: {e.message}")


def test_all_choices_together(tmp_path):
    objs = render_with(tmp_path, "prometheus-operator", sorted(CHOICES))
    spec = agent_spec(objs)
    assert spec["priorityClassName"] == "system-node-critical" and spec["runtimeClassName"] == "nvidia"
    assert spec["tolerations"] == [{"operator": "Exists"}]


def test_gpu_nodes(tmp_path):
    spec = agent_spec(render_with(tmp_path, "plain-prometheus", ["gpu-nodes"]))
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    keys = [{e["key"]: e["values"] for e in t["matchExpressions"]} for t in terms]
    # the terms are ORed: each one must keep the Linux condition
    assert all(k["kubernetes.io/os"] == ["linux"] for k in keys)
    assert {"nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present"} <= {
        x for k in keys for x in k
    }
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}


def test_base_placement_and_kernel_log_access():
    spec = agent_spec(render("plain-prometheus"))
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    tol = spec["tolerations"]
    assert {"operator": "Exists", "effect": "NoExecute"} in tol  # a sick node's taint keeps the agent
    assert not spec.get("priorityClassName") and not spec.get("runtimeClassName")  # those are choices
    c = spec["containers"][0]
    assert "SYSLOG" in c["securityContext"]["capabilities"]["add"]
    vols = {v["name"]: v for v in spec["volumes"]}
    kmsg = next(m for m in c["volumeMounts"] if m["mountPath"] == "/dev/kmsg")
    assert kmsg["readOnly"] is True and vols[kmsg["name"]]["hostPath"] == {
        "path": "/dev/kmsg",
        "type": "CharDevice",
    }
    kl = [a.split("=", 1)[1] for a in c["args"] if a.startswith("--kernel-log=")]
    assert kl[0] == "/dev/kmsg" and "/host/var/log/journal" in kl  # the fallbacks under the /var/log mount
    assert any(a.startswith("--event-window=") for a in c["args"])


def test_tolerate_all(tmp_path):
    assert agent_spec(render_with(tmp_path, "plain-prometheus", ["tolerate-all-taints"]))["tolerations"] == [
        {"operator": "Exists"}
    ]


def test_resources_large(tmp_path):
    res = agent_spec(render_with(tmp_path, "plain-prometheus", ["resources-large"]))["containers"][0][
        "resources"
    ]
    assert res == {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}


def test_kmsg_privileged(tmp_path):
    sc = agent_spec(render_with(tmp_path, "plain-prometheus", ["kmsg-privileged"]))["containers"][0][
        "securityContext"
    ]
    assert sc["privileged"] is True and sc["allowPrivilegeEscalation"] is True


@pytest.mark.parametrize("overlay", ["prometheus-operator", "prometheus-operator-podmonitor"])
def test_release_label_on_every_operator_object(overlay, tmp_path):
    objs = render_with(tmp_path, overlay, ["monitor-release-label"])
    ops = [o for o in objs if o["apiVersion"].startswith("monitoring.coreos.com/")]
    assert len(ops) == 2
    assert all(o["metadata"]["labels"]["release"] == "kube-prometheus-stack" for o in ops)
    assert all("release" not in (o["metadata"].get("labels") or {}) for o in objs if o not in ops)


def test_release_label_is_harmless_without_the_operator(tmp_path):
    objs = render_with(tmp_path, "plain-prometheus", ["monitor-release-label"])
    assert all("release" not in (o["metadata"].get("labels") or {}) for o in objs)


def _clusterdoctor_images(objs) -> set[str]:
    return {
        c["image"]
        for o in objs
        if o["kind"] in ("DaemonSet", "Deployment")
        for c in o["spec"]["template"]["spec"]["containers"]
        if "kube-scheduler" not in c["image"]
    }


def test_image_is_the_package_version():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    for overlay in ("plain-prometheus", "prometheus-operator"):
        assert _clusterdoctor_images(render(overlay)) == {f"{IMAGE}:{version}"}


@pytest.mark.parametrize(
    "overlay", ["plain-prometheus", "prometheus-operator", "prometheus-operator-podmonitor"]
)
def test_documented_image_override(overlay, tmp_path):
    """What `kustomize edit set image ghcr.io/clusterdoctor/clusterdoctor=registry.example/cd:1.2.3`
    writes into a kustomization.yaml (kustomize v5), rendered."""
    images = [{"name": IMAGE, "newName": "registry.example/cd", "newTag": "1.2.3"}]
    objs = render_with(tmp_path, overlay, [], {"images": images})
    assert _clusterdoctor_images(objs) == {"registry.example/cd:1.2.3"}
    doc = (REPO / "docs" / "kubernetes.md").read_text()
    assert f"kustomize edit set image {IMAGE}=" in doc
    assert "set image clusterdoctor=" not in doc  # the name that never matched


def test_every_component_is_documented():
    doc = (REPO / "docs" / "kubernetes.md").read_text()
    for c in COMPONENTS:
        assert f"components/{c}" in doc, c


def test_license_is_the_one_pyproject_declares():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
