"""Three RDMA-stack messages, as data: UCX's UD transport giving up on an endpoint, libibumad finding
no ``ib_umad`` kernel interface (what NVLink 5's subnet manager, NVLSM, and the IB diagnostics need),
and NVSHMEM failing to build its transport map at initialisation.

Part of the ib family: :mod:`clusterdoctor.rules.catalog.ib` merges these entries into its ``MESSAGES``
in code order. Example lines are from public issue threads, each named in ``example_source``.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

UCX_UMAD_MESSAGES: tuple[Message, ...] = (
    Message(
        code="IB176",
        name="ucx-ud-endpoint-timeout",
        title="UCX's UD transport timed out an endpoint: packets to the peer are not delivered",
        # src/uct/ib/ud/base/ud_iface.c: "Fatal: transport error: Endpoint timeout" (ucs_fatal on a UD
        # endpoint whose retransmissions got no answer within UCX_UD_TIMEOUT)
        pattern=r"ud_(?:iface|ep)\.c:\d{1,5}\s{1,20}Fatal: transport error: Endpoint timeout",
        trigger="Fatal: transport error: Endpoint timeout",
        meaning=(
            "UCX's unreliable-datagram transport (used to wire up and for UD traffic) retransmitted to a peer "
            "for the whole UD timeout without an answer and aborted the process"
        ),
        cause=(
            "the peer is not reachable over the fabric at the address UCX uses: on RoCE, a GID index of RoCE v1 "
            "or of the wrong subnet where the switches route between leaves (RoCE v2 needed: UCX_IB_GID_INDEX), "
            "a VLAN/PFC mismatch; on IB, a port or partition problem; a peer that died first"
        ),
        fix=(
            "on RoCE set UCX_IB_GID_INDEX to the RoCE v2 GID of the interface's address (show_gids; often 3) "
            "on every node, check that the nodes reach each other over that interface (ping, ib_send_bw -x), "
            "and look for a peer that failed earlier"
        ),
        verify=("show_gids", "ucx_info -d | grep -i gid", "ib_send_bw -x <gid index> <peer>"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/openucx/ucx/blob/master/src/uct/ib/ud/base/ud_iface.c",
        example=(
            "Tue Apr 10 02:29:25 2018[1,383]<stderr>:[clx-orion-095:15382:0:15382]    ud_iface.c:781  Fatal: "
            "transport error: Endpoint timeout"
        ),
        example_source="https://github.com/openucx/ucx/issues/2501",
        causes=("roce.gid", "rdma.retry-exceeded"),
        confidence=0.7,
    ),
    Message(
        code="IB177",
        name="ib-umad-module-not-loaded",
        title="libibumad finds no umad interface: the ib_umad kernel module is not loaded",
        # rdma-core libibumad/umad.c: "can't read ABI version from %s/%s (%m): is ib_umad module loaded?"
        pattern=(
            r"umad_init: can't read ABI version from (?P<file>/sys/class/infiniband_mad/abi_version)"
            r"(?: \((?P<err>[^)\n]{1,80})\))?: is ib_umad module loaded\?"
        ),
        trigger="is ib_umad module loaded?",
        meaning=(
            "a program that talks to the fabric through management datagrams (opensm, NVLSM, ibstat, "
            "ibnetdiscover, perfquery) cannot open /dev/infiniband/umad*: the kernel exposes no umad interface"
        ),
        cause=(
            "the ib_umad kernel module is not loaded (not in the image's module list, not auto-loaded in a "
            "minimal or immutable OS); on NVLink 5 (GB200/B200) systems the fabric manager's NVLink subnet "
            "manager (NVLSM) needs it, so the fabric manager fails and the GPUs stay unavailable"
        ),
        fix=(
            "load the module (modprobe ib_umad) and make it persistent (/etc/modules-load.d, the OS's "
            "kernel-module extension list), then restart the subnet manager or fabric manager"
        ),
        verify=(
            "lsmod | grep ib_umad",
            "ls /sys/class/infiniband_mad/",
            "systemctl status nvidia-fabricmanager",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/linux-rdma/rdma-core/blob/master/libibumad/umad.c",
        example=(
            "10.0.0.101: nvlsm: ibwarn: [15] umad_init: can't read ABI version from "
            "/sys/class/infiniband_mad/abi_version (No such file or directory): is ib_umad module loaded?"
        ),
        example_source="https://github.com/siderolabs/docs/pull/581",
        causes=("rdma.driver-or-module", "gpu.fabric-manager"),
    ),
    Message(
        code="IB178",
        name="nvshmem-transport-map-failed",
        title="NVSHMEM cannot build its transport map: no transport reaches the other PEs",
        # src/host/init/init.cu: "building transport map failed" (nvshmemi_build_transport_map), then
        # "nvshmem initialization failed, exiting"
        pattern=r"init\.cu:\d{1,6}: non-zero status: (?P<status>-?\d{1,4}) building transport map failed",
        trigger="building transport map failed",
        meaning=(
            "at initialisation NVSHMEM found no usable transport (P2P inside the node, IB/ibgda/libfabric between "
            "nodes) to some processing elements, so every PE exits"
        ),
        cause=(
            "its remote transport could not start: most often GPUDirect RDMA is unavailable (the nvidia-peermem "
            "module not loaded, DMA-BUF unsupported), or the HCAs are not visible to the process (container "
            "without /dev/infiniband, NVSHMEM_HCA_LIST / NVSHMEM_REMOTE_TRANSPORT pointing elsewhere)"
        ),
        fix=(
            "modprobe nvidia-peermem (the GPU operator: driver.rdma.enabled=true) on every node, give the "
            "container the RDMA devices, and rerun with NVSHMEM_DEBUG=INFO to see which transport failed"
        ),
        verify=(
            "lsmod | grep -E 'nvidia_peermem|nv_peer_mem'",
            "NVSHMEM_DEBUG=INFO <the job>",
            "ibv_devinfo",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://docs.nvidia.com/nvshmem/api/gen/env.html",
        example="/sgl-workspace/nvshmem/src/host/init/init.cu:998: non-zero status: 7 building transport map failed",
        example_source="https://github.com/deepseek-ai/DeepEP/issues/223",
        causes=("rdma.driver-or-module", "nccl.gdr-or-plugin"),
        confidence=0.6,
    ),
)
