"""The JSON report: the versioned ``clusterdoctor.diagnosis/1`` schema of DESIGN.md."""

from __future__ import annotations

import json
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
