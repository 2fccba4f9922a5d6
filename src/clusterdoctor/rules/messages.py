"""Rules from the message catalogues: one rule per catalogued message, its id the entry's code.

The entries are data (:mod:`clusterdoctor.rules.catalog`); the lines are found by
:mod:`clusterdoctor.observe.messages`. Each entry becomes a rule here, with the entry's meaning, cause,
fix and verify command as its Symptom/Why/Fix/Verify sections, so `clusterdoctor rules NCCL101`
explains a message like any other rule.

One finding per message and instance. When the entry's pattern names the instance itself (NCCL's
"around rank 3", the member in an etcd line, a PCI address in an NVRM line), that instance is the
subject and each instance is its own finding. Otherwise the line's prefix names only who *printed*
it (the reporter, rarely the culprit): the hits become one finding whose subject is the one host or
rank that printed them all, if there is one, and whose evidence lists who printed what.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Evidence, Finding
from clusterdoctor.rules.catalog import Message, all_messages
from clusterdoctor.rules.registry import Observations, Rule, register_input, rule

register_input(
    "messages",
    "no known program message in the inputs (logs, pasted errors: NCCL, PyTorch, CUDA, NVRM, fabric "
    "manager, device plugin, IB, kubelet, containerd, etcd, scheduler events)",
)

MAX_EVIDENCE_LINES = 5
SYMPTOM_CONFIDENCE = 0.5  # a symptom ranks below the causes that explain it


def hits_by_code(obs: Observations) -> dict[str, list[Any]]:
    """The hits of ``obs["messages"]`` by entry code (computed once per diagnosis)."""
    hits = obs.get("messages") or []
    cached = obs.data.get("_messages_by_code")
    if cached is not None and cached[0] is hits and cached[1] == len(hits):
        return cached[2]
    out: dict[str, list[Any]] = defaultdict(list)
    for h in hits:
        out[h.code].append(h)
    obs.data["_messages_by_code"] = (hits, len(hits), out)
    return out


def _subject(m: Message, h: Any) -> str | None:
    """The instance the entry's own pattern names (its ``subject`` template), or None."""
    if not m.subject:
        return None
    values = dict(h.groups)
    values.setdefault("rank", "" if h.rank is None else str(h.rank))
    values.setdefault("host", h.host or "")
    values.setdefault("dev", "" if h.device is None else str(h.device))
    try:
        text = m.subject.format(**values).strip()
    except (KeyError, IndexError, ValueError):
        return None
    return text or None


def _who(h: Any) -> str | None:
    if h.rank is not None:
        return f"rank {h.rank}"
    if h.host:
        return h.host if h.device is None else f"{h.host} [{h.device}]"
    return None


def _findings(r: Rule, m: Message, hits: list[Any]) -> Iterator[Finding]:
    groups: dict[str | None, list[Any]] = defaultdict(list)
    for h in hits:
        groups[_subject(m, h)].append(h)
    for subject, hs in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or "")):
        printers = sorted({w for w in (_who(h) for h in hs) if w})
        hosts = sorted({h.host for h in hs if h.host})
        if subject is None:
            if len(printers) == 1:
                subject = printers[0]
            elif len(hosts) == 1:
                subject = hosts[0]
        n = sum(h.count for h in hs)
        summary = m.meaning
        if n > 1:
            summary += f" ({n} lines"
            summary += f", printed by {_list(printers)})" if len(printers) > 1 else ")"
        evidence = [Evidence(f"line {h.line}: {h.text}", source=h.path) for h in hs[:MAX_EVIDENCE_LINES]]
        if len(hs) > MAX_EVIDENCE_LINES or n > len(hs):
            evidence.append(Evidence(f"{n - min(len(hs), MAX_EVIDENCE_LINES)} more line(s) like these"))
        evidence.append(Evidence(f"likely cause: {m.cause}"))
        evidence.append(Evidence("message documented at", value=m.source))
        confidence = m.confidence if m.role != "symptom" else min(m.confidence, SYMPTOM_CONFIDENCE)
        f = r.finding(summary, evidence=evidence, subject=subject, confidence=confidence, causes=m.causes)
        f.action = m.action
        f.role = m.role
        yield f


def _list(items: list[str], most: int = 6) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def _make_rule(m: Message) -> Rule:
    def check(obs: Observations) -> Iterator[Finding]:
        hits = hits_by_code(obs).get(m.code)
        if hits:
            yield from _findings(r, m, hits)

    verify = " ".join(f"`{v}`" for v in m.verify)
    check.__doc__ = (
        f"{m.title}\n\n**Symptom**: {m.meaning}\n\n**Why**: {m.cause} (message documented at {m.source})"
        f"\n\n**Fix**: {m.fix}\n\n**Verify**: {verify}\n"
    )
    check.__name__ = check.__qualname__ = f"message_{m.code.lower()}"
    check.__module__ = __name__
    r = rule(
        id=m.code, name=m.name, layer=m.layer, title=m.title, requires=("messages",), severity=m.severity
    )(check)
    return r


MESSAGE_RULES: tuple[Rule, ...] = tuple(_make_rule(m) for m in all_messages())
