"""NCCL's own messages (``NCCL WARN`` lines, the errors NCCL returns, nccl-tests' failure line), as data.

Each pattern is written from the format string in NVIDIA/nccl ``src/`` (the file and tag in ``source``;
the variants of the versions between 2.4 and 2.30 were read from the tagged sources) and the NCCL
troubleshooting guide (docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html). A
pattern matches the message body, behind any prefix (``host:pid:tid [dev] file.cc:123 NCCL WARN``, a
launcher's ``[1,0]<stdout>:``, PyTorch's ``Last error:`` line that repeats NCCL's last WARN), so the
same entry reads a full NCCL log and a one-line paste of the message. Example lines come from public
issue threads, each named in ``example_source``.

Where NCCL prints its own hint for an error (``printIbModifyQpHint``, ``printIbWcStatusHint`` in 2.23+),
the entry's cause follows that hint.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.catalog.nccl_libs import LIB_MESSAGES
from clusterdoctor.rules.catalog.nccl_runtime import RUNTIME_MESSAGES

_GUIDE = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
_SRC = "https://github.com/NVIDIA/nccl/blob/"

# a socket NCCL opened to a peer failed, as each version prints it (src/misc/socket.cc 2.19-2.27,
# src/os/linux.cc 2.28+): 'socketStartConnect: Connect to %s failed : %s', 'socketPollConnect: Connect to
# %s returned %d(%s) errno %d(%s)', '%s: connect to %s failed : %s', '%s: connect to %s returned %s, exceeded
# error retry count', 'ncclOsSocketPollConnect to %s failed with error %s'; older: 'Call to connect
# returned %s', 'Connect to %s failed : %s'. The literal first (a fast scan), the C/c behind it; a
# loopback peer is NCCL121's.
_CONNECT = (
    r"onnect(?<=[Cc]onnect)(?: to (?!127\.|\[?::1\]?<)(?P<peer>[\w.:\[\]<>%\-]{1,96}) "
    r"(?:failed(?: with error | ?: ?)|returned (?:-?\d{1,4}\()?)| (?:timeout|failed|returned) ?:? )"
)
_CONNECT_NOTES = (
    "src/misc/socket.cc (2.19-2.27): 'socketStartConnect: Connect to %s failed : %s', 'socketPollConnect: "
    "Connect to %s returned %d(%s) errno %d(%s)'; src/os/linux.cc (2.28+): '%s: connect to %s failed : %s', "
    "'%s: connect to %s returned %s, exceeded error retry count after %d attempts', "
    "'ncclOsSocketPollConnect to %s failed with error %s'; the error is strerror(errno)",
)

_OWN: tuple[Message, ...] = (
    Message(
        code="NCCL101",
        name="nccl-shm-no-space",
        title="NCCL cannot allocate its shared-memory segment (/dev/shm too small or full)",
        pattern=(
            r"(?:Error: failed to extend /dev/shm/\S{1,64} to \d{1,20} bytes"
            r"|Call to posix_fallocate failed ?: No space left on device"
            r"|Error while creating shared memory segment /dev/shm/\S{1,128} \(size \d{1,20}\))"
        ),
        trigger="posix_fallocate failed",
        triggers=("failed to extend /dev/shm/", "Error while creating shared memory segment"),
        meaning="NCCL could not create or grow a shared-memory segment in /dev/shm for its SHM transport",
        cause=(
            "/dev/shm is too small or full: a container's default is 64 MB (Docker) and Kubernetes gives "
            "no /dev/shm volume unless one is mounted; stale nccl-* files can fill it"
        ),
        fix=(
            "give the container a larger /dev/shm (docker run --shm-size=16g or --ipc=host; in Kubernetes "
            "an emptyDir with medium: Memory mounted at /dev/shm) and remove stale /dev/shm/nccl-* "
            "files; NCCL_SHM_DISABLE=1 works around it at some speed cost"
        ),
        verify=("df -h /dev/shm", "ls -la /dev/shm | grep nccl"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_GUIDE + "#docker",
        example=(
            "gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : "
            "No space left on device"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/290",
        causes=("nccl.shm-no-space",),
        notes=(
            "src/misc/shmutils.cc (2.12+): 'Error: failed to extend %s to %ld bytes, error: %s (%d)', "
            "'Error while %s shared memory segment %s (size %ld), error: %s (%d)'; include/shm.h (2.4-2.11): "
            "'Call to posix_fallocate failed : %s', 'Error while creating shared memory segment %s (size %d)'",
        ),
    ),
    Message(
        code="NCCL103",
        name="nccl-ib-qp-invalid-gid",
        title="NCCL's queue-pair setup is refused as invalid (wrong RoCE GID index)",
        pattern=r"Call to ibv_modify_qp failed with (?:error )?(?:22 )?Invalid argument",
        trigger="Call to ibv_modify_qp failed",
        meaning="the HCA refused the queue-pair attributes NCCL gave it (EINVAL)",
        cause=(
            "in most cases the GID index is wrong for the port (NCCL_IB_GID_INDEX forced to an index that "
            "has no RoCE v2 / IPv4 GID, or a GID that changed), as NCCL's own hint says"
        ),
        fix=(
            "unset NCCL_IB_GID_INDEX or set it to -1 (automatic), or pick the RoCE v2 GID that carries the "
            "node's address (show_gids); check that the GID table is populated on every port"
        ),
        verify=("show_gids", "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET all_reduce_perf -b 8 -e 8 -g 1"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "master/src/misc/ibvwrap.cc",
        example=(
            "[155] crow-ib-new-nccl-256-info-19:5330:7970 [3] misc/ibvwrap.cc:284 NCCL WARN Call to "
            "ibv_modify_qp failed with error Invalid argument"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/302",
        causes=("roce.gid",),
    ),
    Message(
        code="NCCL104",
        name="nccl-duplicate-gpu",
        title="Two ranks of one communicator are on the same GPU",
        pattern=(
            r"Duplicate GPU detected ?: rank (?P<a>\d{1,7}) and rank (?P<b>\d{1,7}) both on CUDA device "
            r"(?P<bus>[0-9a-fA-F]{1,16})"
        ),
        trigger="Duplicate GPU detected",
        meaning="NCCL found two ranks of the communicator on the same CUDA device and refused to create it",
        cause=(
            "every process picked the same GPU: torch.cuda.set_device / a fixed device in the script, "
            "CUDA_VISIBLE_DEVICES set to one GPU for all ranks, or a local-rank value that is the same in "
            "every process (LOCAL_RANK not read, hvd.local_rank() wrong)"
        ),
        fix=(
            "bind each process to its own GPU: torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before "
            "init_process_group, one GPU per rank in CUDA_VISIBLE_DEVICES, no hard-coded device"
        ),
        verify=(
            "python -c 'import os,torch; print(os.environ.get(\"LOCAL_RANK\"), torch.cuda.current_device())'",
        ),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_SRC + "v2.21.5-1/src/init.cc",
        example=(
            "[1,0]<stdout>:chifflot-7:67917:67949 [0] init.cc:748 NCCL WARN Duplicate GPU detected : rank 0 "
            "and rank 1 both on CUDA device 3b000"
        ),
        example_source="https://github.com/horovod/horovod/issues/3949",
        causes=("nccl.duplicate-gpu",),
        subject="rank {a} and rank {b} on GPU busId {bus}",
    ),
    Message(
        code="NCCL105",
        name="nccl-no-socket-interface",
        title="NCCL finds no usable network interface for its bootstrap or socket transport",
        pattern=(
            r"(?:Bootstrap ?: no socket interface found|NET/Socket ?: No usable listening interface found"
            r"|NET/Socket ?: no interface found|No interface found in the same subnet as remote address)"
        ),
        trigger="no socket interface found",
        triggers=(
            "No usable listening interface found",
            "Socket : no interface found",
            "No interface found in",
        ),
        meaning="NCCL looked for a network interface to bootstrap or to carry socket traffic and found none",
        cause=(
            "NCCL_SOCKET_IFNAME names an interface the host does not have (eth0 in a script, a container "
            "with other names), excludes every interface (a ^ prefix), or no interface is in the same "
            "subnet as the peers'"
        ),
        fix=(
            "set NCCL_SOCKET_IFNAME to an interface that exists and reaches the other nodes (ip -br addr), "
            "or unset it to let NCCL choose; in containers use the pod's interface name"
        ),
        verify=("ip -br addr", "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf -b 8 -e 8 -g 1"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "v2.21.5-1/src/bootstrap.cc",
        example="[rank0]: Bootstrap : no socket interface found",
        example_source="https://github.com/EvolvingLMMs-Lab/open-r1-multimodal/issues/7",
        causes=("nccl.socket-iface",),
    ),
    Message(
        code="NCCL106",
        name="nccl-topology-xml-attribute-missing",
        title="NCCL's topology XML lacks an attribute it needs (injected or plugin topology file)",
        pattern=r"Attribute (?P<attr>[\w.\-]{1,40}) of node (?P<node>[\w.\-]{1,40}) not found",
        trigger="of node",
        meaning="NCCL's topology detection read an XML node without an attribute it needs and aborted init",
        cause=(
            "a topology file NCCL was given (NCCL_TOPO_FILE, or one a net plugin ships, such as old "
            "aws-ofi-nccl's static p4d/p5 files) does not match the machine or the GPUs in use (a subset of "
            "the GPUs, another CPU or NIC layout), so nodes NCCL expects are missing or incomplete"
        ),
        fix=(
            "remove NCCL_TOPO_FILE or give one dumped on this machine (NCCL_TOPO_DUMP_FILE); update the net "
            "plugin (aws-ofi-nccl 1.11+ generates the topology); upgrade NCCL if the file comes from NCCL itself"
        ),
        verify=(
            "env | grep NCCL_TOPO",
            "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH all_reduce_perf -b 8 -e 8 -g 1",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "v2.21.5-1/src/graph/xml.h",
        example="2a8874e7d1e6:2196:2275 [1] graph/xml.h:101 NCCL WARN Attribute arch of node cpu not found",
        example_source="https://github.com/aws/aws-ofi-nccl/issues/785",
        causes=("nccl.topo-file",),
    ),
    Message(
        code="NCCL108",
        name="nccl-ib-local-protection",
        title="IB completion with a local protection error (status 4): GPUDirect RDMA broken",
        pattern=(
            r"Got completion (?:from peer (?P<peer>[\w.:\[\]<>%\-]{1,96}) )?with (?:error |status=)"
            r"(?:IBV_WC_LOC_PROT_ERR\()?4\b"
        ),
        trigger="Got completion",
        meaning="the NIC could not access the memory a work request named (IBV_WC_LOC_PROT_ERR)",
        cause=(
            "GPUDirect RDMA does not work on this path: ACS enabled on the PCIe switches redirects peer "
            "traffic (NCCL's own hint), the peer-memory module (nvidia-peermem / nv_peer_mem) or DMA-BUF "
            "support is missing, or a net plugin registers memory it cannot"
        ),
        fix=(
            "disable ACS on the PCIe switches between GPU and NIC (or in the BIOS), load nvidia-peermem, or "
            "set NCCL_NET_GDR_LEVEL=0 to confirm (traffic then goes through host memory)"
        ),
        verify=("lsmod | grep -E 'nvidia_peermem|nv_peer_mem'", "lspci -vvv | grep -i acsctl"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "master/src/transport/net_ib/common.h",
        example=(
            "kolyoz2:25146:25854 [0] ib_plugin.c:1105 NCCL WARN NET/IB : Got completion from peer "
            "10.0.35.1<49189> with error 4, opcode 5327, len 5327, vendor err 81 (Send)"
        ),
        example_source="https://github.com/NVIDIA/nccl-tests/issues/252",
        causes=("nccl.gdr-or-plugin",),
        subject="peer {peer}",
    ),
    Message(
        code="NCCL109",
        name="nccl-peer-access-unsupported",
        title="CUDA peer access is not supported between two GPUs (error 217)",
        pattern=r"peer access is not supported between these two devices",
        trigger="peer access is not supported",
        meaning=(
            "CUDA refused peer-to-peer access (or a CUDA IPC handle) between two GPUs of the node "
            "(cudaErrorPeerAccessUnsupported, 217)"
        ),
        cause=(
            "the GPUs cannot do P2P on this platform: consumer GPUs without P2P (RTX 3090/4090/5090 and "
            "others), a virtual machine or a PCIe topology that blocks it (ACS, IOMMU), or GPUs of different "
            "processes in containers that do not share the IPC namespace"
        ),
        fix=(
            "set NCCL_P2P_DISABLE=1 (NCCL then uses shared memory or the network), or enable P2P: disable "
            "ACS/IOMMU redirection, pass the GPUs with P2P support into the VM"
        ),
        verify=("nvidia-smi topo -p2p r", "NCCL_P2P_DISABLE=1 all_reduce_perf -b 8 -e 128M -f 2 -g 2"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html",
        example=(
            "(pid=909608) z-pc:909608:910337 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle "
            ": 217 peer access is not supported between these two devices"
        ),
        example_source="https://github.com/ray-project/ray_lightning/issues/24",
        causes=("nccl.p2p-unsupported",),
    ),
    Message(
        code="NCCL110",
        name="nccl-collective-mismatch-around-rank",
        title="NCCL detected mismatched collectives at and around a rank",
        pattern=(
            r"(?:Mismatched collective detected, please check your collective calls at and around rank "
            r"|this may be caused by a collective mismatch around rank )(?P<rank>\d{1,7})"
        ),
        trigger="around rank",
        meaning=(
            "NCCL saw ranks call different collectives (or the same collective with different sizes) and "
            "names the rank at and around which to look"
        ),
        cause=(
            "the program called collectives in a different order, type or size on some ranks: a "
            "data-dependent branch, a tensor of another size on one rank, an extra call on one rank"
        ),
        fix=(
            "compare the collective calls of the ranks near the one named (NCCL_DEBUG=INFO "
            "NCCL_DEBUG_SUBSYS=COLL; TORCH_DISTRIBUTED_DEBUG=DETAIL in PyTorch) and make them identical"
        ),
        verify=(
            "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL torchrun ...",
            "TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...",
        ),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_SRC + "v2.4.8-1/src/init.cc",
        example=(
            "init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at "
            "and around rank 39. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/296",
        causes=("nccl.collective-mismatch",),
        subject="around rank {rank}",
    ),
    Message(
        code="NCCL111",
        name="nccl-ib-collective-size-mismatch",
        title="A peer posted a receive of another size (NET/IB collective mismatch)",
        pattern=r"collective mismatch error,? local size (?P<local>\d{1,20}),? remote (?:size )?(?P<remote>\d{1,20})",
        trigger="collective mismatch error",
        meaning="two ranks exchanged buffers of different sizes in one network transfer",
        cause=(
            "the ranks disagree on the collective: different tensor sizes or order in the program, or NCCL "
            "settings that differ between ranks (NCCL_PROTO, NCCL_BUFFSIZE, NCCL_ALGO set on some nodes only)"
        ),
        fix=(
            "make the NCCL_* environment identical on every node; compare the ranks' collectives "
            "(NCCL_DEBUG_SUBSYS=COLL)"
        ),
        verify=("env | grep NCCL_", "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL,ENV"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "v2.18.3-1/src/transport/net_ib.cc",
        example=(
            "10.10.23.10: so-ucloud-10-10-23-10:1307367:1307586 [0] transport/net_ib.cc:1038 NCCL WARN NET/IB : "
            "req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size 65536"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/969",
        causes=("nccl.env-inconsistent", "nccl.collective-mismatch"),
    ),
    Message(
        code="NCCL112",
        name="nccl-message-truncated",
        title="NCCL received more data than the receive expected (message truncated)",
        pattern=(
            r"essage truncated(?<=[Mm]essage truncated) ?: receiv(?:ed|ing) (?P<got>\d{1,20})(?:,\d{1,20})? bytes instead of "
            r"(?P<want>\d{1,20})"
        ),
        trigger="essage truncated",
        meaning="a peer sent a message larger than the receive NCCL had posted for it",
        cause=(
            "most often the ranks are not calling NCCL consistently (different sizes or order), or NCCL is "
            "not using the same protocol on all ranks because some NCCL_* environment differs (NCCL's "
            "maintainers: if NCCL_PROTO=SIMPLE makes it go away, it is the environment)"
        ),
        fix=(
            "make the NCCL_* environment identical on all ranks; compare the collectives per rank with "
            "NCCL_DEBUG_SUBSYS=COLL; upgrade NCCL if it happens at init with identical settings"
        ),
        verify=("env | grep NCCL_", "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL,ENV"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "v2.21.5-1/src/transport/net_socket.cc",
        example=(
            "hvd1:2918:3333 [0] external/nccl_archive/src/transport/net_socket.cc:200 NCCL WARN NET/Socket : "
            "message truncated : receiving 696320 bytes instead of 32768"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/268",
        causes=("nccl.env-inconsistent", "nccl.collective-mismatch"),
        # NVSHMEM's bootstrap is a copy of NCCL's and prints the same words when a peer died during its
        # init (DeepEP#223): not an NCCL collective, so lines from an nvshmem source path are not this
        context=r"^(?!.{0,2000}nvshmem/src/)",
    ),
    Message(
        code="NCCL113",
        name="nccl-socket-connect-failed",
        title="NCCL cannot open a TCP connection to a peer (refused, aborted, unreachable)",
        pattern=_CONNECT
        + r"(?P<err>Connection refused|Software caused connection abort|Connection timed out)",
        trigger="onnect to",
        triggers=("Call to connect",),
        meaning="a TCP connection NCCL opened to another rank (bootstrap or socket transport) failed",
        cause=(
            "the peer's address is not reachable on the port NCCL listens on: a firewall or security group "
            "that blocks the ephemeral ports, the wrong interface (NCCL_SOCKET_IFNAME picks an address the "
            "peer cannot route to: docker0, a link-local or VPN address), or the peer process is gone"
        ),
        fix=(
            "allow TCP between the nodes on all ports (or the range NCCL uses), set NCCL_SOCKET_IFNAME to the "
            "interface that routes between the nodes, and check the peer is still running"
        ),
        verify=("ip route get PEER_IP", "nc -zv PEER_IP PORT"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "v2.21.5-1/src/misc/socket.cc",
        example=(
            "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
            "10.0.0.2<45763> failed : Software caused connection abort"
        ),
        example_source="https://github.com/NVIDIA/nccl-tests/issues/166",
        causes=("nccl.firewall-or-port",),
        subject="peer {peer}",
        notes=_CONNECT_NOTES,
    ),
    Message(
        code="NCCL125",
        name="nccl-socket-peer-unreachable",
        title="NCCL has no route to a peer's address: the wrong network interface (or a rejecting firewall)",
        pattern=_CONNECT + r"(?P<err>No route to host|Network is unreachable)",
        trigger="onnect to",
        triggers=("Call to connect",),
        meaning=(
            "a TCP connection NCCL opened to another rank failed before reaching it: the kernel has no route "
            "to the peer's address (EHOSTUNREACH, ENETUNREACH)"
        ),
        cause=(
            "the address the peer published is on an interface this host cannot route to: NCCL picked the "
            "wrong interface (a second NIC on a private subnet, docker0/virbr0, a VPN or link-local address; "
            "NCCL_SOCKET_IFNAME unset or matching the wrong name), or a firewall rejects the connection with "
            "an ICMP host-prohibited reply (firewalld's default REJECT), which reads as No route to host"
        ),
        fix=(
            "set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) on every node to the interface whose addresses "
            "route between the nodes (ip -br addr; ip route get PEER_IP shows which one); if the route exists, "
            "open the firewall between the nodes"
        ),
        verify=(
            "ip route get PEER_IP",
            "ip -br addr",
            "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf -g 1",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "v2.21.5-1/src/misc/socket.cc",
        example=("socketStartConnect: Connect to 192.168.19.14<52822> failed : No route to host"),
        example_source="https://github.com/hkproj/pytorch-transformer-distributed/issues/1",
        causes=("nccl.socket-iface", "nccl.firewall-or-port"),
        subject="peer {peer}",
        notes=_CONNECT_NOTES,
    ),
    Message(
        code="NCCL114",
        name="nccl-peer-closed-connection",
        title="A peer closed its NCCL connection (the remote process went away)",
        pattern=r"Connection closed by remote peer(?: (?P<peer>[\w.:\[\]<>%\-]{1,160}))?",
        trigger="Connection closed by remote peer",
        meaning="the other end of an NCCL socket closed it while this rank was still using it",
        cause=(
            "the remote process exited or crashed first (an error, an OOM kill, a watchdog abort on that "
            "rank): this line is the consequence, the remote rank's own log holds the cause"
        ),
        fix="look at the log of the peer named (its first error), not at this rank",
        verify=("grep -n -m1 -E 'Error|error|Killed|WARN' <the peer's log>",),
        severity=Severity.WARNING,
        action=Action.RESTART_JOB,
        source=_SRC + "v2.21.5-1/src/misc/socket.cc",
        example=(
            "ubuntu:39964:40044 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
            "peer node1<57557>"
        ),
        example_source="https://github.com/NVIDIA/nccl-tests/issues/166",
        causes=("nccl.rank-behind",),
        role="symptom",
        subject="peer {peer}",
    ),
    Message(
        code="NCCL117",
        name="nccl-p2p-disabled-nvlink",
        title="P2P is disabled between NVLink-connected GPUs (a hardware problem, says NCCL)",
        pattern=r"P2P is disabled between NVLINK connected GPUs (?P<a>\d{1,3}) and (?P<b>\d{1,3})",
        trigger="P2P is disabled between NVLINK",
        meaning="two GPUs joined by NVLink report peer-to-peer access disabled",
        cause="an NVLink or GPU fault (NCCL: 'probably due to a hardware issue'); sometimes a GPU that needs a reset",
        fix="check the NVLinks of those GPUs (nvidia-smi nvlink -s, Xid 74 in the kernel log); reset or drain the node",
        verify=("nvidia-smi nvlink -s", "nvidia-smi topo -p2p r"),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source=_SRC + "v2.21.5-1/src/graph/paths.cc",
        example=(
            "P2P is disabled between NVLINK connected GPUs 1 and 0. This should not be the case given their "
            "connectivity, and is probably due to a hardware issue. If you still want to proceed, you can set "
            "NCCL_IGNORE_DISABLED_P2P=1."
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/2329",
        causes=("gpu.nvlink-fault",),
        subject="GPUs {a} and {b}",
    ),
    Message(
        code="NCCL118",
        name="nccl-cuda-out-of-memory",
        title="NCCL could not allocate GPU memory",
        pattern=r"(?:Cuda failure (?:2 )?'out of memory'|Failed to CUDA (?:calloc|malloc)(?: async)? \d{1,20} bytes)",
        trigger="Cuda failure",
        triggers=("Failed to CUDA",),
        meaning="a CUDA allocation NCCL made for its buffers failed",
        cause=(
            "the GPU is full: the application (or another process on the GPU) holds the memory NCCL needs "
            "for its channels and buffers when the communicator is created or grows"
        ),
        fix=(
            "create the communicator (init_process_group / first collective) before the big allocations, "
            "leave headroom (lower the batch or the caching allocator's fraction), lower NCCL_BUFFSIZE / "
            "NCCL_MAX_NCHANNELS, and check nvidia-smi for other processes on the GPU"
        ),
        verify=("nvidia-smi --query-compute-apps=pid,used_memory --format=csv",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "v2.21.5-1/src/include/alloc.h",
        example="node:2134736:2285781 [0] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
        example_source="https://github.com/NVIDIA/nccl/issues/962",
        causes=("torch.cuda-oom",),
        subject="GPU {dev}",
    ),
    Message(
        code="NCCL119",
        name="nccl-tests-nccl-failure",
        title="nccl-tests stopped on an NCCL error (the line before it names why)",
        # an unhandled CUDA error is NCCL126's (what it most often is in nccl-tests is known)
        pattern=r"Test NCCL failure [\w./\-]{1,64}:\d{1,6} '(?!unhandled cuda error)(?P<err>[^'\n]{1,120})'",
        trigger="Test NCCL failure",
        meaning="an NCCL call made by nccl-tests returned an error and the test stopped",
        cause=(
            "the error string is generic (unhandled system error, unhandled cuda error, internal error): the "
            "cause is in the NCCL WARN lines before it (rerun with NCCL_DEBUG=WARN or INFO to see them)"
        ),
        fix="rerun with NCCL_DEBUG=INFO and read the first NCCL WARN line",
        verify=("NCCL_DEBUG=INFO all_reduce_perf -b 8 -e 128M -f 2 -g 1",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://github.com/NVIDIA/nccl-tests/blob/master/src/common.h",
        example="fastmoe: Test NCCL failure common.cu:777 'unhandled system error'",
        example_source="https://github.com/NVIDIA/nccl/issues/473",
        role="symptom",
    ),
    Message(
        code="NCCL120",
        name="nccl-socket-address-without-family",
        title="NCCL has no IP address to use: its socket address has no valid family (no interface found)",
        pattern=(
            r"connecting to address [^\n]{0,80}?with family (?P<family>\d{1,6}) is neither AF_INET\(\d{1,3}\) "
            r"nor AF_INET6"
        ),
        variants=(r"Socket creation failed ?: ?Address family not supported by protocol",),
        trigger="is neither AF_INET(",
        triggers=("Address family not supported by protocol",),
        meaning=(
            "NCCL tried to open a socket on an address that is neither IPv4 nor IPv6 (family 0 or garbage): "
            "it never found an interface, so the address it uses was never filled in"
        ),
        cause=(
            "no usable IP interface for NCCL: NCCL_SOCKET_IFNAME names an interface the host or container "
            "lacks (eth0/eth2 in a script), or the container's network namespace has only lo (docker without "
            "--net=host); NCCL of that release does not stop with 'no socket interface found' first"
        ),
        fix=(
            "set NCCL_SOCKET_IFNAME to an interface that exists and routes to the peers (ip -br addr), or "
            "unset it; run the container with --net=host or give it a routable interface"
        ),
        verify=("ip -br addr", "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf -b 8 -e 8 -g 1"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "v2.21.5-1/src/misc/socket.cc",
        example=(
            "[trainer0|0]:ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor "
            "AF_INET6(10)"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/1837",
        causes=("nccl.socket-iface",),
        notes=(
            "src/misc/socket.cc: 'ncclSocketInit: connecting to address %s with family %d is neither AF_INET(%d) "
            "nor AF_INET6(%d)' (2.12+), 'Net : connecting to address ...' (2.4-2.11); include/socket.h "
            "(2.4-2.11): 'Socket creation failed : %s' with strerror(EAFNOSUPPORT) when the family is 0",
        ),
    ),
    Message(
        code="NCCL121",
        name="nccl-socket-connect-loopback",
        title="A rank connects to its peer at 127.0.0.1: NCCL's socket interface is the loopback",
        pattern=(
            r"onnect(?<=[Cc]onnect) to (?P<peer>(?:127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[?::1\]?)<\d{1,5}>) "
            r"(?:failed(?: with error | ?: ?)|returned (?:-?\d{1,4}\()?)(?P<err>Connection refused|Software caused "
            r"connection abort|No route to "
            r"host|Network is unreachable|Connection timed out)"
        ),
        trigger="onnect to 127.",
        triggers=("onnect to ::1<", "onnect to [::1]<"),
        meaning=(
            "an NCCL socket (bootstrap or transport) to a peer failed, and the address the peer published is "
            "the loopback: the peer bound NCCL to lo"
        ),
        cause=(
            "NCCL chose the loopback interface (no other interface matched NCCL_SOCKET_IFNAME, or none was set "
            "and the host's name resolves to 127.0.x.x): the address means 'this machine' to every rank, so "
            "ranks on other nodes (or containers) connect to themselves"
        ),
        fix=(
            "set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the interface that routes between the nodes "
            "(e.g. ^lo,docker,veth or the ENA/eth names: ip -br addr), and map the host name to a routable "
            "address in /etc/hosts"
        ),
        verify=("ip -br addr", "getent hosts $(hostname)"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "v2.21.5-1/src/misc/socket.cc",
        example=(
            "10: socketStartConnect: Connect to 127.0.0.1<45069> failed : Software caused connection abort"
        ),
        example_source="https://github.com/awslabs/awsome-distributed-ai/issues/192",
        causes=("nccl.socket-iface",),
        subject="peer {peer}",
        notes=(
            "src/misc/socket.cc: 'socketStartConnect: Connect to %s failed : %s', 'socketPollConnect: connect "
            "to %s returned %s' (2.19+); 'Call to connect returned %s' (older)",
        ),
    ),
    Message(
        code="NCCL122",
        name="nccl-graph-file-set",
        title="NCCL_GRAPH_FILE is set: NCCL uses a fixed graph XML instead of searching its own",
        pattern=r"NCCL_GRAPH_FILE set by environment to (?P<file>\S{1,200})",
        trigger="NCCL_GRAPH_FILE set by environment to",
        meaning="NCCL loads its rings/trees from a graph XML file instead of computing them for this job",
        cause=(
            "NCCL_GRAPH_FILE (a debugging parameter) is set in the environment or /etc/nccl.conf, often by a "
            "VM or container image; a graph written for another machine, GPU count or NCCL version breaks "
            "init (system/internal error) or slows the job"
        ),
        fix="unset NCCL_GRAPH_FILE (environment and /etc/nccl.conf, ~/.nccl.conf); NCCL_TOPO_FILE is the supported knob",
        verify=("env | grep NCCL_", "cat /etc/nccl.conf"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/NVIDIA/nccl/blob/v2.21.5-1/src/graph/search.cc",
        example=(
            "Spotllm:73025:73112 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/microsoft/ncv4/graph.xml"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/1240",
        causes=("nccl.env-misconfigured",),
        subject="NCCL_GRAPH_FILE={file}",
        notes=(
            "src/graph/search.cc ncclTopoCompute: NCCL_PARAM GraphFile read via ncclGetEnv('NCCL_GRAPH_FILE')",
        ),
    ),
    Message(
        code="NCCL123",
        name="nccl-no-algorithm-protocol",
        title="NCCL has no algorithm/protocol for a collective (NCCL_ALGO / NCCL_PROTO restrict it)",
        pattern=(
            r"no algorithm/protocol available(?: for function (?P<func>\w{1,40}) with datatype (?P<dtype>\w{1,40})\.)?"
            r"(?: ?NCCL_ALGO was set to (?P<algo>[^\s.]{1,120}))?"
        ),
        trigger="no algorithm/protocol available",
        meaning="NCCL found no (algorithm, protocol) pair allowed for this collective and datatype and failed it",
        cause=(
            "NCCL_ALGO or NCCL_PROTO (environment or /etc/nccl.conf) leaves only algorithms that do not implement "
            "this collective or datatype: Tree for Broadcast/AllGather, NVLS for 64-bit types, CollNet/SHARP "
            "without a working SHARP setup; without such a setting, a defect of that NCCL release"
        ),
        fix=(
            "unset NCCL_ALGO / NCCL_PROTO (or restrict them per collective: NCCL_ALGO='allreduce:tree'), check "
            "/etc/nccl.conf and container defaults; if nothing is set, upgrade NCCL"
        ),
        verify=("env | grep -E 'NCCL_(ALGO|PROTO|COLLNET)'", "cat /etc/nccl.conf"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "v2.21.5-1/src/enqueue.cc",
        example=":41367:41367 [1] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available",
        example_source="https://github.com/NVIDIA/nccl/issues/653",
        causes=("nccl.env-misconfigured",),
        subject="NCCL_ALGO={algo}",
        notes=(
            "src/enqueue.cc topoGetAlgoInfo: 'Error : no algorithm/protocol available for function %s with "
            "datatype %s.%s%s%s' (the NCCL_ALGO / NCCL_PROTO settings appended when set, 2.19+); 'Error : no "
            "algorithm/protocol available' before",
        ),
    ),
    Message(
        code="NCCL124",
        name="nccl-error-in-a-binding",
        title="An NCCL call failed, as a Python or C++ binding reports it (the NCCL WARN line names why)",
        pattern=(
            r"NCCL_ERROR_(?P<name>UNHANDLED_CUDA_ERROR|SYSTEM_ERROR|INTERNAL_ERROR|INVALID_ARGUMENT|INVALID_USAGE"
            r"|REMOTE_ERROR|IN_PROGRESS): (?P<err>[a-z][a-z ]{3,60})"
        ),
        variants=(r"[\w.>\-]{1,40} == ncclSuccess \((?P<code>\d{1,2}) vs\. 0\)",),
        trigger="NCCL_ERROR_",
        triggers=("== ncclSuccess (",),
        meaning=(
            "an NCCL call returned an error (ncclResult_t) and the program's binding raised it: CuPy's (and "
            "vLLM's, through CuPy) NcclError prints the result's name and ncclGetErrorString, Caffe's and "
            "other C++ code's glog CHECK_EQ(result, ncclSuccess) prints the result code (1 unhandled cuda error, "
            "2 unhandled system error, 3 internal error, 4 invalid argument, 5 invalid usage, 6 remote error)"
        ),
        cause=(
            "the error class is generic: a CUDA call inside NCCL failed (driver/runtime mismatch, peer access, "
            "out of memory), a system call failed (shared memory, sockets, memory registration), or the "
            "arguments differ between ranks; the NCCL WARN line before it names which"
        ),
        fix="rerun with NCCL_DEBUG=WARN (or INFO) and read the first NCCL WARN line; see the findings about it",
        verify=("NCCL_DEBUG=WARN python train.py 2>&1 | grep -m3 'NCCL WARN'",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://github.com/cupy/cupy/blob/main/cupy_backends/cuda/libs/nccl.pyx",
        example=(
            "ERROR 06-13 07:35:59 [core.py:517] cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: "
            "unhandled system error (run with NCCL_DEBUG=INFO for details)"
        ),
        example_source="https://github.com/vllm-project/vllm/issues/19613",
        role="symptom",
        subject="{name}",
        notes=(
            "cupy nccl.pyx NcclError: '%s: %s' % (ERROR2[status], ncclGetErrorString(status)); NCCL src/init.cc "
            "ncclGetErrorString: 'unhandled cuda error (run with NCCL_DEBUG=INFO for details)', 'unhandled system "
            "error (...)', 'internal error - please report this issue to the NCCL developers', 'invalid argument "
            "(run with NCCL_DEBUG=WARN for details)', 'invalid usage (...)', 'remote process exited or there was a "
            "network error', 'NCCL operation in progress'; glog CHECK_EQ prints 'Check failed: a == b (x vs. y)'",
        ),
    ),
    Message(
        code="NCCL126",
        name="nccl-tests-unhandled-cuda-error",
        title="nccl-tests stopped on an unhandled CUDA error (GPU memory held by another process?)",
        pattern=r"Test NCCL failure [\w./\-]{1,64}:\d{1,6} 'unhandled cuda error",
        trigger="Test NCCL failure",
        meaning=(
            "a CUDA call inside NCCL failed while nccl-tests set up or ran a collective, and NCCL returned "
            "ncclUnhandledCudaError; the test stopped (exit status 3 from mpirun or the wrapper)"
        ),
        cause=(
            "most often NCCL could not allocate its GPU buffers because another process (a training job, "
            "an inference server) already holds the GPUs' memory, as sichek's maintainers found for its "
            "nccltest; else a CUDA driver/runtime/NCCL build mismatch or a GPU in a bad state; the NCCL "
            "WARN line before it ('Cuda failure ...') names which"
        ),
        fix=(
            "check the GPUs for other processes and free them (nvidia-smi --query-compute-apps), or run the "
            "test on idle GPUs; if none holds memory, rerun with NCCL_DEBUG=WARN and read the 'Cuda failure' "
            "line (driver too old for the CUDA runtime NCCL was built with, GPU needing a reset)"
        ),
        verify=(
            "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",
            "NCCL_DEBUG=WARN all_reduce_perf -b 8 -e 128M -f 2 -g 1",
        ),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://github.com/scitix/sichek/issues/71",
        example="Test NCCL failure common.cu:1294 'unhandled cuda error ...'",
        example_source="https://github.com/scitix/sichek/issues/71",
        role="symptom",
        causes=("torch.cuda-oom", "nccl.cuda-driver-runtime"),
        notes=(
            "nccl-tests src/common.h NCCLCHECK: 'Test NCCL failure %s:%d '%s / %s'' with "
            "ncclGetErrorString(ncclUnhandledCudaError) = 'unhandled cuda error (run with NCCL_DEBUG=INFO for "
            "details)'; sichek#71 (the maintainers' hint, commit 32ca654): 'The error is caused by NCCL being "
            "unable to allocate GPU memory because other processes are already occupying it'",
        ),
    ),
)

# the family in code order, with the host-library entries (nccl_libs.py) and the topology search, RAS and
# net-plugin ones (nccl_runtime.py)
MESSAGES: tuple[Message, ...] = tuple(sorted((*_OWN, *LIB_MESSAGES, *RUNTIME_MESSAGES), key=lambda m: m.code))
