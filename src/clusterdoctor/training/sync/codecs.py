"""Encoders for gradient shards: int8 with a per-row scale, and top-k with packed indices.

Payloads are single int8 tensors so one collective carries values and metadata together.
fp16/bf16 need no codec: the shard is cast and all-reduced in that dtype.
"""

from __future__ import annotations

import torch

SCALE_BYTES = 4  # one float32 scale per int8 row


def quantize_rows(x: torch.Tensor, payload: torch.Tensor, decoded: torch.Tensor) -> None:
    """Quantize each row of ``x`` (R, C) to int8 with its own scale max|row|/127.

    Writes ``payload`` (R, C+4) int8 (C values then the float32 scale's 4 bytes) and ``decoded``
    (R, C) float32, the values the receivers will reconstruct. |x - decoded| <= scale/2 per element.
    """
    c = x.shape[1]
    scale = x.abs().amax(dim=1, keepdim=True).div_(127.0)
    scale.masked_fill_(scale == 0, 1.0)
    q = torch.div(x, scale).round_().clamp_(-127, 127)
    payload[:, :c].copy_(q)
    payload[:, c:].copy_(scale.view(torch.int8))
    torch.mul(q, scale, out=decoded)


def dequantize_rows(payload: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`quantize_rows`: ``payload`` (R, C+4) int8 -> ``out`` (R, C) float32."""
    c = payload.shape[1] - SCALE_BYTES
    # a fresh 1-D copy: the slice's offset and row stride need not be multiples of 4
    scale = payload[:, c:].reshape(-1).clone().view(torch.float32).view(-1, 1)
    torch.mul(payload[:, :c], scale, out=out)
    return out


def index_bytes(length: int) -> int:
    """Bytes needed to store an index into a shard of ``length`` elements (1..8)."""
    return max(1, ((max(length, 2) - 1).bit_length() + 7) // 8)


def topk_payload_bytes(length: int, k: int) -> int:
    """Size of a packed top-k payload: k float32 values + k indices of :func:`index_bytes`, padded to 4."""
    n = k * (4 + index_bytes(length))
    return (n + 3) // 4 * 4


def pack_topk(values: torch.Tensor, indices: torch.Tensor, length: int, payload: torch.Tensor) -> None:
    """Pack float32 ``values`` and int64 ``indices`` (< length) into the int8 ``payload``."""
    k = values.numel()
    b = index_bytes(length)
    payload[: 4 * k].copy_(values.contiguous().view(torch.int8))
    shifts = torch.arange(0, 8 * b, 8, device=indices.device, dtype=torch.int64)
    parts = (indices.unsqueeze(1) >> shifts) & 0xFF
    payload[4 * k : 4 * k + b * k].copy_(parts.to(torch.uint8).view(torch.int8).reshape(-1))
    payload[4 * k + b * k :].zero_()


def unpack_topk(payload: torch.Tensor, length: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of :func:`pack_topk`: (float32 values, int64 indices)."""
    b = index_bytes(length)
    values = payload[: 4 * k].contiguous().view(torch.float32)
    raw = payload[4 * k : 4 * k + b * k].view(torch.uint8).reshape(k, b).to(torch.int64)
    shifts = torch.arange(0, 8 * b, 8, device=payload.device, dtype=torch.int64)
    indices = (raw << shifts).sum(dim=1)
    return values, indices
