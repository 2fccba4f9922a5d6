"""PyTorch's messages about its own ProcessGroupNCCL machinery and the CUDA libraries it calls, as data:
the heartbeat monitor that finds the NCCL watchdog thread stuck, and cuBLAS failing to create a handle.

Wording from pytorch/pytorch: ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`` (``HeartbeatMonitor``:
``ProcessGroupNCCL's watchdog got stuck for %d seconds without making progress in monitoring enqueued
collectives``, 2.3+) and ``aten/src/ATen/cuda/CublasHandlePool.cpp`` / ``c10/cuda`` (``CUDA error:
CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)```). Example lines from public threads.

Part of the torch family: :mod:`clusterdoctor.rules.catalog.torch` merges these entries into its
``MESSAGES`` in code order.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_PT = "https://github.com/pytorch/pytorch/blob/main/"

RUNTIME_MESSAGES: tuple[Message, ...] = (
    Message(
        code="TORCH125",
        name="torch-nccl-watchdog-stuck",
        title="ProcessGroupNCCL's watchdog thread is stuck (heartbeat monitor will abort the process)",
        pattern=(
            r"ProcessGroupNCCL's watchdog got stuck for (?P<secs>\d{1,7}) seconds without making progress"
        ),
        trigger="watchdog got stuck for",
        meaning=(
            "the heartbeat monitor saw the NCCL watchdog thread make no progress for "
            "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC (480 s by default): it dumps the flight recorder and terminates "
            "the process (SIGABRT)"
        ),
        cause=(
            "the watchdog is blocked inside a CUDA or NCCL call, almost always after a collective already hung "
            "or timed out: aborting the communicator (ncclCommAbort) or querying/destroying a CUDA event waits "
            "on a kernel that never finishes because a peer rank is stuck or gone (a rank behind in data "
            "loading, a crashed rank, a GPU/NVLink fault); rarely another thread holding the GIL in a CUDA call"
        ),
        fix=(
            "look for the first failure before it (the first rank whose collective timed out, a rank that "
            "crashed or stalls in data loading, Xid errors on its node) and fix that; raising "
            "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only delays the abort"
        ),
        verify=(
            "grep -n -E 'Watchdog caught collective operation timeout|ChildFailedError|Xid' <job log>",
            "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 python -m torch.distributed.run ... (flight recorder dump)",
        ),
        severity=Severity.CRITICAL,
        action=Action.RESTART_JOB,
        source=_PT + "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
        example=(
            "[rank7]:[E626 05:14:36.393067540 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 7] "
            "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring "
            "enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang "
            "blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api "
            "(for example, CudaEventDestroy), or other deadlock-prone behaviors.If you suspect the watchdog is "
            "not actually stuck and a longer timeout would help, you can either increase the timeout "
            "(TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor "
            "(TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an issue to "
            "PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the "
            "hang. "
        ),
        example_source="https://github.com/snowflakedb/ArcticTraining/issues/219",
        causes=("nccl.rank-behind",),
        role="symptom",  # the collective timeout or the rank that stalled comes first
        detail="(no progress for {secs} s)",
    ),
    Message(
        code="TORCH126",
        name="torch-cublas-not-initialized",
        title="cuBLAS cannot create its handle (CUBLAS_STATUS_NOT_INITIALIZED): GPU memory is used up",
        pattern=r"CUBLAS_STATUS_NOT_INITIALIZED when calling `?cublasCreate\(handle\)",
        trigger="CUBLAS_STATUS_NOT_INITIALIZED",
        meaning=(
            "the first matrix multiply on a device could not initialise cuBLAS: cublasCreate failed, so the "
            "layer (nn.Linear, matmul) raises"
        ),
        cause=(
            "most often the GPU is out of memory when cuBLAS allocates its workspace: the model and batch "
            "fill it, or other processes hold the GPU (a second job, a leftover process); less often an "
            "earlier asynchronous device error (an embedding index past the vocabulary, a tokenizer larger "
            "than the model's embedding) surfacing at this call"
        ),
        fix=(
            "check free memory (nvidia-smi) and other processes on the GPU; lower the batch or sequence "
            "length, use more GPUs or a smaller precision; rerun with CUDA_LAUNCH_BLOCKING=1 to see whether "
            "an earlier kernel failed (then fix the index/vocabulary size)"
        ),
        verify=(
            "nvidia-smi --query-gpu=memory.used,memory.total --format=csv",
            "CUDA_LAUNCH_BLOCKING=1 python <script>",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT + "aten/src/ATen/cuda/CublasHandlePool.cpp",
        example="RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
        example_source="https://github.com/OpenBMB/VisCPM/issues/3",
        causes=("torch.cuda-oom",),
        confidence=0.7,
    ),
)
