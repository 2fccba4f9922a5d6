"""Per-QP RDMA state and counters: ``rdma res show qp -j`` and ``rdma statistic qp show`` (text and JSON).

* ``rdma [-j [-p]] res show qp [-d|-dd]`` → :class:`~clusterdoctor.observe.network.rdma.QueuePair`
  (the text form is read by :func:`clusterdoctor.observe.network.rdma.parse_rdma_res_qp`). The JSON that
  iproute2 prints with ``-dd`` was not valid JSON for years (the driver attributes land outside or inside
  the QP's object; linux-rdma 2022-08-22 and 2023-12-29, ``tests/data/rdma_qp``), so objects are read
  key by key, a new QP starting at each ``ifindex``/``ifname``, when ``json.loads`` refuses the text.
* ``rdma [-j] statistic qp show [link DEV/PORT]`` → :class:`QpCounter`: one counter set bound to one
  or more QPs (``cntn``), its owner (``pid``, ``comm``, ``qp-type``) and the hardware counters of those
  QPs only (``out_of_sequence``, ``local_ack_timeout_err``, ``rnr_nak_retry_err`` …). The QPs are
  ``LQPN: <258>`` (iproute2 of 2019) or ``lqpn 258`` / ``"lqpn": [258]``; a mail or terminal that
  wrapped the long line is read across the wrap.

What this output does not have: a per-QP drop column. The per-port drop counters are the port's
(:mod:`clusterdoctor.observe.network.rdma`, rule RDMA001); per QP, what shows trouble is the QP's state
(``ERR``, ``SQE``) and its transport error counters.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.rdma import QueuePair

__all__ = ["QpCounter", "load_rdma_qp", "parse_qp_json", "parse_qp_stat", "sniff_rdma_qp"]

# iproute2 rdma/res-qp.c qp_states_to_str and the kernel owners printed in [brackets]
QP_STATES = ("RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR")
_KERNEL_OWNERS = ("ib_core", "mlx5_ib", "ib_uverbs", "ib_ipoib", "rdma_cm", "ib_srp", "ib_isert", "rpcrdma")


@dataclass
class QpCounter:
    """One QP counter set (``rdma statistic qp show``): whose QPs, and their hardware counters."""

    device: str
    port: int | None
    cntn: int | None
    lqpns: list[int] = field(default_factory=list)
    pid: int | None = None
    comm: str | None = None
    qp_type: str | None = None
    counters: dict[str, int] = field(default_factory=dict)
    source: str = ""

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}" if self.port is not None else self.device


# --- rdma statistic qp show --------------------------------------------------------------------------
_STAT_START = re.compile(r"(?:^|\n)\s{0,8}link (?P<dev>[^\s/]{1,64})/(?P<port>\d{1,3})\s")
_LQPN_OLD = re.compile(r"LQPN:\s{0,4}<(?P<list>[\d,\s\-]{1,4096})>")
_TOKEN = re.compile(r"\S+")


def _qpn_list(text: str) -> list[int]:
    out: list[int] = []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            a, b = int(lo), int(hi or lo)
            if 0 <= b - a <= 4096:
                out.extend(range(a, b + 1))
    return out


def parse_qp_stat(data: str | bytes, path: str | None = None) -> list[QpCounter]:
    """``rdma statistic qp show`` (text, or ``-j`` JSON) → counter sets; InputError when none is found."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if text.lstrip()[:1] in ("[", "{"):
        return _stat_json(text, path)
    starts = [m for m in _STAT_START.finditer(text)]
    out: list[QpCounter] = []
    for i, m in enumerate(starts):
        body = text[m.end() : starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        c = QpCounter(m.group("dev"), int(m.group("port")), None, source=path or "")
        old = _LQPN_OLD.search(body)
        if old:
            c.lqpns = _qpn_list(old.group("list"))
            body = body[: old.start()] + body[old.end() :]
        toks = _TOKEN.findall(body)
        j = 0
        while j + 1 < len(toks):
            key, val = toks[j], toks[j + 1]
            if key == "cntn" and val.isdigit():
                c.cntn = int(val)
            elif key == "pid" and val.isdigit():
                c.pid = int(val)
            elif key == "comm":
                c.comm = val.strip("[]")
            elif key == "qp-type":
                c.qp_type = val
            elif key == "lqpn":
                c.lqpns.extend(_qpn_list(val))
            elif re.fullmatch(r"[a-z][a-z0-9_]{1,63}", key) and val.isdigit():
                c.counters[key] = int(val)
            else:
                j += 1  # an unknown word: resynchronise on the next key
                continue
            j += 2
        if c.cntn is not None or c.counters:
            out.append(c)
    if not out:
        raise InputError(
            "no `link DEV/PORT cntn N …` counter found (not `rdma statistic qp show` output)", path
        )
    return out


def _stat_json(text: str, path: str | None) -> list[QpCounter]:
    from clusterdoctor.observe.limits import load_json

    doc = load_json(text, path, "rdma statistic JSON")
    items = doc if isinstance(doc, list) else [doc]
    out: list[QpCounter] = []
    for it in items:
        if not isinstance(it, dict) or "ifname" not in it:
            continue
        lq = it.get("lqpn")
        lqpns: list[int] = []
        for v in lq if isinstance(lq, list) else [lq] if lq is not None else []:
            lqpns.extend([v] if isinstance(v, int) else _qpn_list(str(v)))
        counters = {
            k: int(v)
            for k, v in it.items()
            if isinstance(v, int) and not isinstance(v, bool) and k not in ("ifindex", "port", "cntn", "pid")
        }
        if isinstance(it.get("hwcounters"), dict):  # newer iproute2 nests them
            counters.update({k: int(v) for k, v in it["hwcounters"].items() if isinstance(v, int)})
        out.append(
            QpCounter(
                str(it["ifname"]),
                it.get("port") if isinstance(it.get("port"), int) else None,
                it.get("cntn") if isinstance(it.get("cntn"), int) else None,
                lqpns,
                it.get("pid") if isinstance(it.get("pid"), int) else None,
                str(it["comm"]).strip("[]") if it.get("comm") else None,
                str(it["qp-type"]) if it.get("qp-type") else None,
                counters,
                path or "",
            )
        )
    if not out:
        raise InputError("no QP counter object (with ifname) in the JSON", path)
    return out


# --- rdma -j res show qp --------------------------------------------------------------------------
_KV = re.compile(
    r'"(?P<k>[A-Za-z_][\w\-]{0,40})"\s{0,8}:\s{0,8}(?P<v>"(?:[^"\\\n]|\\.){0,512}"|-?\d{1,20}|true|false|null)'
)


def parse_qp_json(data: str | bytes, path: str | None = None) -> list[QueuePair]:
    """``rdma -j [-p] res show qp [-d|-dd]`` → queue pairs, also from iproute2's broken ``-dd`` JSON."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    objs: list[dict[str, Any]] = []
    try:
        doc = json.loads(text)
        objs = [o for o in (doc if isinstance(doc, list) else [doc]) if isinstance(o, dict)]
    except (ValueError, RecursionError):
        cur: dict[str, Any] | None = None
        for m in _KV.finditer(text):
            k, v = m.group("k"), json.loads(m.group("v"))
            if k in ("ifindex", "ifname") and cur is not None and k in cur:
                objs.append(cur)
                cur = None
            if cur is None:
                cur = {}
            cur[k] = v
        if cur:
            objs.append(cur)
    out: list[QueuePair] = []
    for o in objs:
        if "lqpn" not in o or not isinstance(o.get("lqpn"), int):
            continue
        comm = str(o.get("comm") or "")
        pid = o.get("pid") if isinstance(o.get("pid"), int) else None
        out.append(
            QueuePair(
                device=str(o.get("ifname") or "?"),
                port=o.get("port") if isinstance(o.get("port"), int) else None,
                lqpn=int(o["lqpn"]),
                type=str(o.get("type") or "?"),
                state=str(o.get("state") or "?"),
                comm=comm.strip("[]"),
                pid=pid,
                kernel=comm.startswith("[") or (pid is None and comm in _KERNEL_OWNERS),
            )
        )
    if not out:
        raise InputError("no queue pair (an object with ifname and lqpn) in it", path)
    return out


# --- detection ------------------------------------------------------------------------------------
_SNIFF_STAT = re.compile(rb"^\s{0,8}link \S{1,64}/\d{1,3} cntn \d", re.M)


def sniff_rdma_qp(head: bytes, name: str = "") -> bool:
    """``rdma statistic qp show`` (text or JSON) or ``rdma -j res show qp``."""
    if _SNIFF_STAT.search(head):
        return True
    h = head.lstrip()
    if h[:1] not in (b"[", b"{") or b'"ifname"' not in h:
        return False
    return b'"cntn"' in h or (b'"lqpn"' in h and b'"state"' in h)


def load_rdma_qp(path: str | Path) -> dict[str, Any]:
    from clusterdoctor.observe.limits import read_input

    p = Path(path)
    data = read_input(p)
    head = data[:65536]
    if _SNIFF_STAT.search(head) or b'"cntn"' in head:
        counters = parse_qp_stat(data, str(p))
        n = sum(len(c.lqpns) for c in counters)
        return {
            "rdma_qp_counters": counters,
            "described_as": f"rdma statistic qp show ({len(counters)} counter(s), {n} QP(s))",
        }
    qps = parse_qp_json(data, str(p))
    return {"rdma_qps": qps, "described_as": f"rdma res show qp ({len(qps)} QP(s))"}
