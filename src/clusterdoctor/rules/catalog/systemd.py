"""systemd's own lines about the services a GPU node or a control-plane node runs, as data: a unit that
failed, exits and is being restarted, or is shown failed by ``systemctl status``.

The unit's own log says why it failed (that message, when pasted, is the cause and ranks first); these
lines say *that* it is not running, which alone already names the layer: no fabric manager (NVSwitch
systems run no CUDA job), no container runtime (the kubelet cannot start pods), no etcd member, no openibd
(no RDMA driver), no subnet manager.

Templates (systemd src/core/unit.c, src/core/service.c, src/systemctl): ``%s: Main process exited,
code=%s, status=%i/%s``; ``%s: Failed with result '%s'.``; older ``Unit %s entered failed state.`` and
``%s failed.``; ``Failed to start %s.`` (the unit's Description; systemd 249+ prints ``<unit> -
<Description>``); ``%s: Scheduled restart job, restart counter is at %u.``; and in ``systemctl status``
``Active: failed (Result: exit-code)`` / ``Active: activating (auto-restart)`` beneath ``● <unit> - ...``.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_SYSTEMD = "https://github.com/systemd/systemd/blob/main/src/core/unit.c"
_EXAMPLE_SRC = "https://github.com/kubernetes/kubelet/issues/9"
# the examples without a thread: systemd's own template (unit.c) filled with the unit's name, not a pasted line
_CONSTRUCTED = (
    "example: systemd's template (src/core/unit.c, service.c) with this unit's name; not a pasted line"
)


def _failed(units: str, descriptions: str) -> tuple[str, tuple[str, ...]]:
    """The pattern and variants of "this unit failed" for a set of unit names and their Descriptions."""
    unit = r"(?P<unit>" + units + r")\.service"
    return (
        unit + r"(?::? (?:[Mm]ain process exited, code=(?:exited|killed|dumped), status=[^\s,]{1,24}"
        r"|Failed with result '[\w-]{1,32}'|Scheduled restart job, restart counter is at \d{1,9})| failed\.)",
        (
            r"Unit " + r"(?P<unit2>" + units + r")\.service entered failed state",
            r"Failed to start (?:(?P<unit3>" + units + r")\.service - )?(?:" + descriptions + r")",
        ),
    )


def _entry(code: str, name: str, what: str, units: str, descriptions: str, **kw: object) -> Message:
    pattern, variants = _failed(units, descriptions)
    defaults: dict[str, object] = dict(
        trigger=".service",
        triggers=("Failed to start ",),
        verify=("systemctl status <unit>", "journalctl -u <unit> -n 100 --no-pager"),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source=_SYSTEMD + " (unit_log_failure, service_enter_dead); src/core/job.c (Failed to start %s.)",
        role="symptom",
        confidence=0.6,
        subject="{unit}.service",
    )
    defaults.update(kw)
    return Message(code=code, name=name, title=f"The {what} service failed or keeps restarting (systemd)",
                   pattern=pattern, variants=variants, **defaults)  # type: ignore[arg-type]  # fmt: skip


MESSAGES: tuple[Message, ...] = (
    _entry(
        "SYSD101",
        "fabricmanager-unit-failed",
        "NVIDIA fabric manager",
        r"nvidia-fabricmanager|nvidia-fabricmanager-start",
        r"NVIDIA fabric manager service",
        meaning="systemd reports the NVSwitch fabric manager service dead or failing: the NVLink fabric is not "
        "configured, so CUDA on an NVSwitch system fails (error 802, system not yet initialized)",
        cause="the fabric manager exits at start: its version differs from the driver's, NVSwitch devices or "
        "its config are missing, or it is installed on a system without NVSwitches (its log names which)",
        fix="read journalctl -u nvidia-fabricmanager; install the fabric manager of exactly the driver's "
        "version, then systemctl restart nvidia-fabricmanager",
        layer="gpu",
        example="nvidia-fabricmanager.service: Main process exited, code=exited, status=1/FAILURE",
        notes=(_CONSTRUCTED,),
        causes=("gpu.fabric-manager",),
    ),
    _entry(
        "SYSD102",
        "container-runtime-unit-failed",
        "container runtime",
        r"containerd|docker|crio|cri-docker",
        r"containerd container runtime|Docker Application Container Engine|Container Runtime Interface for OCI",
        meaning="systemd reports the container runtime's service dead or failing: the kubelet cannot start or "
        "inspect containers (container runtime is down, PLEG not healthy, node NotReady)",
        cause="the runtime exits at start: a config it cannot parse, a full or broken state directory, a "
        "missing shim or runc, a cgroup or storage-driver problem (its log names which)",
        fix="read journalctl -u <runtime>; fix what it names (containerd config default > config.toml to "
        "start from a valid config), then systemctl restart <runtime> and the kubelet",
        layer="kubelet",
        example="Apr 05 05:33:40 node1 systemd[1]: containerd.service: Failed with result 'exit-code'.",
        notes=(_CONSTRUCTED,),
        causes=("kubelet.runtime-down",),
    ),
    _entry(
        "SYSD103",
        "etcd-unit-failed",
        "etcd",
        r"etcd|etcd2|etcd-member",
        r"[Ee]tcd [Ss]erver|etcd key-value store",
        meaning="systemd reports the etcd member's service dead or failing: that member is down",
        cause="etcd exits at start: a data dir it cannot use (removed member, corrupt WAL, wrong cluster), "
        "certificates, a port in use or a full disk (its log names which)",
        fix="read journalctl -u etcd; fix what it names, then systemctl restart etcd; a removed member "
        "rejoins only with an empty data dir (etcdctl member add)",
        layer="etcd",
        example="Apr 23 03:18:37 mn-1 systemd[1]: etcd.service: Main process exited, code=exited, status=1/FAILURE",
        notes=(_CONSTRUCTED,),
        causes=("etcd.member-down",),
    ),
    _entry(
        "SYSD104",
        "kubelet-unit-failed",
        "kubelet",
        r"kubelet|k3s|k3s-agent|snap\.microk8s\.daemon-kubelite",
        r"kubelet: The Kubernetes Node Agent|Lightweight Kubernetes",
        meaning="systemd reports the kubelet's service exiting and being restarted: the node does not run "
        "pods and goes NotReady",
        cause="the kubelet exits at start: its config (cgroup driver differs from the runtime's, swap on, a "
        "missing /var/lib/kubelet/config.yaml before kubeadm init/join), certificates, or the runtime socket "
        "(its log's F-line names which)",
        fix="read journalctl -u kubelet for the line starting with F (failed to run Kubelet: ...), fix what "
        "it names, then systemctl restart kubelet",
        layer="kubelet",
        example="Apr 05 05:33:40 master systemd[1]: kubelet.service: main process exited, code=exited, status=255/n/a",
        example_source=_EXAMPLE_SRC,
        causes=("kubelet.config",),
        confidence=0.4,
    ),
    _entry(
        "SYSD105",
        "rdma-unit-failed",
        "RDMA driver (openibd) or subnet manager",
        r"openibd|opensm|rdma|rdma-load-modules@\w{1,32}",
        r"openibd - configure Mellanox devices|OpenIB Infiniband Subnet Manager|Load RDMA modules",
        meaning="systemd reports the RDMA stack's service (MLNX_OFED's openibd, rdma-core's module loader, or "
        "the OpenSM subnet manager) dead or failing",
        cause="openibd/rdma: the driver modules do not load for this kernel (MLNX_OFED built for another "
        "kernel, an inbox module in the way); opensm: no port it can bind, or a second SM",
        fix="read journalctl -u <unit>; reinstall MLNX_OFED/DOCA for the running kernel (or its DKMS modules) "
        "and restart the unit; for opensm check the port GUID and that one SM runs",
        layer="rdma",
        example="Jun 10 10:00:01 node045 systemd[1]: openibd.service: Failed with result 'exit-code'.",
        notes=(_CONSTRUCTED,),
        causes=("rdma.driver-or-module", "ib.no-subnet-manager"),
    ),
)
