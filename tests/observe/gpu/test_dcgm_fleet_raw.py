"""collect_fleet reads a PromClient's answers as bytes (``query_raw``) through the msgspec decoder,
and a client with only ``query`` (Series) the old way; both build the same GPUs. The answers are
SYNTHETIC (two dcgm-exporter-shaped GPUs, one with an Xid), written here."""

from __future__ import annotations

import json

from clusterdoctor.model import Series
from clusterdoctor.observe.gpu.dcgm_fleet import collect_fleet

END = 1_700_000_000.0
GPUS = [
    {"Hostname": "node-a", "gpu": "0", "UUID": "GPU-a0", "modelName": "NVIDIA H100 80GB HBM3"},
    {"Hostname": "node-a", "gpu": "1", "UUID": "GPU-a1", "modelName": "NVIDIA H100 80GB HBM3"},
]


def _answer(expr: str) -> list[tuple[dict[str, str], float]]:
    if expr.startswith("count by"):
        return [({"__name__": "DCGM_FI_DEV_XID_ERRORS", "Hostname": "node-a"}, 2.0)]
    if expr == "DCGM_FI_DEV_XID_ERRORS != 0":
        return [({**GPUS[1], "__name__": "DCGM_FI_DEV_XID_ERRORS"}, 79.0)]
    if expr.startswith("max by") and "DCGM_FI_DEV_GPU_UTIL" in expr:
        return [(dict(g), 97.0) for g in GPUS]
    return []


class SeriesClient:
    url = "http://prom.test:9090"

    def server_time(self) -> float:
        return END

    def query(self, expr: str, at: float | None = None) -> list[Series]:
        out = []
        for labels, v in _answer(expr):
            lab = dict(labels)
            name = lab.pop("__name__", "")
            out.append(Series(name, lab, [(END, v)]))
        return out


class RawClient(SeriesClient):
    def __init__(self, bad: str = "") -> None:
        self.bad = bad
        self.raw_calls = 0

    def query(self, expr: str, at: float | None = None) -> list[Series]:
        if expr.startswith("count by"):
            return super().query(expr, at)
        raise AssertionError("the fleet queries go through query_raw")

    def query_raw(self, expr: str, at: float | None = None) -> bytes:
        self.raw_calls += 1
        if expr == self.bad:
            return b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": 3}]}}'
        result = [{"metric": m, "value": [END, f"{v:g}"]} for m, v in _answer(expr)]
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


def _xid(res) -> dict[str, object]:
    return {g.uuid: g.xid_last for r in res.reports for g in r.gpus}


def test_raw_answers_build_the_same_gpus_as_series() -> None:
    raw = RawClient()
    a = collect_fleet(raw.url, 600.0, client=raw)
    b = collect_fleet(raw.url, 600.0, client=SeriesClient())
    assert raw.raw_calls == len(a.queries) > 10
    assert a.queries == b.queries
    assert _xid(a) == _xid(b) == {"GPU-a0": 0, "GPU-a1": 79}
    assert [g.model for r in a.reports for g in r.gpus] == ["NVIDIA H100 80GB HBM3"] * 2
    assert not a.errors


def test_a_malformed_raw_answer_is_one_error_naming_the_query() -> None:
    raw = RawClient(bad="DCGM_FI_DEV_XID_ERRORS != 0")
    res = collect_fleet(raw.url, 600.0, client=raw)
    assert len(res.errors) == 1
    assert "DCGM_FI_DEV_XID_ERRORS != 0" in res.errors[0]
    assert "not a Prometheus instant-query answer" in res.errors[0]
    assert "GPU001" not in [r for r, _, _ in res.queries]
