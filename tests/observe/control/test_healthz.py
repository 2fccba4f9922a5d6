"""Verbose health answers (/livez, /readyz, /healthz ?verbose): the real RKE2 etcd paste of control
ok-ctrl-602 (rancher/rke2#11103) is read and quiet; a failing answer (constructed here in the format
k8s.io/apiserver/pkg/server/healthz prints, not a real paste) is judged by CP005."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.healthz import parse_healthz, sniff_healthz

DATA = Path(__file__).resolve().parents[2] / "data" / "incidents"

FAILING = """\
$ kubectl get --raw='/readyz?verbose'
[+]ping ok
[+]log ok
[-]etcd failed: reason withheld
[+]etcd-readiness ok
[+]poststarthook/start-apiextensions-informers ok
readyz check failed
"""


def _diagnose(path: Path):
    from clusterdoctor import diagnosis

    obs = diagnosis.new_observations(clock=lambda: 1_780_000_000.0)
    return diagnosis.run(obs, diagnosis.load_sources(obs, [path]))


def test_rke2_etcd_livez_readyz_paste_is_read_and_quiet() -> None:
    path = DATA / "ok-ctrl-602" / "paste.txt"
    text = path.read_text()
    assert sniff_healthz(text.encode())
    checks, other = parse_healthz(text, str(path))
    assert [c.name for c in checks] == [
        "serializable_read",
        "data_corruption",
        "serializable_read",
        "linearizable_read",
        "non_learner",
    ]
    assert all(c.ok and c.component == "etcd" for c in checks)
    assert [c.endpoint for c in checks] == ["livez"] + ["readyz"] * 4
    assert [c.line for c in checks] == [2, 5, 6, 7, 8]  # the paste's own numbering, prompts included
    assert other  # the grep of the pod manifest is counted, not read
    d = _diagnose(path)
    assert not [f for f in d.findings if f.severity.name in ("CRITICAL", "WARNING")]


def test_failed_apiserver_check_names_etcd_behind_it(tmp_path: Path) -> None:
    p = tmp_path / "readyz.txt"
    p.write_text(FAILING)
    top = _diagnose(p).findings[0]
    assert top.rule == "CP005" and top.subject == "kube-apiserver etcd"
    assert "apiserver.etcd-backend" in top.causes
    assert "/readyz" in top.summary and top.evidence[0].source.endswith("readyz.txt")
    assert "line 4" in top.evidence[0].description  # numbered as pasted, prompt line 1


def test_one_check_line_without_its_last_line_is_not_an_answer() -> None:
    assert not sniff_healthz(b"[+]ping ok\nsomething else\n")
    assert sniff_healthz(b"[-]etcd failed: reason withheld\nhealthz check failed\n")
    with pytest.raises(InputError):
        parse_healthz("ok\nhealthz check failed\n", "p")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("[]+-okfaild :/etcdhzrvy\n#>"), max_size=300))
def test_parser_never_fails_but_with_an_input_error(text: str) -> None:
    try:
        checks, other = parse_healthz(text, "p")
    except InputError:
        return
    assert checks and all(c.ok in (True, False) for c in checks)
    assert all(1 <= n <= text.count("\n") + 1 for n in other)
