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

Between those two, what a loader knew a line is about (``line_about``: the object of a `kubectl get
events` row, the pod or node a `kubectl describe` shows) names the instance, and a family may refine the
subject from the other observations (:func:`register_subject_resolver`: the one Pending pod for a
scheduler reason; the etcd member a peer ID or address is). An entry's ``detail`` template adds the
pattern's values to the summary; of several entries on one line, ``rank_group`` puts the one covering
more instances first (the scheduler's "28 Insufficient cpu" before its "3 node(s) had untolerated taint").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
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
# of several messages on one line (the scheduler's "28 Insufficient cpu, 3 node(s) had untolerated
# taint"), the one whose rank_group count is larger leads: a bonus below 0.5, less than any difference
# in severity or confidence between entries (clusterdoctor ranking rule, rules/catalog Message.rank_group)
RANK_GROUP_BONUS = 0.5
MAX_DETAILS = 3  # distinct detail strings appended to one finding's summary
ABOUT_KEY = 300  # a line is matched to what it is about by its first characters (hits keep 400)

# family -> fn(obs, message, hits, subject) giving the subject of the finding for these hits, from what
# the entry's pattern and the lines' context named (``subject``, or None) and the other observations: the
# one Pending pod of a `kubectl get pods` for a scheduler message; an etcd member's short name for the peer
# ID or address an etcd line names. None: the hits' printers name it (see _findings).
SubjectResolver = Callable[[Observations, Message, list[Any], "str | None"], "str | None"]
SUBJECT_RESOLVERS: dict[str, SubjectResolver] = {}


def register_subject_resolver(family: str, fn: SubjectResolver) -> None:
    """Let a family name the subject of its findings from other observations (see SUBJECT_RESOLVERS)."""
    SUBJECT_RESOLVERS[family] = fn


def _line_about(obs: Observations) -> dict[tuple[str, str], str]:
    """What the lines of the inputs are about, where a loader knew (``line_about``: (path, line text,
    "pod ns/name") from `kubectl get events` rows and `kubectl describe` sections)."""
    rows = obs.get("line_about") or []
    cached = obs.data.get("_line_about")
    if cached is not None and cached[0] == len(rows):
        return cached[1]
    out = {(path, text.strip()[:ABOUT_KEY]): ref for path, text, ref in rows}
    obs.data["_line_about"] = (len(rows), out)
    return out


def hit_about(obs: Observations | None, h: Any) -> str | None:
    """The instance a hit's line is about by its context (see :func:`_line_about`), or None."""
    if obs is None:
        return None
    return _line_about(obs).get((h.path, h.text[:ABOUT_KEY]))


def hit_groups(h: Any) -> dict[str, str]:
    """A hit's named groups; ``name2``, ``name3`` (alternatives of one pattern, as Python forbids a
    group name twice) stand in for ``name`` when it is absent."""
    out = dict(h.groups)
    for k, v in list(out.items()):
        base = k.rstrip("0123456789")
        if base != k and base and base not in out:
            out[base] = v
    return out


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
    values = hit_groups(h)
    values.setdefault("rank", "" if h.rank is None else str(h.rank))
    values.setdefault("host", h.host or "")
    values.setdefault("dev", "" if h.device is None else str(h.device))
    # "a|b": alternatives tried in order (the first whose groups the line has)
    for template in m.subject.split("|"):
        try:
            text = template.format(**values).strip()
        except (KeyError, IndexError, ValueError):
            continue
        if text:
            return text
    return None


def _who(h: Any) -> str | None:
    if h.rank is not None:
        return f"rank {h.rank}"
    if h.host:
        return h.host if h.device is None else f"{h.host} [{h.device}]"
    return None


def _detail(m: Message, hs: list[Any]) -> str:
    """The entry's ``detail`` template filled from the hits (distinct values, at most MAX_DETAILS)."""
    if not m.detail:
        return ""
    out: list[str] = []
    for h in hs:
        try:
            d = m.detail.format(**hit_groups(h))
        except (KeyError, IndexError, ValueError):
            continue
        if d not in out:
            out.append(d)
        if len(out) >= MAX_DETAILS:
            break
    return " ".join(out)


def _rank_count(m: Message, hs: list[Any]) -> int:
    best = 0
    for h in hs:
        v = hit_groups(h).get(m.rank_group, "")
        if v.isdigit():
            best = max(best, int(v))
    return best


def _findings(r: Rule, m: Message, hits: list[Any], obs: Observations | None = None) -> Iterator[Finding]:
    groups: dict[str | None, list[Any]] = defaultdict(list)
    for h in hits:
        # the entry's own pattern names the instance, else what a loader knew the line is about
        # (the object of a `kubectl get events` row, the pod a `kubectl describe` shows)
        groups[_subject(m, h) or hit_about(obs, h)].append(h)
    resolver = SUBJECT_RESOLVERS.get(m.family)
    for subject, hs in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or "")):
        printers = sorted({w for w in (_who(h) for h in hs) if w})
        hosts = sorted({h.host for h in hs if h.host})
        if resolver is not None and obs is not None:
            subject = resolver(obs, m, hs, subject)
        if subject is None:
            if len(printers) == 1:
                subject = printers[0]
            elif len(hosts) == 1:
                subject = hosts[0]
            else:
                subject = _prompt_host(obs, hs)
        n = sum(h.count for h in hs)
        summary = m.meaning
        detail = _detail(m, hs)
        if detail:
            summary += " " + detail
        if n > 1:
            summary += f" ({n} lines"
            summary += f", printed by {_list(printers)})" if len(printers) > 1 else ")"
        evidence = [Evidence(f"line {h.line}: {h.text}", source=h.path) for h in hs[:MAX_EVIDENCE_LINES]]
        if len(hs) > MAX_EVIDENCE_LINES or n > len(hs):
            evidence.append(Evidence(f"{n - min(len(hs), MAX_EVIDENCE_LINES)} more line(s) like these"))
        evidence.append(Evidence(f"likely cause: {m.cause}"))
        evidence.append(Evidence(f"message documented at {m.source}"))
        confidence = m.confidence if m.role != "symptom" else min(m.confidence, SYMPTOM_CONFIDENCE)
        f = r.finding(summary, evidence=evidence, subject=subject, confidence=confidence, causes=m.causes)
        if m.rank_group:
            k = _rank_count(m, hs)
            f.score += RANK_GROUP_BONUS * k / (k + 1)
        f.action = m.action
        f.role = m.role
        yield f


def _prompt_host(obs: Observations | None, hs: list[Any]) -> str | None:
    """The one host the shell prompts of the hits' pastes name (``[root@node045 ~]# ibstatus``), or None:
    the machine the output came from, when nothing in the lines names who printed them."""
    if obs is None:
        return None
    paths = {h.path for h in hs}
    named = {host for p in obs.get("pastes") or [] if p.path in paths for host in getattr(p, "hosts", ())}
    return next(iter(named)) if len(named) == 1 else None


def _list(items: list[str], most: int = 6) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def _make_rule(m: Message) -> Rule:
    def check(obs: Observations) -> Iterator[Finding]:
        hits = hits_by_code(obs).get(m.code)
        if hits:
            yield from _findings(r, m, hits, obs)

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
