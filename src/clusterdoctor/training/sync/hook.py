"""The DDP communication hook: sharding, compression with error feedback, hierarchy, accounting.

One :class:`SyncHook` is registered per DDP model. For each bucket DDP hands it, the hook

1. divides by the world size (as torch's ``allreduce_hook`` does, before summing),
2. cuts the bucket into shards of ``shard_elements`` and builds one small plan per shard
   (a generator that issues its collectives and yields their ``Work``),
3. runs the plans on a single sequencer thread: first collective of every shard, in shard order,
   then the second of every shard, and so on. Buckets run in the order DDP hands them over.
   Every rank therefore issues the same collectives in the same order, on a process group of its
   own (so DDP's or the user's collectives can never interleave with ours).

Compression (fp16/bf16 cast, int8 with a per-shard scale, top-k with packed indices) keeps an
error-feedback residual per (bucket, shard): the shard sent is ``compress(g + r)`` and the new
residual ``r = g + r - sent``. int8 is exchanged as a reduce-scatter (all-to-all of int8 chunks,
summed in fp32 by the chunk's owner, whose re-quantisation error has its own residual) followed by an
all-gather of int8, so it sends about 4x fewer bytes than fp32 at any group size.

Hierarchical sync: reduce-scatter inside a node uncompressed, all-reduce the node's chunk across
nodes (compressed or not), all-gather inside the node. ``adaptive`` decides per bucket from the
measured link bandwidth and the measured cost of the codec whether compressing the cross-node stage
pays; it never compresses when the model predicts it would be slower.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import time
import warnings
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
import torch.distributed as dist

from clusterdoctor.training.sync import codecs
from clusterdoctor.training.sync.adaptive import predict_cross_stage
from clusterdoctor.training.sync.config import SyncConfig
from clusterdoctor.training.sync.stats import SyncStats, allreduce_bytes, gather_bytes

log = logging.getLogger(__name__)

STATE_FORMAT = "clusterdoctor.sync/1"

Plan = Generator[Any, None, None]


# -- collectives (the non-deprecated names where this torch has them) -----------------------------
def _all_gather(out: torch.Tensor, inp: torch.Tensor, group: Any) -> Any:
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return fn(out, inp, group=group, async_op=True)


def _reduce_scatter(out: torch.Tensor, inp: torch.Tensor, group: Any) -> Any:
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return fn(out, inp, group=group, async_op=True)


class StagingPool:
    """Reusable buffers keyed by role; allocated once, reused every step (counted in the stats).

    CPU buffers are pinned when CUDA is available, so a copy to or from a GPU can be asynchronous.
    """

    def __init__(self, stats: SyncStats) -> None:
        self._buffers: dict[tuple[Any, ...], torch.Tensor] = {}
        self._stats = stats
        self._pin = torch.cuda.is_available()

    def get(
        self, key: tuple[Any, ...], shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        buf = self._buffers.get(key)
        if buf is None or buf.shape != torch.Size(shape) or buf.dtype != dtype or buf.device != device:
            pin = self._pin and device.type == "cpu"
            buf = torch.empty(shape, dtype=dtype, device=device, pin_memory=pin)
            self._buffers[key] = buf
            self._stats.staging_allocations += 1
            self._stats.staging_bytes = sum(b.numel() * b.element_size() for b in self._buffers.values())
        return buf


class SyncHook:
    """State of one installed hook. Registered with DDP through :func:`ddp_hook`."""

    def __init__(self, ddp_model: Any, config: SyncConfig, stats: SyncStats) -> None:
        self.cfg = config
        self.stats = stats
        self.ddp_pg = ddp_model.process_group
        self.world = dist.get_world_size(self.ddp_pg)
        self.rank = dist.get_rank(self.ddp_pg)
        if config.ranks_per_node is not None and self.world % config.ranks_per_node:
            raise ValueError(
                f"ranks_per_node={config.ranks_per_node} does not divide the world size {self.world}"
            )
        self.step = 0  # global step (restored from a checkpoint)
        self.local_iter = 0  # iterations of this DDP instance (its buckets are rebuilt after the first)
        self.param_index = {id(p): i for i, p in enumerate(ddp_model.module.parameters())}
        # bucket index -> indices of the parameters its residuals follow
        self.layouts: dict[int, tuple[int, ...]] = {}
        self.initialized = False
        self.pg: Any = None
        self.intra_pg: Any = None
        self.cross_pg: Any = None
        self.intra_size = 1
        self.cross_size = self.world
        self.hierarchy = False
        self.residuals: dict[str, torch.Tensor] = {}
        self.pool = StagingPool(stats)
        self.executor: ThreadPoolExecutor | None = None
        self.powersgd_state: Any = None
        self._pending_powersgd: dict[str, Any] | None = None
        self._probe: dict[str, float] = {}
        self._err_terms: list[tuple[torch.Tensor, torch.Tensor]] = []  # this step's (|error|^2, |sent|^2)

    # -- DDP entry point ------------------------------------------------------------------------
    def __call__(self, bucket: Any) -> torch.futures.Future:
        if not self.initialized:
            self._first_call(bucket.buffer())
        step = self.step
        last = bucket.is_last()
        layout_ok = self._layout_ok(bucket)
        if last:
            self.step += 1
            self.local_iter += 1
        fut: torch.futures.Future = torch.futures.Future()
        assert self.executor is not None
        if self.cfg.scheme == "powersgd":
            self.executor.submit(_guarded, fut, self._run_powersgd, fut, bucket, last, layout_ok)
        else:
            args = (fut, bucket.buffer(), bucket.index(), step, last, layout_ok)
            self.executor.submit(_guarded, fut, self._run_bucket, *args)
        return fut

    def _layout_ok(self, bucket: Any) -> bool:
        """May this bucket use (and update) error-feedback residuals keyed by its index?

        DDP rebuilds its buckets after an instance's first iteration (and a restored checkpoint may
        come from another layout), so residuals are tagged with the parameters of their bucket. A
        bucket whose parameters differ from its residuals' is synced uncompressed (residuals kept);
        a bucket without residuals waits for the rebuilt layout. Equal on all ranks (DDP syncs
        bucket assignment from rank 0), so every rank decides the same.
        """
        # PowerSGD keys its error and warm-start memories by bucket index too
        if self.cfg.scheme != "powersgd" and (not self.cfg.error_feedback or self.cfg.codec is None):
            return True
        sig = tuple(self.param_index.get(id(p), -1) for p in bucket.parameters())
        known = self.layouts.get(bucket.index())
        if known is not None:
            if known != sig:
                self.stats.layout_mismatches += 1
            return known == sig
        if self.local_iter == 0:
            return False
        self.layouts[bucket.index()] = sig
        return True

    # -- first step: agree on the configuration, build groups, probe links ---------------------
    def _first_call(self, buffer: torch.Tensor) -> None:
        self._check_config(buffer.device)
        if self.world == dist.get_world_size():
            backend = dist.get_backend(self.ddp_pg)
            self.pg = dist.new_group(backend=backend)
        else:  # DDP on a subgroup: other ranks will not run this hook, so no new global group
            self.pg = self.ddp_pg
            self.stats.notes.append("DDP runs on a subgroup: sync collectives share DDP's group")
        self.cross_pg = self.pg
        if self.cfg.uses_hierarchy:
            self._build_hierarchy()
        if self.cfg.scheme == "adaptive" and self.hierarchy:
            self._measure_links(buffer.device)
        if self.cfg.scheme == "powersgd":
            self._make_powersgd()
            self.stats.notes.append(
                "powersgd: error_norm not reported (torch's residual mixes rank differences with "
                "compression error); compress_seconds includes its P/Q all-reduces"
            )
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clusterdoctor-sync")
        self.initialized = True

    def _check_config(self, device: torch.device) -> None:
        mine = self.cfg.digest()
        t = torch.tensor([mine], dtype=torch.int64, device=device)
        out = [torch.zeros_like(t) for _ in range(self.world)]
        dist.all_gather(out, t, group=self.ddp_pg)
        digests = [int(x.item()) for x in out]
        if len(set(digests)) == 1:
            return
        configs: list[Any] = [None] * self.world
        dist.all_gather_object(configs, self.cfg.as_dict(), group=self.ddp_pg)
        keys = sorted({k for c in configs for k in c})
        differing = {
            k: [c.get(k) for c in configs] for k in keys if len({json.dumps(c.get(k)) for c in configs}) > 1
        }
        detail = "; ".join(
            f"{k}: " + ", ".join(f"rank {r}={v!r}" for r, v in enumerate(vals))
            for k, vals in differing.items()
        )
        raise RuntimeError(
            "clusterdoctor sync: ranks were given different sync configurations, so their collectives "
            f"would not match ({detail}). Call sync.install() with the same arguments on every rank."
        )

    def _build_hierarchy(self) -> None:
        rpn = self.cfg.ranks_per_node
        if self.pg is self.ddp_pg and self.world != dist.get_world_size():
            self.stats.notes.append("hierarchical sync needs DDP on the whole world; running flat")
            return
        if rpn is not None:
            nodes = [list(range(s, s + rpn)) for s in range(0, self.world, rpn)]
            how = f"emulated: {len(nodes)} nodes of {rpn} ranks on this machine (ranks_per_node={rpn})"
        else:
            hosts: list[Any] = [None] * self.world
            dist.all_gather_object(hosts, socket.gethostname(), group=self.ddp_pg)
            order: dict[str, list[int]] = {}
            for r, h in enumerate(hosts):
                order.setdefault(h, []).append(r)
            nodes = list(order.values())
            how = f"by hostname: {len(nodes)} node(s)"
        sizes = {len(n) for n in nodes}
        if len(nodes) < 2 or len(sizes) != 1:
            why = "one node" if len(nodes) < 2 else "nodes have different rank counts"
            self.stats.node_grouping = f"{how}; {why}, so sync runs flat (nothing to compress across)"
            self.stats.notes.append(self.stats.node_grouping)
            return
        m = sizes.pop()
        backend = dist.get_backend(self.ddp_pg)
        for members in nodes:  # every rank creates every group, in the same order
            g = dist.new_group(ranks=members, backend=backend)
            if self.rank in members:
                self.intra_pg = g
        for i in range(m):
            members = [n[i] for n in nodes]
            g = dist.new_group(ranks=members, backend=backend)
            if self.rank in members:
                self.cross_pg = g
        self.intra_size, self.cross_size, self.hierarchy = m, len(nodes), True
        self.stats.node_grouping = how

    def _measure_links(self, device: torch.device) -> None:
        """Time all-reduces on each link class and the codec on this rank; agree on the worst."""
        n = self.cfg.probe_elements
        probe = torch.ones(n, device=device)

        def timed_allreduce(group: Any, size: int) -> float:
            if size <= 1:
                return 0.0
            best = math.inf
            for i in range(4):
                _sync(device)
                t0 = time.perf_counter()
                dist.all_reduce(probe, group=group)
                _sync(device)
                if i:  # the first is a warm-up
                    best = min(best, time.perf_counter() - t0)
            return best

        t_intra = timed_allreduce(self.intra_pg, self.intra_size)
        t_inter = timed_allreduce(self.cross_pg, self.cross_size)
        gen = torch.Generator(device="cpu").manual_seed(0)
        x = torch.randn(n, generator=gen).to(device)
        best = math.inf
        for i in range(3):
            _sync(device)
            t0 = time.perf_counter()
            self._codec_roundtrip(x)
            _sync(device)
            if i:
                best = min(best, time.perf_counter() - t0)
        agreed = torch.tensor([t_intra, t_inter, best], dtype=torch.float64, device=device)
        dist.all_reduce(agreed, op=dist.ReduceOp.MAX, group=self.pg)
        t_intra, t_inter, best = (float(v) for v in agreed.tolist())
        for link, t, size in (("intra", t_intra, self.intra_size), ("inter", t_inter, self.cross_size)):
            given = self.cfg.link_bandwidth.get(link)
            if given is not None:
                self.stats.link_bandwidth[link] = {"bytes_per_second": given, "source": "given (simulated)"}
            elif t > 0:
                bw = allreduce_bytes(size, n * 4) / t
                self.stats.link_bandwidth[link] = {"bytes_per_second": bw, "source": "measured"}
        self._probe = {"codec_seconds_per_element": best / n}

    def _codec_roundtrip(self, x: torch.Tensor) -> None:
        codec = self.cfg.codec
        if codec == "int8":
            rows = x.view(1, -1)
            payload = torch.empty(1, x.numel() + codecs.SCALE_BYTES, dtype=torch.int8, device=x.device)
            dec = torch.empty_like(rows)
            codecs.quantize_rows(rows, payload, dec)
            codecs.dequantize_rows(payload, dec)
        else:
            x.to(torch.float16 if codec == "fp16" else torch.bfloat16).float()

    def _make_powersgd(self) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

        self.powersgd_state = psgd.PowerSGDState(
            process_group=self.pg,
            matrix_approximation_rank=self.cfg.powersgd_rank,
            start_powerSGD_iter=self.cfg.compress_start_step,
            use_error_feedback=self.cfg.error_feedback,
            warm_start=True,
        )
        if self._pending_powersgd is not None:
            self._restore_powersgd(self._pending_powersgd)
            self._pending_powersgd = None

    # -- per bucket -----------------------------------------------------------------------------
    def _run_bucket(
        self, fut: torch.futures.Future, buf: torch.Tensor, index: int, step: int, last: bool, layout_ok: bool
    ) -> None:
        try:
            past_warmup = self.cfg.codec is not None and step >= self.cfg.compress_start_step
            compress = past_warmup and layout_ok
            buf.div_(self.world)
            if self.cfg.scheme == "allreduce":
                shards: list[torch.Tensor] = [buf]
            else:
                shards = list(buf.split(self.cfg.shard_elements))
            if compress and self.cfg.scheme == "adaptive":
                # one node: every link is intra-node and fast, nothing to compress across
                compress = self.hierarchy and self._decide(index, buf.numel())
            plans = [self._plan(s, (index, i), compress) for i, s in enumerate(shards)]
            _drive(plans)
            if last:
                if self._err_terms:  # one host read per step (on a GPU, one synchronisation)
                    sums = torch.stack([torch.stack(t) for t in self._err_terms]).sum(dim=0).tolist()
                    self.stats.add_error(sums[0], sums[1])
                    self._err_terms = []
                self.stats.end_step(past_warmup)
            fut.set_result(buf)
        except BaseException as exc:  # surfaces in DDP's backward on this rank
            log.exception("clusterdoctor sync hook failed on bucket %s", index)
            fut.set_exception(exc)

    def _decide(self, index: int, numel: int) -> bool:
        key = str(index)
        d = self.stats.decisions.get(key)
        if d is None:
            chunk = math.ceil(numel / self.intra_size)
            bw = self.stats.link_bandwidth.get("inter", {}).get("bytes_per_second", math.inf)
            d = predict_cross_stage(
                elements=chunk,
                group_size=self.cross_size,
                bytes_per_second=bw,
                codec=self.cfg.codec or "int8",
                codec_seconds_per_element=self._probe.get("codec_seconds_per_element", 0.0),
                margin=self.cfg.margin,
            )
            d["bucket_elements"] = numel
            self.stats.decisions[key] = d
        return bool(d["compress"])

    def _plan(self, shard: torch.Tensor, key: tuple[int, int], compress: bool) -> Plan:
        """The collectives of one shard; ``compress``: use the codec (across nodes only, if hierarchical)."""
        small = shard.numel() < self.cfg.min_compress_elements
        if compress and small:
            self.stats.shards_skipped_small += 1
        codec = self.cfg.codec if (compress and not small) else None
        if self.hierarchy:
            return self._hierarchical(shard, key, codec)
        if codec is None:
            return self._plain(shard, self.pg, self.world, "world")
        self.stats.shards_compressed += 1
        if codec in ("fp16", "bf16"):
            return self._cast(shard, key, self.pg, self.world, "world", codec)
        if codec == "int8":
            return self._int8(shard, key, self.pg, self.world, "world")
        return self._topk(shard, key)

    # -- plans (generators yielding Work) ------------------------------------------------------
    def _plain(self, x: torch.Tensor, group: Any, size: int, link: str) -> Plan:
        nbytes = allreduce_bytes(size, x.numel() * 4)
        self.stats.add_bytes(link, nbytes, nbytes)
        if size > 1:
            yield dist.all_reduce(x, group=group, async_op=True)

    def _note_error(self, err: torch.Tensor, ref: torch.Tensor) -> None:
        """Remember this shard's squared error and reference norms (read once per step)."""
        self._err_terms.append((err.square().sum(), ref.square().sum()))

    def _residual(self, key: tuple[int, int], kind: str, numel: int, device: torch.device) -> torch.Tensor:
        name = f"b{key[0]}.s{key[1]}.{kind}"
        r = self.residuals.get(name)
        if r is None or r.numel() != numel or r.device != device:
            if r is not None and r.numel() != numel:
                log.warning(
                    "clusterdoctor sync: residual %s has %d elements, bucket needs %d; reset",
                    name,
                    r.numel(),
                    numel,
                )
            r = (
                torch.zeros(numel, dtype=torch.float32, device=device)
                if r is None or r.numel() != numel
                else r.to(device)
            )
            self.residuals[name] = r
        return r

    def _cast(
        self, x: torch.Tensor, key: tuple[int, int], group: Any, size: int, link: str, codec: str
    ) -> Plan:
        dtype = torch.float16 if codec == "fp16" else torch.bfloat16
        t0 = time.perf_counter()
        if self.cfg.error_feedback:
            x.add_(self._residual(key, "w", x.numel(), x.device))
        payload = self.pool.get((*key, "cast"), (x.numel(),), dtype, x.device)
        payload.copy_(x)
        err = self.pool.get((*key, "err"), (x.numel(),), torch.float32, x.device)
        torch.sub(x, payload, out=err)
        self._note_error(err, x)
        if self.cfg.error_feedback:
            self._residual(key, "w", x.numel(), x.device).copy_(err)
        self.stats.add_compress_time(time.perf_counter() - t0)
        self.stats.add_bytes(
            link,
            allreduce_bytes(size, x.numel() * payload.element_size()),
            allreduce_bytes(size, x.numel() * 4),
        )
        if size > 1:
            yield dist.all_reduce(payload, group=group, async_op=True)
        x.copy_(payload)

    def _int8(self, x: torch.Tensor, key: tuple[int, int], group: Any, size: int, link: str) -> Plan:
        """Reduce-scatter of int8 chunks via all-to-all, fp32 sum at the owner, all-gather of int8."""
        n = x.numel()
        c2 = math.ceil(n / size)
        row = c2 + codecs.SCALE_BYTES
        dev = x.device
        t0 = time.perf_counter()
        vals = self.pool.get((*key, "i8_vals"), (size * c2,), torch.float32, dev)
        vals[:n].copy_(x)
        vals[n:].zero_()
        if self.cfg.error_feedback:
            vals[:n].add_(self._residual(key, "w", n, dev))
        send = self.pool.get((*key, "i8_send"), (size, row), torch.int8, dev)
        dec = self.pool.get((*key, "i8_dec"), (size, c2), torch.float32, dev)
        codecs.quantize_rows(vals.view(size, c2), send, dec)
        err = dec.view(-1)[:n]
        torch.sub(vals[:n], err, out=err)  # err := compensated - sent
        self._note_error(err, vals[:n])
        if self.cfg.error_feedback:
            self._residual(key, "w", n, dev).copy_(err)
        self.stats.add_compress_time(time.perf_counter() - t0)
        recv = self.pool.get((*key, "i8_recv"), (size, row), torch.int8, dev)
        self.stats.add_bytes(link, gather_bytes(size, size * row), gather_bytes(size, size * c2 * 4))
        if size > 1:
            yield dist.all_to_all_single(recv, send, group=group, async_op=True)
        else:
            recv.copy_(send)
        t0 = time.perf_counter()
        parts = self.pool.get((*key, "i8_parts"), (size, c2), torch.float32, dev)
        codecs.dequantize_rows(recv, parts)
        red = self.pool.get((*key, "i8_red"), (1, c2), torch.float32, dev)
        torch.sum(parts, dim=0, keepdim=True, out=red)
        if self.cfg.error_feedback:
            red.view(-1).add_(self._residual(key, "s", c2, dev))
        gsend = self.pool.get((*key, "i8_gsend"), (1, row), torch.int8, dev)
        gdec = self.pool.get((*key, "i8_gdec"), (1, c2), torch.float32, dev)
        codecs.quantize_rows(red, gsend, gdec)
        if self.cfg.error_feedback:
            torch.sub(red.view(-1), gdec.view(-1), out=self._residual(key, "s", c2, dev))
        self.stats.add_compress_time(time.perf_counter() - t0)
        grecv = self.pool.get((*key, "i8_grecv"), (size * row,), torch.int8, dev)
        self.stats.add_bytes(link, gather_bytes(size, size * row), gather_bytes(size, size * c2 * 4))
        if size > 1:
            yield _all_gather(grecv, gsend.view(-1), group)
        else:
            grecv.copy_(gsend.view(-1))
        t0 = time.perf_counter()
        codecs.dequantize_rows(grecv.view(size, row), parts)
        x.copy_(parts.view(-1)[:n])
        self.stats.add_compress_time(time.perf_counter() - t0)

    def _topk(self, x: torch.Tensor, key: tuple[int, int]) -> Plan:
        n = x.numel()
        k = max(1, int(n * self.cfg.topk_ratio))
        size = self.world
        dev = x.device
        t0 = time.perf_counter()
        if self.cfg.error_feedback:
            x.add_(self._residual(key, "w", n, dev))
        idx = x.abs().topk(k, sorted=False).indices
        vals = x[idx]
        nbytes = codecs.topk_payload_bytes(n, k)
        payload = self.pool.get((*key, "tk_send"), (nbytes,), torch.int8, dev)
        codecs.pack_topk(vals, idx, n, payload)
        ref_sq = x.square().sum()
        x.index_fill_(0, idx, 0.0)  # x now holds compensated - sent
        self._err_terms.append((x.square().sum(), ref_sq))
        if self.cfg.error_feedback:
            self._residual(key, "w", n, dev).copy_(x)
        self.stats.add_compress_time(time.perf_counter() - t0)
        recv = self.pool.get((*key, "tk_recv"), (size * nbytes,), torch.int8, dev)
        self.stats.add_bytes("world", gather_bytes(size, size * nbytes), allreduce_bytes(size, n * 4))
        if size > 1:
            yield _all_gather(recv, payload, self.pg)
        else:
            recv.copy_(payload)
        t0 = time.perf_counter()
        x.zero_()
        for r in range(size):
            v, i = codecs.unpack_topk(recv[r * nbytes : (r + 1) * nbytes], n, k)
            x.index_add_(0, i, v)
        self.stats.add_compress_time(time.perf_counter() - t0)

    def _hierarchical(self, x: torch.Tensor, key: tuple[int, int], codec: str | None) -> Plan:
        m = self.intra_size
        n = x.numel()
        c1 = math.ceil(n / m)
        dev = x.device
        full = self.pool.get((*key, "h_full"), (m * c1,), torch.float32, dev)
        chunk = self.pool.get((*key, "h_chunk"), (c1,), torch.float32, dev)
        full[:n].copy_(x)
        full[n:].zero_()
        nb = gather_bytes(m, m * c1 * 4)
        self.stats.add_bytes("intra", nb, nb)
        if m > 1:
            yield _reduce_scatter(chunk, full, self.intra_pg)
        else:
            chunk.copy_(full)
        if codec is None:
            yield from self._plain(chunk, self.cross_pg, self.cross_size, "inter")
        else:
            self.stats.shards_compressed += 1
            if codec == "int8":
                yield from self._int8(chunk, key, self.cross_pg, self.cross_size, "inter")
            else:
                yield from self._cast(chunk, key, self.cross_pg, self.cross_size, "inter", codec)
        self.stats.add_bytes("intra", nb, nb)
        if m > 1:
            yield _all_gather(full, chunk, self.intra_pg)
        else:
            full.copy_(chunk)
        x.copy_(full[:n])

    # -- PowerSGD (torch's implementation) -----------------------------------------------------
    def _run_powersgd(self, fut: torch.futures.Future, bucket: Any, last: bool, layout_ok: bool) -> None:
        """torch's PowerSGD hook, one bucket at a time on the sequencer thread.

        Its P and Q all-reduces are issued from future callbacks; running buckets one after the
        other keeps their order equal on every rank (overlapping buckets could interleave them).
        """
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

        try:
            state = self.powersgd_state
            r = state.matrix_approximation_rank
            compressing = state.iter >= state.start_powerSGD_iter
            if compressing and not layout_ok:  # bucket layout differs from the one its state follows
                self.stats.add_bytes(
                    "world", *(2 * [allreduce_bytes(self.world, bucket.buffer().numel() * 4)])
                )
                buf = bucket.buffer().div_(self.world)
                dist.all_reduce(buf, group=self.pg)
                state.maybe_increase_iter(bucket)
                if last:
                    self.stats.end_step(False)
                fut.set_result(buf)
                return
            sent = unc = 0.0
            if not compressing:
                sent = unc = allreduce_bytes(self.world, bucket.buffer().numel() * 4)
            else:
                for g in bucket.gradients():
                    unc += allreduce_bytes(self.world, g.numel() * 4)
                    rows = g.shape[0] if g.ndim > 1 else 0
                    cols = g.numel() // rows if rows else 0
                    if g.ndim > 1 and (rows + cols) * r * state.min_compression_rate < rows * cols:
                        sent += allreduce_bytes(self.world, (rows + cols) * min(r, rows, cols) * 4)
                    else:
                        sent += allreduce_bytes(self.world, g.numel() * 4)
            self.stats.add_bytes("world", sent, unc)
            t0 = time.perf_counter()
            result = psgd.powerSGD_hook(state, bucket).wait()
            self.stats.add_compress_time(time.perf_counter() - t0)  # includes its all-reduces
            # No error norm: torch's residual is the local gradient minus the *averaged* approximation,
            # so it mixes rank-to-rank differences with compression error (noted in the stats).
            if last:
                self.stats.end_step(compressing)
            fut.set_result(result)
        except BaseException as exc:
            log.exception("clusterdoctor sync (powersgd) failed on bucket %s", bucket.index())
            fut.set_exception(exc)

    # -- checkpointing -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        sd: dict[str, Any] = {
            "format": STATE_FORMAT,
            "config": self.cfg.as_dict(),
            "step": self.step,
            "residuals": {k: v.detach().cpu().clone() for k, v in self.residuals.items()},
            "layouts": {str(k): list(v) for k, v in self.layouts.items()},
            "powersgd": None,
        }
        if self.powersgd_state is not None:
            st = self.powersgd_state
            sd["powersgd"] = {
                slot: getattr(st, slot) for slot in st.__slots__ if slot not in ("process_group",)
            }
        elif self._pending_powersgd is not None:
            sd["powersgd"] = self._pending_powersgd
        return sd

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        if not isinstance(sd, dict) or sd.get("format") != STATE_FORMAT:
            raise ValueError(f"not a clusterdoctor sync state (expected format {STATE_FORMAT!r})")
        saved = sd.get("config", {})
        if saved.get("scheme") != self.cfg.scheme:
            raise ValueError(
                f"sync state was saved with scheme {saved.get('scheme')!r}, this hook runs {self.cfg.scheme!r}"
            )
        self.step = int(sd["step"])
        self.residuals = {k: v.clone() for k, v in sd.get("residuals", {}).items()}
        self.layouts = {int(k): tuple(v) for k, v in sd.get("layouts", {}).items()}
        ps = sd.get("powersgd")
        if ps is not None:
            if self.powersgd_state is not None:
                self._restore_powersgd(ps)
            else:
                self._pending_powersgd = ps

    def _restore_powersgd(self, ps: dict[str, Any]) -> None:
        for slot, value in ps.items():
            setattr(self.powersgd_state, slot, value)
        self.powersgd_state.process_group = self.pg

    def shutdown(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None


def _guarded(fut: torch.futures.Future, fn: Any, *args: Any) -> None:
    """Run ``fn``; whatever escapes it fails ``fut`` (DDP would otherwise wait forever)."""
    try:
        fn(*args)
    except BaseException as exc:
        log.exception("clusterdoctor sync hook failed")
        if not fut.done():
            fut.set_exception(exc)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _drive(plans: list[Plan]) -> None:
    """Run shard plans round by round: launch stage k of every shard in shard order, then k+1."""
    live: list[tuple[Iterator[Any], Any]] = []
    for p in plans:
        w = next(p, _DONE)
        if w is not _DONE:
            live.append((p, w))
    while live:
        nxt = []
        for p, w in live:
            w.wait()
            w2 = next(p, _DONE)
            if w2 is not _DONE:
                nxt.append((p, w2))
        live = nxt


_DONE = object()


def ddp_hook(state, bucket):  # type: ignore[no-untyped-def]
    """The function registered with ``DistributedDataParallel.register_comm_hook``.

    Left unannotated on purpose: DDP compares the annotations with ``dist.GradBucket`` and the
    string annotations of ``from __future__ import annotations`` would not match.
    """
    return state(bucket)
