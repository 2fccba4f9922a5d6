"""What programs say of their own version, as users paste it at the top of an issue: ``k3s -v``,
``kubectl version``, ``kubelet --version``, ``etcd --version``, ``containerd --version``, ``runc
--version``, ``nvcc --version``, ``nvidia-smi --version``, ``nvidia-container-cli --version``,
``ofed_info -s``, ``docker --version``, ``uname -a``, ``python --version``, ``cat /etc/os-release``.

Each line is matched whole against the banners below (never a word inside a log line); a paste is
taken only when **every** line it holds is a banner or a banner's known continuation (etcd's ``Git
SHA:``, nvcc's copyright and build lines, runc's ``commit:``...), after the prompt and command lines
were taken off (:mod:`clusterdoctor.observe.paste`). So a log, a table or ``/etc/ethertypes`` is never
read as versions, and a version line inside a log stays the log's.

The result is :class:`ComponentVersion` records (``component_versions``): the component in lower case
(``kubectl client``, ``kubernetes server``, ``kubelet``, ``k3s``, ``etcd``, ``containerd``, ``cuda
toolkit``, ``nvidia driver``, ``driver cuda``, ``mlnx_ofed``, ``linux kernel`` ...), its version as
printed, the file and the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import numbered

__all__ = ["ComponentVersion", "load_version_banners", "parse_version_banners", "sniff_version_banners"]

_V = r"v?\d{1,5}(?:\.\d{1,6}){1,4}[\w.+~\-]{0,40}"


@dataclass(frozen=True)
class ComponentVersion:
    """One program's version as one line of an input states it."""

    component: str
    version: str
    path: str
    line: int


# (pattern, component or None for the "prog" group, version group); each matched against the whole line
_BANNERS: list[tuple[re.Pattern[str], str | None]] = [
    # kubectl version (1.28+ and the old Go struct form)
    (re.compile(r"^(?P<c>Client|Server) Version: (?P<v>" + _V + r")\s*$"), "kubernetes {c}"),
    (
        re.compile(
            r"^(?P<c>Client|Server) Version: version\.Info\{.{0,200}?GitVersion:\"(?P<v>"
            + _V
            + r")\".{0,400}\}\s*$"
        ),
        "kubernetes {c}",
    ),
    # kubelet --version, kube-apiserver --version
    (re.compile(r"^Kubernetes (?P<v>v\d{1,3}\.\d{1,3}\.\d{1,3}[\w.+\-]{0,40})\s*$"), "kubernetes"),
    # etcd --version / etcdctl version
    (re.compile(r"^etcd Version: (?P<v>" + _V + r")\s*$"), "etcd"),
    (re.compile(r"^etcdctl version: (?P<v>" + _V + r")\s*$"), "etcdctl"),
    # containerd --version: "containerd github.com/containerd/containerd v1.6.21 3dce8eb0..."
    (
        re.compile(
            r"^containerd (?:github\.com/containerd/containerd(?:/v2)?|containerd\.io) (?P<v>" + _V + r")"
            r"(?: [0-9a-f]{7,40})?\s*$"
        ),
        "containerd",
    ),
    # nvcc --version
    (
        re.compile(r"^Cuda compilation tools, release (?P<v>\d{1,3}\.\d{1,3}), V[\d.]{1,20}\s*$"),
        "cuda toolkit",
    ),
    # nvidia-smi --version (r535+)
    (re.compile(r"^NVIDIA-SMI version\s{0,20}: (?P<v>" + _V + r")\s*$"), "nvidia-smi"),
    (re.compile(r"^DRIVER version\s{0,20}: (?P<v>" + _V + r")\s*$"), "nvidia driver"),
    (re.compile(r"^CUDA Version\s{0,20}: (?P<v>\d{1,3}\.\d{1,3})\s*$"), "driver cuda"),
    (re.compile(r"^NVML version\s{0,20}: (?P<v>" + _V + r")\s*$"), "nvml"),
    # ofed_info -s
    (re.compile(r"^MLNX_OFED_LINUX-(?P<v>\d{1,3}\.\d{1,3}-[\d.]{1,20}):?\s*$"), "mlnx_ofed"),
    # Docker version 24.0.5, build ced0996
    (re.compile(r"^Docker version (?P<v>" + _V + r"), build \w{1,40}\s*$"), "docker"),
    # uname -a / uname -r
    (
        re.compile(r"^Linux [\w.\-]{1,253} (?P<v>\d{1,2}\.\d{1,3}\.\d{1,4}[\w.+\-]{0,60}) #.{1,200}$"),
        "linux kernel",
    ),
    (re.compile(r"^Python (?P<v>\d\.\d{1,2}\.\d{1,3}[\w.+]{0,20})\s*$"), "python"),
    # "<program> version <v>" (k3s, runc, git, NVIDIA Container Runtime, nvidia-container-cli, go ...)
    (
        re.compile(
            r"^(?P<prog>[A-Za-z][\w.+\-]{0,40}(?: [A-Za-z][\w.+\-]{0,40}){0,3}) [Vv]ersion:? "
            r"(?P<v>(?:go)?" + _V + r")(?: \(?[0-9a-f]{6,40}\)?)?(?: [\w.\-]{1,40}/[\w.\-]{1,40})?\s*$"
        ),
        None,
    ),
]

# lines that belong to a banner above and say nothing of their own
_CONTINUATION = re.compile(
    r"^(?:"
    r"Git SHA: [0-9a-f]{4,40}|Go Version: go[\d.]{1,20}|Go OS/Arch: [\w/]{3,40}|API version: [\d.]{1,20}"
    r"|Kustomize Version: "
    + _V
    + r"|WARNING: version difference between client \(.{0,40}\) and server.{0,80}"
    r"|nvcc: NVIDIA \(R\) Cuda compiler driver|Copyright \(c\) \d{4}-\d{4} NVIDIA Corporation"
    r"|Built on .{5,60}|Build cuda_[\w./\-]{3,80}"
    r"|commit: [\w.\-]{4,80}|spec: [\w.\-]{1,40}|go: go[\d.]{1,20}|libseccomp: [\d.]{1,20}"
    r"|cli-version: "
    + _V
    + r"|lib-version: "
    + _V
    + r"|build (?:date|revision|compiler|platform|flags): .{1,400}"
    r"|[A-Z][A-Z_]{1,40}=(?:\"[^\"\n]{0,200}\"|[^\s\"]{0,200})"  # /etc/os-release
    r")\s*$"
)
# the command typed on the first line without a prompt, when the paste helper does not know the program
# ("./k3s-armhf -v", "nvcc --version", "uname -a", "cat /etc/os-release"): a program, then a version flag
_COMMAND = re.compile(
    r"^(?:sudo\s+)?[\w./\-]{1,200}(?:\s+[\w\-]{1,40}){0,2}\s+(?:-v|-V|--version|version|-version|-s|-a|-r)\s*$"
    r"|^(?:sudo\s+)?cat\s+/etc/os-release\s*$"
)
# /etc/os-release: the line that names the release
_OS_RELEASE = re.compile(r'^PRETTY_NAME="?(?P<v>[^"\n]{1,200})"?\s*$')


def _match(line: str) -> tuple[str, str] | None:
    for rx, comp in _BANNERS:
        m = rx.match(line)
        if m is None:
            continue
        if comp is None:
            name = m.group("prog").lower()
            return name, m.group("v")
        return comp.format(c=m.groupdict().get("c", "").lower()).strip(), m.group("v")
    m = _OS_RELEASE.match(line)
    if m:
        return "os", m.group("v")
    return None


def parse_version_banners(
    text: str, path: str = "<versions>", origin: list[int] | None = None
) -> list[ComponentVersion]:
    """Every banner line of ``text``; InputError naming the first line that is neither a banner nor a
    banner's continuation (the text is not a version listing), or when no line gives a version."""
    out: list[ComponentVersion] = []
    first = True
    for no, raw in numbered(text, origin):
        line = raw.strip()
        if not line:
            continue
        if first and _COMMAND.match(line):
            first = False
            continue
        first = False
        hit = _match(line)
        if hit is not None:
            out.append(ComponentVersion(hit[0], hit[1], path, no))
        elif not _CONTINUATION.match(line):
            raise InputError(f"line {no} is not a program's version line", path, no)
    if not out:
        raise InputError("no program version line", path)
    return out


def sniff_version_banners(head: bytes, name: str = "") -> bool:
    """True when every line of ``head`` is a version banner or a banner's continuation (and one is a banner)."""
    if b"\x00" in head[:4096] or len(head) > 16384:
        return False
    try:
        parse_version_banners(head.decode("utf-8", "replace"))
    except InputError:
        return False
    return True


def load_version_banners(path: str | Path) -> dict[str, Any]:
    """Read a version listing → ``{"component_versions": [ComponentVersion, ...]}``."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_origin

    p = str(path)
    found = parse_version_banners(read_text(Path(p)), p, origin=input_origin())
    shown = ", ".join(f"{c.component} {c.version}" for c in found[:3]) + (" ..." if len(found) > 3 else "")
    return {"component_versions": found, "described_as": f"program versions ({shown})"}
