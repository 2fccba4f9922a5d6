"""clusterdoctor.training.sync on real gloo process groups (2 and 4 ranks on 127.0.0.1).

The multi-rank runs happen once per module (see tests/training/sync_cases.py); each test asserts
one property of what the ranks observed. Pure parts (codecs, cost model, stats) are tested here
directly, with hypothesis for the numeric code.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clusterdoctor.training.sync import SyncConfig, SyncStats  # noqa: E402
from clusterdoctor.training.sync.adaptive import predict_cross_stage  # noqa: E402

pytestmark = pytest.mark.torch

if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    from tests.training import sync_cases

    out = tmp_path_factory.mktemp("sync2")
    return sync_cases.run(2, ["parity", "error_feedback", "state_dict", "refusals"], str(out))


@pytest.fixture(scope="module")
def mismatch(tmp_path_factory):
    from tests.training import sync_cases

    out = tmp_path_factory.mktemp("sync_mismatch")
    return sync_cases.run(2, ["mismatch"], str(out))


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    from tests.training import sync_cases

    out = tmp_path_factory.mktemp("sync4")
    return sync_cases.run(4, ["hierarchical", "parity"], str(out))


def result(ranks, case):
    for r in ranks:
        assert "exception" not in r[case], r[case].get("exception")
    return [r[case] for r in ranks]


def max_diff(a, b) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def residual_in_param_space(states, numels, shard_elements, world):
    """Sum over ranks of the error-feedback residuals, mapped from (bucket, shard) to parameter order.

    Worker residuals (``.w``) cover a whole shard; a chunk owner's residual (``.s``) covers rank r's
    ``ceil(n/world)`` slice of the shard. Bucket layouts come from the saved state.
    """
    offsets = [0]
    for n in numels:
        offsets.append(offsets[-1] + n)
    acc = torch.zeros(offsets[-1])
    for rank, state in enumerate(states):
        for b, pids in state["layouts"].items():
            length = sum(numels[p] for p in pids)
            flat = torch.zeros(length)
            for s in range(math.ceil(length / shard_elements)):
                lo = s * shard_elements
                n = min(shard_elements, length - lo)
                w = state["residuals"].get(f"b{b}.s{s}.w")
                if w is not None:
                    flat[lo : lo + n] += w
                srv = state["residuals"].get(f"b{b}.s{s}.s")
                if srv is not None:
                    c2 = math.ceil(n / world)
                    a, e = rank * c2, min((rank + 1) * c2, n)
                    if e > a:
                        flat[lo + a : lo + e] += srv[: e - a]
            pos = 0
            for p in pids:
                acc[offsets[p] : offsets[p + 1]] += flat[pos : pos + numels[p]]
                pos += numels[p]
    return acc


# -- equality with plain DDP -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["allreduce", "sharded", "adaptive_single_node"])
def test_uncompressed_hooks_equal_plain_ddp_two_ranks(two_ranks, name):
    res = result(two_ranks, "parity")
    for r in res:
        assert max_diff(r[name], r["plain"]) <= 1e-6
        assert r[name + ".stats"]["steps"] == 4
        assert r[name + ".stats"]["compression_ratio"] == pytest.approx(1.0)


def test_uncompressed_hooks_equal_plain_ddp_four_ranks(four_ranks):
    for r in result(four_ranks, "parity"):
        for name in ("allreduce", "sharded", "adaptive_single_node"):
            assert max_diff(r[name], r["plain"]) <= 1e-6, name


def test_single_node_adaptive_says_it_ran_flat(two_ranks):
    st_ = result(two_ranks, "parity")[0]["adaptive_single_node.stats"]
    assert "one node" in st_["node_grouping"]
    assert st_["bytes_by_link"].get("inter", 0) == 0


@pytest.mark.parametrize("name,tol", [("fp16", 1e-3), ("int8", 2e-3)])
def test_compressed_hooks_stay_close_to_plain_ddp(two_ranks, name, tol):
    for r in result(two_ranks, "parity"):
        diff = max_diff(r[name], r["plain"])
        assert 0 < diff <= tol  # compressed: not bit-equal, but close after 4 steps
        stats = r[name + ".stats"]
        assert stats["compressed_steps"] == 3 and stats["bytes_sent"] < stats["bytes_uncompressed"]


def test_ranks_agree_on_parameters(two_ranks):
    a, b = result(two_ranks, "parity")
    for name in ("allreduce", "sharded", "fp16", "int8"):
        assert max_diff(a[name], b[name]) == 0.0, name


# -- error feedback ----------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme,rtol", [("int8", 1e-5), ("topk", 1e-5)])
def test_error_feedback_invariant_sent_plus_residual_is_original(two_ranks, scheme, rtol):
    """Over 5 steps: sum of delivered gradients + all residuals == sum of true mean gradients.

    int8 and top-k do their arithmetic in fp32, so this holds to rounding. (fp16 is left out: its
    all-reduce sums in fp16 on the wire, an error as large as the residual and outside feedback.)
    """
    res = [r[scheme] for r in result(two_ranks, "error_feedback")]
    residual = residual_in_param_space(
        [r["state"] for r in res], res[0]["numels"], SyncConfig("int8", shard_elements=700).shard_elements, 2
    )
    for r in res:
        gap = r["out"] + residual - r["true"]
        scale = float(r["true"].abs().max())
        assert float(gap.abs().max()) <= rtol * scale
        # not vacuous: dropping the residuals breaks it
        assert float((r["out"] - r["true"]).abs().max()) > 10 * rtol * scale


def test_error_feedback_stats_and_prometheus(two_ranks):
    from prometheus_client.parser import text_string_to_metric_families

    for r in result(two_ranks, "error_feedback"):
        i8 = r["int8"]["stats"]
        assert i8["steps"] == 5 and i8["compressed_steps"] == 4
        assert i8["error_norm"] > 0 and 0 < i8["relative_error"] < 0.05
        assert i8["compress_seconds"] > 0
        assert i8["bytes_by_link"]["world"] == pytest.approx(i8["bytes_sent"])
        tk = r["topk"]["stats"]
        assert tk["compression_ratio"] > r["int8"]["stats"]["compression_ratio"]
        fams = {f.name: f for f in text_string_to_metric_families(r["int8"]["prometheus"])}
        assert {
            "clusterdoctor_sync_steps",
            "clusterdoctor_sync_bytes_sent",
            "clusterdoctor_sync_compression_ratio",
        } <= set(fams)
        sent = sum(
            s.value for s in fams["clusterdoctor_sync_bytes_sent"].samples if s.name.endswith("_total")
        )
        assert sent == pytest.approx(i8["bytes_sent"])


@pytest.mark.parametrize("scheme", ["int8", "fp16", "topk"])
def test_staging_buffers_are_reused(two_ranks, scheme):
    for r in result(two_ranks, "error_feedback"):
        st_ = r[scheme]["stats"]
        assert st_["staging_allocations"] > 0
        assert st_["staging_allocations"] == r[scheme]["allocs_after_2"]  # steps 3-5 allocated nothing


# -- state_dict ----------------------------------------------------------------------------------------
def test_state_dict_round_trips_through_torch_save(two_ranks):
    for r in result(two_ranks, "state_dict"):
        saved, reloaded = r["int8"]["saved"], r["int8"]["reloaded"]
        assert saved["step"] == reloaded["step"] == 3
        assert saved["layouts"] == reloaded["layouts"] and saved["residuals"]
        assert saved["residuals"].keys() == reloaded["residuals"].keys()
        for k, v in saved["residuals"].items():
            assert torch.equal(v, reloaded["residuals"][k])


def test_restored_residuals_carry_error_feedback_across_a_restart(two_ranks):
    """3 steps, checkpoint, new DDP + hook, 3 steps: the EF invariant holds over all 6 steps only if
    the restored residuals were used; a hook started without them breaks it."""
    res = [r["int8"] for r in result(two_ranks, "state_dict")]
    numels = res[0]["numels"]
    resumed = residual_in_param_space([r["resumed"]["state"] for r in res], numels, 700, 2)
    fresh = residual_in_param_space([r["fresh"]["state"] for r in res], numels, 700, 2)
    for r in res:
        scale = float(r["resumed"]["true"].abs().max())
        assert float((r["resumed"]["out"] + resumed - r["resumed"]["true"]).abs().max()) <= 1e-5 * scale
        assert float((r["fresh"]["out"] + fresh - r["fresh"]["true"]).abs().max()) > 1e-4 * scale
        assert r["resumed"]["stats"]["compressed_steps"] == 3  # no new warm-up after the restore


def test_powersgd_state_round_trips(two_ranks):
    for r in result(two_ranks, "state_dict"):
        p = r["powersgd"]
        assert p["saved_iter"] == 3 and p["resumed_iter"] == 5
        assert p["saved_errors"]  # error feedback was active before the checkpoint
        # the first resumed step runs on DDP's initial bucket layout, which PowerSGD's per-bucket
        # memories do not fit: synced uncompressed, then compressing again
        assert p["resumed_stats"]["compressed_steps"] >= 1
        assert p["a_stats"]["compression_ratio"] > 1.0


# -- refusals and mismatches -------------------------------------------------------------------------
def test_mismatched_configurations_fail_at_first_step(mismatch):
    for r in result(mismatch, "mismatch"):
        msg = r["error"]
        assert msg is not None
        assert "different sync configurations" in msg and "rank 0='int8'" in msg and "rank 1='fp16'" in msg
        assert "same arguments on every rank" in msg


@pytest.mark.parametrize("kind", ["fsdp1", "fsdp2"])
def test_fsdp_is_refused_with_what_to_use_instead(two_ranks, kind):
    for r in result(two_ranks, "refusals"):
        msg = r[kind]
        assert msg is not None and "FSDP" in msg
        assert "MixedPrecisionPolicy(reduce_dtype" in msg and "DistributedDataParallel" in msg


def test_plain_module_is_refused(two_ranks):
    for r in result(two_ranks, "refusals"):
        assert "needs a torch.nn.parallel.DistributedDataParallel" in r["plain_module"]


# -- hierarchy and adaptivity (4 ranks = 2 emulated nodes of 2) ---------------------------------------
def test_hierarchical_without_compression_equals_flat_allreduce(four_ranks):
    for r in result(four_ranks, "hierarchical"):
        assert max_diff(r["hier"], r["plain"]) <= 1e-6
        st_ = r["hier.stats"]
        assert st_["node_grouping"].startswith("emulated: 2 nodes of 2 ranks")
        assert st_["bytes_by_link"]["intra"] > 0 and st_["bytes_by_link"]["inter"] > 0
        assert st_["compression_ratio"] == pytest.approx(1.0)


def test_adaptive_compresses_only_across_a_slow_link(four_ranks):
    for r in result(four_ranks, "hierarchical"):
        slow, fast = r["adaptive_slow.stats"], r["adaptive_fast.stats"]
        assert slow["link_bandwidth"]["inter"]["source"] == "given (simulated)"
        assert slow["decisions"] and all(d["compress"] for d in slow["decisions"].values())
        assert fast["decisions"] and not any(d["compress"] for d in fast["decisions"].values())
        # intra-node traffic is never compressed; across nodes int8 cuts it about 4x
        assert slow["bytes_by_link"]["intra"] == fast["bytes_by_link"]["intra"]
        assert slow["bytes_by_link"]["inter"] < fast["bytes_by_link"]["inter"]
        assert max_diff(r["adaptive_fast"], r["plain"]) <= 1e-6
        assert 0 < max_diff(r["adaptive_slow"], r["plain"]) <= 2e-3


def test_adaptive_decisions_follow_the_measurement(four_ranks):
    for r in result(four_ranks, "hierarchical"):
        st_ = r["adaptive_measured.stats"]
        assert st_["link_bandwidth"]["inter"]["source"] == "measured"
        for d in st_["decisions"].values():
            assert d["compress"] == (d["compressed_seconds"] < 0.9 * d["plain_seconds"])


def test_int8_sends_about_4x_fewer_bytes_at_four_ranks(four_ranks):
    for r in result(four_ranks, "hierarchical"):
        st_ = r["int8.stats"]
        # step 0 is warm-up; the last step is compressed. Uncompressed bytes are the same every step.
        per_step_fp32 = st_["bytes_uncompressed"] / st_["steps"]
        last = st_["last_step_bytes_by_link"]["world"]
        assert 3.5 <= per_step_fp32 / last <= 4.0
        assert 0 < max_diff(r["int8"], r["plain"]) <= 2e-3


# -- pure parts -----------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 4),
    cols=st.integers(1, 300),
    scale=st.floats(1e-6, 1e6),
    seed=st.integers(0, 2**31 - 1),
)
def test_int8_quantization_error_is_bounded_by_half_a_step(rows, cols, scale, seed):
    from clusterdoctor.training.sync import codecs

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g) * scale
    payload = torch.empty(rows, cols + 4, dtype=torch.int8)
    dec = torch.empty(rows, cols)
    codecs.quantize_rows(x, payload, dec)
    step = x.abs().amax(dim=1, keepdim=True) / 127
    assert bool(((x - dec).abs() <= step / 2 * (1 + 1e-5) + 1e-30).all())
    again = torch.empty(rows, cols)
    codecs.dequantize_rows(payload, again)
    assert torch.equal(again, dec)  # receivers reconstruct exactly what the sender accounted for


@settings(max_examples=60, deadline=None)
@given(length=st.integers(1, 1 << 20), data=st.data())
def test_topk_packing_round_trips(length, data):
    from clusterdoctor.training.sync import codecs

    k = data.draw(st.integers(1, min(length, 64)))
    idx = torch.tensor(
        data.draw(st.lists(st.integers(0, length - 1), min_size=k, max_size=k)), dtype=torch.int64
    )
    vals = torch.tensor(
        data.draw(
            st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=k, max_size=k)
        )
    )
    payload = torch.empty(codecs.topk_payload_bytes(length, k), dtype=torch.int8)
    codecs.pack_topk(vals, idx, length, payload)
    v2, i2 = codecs.unpack_topk(payload, length, k)
    assert torch.equal(v2, vals) and torch.equal(i2, idx)
    assert payload.numel() <= k * (4 + 3) + 3 if length <= 1 << 24 else True


@settings(max_examples=100, deadline=None)
@given(
    elements=st.integers(1, 1 << 26),
    group=st.integers(1, 64),
    bw=st.floats(1e3, 1e12),
    cost=st.floats(0, 1e-6),
    codec=st.sampled_from(["int8", "fp16", "bf16"]),
)
def test_adaptive_never_compresses_when_predicted_slower(elements, group, bw, cost, codec):
    d = predict_cross_stage(
        elements=elements, group_size=group, bytes_per_second=bw, codec=codec, codec_seconds_per_element=cost
    )
    if d["compress"]:
        assert d["compressed_seconds"] < d["plain_seconds"]
        assert group > 1
    # a codec that costs nothing always pays on a real link with peers
    free = predict_cross_stage(
        elements=max(elements, 1024),
        group_size=max(group, 2),
        bytes_per_second=bw,
        codec=codec,
        codec_seconds_per_element=0.0,
    )
    assert free["compress"]
    # and an infinitely fast link never compresses
    inf = predict_cross_stage(
        elements=elements,
        group_size=group,
        bytes_per_second=math.inf,
        codec=codec,
        codec_seconds_per_element=cost,
    )
    assert not inf["compress"]


def test_config_validation_and_digest():
    with pytest.raises(ValueError, match="unknown sync scheme"):
        SyncConfig("gzip")
    with pytest.raises(ValueError, match="cannot be hierarchical"):
        SyncConfig("powersgd", hierarchical=True)
    with pytest.raises(ValueError, match="shard_elements"):
        SyncConfig("sharded", shard_elements=0)
    assert SyncConfig("int8").digest() == SyncConfig("int8").digest()
    assert SyncConfig("int8").digest() != SyncConfig("int8", warmup_steps=3).digest()
    assert (
        SyncConfig("int8").compress_start_step == 10
        and SyncConfig("int8", warmup_steps=0).compress_start_step == 1
    )
    assert SyncConfig("powersgd", warmup_steps=0).compress_start_step == 2


def test_stats_accounting_is_consistent():
    s = SyncStats(scheme="int8", world_size=2)
    s.add_bytes("world", 100.0, 400.0)
    s.add_error(9.0, 100.0)
    s.end_step(True)
    d = s.as_dict()
    assert d["steps"] == 1 and d["compression_ratio"] == 4.0 and d["error_norm"] == 3.0
    assert d["relative_error"] == pytest.approx(0.3)
    assert d["bytes_per_step"] == 100.0 and d["last_step_bytes_by_link"] == {"world": 100.0}


def test_importing_sync_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys; from clusterdoctor.training import sync, numa_worker_init_fn; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
