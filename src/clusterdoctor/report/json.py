"""The JSON report: the versioned ``clusterdoctor.diagnosis/1`` schema of DESIGN.md."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Diagnosis


def render_json(diag: Diagnosis, *, extra: dict[str, Any] | None = None) -> str:
    """Findings ranked by score, skipped rules with their reasons, sources and warnings."""
    doc = diag.as_dict()
    if diag.topology is not None:
        doc["topology"] = diag.topology.as_dict()
    if diag.placement:
        doc["placement"] = diag.placement
    if extra:
        doc.update(extra)
    return json.dumps(_without_url_credentials(doc), indent=2, sort_keys=False, default=str) + "\n"


def _without_url_credentials(doc: Any) -> Any:
    """Every string of ``doc`` with URL credentials removed (JSON escapes control characters itself)."""
    from clusterdoctor.redact import redact_urls

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return redact_urls(v) if ("://" in v or "=" in v) else v
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(doc)


def iter_json(doc: Any, *, depth: int = 2) -> Iterator[str]:
    """``doc`` as JSON text in pieces, for large reports (issue 26: ``gpu health`` on 10,000 GPUs):
    the outer ``depth`` levels of objects and lists one member per line, indented by two, and each
    member below them on one line, written by the C encoder (``json.dumps(indent=2)`` runs the pure
    Python one: 5-6x slower). Same data, ``default=str`` as the other reports; ASCII only, so no
    control character reaches a terminal."""
    enc = json.JSONEncoder(default=str)

    def key(k: Any) -> str:
        return enc.encode(k) if isinstance(k, str) else enc.encode({k: 0})[1:-4]

    def walk(v: Any, level: int, pad: str) -> Iterator[str]:
        if level < depth and isinstance(v, dict) and v:
            inner, last = pad + "  ", len(v) - 1
            yield "{\n"
            for i, (k, x) in enumerate(v.items()):
                yield f"{inner}{key(k)}: "
                yield from walk(x, level + 1, inner)
                yield ",\n" if i < last else "\n"
            yield pad + "}"
        elif level < depth and isinstance(v, (list, tuple)) and v:
            inner, last = pad + "  ", len(v) - 1
            yield "[\n"
            for i, x in enumerate(v):
                yield inner
                yield from walk(x, level + 1, inner)
                yield ",\n" if i < last else "\n"
            yield pad + "]"
        else:
            yield enc.encode(v)

    yield from walk(doc, 0, "")
    yield "\n"
