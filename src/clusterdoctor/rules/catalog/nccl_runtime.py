"""NCCL's messages from its topology search, its RAS report and its net plugins, as data: a topology the
release does not know (no reverse path), ranks at different collective counts (``ncclras``), a buffer
the aws-ofi-nccl plugin cannot register.

Wording from NVIDIA/nccl ``src/graph/paths.cc`` and the RAS client (``ncclras``, NCCL 2.24+), and
aws/aws-ofi-nccl (``register_mr_buffers``); example lines from public threads. Part of the nccl family:
:mod:`clusterdoctor.rules.catalog.nccl` merges these entries into its ``MESSAGES`` in code order.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_SRC = "https://github.com/NVIDIA/nccl/blob/"

RUNTIME_MESSAGES: tuple[Message, ...] = (
    Message(
        code="NCCL127",
        name="nccl-topology-reverse-path",
        title="NCCL's topology search fails on this system (no reverse path): a release without support for it",
        pattern=(
            r"Failed to find reverse path from remNode (?P<rem>\d{1,4}/[0-9a-fA-F]{1,16}) nlinks \d{1,4} to node "
            r"(?P<node>\d{1,4}/[0-9a-fA-F]{1,16})"
        ),
        trigger="Failed to find reverse path",
        meaning=(
            "while building the paths between the GPUs, NICs and CPUs of this machine NCCL found a link "
            "without its way back, an internal check (ncclInternalError) that stops communicator setup"
        ),
        cause=(
            "the NCCL release does not know this hardware's topology (a release older than the GPU or "
            "NVSwitch generation, e.g. NCCL before 2.15 on H100), or a topology that the system misreports "
            "(an unusual PCIe layout, a virtualised topology, a wrong NCCL_TOPO_FILE)"
        ),
        fix=(
            "upgrade NCCL (the container's or the framework's bundled one) to a release that supports the "
            "GPUs; check NCCL_TOPO_FILE and compare `nvidia-smi topo -m` with what NCCL_DEBUG=INFO prints"
        ),
        verify=("python -c 'import torch; print(torch.cuda.nccl.version())'", "nvidia-smi topo -m"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SRC + "master/src/graph/paths.cc",
        example="opt-1_3b.0 [stderr] Failed to find reverse path from remNode 0/5f000 nlinks 4 to node 0/cb000",
        example_source="https://github.com/mila-iqia/milabench/issues/183",
        causes=("nccl.release-bug", "nccl.topo-file"),
    ),
    Message(
        code="NCCL128",
        name="nccl-ras-operation-count-mismatch",
        title="NCCL RAS: the ranks of a communicator have launched different numbers of a collective",
        # ncclras (NCCL 2.24+ RAS client) under "Warnings": "Communicator ranks have different <Op> operation
        # counts", then "<N> ranks have launched up to operation <K>" per group and the smaller group's ranks
        pattern=r"Communicator ranks have different (?P<op>\w{1,40}) operation counts",
        trigger="operation counts",
        meaning=(
            "NCCL's RAS subsystem found that the ranks of one communicator are at different collective "
            "sequence numbers: some have launched an operation and wait in it while others never reached it"
        ),
        cause=(
            "ranks behind: the group at the lower count is stuck or slow before the collective (a hung data "
            "loader, a rank still in a previous step, an exception on its host path) or took another code "
            "path that skips the call; the ranks at the higher count are the ones waiting"
        ),
        fix=(
            "look at the ranks at the lower operation count (RAS lists the smaller group's ranks with node "
            "and process): their stacks (py-spy dump --pid), what they were doing, whether every rank calls "
            "the collective the same number of times"
        ),
        verify=("ncclras", "py-spy dump --pid <pid>"),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/ras.html",
        example="  Communicator ranks have different AllGather operation counts",
        example_source="https://github.com/NVIDIA/nccl/issues/1911",
        causes=("nccl.rank-behind", "nccl.collective-mismatch"),
        detail="({op})",
    ),
    Message(
        code="NCCL129",
        name="nccl-ofi-register-memory-failed",
        title="The aws-ofi-nccl net plugin cannot register buffers with the fabric (EFA/libfabric)",
        # aws-ofi-nccl register_mr_buffers: "NET/OFI Unable to register memory (type = T) for device D. RC: R,
        # Error: E" (type 2: CUDA memory, 1: host)
        pattern=(
            r"NET/OFI Unable to register memory \(type = (?P<type>\d{1,2})\) for device (?P<dev>\d{1,4})"
            r"(?:\. RC: (?P<rc>-?\d{1,6}), Error: (?P<err>[^\n]{1,80}))?"
        ),
        trigger="NET/OFI Unable to register memory",
        meaning=(
            "the OFI net plugin asked libfabric to register a buffer for RDMA (type 2: GPU memory) and the "
            "provider refused, so NCCL cannot set up its network connections"
        ),
        cause=(
            "GPU memory registration is not supported by this libfabric/provider combination: a libfabric "
            "(EFA installer) too old for the NCCL and plugin in use, no GPUDirect path (peer memory or "
            "DMA-BUF) to the device, or a locked-memory limit too low for host buffers"
        ),
        fix=(
            "upgrade the EFA installer/libfabric to the release the plugin and NCCL need (or pin NCCL to one "
            "the installed libfabric supports); check FI_EFA_USE_DEVICE_RDMA / dmabuf support; ulimit -l "
            "unlimited"
        ),
        verify=("fi_info -p efa -t FI_EP_RDM", "ulimit -l"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/aws/aws-ofi-nccl",
        example=(
            "register_mr_buffers:544 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. RC: "
            "-22, Error: Invalid argument"
        ),
        example_source="https://github.com/aws/aws-ofi-nccl/issues/584",
        causes=("nccl.gdr-or-plugin",),
        subject="device {dev}",
    ),
    Message(
        code="NCCL131",
        name="nccl-cuda-invalid-device-function",
        title="NCCL's kernels cannot launch: the NCCL build has no code for this GPU's architecture",
        # NCCL's CUDACHECK (src/include/checks.h): WARN("Cuda failure '%s'", cudaGetErrorString(err));
        # cudaErrorInvalidDeviceFunction (98) reads "invalid device function": "the requested device
        # function does not exist or is not compiled for the proper device architecture" (CUDA runtime API)
        pattern=r"Cuda failure '?invalid device function'?",
        trigger="invalid device function",
        meaning=(
            "a CUDA launch inside NCCL (its collective kernels, enqueue.cc) failed with cudaErrorInvalidDeviceFunction: "
            "the NCCL library holds no kernel binary or PTX the GPU can run"
        ),
        cause=(
            "the NCCL in use (often the one bundled with a PyTorch wheel) was not compiled for the GPU's compute "
            "capability: an old GPU (sm_35 Kepler, sm_50) that the build's NVCC_GENCODE dropped, or a GPU newer "
            "than the build"
        ),
        fix=(
            "use a PyTorch/NCCL build that lists the GPU's capability, or build NCCL with NVCC_GENCODE including "
            "it (make NVCC_GENCODE='-gencode=arch=compute_35,code=sm_35') and load it with LD_PRELOAD"
        ),
        verify=(
            "nvidia-smi --query-gpu=name,compute_cap --format=csv",
            "cuobjdump --list-elf $(python -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib/libnccl*.so* | head",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=(
            _SRC + "v2.7.8-1/src/include/checks.h; "
            "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html (cudaErrorInvalidDeviceFunction)"
        ),
        example="[3] enqueue.cc:215 NCCL WARN Cuda failure 'invalid device function'",
        example_source="https://github.com/NVIDIA/nccl/issues/444",
        causes=("torch.arch-unsupported",),
    ),
)
