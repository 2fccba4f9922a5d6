"""``crictl info``: the CRI runtime's status as JSON (containerd, CRI-O), as a user pastes it.

``crictl info`` prints the runtime's ``StatusResponse`` (cri-api ``RuntimeStatus``): ``{"status":
{"conditions": [{"type": "RuntimeReady", "status": true, "reason": "", "message": ""},
{"type": "NetworkReady", ...}]}, "config": {...}}`` (older crictl nests the same under ``"status"``
only). The kubelet reads exactly these two conditions and logs a false one as ``container runtime not
ready: RuntimeReady=false reason:<r> message:<m>`` / ``Container runtime network not ready:
NetworkReady=false reason:<r> message:<m>`` (pkg/kubelet/kubelet.go, runtime_state.go); a false
condition here is turned into that line and judged by the kubelet catalogue, so the finding is the one
the kubelet's own log would give. True conditions are quiet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["load_crictl_info", "parse_crictl_info", "sniff_crictl_info"]

# the kubelet's wording of each false condition (pkg/kubelet: runtimeErrors / networkErrors)
_KUBELET_LINE = {
    "RuntimeReady": "container runtime not ready: RuntimeReady=false reason:{reason} message:{message}",
    "NetworkReady": "Container runtime network not ready: NetworkReady=false reason:{reason} message:{message}",
}


def sniff_crictl_info(head: bytes, name: str = "") -> bool:
    """True for ``crictl info`` JSON (its status conditions)."""
    h = head[:65536]
    return b'"conditions"' in h and (b'"RuntimeReady"' in h or b'"NetworkReady"' in h) and b"{" in h


def parse_crictl_info(text: str, path: str = "<crictl info>") -> list[dict[str, Any]]:
    """The runtime's conditions: ``[{"type", "status", "reason", "message"}]``; InputError without them."""
    start, end = text.find("{"), text.rfind("}")
    try:
        doc = json.loads(text[start : end + 1]) if 0 <= start < end else None
    except ValueError as e:
        raise InputError(f"crictl info output that is not JSON ({e.msg})", path, 1) from None
    status = doc.get("status") if isinstance(doc, dict) else None
    conds = status.get("conditions") if isinstance(status, dict) else None
    if not isinstance(conds, list) or not conds:
        raise InputError("crictl info JSON without status.conditions", path, 1)
    out = []
    for c in conds:
        if isinstance(c, dict) and isinstance(c.get("type"), str):
            out.append(
                {
                    "type": c["type"],
                    "status": c.get("status") in (True, "true", "True"),
                    "reason": str(c.get("reason") or ""),
                    "message": str(c.get("message") or ""),
                }
            )
    if not out:
        raise InputError("crictl info JSON without a readable condition", path, 1)
    return out


def load_crictl_info(path: str | Path) -> dict[str, Any]:
    """Read ``crictl info`` → ``messages`` (the kubelet's line for each false condition, judged by the
    kubelet catalogue) and what the input is in words."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.messages import scan_text

    p = str(path)
    conds = parse_crictl_info(read_text(Path(p)), p)
    lines = [
        _KUBELET_LINE[c["type"]].format(reason=c["reason"], message=c["message"])
        for c in conds
        if not c["status"] and c["type"] in _KUBELET_LINE
    ]
    hits = scan_text("\n".join(lines) + "\n", p) if lines else []
    state = ", ".join(f"{c['type']}={'true' if c['status'] else 'false'}" for c in conds)
    return {"described_as": f"crictl info ({state})", "messages": hits}
