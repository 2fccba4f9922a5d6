"""Render a saved DriftMonitor state as text, JSON or self-contained HTML (inline SVG histograms).

Pure string building on the loaded state; no torch, no numpy.
"""

from __future__ import annotations

import html
import json
from typing import Any


def _num(v: Any, fmt: str = ".3g") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, (int, float)):
        return format(v, fmt)
    return str(v)


_COLUMNS = (
    "layer",
    "precision",
    "score",
    "kl",
    "kurtosis_shift",
    "amax_ratio",
    "clipped",
    "low",
    "high",
    "action",
)


def _row(e: dict[str, Any]) -> list[str]:
    return [
        str(e.get("layer")),
        str(e.get("precision") or "-"),
        _num(e.get("score")),
        _num(e.get("kl")),
        _num(e.get("kurtosis_shift"), "+.3g") if e.get("kurtosis_shift") is not None else "-",
        _num(e.get("amax_ratio")),
        _num(e.get("clipped_fraction"), ".2%") if e.get("clipped_fraction") is not None else "-",
        _num(e.get("threshold_low")),
        _num(e.get("threshold_high")),
        str(e.get("action")),
    ]


# the table's headers, short so that the table fits 80 columns (the JSON keeps the full names)
_HEADERS = ("layer", "prec", "score", "kl", "kurt", "amax", "clip", "low", "high", "action")


def render_text(state: dict[str, Any], width: int = 80) -> str:
    """Per-layer table, then each layer's reason and notes, then the actions taken; every line within
    ``width`` columns (a layer name too long for the table is cut with ``…``; prose is wrapped)."""
    import textwrap

    width = max(60, width)
    body = [_row(e) for e in state.get("layers", [])]
    rows = [list(_HEADERS), *body]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADERS))]
    over = sum(widths) + len(widths) - 1 - width
    if over > 0:  # cut the layer names, never the numbers
        widths[0] = max(8, widths[0] - over)
    lines = [f"QAT drift monitor state ({state.get('generated_at', '?')})", ""]
    for j, r in enumerate(rows):
        cells = [(c if len(c) <= w else c[: w - 1] + "…").ljust(w) for c, w in zip(r, widths, strict=True)]
        lines.append(" ".join(cells).rstrip())
        if j == 0:
            lines.append(" ".join("-" * w for w in widths))
    lines.append("")

    def para(text: str, first: str = "", rest: str = "    ") -> None:
        lines.extend(
            textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)
            or [first.rstrip()]
        )

    for e in state.get("layers", []):
        para(f"{e.get('layer')}: {e.get('action')} - {e.get('reason')}")
        for n in e.get("notes") or []:
            para(f"note: {n}", first="    ", rest="      ")
    actions = state.get("actions") or []
    if actions:
        lines.append("")
        lines.append("Actions:")
        for a in actions:
            para(
                f"{a.get('layer')}: {a.get('action')} taken={a.get('taken')} - {a.get('reason', '')}",
                "  ",
                "      ",
            )
    return "\n".join(lines) + "\n"


def render_json(state: dict[str, Any]) -> str:
    """The state as indented JSON."""
    return json.dumps(state, indent=1, sort_keys=False) + "\n"


def histogram_svg(ref: list[float], cur: list[float] | None, width: int = 320, height: int = 90) -> str:
    """Inline SVG of the reference (grey bars) and current (blue outline) normalised histograms."""

    def norm(h: list[float] | None) -> list[float]:
        if not h:
            return []
        t = sum(h)
        return [x / t for x in h] if t > 0 else [0.0 for _ in h]

    r, c = norm(ref), norm(cur)
    n = max(len(r), len(c), 1)
    top = max(r + c + [1e-12])
    bw = width / n
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    for i, v in enumerate(r):
        h = v / top * (height - 2)
        parts.append(
            f'<rect x="{i * bw:.2f}" y="{height - h:.2f}" width="{bw:.2f}" height="{h:.2f}" fill="#bbb"/>'
        )
    if c:
        pts = " ".join(f"{(i + 0.5) * bw:.2f},{height - v / top * (height - 2):.2f}" for i, v in enumerate(c))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#1f5fbf" stroke-width="1.5"/>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(state: dict[str, Any]) -> str:
    """Self-contained HTML page: the table, and per layer its histograms as inline SVG."""
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in _COLUMNS)
    body = []
    for e in state.get("layers", []):
        cells = "".join(f"<td>{esc(c)}</td>" for c in _row(e))
        body.append(f"<tr>{cells}</tr>")
    sections = []
    for e in state.get("layers", []):
        ref = e.get("hist_ref")
        svg = (
            histogram_svg(ref, e.get("hist_cur"))
            if ref
            else "<p>no histogram (not monitored or not calibrated)</p>"
        )
        rng = ""
        if e.get("hist_lo") is not None and e.get("hist_hi") is not None:
            rng = f" bins over [{_num(e['hist_lo'])}, {_num(e['hist_hi'])}] plus under/overflow"
        notes = "".join(f"<li>{esc(str(n))}</li>" for n in e.get("notes") or [])
        sections.append(
            f"<section><h3>{esc(str(e.get('layer')))} — {esc(str(e.get('action')))}</h3>"
            f"<p>{esc(str(e.get('reason')))}</p>{svg}<p class='small'>grey: reference, blue: current;{esc(rng)}</p>"
            f"<ul>{notes}</ul></section>"
        )
    actions = "".join(
        f"<li>{esc(str(a.get('layer')))}: {esc(str(a.get('action')))} taken={esc(str(a.get('taken')))} — "
        f"{esc(str(a.get('reason', '')))}</li>"
        for a in state.get("actions") or []
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>QAT drift monitor</title>"
        "<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:2px 6px}.small{font-size:small;color:#555}</style></head><body>"
        f"<h1>QAT drift monitor</h1><p>generated {esc(str(state.get('generated_at', '?')))}</p>"
        f"<table><tr>{head}</tr>{''.join(body)}</table>{''.join(sections)}"
        f"<h2>Actions</h2><ul>{actions or '<li>none</li>'}</ul></body></html>\n"
    )
