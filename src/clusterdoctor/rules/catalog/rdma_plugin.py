"""Kubernetes RDMA device plugins: why a node advertises no RDMA resource, as data.

The Mellanox/NVIDIA RDMA shared device plugin (``k8s-rdma-shared-dev-plugin``) builds each resource
from the PCI network devices its selectors (vendors, deviceIDs, drivers, ifNames, linkTypes) match;
every matched device must carry the RDMA char devices ``rdma_cm``, ``umad`` and ``uverbs`` (and
``issm`` in older releases), else it logs ``error creating new device: "missing RDMA device spec for
device <pci>, RDMA device "<dev>" not found"`` and leaves it out. A resource with nothing left is
served empty ("no devices in device pool, creating empty resource server", "no Rdma Devices were
found for resource"). The plugin refuses to start when the host's RDMA subsystem is in exclusive
network-namespace mode (``rdma system set netns exclusive``). The SR-IOV network device plugin
logs "no devices in device pool, skipping creating resource server for <resource>" when its
selectors match no VF/PF. In every case a pod asking for the resource stays Pending
("Insufficient rdma/...") or gets no /dev/infiniband.

Sources: Mellanox/k8s-rdma-shared-dev-plugin ``pkg/resources`` and ``cmd/k8s-rdma-shared-dp``;
k8snetworkplumbingwg/sriov-network-device-plugin ``cmd/sriovdp/manager.go``; example lines from
public threads (tests/data/infra_pastes/SOURCES.md).
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_RSDP = "https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/blob/master/"
_SRIOV = (
    "https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin/blob/master/cmd/sriovdp/manager.go"
)
_VERIFY_NODE = "kubectl get node <node> -o jsonpath='{.status.allocatable}'"

MESSAGES: tuple[Message, ...] = (
    Message(
        code="RDMADP101",
        name="rdma-plugin-device-without-rdma",
        title="RDMA shared device plugin: a matched NIC has no RDMA char device, left out of the resource",
        pattern=(
            r"missing RDMA device spec for device (?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
            r", RDMA device \\{0,2}\"(?P<dev>\w{1,16})\\{0,2}\" not found"
        ),
        trigger="missing RDMA device spec for device ",
        subject="{pci}",
        detail="no {dev}",
        meaning=(
            "a PCI device that the plugin's selectors matched has no RDMA char device of that name "
            "(rdma_cm, umad, uverbs, issm), so the plugin leaves it out of the resource"
        ),
        cause=(
            "the selectors are too wide (no vendors/deviceIDs: they match an Ethernet-only NIC, a PF "
            "without RDMA or a VF), or the RDMA modules that create the char devices (ib_umad, "
            "ib_uverbs, rdma_ucm) are not loaded on the node, or the device plugin is older than a "
            "host that no longer creates issm"
        ),
        fix=(
            "set vendors and deviceIDs (or ifNames) of the RDMA HCAs in the plugin's ConfigMap, load "
            "ib_umad, ib_uverbs and rdma_ucm (or let the OFED driver container do it), restart the "
            "plugin pods"
        ),
        verify=(
            "ls /sys/bus/pci/devices/<pci>/infiniband* /dev/infiniband",
            "lsmod | grep -E 'ib_umad|ib_uverbs|rdma_ucm'",
            _VERIFY_NODE,
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_RSDP + "pkg/resources/pci_net_device.go",
        example=(
            '2025/07/26 20:29:31 error creating new device: "missing RDMA device spec for device '
            '0000:16:00.0, RDMA device \\"rdma_cm\\" not found"'
        ),
        example_source="https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/192",
        causes=("rdma.device-plugin",),
    ),
    Message(
        code="RDMADP102",
        name="rdma-plugin-netns-exclusive",
        title="RDMA shared device plugin exits: the RDMA subsystem is in exclusive netns mode",
        pattern=r"incorrect RDMA subsystem network namespace",
        trigger="incorrect RDMA subsystem network namespace",
        subject="{host}|k8s-rdma-shared-dev-plugin",
        meaning=(
            "the plugin checks the host's RDMA network-namespace mode at start and exits because it is "
            "exclusive: a shared RDMA device cannot be given to pods in other namespaces"
        ),
        cause=(
            "the host runs `rdma system set netns exclusive` (set by hand, by a modprobe option "
            "ib_core netns_mode=0, or by an SR-IOV/exclusive-mode setup), which the shared plugin "
            "does not support"
        ),
        fix=(
            "set the mode back to shared (rdma system set netns shared; remove ib_core netns_mode=0 "
            "from modprobe.d), or use the SR-IOV device plugin for exclusive RDMA; restart the pods"
        ),
        verify=("rdma system", "kubectl logs -n kube-system <rdma-shared-dp pod>"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_RSDP + "pkg/resources/resources_manager.go",
        example="2023/09/08 17:43:19 Exiting.. can not change : incorrect RDMA subsystem network namespace",
        example_source="https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/84",
        causes=("rdma.device-plugin",),
    ),
    Message(
        code="RDMADP103",
        name="rdma-plugin-empty-resource",
        title="RDMA shared device plugin serves a resource with no device (its selectors match none)",
        pattern=(
            r"(?:no Rdma Devices were found for resource|no devices in device pool, creating empty "
            r"resource server for) (?P<resource>[\w./-]{1,80})"
        ),
        trigger="no Rdma Devices were found for resource",
        triggers=("creating empty resource server for",),
        subject="{resource}",
        meaning=(
            "no device passed the resource's selectors (or every one lacked RDMA char devices), so the "
            "resource is advertised with zero devices and pods that request it stay Pending"
        ),
        cause=(
            "selectors that match nothing on this node (wrong vendor/deviceID, an ifName that does not "
            "exist here, a linkType of the other port mode), or matched NICs without RDMA"
        ),
        fix=(
            "compare the selectors with `lspci -nn -d 15b3:` and `ip -br link` on the node, fix the "
            "plugin's ConfigMap and restart its pods"
        ),
        verify=("lspci -nn -d 15b3:", "rdma link show", _VERIFY_NODE),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_RSDP + "pkg/resources/server.go",
        example="2023/09/02 06:23:37 Warning: no Rdma Devices were found for resource hpc_shared_devices_e",
        example_source="https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/44",
        causes=("rdma.device-plugin",),
    ),
    Message(
        code="RDMADP104",
        name="sriov-plugin-empty-pool",
        title="SR-IOV device plugin: no device matches a resource's selectors (resource not advertised)",
        pattern=r"no devices in device pool, skipping creating resource server for (?P<resource>[\w./-]{1,80})",
        trigger="no devices in device pool, skipping creating resource server for",
        subject="{resource}",
        meaning=(
            "the SR-IOV network device plugin found no PF/VF that its resource's selectors match, so it "
            "does not create that resource and the node does not advertise it"
        ),
        cause=(
            "no VFs created (sriov_numvfs is 0, or VFs were created after the plugin started), VFs "
            "bound to another driver than the selector's (iavf/mlx5_core/vfio-pci), a deviceID of the "
            "PF instead of the VF, or pfNames/rootDevices of another node; a node without SR-IOV NICs "
            "logs it too"
        ),
        fix=(
            "create the VFs (echo N > /sys/class/net/<pf>/device/sriov_numvfs), check the VF's "
            "vendor:device and driver (lspci -nnk) against the selectors, then restart the plugin pod"
        ),
        verify=("lspci -nnk -d 15b3:", "cat /sys/class/net/<pf>/device/sriov_numvfs", _VERIFY_NODE),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_SRIOV,
        example=(
            "I0401 06:54:11.257448       1 manager.go:130] no devices in device pool, skipping creating "
            "resource server for intel_sriov_netdevice"
        ),
        example_source="https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin/issues/340",
        causes=("rdma.device-plugin", "rdma.vf-config"),
        confidence=0.6,  # logged too for resources this node has no device for (often by design)
    ),
    Message(
        code="RDMADP105",
        name="sriov-plugin-no-rdma-resources",
        title="SR-IOV device plugin: a device of an isRdma resource has no RDMA device (modules not loaded)",
        pattern=(
            r"RDMA resources for (?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) not found\. "
            r"Are RDMA modules loaded\?"
        ),
        trigger="not found. Are RDMA modules loaded?",
        subject="{pci}",
        meaning=(
            "the plugin found no RDMA device (no /sys/bus/pci/devices/<pci>/infiniband) for a PF/VF that an "
            "isRdma resource selects, so it leaves the device out of that resource"
        ),
        cause=(
            "the RDMA kernel modules are not loaded for it (mlx5_ib, ib_uverbs, rdma_ucm; the OFED driver "
            "container not ready when the plugin started), the VF's RDMA device was moved into another "
            "network namespace, or the device has no RDMA function at all"
        ),
        fix=(
            "load mlx5_ib, ib_uverbs and rdma_ucm (or wait for the OFED driver pod), check `rdma link` lists "
            "the device, then restart the plugin pod; select only RDMA-capable devices for isRdma resources"
        ),
        verify=(
            "ls /sys/bus/pci/devices/<pci>/infiniband",
            "lsmod | grep -E 'mlx5_ib|ib_uverbs|rdma_ucm'",
            "rdma link",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin/blob/master/pkg/auxnetdevice/auxNetDevice.go",
        example=(
            "W0506 16:33:56.878928       1 pciNetDevice.go:55] RDMA resources for 0000:01:00.1 not found. Are "
            "RDMA modules loaded?"
        ),
        example_source="https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin/issues/424",
        causes=("rdma.device-plugin", "rdma.driver-or-module"),
    ),
    Message(
        code="RDMADP106",
        name="ib-sriov-cni-vf-guid-invalid",
        title="IB SR-IOV CNI refuses a VF whose GUID was never set (all zeros): the pod sandbox fails",
        # k8snetworkplumbingwg/ib-sriov-cni pkg/sriov/sriov.go ApplyVFConfig: with no GUID in the network
        # config the VF's own GUID is used, and an unset one (00:00:00:00:00:00:00:00) is refused as
        # "VF %s GUID is not valid"; cmdAdd wraps it as "infiniBand SRI-OV CNI failed to configure VF %q"
        pattern=r"VF (?P<vf>[\w.\-]{1,64}) GUID is not valid",
        trigger="GUID is not valid",
        subject="{vf}",
        meaning=(
            "the InfiniBand SR-IOV CNI found that the VF given to the pod has no valid node/port GUID and "
            "would not configure it, so the pod's network (and its sandbox) is never created"
        ),
        cause=(
            "the IB VFs still carry the uninitialised GUID 00:00:00:00:00:00:00:00: nothing assigned them one "
            "(sriov-network-config-daemon skipped them, ib-kubernetes is not deployed or gave no GUID, or the "
            "VFs were re-created after the GUIDs were set)"
        ),
        fix=(
            "give every IB VF a GUID (let the SR-IOV operator's config daemon assign them, run ib-kubernetes, "
            "or ip link set <pf> vf <n> node_guid <guid> port_guid <guid> and rebind the VF), then recreate the pod"
        ),
        verify=(
            "ip link show <pf>   # each vf: node guid / port guid not 00:00:00:00:00:00:00:00",
            "kubectl describe pod <pod>   # no FailedCreatePodSandBox",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/k8snetworkplumbingwg/ib-sriov-cni/blob/master/pkg/sriov/sriov.go",
        example=(
            'error adding container to network "ibp192s0": infiniBand SRI-OV CNI failed to configure VF '
            '"VF ibp192s0v10 GUID is not valid"'
        ),
        example_source="https://github.com/Mellanox/network-operator/issues/1825",
        causes=("rdma.vf-config",),
    ),
)
