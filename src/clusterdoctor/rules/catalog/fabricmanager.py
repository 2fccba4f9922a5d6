"""The NVSwitch fabric manager (nv-fabricmanager) and what NVLink-fabric failures look like elsewhere.

On NVSwitch systems (HGX/DGX A100, H100, H200, B200) CUDA cannot start until the fabric manager has
trained the NVLink fabric and registered the GPUs with it; its version must equal the driver's. Its
own log lines (``/var/log/fabricmanager.log``, ``journalctl -u nvidia-fabricmanager``), systemd's
lines about the unit, and NCCL's NVLink SHARP (NVLS) failures, which NCCL itself attributes to "a
system or configuration error in the Fabric Manager or NVSwitches", are here. CUDA's error 802 is in
:mod:`clusterdoctor.rules.catalog.cuda`.

Sources: NVIDIA Fabric Manager User Guide (docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide),
NCCL ``src/transport/nvls.cc``; example lines from public threads.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_FM = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html"
_CHECK = ("systemctl status nvidia-fabricmanager", "nvidia-smi -q | grep -A3 Fabric")
# The fabric manager's SXid lines ("detected NVSwitch fatal|non-fatal error <SXid> on fid <f> on NVSwitch
# pci bus id <bdf> physical id <n> port <p>"): one tail and one meaning for FABMGR106 and FABMGR108.
_SXID_TAIL = (
    r"pci bus id (?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
    r"(?: physical id (?P<phys>\d{1,3}))?(?: port (?P<port>\d{1,3}))?"
)
_SXID_COMMON: dict = dict(
    trigger="detected NVSwitch ",
    meaning=(
        "an NVSwitch reported an SXid error on one of its ports; a fatal one stops the port (and the GPUs' "
        "NVLink traffic through it) until the GPUs and switches are reset; a non-fatal one was corrected"
    ),
    cause="a failing NVLink port, cable tray or NVSwitch, or a firmware fault; the SXid code names the unit",
    fix=(
        "drain the node; for a fatal SXid reset the GPUs and NVSwitches (or reboot) and run dcgmi diag -r 3; "
        "if the same port recurs, service the baseboard"
    ),
    verify=(
        "grep -E 'NVSwitch (fatal|non-fatal) error' /var/log/fabricmanager.log",
        "nvidia-smi nvlink -s",
        "dcgmi diag -r 3",
    ),
)

MESSAGES: tuple[Message, ...] = (
    Message(
        code="FABMGR101",
        name="fabric-manager-driver-version-mismatch",
        title="The fabric manager's version does not match the NVIDIA driver's",
        pattern=(
            r"fabric manager NVIDIA GPU driver interface version (?P<fm>[\d.]{3,20}) don'?t match with "
            r"driver version (?P<drv>[\d.]{3,20})"
        ),
        trigger="fabric manager NVIDIA GPU driver interface version",
        meaning="nv-fabricmanager refused to start because its version differs from the loaded driver's",
        cause=(
            "the nvidia-fabricmanager package and the driver were installed or upgraded separately (an OS "
            "image with another driver, an unpinned package, a driver container of another version); the "
            "fabric manager must be exactly the driver's version"
        ),
        fix=(
            "install the nvidia-fabricmanager package of exactly the driver's version (or the driver of the "
            "fabric manager's), pin both, restart nvidia-fabricmanager and reset the GPUs"
        ),
        verify=(*_CHECK, "cat /proc/driver/nvidia/version"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_FM + " (Installation: the fabric manager and the driver versions must match)",
        example=(
            "fabric manager NVIDIA GPU driver interface version 525.85.12 don't match with driver version "
            "530.41.03. Please update with matching NVIDIA driver package"
        ),
        example_source="https://github.com/siderolabs/pkgs/issues/720",
        causes=("gpu.fabric-manager",),
    ),
    Message(
        code="FABMGR102",
        name="fabric-manager-no-nvswitch",
        title="The fabric manager found no NVSwitch to manage (NV_WARN_NOTHING_TO_DO)",
        pattern=(
            r"request to query NVSwitch device information from NVSwitch driver failed with error:"
            r".{0,60}?NV_WARN_NOTHING_TO_DO"
        ),
        trigger="request to query NVSwitch device information from NVSwitch driver failed",
        meaning="nv-fabricmanager exited: the NVSwitch driver reports no switch it could configure",
        cause=(
            "on a system without NVSwitches (PCIe GPUs, NVLink-bridge pairs) the fabric manager is not needed "
            "and fails like this; on Blackwell (NVLink 5) baseboards the NVLink subnet manager (NVLSM) is "
            "missing, so the switches stay uninitialised and CUDA fails with error 802"
        ),
        fix=(
            "without NVSwitches: disable the nvidia-fabricmanager service (it is not needed); on B200/B300 "
            "HGX: install the NVLSM package the fabric manager guide names and start the fabric manager "
            "through nvidia-fabricmanager-start.sh"
        ),
        verify=(*_CHECK, "ls /dev/nvidia-nvswitch*"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_FM,
        example=(
            "11月 15 14:15:47 leon-NF5468M6 nv-fabricmanager[4177]: request to query NVSwitch device information "
            "from NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]"
        ),
        example_source="https://github.com/NVIDIA/gpu-operator/issues/610",
        causes=("gpu.fabric-manager",),
    ),
    Message(
        code="FABMGR103",
        name="fabric-manager-service-failed",
        title="The nvidia-fabricmanager service failed (not running)",
        pattern=(
            r"nvidia-fabricmanager\.service: (?:Failed with result|Control process exited, code=exited, "
            r"status=[1-9]|Main process exited, code=(?:exited, status=[1-9]|killed))"
        ),
        variants=(
            r"Failed to start (?:NVIDIA fabric manager service|nvidia-fabricmanager\.service)",
            r"/usr/bin/nv-fabricmanager(?: -c [\w./-]{1,120})?\" failed! Exit code",
        ),
        trigger="nvidia-fabricmanager.service: ",
        triggers=("Failed to start NVIDIA fabric manager service", "/usr/bin/nv-fabricmanager"),
        meaning="the fabric manager is not running, so the NVSwitch fabric is not (or no longer) managed",
        cause=(
            "nv-fabricmanager exited at start (version mismatch with the driver, no NVSwitch, a bad config "
            "file, missing NVLSM on Blackwell) or was killed; its own log lines say which"
        ),
        fix="read journalctl -u nvidia-fabricmanager and /var/log/fabricmanager.log for the reason and fix it; then restart it and reset the GPUs",
        verify=(*_CHECK, "journalctl -u nvidia-fabricmanager -n 50"),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source=_FM + " (Managing the Fabric Manager Service)",
        example=(
            "11月 15 14:15:47 leon-NF5468M6 systemd[1]: nvidia-fabricmanager.service: Control process exited, "
            "code=exited, status=1/FAILURE"
        ),
        example_source="https://github.com/NVIDIA/gpu-operator/issues/610",
        causes=("gpu.fabric-manager",),
        role="symptom",
    ),
    Message(
        code="FABMGR104",
        name="fabric-manager-config-invalid",
        title="The fabric manager's config file has an invalid value",
        pattern=r"fabric manager config file item: (?P<item>[A-Z_]{2,64}) has an invalid value",
        trigger="fabric manager config file item",
        meaning="nv-fabricmanager refused its configuration file and did not start",
        cause="a setting in fabricmanager.cfg (a path, a topology file) points at something missing or wrong for this platform",
        fix="restore the packaged fabricmanager.cfg or fix the named item (topology file path for this baseboard), then restart it",
        verify=("cat /usr/share/nvidia/nvswitch/fabricmanager.cfg", "systemctl status nvidia-fabricmanager"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_FM + " (Fabric Manager Config Options)",
        example="<node ip>: fabric manager config file item: FABRIC_NODE_CONFIG_FILE has an invalid value",
        example_source="https://github.com/siderolabs/extensions/issues/511",
        causes=("gpu.fabric-manager",),
    ),
    Message(
        code="FABMGR105",
        name="nccl-nvls-multicast-failed",
        title="NCCL cannot set up NVLink SHARP (NVLS) multicast memory: the NVSwitch fabric is not usable",
        pattern=r"transport/nvls\.cc:\d{1,6} NCCL WARN Cuda failure (?:\d{1,4} )?'[^'\n]{1,80}'?",
        variants=(r"Failed to bind NVLink SHARP \(NVLS\) Multicast memory",),
        trigger="nvls.cc",
        triggers=("NVLink SHARP (NVLS) Multicast",),
        meaning="a CUDA multicast call for NCCL's NVLS (NVSwitch) algorithm failed",
        cause=(
            "the NVSwitch fabric is in a bad state for multicast objects: the fabric manager was stopped and "
            "started again without a GPU reset, it is not running, or it and the driver disagree; NCCL: "
            "'usually caused by a system or configuration error in the Fabric Manager or NVSwitches'"
        ),
        fix=(
            "reset the GPUs (or reboot) after any fabric-manager restart and check the fabric manager runs; "
            "NCCL_NVLS_ENABLE=0 works around it at some all-reduce speed"
        ),
        verify=(*_CHECK, "NCCL_NVLS_ENABLE=0 all_reduce_perf -b 8 -e 1G -g 8"),
        severity=Severity.CRITICAL,
        action=Action.RESET_DEVICE,
        source="https://github.com/NVIDIA/nccl/blob/master/src/transport/nvls.cc; " + _FM,
        example="node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
        example_source="https://github.com/NVIDIA/nccl/issues/1488",
        # NCCL prints it: the NCCL corpus names the same cause nccl.fabric-manager
        causes=("gpu.fabric-manager", "nccl.fabric-manager"),
    ),
    Message(
        code="FABMGR106",
        name="fm-nvswitch-fatal-error",
        title="Fabric manager logged a fatal NVSwitch error (SXid): NVLink traffic through that port stops",
        # /var/log/fabricmanager.log: "[ERROR] [tid N] detected NVSwitch fatal error <SXid> on fid <f> on
        # NVSwitch pci bus id <bdf> physical id <n> port <p>"
        pattern=(
            r"detected NVSwitch (?P<kind>fatal) error (?P<sxid>\d{1,6}) on fid \d{1,4} on NVSwitch "
            + _SXID_TAIL
        ),
        **_SXID_COMMON,
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source="https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html",
        example=(
            "[Jul 23 2024 07:53:55] [ERROR] [tid 841] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci "
            "bus id 00000000:86:00.0 physical id 3 port 33"
        ),
        notes=("example: a fabricmanager.log line quoted in leptonai/gpud's fabric manager log reader",),
        causes=("gpu.nvlink-fault",),
        subject="NVSwitch {pci} port {port}",
        detail="(SXid {sxid}, {kind})",
    ),
    Message(
        code="FABMGR107",
        name="fm-topology-mismatch",
        title="Fabric manager aborts: the NVSwitches it found match no supported system topology",
        pattern=r"detected number of NVSwitches don't match with any supported system topology",
        trigger="detected number of NVSwitches",
        meaning=(
            "fabric manager saw fewer (or other) NVSwitches than any HGX/DGX layout it knows and exits: the "
            "NVLink fabric is not configured, so CUDA on the GPUs fails (error 802, system not yet initialized)"
        ),
        cause=(
            "an NVSwitch that did not enumerate (fell off PCIe, failed firmware), a VM or container that passes "
            "only some switches through, or a driver/fabric manager pair that does not know this board"
        ),
        fix=(
            "check that every NVSwitch is on PCIe (lspci | grep -i nvidia: bridge devices), reset or power-cycle "
            "the node; pass all switches to the VM; match the fabric manager and driver versions"
        ),
        verify=("lspci -d 10de: | grep -ci bridge", "systemctl status nvidia-fabricmanager"),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source="https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html",
        example=(
            "[ERROR] [tid 99999] detected number of NVSwitches don't match with any supported system topology, "
            "aborting fabric manager"
        ),
        notes=("example: a fabricmanager.log line quoted in leptonai/gpud's tests",),
        causes=("gpu.fabric-manager",),
    ),
    Message(
        code="FABMGR108",
        name="fm-nvswitch-non-fatal-error",
        title="Fabric manager logged a non-fatal NVSwitch error (SXid, corrected)",
        # /var/log/fabricmanager.log: "[ERROR] [tid N] detected NVSwitch fatal error <SXid> on fid <f> on
        # NVSwitch pci bus id <bdf> physical id <n> port <p>"
        pattern=(
            r"detected NVSwitch (?P<kind>non-fatal) error (?P<sxid>\d{1,6}) on fid \d{1,4} on NVSwitch "
            + _SXID_TAIL
        ),
        **_SXID_COMMON,
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html",
        example=(
            "[Jul 09 2024 18:14:07] [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci "
            "bus id 00000000:86:00.0 physical id 3 port 61"
        ),
        notes=("example: a fabricmanager.log line quoted in leptonai/gpud's fabric manager log reader",),
        causes=("gpu.nvlink-fault",),
        subject="NVSwitch {pci} port {port}",
        detail="(SXid {sxid}, {kind})",
    ),
)
