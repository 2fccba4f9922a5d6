"""Save and load a DriftMonitor state as JSON (what ``clusterdoctor qat report`` reads).

No torch here: the CLI loads states without the training extra.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

SCHEMA = "clusterdoctor.qat-monitor/1"
_REQUIRED_LAYER_KEYS = ("layer", "action", "reason")


def _clean(v: Any) -> Any:
    """Non-finite floats become None (strict JSON); containers are cleaned recursively."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def save_state(state: dict[str, Any], path: str | Path) -> None:
    """Write ``state`` to ``path`` atomically as strict JSON."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(json.dumps(_clean(state), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(p)


def load_state(path: str | Path) -> dict[str, Any]:
    """Read and validate a saved state; raises :class:`InputError` naming the file and the problem."""
    from clusterdoctor.observe.limits import read_input

    p = Path(path)
    if p.is_dir():
        raise InputError("is a directory, expected a monitor state JSON file", str(p))
    try:
        text = read_input(p).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read: {e}", str(p)) from None
    return parse_state(text, str(p))


def parse_state(text: str, path: str | None = None) -> dict[str, Any]:
    """Validate the JSON text of a saved state."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"not JSON: {e.msg}", path, e.lineno) from None
    except RecursionError:
        raise InputError("not JSON: nested too deeply", path) from None
    if not isinstance(data, dict):
        raise InputError("not a QAT monitor state (top level is not an object)", path)
    if data.get("schema") != SCHEMA:
        raise InputError(
            f"not a QAT monitor state (schema {data.get('schema')!r}, expected {SCHEMA!r})", path
        )
    layers = data.get("layers")
    if not isinstance(layers, list):
        raise InputError("'layers' missing or not a list", path)
    for i, e in enumerate(layers):
        if not isinstance(e, dict):
            raise InputError(f"layers[{i}] is not an object", path)
        for k in _REQUIRED_LAYER_KEYS:
            if k not in e:
                raise InputError(f"layers[{i}] has no {k!r}", path)
        for k in ("hist_ref", "hist_cur"):
            h = e.get(k)
            if h is not None and (
                not isinstance(h, list)
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in h)
            ):
                raise InputError(f"layers[{i}].{k} is not a list of numbers", path)
        for k in ("notes", "shapes", "downstream"):
            v = e.get(k)
            if v is not None and not isinstance(v, list):
                raise InputError(f"layers[{i}].{k} is not a list", path)
        for k in ("score", "kl", "kurtosis_shift", "threshold_low", "threshold_high"):
            v = e.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise InputError(f"layers[{i}].{k} is not a number", path)
    actions = data.get("actions", [])
    if not isinstance(actions, list) or not all(isinstance(a, dict) for a in actions):
        raise InputError("'actions' is not a list of objects", path)
    return data
