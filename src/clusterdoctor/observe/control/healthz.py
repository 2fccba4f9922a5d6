"""Verbose health answers of Kubernetes components and etcd: ``/livez?verbose``, ``/readyz?verbose``,
``/healthz?verbose``, as a user pastes them.

kube-apiserver, kube-scheduler, kube-controller-manager, the kubelet and etcd (3.5.9+, its ``/livez``
and ``/readyz`` on the metrics port, 2381 in kubeadm and RKE2) answer with one line per check
(k8s.io/apiserver/pkg/server/healthz: ``[+]<name> ok`` or ``[-]<name> failed: reason withheld``, the
reason shown only to a privileged caller) and a last line: ``ok``, or ``<endpoint> check failed``.
``kubectl get --raw='/readyz?verbose'`` prints the same text. A paste may carry the command line (the
``curl``/``kubectl`` that asked, which names the endpoint and the port), comment marks (``# [-]...``)
and unrelated lines around the answer (a ``grep`` of the pod manifest): those are counted, not read.

The component is named from what the paste shows: port 2381 or etcd's own check names
(``serializable_read``, ``linearizable_read``, ``data_corruption``, ``non_learner``) are etcd; a check
named ``etcd``/``etcd-readiness`` or ``poststarthook/...`` is kube-apiserver's; otherwise unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["HealthCheck", "load_healthz", "parse_healthz", "sniff_healthz"]

_CHECK = re.compile(
    r"^\s{0,8}(?:[#>]\s{0,4})?\[(?P<sign>[+-])\](?P<name>[A-Za-z0-9_.:/-]{1,120}) "
    r"(?P<state>ok|failed)(?:: ?(?P<reason>.{0,300}?))?\s*$"
)
_VERDICT = re.compile(r"^\s{0,8}(?:[#>]\s{0,4})?(?:(?P<ep>healthz|livez|readyz) check failed|ok)\s*$")
_ASK = re.compile(r"/(?P<ep>healthz|livez|readyz)\b")
_PORT = re.compile(r":(?P<port>\d{2,5})/(?:healthz|livez|readyz)\b")
_ETCD_CHECKS = frozenset({"serializable_read", "linearizable_read", "data_corruption", "non_learner"})


@dataclass(frozen=True)
class HealthCheck:
    """One ``[+]``/``[-]`` line: which check, whether it passed, the reason printed (often withheld)."""

    name: str
    ok: bool
    reason: str
    line: int
    source: str
    endpoint: str  # healthz | livez | readyz | "" (not shown)
    component: str  # etcd | kube-apiserver | "" (not shown)


def sniff_healthz(head: bytes, name: str = "") -> bool:
    """Two check lines, or one and the answer's last line (``ok`` / ``... check failed``)."""
    text = head[:65536].decode("utf-8", errors="replace")
    checks = verdicts = 0
    for ln in text.splitlines()[:400]:
        if _CHECK.match(ln):
            checks += 1
        elif _VERDICT.match(ln):
            verdicts += 1
        if checks >= 2 or (checks and verdicts):
            return True
    return False


def _component(names: set[str], port: str | None) -> str:
    if port == "2381" or names & _ETCD_CHECKS:
        return "etcd"
    if names & {"etcd", "etcd-readiness"} or any(n.startswith("poststarthook/") for n in names):
        return "kube-apiserver"
    return ""


def parse_healthz(
    text: str, path: str = "<health answer>", origin: list[int] | None = None, commands: tuple[str, ...] = ()
) -> tuple[list[HealthCheck], list[int]]:
    """Every check line, with the endpoint and component of the answer it belongs to, and the count of
    numbers of the lines that are none of the answer's (other output). InputError without a check line.
    ``origin``/``commands``: the paste's line numbers and the command lines cleaned off it
    (observe.paste): the k-th command that asks a health endpoint names the k-th answer."""
    from clusterdoctor.observe.paste import numbered

    blocks: list[list[tuple[int, re.Match[str]]]] = [[]]
    asks: list[tuple[str, str | None]] = [("", None)]
    other: list[int] = []
    for i, ln in numbered(text, origin):
        m = _CHECK.match(ln)
        if m:
            blocks[-1].append((i, m))
            continue
        if _VERDICT.match(ln):
            ep = _VERDICT.match(ln)["ep"]  # type: ignore[index]
            if ep and not asks[-1][0]:
                asks[-1] = (ep, asks[-1][1])
            blocks.append([])
            asks.append(("", None))
            continue
        a = _ASK.search(ln)
        if a:  # the command that asked: a new answer follows
            if blocks[-1]:
                blocks.append([])
                asks.append(("", None))
            p = _PORT.search(ln)
            asks[-1] = (a["ep"], p["port"] if p else None)
        elif ln.strip():
            other.append(i)
    asked = [
        (a["ep"], p["port"] if p else None)
        for c in commands
        if (a := _ASK.search(c))
        for p in [_PORT.search(c)]
    ]
    answers = [b for b in blocks if b]
    if asked and not any(ep for ep, _ in asks):
        asks = [asked[min(k, len(asked) - 1)] for k in range(len(answers))]
        blocks = answers
    out: list[HealthCheck] = []
    for block, (ep, port) in zip(blocks, asks):
        comp = _component({m["name"] for _, m in block}, port)
        for i, m in block:
            out.append(
                HealthCheck(
                    m["name"],
                    m["sign"] == "+" and m["state"] == "ok",
                    (m["reason"] or "").strip(),
                    i,
                    path,
                    ep,
                    comp,
                )
            )
    if not out:
        raise InputError("no '[+]name ok' / '[-]name failed' line: not a verbose health answer", path)
    return out, other


def load_healthz(path: str | Path) -> dict[str, Any]:
    """Read a pasted health answer → ``health_checks`` and what the input is in words."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_commands, input_origin, lines_not_read

    p = str(path)
    checks, other = parse_healthz(read_text(Path(p)), p, input_origin(), input_commands())
    failed = sum(not c.ok for c in checks)
    comps = sorted({c.component for c in checks if c.component}) or ["component not shown"]
    out: dict[str, Any] = {
        "described_as": f"health checks ({', '.join(comps)}: {len(checks)} check(s), {failed} failed)",
        "health_checks": checks,
    }
    if other:
        out["warnings"] = [lines_not_read(p, other, "part of a health answer")]
    return out
