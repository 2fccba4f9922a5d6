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
    return json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n"
