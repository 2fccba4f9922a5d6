"""The plain-file pass of the Prometheus text parser (prom_fast, issue 26 fifth round) against the
previous parser and the careful per-line loop.

* Real dumps parse exactly as the previous parser (commit 0d9bf96, regex bulk pass) parsed them:
  a digest of every sample's repr, the families, exemplars and warnings, recorded with that parser.
* Line-level mutations of real dumps (timestamps, bare names, ``}`` in values, blank and space-only
  lines, tabs, UNIT/EOF lines, bad values) give the same result from the plain pass as from the
  careful loop, read whole and in blocks of a few hundred characters (the series cache across blocks).
* The regex-free helpers (names, HELP unescaping, HELP/TYPE lines) match the regular expressions
  they replace, and ``PromSample`` (no longer a ``collections.namedtuple``) keeps its API.
"""

from __future__ import annotations

import hashlib
import pickle
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control import prom_careful, prom_fast
from clusterdoctor.observe.control.prom_text import MetricSet, PromSample, parse_prom_text
from clusterdoctor.testing import fixture_path
from tests.conftest import TEST_DATA

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LNAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
FOUR = (
    "ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom",
    "ctrl/etcd_v3.6.6_minikube_metrics.prom",
    "data:node_exporter_1.5.0_metrics.prom",
    "data:prometheus_2.42.0_federate_all.prom",
)
# (file, digest, samples) of the previous parser's output (0d9bf96), as digest() computes it
PREVIOUS = [
    ("ctrl/app/kafka/kafka_exporter_readme_consumergroup_metrics.prom", "c7e82f2b6893b95b", 5),
    ("ctrl/app/kafka/kafka_exporter_v1.3.1_metrics_scrape.prom", "373ee219a6196f7a", 471),
    ("ctrl/app/kafka/kminion_consumer_group_metrics_docs.prom", "ce98be3deb9a3ab9", 9),
    ("ctrl/etcd_v3.6.6_minikube_metrics.prom", "03541da3646caa50", 1461),
    ("ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom", "54b797e7886ba6fa", 2334),
    ("ctrl/kubelet_pod_start_sli_aks_after_110pods.prom", "bce108ca6d6aff70", 28),
    ("ctrl/kubelet_pod_start_sli_aks_before.prom", "d87e7b474c6ffc25", 28),
    ("gpu/dcgm-exporter_l40s_upcloud_595.58.03_prof-fields-healthy.prom", "a5ec20cb4c8fa1d4", 23),
    ("gpu/dcgm-exporter_l4_kops-aws_580.105.08_remap-fields-healthy.prom", "98f6cbe85fb15bd5", 23),
    ("gpu/dcgm-exporter_rtx4000ada_lke_580.95.05_pod-labels.prom", "6a5cd8ecb940d278", 25),
    ("data:etcd_3.4.23_3member_after_leader_stop_metrics.prom", "9efe0ef4add88d72", 1292),
    ("data:node_exporter_1.5.0_metrics.prom", "e3ede04ca8a2cfff", 1814),
    ("data:prometheus_2.42.0_federate_all.prom", "a7a10a7540f7d82d", 2138),
]
FOUR_X3 = ("3a8053059caf144b", 23241)  # the four of FOUR concatenated, three times


def _path(rel: str) -> Path:
    if rel.startswith("data:"):
        return TEST_DATA / "ctrl" / rel[5:]
    p = fixture_path(rel)
    if p is None:
        pytest.skip(f"shared fixture {rel} absent (set CLUSTERDOCTOR_FIXTURES)")
    return p


def digest(ms: MetricSet) -> tuple[str, int]:
    h = hashlib.sha256()
    for s in ms.samples:
        h.update(repr(tuple(s)).encode())
        h.update(b"\n")
    h.update(repr([(f.name, f.type, f.help, f.unit) for f in ms.families.values()]).encode())
    h.update(repr(sorted((k, repr(v)) for k, v in ms.exemplars.items())).encode())
    h.update(repr(list(ms.warnings)).encode())
    return h.hexdigest()[:16], len(ms.samples)


@pytest.mark.parametrize("rel,want,n", PREVIOUS, ids=[p[0].split("/")[-1] for p in PREVIOUS])
def test_real_dumps_parse_as_the_previous_parser(rel: str, want: str, n: int) -> None:
    p = _path(rel)
    assert digest(parse_prom_text(p.read_text(), p.name)) == (want, n)


@pytest.mark.parametrize(
    "block,cache,remember",
    [
        (prom_fast.BLOCK, prom_fast.CACHE, prom_fast.REMEMBER_ABOVE),
        (5000, prom_fast.CACHE, prom_fast.REMEMBER_ABOVE),
        (5000, prom_fast.CACHE, 0),
        (5000, 50, 0),
    ],
)
def test_concatenated_dumps_parse_as_the_previous_parser(
    monkeypatch: pytest.MonkeyPatch, block: int, cache: int, remember: int
) -> None:
    """Whole, in blocks, in blocks remembering series and comments (every series seen again in a
    later block), and with what is remembered dropped every few blocks (a bound of 50)."""
    text = "".join(_path(rel).read_text() for rel in FOUR) * 3
    monkeypatch.setattr(prom_fast, "BLOCK", block)
    monkeypatch.setattr(prom_fast, "CACHE", cache)
    monkeypatch.setattr(prom_fast, "REMEMBER_ABOVE", remember)
    assert digest(parse_prom_text(text)) == FOUR_X3


def _careful(monkeypatch: pytest.MonkeyPatch, text: str) -> MetricSet | str:
    with monkeypatch.context() as m:
        m.setattr(prom_fast, "parse_blocks", lambda *a: None)
        return _parse(text)


def _parse(text: str) -> MetricSet | str:
    try:
        return parse_prom_text(text)
    except InputError as e:
        return f"InputError: {e}"


def _view(ms: MetricSet | str) -> object:
    if isinstance(ms, str):
        return ms
    return (
        ms.normalized(),
        [(f.name, f.type, f.help, f.unit) for f in ms.families.values()],
        list(ms.warnings),
        ms.openmetrics,
        sorted(ms.exemplars),
    )


EDITS = [
    "drop",
    "dup",
    "ts",
    "bare",
    "brace",
    "blank",
    "spaces",
    "tab",
    "trail",
    "unit",
    "eof",
    "value",
    "type",
    "help",
    "empty",
    "indent",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_plain_pass_equals_careful_loop_on_mutations(
    monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    src = data.draw(
        st.sampled_from(["node_exporter_1.5.0_metrics.prom", "prometheus_2.42.0_federate_all.prom"])
    )
    lines = (TEST_DATA / "ctrl" / src).read_text().splitlines()
    start = data.draw(st.integers(0, len(lines) - 60))
    lines = lines[start : start + 60]
    for _ in range(data.draw(st.integers(0, 5))):
        i = data.draw(st.integers(0, len(lines) - 1))
        ln = lines[i]
        op = data.draw(st.sampled_from(EDITS))
        sample = not ln.startswith("#")
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, ln)
        elif op == "ts" and sample:
            lines[i] = ln + data.draw(
                st.sampled_from([" 1700000000000", " -5", " 1.5", "  17", "\t17", " 1 2"])
            )
        elif op == "bare" and sample:
            lines[i] = ln.split("{")[0].split(" ")[0] + data.draw(
                st.sampled_from([" 1", " 2 17", "{} 3", " ", "{ 1"])
            )
        elif op == "brace" and '="' in ln:
            lines[i] = ln.replace('="', data.draw(st.sampled_from(['="}', '="{', '="a} 1 ', '=""'])), 1)
        elif op == "blank":
            lines.insert(i, data.draw(st.sampled_from(["", " ", "\t", "  "])))
        elif op == "spaces" and sample:
            lines[i] = ln.replace(" ", data.draw(st.sampled_from(["  ", "\t", " \t"])), 1)
        elif op == "tab" and sample:
            lines[i] = ln.replace("}", "}\t", 1)
        elif op == "trail" and sample:
            lines[i] = ln + data.draw(st.sampled_from([" ", "\t", " }", "_"]))
        elif op == "unit":
            lines.insert(i, "# UNIT " + ln.split(" ")[-1][:8] + " seconds")
        elif op == "eof":
            lines.insert(i, "# EOF")
        elif op == "value" and sample:
            lines[i] = (
                ln.rsplit(" ", 1)[0]
                + " "
                + data.draw(st.sampled_from(["1_0", "x", "+Inf", "NaN", "-0", "0x1"]))
            )
        elif op == "type":
            lines.insert(
                i,
                "# TYPE "
                + data.draw(st.sampled_from(["go_goroutines", "up", "x"]))
                + " "
                + data.draw(st.sampled_from(["counter", "gauge", "bogus", "untyped", ""])),
            )
        elif op == "help":
            lines.insert(
                i, "# HELP up " + data.draw(st.sampled_from(["a\\\\b", "a\\nb", "a\\tb", "", "x y"]))
            )
        elif op == "empty" and sample:
            lines[i] = ln.split("{")[0] + "{}" + " 1"
        elif op == "indent":
            lines[i] = " " + ln
    text = "\n".join(lines) + data.draw(st.sampled_from(["\n", ""]))
    whole = _view(_parse(text))
    assert whole == _view(_careful(monkeypatch, text))
    with monkeypatch.context() as m:
        m.setattr(prom_fast, "BLOCK", data.draw(st.integers(50, 2000)))
        m.setattr(prom_fast, "REMEMBER_ABOVE", data.draw(st.sampled_from([0, prom_fast.REMEMBER_ABOVE])))
        m.setattr(prom_fast, "CACHE", data.draw(st.sampled_from([5, prom_fast.CACHE])))
        assert _view(_parse(text + text)) == _view(_careful(monkeypatch, text + text))


def test_a_unit_line_anywhere_makes_it_openmetrics() -> None:
    ms = parse_prom_text("# HELP a x\na 1\n# UNIT a seconds\na 2 1700000000\n")
    assert ms.openmetrics
    assert [s.timestamp for s in ms.samples] == [None, 1700000000.0]  # seconds, not milliseconds
    assert any("EOF" in w for w in ms.warnings)


def test_plain_file_with_timestamps_reads_milliseconds() -> None:
    ms = parse_prom_text('a{x="1"} 1 1700000000123\nb 2\nc 3 1700000000000\nd{y="}"} 4\n')
    assert [(s.name, s.value, s.timestamp) for s in ms.samples] == [
        ("a", 1.0, 1700000000.123),
        ("b", 2.0, None),
        ("c", 3.0, 1700000000.0),
        ("d", 4.0, None),
    ]
    assert ms.samples[-1].labels == (("y", "}"),)


@given(st.text(alphabet='abAZ_:09.-{}" é', max_size=8))
def test_good_name_is_the_name_pattern(s: str) -> None:
    assert prom_fast.good_name(s) == bool(re.fullmatch(NAME, s))
    assert prom_fast.good_label_name(s) == bool(re.fullmatch(LNAME, s))


@given(st.text(alphabet='ab\\n\n"x', max_size=12))
def test_unescape_help_is_the_help_pattern(s: str) -> None:
    want = re.sub(r"\\([\\n])", lambda m: "\\" if m.group(1) == "\\" else "\n", s)
    assert prom_fast.unescape_help(s) == want


@given(
    st.builds(
        "".join,
        st.lists(
            st.sampled_from(["#", " ", "HELP", "TYPE", "UNIT", "a", "b_c", ":", "9", "\t", "x y", "-"]),
            max_size=7,
        ),
    )
)
def test_meta_of_is_the_meta_pattern(c: str) -> None:
    m = re.fullmatch(rf"# (HELP|TYPE) ({NAME})(?: ([^\n]*))?", c)
    want = None if m is None else (m.group(1), m.group(2), m.group(3) or "")
    assert prom_fast.meta_of(c) == want


def test_prom_sample_keeps_the_named_tuple_api() -> None:
    s = PromSample("up", (("job", "a"),), 1.0, None)
    assert s == ("up", (("job", "a"),), 1.0, None) and isinstance(s, tuple)
    assert (s.name, s.labels, s.value, s.timestamp) == tuple(s)
    assert repr(s) == "PromSample(name='up', labels=(('job', 'a'),), value=1.0, timestamp=None)"
    assert s._replace(value=2.0) == PromSample("up", (("job", "a"),), 2.0, None)
    assert s._asdict() == {"name": "up", "labels": (("job", "a"),), "value": 1.0, "timestamp": None}
    assert PromSample._make(["a", (), 0.0, 1.5]).timestamp == 1.5
    assert PromSample._fields == ("name", "labels", "value", "timestamp")
    back = pickle.loads(pickle.dumps(s))
    assert back == s and type(back) is PromSample
    with pytest.raises(TypeError):
        PromSample._make(["a", ()])
    with pytest.raises(ValueError):
        s._replace(nope=1)


def test_careful_module_compiles_the_line_pattern() -> None:
    assert prom_careful._LINE_RE.flags & re.MULTILINE
