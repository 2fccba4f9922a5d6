"""InfiniBand / RoCE messages, as data: what the RDMA stack and the libraries over it print.

Families of lines, each from its program's own source:

* NCCL's IB transport (NVIDIA/nccl ``src/transport/net_ib/p2p.cc`` completions, ``common.cc`` async
  events, ``src/misc/ibvwrap.cc`` verbs calls, ``src/graph/topo.cc`` GPUDirect RDMA), in every wording
  from 2.4 (``Got completion with error 12``) to today (``status=IBV_WC_RETRY_EXC_ERR(12)``);
* UCX (openucx/ucx ``src/uct/ib/mlx5/ib_mlx5_log.c``, ``src/uct/ib/base/ib_iface.c``, ``ib_log.h``,
  ``src/ucp/wireup/wireup_ep.c``, ``src/ucp/core/ucp_worker.c``) and Open MPI (``opal/mca/btl/openib/
  help-mpi-btl-openib.txt``, ``ompi/mca/pml/ucx/pml_ucx.c``);
* libibverbs (linux-rdma/rdma-core ``libibverbs/init.c``, ``dynamic_driver.c``, ``enum_strs.c`` for the
  work-completion status words) and perftest (linux-rdma/perftest ``src/perftest_resources.h``);
* the kernel: mlx5_core command timeouts (``drivers/net/ethernet/mellanox/mlx5/core/cmd.c``), the
  module loader refusing nvidia-peermem (``kernel/module/main.c``, kmod ``modprobe``);
* NVSHMEM's IBGDA transport (NVIDIA/nvshmem ``src/modules/transport/ibgda/ibgda.cpp``).

Work-completion statuses are the IB spec's (libibverbs ``enum ibv_wc_status``): 4 local protection,
5 work request flushed (the QP was already in error: a consequence), 12 transport retry counter
exceeded (the peer did not acknowledge within ``timeout x retry_cnt``: packet loss, a down link or an
unreachable GID), 13 RNR retry exceeded (the receiver posted no buffer in time). Example lines come
from public threads, each named in ``example_source``.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.catalog.ib_ucx_umad import UCX_UMAD_MESSAGES

_NCCL = "https://github.com/NVIDIA/nccl/blob/master/src"
_NCCL_GUIDE = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
_UCX = "https://github.com/openucx/ucx/blob/master/src"
_VERBS = "https://github.com/linux-rdma/rdma-core/blob/master/libibverbs"
_OMPI_HELP = "https://github.com/open-mpi/ompi/blob/v4.1.x/opal/mca/btl/openib/help-mpi-btl-openib.txt"
_PERFTEST = "https://github.com/linux-rdma/perftest/blob/master/src/perftest_resources.h"

# NCCL's completion line, all versions: "NET/IB : Got completion with error 12, opcode 1, len 0,
# vendor err 129" (2.4-2.10), "... from peer 10.0.0.2<1234> with error 12, ..." (2.11-2.19),
# "... with status=12 opcode=1 len=0 vendor err 129 (Send) ... hca mlx5_0" (2.21-2.27),
# "NET/IB: ... with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 ... hca mlx5_0"
# (2.28+); "NET/IBP" and "NET/IBext" are the IB plugin builds of the same code.
_NCCL_WC = (
    r"NET/IB\w{0,8} ?: ?Got completion (?:from peer (?P<peer>[^\s<]{1,80})(?:<\d{1,6}>)? )?with "
    r"(?:error |status=(?:[A-Z_]{4,40}\()?)"
)
_NCCL_HCA = r"(?:[^\n]{0,400}? hca (?P<hca>[\w.\-]{1,64}))?"

_OWN_MESSAGES: tuple[Message, ...] = (
    # --- NCCL over IB ------------------------------------------------------------------------------
    Message(
        code="IB101",
        name="nccl-ib-retry-exceeded",
        title="NCCL IB completion error 12: transport retries exhausted (the peer never acknowledged)",
        pattern=_NCCL_WC + r"12\b" + _NCCL_HCA,
        trigger="Got completion",
        meaning="an RDMA work request failed with IBV_WC_RETRY_EXC_ERR (12): the HCA retried it "
        "timeout x retry_cnt times without an acknowledgement from the peer",
        cause=(
            "the two NICs cannot reach each other: a down or flapping link or switch port, packet loss on "
            "a RoCE fabric without PFC/ECN (lossy RoCE), a RoCE GID index that is not routable between the "
            "hosts, NICs on different rails or subnets (cross-rail traffic), or the peer process died"
        ),
        fix=(
            "find the link: check the port state and error counters on both hosts and the switch "
            "(ibstat, ibv_devinfo, rdma statistic), that every HCA NCCL uses is on the same fabric "
            "(NCCL_IB_HCA; NCCL_CROSS_NIC=0 on rail-optimised systems), on RoCE the GID index "
            "(NCCL_IB_GID_INDEX, show_gids) and lossless/lossy configuration; raise NCCL_IB_TIMEOUT only "
            "to ride out a slow fabric"
        ),
        verify=("ibstat", "ibv_devinfo -v", "ib_write_bw -d <hca> <peer>"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_NCCL}/transport/net_ib/p2p.cc",
        example=(
            "task-646--1-mhpnk:91:123 [0] transport/net_ib.cc:881 NCCL WARN NET/IB : Got completion from "
            "peer 172.17.127.143<49577> with error 12, opcode 1, len 0, vendor err 129"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/733",
        causes=("rdma.retry-exceeded",),
        subject="{hca}",
    ),
    Message(
        code="IB102",
        name="nccl-ib-wr-flushed",
        title="NCCL IB completion error 5: work request flushed (the queue pair was already in error)",
        pattern=_NCCL_WC + r"5\b" + _NCCL_HCA,
        trigger="Got completion",
        meaning="outstanding work requests completed with IBV_WC_WR_FLUSH_ERR (5) because their queue "
        "pair had already gone to the error state",
        cause="a consequence, not a cause: an earlier error on the same connection (often error 12 on "
        "this or the peer host, a port going down, the peer process exiting) moved the QP to error",
        fix="look for the first completion error or port event before it, on this host and on the peer, "
        "and fix that",
        verify=("ibstat", "dmesg | grep -i mlx5"),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source=f"{_NCCL}/transport/net_ib/p2p.cc",
        example=(
            "gh-3714u15:7038:7053 [0] ib_plugin.c:1007 NCCL WARN NET/IB : Got completion from peer "
            "10.1.32.3<54891> with error 5, opcode 0, len 0, vendor err 249"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/1737",
        role="symptom",
        subject="{hca}",
        confidence=0.6,
    ),
    Message(
        code="IB103",
        name="nccl-ib-async-port-error",
        title="NCCL saw an IB port error event (the link went down under it)",
        pattern=(
            r"NET/IB\w{0,8} ?: ?(?:(?P<hca>[\w.\-]{1,64}):(?P<port>\d{1,3}) )?(?:Got (?:non-fatal )?async "
            r"(?:error )?|async fatal )event ?: (?P<event>port error|local catastrophic error)"
        ),
        trigger="port error",
        triggers=("local catastrophic error",),
        meaning="the HCA raised IBV_EVENT_PORT_ERR: the port left the Active state while NCCL was using it",
        cause="a flapping or failed link: cable, transceiver, switch port, or the peer/switch rebooting; "
        "repeated events mean an unstable link",
        fix="check the port's state history and link error counters (link_downed, symbol_error) on "
        "this host and the switch; reseat or replace the cable or move the port",
        verify=("ibstat", "cat /sys/class/infiniband/*/ports/*/counters/link_downed"),
        severity=Severity.CRITICAL,
        action=Action.REPLACE_HARDWARE,
        source=f"{_NCCL}/transport/net_ib/common.cc",
        example="NCCL WARN NET/IB : Got async event : port error",
        example_source="https://github.com/NVIDIA/nccl/issues/905",
        causes=("ib.port-down", "ib.link-degraded"),
        subject="{hca}",
    ),
    Message(
        code="IB104",
        name="nccl-ibv-modify-qp-failed",
        title="NCCL could not move a queue pair to RTR/RTS (ibv_modify_qp failed)",
        pattern=(
            r"Call to ibv_modify_qp failed with (?:error )?(?:\d{1,4} )?(?P<err>Connection timed out|"
            r"Network is unreachable|No route to host|Connection refused|No such device)"
            r"(?:[^\n]{0,40}?, on dev (?P<hca>[\w.\-]{1,64}):(?P<port>\d{1,3}))?"
        ),
        trigger="ibv_modify_qp failed",
        meaning="connecting an RDMA queue pair failed: the address (GID) of the peer could not be resolved "
        "or used on this port",
        cause=(
            "on RoCE: the GID index selects an address the peer cannot reach (a link-local fe80:: RoCE v2 "
            "GID, a RoCE v1 GID across subnets, no IP address on the netdev; NCCL_IB_GID_INDEX wrong); "
            "on rail-optimised systems: NICs of different rails that are not cross-connected "
            "(NCCL_CROSS_NIC); Invalid argument: a forced NCCL_IB_GID_INDEX that does not exist"
        ),
        fix=(
            "list the GID table (show_gids or ibv_devinfo -v) and select the RoCE v2 GID that carries the "
            "host's IPv4 address with NCCL_IB_GID_INDEX (or unset it: NCCL picks one); on rail-optimised "
            "fabrics try NCCL_CROSS_NIC=0"
        ),
        verify=("show_gids", "ibv_devinfo -v | grep GID", "ib_write_bw -x <gid index> <peer>"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_NCCL}/misc/ibvwrap.cc",
        example="_ibvwrap.cc: NCCL WARN Call to ibv_modify_qp failed with error Connection timed out_",
        example_source="https://github.com/NVIDIA/nccl/issues/769",
        causes=("nccl.ib-connect", "roce.gid", "rdma.hca-selection"),
        subject="{hca}",
        confidence=0.8,
    ),
    Message(
        code="IB105",
        name="nccl-ibv-reg-mr-enomem",
        title="NCCL could not register memory with the HCA (Cannot allocate memory)",
        pattern=r"Call to ibv_reg_(?:mr|mr_iova2|dmabuf_mr) failed with error Cannot allocate memory",
        trigger="failed with error Cannot allocate memory",
        meaning="memory registration (pinning pages for RDMA) was refused with ENOMEM",
        cause="the locked-memory limit (ulimit -l, memlock) of the process is too low, often only inside "
        "the launcher (mpirun, a container or a systemd unit) even when the login shell has it unlimited",
        fix="set memlock to unlimited where the job runs (/etc/security/limits.conf, the container's "
        "--ulimit memlock=-1, LimitMEMLOCK=infinity for a service) and check it from inside the job",
        verify=("ulimit -l", "mpirun <args> sh -c 'ulimit -l'"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_NCCL}/misc/ibvwrap.cc",
        example="misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
        example_source="https://github.com/NVIDIA/nccl-tests/issues/206",
        causes=("rdma.memlock",),
    ),
    Message(
        code="IB106",
        name="nccl-ibv-reg-dmabuf-unsupported",
        title="NCCL could not register GPU memory through DMA-BUF (Operation not supported)",
        pattern=r"Call to ibv_reg_dmabuf_mr failed with error Operation not supported",
        trigger="ibv_reg_dmabuf_mr failed",
        meaning="registering GPU memory with the HCA through DMA-BUF is not supported by this kernel or "
        "RDMA driver stack",
        cause="the kernel, rdma-core or MLNX_OFED is too old for DMA-BUF (or the GPU driver does not export "
        "it), and the fallback (nvidia-peermem) is not loaded",
        fix="update the RDMA stack, or load nvidia-peermem and set NCCL_DMABUF_ENABLE=0",
        verify=("lsmod | grep peermem", "ofed_info -s"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_NCCL}/misc/ibvwrap.cc",
        example="misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported",
        example_source="https://github.com/NVIDIA/nccl/issues/778",
        causes=("rdma.driver-or-module", "nccl.gdr-or-plugin"),
    ),
    Message(
        code="IB107",
        name="nccl-gdr-disabled",
        title="NCCL runs without GPUDirect RDMA on an HCA (data staged through host memory)",
        pattern=r"NET/\w{1,16} : GPU Direct RDMA Disabled for HCA (?P<n>\d{1,3}) '(?P<hca>[^'\n]{1,64})'",
        trigger="GPU Direct RDMA Disabled for HCA",
        meaning="NCCL found no way to let the HCA read GPU memory directly (no nvidia-peermem, no DMA-BUF) "
        "and copies through host memory instead",
        cause="nvidia-peermem (or the legacy nv_peer_mem) is not loaded, or was built against a different "
        "RDMA stack, and DMA-BUF is unavailable",
        fix="load nvidia-peermem (modprobe nvidia-peermem; the GPU operator's peermem container) or use a "
        "kernel/driver with DMA-BUF support; expect lower inter-node bandwidth until then",
        verify=("lsmod | grep peermem", "NCCL_DEBUG=INFO <job> 2>&1 | grep 'GPU Direct RDMA'"),
        severity=Severity.INFO,
        action=Action.CONFIGURE,
        source=f"{_NCCL}/graph/topo.cc",
        example=("hostname1:25668:27396 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"),
        example_source="https://github.com/NVIDIA/nccl/issues/1537",
        causes=("rdma.driver-or-module", "nccl.gdr-or-plugin"),
        subject="{hca}",
    ),
    Message(
        code="IB108",
        name="nccl-ib-unable-open-device",
        title="NCCL could not open an RDMA device (ibv_open_device failed)",
        pattern=r"NET/IB ?: Unable to open device (?P<hca>[\w.\-]{1,64})",
        trigger="Unable to open device",
        meaning="libibverbs lists the device but opening it failed, so NCCL cannot use it (and falls back to "
        "other HCAs or to sockets)",
        cause="the process may not open /dev/infiniband/uverbsN: a container started without the RDMA devices "
        "(--device=/dev/infiniband, the RDMA device plugin's resource) or without IPC_LOCK, wrong permissions "
        "on the device node, or a user-space provider that does not match the kernel driver",
        fix="pass the RDMA devices into the container (docker --device=/dev/infiniband --cap-add=IPC_LOCK, or "
        "request the rdma/... resource in Kubernetes) and use an image whose rdma-core/MLNX_OFED user space "
        "matches the host driver",
        verify=("ls -l /dev/infiniband", "ibv_devinfo"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_NCCL}/transport/net_ib/init.cc",
        example="transport/net_ib.cc:148 NCCL WARN NET/IB : Unable to open device mlx5_bond_0",
        example_source="https://github.com/NVIDIA/nccl/issues/451",
        causes=("rdma.container-access", "rdma.driver-or-module"),
        subject="{hca}",
    ),
    Message(
        code="IB109",
        name="nccl-ib-no-device",
        title="NCCL found no usable IB/RoCE device and uses TCP sockets",
        pattern=r"NET/IB ?: No device found\.",
        trigger="No device found",
        meaning="NCCL's IB transport found no device it can use, so inter-node traffic goes over sockets",
        cause="normal on hosts without RDMA; on an RDMA cluster: devices not visible in the container, "
        "NCCL_IB_HCA matching nothing, no user-space provider, or every port down",
        fix="if RDMA is expected: pass /dev/infiniband into the container, check NCCL_IB_HCA and ibv_devinfo "
        "inside the job",
        verify=("ibv_devinfo", "NCCL_DEBUG=INFO <job> 2>&1 | grep NET/"),
        severity=Severity.INFO,
        action=Action.CONFIGURE,
        source=f"{_NCCL}/transport/net_ib/init.cc",
        example="NCCL INFO NET/IB : No device found.",
        example_source="https://github.com/NVIDIA/nccl/issues/451",
        causes=("rdma.container-access", "rdma.driver-or-module"),
        confidence=0.6,
    ),
    # --- UCX ------------------------------------------------------------------------------------------
    Message(
        code="IB110",
        name="ucx-transport-retry-exceeded",
        title="UCX: transport retry count exceeded on an HCA port",
        pattern=(
            r"Transport retry count exceeded on (?P<hca>[\w.\-]{1,64}):(?P<port>\d{1,3})/(?P<ll>IB|RoCE)"
        ),
        trigger="Transport retry count exceeded",
        meaning="a UCX send completed with the transport-retry-exceeded syndrome: the peer did not "
        "acknowledge within the QP's timeout x retry count",
        cause="packet loss or an unreachable peer: a RoCE fabric configured neither lossless (PFC) nor for "
        "lossy RoCE, a down or erroring link, wrong routing between the hosts, or a dead peer",
        fix="check both ports and the switch counters for drops and link errors; on RoCE configure the "
        "fabric end to end (PFC/ECN, or the NIC's lossy-RoCE settings); on IB find the erroring link",
        verify=("ibv_devinfo", "rdma statistic show", "ib_write_bw -d <hca> <peer>"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_UCX}/uct/ib/mlx5/ib_mlx5_log.c",
        example=(
            "[compute001:31180:0:31180] ib_mlx5_log.c:143  Transport retry count exceeded on mlx5_0:1/RoCE "
            "(synd 0x15 vend 0x81 hw_synd 0/0)"
        ),
        example_source="https://github.com/openucx/ucx/issues/6000",
        causes=("rdma.retry-exceeded", "rdma.congestion"),
        subject="{hca}:{port}",
    ),
    Message(
        code="IB111",
        name="verbs-retry-counter-exceeded",
        title="A verbs completion failed: transport retry counter exceeded",
        pattern=r"(?<!RNR )(?<!status-)transport retry counter exceeded",
        trigger="transport retry counter exceeded",
        meaning="a work request completed with IBV_WC_RETRY_EXC_ERR, in libibverbs' words "
        "(ibv_wc_status_str): the peer did not acknowledge within the retry budget",
        cause="packet loss or an unreachable peer: link errors, a down port, lossy RoCE, or the remote "
        "process gone",
        fix="check the ports and links on both hosts and the switch, and on RoCE the fabric's PFC/ECN "
        "configuration",
        verify=("ibstat", "rdma statistic show"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_VERBS}/enum_strs.c",
        example=(
            "[1506866470.744682] [clx-hercules-065:1411 :0]       dc_verbs.c:633  UCX  ERROR Send completion "
            "with error on qp 0x10e55: transport retry counter exceeded syndrome 0x81"
        ),
        example_source="https://github.com/openucx/ucx/issues/1880",
        causes=("rdma.retry-exceeded",),
        confidence=0.85,
    ),
    Message(
        code="IB112",
        name="ucx-verbs-enomem",
        title="UCX could not create a completion queue or register memory (Cannot allocate memory)",
        # anchored with a bounded prefix: newer UCX puts the device first ("mlx5_0: ibv_create_cq(...)"),
        # and an optional group at every position of a long line would cost 64 steps a character
        pattern=(
            r"^[^\n]{0,400}?(?:(?P<hca>[a-z][\w.\-]{0,63}): )?(?P<call>ibv_create_cq|mlx5dv_create_cq|"
            r"ibv_create_qp|ibv_create_srq|ibv_reg_mr|mlx5dv_create_qp)\([^)\n]{0,128}\) failed: Cannot "
            r"allocate memory"
        ),
        trigger="failed: Cannot allocate memory",
        meaning="a verbs call that pins memory (a queue or a registered buffer) was refused with ENOMEM",
        cause="the locked-memory limit (ulimit -l) is too low for RDMA; UCX asks for it to be unlimited",
        fix="raise memlock to unlimited for the job (limits.conf, the container's --ulimit memlock=-1, "
        "the resource manager's propagated limits) and rerun",
        verify=("ulimit -l", "ucx_info -d"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_UCX}/uct/ib/base/ib_log.h",
        example=(
            "[1652739463.054681] [cn0022:4071024:0]        ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) "
            "failed: Cannot allocate memory"
        ),
        example_source="https://github.com/openucx/ucx/issues/8229",
        causes=("rdma.memlock",),
        subject="{hca}",
    ),
    Message(
        code="IB113",
        name="ucx-no-sockaddr-aux-transport",
        title="UCX found no usable transport on the device it picked for the connection",
        pattern=r"no supported sockaddr auxiliary transports found for (?P<hca>[\w.\-]{1,64}):(?P<port>\d{1,3})",
        trigger="no supported sockaddr auxiliary transports",
        meaning="UCX's client-server connection setup chose this device, but no transport could carry the "
        "connection through it",
        cause="the device's port is down or unusable, or UCX picked a device other than the one meant "
        "(UCX_NET_DEVICES does not restrict the sockaddr path in older UCX)",
        fix="bring the port up or exclude the device (UCX_NET_DEVICES, UCX_SOCKADDR_TLS_PRIORITY), and "
        "check which HCA carries the IP address the job connects to",
        verify=("ibv_devinfo -d <hca>", "ibdev2netdev"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_UCX}/ucp/wireup/wireup_ep.c",
        example=(
            "[1554831347.602987] [abc:48104:1]      wireup_ep.c:467  UCX  ERROR no supported sockaddr "
            "auxiliary transports found for mlx5_4:1"
        ),
        example_source="https://github.com/openucx/ucx/issues/3463",
        causes=("rdma.hca-selection", "ib.port-down"),
        subject="{hca}:{port}",
    ),
    Message(
        code="IB114",
        name="ucx-error-not-handled",
        title="UCX: an endpoint error was not handled (the connection to the peer is lost)",
        pattern=r"error '(?P<err>[^'\n]{1,80})' will not be handled for ep",
        trigger="will not be handled for ep",
        meaning="a UCX endpoint failed (timeout, unreachable destination) and the application asked for no "
        "error handling, so the job aborts",
        cause="a consequence: the transport error before it (retry exceeded, a down port, no route) says why",
        fix="fix the transport error logged before this line",
        verify=("ucx_info -d",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source=f"{_UCX}/ucp/core/ucp_worker.c",
        example=(
            "[1554831347.603009] [abc:48104:1]     ucp_worker.c:495  UCX  ERROR error 'Destination is "
            "unreachable' will not be handled for ep 0x7f1890d4a048 - /\ufffdgV"
        ),
        example_source="https://github.com/openucx/ucx/issues/3463",
        role="symptom",
        confidence=0.5,
    ),
    Message(
        code="IB116",
        name="ucx-error-not-handled-old",
        title="UCX (before 1.8): an endpoint error was not handled (the connection to the peer is lost)",
        pattern=r"Error (?P<err>[A-Za-z ]{1,60}) was not handled for ep",
        trigger="was not handled for ep",
        meaning="a UCX endpoint failed (timeout, unreachable destination) and the application asked for no "
        "error handling, so the job aborts",
        cause="a consequence: the transport error before it (retry exceeded, a down port, no route) says why",
        fix="fix the transport error logged before this line",
        verify=("ucx_info -d",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://github.com/openucx/ucx/blob/v1.3.0/src/ucp/core/ucp_worker.c",
        example=(
            "Sun Oct  1 17:01:10 2017[1,30]<stdout>:[1506866470.744722] [clx-hercules-065:1411 :0]     "
            "ucp_worker.c:373  UCX  ERROR Error Endpoint timeout was not handled for ep 0x9ce460"
        ),
        example_source="https://github.com/openucx/ucx/issues/1880",
        role="symptom",
        confidence=0.5,
    ),
    Message(
        code="IB117",
        name="ucx-net-device-not-available",
        title="UCX cannot use the network device it was told to (UCX_NET_DEVICES)",
        pattern=(
            r"network devices? '(?P<device>[^'\n]{1,64})'(?:,'[^'\n]{1,64}'){0,16} (?:is|are) not available, "
            r"please use one or more of"
        ),
        trigger="not available, please use one or more of",
        meaning="a device named in UCX_NET_DEVICES is not among the transports UCX could open; the list after "
        "it is what UCX can use",
        cause=(
            "the name is wrong (a bond or VF named differently inside the container), or UCX has no RDMA "
            "transport at all there: only tcp devices listed means no /dev/infiniband access, no verbs provider, "
            "or a UCX built without IB support"
        ),
        fix="set UCX_NET_DEVICES to one of the listed devices; if no RDMA device is listed, give the container "
        "the RDMA devices (/dev/infiniband, the RDMA device plugin resource) and a UCX with IB support",
        verify=("ucx_info -d | grep -E 'Transport|Device'", "ls /dev/infiniband"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_UCX}/ucp/core/ucp_context.c",
        example=(
            "ucp_context.c:1321 UCX  WARN  network device 'mlx5_bond_0:1' is not available, please use one or "
            "more of: 'bond0'(tcp), 'bond1'(tcp), 'bond2'(tcp), 'bond3'(tcp), 'eth0'(tcp), 'lo'(tcp)"
        ),
        example_source="https://github.com/ai-dynamo/dynamo/issues/1209",
        causes=("rdma.hca-selection", "rdma.container-access"),
        subject="{device}",
        confidence=0.8,
    ),
    Message(
        code="IB115",
        name="ompi-ucx-worker-failed",
        title="Open MPI could not create its UCX worker",
        pattern=r"pml_ucx\.c:\d{1,5}\s{1,8}Error: Failed to create UCP worker",
        trigger="Failed to create UCP worker",
        meaning="Open MPI's UCX layer failed at start-up: no UCX worker, so no MPI communication",
        cause="a consequence: the UCX error just before it (often a verbs ENOMEM from a low memlock limit, "
        "or no usable device) says why",
        fix="fix the UCX error logged before this line",
        verify=("ucx_info -d", "ulimit -l"),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://github.com/open-mpi/ompi/blob/main/ompi/mca/pml/ucx/pml_ucx.c",
        example="[cn0022:4071024] pml_ucx.c:309  Error: Failed to create UCP worker",
        example_source="https://github.com/openucx/ucx/issues/8229",
        role="symptom",
        confidence=0.5,
    ),
    # --- libibverbs and perftest ------------------------------------------------------------------
    Message(
        code="IB120",
        name="verbs-no-userspace-driver",
        title="libibverbs found no user-space driver (provider) for an RDMA device",
        pattern=(
            r"libibverbs: Warning: no userspace device-specific driver found for "
            r"(?P<path>/sys/class/infiniband_verbs/(?P<uverbs>uverbs\d{1,4}))"
        ),
        trigger="no userspace device-specific driver found",
        meaning="the kernel exposes an RDMA device, but no user-space provider library claims it, so no "
        "program can open it",
        cause="the provider package (rdma-core's libmlx5/librxe..., or MLNX_OFED user space) is missing "
        "from the host or container image, or installed where libibverbs does not look (its "
        "libibverbs.d config directory under /usr/local/etc instead of /etc)",
        fix="install the provider for the device (rdma-core / libibverbs providers in the image) and make "
        "sure its libibverbs.d driver file is in the directory libibverbs reads (/etc/libibverbs.d)",
        verify=("ibv_devices", "ls /etc/libibverbs.d"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_VERBS}/init.c",
        example="libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0",
        example_source="https://github.com/SoftRoCE/rxe-dev/issues/65",
        causes=("rdma.driver-or-module",),
        subject="{uverbs}",
    ),
    Message(
        code="IB121",
        name="verbs-provider-not-loaded",
        title="libibverbs could not load a provider library listed in its configuration",
        pattern=r"libibverbs: Warning: couldn't load driver '(?P<driver>[^'\n]{1,128})'",
        trigger="couldn't load driver",
        meaning="a provider named in libibverbs' driver directory is not installed",
        cause="usually harmless: rdma-core lists providers for every vendor and only the one for the "
        "installed hardware is needed; it matters only when the missing one is for your device",
        fix="nothing if your device's provider loads; otherwise install it (or remove stale entries from "
        "/etc/libibverbs.d to silence the warning)",
        verify=("ibv_devices",),
        severity=Severity.INFO,
        action=Action.OBSERVE,
        source=f"{_VERBS}/dynamic_driver.c",
        example=(
            "libibverbs: Warning: couldn't load driver 'libvmw_pvrdma-rdmav34.so': libvmw_pvrdma-rdmav34.so: "
            "cannot open shared object file: No such file or directory"
        ),
        example_source="https://github.com/NVIDIA/nvshmem/issues/51",
        causes=("rdma.driver-or-module",),
        confidence=0.4,
    ),
    Message(
        code="IB122",
        name="perftest-completion-retry-exceeded",
        title="perftest: completion with error 12 (transport retry counter exceeded)",
        pattern=r"Failed status(?:-transport retry counter exceeded \(| )12\)?: wr_id",
        trigger="Failed status",
        meaning="the perftest client's RDMA operations timed out: the server side never acknowledged them",
        cause="the two ports cannot reach each other at the RDMA level although TCP works: wrong GID index "
        "or address family on RoCE (-x), a down link, lossy fabric, or a server not ready",
        fix="rerun with the RoCE v2 IPv4 GID (-x <index> from show_gids) or with RDMA CM (-R), and check "
        "both ports' state",
        verify=("show_gids", "ibv_devinfo"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PERFTEST,
        example=(" Completion with error at client Failed status 12: wr_id 0 syndrom 0x81 scnt=128, ccnt=0"),
        example_source="https://github.com/zrlio/softiwarp/issues/27",
        causes=("rdma.retry-exceeded", "roce.gid"),
    ),
    Message(
        code="IB123",
        name="perftest-mr-failed",
        title="perftest could not register its buffer (Couldn't allocate MR)",
        pattern=r"Couldn't allocate MR",
        trigger="Couldn't allocate MR",
        meaning="memory registration of the test buffer failed",
        cause="with --use_cuda: GPU memory cannot be registered because nvidia-peermem is not loaded (or "
        "DMA-BUF is unavailable); with host memory: the locked-memory limit is too low",
        fix="load nvidia-peermem (or use --use_cuda_dmabuf where supported); for host buffers raise "
        "ulimit -l to unlimited",
        verify=("lsmod | grep peermem", "ulimit -l"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/linux-rdma/perftest/blob/master/src/perftest_resources.c",
        example="Couldn't allocate MR",
        example_source="https://github.com/linux-rdma/perftest/issues/126",
        causes=("rdma.driver-or-module", "rdma.memlock"),
        confidence=0.6,
    ),
    # --- Open MPI openib ------------------------------------------------------------------------------
    Message(
        code="IB130",
        name="ompi-openib-ib-not-selected",
        title="Open MPI 4: the openib BTL leaves InfiniBand ports to UCX (informational)",
        pattern=r"By default, for Open MPI 4\.0 and later, infiniband ports on a device",
        trigger="infiniband ports on a device",
        meaning="Open MPI 4.x does not use the openib BTL on IB ports by default; UCX is meant to carry them",
        cause="expected on Open MPI 4 with IB hardware: not a fault when the job runs (UCX is used)",
        fix="nothing, or silence it with --mca btl ^openib (use UCX: --mca pml ucx)",
        verify=("ompi_info | grep -i ucx",),
        severity=Severity.INFO,
        action=Action.NONE,
        source=_OMPI_HELP,
        example="By default, for Open MPI 4.0 and later, infiniband ports on a device",
        example_source="https://github.com/open-mpi/ompi/issues/10693",
        confidence=0.3,
    ),
    Message(
        code="IB131",
        name="ompi-openib-device-init-error",
        title="Open MPI: openib could not initialise an OpenFabrics device (usually harmless on Open MPI 4)",
        pattern=r"WARNING: There was an error initializing an OpenFabrics device\.",
        trigger="error initializing an OpenFabrics device",
        meaning="the legacy openib BTL failed to open a device; Open MPI carries on with other transports",
        cause="on Open MPI 4 with UCX installed this accompanies the 'ports not used by default' notice and "
        "has no impact; without UCX it can mean the device is unusable",
        fix="nothing when the job runs over UCX; silence it with --mca btl ^openib",
        verify=("ompi_info | grep -i ucx",),
        severity=Severity.INFO,
        action=Action.NONE,
        source=_OMPI_HELP,
        example="WARNING: There was an error initializing an OpenFabrics device.",
        example_source="https://github.com/open-mpi/ompi/issues/10693",
        confidence=0.3,
    ),
    Message(
        code="IB132",
        name="ompi-openib-registration-limited",
        title="Open MPI: the OpenFabrics stack can register only part of physical memory",
        pattern=r"WARNING: It appears that your OpenFabrics subsystem is configured to only",
        trigger="OpenFabrics subsystem is configured to only",
        meaning="the HCA driver's registration limit (mlx4 log_num_mtt/log_mtts_per_seg) covers less than "
        "the node's memory, so large registrations fail and jobs may hang",
        cause="kernel module parameters (or memlock) limit registerable memory below physical memory",
        fix="raise the driver's MTT parameters (mlx4_core log_num_mtt) per the Open MPI FAQ and memlock "
        "to unlimited",
        verify=("cat /sys/module/mlx4_core/parameters/log_num_mtt", "ulimit -l"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_OMPI_HELP,
        example="WARNING: It appears that your OpenFabrics subsystem is configured to only",
        example_source="https://github.com/HiFiLES/HiFiLES-solver/issues/99",
        causes=("rdma.memlock",),
    ),
    # --- kernel ---------------------------------------------------------------------------------------
    Message(
        code="IB140",
        name="mlx5-command-timeout",
        title="mlx5_core: the HCA firmware stopped completing commands",
        # anchored: the driver's prefix sits in the first 200 characters (behind a kernel timestamp, a
        # journald or pdsh prefix), so a long line costs one bounded attempt, not one per occurrence
        pattern=(
            r"^[^\n]{0,200}?mlx5_core (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): [^\n]{0,160}?"
            r"(?P<cmd>[A-Z][A-Z0-9_]{1,40})\(0x[0-9A-Fa-f]{1,4}\)(?: op_mod\(0x[0-9A-Fa-f]{1,4}\))? "
            r"(?:No done completion|timeout\. Will cause a leak of a command resource)"
        ),
        trigger="mlx5_core",
        meaning="the driver sent the HCA a firmware command and got no completion in time",
        cause="the HCA firmware is hung or overloaded (a firmware bug, a fatal internal error), so "
        "creating queues and other objects fails for every program on that device",
        fix="update the HCA firmware to the version the RDMA stack supports; reset the device "
        "(mlxfwreset) or reboot the node to recover, and drain it if the timeouts return",
        verify=("dmesg | grep mlx5_core", "mlxfwmanager --query"),
        severity=Severity.CRITICAL,
        action=Action.RESET_DEVICE,
        source="https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/core/cmd.c",
        example=(
            "b1360: [14280.445226] mlx5_core 0000:61:00.0: wait_func:1132:(pid 141181): CREATE_DCT(0x710) "
            "timeout. Will cause a leak of a command resource"
        ),
        example_source="https://github.com/openucx/ucx/issues/7738",
        causes=("rdma.driver-or-module",),
        subject="{pci}",
    ),
    Message(
        code="IB141",
        name="peermem-unknown-symbol",
        title="nvidia-peermem could not load: the RDMA core it was built for is not the one running",
        pattern=r"(?P<module>nvidia_peermem|nv_peer_mem): Unknown symbol (?P<symbol>\w{1,64})",
        trigger="Unknown symbol",
        meaning="the kernel refused to load the GPUDirect RDMA peer-memory module: a symbol it needs from "
        "ib_core is missing or has another version",
        cause="nvidia-peermem was built against a different RDMA stack than the loaded one: MLNX_OFED "
        "installed or updated after the GPU driver (or the inbox ib_core, which lacks the peer-memory API)",
        fix="rebuild/reinstall the GPU driver (or the peermem package) after installing MLNX_OFED, so "
        "that nvidia-peermem is compiled against the running ib_core; with the GPU operator, match the "
        "driver container to the network operator's OFED",
        verify=("modprobe nvidia-peermem", "lsmod | grep peermem"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/torvalds/linux/blob/master/kernel/module/main.c",
        example=(
            "[Tue Sep  8 17:16:02 2026] nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)"
        ),
        example_source="https://github.com/NVIDIA/gpu-operator/issues/2868",
        causes=("rdma.driver-or-module",),
        subject="{module}",
    ),
    Message(
        code="IB142",
        name="peermem-modprobe-failed",
        title="modprobe could not insert nvidia-peermem",
        pattern=r"could not insert '(?P<module>nvidia_peermem|nv_peer_mem)': (?P<err>[^\n]{1,120})",
        trigger="could not insert '",
        meaning="loading the GPUDirect RDMA peer-memory module failed",
        cause="Invalid argument / Unknown symbol: the module was built against another RDMA stack than the "
        "running one (see dmesg for the symbol); no such device: no GPU driver loaded",
        fix="rebuild the GPU driver or peermem package against the installed MLNX_OFED and reload it",
        verify=("dmesg | grep -i peer", "lsmod | grep peermem"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/kmod-project/kmod/blob/master/tools/modprobe.c",
        example="modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument",
        example_source="https://github.com/NVIDIA/gpu-operator/issues/2868",
        causes=("rdma.driver-or-module",),
        subject="{module}",
    ),
    # --- NVSHMEM --------------------------------------------------------------------------------------
    Message(
        code="IB150",
        name="nvshmem-ibgda-devx-uar",
        title="NVSHMEM IBGDA could not allocate an mlx5 DEVX UAR (no direct HCA access)",
        pattern=r"NULL value cannot allocate mlx5dv_devx_uar",
        trigger="cannot allocate mlx5dv_devx_uar",
        meaning="NVSHMEM's GPU-initiated (IBGDA) transport could not get a doorbell page from the HCA "
        "through the mlx5 DEVX interface",
        cause="the process may not use DEVX on the device: a container without the RDMA privileges IBGDA "
        "needs (not privileged, no /dev/infiniband access or capabilities), or a driver without DEVX / "
        "the NVIDIA driver's PeerMappingOverride for IBGDA",
        fix="run the container privileged or with the RDMA devices and capabilities IBGDA needs, and "
        'enable IBGDA in the driver (NVreg_RegistryDwords="PeerMappingOverride=1;")',
        verify=("ls -l /dev/infiniband", "cat /proc/driver/nvidia/params | grep -i RegistryDwords"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/NVIDIA/nvshmem/blob/main/src/modules/transport/ibgda/ibgda.cpp",
        example=(
            "/opt/nvshmem/nvshmem/src/modules/transport/ibgda/ibgda.cpp:1889: NULL value cannot allocate "
            "mlx5dv_devx_uar"
        ),
        example_source="https://github.com/sgl-project/sglang/issues/12533",
        causes=("rdma.container-access", "rdma.driver-or-module"),
    ),
    Message(
        code="IB173",
        name="nccl-ib-gid-table-change",
        title="NCCL saw the port's GID table change (an address of the RoCE interface was added or removed)",
        # src/transport/net_ib (2.23+): WARN("NET/IB : %s:%d Got async event : %s", ..., "GID table change")
        # for IBV_EVENT_GID_CHANGE
        pattern=r"Got async event : GID table change",
        trigger="Got async event : GID table change",
        meaning=(
            "the HCA reported IBV_EVENT_GID_CHANGE: the GIDs of that port changed while NCCL ran (RoCE GIDs "
            "follow the IP addresses of the port's netdev); NCCL up to the fix of issue 1819 keeps the GID "
            "index it chose at connect time"
        ),
        cause=(
            "an address of the RoCE interface changed under the job: an IP reassigned (DHCP, a CNI or macvlan "
            "adding one for another pod, NetworkManager), the interface flapped and its GIDs re-registered in "
            "another order, or an IPv6 address appeared; harmless if the GID NCCL uses is unchanged, otherwise "
            "new connections or recovery use a stale GID and fail or slow down"
        ),
        fix=(
            "keep the RDMA interfaces' addresses static while jobs run (no DHCP renumbering, no other pod's "
            "address on the same port); pin NCCL_IB_GID_INDEX to the RoCE v2 IPv4 GID (show_gids) or use an NCCL "
            "release that refreshes the GID on this event; look elsewhere if the job failed for another reason"
        ),
        verify=("show_gids", "ip -br addr show <netdev>", "journalctl -k | grep -i -E 'gid|link'"),
        severity=Severity.INFO,
        action=Action.CONFIGURE,
        source="https://github.com/NVIDIA/nccl/issues/1819",
        example=(
            "07d92dd514d4:142935:143254 [0] transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_3:1 Got async "
            "event : GID table change"
        ),
        example_source="https://github.com/vllm-project/vllm/issues/5342",
        causes=("roce.gid",),
        confidence=0.5,
    ),
    Message(
        code="IB174",
        name="perftest-no-rdma-device",
        title="perftest finds no RDMA device (Unable to find the Infiniband/RoCE device)",
        # perftest's ctx_find_dev / check_link: "Did not detect devices", "If device exists, check if
        # driver is up", "Unable to find the Infiniband/RoCE device"
        pattern=r"Unable to find the Infiniband/RoCE device",
        trigger="Unable to find the Infiniband/RoCE device",
        triggers=("Did not detect devices",),
        variants=(r"Did not detect devices",),
        meaning="libibverbs lists no usable device where the test runs, so no RDMA traffic is possible there",
        cause=(
            "the verbs devices are not visible or not usable: the RDMA kernel modules or the HCA driver are "
            "not loaded, the container was not given /dev/infiniband (device plugin, privileges), or its "
            "user-space rdma-core/providers are missing or too old for the node's kernel"
        ),
        fix=(
            "check ibv_devices on the host and in the container; load the driver (mlx5_ib), pass the "
            "devices into the pod (RDMA device plugin resource), and use an image whose rdma-core matches "
            "the node's kernel"
        ),
        verify=("ibv_devices", "ls -l /dev/infiniband", "rdma link show"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/linux-rdma/perftest/blob/master/src/perftest_parameters.c",
        example="Unable to find the Infiniband/RoCE device",
        example_source="https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/106",
        causes=("rdma.driver-or-module",),
    ),
)

MESSAGES: tuple[Message, ...] = tuple(sorted((*_OWN_MESSAGES, *UCX_UMAD_MESSAGES), key=lambda m: m.code))
