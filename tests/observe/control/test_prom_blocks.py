"""Prometheus text read block by block (issue 26): the same samples and families as in one piece,
on real dumps concatenated (a family repeats, with its HELP and TYPE), whatever the block size."""

from __future__ import annotations

import pytest

from clusterdoctor.observe.control import prom_fast, prom_text
from clusterdoctor.testing import comparable_samples, fixture_path, prom_client_samples

DUMPS = ("ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom", "ctrl/etcd_v3.6.6_minikube_metrics.prom")


def _text() -> str:
    paths = [fixture_path(d) for d in DUMPS]
    if any(p is None for p in paths):
        pytest.skip("shared Prometheus dumps absent (set CLUSTERDOCTOR_FIXTURES)")
    return "".join(p.read_text() for p in paths) * 2  # type: ignore[union-attr]


@pytest.mark.parametrize("block", [1 << 10, 50_000, 1 << 30])
def test_blocks_read_as_one_piece(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    text = _text()
    whole = prom_text.parse_prom_text(text)
    monkeypatch.setattr(prom_fast, "BLOCK", block)
    got = prom_text.parse_prom_text(text)
    assert got.samples == whole.samples
    assert got.families == whole.families
    assert list(got.warnings) == list(whole.warnings) == []
    assert comparable_samples(got) == prom_client_samples(text)


def test_a_conflicting_type_in_a_later_block_goes_to_the_careful_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prom_fast, "BLOCK", 40)
    text = "# TYPE a counter\na_total 1\n" + "x 1\n" * 20 + "# TYPE a gauge\na 2\n"
    ms = prom_text.parse_prom_text(text)
    assert any("second TYPE for a" in w for w in ms.warnings)
    assert [s.value for s in ms.samples if s.name.startswith("a")] == [1.0, 2.0]


def test_dumps_with_and_without_timestamps_put_together() -> None:
    fed = fixture_path("ctrl/etcd_v3.6.6_minikube_metrics.prom")
    if fed is None:
        pytest.skip("shared Prometheus dumps absent (set CLUSTERDOCTOR_FIXTURES)")
    text = fed.read_text() + 'up{job="a"} 1 1700000000123\nup{job="b"} 0\n'
    ms = prom_text.parse_prom_text(text)
    assert comparable_samples(ms) == prom_client_samples(text)
    assert [s.timestamp for s in ms.samples[-2:]] == [1700000000.123, None]
