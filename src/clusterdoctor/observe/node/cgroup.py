"""``/proc/<pid>/cgroup`` → the Kubernetes pod (UID, QoS class) and container a process belongs to.

The kubelet names pod cgroups after the pod UID and the container runtime names the container's
cgroup after the container ID. The path shapes (kubelet ``pkg/kubelet/cm/cgroup_manager_linux.go``
and ``qos_container_manager_linux.go``; containerd/CRI-O/Docker scope names; as they appear in
real ``/proc/<pid>/cgroup`` files quoted by node agents such as Kepler, DataDog and NeuVector):

- cgroup v2, systemd driver (the default since Kubernetes 1.25 on most distributions)::

    0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with - as _>.slice/cri-containerd-<id>.scope
    0::/kubepods.slice/kubepods-pod<uid>.slice/crio-<id>.scope                 (Guaranteed QoS)

- cgroup v1, cgroupfs driver::

    11:blkio:/kubepods/burstable/pod<uid>/<64 hex container id>
    4:cpuset:/kubepods/pod<uid>/<id>                                            (Guaranteed)

- cgroup v1, systemd driver: the v2 shape after ``N:controller:``; containerd with
  ``systemd_cgroup`` off puts ``…/kubepods-besteffort-pod<uid>.slice:cri-containerd:<id>``;
- kind and other nested kubelets prefix the path (``/kubelet.slice/kubelet-kubepods…`` or
  ``/system.slice/docker-<node>.scope/kubelet.slice/…``).

Pod UIDs are RFC 4122 UUIDs, except static (mirror) pods whose UID is a 32-hex-digit hash of the
manifest. ``crio-conmon-<id>.scope`` is CRI-O's monitor process, not the container.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PodCgroup", "parse_proc_cgroup", "read_pod_cgroup"]

_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32}"
# systemd driver: kubepods[-qos]-pod<uid>.slice (possibly kubelet-kubepods… when nested)
_SYSTEMD_POD = re.compile(rf"kubepods(?:-(burstable|besteffort))?-pod({_UID})\.slice(?=$|[/:])", re.I)
# cgroupfs driver: /kubepods[/qos]/pod<uid>
_CGROUPFS_POD = re.compile(rf"(?:^|/)kubepods(?:/(burstable|besteffort))?/pod({_UID})(?=$|/)", re.I)
_SCOPE = re.compile(r"(?:^|/)(cri-containerd|crio|docker|containerd)-([0-9a-f]{64})\.scope(?=$|/)", re.I)
_COLON = re.compile(r":(cri-containerd|crio|docker):([0-9a-f]{64})$", re.I)
_CGROUPFS_CONTAINER = re.compile(r"/([0-9a-f]{64})$", re.I)
_CONMON = re.compile(r"crio-conmon-[0-9a-f]{64}\.scope", re.I)


@dataclass(frozen=True)
class PodCgroup:
    """Where a process sits: its pod's UID (canonical, with dashes), QoS class and container."""

    pod_uid: str
    qos: str  # guaranteed | burstable | besteffort
    driver: str  # systemd | cgroupfs
    container_id: str | None  # 64 hex digits, None for a pod-level process (or CRI-O's conmon)
    runtime: str | None  # containerd | cri-o | docker, when the path says
    cgroup_version: int
    path: str

    def as_dict(self) -> dict[str, object]:
        return {
            "pod_uid": self.pod_uid,
            "qos": self.qos,
            "driver": self.driver,
            "container_id": self.container_id,
            "runtime": self.runtime,
            "cgroup_version": self.cgroup_version,
            "path": self.path,
        }


def _canonical_uid(raw: str) -> str:
    return raw.replace("_", "-").lower()


_RUNTIMES = {"cri-containerd": "containerd", "containerd": "containerd", "crio": "cri-o", "docker": "docker"}


def _match_path(path: str, version: int) -> PodCgroup | None:
    m = _SYSTEMD_POD.search(path)
    driver = "systemd"
    if m is None:
        m = _CGROUPFS_POD.search(path)
        driver = "cgroupfs"
    if m is None:
        return None
    qos = (m.group(1) or "guaranteed").lower()
    uid = _canonical_uid(m.group(2))
    rest = path[m.end() :]
    cid = runtime = None
    if not _CONMON.search(rest):
        c = _SCOPE.search(rest) or _COLON.search(rest)
        if c is not None:
            runtime, cid = _RUNTIMES[c.group(1).lower()], c.group(2).lower()
        elif driver == "cgroupfs":
            c2 = _CGROUPFS_CONTAINER.search(rest)
            if c2 is not None:
                cid = c2.group(1).lower()
    return PodCgroup(uid, qos, driver, cid, runtime, version, path)


def parse_proc_cgroup(text: str | bytes) -> PodCgroup | None:
    """The pod of the process whose ``/proc/<pid>/cgroup`` is ``text``; None outside Kubernetes pods.

    Takes the cgroup v2 (``0::``) line when it names a pod, else the first v1 line that does
    (hybrid hosts keep the pod path on the v1 controllers and ``0::/`` on the unified tree).
    Never raises on odd input: a line that is not ``ID:CONTROLLERS:PATH`` is skipped.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    v1: PodCgroup | None = None
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            found = _match_path(path, 2)
            if found is not None:
                return found
        elif v1 is None:
            v1 = _match_path(path, 1)
    return v1


def read_pod_cgroup(pid: int, proc_root: str = "/proc") -> PodCgroup | None:
    """:func:`parse_proc_cgroup` of a live process; None when it is gone or unreadable."""
    try:
        with open(f"{proc_root.rstrip('/')}/{pid}/cgroup", "rb") as fh:
            return parse_proc_cgroup(fh.read(1 << 16))
    except OSError:
        return None
