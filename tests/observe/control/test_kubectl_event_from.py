"""A describe's Events rows pasted without the pod they belong to: the From column ``kubelet, <node>``
(kubectl up to 1.19) names the node whose kubelet reported them, so a known message on the row is
about that node; ``kubelet`` alone (1.20+) names none."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor import diagnosis
from clusterdoctor.observe.control.kubectl_text import parse_kubectl_text, reporting_node

NOW = 1_800_000_000.0

# github.com/intel/pmem-csi/issues/261 (the reporter's event row; '....' is the reporter's redaction)
PMEM_ROW = (
    " Warning  Evicted    6m28s  kubelet, host-1    The node was low on resource: ephemeral-storage. "
    "Container .... was using 52Ki, which exceeds its request of 0.\n"
)
# github.com/kubernetes/kubernetes/issues/91600 (the Events table of a describe, no Name: line pasted)
K91600 = """\
Events:
  Type     Reason          Age                From               Message
  ----     ------          ----               ----               -------
  Normal   Created         18m (x2 over 18m)  kubelet, mgt04     Created container calico-node
  Normal   Started         18m (x2 over 18m)  kubelet, mgt04     Started container calico-node
  Normal   Killing         18m (x2 over 18m)  kubelet, mgt04     Stopping container calico-node
  Warning  Evicted         18m                kubelet, mgt04     The node was low on resource: ephemeral-storage. Container calico-node was using 92Ki, which exceeds its request of 0.
"""
# github.com/elastisys/compliantkubernetes-apps/issues/1173 (kubectl 1.20+: From is "kubelet" alone)
NEW_FROM = (
    "Warning  Evicted  37m   kubelet  The node was low on resource: ephemeral-storage. Container X was "
    "using 2596Ki, which exceeds its request of 0.\n"
)


def _diagnose(tmp_path, text: str):
    p = tmp_path / "paste.txt"
    p.write_text(text)
    obs = diagnosis.new_observations(clock=lambda: NOW)
    return diagnosis.run(obs, diagnosis.load_sources(obs, [p]))


def test_a_row_without_its_pod_is_about_the_reporting_node():
    res = parse_kubectl_text(PMEM_ROW.encode(), "p")
    assert [e.origin for e in res.events] == ["kubelet, host-1"]
    assert res.about == {1: "node host-1"}


def test_the_eviction_names_the_node_in_pmem_csi_261(tmp_path):
    f = _diagnose(tmp_path, PMEM_ROW).findings[0]
    assert (f.rule, f.subject) == ("KUBELET112", "node host-1")
    assert "kubelet.eviction" in f.causes


def test_the_eviction_names_the_node_in_kubernetes_91600(tmp_path):
    f = next(f for f in _diagnose(tmp_path, K91600).findings if f.rule == "KUBELET112")
    assert f.subject == "node mgt04"


def test_a_described_pod_keeps_its_own_name(tmp_path):
    # the same rows under a describe's Name/Namespace name that object, not the node
    text = "Name:         calico-node-x2\nNamespace:    kube-system\n" + K91600
    res = parse_kubectl_text(text.encode(), "p")
    evicted = next(e for e in res.events if e.reason == "Evicted")
    assert res.about[evicted.line].endswith("kube-system/calico-node-x2")


def test_kubelet_alone_names_no_node():
    res = parse_kubectl_text(NEW_FROM.encode(), "p")
    assert res.events and res.events[0].origin == "kubelet"
    assert res.about == {}


@given(st.text(max_size=60))
def test_reporting_node_is_a_name_or_nothing(origin):
    node = reporting_node(origin)
    assert node == "" or (origin.strip() == f"kubelet, {node}" and " " not in node)
