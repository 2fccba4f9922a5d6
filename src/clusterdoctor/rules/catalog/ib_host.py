"""The host's RDMA stack, as data: the mlx5 driver (its health poller, port module events, DEVX),
user space (libibverbs' provider configuration, librdmacm), perftest, and NCCL's libfabric plugin
(aws-ofi-nccl). The verbs and NCCL transport messages themselves are :mod:`clusterdoctor.rules.catalog.ib`.

Sources: Linux ``drivers/net/ethernet/mellanox/mlx5/core`` (health.c, events.c), openucx/ucx
``src/uct/ib/mlx5``, linux-rdma/rdma-core (libibverbs, librdmacm examples), linux-rdma/perftest,
aws/aws-ofi-nccl; example lines from public threads.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_UCX = "https://github.com/openucx/ucx/blob/master/src"
_VERBS = "https://github.com/linux-rdma/rdma-core/blob/master/libibverbs"

MESSAGES: tuple[Message, ...] = (
    # --- mlx5 DEVX (UCX and other direct-verbs users) ------------------------------------------------------
    Message(
        code="IB151",
        name="mlx5-devx-not-supported",
        title="An mlx5 DEVX call is not supported by the kernel driver (user-space / kernel OFED mismatch)",
        pattern=(
            r"mlx5dv_devx_\w{1,48}\(\w{0,32}\) failed(?:, syndrome (?:0x)?[0-9a-fA-F]{1,10})?: "
            r"(?P<err>Protocol not supported|Operation not supported|Function not implemented)"
        ),
        trigger="mlx5dv_devx_",
        meaning=(
            "a direct-verbs (DEVX) call of the mlx5 provider was refused with EPROTONOSUPPORT/EOPNOTSUPP/ENOSYS: "
            "the kernel's mlx5_ib does not offer the interface the user-space library asked for"
        ),
        cause=(
            "user-space RDMA libraries newer than the kernel driver: MLNX_OFED 5 (or a new rdma-core) in a "
            "container on a host with MLNX_OFED 4 or an old inbox mlx5_ib; or DEVX disabled for the process"
        ),
        fix=(
            "use matching user-space and kernel RDMA stacks (the same MLNX_OFED/DOCA major version in the image "
            "and on the host, or inbox rdma-core with a recent kernel); for UCX, UCX_IB_MLX5_DEVX=n avoids DEVX"
        ),
        verify=("ofed_info -s (host and container)", "modinfo mlx5_ib | grep -i version", "ucx_info -d"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_UCX + "/uct/ib/mlx5/rc/rc_mlx5_devx.c",
        example="mlx5dv_devx_create_event_channel() failed: Protocol not supported",
        example_source="https://github.com/openucx/ucx/issues/6906",
        causes=("rdma.driver-or-module",),
    ),
    # --- perftest ---------------------------------------------------------------------------------------
    Message(
        code="IB152",
        name="perftest-modify-qp-rtr",
        title="perftest could not connect its queue pair (Failed to modify QP to RTR)",
        pattern=r"Failed to modify QP (?:\d{1,10}|0x[0-9a-fA-F]{1,8}) to RTR",
        trigger="to RTR",
        meaning=(
            "ibv_modify_qp to Ready-To-Receive was refused: the remote address the two ends exchanged (LID, "
            "GID, QPN) or the path attributes (MTU, GID index) are not valid for this port"
        ),
        cause=(
            "on RoCE a GID index without an address (an all-zero GID, a link-local GID across subnets) or "
            "unequal GID indexes on the two ends; on InfiniBand a port without a LID (no subnet manager); an "
            "MTU larger than the port's"
        ),
        fix=(
            "compare the GID and LID lines both sides print; on RoCE pick the RoCE v2 GID of the netdev's IP "
            "(show_gids, perftest -x <index>); on IB check the port is Active with a LID"
        ),
        verify=(
            "show_gids",
            "ibv_devinfo -v | grep -E 'state|GID|port_lid'",
            "ib_write_bw -d <dev> -x <gid index>",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/linux-rdma/perftest/blob/master/src/perftest_resources.c",
        example="Failed to modify QP 59 to RTR",
        example_source="https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/72",
        causes=("roce.gid", "ib.no-subnet-manager"),
        confidence=0.6,
    ),
    # --- mlx5_core health poller (drivers/net/ethernet/mellanox/mlx5/core/health.c) ----------------------
    Message(
        code="IB153",
        name="mlx5-health-compromised",
        title="The ConnectX firmware stopped responding (mlx5_core health poll: device's health compromised)",
        pattern=(
            r"(?:mlx5_core (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): )?"
            r"(?:poll_health:\d{1,5}:(?:\(pid \d{1,10}\):)? )?device's health compromised - reached miss count"
        ),
        trigger="device's health compromised",
        triggers=("Fatal error ",),
        variants=(
            r"mlx5_core (?P<pci2>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): "
            r"(?:\w{1,32}:\d{1,5}:(?:\(pid \d{1,10}\):)? )?Fatal error \d{1,3} detected",
        ),
        meaning=(
            "the driver's health poller saw the HCA's health counter stop (its firmware no longer runs) or a "
            "fatal sensor: the adapter is dead until it is reset; every QP on it fails and jobs hang"
        ),
        cause="an HCA firmware assert or hang (the synd line names it: irisc not responding, firmware internal error), a PCIe fault, overheating",
        fix=(
            "drain the node; let mlx5 recover it (devlink health) or reset the adapter (mlxfwreset) / reboot; "
            "update the firmware if the synd recurs; replace the card if it keeps failing"
        ),
        verify=(
            "dmesg -T | grep -E 'mlx5_core.*(health|synd|assert)'",
            "devlink health show",
            "mlxfwmanager --query",
        ),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source="https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/core/health.c",
        example="[198542.853543] mlx5_core 0000:5e:00.0: device's health compromised - reached miss count",
        example_source="https://github.com/charmplusplus/charm/issues/2635",
        causes=("rdma.hca-fault",),
        subject="{pci}",
    ),
    # --- aws-ofi-nccl (NCCL's libfabric plugin: EFA) --------------------------------------------------------
    Message(
        code="IB154",
        name="ofi-no-provider",
        title="aws-ofi-nccl found no libfabric provider (fi_getinfo: No data available): no EFA device usable",
        pattern=r"OFI fi_getinfo\(\) call failed: No data available",
        trigger="fi_getinfo() call failed",
        meaning=(
            "libfabric returned FI_ENODATA: no provider (EFA, or the one FI_PROVIDER names) offers the "
            "capabilities the plugin asked for, so NCCL's OFI network plugin fails to initialise"
        ),
        cause=(
            "the container or pod does not see the EFA devices (/dev/infiniband/uverbs* not passed in, no "
            "vpc.amazonaws.com/efa resource requested), the EFA driver/libfabric is not installed, or "
            "FI_PROVIDER names a provider that is absent"
        ),
        fix=(
            "pass the devices into the container (docker --device /dev/infiniband/..., or request "
            "vpc.amazonaws.com/efa in the pod), install the EFA software on the host, and check "
            "fi_info -p efa lists providers"
        ),
        verify=("fi_info -p efa", "ls /dev/infiniband", "cat /sys/class/infiniband/*/device/uevent"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/aws/aws-ofi-nccl/blob/master/src/nccl_ofi_ofiutils.c",
        example=(
            "[2025-10-16 22:16:08] ip-172-31-3-90:1929:1937 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI "
            "OFI fi_getinfo() call failed: No data available"
        ),
        example_source="https://github.com/aws/aws-ofi-nccl/issues/1020",
        causes=("rdma.container-access", "rdma.driver-or-module"),
    ),
    Message(
        code="IB155",
        name="mlx5-devx-no-memory",
        title="The HCA refused to create a QP/CQ through DEVX: out of device resources (Cannot allocate memory)",
        pattern=(
            r"mlx5dv_devx_obj_create\((?P<obj>\w{1,16})\) failed, syndrome (?:0x)?[0-9a-fA-F]{1,10}: "
            r"Cannot allocate memory"
        ),
        trigger="mlx5dv_devx_obj_create(",
        meaning=(
            "creating a hardware object (QP, CQ, SRQ, MKEY) through DEVX failed with ENOMEM: the adapter or "
            "its driver has no room for another one of them"
        ),
        cause=(
            "the job asks for more hardware queues than the HCA offers: many ranks per node times UCX paths "
            "(UCX_IB_NUM_PATHS), tag-matching offload (UCX_RC_MLX5_TM_ENABLE) or RC to every peer; less often "
            "a low locked-memory limit"
        ),
        fix=(
            "use fewer hardware resources per process: the DC transport instead of RC (UCX_TLS=dc_x), fewer "
            "paths, no tag-matching offload; check ulimit -l is unlimited"
        ),
        verify=("ibv_devinfo -v | grep -E 'max_qp|max_cq'", "ulimit -l", "ucx_info -d"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_UCX + "/uct/ib/mlx5/dv/ib_mlx5_dv.c",
        example="ib_mlx5_dv.c:161  UCX  ERROR   mlx5dv_devx_obj_create(QP) failed, syndrome 0: Cannot allocate memory",
        example_source="https://github.com/openucx/ucx/issues/5351",
        causes=("rdma.resource-limit", "rdma.memlock"),
    ),
    Message(
        code="IB156",
        name="verbs-no-config-directory",
        title="libibverbs has no provider configuration directory (the provider packages are not installed)",
        pattern=r"libibverbs: Warning: couldn't open config directory '(?P<dir>[^'\n]{1,200})'",
        trigger="couldn't open config directory",
        meaning=(
            "libibverbs found no libibverbs.d directory, so it loads no device provider (mlx5, efa, rxe ...) and "
            "every program sees no RDMA device (ibv_devinfo: No IB devices found)"
        ),
        cause=(
            "rdma-core's providers (Debian/Ubuntu ibverbs-providers, RHEL libibverbs) are not installed in the "
            "image or host, or libibverbs was built with another sysconfdir than the packages use"
        ),
        fix="install the provider package (ibverbs-providers / rdma-core) in the image; check /etc/libibverbs.d lists your device's driver",
        verify=("ls /etc/libibverbs.d", "ibv_devices"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_VERBS}/dynamic_driver.c",
        example="  libibverbs: Warning: couldn't open config directory '/etc/libibverbs.d'.",
        example_source="https://github.com/dsx-ai-factory/infra-controller/pull/5251",
        causes=("rdma.driver-or-module",),
    ),
    Message(
        code="IB157",
        name="rdma-cm-address-error",
        title="RDMA CM could not resolve the address to an RDMA device (RDMA_CM_EVENT_ADDR_ERROR)",
        pattern=r"cma event RDMA_CM_EVENT_ADDR_ERROR, error (?P<status>-?\d{1,4})",
        trigger="RDMA_CM_EVENT_ADDR_ERROR",
        meaning=(
            "rdma_resolve_addr failed: the IP address given does not map to an RDMA-capable netdev reachable "
            "from this network namespace (error -19 ENODEV: no RDMA device for it; -110: ARP/route timed out)"
        ),
        cause=(
            "the address is not on a RoCE/IPoIB interface, or the process runs in a network namespace whose "
            "netdev the RDMA stack does not bind (RoCE in containers needs kernel 4.19+ / a netns-aware "
            "MLNX_OFED), or the device is in exclusive netns mode elsewhere"
        ),
        fix=(
            "use the IP address of the RDMA interface; for containers use a kernel and OFED that support RoCE "
            "in network namespaces (rdma system set netns shared/exclusive as the plugin needs)"
        ),
        verify=("ibdev2netdev", "rdma system show", "uname -r"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/linux-rdma/rdma-core/blob/master/librdmacm/examples/rping.c",
        example="cma event RDMA_CM_EVENT_ADDR_ERROR, error -19",
        example_source="https://github.com/Mellanox/docker-sriov-plugin/issues/11",
        causes=("rdma.driver-or-module", "rdma.container-access"),
    ),
    Message(
        code="IB158",
        name="mlx5-cable-unplugged",
        title="A ConnectX port reports no cable (mlx5 port module event: Cable unplugged)",
        pattern=(
            r"(?:mlx5_core (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): )?"
            r"Port module event(?:\[error\])?: module (?P<module>\d{1,3}), Cable (?P<state>unplugged|error)"
        ),
        trigger="Port module event",
        meaning="the adapter's module (QSFP/OSFP cage) has no cable or transceiver detected, or reports it in error: that port has no link",
        cause=(
            "nothing plugged into an unused port (normal at boot), a cable or transceiver pulled or not seated, "
            "an unsupported or failed module, or a cage without power"
        ),
        fix="if the port should carry traffic: reseat or replace the cable/transceiver and check it is supported (mlxlink -d <dev> -m)",
        verify=("mlxlink -d <pci> -m", "ibstat", "ip link"),
        severity=Severity.INFO,
        action=Action.REPLACE_HARDWARE,
        source="https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/core/events.c",
        example="[   12.413002] mlx5_core 0000:08:00.0: Port module event: module 0, Cable unplugged",
        notes=("example: a boot dmesg quoted in a public hardware bring-up log",),
        causes=("ib.port-down",),
        subject="{pci}",
        role="symptom",
        confidence=0.5,
    ),
    Message(
        code="IB159",
        name="nvshmem-no-peermem",
        title="NVSHMEM skips its InfiniBand transport: no GPU peer-memory module (nvidia_peermem) is loaded",
        pattern=r"neither nv_peer_mem, or nvidia_peermem detected",
        trigger="neither nv_peer_mem, or nvidia_peermem detected",
        meaning=(
            "NVSHMEM's ibrc/ibgda transport needs the HCA to reach GPU memory; it found no peer-memory module "
            "and skipped the transport, so no inter-node NVSHMEM traffic is possible"
        ),
        cause=(
            "the nvidia-peermem kernel module (or the legacy nv_peer_mem) is not loaded on the node, or it "
            "failed to load against the running RDMA core; DMA-BUF was not usable either"
        ),
        fix=(
            "modprobe nvidia-peermem (the GPU operator: driver.rdma.enabled=true) and make it load at boot; or "
            "use a kernel and driver where DMA-BUF works (NVSHMEM_IB_ENABLE_DMABUF)"
        ),
        verify=("lsmod | grep -E 'nvidia_peermem|nv_peer_mem'", "modprobe nvidia-peermem && dmesg | tail"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://docs.nvidia.com/nvshmem/release-notes-install-guide/install-guide/abstract.html "
        "(NVSHMEM ibrc transport: src/modules/transport/ibrc/ibrc.cpp)",
        example="neither nv_peer_mem, or nvidia_peermem detected. Skipping transport.",
        example_source="https://github.com/deepseek-ai/DeepEP/pull/151",
        causes=("rdma.driver-or-module",),
    ),
    Message(
        code="IB160",
        name="gpu-mr-register-failed",
        title="A verbs program could not register GPU memory with the HCA (Couldn't register GPU MR)",
        pattern=r"Couldn't register GPU MR",
        trigger="Couldn't register GPU MR",
        meaning="ibv_reg_mr on a cudaMalloc buffer failed: the HCA cannot map GPU memory",
        cause=(
            "GPUDirect RDMA is not available: the nvidia-peermem (nv_peer_mem) module is not loaded or was "
            "built against another RDMA core, or the GPU does not support peer mappings"
        ),
        fix="load nvidia-peermem (modprobe nvidia-peermem; rebuild it after installing MLNX_OFED) and retry",
        verify=("lsmod | grep -E 'nvidia_peermem|nv_peer_mem'", "dmesg | grep -i peer"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/Mellanox/gpu_direct_rdma_access (gpu_direct_rdma_access.c: ibv_reg_mr of the GPU buffer)",
        example="Couldn't register GPU MR",
        example_source="https://github.com/Mellanox/gpu_direct_rdma_access/issues/5",
        causes=("rdma.driver-or-module",),
        confidence=0.8,
    ),
    Message(
        code="IB161",
        name="ompi-create-cq-failed",
        title="Open MPI could not create a verbs completion queue of the size it asked for",
        # help-mpi-btl-openib.txt [init-fail-create-q]: "Failed to create a completion queue (CQ):"
        # ... "Requested CQE: %d" "Error: %s" "Check the CQE attribute."
        pattern=r"Failed to create a completion queue \(CQ\)",
        trigger="Failed to create a completion queue (CQ)",
        meaning="ibv_create_cq failed when Open MPI (openib BTL, or UCX under it) set up its queues",
        cause=(
            "the requested CQ depth is larger than the device allows (max_cqe in ibv_devinfo -v), or the "
            "driver ran out of memory for it (locked-memory limit, too many queues per process)"
        ),
        fix=(
            "lower the CQ size (btl_openib_cq_size, UCX_RC_TX_CQ_LEN/UCX_RC_RX_QUEUE_LEN) to at most max_cqe; "
            "check ulimit -l is unlimited"
        ),
        verify=("ibv_devinfo -v | grep max_cqe", "ulimit -l"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/open-mpi/ompi/blob/v4.1.x/opal/mca/btl/openib/help-mpi-btl-openib.txt "
        "([init-fail-create-q])",
        example="Failed to create a completion queue (CQ):",
        example_source="https://github.com/openucx/ucx/issues/551",
        causes=("rdma.resource-limit",),
    ),
    Message(
        code="IB162",
        name="vma-mem-reg-failed",
        title="libvma could not register its buffer pool with the HCA (low MTT entries)",
        pattern=r"Failure in mem_reg: [^\n]{0,300}?ibv_dev=(?P<hca>\w{1,32})",
        trigger="Failure in mem_reg: ",
        meaning="registering VMA's buffer memory (ibv_reg_mr) failed on the device",
        cause=(
            "the HCA driver's memory translation table is too small for the memory VMA registers (mlx4: "
            "log_num_mtt / log_mtts_per_seg), or the locked-memory limit is below it"
        ),
        fix=(
            "raise the MTT size (mlx4_core log_num_mtt, log_mtts_per_seg in /etc/modprobe.d and reload), lower "
            "VMA's buffer counts (VMA_RX_BUFS, VMA_TX_BUFS), and set ulimit -l unlimited"
        ),
        verify=("cat /sys/module/mlx4_core/parameters/log_num_mtt", "ulimit -l"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/Mellanox/libvma/blob/master/README.txt (low MTT entries); "
        "src/vma/dev/ib_ctx_handler_collection.cpp",
        example=(
            " VMA WARNING: ib_ctx_collection89:mem_reg_on_all_devices() Failure in mem_reg: addr=0x2aaaab200000, "
            "length=372800063, mr_pos=0, mr_array[mr_pos]=0, dev=0x74a540, ibv_dev=mlx4_0"
        ),
        example_source="https://github.com/Mellanox/libvma/issues/27",
        causes=("rdma.resource-limit",),
        subject="{hca}",
    ),
    Message(
        code="IB163",
        name="vma-low-mtt",
        title="libvma: registering memory failed, 'This might happen due to low MTT entries'",
        pattern=r"Failed registering memory, This might happen due to low MTT entries",
        trigger="This might happen due to low MTT entries",
        meaning="VMA's buffer pool could not be registered with the HCA; VMA names the MTT size as the usual reason",
        cause=(
            "the HCA driver's memory translation table is too small for the memory VMA registers (mlx4: "
            "log_num_mtt / log_mtts_per_seg), or the locked-memory limit is below it"
        ),
        fix="raise the MTT size (mlx4_core log_num_mtt, log_mtts_per_seg), lower VMA_RX_BUFS/VMA_TX_BUFS, ulimit -l unlimited",
        verify=("cat /sys/module/mlx4_core/parameters/log_num_mtt", "ulimit -l"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/Mellanox/libvma/blob/master/README.txt (low MTT entries); src/vma/dev/buffer_pool.cpp",
        example=(
            " VMA WARNING: bpool[0x754840]:269:register_memory() Failed registering memory, This might happen due "
            "to low MTT entries. Please refer to README.txt for more info"
        ),
        example_source="https://github.com/Mellanox/libvma/issues/27",
        causes=("rdma.resource-limit",),
        confidence=0.8,
    ),
    # --- driver probe (drivers/net/ethernet/mellanox/mlx5/core/main.c, mlx4/main.c, drivers/base/dd.c) --
    Message(
        code="IB164",
        name="mlx-driver-probe-failed",
        title="The ConnectX driver failed to bring the adapter up (mlx5_core/mlx4_core probe failed)",
        # mlx5 main.c: "mlx5_load_one failed with error code %d" (older), "mlx5_init_one failed with error
        # code %d", "mlx5_pci_init failed with error code %d"; the driver core (drivers/base/dd.c):
        # "%s: probe of %s failed with error %d"
        pattern=(
            r"(?:mlx5_core (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): )?"
            r"(?:mlx5_load_one|mlx5_init_one|mlx5_pci_init|init_one) failed with error code (?P<err>-?\d{1,5})"
        ),
        trigger="failed with error code",
        triggers=("probe of ",),
        variants=(
            r"(?P<drv>mlx5_core|mlx4_core|mlx5_ib|mlx4_ib): probe of "
            r"(?P<pci2>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]) failed with error (?P<err2>-?\d{1,5})",
        ),
        meaning=(
            "the kernel driver of a Mellanox/NVIDIA ConnectX adapter gave up initialising it: no RDMA device "
            "(and no netdev) appears for that PCI function, so ibstat/ibv_devinfo show nothing"
        ),
        cause=(
            "a driver module that does not fit the kernel or the card (a module built for another kernel, an "
            "inbox driver too old for the adapter), firmware too old or too new for the driver (the lines "
            "before it name the step: handle_hca_cap, QUERY_FW, pre-initializing state), or a card in a bad state"
        ),
        fix=(
            "install the driver built for the running kernel (MLNX_OFED/DOCA for that kernel, or the distro's "
            "inbox modules), update the adapter firmware to a version that driver supports, then reload the "
            "module or reboot"
        ),
        verify=(
            "dmesg | grep -E 'mlx[45]_core'",
            "modinfo mlx5_core | grep -E 'version|vermagic'",
            "mlxfwmanager --query",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/core/main.c; "
        "drivers/base/dd.c (probe of %s failed with error %d)",
        example="[    5.662202] mlx5_core 0000:01:00.0: mlx5_load_one failed with error code -22",
        example_source="https://github.com/pocopico/rp-ext/issues/129",
        causes=("rdma.driver-or-module",),
        subject="{pci}",
    ),
    Message(
        code="IB165",
        name="mlx-firmware-too-old",
        title="The ConnectX driver asks for a firmware upgrade (features disabled by old firmware)",
        # mlx4 en_main.c: "LSO not supported, please upgrade to later FW version to enable LSO"; mlx4 main.c:
        # "... please upgrade firmware"; mlx5: "... firmware version ... is not supported, please upgrade"
        pattern=(
            r"(?:mlx[45]_(?:core|en|ib) (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): )"
            r"[^\n]{0,160}?[Pp]lease upgrade (?:to (?:a )?later FW version|(?:the |your )?f(?:irm|)w(?:are)?)"
        ),
        trigger="lease upgrade",
        meaning="the adapter's driver found firmware older than it needs and disabled what that firmware lacks",
        cause=(
            "the ConnectX firmware is older than the driver expects (an OEM-branded card that the vendor's "
            "firmware bundle did not update, a card not updated with the OFED install)"
        ),
        fix="update the adapter firmware (mlxfwmanager -u, or the OEM's firmware package for its PSID) and reboot",
        verify=("mlxfwmanager --query", "ibv_devinfo | grep fw_ver", "dmesg | grep -i 'upgrade'"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx4/en_main.c",
        example=(
            "[  939.318810] mlx4_en 0000:0d:00.0: LSO not supported, please upgrade to later FW version to "
            "enable LSO"
        ),
        example_source="https://github.com/clustervision/trinity/issues/219",
        causes=("rdma.driver-or-module",),
        subject="{pci}",
        confidence=0.6,
    ),
    Message(
        code="IB166",
        name="ib-no-sysfs-device",
        title="No RDMA device exists on the host (ibstatus/ibstat/ibv_devinfo find none)",
        # infiniband-diags ibstatus: "Fatal error:  device '$dev': sys files not found ($sysdir/$dev/ports)";
        # ibv_devinfo (rdma-core libibverbs/examples/devinfo.c): "No IB devices found"; ibstat (umad):
        # "ibpanic: [...] main: can't list IB device names"
        pattern=r"device '(?P<dev>[^'\n]{1,64})': sys files not found",
        trigger="sys files not found",
        triggers=("No IB devices found", "can't list IB device names", "Fatal error:  No devices"),
        # ibstatus with no device at all: "Fatal error:  No devices" (https://github.com/Oneflow-Inc/oneflow/pull/9115)
        variants=(r"No IB devices found", r"can't list IB device names", r"Fatal error:  No devices\s*$"),
        meaning=(
            "/sys/class/infiniband holds no device: the kernel has no RDMA device for any adapter, so every "
            "verbs program and NCCL/UCX see no HCA"
        ),
        cause=(
            "the RDMA driver did not bind the adapter (mlx5_ib/mlx4_ib not loaded, a probe failure in dmesg, "
            "firmware the driver refuses), or the command runs in a container without the host's RDMA devices"
        ),
        fix=(
            "check dmesg for the adapter's driver lines and load the modules (modprobe mlx5_ib / mlx4_ib, "
            "rdma-core or MLNX_OFED installed), update the firmware if the driver asks for it; in a container "
            "pass /dev/infiniband and the RDMA resource"
        ),
        verify=(
            "ls /sys/class/infiniband",
            "lsmod | grep -E 'mlx[45]_ib|ib_core'",
            "dmesg | grep -E 'mlx[45]'",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/linux-rdma/rdma-core/blob/master/infiniband-diags/scripts/ibstatus; "
        "libibverbs/examples/devinfo.c",
        example="Fatal error:  device '*': sys files not found (/sys/class/infiniband/*/ports)",
        example_source="https://github.com/clustervision/trinity/issues/219",
        causes=("rdma.driver-or-module", "rdma.container-access"),
        confidence=0.7,
    ),
    Message(
        code="IB175",
        name="ibstat-named-device-missing",
        title="ibstat was asked for a device that is not an RDMA device here (informational)",
        # infiniband-diags ibstat (umad_get_ca): "ibpanic: [pid] main: stat of IB device '<dev>' failed: ..."
        pattern=r"stat of IB device '(?P<dev>[^'\n]{1,64})' failed: (?P<err>[^\n]{1,80})",
        trigger="stat of IB device",
        meaning=(
            "ibstat found no /sys/class/infiniband entry for the device named on its command line; it says "
            "nothing about the other devices"
        ),
        cause=(
            "a name that is not an InfiniBand HCA here: an Ethernet-only function (Azure's Accelerated "
            "Networking VF mlx5_an0, a RoCE-less port), a typo, or a device renamed by udev; a fault only if "
            "the device should exist (then its driver did not bind it)"
        ),
        fix="list the devices first (ibstat -l or ibv_devices) and query those by name; if the HCA is missing from the list, see its driver",
        verify=("ibstat -l", "ibv_devices", "ls /sys/class/infiniband"),
        severity=Severity.INFO,
        action=Action.OBSERVE,
        source="https://github.com/linux-rdma/rdma-core/blob/master/infiniband-diags/ibstat.c",
        example="ibpanic: [769778] main: stat of IB device 'mlx5_an0' failed: No such file or directory",
        example_source="https://github.com/Azure/azhpc-images/issues/213",
        causes=(),
        subject="{dev}",
        confidence=0.5,
    ),
    Message(
        code="IB167",
        name="verbs-reg-mr-enomem",
        title="ibv_reg_mr failed with ENOMEM (Cannot allocate memory): the locked-memory limit is too low",
        # rdma-core ibv_reg_mr returns NULL with errno ENOMEM when pinning is refused (RLIMIT_MEMLOCK);
        # programs print errno 12 in their own words: Rust's Os { code: 12, kind: OutOfMemory }, C's
        # perror "ibv_reg_mr: Cannot allocate memory", "ibv_reg_mr failed ... errno 12"
        pattern=r"register_from_pd failed[^\n]{0,80}?Cannot allocate memory",
        trigger="register_from_pd failed",
        # NCCL's "Call to ibv_reg_mr..." (IB105) and UCX's "ibv_reg_mr(...) failed" (IB112) are their own entries
        variants=(
            r"(?<!Call to )ibv_reg_mr(?![\w(])[^\n]{0,200}?(?:Cannot allocate memory|errno[ =:]{1,3}12\b|ENOMEM)",
        ),
        triggers=("ibv_reg_mr",),
        meaning="registering (pinning) memory for RDMA was refused with ENOMEM",
        cause=(
            "the process's locked-memory limit (ulimit -l, RLIMIT_MEMLOCK: 64 KiB or 8 MiB by default for "
            "users) is below what it registers; root or an unlimited memlock makes it work"
        ),
        fix=(
            "raise memlock for the user or job (memlock unlimited in /etc/security/limits.conf, "
            "LimitMEMLOCK=infinity for a service, --ulimit memlock=-1 in docker) and check it from inside the job"
        ),
        verify=("ulimit -l", "grep -i locked /proc/<pid>/limits"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://man7.org/linux/man-pages/man3/ibv_reg_mr.3.html (ENOMEM); "
        "https://github.com/linux-rdma/rdma-core/blob/master/libibverbs/verbs.c",
        example=(
            "2023-07-20T12:27:48.882461Z ERROR async_rdma::mr_allocator: RawMemoryRegion::register_from_pd "
            'failed Os { code: 12, kind: OutOfMemory, message: "Cannot allocate memory" }'
        ),
        example_source="https://github.com/datenlord/async-rdma/pull/107",
        causes=("rdma.memlock",),
        confidence=0.7,
    ),
    Message(
        code="IB168",
        name="nccl-ib-devices-in-use",
        title="The IB/RoCE devices NCCL's IB transport uses (NET/IB : Using ...)",
        # transport/net_ib.cc: INFO(NCCL_INIT|NCCL_NET, "NET/IB : Using%s %s; OOB %s:%s", line, ...), the
        # line holding " [%d]%s:%d/%s" per device (IB or RoCE, /SHARP on 2.12+)
        pattern=(
            r"NET/IB ?: Using \[0\](?P<hca>[\w.\-]{1,64}):\d{1,3}/(?:IB|RoCE)(?:/SHARP)?"
            r"(?P<more>[^\n;]{0,600}?) ?; OOB"
        ),
        trigger="NET/IB : Using [",
        triggers=("NET/IB: Using [",),
        meaning="NCCL lists the RDMA devices and ports its IB transport will use",
        cause="nothing: the selection NCCL made (NCCL_IB_HCA, or every active port); the device an IB error without a device name is about",
        fix="nothing to fix; if a slow or unusable device is listed, exclude it (NCCL_IB_HCA=^<dev>)",
        verify=("NCCL_DEBUG=INFO <job> 2>&1 | grep 'NET/IB : Using'", "ibv_devinfo"),
        severity=Severity.INFO,
        action=Action.NONE,
        source="https://github.com/NVIDIA/nccl/blob/master/src/transport/net_ib.cc",
        example=(
            "72bf7b08-26f3-4ebc-8b9d-85df3e4414c0:76786:76786 [0] NCCL INFO NET/IB : Using [0]mlx5_3:1/RoCE ; "
            "OOB eth1:9.73.133.81<0>"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/799",
        confidence=0.1,
    ),
    Message(
        code="IB169",
        name="verbs-no-uverbs-abi",
        title="libibverbs cannot list devices: the kernel's uverbs interface is absent (ENOSYS)",
        # rdma-core libibverbs/init.c check_abi_version(): /sys/class/infiniband_verbs/abi_version
        # unreadable -> ibv_get_device_list() fails with ENOSYS, which ibv_devinfo/ibv_devices perror()
        # as "Failed to get IB devices list: Function not implemented"; libibverbs before rdma-core
        # printed "libibverbs: Fatal: couldn't read uverbs ABI version."
        pattern=r"Failed to get IB devices list: ?Function not implemented",
        trigger="Failed to get IB devices list",
        triggers=("couldn't read uverbs ABI version",),
        variants=(r"couldn't read uverbs ABI version",),
        meaning=(
            "libibverbs found no uverbs ABI file in /sys/class/infiniband_verbs: the kernel exposes no "
            "user-space verbs interface, so no program (NCCL, UCX, MPI, perftest) can open an RDMA device"
        ),
        cause=(
            "the RDMA kernel stack is not loaded: ib_uverbs (and the adapter's mlx5_ib/mlx4_ib) were never "
            "loaded or were unloaded (/etc/init.d/openibd stop, rdma service disabled, a driver container "
            "not ready), or the container does not see the host's /sys/class/infiniband_verbs"
        ),
        fix=(
            "load the stack (systemctl start openibd or rdma; modprobe ib_uverbs mlx5_ib), check dmesg for "
            "the adapter's driver, and in a container pass /dev/infiniband and the RDMA resource"
        ),
        verify=(
            "cat /sys/class/infiniband_verbs/abi_version",
            "lsmod | grep -E 'ib_uverbs|mlx[45]_ib'",
            "ibv_devinfo",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_VERBS}/init.c (check_abi_version); {_VERBS}/examples/devinfo.c",
        example="Failed to get IB devices list: Function not implemented",
        example_source="https://github.com/Oneflow-Inc/oneflow/pull/9115",
        causes=("rdma.driver-or-module",),
        confidence=0.8,
    ),
    Message(
        code="IB170",
        name="verbs-provider-kernel-abi-mismatch",
        title="libibverbs refuses an RDMA device: its user-space provider does not speak the kernel's ABI",
        # rdma-core libibverbs/init.c match_device(): "Warning: Driver %s does not support the kernel ABI
        # of %u (supports %u to %u) for device %s"; the device is then not listed at all
        pattern=(
            r"Driver (?P<driver>[\w\-]{1,32}) does not support the kernel ABI of (?P<abi>\d{1,4}) "
            r"\(supports (?P<lo>\d{1,4}) to (?P<hi>\d{1,4})\)(?: for device "
            r"/sys/class/infiniband/(?P<ibdev>[\w.\-]{1,64}))?"
        ),
        trigger="does not support the kernel ABI of",
        subject="{ibdev}",
        detail="(provider {driver} speaks ABI {lo}-{hi}, the kernel {abi})",
        meaning=(
            "the user-space provider library (lib<driver>-rdmav*.so) and the kernel driver of the device speak "
            "different ABI versions, so libibverbs drops the device: ibv_devices lists nothing, NCCL/UCX "
            "find no HCA and fall back to TCP"
        ),
        cause=(
            "rdma-core (or the vendor's provider: libbnxt_re, libionic, MLNX_OFED's libmlx5) is older or "
            "newer than the kernel module: a container image's rdma-core built for another driver release, "
            "a kernel upgraded without its user space, or an in-tree module beside an OFED user space"
        ),
        fix=(
            "install the provider that matches the loaded kernel driver (same rdma-core/OFED release as the "
            "module; in a container, mount or install the host's provider), or load the kernel module that "
            "matches the installed rdma-core; then ibv_devices lists the device again"
        ),
        verify=(
            "ibv_devices",
            "modinfo <driver module> | grep -E '^version'",
            "ls /etc/libibverbs.d; rpm -q rdma-core || dpkg -l rdma-core",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_VERBS}/init.c (match_device)",
        example=(
            "libibverbs: Warning: Driver rxe does not support the kernel ABI of 1 (supports 2 to 2) for device "
            "/sys/class/infiniband/rxe0"
        ),
        example_source="https://github.com/SoftRoCE/rxe-dev/issues/74",
        causes=("rdma.driver-or-module",),
    ),
    Message(
        code="IB171",
        name="perftest-oob-connect-failed",
        title="perftest's client cannot reach the server's TCP port (Unable to init the socket connection)",
        # perftest src/perftest_communication.c: "Couldn't connect to %s:%d", "Unable to open file descriptor
        # for socket connection", "Unable to init the socket connection"
        pattern=r"Unable to init the socket connection",
        trigger="Unable to init the socket connection",
        meaning=(
            "the ib_*_bw/lat client could not open its out-of-band TCP connection (default port 18515) to the "
            "server to exchange QP numbers and keys, so the RDMA test never starts"
        ),
        cause=(
            "nothing listens at that address and port: the server side (ib_write_bw with no address) is not "
            "running yet or already exited, the client names the wrong address/hostname or another -p port, "
            "or a firewall blocks the TCP port between the hosts; not an RDMA fault"
        ),
        fix=(
            "start the server first and pass the same -p to both; use an address the client can reach (ping / "
            "nc -zv <server> 18515); open the port in the firewall; or use -R (rdma_cm) to connect over the "
            "RDMA interface's IP"
        ),
        verify=("nc -zv <server> 18515", "ss -ltnp | grep 18515"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/linux-rdma/perftest/blob/master/src/perftest_communication.c",
        example="Unable to open file descriptor for socket connection Unable to init the socket connection",
        example_source="https://github.com/linux-rdma/perftest/pull/228",
        causes=("nccl.firewall-or-port",),
    ),
    Message(
        code="IB172",
        name="ucx-unknown-port-speed",
        title="UCX does not know the port's link speed or width and drops the device (too old for the HCA)",
        # src/uct/ib/base/ib_iface.c uct_ib_iface_query: "Invalid active_speed on %s:%d: %d" /
        # "Invalid active_width on ..." and returns UCS_ERR_IO_ERROR
        pattern=r"Invalid active_(?P<what>speed|width) on (?P<dev>[\w\-]{1,32}:\d{1,3}): (?P<value>\d{1,5})",
        trigger="Invalid active_",
        meaning=(
            "UCX's IB interface query met an active_speed/active_width code it has no case for and failed, so "
            "the UCX transports on that port are unusable: Open MPI's pml ucx fails (Failed to create UCP "
            "worker) or falls back to a slow path"
        ),
        cause=(
            "the UCX build is older than the link: a speed code newer than it knows (NDR = 128, XDR = 256; 50G "
            "Ethernet once), or a width code (HDR's 16 on old UCX); often a UCX bundled with an MPI or a conda "
            "environment instead of the one matching the installed OFED/DOCA"
        ),
        fix=(
            "use a UCX release that knows the HCA's speed (the one shipped with the installed MLNX_OFED/DOCA "
            "or HPC-X, or a current release) and make sure the application loads it (ucx_info -v, ldd of the "
            "MPI's libucp); rebuild the MPI against it if needed"
        ),
        verify=(
            "ucx_info -v",
            "ucx_info -d | grep -A3 Device",
            "ibv_devinfo -v | grep -E 'active_(speed|width)'",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_UCX}/uct/ib/base/ib_iface.c",
        example=(
            "[1731632081.707655] [gpu46:69078:0]        ib_iface.c:1674 UCX  ERROR Invalid active_speed on "
            "mlx5_0:1: 128"
        ),
        example_source="https://github.com/openucx/ucx/issues/10298",
        causes=("rdma.driver-or-module",),
        subject="{dev}",
        detail="(active_{what} {value})",
    ),
)
