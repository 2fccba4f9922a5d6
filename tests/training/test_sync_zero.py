"""clusterdoctor.training.sync.zero.ShardedOptimizer on real gloo ranks, and its shard layout."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clusterdoctor.training.sync.zero import ALIGN_ELEMENTS, shard_layout  # noqa: E402

pytestmark = pytest.mark.torch

if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    from tests.training import sync_cases

    res = sync_cases.run(2, ["zero"], str(tmp_path_factory.mktemp("zero")))
    for r in res:
        assert "exception" not in r["zero"], r["zero"].get("exception")
    return [r["zero"] for r in res]


def _max_diff(a, b) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def test_sharded_step_equals_plain_ddp(ranks):
    for r in ranks:
        assert _max_diff(r["zero"], r["plain"]) < 1e-5
    assert _max_diff(ranks[0]["zero"], ranks[1]["zero"]) == 0.0  # every rank holds the same parameters


def test_each_rank_holds_only_its_shard_of_optimizer_state(ranks):
    st0 = ranks[0]["zero.stats"]
    assert ranks[0]["momentum_numel"] == st0["shard_numel"] < st0["numel"]
    assert st0["shard_numel"] * 2 == st0["padded_numel"]
    assert st0["optimizer_state_share"] == pytest.approx(0.5)


def test_bytes_in_own_precision_equal_an_allreduce_and_a_bf16_gather_sends_fewer(ranks):
    st0, bf = ranks[0]["zero.stats"], ranks[0]["bf16.stats"]
    steps = st0["steps"]
    allreduce = 2 * (2 - 1) / 2 * st0["padded_numel"] * 4 * steps  # ring all-reduce of the same buffer
    assert st0["bytes_sent"] == pytest.approx(allreduce)
    assert st0["collectives"] == 2 * steps  # one reduce-scatter and one all-gather per step
    assert bf["bytes_sent"] == pytest.approx(0.75 * allreduce)  # fp32 RS + bf16 AG
    for r in ranks:  # bf16-rounded parameters of the other shard: close, not equal
        assert 0 < _max_diff(r["bf16"], r["plain"]) < 1e-2


def test_state_dict_round_trip_resumes_the_same_trajectory(ranks):
    for r in ranks:
        assert _max_diff(r["resumed"], r["zero"]) < 1e-6
        assert "shard layout differs" in r["layout_refused"]


@given(
    numel=st.integers(0, 10**7), world=st.integers(1, 512), align=st.sampled_from([1, 8, ALIGN_ELEMENTS, 128])
)
def test_shard_layout_is_equal_aligned_and_tight(numel, world, align):
    padded, shard = shard_layout(numel, world, align)
    assert padded == shard * world >= numel
    assert shard % align == 0
    assert padded - numel < world * align + world  # never more than one alignment step per shard


def test_shard_layout_refuses_nonsense():
    with pytest.raises(ValueError):
        shard_layout(10, 0)
