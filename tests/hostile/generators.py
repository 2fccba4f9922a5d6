"""Hostile inputs, generated (never stored): each function writes one reproducer of issue 15 into a
directory and returns its path. Bombs are built from a compressed block repeated (gzip members and
zstd frames concatenate), so a 2 GiB inflation costs a few MB on disk and well under a second.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import struct
import tarfile
import zlib
from pathlib import Path

# one NCCL kernel with the collective arguments Kineto records: the record that costs most to keep
_NCCL_EVENT = (
    '{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", '
    '"pid": 0, "tid": 7, "ts": 1000.5, "dur": 12.25, "args": {"stream": 7, "correlation": 42, '
    '"Collective name": "allreduce", "In msg nelems": 4096, "Out msg nelems": 4096, "Group size": 8, '
    '"dtype": "Float", "Process Group Name": "0", "Process Group Description": "default_pg", '
    '"Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "Seq": 17, "Rank": 0}}'
)


def gzip_members(path: Path, head: bytes, block: bytes, total: int, tail: bytes = b"") -> Path:
    """``head`` + ``block`` repeated to ``total`` bytes + ``tail``, as concatenated gzip members."""
    per = max(1, (64 << 20) // len(block))
    chunk = gzip.compress(block * per, 6)
    n = max(1, (total - len(head)) // (len(block) * per))
    with open(path, "wb") as f:
        f.write(gzip.compress(head, 6))
        for _ in range(n):
            f.write(chunk)
        if tail:
            f.write(gzip.compress(tail, 6))
    return path


def kineto_gzip_bomb(d: Path, inflated: int = 2 << 30, closed: bool = True) -> Path:
    """A Kineto trace whose gzip (a few MB) inflates to ``inflated`` bytes of NCCL kernel events."""
    head = b'{"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 8}, "traceEvents": [\n'
    block = (_NCCL_EVENT + ",\n").encode()
    tail = (_NCCL_EVENT + "]}\n").encode() if closed else b""
    return gzip_members(d / "rank0.pt.trace.json.gz", head, block, inflated, tail)


_KERNEL_EVENT = (
    '{"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4>(int)", '
    '"pid": 0, "tid": 7, "ts": 1000.5, "dur": 3.25, "args": {"stream": 7, "correlation": 42}}'
)


def kineto_kernel_gzip(d: Path, inflated: int = 2 << 30) -> Path:
    """A trace of plain compute kernels (one record each) inflating to ``inflated`` bytes: under the
    default budgets it is read to the end, so its peak RSS is the reader's bound for 2 GiB."""
    head = b'{"distributedInfo": {"rank": 0, "world_size": 8}, "traceEvents": [\n'
    block = (_KERNEL_EVENT + ",\n").encode()
    return gzip_members(
        d / "rank0_kernels.pt.trace.json.gz", head, block, inflated, (_KERNEL_EVENT + "]}\n").encode()
    )


def kineto_single_member_bomb(d: Path, inflated: int = 2 << 30) -> Path:
    """The same as one gzip member (what ``gzip`` itself writes): costs a compression pass."""
    p = d / "rank0_single.pt.trace.json.gz"
    block = (_NCCL_EVENT + ",\n").encode() * 4096
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(p, "wb") as f:
        f.write(z.compress(b'{"distributedInfo": {"rank": 0}, "traceEvents": [\n'))
        for _ in range(inflated // len(block)):
            f.write(z.compress(block))
        f.write(z.compress((_NCCL_EVENT + "]}\n").encode()))
        f.write(z.flush())
    return p


def kineto_deep(d: Path, depth: int = 200_000) -> Path:
    p = d / "deep.pt.trace.json"
    p.write_text('{"traceEvents": [' + "[" * depth + "]" * depth + "]}")
    return p


def kineto_no_events(d: Path) -> Path:
    p = d / "empty_rank0.pt.trace.json"
    p.write_text('{"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": []}')
    return p


def truncated_gzip(d: Path) -> Path:
    p = d / "trace.json.gz"
    c = gzip.compress(b'{"traceEvents": [' + b'{"ph": "X", "cat": "kernel"},' * 1000)
    p.write_bytes(c[:30])
    return p


# --- pickles ------------------------------------------------------------------------------------


def pickle_bytearray_bomb(d: Path, n: int = 12 << 30) -> Path:
    """71 bytes that ask ``builtins.bytearray(n)``: 12 GiB with an allow-list that names bytearray."""
    data = (
        b"\x80\x02cbuiltins\nbytearray\nq\x00\x8a\x05"
        + n.to_bytes(5, "little")
        + b"\x85q\x01Rq\x02}q\x03X\x07\x00\x00\x00entriesq\x04]q\x05s\x86q\x06."
    )
    p = d / "fr_trace_rank_0.pkl"
    p.write_bytes(data)
    return p


def pickle_deep(d: Path, depth: int = 1_000_000) -> Path:
    """A list nested ``depth`` deep, as opcodes (pickle.dumps itself would recurse)."""
    body = b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."
    p = d / "fr_trace_rank_deep.pkl"
    p.write_bytes(body)
    return p


def pickle_billion_laughs(d: Path, levels: int = 40) -> Path:
    """Each level a tuple holding the previous one twice (memo references): 2**levels values when
    walked, from a few hundred bytes."""
    out = io.BytesIO()
    out.write(b"\x80\x02X\x01\x00\x00\x00xq\x000")  # 'x' stored as memo 0, popped
    for i in range(1, levels + 1):
        out.write(b"h" + bytes([i - 1]) + b"h" + bytes([i - 1]) + b"\x86q" + bytes([i]) + b"0")
    out.write(b"}X\x07\x00\x00\x00entries]h" + bytes([levels]) + b"as.")
    p = d / "fr_trace_rank_laughs.pkl"
    p.write_bytes(out.getvalue())
    return p


def pickle_long_string(d: Path) -> Path:
    """BINUNICODE8 claiming 2**62 bytes."""
    p = d / "fr_trace_rank_len.pkl"
    p.write_bytes(b"\x80\x04\x8d" + struct.pack("<Q", 1 << 62) + b"abc.")
    return p


def pickle_code(d: Path) -> Path:
    p = d / "fr_trace_rank_os.pkl"
    p.write_bytes(b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R.")
    return p


# --- bundles -------------------------------------------------------------------------------------


def _tar_bytes(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor(level=3).compress(data)


def manifest(sources: object = None, **extra: object) -> bytes:
    doc = {"schema": "clusterdoctor.bundle/1", "host": "h", "sources": [] if sources is None else sources}
    doc.update(extra)
    return json.dumps(doc).encode()


def bundle(path: Path, members: list[tuple[str, bytes]]) -> Path:
    path.write_bytes(_zstd(_tar_bytes([("manifest.json", manifest()), *members])))
    return path


def nested_bundles(d: Path, fanout: int = 8, depth: int = 6) -> Path:
    """Bundles of bundles: ``fanout`` copies of the level below, ``depth`` levels, each leaf an etcd
    log with one late heartbeat (2.5 KB on disk; fanout**depth leaves when followed)."""
    leaf_log = (
        b'{"level":"warn","ts":"2026-11-30T08:51:03.658Z","caller":"etcdserver/raft.go:416",'
        b'"msg":"leader failed to send out heartbeat on time; took too long, leader is overloaded likely '
        b'from slow disk","to":"b","heartbeat-interval":"100ms","expected-duration":"200ms",'
        b'"exceeded-duration":"2.37s"}\n'
    )
    level = _zstd(_tar_bytes([("manifest.json", manifest()), ("logs/etcd.log", leaf_log)]))
    for _ in range(depth - 1):
        level = _zstd(
            _tar_bytes(
                [("manifest.json", manifest())] + [(f"files/b{i}.tar.zst", level) for i in range(fanout)]
            )
        )
    p = d / "nested.tar.zst"
    p.write_bytes(level)
    return p


def zero_members_bundle(d: Path, members: int = 8, size: int = 255 << 20) -> Path:
    """``members`` members of ``size`` zero bytes each (a multiple of 512), as concatenated zstd
    frames: the zeros are compressed once (a few KB) and repeated."""
    import zstandard

    assert size % 512 == 0
    cctx = zstandard.ZstdCompressor(level=3)
    zeros = cctx.compress(b"\x00" * size)
    m = manifest()
    ti = tarfile.TarInfo("manifest.json")
    ti.size = len(m)
    parts = [cctx.compress(ti.tobuf(tarfile.PAX_FORMAT) + m + b"\x00" * (-len(m) % 512))]
    for i in range(members):
        ti = tarfile.TarInfo(f"files/zero{i}.log")
        ti.size = size
        parts += [cctx.compress(ti.tobuf(tarfile.PAX_FORMAT)), zeros]
    parts.append(cctx.compress(b"\x00" * 1024))
    p = d / "zeros.tar.zst"
    p.write_bytes(b"".join(parts))
    return p


def manifest_many_sources(d: Path, n: int = 200_000) -> Path:
    src = [{"name": "s", "status": "failed", "error": "x"}] * n
    p = d / "many-sources.tar.zst"
    p.write_bytes(_zstd(_tar_bytes([("manifest.json", manifest(src))])))
    return p


def bundle_bad_manifest(d: Path, name: str, **fields: object) -> Path:
    p = d / name
    p.write_bytes(_zstd(_tar_bytes([("manifest.json", manifest(**fields))])))
    return p


def bundle_name_collision(d: Path) -> Path:
    """A file ``files/a`` and then a file ``files/a/b``: extracting the second needs a directory where
    a file already is."""
    p = d / "collide.tar.zst"
    return bundle(p, [("files/a", b"x\n"), ("files/a/b", b"y\n")])


def bundle_long_name(d: Path) -> Path:
    p = d / "longname.tar.zst"
    return bundle(
        p, [("files/" + "n" * 300 + ".log", b"x\n"), ("files/" + "/".join(["d" * 200] * 30) + "/f", b"y\n")]
    )


def pickle_protocol_2_dump() -> bytes:
    """A small valid dump (what torch's gloo/NCCL Flight Recorder writes: protocol 2, no globals)."""
    return pickle.dumps({"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": []}, protocol=2)
