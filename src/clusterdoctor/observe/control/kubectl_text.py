"""kubectl's text output → typed records: ``get pods``, ``get nodes``, ``get events`` (plain and ``-o wide``,
with or without ``-A``), ``describe pod`` / ``describe node``, and the event rows of a describe pasted
without their header.

What kubectl prints, from kubernetes/kubernetes ``pkg/printers/internalversion/printers.go`` (the columns of
``get``: pods ``NAME READY STATUS RESTARTS AGE [IP NODE NOMINATED NODE READINESS GATES]``, nodes ``NAME
STATUS ROLES AGE VERSION [INTERNAL-IP ...]`` (``NAME STATUS AGE [VERSION]`` before 1.8), events ``LAST SEEN
TYPE REASON OBJECT MESSAGE`` (1.14+; ``LAST SEEN FIRST SEEN COUNT NAME KIND SUBOBJECT TYPE REASON SOURCE
MESSAGE`` before), a ``NAMESPACE`` column first with ``-A``) and ``staging/src/k8s.io/kubectl/pkg/describe/
describe.go`` (``Key:  value`` lines, indented sections, the ``Conditions`` and ``Events`` tables).
Columns are padded with spaces by a tabwriter (older releases used tabs): a row is cut at its header's
column positions where it lines up, and read by its shape where it does not.

:func:`parse_kubectl_text` is pure. A line that is none of these is counted as skipped (a warning names
them); :class:`~clusterdoctor.errors.InputError` only when no line is kubectl output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = [
    "KubeCondition",
    "KubeEvent",
    "KubeObject",
    "KubectlText",
    "NodeRow",
    "PodRow",
    "load_kubectl_observations",
    "parse_kubectl_text",
    "sniff_kubectl_text",
]

MAX_LINE = 16384


@dataclass(frozen=True)
class PodRow:
    """One row of ``kubectl get pods``."""

    name: str
    ready: str  # "0/1"
    status: str  # Running, Pending, CrashLoopBackOff, Evicted, Init:0/1 ...
    restarts: int
    age: str
    namespace: str = ""
    node: str = ""
    source: str = ""
    line: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class ComponentRow:
    """One row of ``kubectl get componentstatuses`` (``cs``): a control-plane component's health probe."""

    name: str  # scheduler, controller-manager, etcd-0
    status: str  # Healthy | Unhealthy
    message: str = ""
    error: str = ""
    source: str = ""
    line: int = 0


@dataclass(frozen=True)
class NodeRow:
    """One row of ``kubectl get nodes``."""

    name: str
    status: str  # Ready, NotReady, Ready,SchedulingDisabled, Unknown
    roles: str = ""
    age: str = ""
    version: str = ""
    source: str = ""
    line: int = 0


@dataclass(frozen=True)
class KubeEvent:
    """One Kubernetes event as ``kubectl get events`` or a describe's Events table shows it."""

    type: str  # Normal | Warning
    reason: str
    message: str
    object: str = ""  # "pod/name" (get events), or the described object ("pod ns/name")
    origin: str = ""  # the reporting component ("default-scheduler", "kubelet, node-1")
    age: str = ""
    count: int = 1
    namespace: str = ""
    source: str = ""
    line: int = 0


@dataclass(frozen=True)
class KubeCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass
class KubeObject:
    """One object of ``kubectl describe`` (a pod or a node), or the part of one that was pasted."""

    kind: str  # "pod" | "node" | "" (not said)
    name: str = ""
    namespace: str = ""
    fields: dict[str, str] = field(default_factory=dict)  # top-level "Key: value"
    conditions: list[KubeCondition] = field(default_factory=list)
    taints: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    container_states: list[tuple[str, str, str]] = field(default_factory=list)  # (container, state, reason)
    events: list[KubeEvent] = field(default_factory=list)
    source: str = ""
    first_line: int = 0
    last_line: int = 0

    @property
    def ref(self) -> str:
        """How findings name it: ``pod ns/name``, ``node name``."""
        who = f"{self.namespace}/{self.name}" if self.namespace and self.name else self.name
        return f"{self.kind} {who}".strip() if who else ""


@dataclass
class KubectlText:
    pods: list[PodRow] = field(default_factory=list)
    nodes: list[NodeRow] = field(default_factory=list)
    components: list[ComponentRow] = field(default_factory=list)
    events: list[KubeEvent] = field(default_factory=list)
    objects: list[KubeObject] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    lines: int = 0
    read: int = 0
    skipped: list[int] = field(default_factory=list)
    # 1-based line -> what it is about ("pod default/x"): known messages found on it name that instance
    about: dict[int, str] = field(default_factory=dict)
    events_text: list[tuple[int, str]] = field(default_factory=list)  # describe Events sections, as text

    def describe(self) -> str:
        kinds = list(dict.fromkeys(self.kinds))
        return "kubectl " + (" + ".join(kinds) if kinds else "output")


# --- headers -------------------------------------------------------------------------------------
_POD_HDR = re.compile(r"^(?:NAMESPACE\s+)?NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\b")
_NODE_HDR = re.compile(r"^NAME\s+STATUS\s+(?:ROLES\s+)?AGE(?:\s+VERSION)?\b")
_CS_HDR = re.compile(r"^NAME\s+STATUS\s+MESSAGE\s+ERROR\s*$")  # kubectl get componentstatuses
_EVENT_HDR = re.compile(
    r"^(?:NAMESPACE\s+)?(?:LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+(?:SUBOBJECT\s+SOURCE\s+)?MESSAGE"
    r"|LAST ?SEEN\s+FIRST ?SEEN\s+COUNT\s+NAME\s+KIND\s+SUBOBJECT\s+TYPE\s+REASON\s+SOURCE\s+MESSAGE)"
)
_DESCRIBE_EVENTS_HDR = re.compile(r"^\s*Type\s+Reason\s+Age\s+From\s+Message\s*$")
_OLD_DESCRIBE_EVENTS_HDR = re.compile(
    r"^\s*FirstSeen\s+LastSeen\s+Count\s+From\s+SubObjectPath\s+Type\s+Reason\s+Message\s*$"
)
_RULE = re.compile(r"^\s*-{2,}(?:\s+-{2,})+\s*$")
_COLUMN = re.compile(r"\S+(?: \S+)*")  # a header name: words separated by single spaces

# --- rows by shape (where the columns do not line up) ------------------------------------------
_AGE = r"(?:<unknown>|<invalid>|\d{1,9}[smhdy](?:\d{1,9}[smh])?)"
_POD_ROW = re.compile(
    # `kubectl get all` prefixes the kind: pod/name
    r"^(?:pod/)?(?P<name>[a-z0-9][\w.\-]{0,252})\s+(?P<ready>\d{1,3}/\d{1,3})\s+(?P<status>\S{1,64})\s+"
    r"(?P<restarts>\d{1,9})(?: \((?P<ago>[^)]{1,20}) ago\))?\s+(?P<age>" + _AGE + r")(?:\s+(?P<rest>.*))?$"
)
_NODE_ROW = re.compile(
    r"^(?P<name>[a-z0-9][\w.\-]{0,252})\s+(?P<status>(?:Not)?Ready(?:,SchedulingDisabled)?|Unknown"
    r"|SchedulingDisabled)\s+(?:(?P<roles>\S{1,200})\s+)?(?P<age>"
    + _AGE
    + r")(?:\s+(?P<version>v\d\S{0,60}))?"
)
_EVENT_ROW = re.compile(
    r"^(?P<last>" + _AGE + r"(?: \(x\d{1,9} over " + _AGE + r"\))?)\s+(?P<type>Normal|Warning)\s+"
    r"(?P<reason>[A-Za-z][\w]{0,80})\s+(?P<object>[a-z][\w.\-]{0,80}/\S{1,253})\s+(?P<msg>.*)$"
)
# a describe event row: [Type] Reason Age From Message, columns two spaces apart
_DESCRIBE_ROW = re.compile(
    r"^\s{0,12}(?:(?P<type>Normal|Warning)\s+)?(?P<reason>[A-Z][A-Za-z]{1,80})\s{2,}"
    r"(?P<age>" + _AGE + r"(?: \(x(?P<count>\d{1,9}) over " + _AGE + r"\))?)\s{2,}"
    r"(?P<from>\S(?:[^ \t]| (?! ))*)\s{2,}(?P<msg>\S.*)$"
)

# --- describe ------------------------------------------------------------------------------------
_KEY = re.compile(r"^(?P<key>[A-Z][A-Za-z\- ]{0,40}?):(?:[ \t]+(?P<value>.*))?$")
_SUB = re.compile(r"^(?P<indent>[ \t]++)(?P<key>[\w.\-/ ]{1,80}?):(?:[ \t]+(?P<value>.*))?$")
_POD_KEYS = {"Namespace", "Priority", "Node", "Start Time", "Status", "IP", "IPs", "Controlled By", "Containers",
             "QoS Class", "Node-Selectors", "Tolerations", "Volumes", "Init Containers", "Service Account",
             "Priority Class Name", "Reason", "Message"}  # fmt: skip
_NODE_KEYS = {"Roles", "Taints", "Unschedulable", "Lease", "Addresses", "Capacity", "Allocatable",
              "System Info", "PodCIDR", "PodCIDRs", "ProviderID", "Non-terminated Pods", "Allocated resources",
              "CreationTimestamp"}  # fmt: skip
_DESCRIBE_KEYS = _POD_KEYS | _NODE_KEYS | {"Name", "Labels", "Annotations", "Events", "Conditions"}


def _columns(header: str) -> list[tuple[str, int]]:
    """(name, start) of each column of a header line (names hold single spaces: ``LAST SEEN``)."""
    return [(m.group(0), m.start()) for m in _COLUMN.finditer(header.expandtabs())]


def _cut(row: str, cols: list[tuple[str, int]]) -> dict[str, str] | None:
    """A row cut at its header's column starts, when it lines up (each cell starts after a blank)."""
    row = row.expandtabs()
    out: dict[str, str] = {}
    for i, (name, start) in enumerate(cols):
        if start > len(row):
            out[name] = ""
            continue
        if start > 0 and row[start - 1] != " ":
            return None
        end = cols[i + 1][1] if i + 1 < len(cols) else len(row)
        if i + 1 < len(cols) and end < len(row) and row[end - 1] != " ":
            return None
        out[name] = row[start:end].strip() if i + 1 < len(cols) else row[start:].strip()
    return out


def _ref(obj: str, namespace: str = "") -> str:
    """``pod/name`` (kubectl's OBJECT column) as findings name it: ``pod ns/name``."""
    kind, sep, name = obj.partition("/")
    if not sep:
        return obj
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _int(text: str) -> int:
    m = re.match(r"\d{1,9}", text.strip())
    return int(m.group(0)) if m else 0


class _State:
    def __init__(self, path: str | None) -> None:
        self.src = path or "kubectl output"
        self.mode = ""  # pods | nodes | events | describe
        self.cols: list[tuple[str, int]] = []
        self.obj: KubeObject | None = None
        self.section = ""  # the describe section being read (Conditions, Events, Labels, ...)
        self.section_cols: list[tuple[str, int]] = []
        self.container = ""


def parse_kubectl_text(
    text: str | bytes, path: str | None = None, origin: list[int] | None = None
) -> KubectlText:
    """kubectl's text output (the forms in the module docstring, in any mix) → :class:`KubectlText`.
    ``origin``: a cleaned paste's line numbers (observe.paste.input_origin), so rows name the lines the
    user sees."""
    from clusterdoctor.observe.paste import numbered

    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    out = KubectlText()
    st = _State(path)
    lines = list(numbered(text, origin))
    out.lines = len(lines)
    for n, raw in lines:
        line = raw.rstrip("\r").rstrip()
        if not line.strip():
            if st.mode != "describe":
                st.mode = ""
            continue
        if len(line) > MAX_LINE:
            out.skipped.append(n)
            continue
        if _one(line, n, st, out):
            out.read += 1
        else:
            out.skipped.append(n)
    _close(st, out)
    if out.read == 0:
        raise InputError(
            "no line is kubectl output (get pods/nodes/events, describe pod/node, event rows)", path, 1
        )
    return out


def _close(st: _State, out: KubectlText) -> None:
    if st.obj is not None:
        if not st.obj.kind:
            keys = set(st.obj.fields)
            st.obj.kind = "node" if keys & _NODE_KEYS else ("pod" if keys & _POD_KEYS else "")
        out.objects.append(st.obj)
        out.kinds.append(f"describe {st.obj.kind}".strip())
    st.obj = None
    st.section = ""


def _one(line: str, n: int, st: _State, out: KubectlText) -> bool:
    s = line.strip()
    # headers of get tables start a table (and end a describe)
    for rx, mode in (
        (_POD_HDR, "pods"),
        (_EVENT_HDR, "events"),
        (_NODE_HDR, "nodes"),
        (_CS_HDR, "componentstatuses"),
    ):
        if rx.match(s) and line[:1] not in " \t":
            _close(st, out)
            st.mode, st.cols = mode, _columns(line)
            out.kinds.append(f"get {mode}")
            return True
    if st.mode == "pods":
        return _pod(line, n, st, out)
    if st.mode == "nodes":
        return _node(line, n, st, out)
    if st.mode == "events":
        return _event(line, n, st, out)
    if st.mode == "componentstatuses":
        return _component(line, n, st, out)
    if _describe(line, n, st, out):
        return True
    if _describe_event(line, n, st, out, None):
        out.kinds.append("event rows")
        return True
    cond = _condition_row(line) if st.obj is None else None  # `describe node | grep Pressure`
    if cond is not None:
        obj = KubeObject(kind="node", source=st.src, first_line=n, last_line=n)
        obj.conditions.append(cond)
        out.objects.append(obj)
        out.kinds.append("describe node condition rows")
        return True
    if _headerless_pod(line, n, st, out):  # `kubectl get pods [-A] | grep x`: rows without the header
        return True
    m = _EVENT_ROW.match(line.strip())  # `kubectl get events` rows pasted without their header
    if m:
        count = _int(re.sub(r".*\(x", "", m.group("last"))) if "(x" in m.group("last") else 1
        out.events.append(
            KubeEvent(
                m.group("type"),
                m.group("reason"),
                m.group("msg").strip(),
                m.group("object"),
                "",
                m.group("last"),
                count,
                "",
                st.src,
                n,
            )  # fmt: skip
        )
        out.about[n] = _ref(m.group("object"))
        out.kinds.append("get events")
        return True
    return False


def _pod_row_shape(line: str) -> tuple[str, re.Match[str]] | None:
    """(namespace, row match) of a `get pods` row without its header: ``name ready status restarts age``,
    or the same after a namespace (``-A``); None when the line is neither."""
    s = line.strip()
    m = _POD_ROW.match(s)
    if m:
        return "", m
    parts = s.split(None, 1)
    if len(parts) == 2 and re.fullmatch(r"[a-z0-9][a-z0-9\-]{0,62}", parts[0]):
        m = _POD_ROW.match(parts[1])
        if m:
            return parts[0], m
    return None


def _headerless_pod(line: str, n: int, st: _State, out: KubectlText) -> bool:
    if st.obj is not None or line[:1] in " \t":
        return False
    shape = _pod_row_shape(line)
    if shape is None:
        return False
    ns, m = shape
    out.pods.append(_pod_row(m, ns, "", st, n))
    if "get pods rows" not in out.kinds:
        out.kinds.append("get pods rows")
    return True


def _pod_row(m: re.Match[str], ns: str, node: str, st: _State, n: int) -> PodRow:
    return PodRow(
        m.group("name"), m.group("ready"), m.group("status"), _int(m.group("restarts")), m.group("age"),
        ns, node, st.src, n,
    )  # fmt: skip


def _pod(line: str, n: int, st: _State, out: KubectlText) -> bool:
    ns = ""
    body = line
    if st.cols and st.cols[0][0] == "NAMESPACE":
        parts = line.split(None, 1)
        if len(parts) < 2:
            return False
        ns, body = parts[0], parts[1]
    m = _POD_ROW.match(body.strip())
    if not m:
        return False
    node = ""
    cells = _cut(line, st.cols)
    if cells and cells.get("NODE") and cells["NODE"] != "<none>":
        node = cells["NODE"]
    out.pods.append(_pod_row(m, ns, node, st, n))
    return True


def _component(line: str, n: int, st: _State, out: KubectlText) -> bool:
    """A componentstatuses row: NAME, STATUS (Healthy/Unhealthy), MESSAGE, ERROR (the probe's error)."""
    bits = line.split(None, 2)
    if len(bits) < 2 or bits[1] not in ("Healthy", "Unhealthy", "Unknown"):
        return False
    cells = _cut(line, st.cols) or {}
    rest = bits[2].strip() if len(bits) > 2 else ""
    message, error = cells.get("MESSAGE", rest), cells.get("ERROR", "")
    out.components.append(ComponentRow(bits[0], bits[1], message or rest, error, st.src, n))
    return True


def _node(line: str, n: int, st: _State, out: KubectlText) -> bool:
    m = _NODE_ROW.match(line.strip())
    if not m:
        return False
    out.nodes.append(
        NodeRow(
            m.group("name"),
            m.group("status"),
            m.group("roles") or "",
            m.group("age"),
            m.group("version") or "",
            st.src,
            n,
        )  # fmt: skip
    )
    return True


def _event(line: str, n: int, st: _State, out: KubectlText) -> bool:
    cells = _cut(line, st.cols)
    if cells is not None and cells.get("TYPE") in ("Normal", "Warning") and cells.get("MESSAGE"):
        obj = cells.get("OBJECT") or "/".join(
            x for x in (cells.get("KIND", "").lower(), cells.get("NAME", "")) if x
        )
        last = cells.get("LAST SEEN") or cells.get("LASTSEEN") or ""
        count = _int(cells.get("COUNT", "")) or _int(re.sub(r".*\(x", "", last)) or 1
        ev = KubeEvent(cells["TYPE"], cells.get("REASON", ""), cells["MESSAGE"], obj, cells.get("SOURCE", ""),
                       last, count, cells.get("NAMESPACE", ""), st.src, n)  # fmt: skip
    else:
        body = line.strip()
        ns = ""
        if st.cols and st.cols[0][0] == "NAMESPACE":
            ns, _, body = body.partition(" ")
            body = body.strip()
        m = _EVENT_ROW.match(body)
        if not m:
            return False
        count = _int(re.sub(r".*\(x", "", m.group("last"))) if "(x" in m.group("last") else 1
        ev = KubeEvent(m.group("type"), m.group("reason"), m.group("msg").strip(), m.group("object"), "",
                       m.group("last"), count, ns, st.src, n)  # fmt: skip
    out.events.append(ev)
    if ev.object:
        out.about[n] = _ref(ev.object, ev.namespace)
    return True


def _describe_event(line: str, n: int, st: _State, out: KubectlText, obj: KubeObject | None) -> bool:
    m = _DESCRIBE_ROW.match(line)
    if not m:
        return False
    ev = KubeEvent(
        m.group("type") or "", m.group("reason"), m.group("msg").strip(), obj.ref if obj else "",
        m.group("from").strip(), m.group("age"), int(m.group("count") or 1), obj.namespace if obj else "",
        st.src, n,
    )  # fmt: skip
    out.events.append(ev)
    (obj.events if obj else []).append(ev)
    if obj is not None and obj.ref:
        out.about[n] = obj.ref
    else:
        node = reporting_node(ev.origin)
        if node:  # rows pasted without their object: the node whose kubelet reported them
            out.about[n] = f"node {node}"
    return True


# the From column of a describe's Events: "kubelet, node-1" up to kubectl 1.19 (since 1.20 "kubelet" alone)
_FROM_NODE = re.compile(r"^kubelet, (?P<node>[\w.\-]{1,253})$")


def reporting_node(origin: str) -> str:
    """The node a describe event row's From column names (``kubelet, node-1``), or ""."""
    m = _FROM_NODE.match(origin.strip())
    return m.group("node") if m else ""


def _describe(line: str, n: int, st: _State, out: KubectlText) -> bool:
    """One line of a ``kubectl describe`` (a pod or a node)."""
    top = _KEY.match(line) if line[:1] not in " \t" else None
    if top and (top.group("key") in _DESCRIBE_KEYS or st.obj is not None):
        key, value = top.group("key"), (top.group("value") or "").strip()
        if key == "Name" and st.obj is not None and st.obj.name:
            _close(st, out)
        if st.obj is None:
            st.obj = KubeObject(kind="", source=st.src, first_line=n)
        obj = st.obj
        obj.last_line = n
        obj.fields[key] = value
        st.section = key
        st.container = ""
        if key == "Name":
            obj.name = value
        elif key == "Namespace":
            obj.namespace = value
        elif key in ("Roles", "Taints", "Unschedulable", "Capacity", "Allocatable", "System Info"):
            obj.kind = obj.kind or "node"
        elif key in ("Containers", "Controlled By", "QoS Class", "Node", "Start Time", "IP"):
            obj.kind = obj.kind or "pod"
        if key == "Taints" and value and value != "<none>":
            obj.taints.append(value)
        if key == "Labels" and "=" in value:
            k, _, v = value.partition("=")
            obj.labels[k.strip()] = v.strip()
        if obj.ref:
            out.about[n] = obj.ref
        return True
    obj = st.obj
    if obj is None:
        return False
    obj.last_line = n
    if obj.ref:
        out.about[n] = obj.ref
    sec = st.section
    if sec == "Events":
        if _DESCRIBE_EVENTS_HDR.match(line) or _OLD_DESCRIBE_EVENTS_HDR.match(line) or _RULE.match(line):
            out.events_text.append((n, line))
            return True
        if _describe_event(line, n, st, out, obj):
            out.events_text.append((n, line))
            return True
        return bool(line.strip() == "<none>")
    if sec == "Conditions":
        if re.match(r"^\s+Type\s+Status\b", line):
            st.section_cols = _columns(line)
            return True
        if _RULE.match(line):
            return True
        cells = _cut(line, st.section_cols) if st.section_cols else None
        parts = cells if cells and cells.get("Type") else None
        if parts is None:
            bits = re.split(r"\s{2,}|\t+", line.strip())
            if len(bits) < 2:
                return False
            names = [c for c, _ in st.section_cols] or ["Type", "Status"]
            parts = dict(zip(names, bits))
        obj.conditions.append(
            KubeCondition(
                parts.get("Type", ""),
                parts.get("Status", ""),
                parts.get("Reason", ""),
                parts.get("Message", ""),
            )  # fmt: skip
        )
        return True
    if sec == "Taints" and line.strip() and "=" in line or (sec == "Taints" and ":" in line.strip()):
        obj.taints.append(line.strip())
        return True
    if sec == "Labels" and "=" in line:
        k, _, v = line.strip().partition("=")
        obj.labels[k] = v
        return True
    m = _SUB.match(line)
    if m:
        key, value = m.group("key").strip(), (m.group("value") or "").strip()
        if sec in ("Capacity", "Allocatable"):
            (obj.capacity if sec == "Capacity" else obj.allocatable)[key] = value
        elif sec in ("Containers", "Init Containers"):
            if len(m.group("indent").expandtabs()) <= 2 and not value:
                st.container = key
            elif key in ("State", "Last State") and value:
                st.section_cols = []
                obj.container_states.append((st.container, f"{key}: {value}", ""))
            elif key == "Reason" and obj.container_states:
                c, state, _ = obj.container_states[-1]
                obj.container_states[-1] = (c, state, value)
        return True
    return bool(line[:1] in " \t")  # more of an indented section (volumes, annotations, ...)


# the node condition types the kubelet sets (pkg/kubelet/nodestatus/setters.go) and node-problem-
# detector's common ones; a row is Type, Status, two times, Reason, Message (describe.go)
_CONDITION_TYPES = frozenset({"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "OutOfDisk",
                              "NetworkUnavailable", "KernelDeadlock", "ReadonlyFilesystem"})  # fmt: skip


def _condition_row(line: str) -> KubeCondition | None:
    """A node condition row pasted without its describe around it (``kubectl describe node | grep
    DiskPressure``): indented, the type, True/False/Unknown, then times, the reason and the message."""
    if line[:1] not in " \t" or len(line) > 2000:
        return None
    bits = [b.strip() for b in re.split(r"\s{2,}|\t+", line.strip()) if b.strip()]
    if len(bits) < 4 or bits[0] not in _CONDITION_TYPES or bits[1] not in ("True", "False", "Unknown"):
        return None
    return KubeCondition(bits[0], bits[1], bits[-2], bits[-1])


_SNIFF = re.compile(
    r"^(?:(?:NAMESPACE\s+)?NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE"
    # get nodes, plain or -o wide (INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME)
    r"|NAME\s+STATUS\s+(?:ROLES\s+)?AGE(?:\s+VERSION)?(?:\s+INTERNAL-IP\b[^\n]{0,300}|\s*)$"
    r"|NAME\s+STATUS\s+MESSAGE\s+ERROR\s*$"
    r"|(?:NAMESPACE\s+)?LAST ?SEEN\s+(?:TYPE|FIRST ?SEEN)\s"
    r"|Name:[ \t]+\S)",
    re.M,
)


def sniff_kubectl_text(head: bytes, name: str = "") -> bool:
    """True when ``head`` starts like kubectl's text output (a get table header, a describe, event rows)."""
    if b"\x00" in head[:4096]:
        return False
    text = head[:65536].decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines()[:60] if ln.strip()]
    if not lines:
        return False
    if _SNIFF.search("\n".join(lines[:5])):
        return True
    keys = {m.group("key") for ln in lines[:40] if ln[:1] not in " \t" and (m := _KEY.match(ln))}
    if len(keys & _DESCRIBE_KEYS) >= 2:
        return True
    rows = sum(
        1
        for ln in lines[:20]
        if _DESCRIBE_ROW.match(ln)
        or _EVENT_ROW.match(ln.strip())
        or _condition_row(ln) is not None
        or (ln[:1] not in " \t" and _pod_row_shape(ln) is not None)
    )
    return rows >= 1 and rows >= len(lines[:20]) // 2


def load_kubectl_observations(path: str | Path) -> dict[str, Any]:
    """Loader hook: ``kube_pods``, ``kube_nodes``, ``kube_events``, ``kube_objects``; ``line_about`` (which
    object each line is about, so that a known message on it names that pod or node); ``events`` from a
    describe's Events table (sandbox failures for KUBELET002 and the cascade)."""
    from clusterdoctor.observe.limits import read_input

    p = Path(path)
    from clusterdoctor.observe.paste import input_origin, numbered

    data = read_input(p)
    origin = input_origin()
    res = parse_kubectl_text(data, str(p), origin)
    if not (res.pods or res.nodes or res.events or res.objects or res.components):
        raise InputError("kubectl output with no row it reads (pods, nodes, events, describe)", str(p), 1)
    lines = dict(numbered(data.decode("utf-8", "replace"), origin))
    out: dict[str, Any] = {"described_as": res.describe()}
    for kind, value in (("kube_pods", res.pods), ("kube_nodes", res.nodes), ("kube_events", res.events),
                        ("kube_objects", res.objects), ("kube_components", res.components)):  # fmt: skip
        if value:
            out[kind] = value
    about = [(str(p), lines[n].strip(), ref) for n, ref in sorted(res.about.items()) if n in lines]
    if about:
        out["line_about"] = about
    if res.events_text:
        from clusterdoctor.observe.control.logs import parse_logs

        try:
            evs = parse_logs("\n".join(t for _, t in res.events_text), str(p)).events
        except InputError:
            evs = []
        if evs:
            out["events"] = evs
    if res.skipped:
        shown = ", ".join(str(n) for n in res.skipped[:8]) + (
            f" and {len(res.skipped) - 8} more" if len(res.skipped) > 8 else ""
        )
        out["warnings"] = [f"{p}: {len(res.skipped)} line(s) are not kubectl output, skipped (line {shown})"]
    return out
