"""kubectl get pods as pasted in public threads (tests/data/ctrl/public/SOURCES.md): rows without their
header, and a listing whose every line is a Markdown inline code span."""

from __future__ import annotations

from pathlib import Path

from clusterdoctor.model import Severity
from clusterdoctor.observe.control.kubectl_text import parse_kubectl_text, sniff_kubectl_text
from clusterdoctor.observe.paste import clean

PUBLIC = Path(__file__).resolve().parents[2] / "data" / "ctrl" / "public"
INCIDENTS = Path(__file__).resolve().parents[2] / "data" / "incidents"


def _diagnose(*paths: Path):
    from clusterdoctor import diagnosis

    obs = diagnosis.new_observations(clock=lambda: 1_780_000_000.0)
    return diagnosis.run(obs, diagnosis.load_sources(obs, list(paths)))


def test_headerless_all_namespaces_rows() -> None:
    text = (PUBLIC / "k8s_device_plugin_372_get_pods_headerless.txt").read_text()
    assert sniff_kubectl_text(text.encode())
    res = parse_kubectl_text(text)
    assert len(res.pods) == 7 and not res.skipped
    first = res.pods[0]
    assert (first.namespace, first.name, first.status, first.restarts) == (
        "kube-system",
        "calico-kube-controllers-555bc4b957-q99v4",
        "Running",
        34,
    )


def test_headerless_running_rows_are_read_and_quiet() -> None:
    for p in (
        PUBLIC / "k8s_device_plugin_372_get_pods_headerless.txt",
        INCIDENTS / "ok-ctrl-402" / "paste-2.txt",
    ):
        d = _diagnose(p)
        assert d.sources and not [f for f in d.findings if f.severity >= Severity.WARNING], p


def test_inline_code_lines_are_unwrapped() -> None:
    pasted = clean((PUBLIC / "falco_516_get_pods_backticks.txt").read_text())
    assert pasted.commands == ["kubectl get pods"]
    assert pasted.text.splitlines()[0].startswith("NAME ") and "`" not in pasted.text


def test_crash_looping_pod_named_on_its_own_line() -> None:
    top = _diagnose(PUBLIC / "falco_516_get_pods_backticks.txt").findings[0]
    assert top.rule == "KUBELET004" and top.subject == "pod falco-daemonset-t254c"
    assert top.evidence[0].description.startswith("line 3:")  # the paste's line, not the cleaned text's


def test_a_sentence_with_inline_code_is_not_unwrapped() -> None:
    text = "run `kubectl get pods` and look\n`NAME READY`\nplain line\nanother plain line\n"
    assert "`" in clean(text).text
