"""PyTorch's own messages (c10d, torch.distributed.elastic, CUDA errors as its tracebacks print them,
the DataLoader), as data.

Wording from pytorch/pytorch (the file in ``source``): ``c10/cuda/CUDACachingAllocator.cpp`` (out of
memory, in both the pre-2.1 ``(GPU 0; 10.73 GiB total capacity; ...)`` and the later ``GPU 0 has a
total capacity of ...`` forms), ``c10/cuda/CUDAException.cpp`` (``CUDA error: <cudaGetErrorString>``),
``torch/distributed/elastic/multiprocessing/api.py`` and ``errors/__init__.py`` (the failed worker,
its exit code or signal), ``torch/csrc/distributed/c10d/socket.cpp`` (the TCPStore's server and client
sockets), ``ProcessGroupWrapper.cpp`` (``TORCH_DISTRIBUTED_DEBUG=DETAIL``'s collective fingerprints),
``ProcessGroupNCCL.cpp`` / ``NCCLUtils`` (``NCCL error in: ...``) and ``torch/csrc/DataLoader.cpp`` /
``torch/utils/data/_utils/signal_handling.py``. Watchdog timeouts, desync reports, gloo and store
timeouts are read by :mod:`clusterdoctor.observe.comm.torch_dist` (they need cross-rank reasoning,
rules/comm.py), not here. CUDA errors that name a GPU or driver fault (ECC, 802, 804, 35) are in the
``cuda`` family.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.catalog.torch_group import GROUP_MESSAGES
from clusterdoctor.rules.catalog.torch_runtime import RUNTIME_MESSAGES

_PT = "https://github.com/pytorch/pytorch/blob/main/"
_CUDART = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"

_OWN: tuple[Message, ...] = (
    Message(
        code="TORCH101",
        name="torch-cuda-out-of-memory",
        title="A GPU ran out of memory (CUDA out of memory)",
        pattern=(
            r"(?:CUDA out of memory\. Tried to allocate (?P<size>(?:more than )?[\d.]{1,12} ?[KMGTPE]?i?B)"
            r"(?:\.? ?\(?GPU (?P<gpu>\d{1,3})(?:;| has a total capac))?|CUDA error: out of memory)"
        ),
        trigger="CUDA out of memory",
        triggers=("CUDA error: out of memory",),
        meaning="PyTorch's CUDA caching allocator could not get the memory an operation asked for",
        cause=(
            "the model, activations and batch do not fit in the GPU's memory (batch or sequence too large, "
            "no activation checkpointing, optimizer state on the GPU), memory is fragmented (reserved but "
            "unallocated), or another process holds memory on the same GPU"
        ),
        fix=(
            "lower the batch (or use gradient accumulation), enable activation checkpointing / mixed "
            "precision / ZeRO or FSDP sharding; with large reserved-but-unallocated memory set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; check nvidia-smi for other processes"
        ),
        verify=("nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv",),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_PT + "c10/cuda/CUDACachingAllocator.cpp",
        example=(
            "CUDA out of memory. Tried to allocate 4.00 GiB (GPU 0; 10.73 GiB total capacity; 4.41 GiB already "
            "allocated; 1.75 GiB free; 3.78 GiB cached)"
        ),
        example_source="https://github.com/frostinassiky/gtad/issues/30",
        causes=("torch.cuda-oom",),
        subject="GPU {gpu}",
        notes=(
            "pre-2.1: 'CUDA out of memory. Tried to allocate X (GPU N; T total capacity; ...)'; 2.1+: "
            "'CUDA out of memory. Tried to allocate X. GPU N has a total capacity of T of which F is free.' "
            "(2.1/2.2 spell it 'capacty'); 'torch.cuda.OutOfMemoryError' / 'torch.OutOfMemoryError' before it",
        ),
    ),
    Message(
        code="TORCH102",
        name="torch-cuda-illegal-memory-access",
        title="A CUDA kernel made an illegal memory access",
        pattern=r"(?:an illegal memory access was encountered|CUDA_ERROR_ILLEGAL_ADDRESS|cudaErrorIllegalAddress)",
        # the other kernel faults of the same kind (cudaGetErrorString: 715 "an illegal instruction was
        # encountered", 716 "misaligned address"), in PyTorch's "CUDA error: %s" and by enum name
        variants=(
            r"CUDA error: (?:misaligned address|an illegal instruction was encountered)",
            r"(?:CUDA_ERROR_MISALIGNED_ADDRESS|cudaErrorMisalignedAddress|CUDA_ERROR_ILLEGAL_INSTRUCTION"
            r"|cudaErrorIllegalInstruction)\b",
        ),
        trigger="illegal memory access",
        triggers=(
            "ILLEGAL_ADDRESS",
            "IllegalAddress",
            "CUDA error: misaligned address",
            "CUDA error: an illegal instruction",
            "MISALIGNED_ADDRESS",
            "MisalignedAddress",
            "ILLEGAL_INSTRUCTION",
            "IllegalInstruction",
        ),
        meaning=(
            "a kernel read or wrote an address it may not (cudaErrorIllegalAddress, 700); the CUDA context is "
            "now unusable and every later CUDA call in the process fails"
        ),
        cause=(
            "a bug in a kernel of the program or a library (a custom or fused kernel, an extension, an "
            "out-of-bounds index, a race); rarely a faulty GPU, which then shows Xid 13/31 on other jobs too. "
            "The traceback may point at a later call: errors are reported asynchronously"
        ),
        fix=(
            "rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel, then compute-sanitizer; update the library "
            "whose kernel faults; if it follows one GPU across jobs, check its Xid history"
        ),
        verify=("CUDA_LAUNCH_BLOCKING=1 python train.py", "dmesg | grep -i xid"),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_CUDART,
        example="RuntimeError: CUDA error: an illegal memory access was encountered",
        example_source="https://github.com/VITA-Group/TEGNAS/issues/19",
        causes=("torch.illegal-memory-access",),
    ),
    Message(
        code="TORCH103",
        name="torch-cuda-device-side-assert",
        title="A device-side assertion failed in a CUDA kernel",
        pattern=r"(?:CUDA error: device-side assert triggered|Assertion `[^`\n]{1,120}` failed)",
        trigger="device-side assert",
        triggers=("` failed",),
        meaning="a kernel's own check failed on the GPU (an index out of range, a label outside the classes)",
        cause=(
            "invalid input to an operation: an embedding or gather index out of range (a tokenizer larger "
            "than the embedding, a label >= the number of classes), NaN where a probability is expected"
        ),
        fix=(
            "rerun with CUDA_LAUNCH_BLOCKING=1 (or on CPU) to get the failing operation and its inputs; fix "
            "the data or the model size (vocabulary, number of classes)"
        ),
        verify=("CUDA_LAUNCH_BLOCKING=1 python train.py",),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_PT + "c10/cuda/CUDAException.cpp",
        example="RuntimeError: CUDA error: device-side assert triggered",
        example_source="https://github.com/JasonObeid/Chart2Text/issues/1",
        causes=("torch.illegal-memory-access",),
    ),
    Message(
        code="TORCH104",
        name="torch-invalid-device-ordinal",
        title="A process asks for a GPU index that does not exist (invalid device ordinal)",
        # CUDA's own string for cudaErrorInvalidDevice (10/101), in every wrapper that prints it ("cuda
        # runtime error (10) :", "CUDA error:", THCudaCheck's "error=10 :", NCCL's "Cuda failure")
        pattern=r"invalid device ordinal",
        trigger="invalid device ordinal",
        meaning="torch.cuda.set_device or a tensor placement named a device index the process cannot see",
        cause=(
            "more processes per node than visible GPUs (--nproc_per_node larger than the GPU count), a "
            "CUDA_VISIBLE_DEVICES list shorter than the local ranks, or the global rank used where the local "
            "rank is meant (cuda:RANK on the second node)"
        ),
        fix=(
            "use LOCAL_RANK for the device (torch.cuda.set_device(int(os.environ['LOCAL_RANK']))) and launch "
            "at most as many processes per node as GPUs are visible"
        ),
        verify=("nvidia-smi -L", "python -c 'import torch; print(torch.cuda.device_count())'"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_CUDART,
        example="RuntimeError: cuda runtime error (10) : invalid device ordinal at /pytorch/torch/csrc/cuda/Module.cpp:33",
        example_source="https://github.com/HRNet/HRNet-Semantic-Segmentation/issues/171",
        causes=("torch.device-ordinal",),
    ),
    Message(
        code="TORCH105",
        name="torch-elastic-worker-sigkill",
        title="A worker process was killed with SIGKILL (exit code -9): most often the host OOM killer",
        pattern=(
            r"(?:failed \(exitcode: -9\) local_rank: (?P<local_rank>\d{1,5})|exitcode {1,8}: -9 \(pid: "
            r"(?P<pid>\d{1,10})\)|Signal 9 \(SIGKILL\) received by PID (?P<pid2>\d{1,10}))"
        ),
        # the same death as the older launchers print it: torch.distributed.launch / DeepSpeed / accelerate
        # (subprocess.CalledProcessError "died with <Signals.SIGKILL: 9>") and mp.spawn's ProcessExitedException
        variants=(
            r"died with <Signals\.SIGKILL: 9>",
            r"process (?P<proc>\d{1,6}) terminated with signal SIGKILL",
        ),
        trigger="exitcode: -9",
        triggers=(
            "exitcode  : -9",
            "Signal 9 (SIGKILL)",
            "<Signals.SIGKILL: 9>",
            "terminated with signal SIGKILL",
        ),
        meaning="torchrun's agent saw one of its workers die from SIGKILL",
        cause=(
            "the kernel's OOM killer ended it because the host ran out of memory (each worker loads the model "
            "or the dataset into RAM; more workers per node than the RAM holds), or a scheduler killed it for "
            "exceeding its memory limit (cgroup, Slurm --mem, a Kubernetes limit)"
        ),
        fix=(
            "check the kernel log for 'Out of memory: Killed process'; give the job more host memory or "
            "fewer workers per node, load weights lazily/memory-mapped (low_cpu_mem_usage), reduce DataLoader "
            "workers"
        ),
        verify=("dmesg -T | grep -i -E 'killed process|out of memory'", "free -g"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT + "torch/distributed/elastic/multiprocessing/api.py",
        example=(
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 "
            "(pid: 47139) of binary:  xxx"
        ),
        example_source="https://github.com/QwenLM/Qwen/issues/423",
        causes=("torch.host-oom",),
        subject="local_rank {local_rank}|process {proc}",
    ),
    Message(
        code="TORCH106",
        name="torch-elastic-worker-failed",
        title="A worker process failed (its own traceback holds the cause)",
        pattern=r"failed \(exitcode: (?!-9\))(?P<code>-?\d{1,4})\) local_rank: (?P<local_rank>\d{1,5})",
        # the ChildFailedError summary (elastic/multiprocessing/errors/__init__.py _FAILURE_FORMAT_TEMPLATE:
        # "  exitcode  : ${exitcode} (pid: ${pid})"); -9 is TORCH105's
        variants=(r"exitcode  : (?!-9 )(?P<code>-?\d{1,4}) \(pid: (?P<pid>\d{1,10})\)",),
        trigger="failed (exitcode:",
        triggers=("exitcode  : ",),
        meaning="torchrun's agent saw a worker exit with an error and stopped the others",
        cause=(
            "the worker raised an exception or crashed (exit 1: a Python error; -6/-11: an abort or segfault "
            "in native code); torchrun's 'Root Cause' names the first worker that failed, not always the rank "
            "that caused it"
        ),
        fix="read that worker's traceback (the first error in its log) and the findings about it",
        verify=("grep -n -m3 -E 'Error|Traceback' <the worker's log>",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source=_PT + "torch/distributed/elastic/multiprocessing/api.py",
        example=(
            "[2024-02-09 09:09:15,164] torch.distributed.elastic.multiprocessing.api: [ERROR] failed "
            "(exitcode: 1) local_rank: 0 (pid: 170581) of binary: /usr/bin/python3.10"
        ),
        example_source="https://github.com/speechbrain/speechbrain/issues/2401",
        role="symptom",
        subject="local_rank {local_rank}|worker pid {pid}",
    ),
    Message(
        code="TORCH107",
        name="torch-store-port-in-use",
        title="The rendezvous store cannot bind its port (address already in use)",
        pattern=(
            r"(?:The server socket has failed to (?:listen on|bind to) [^\n]{0,160}?(?::(?P<port>\d{1,5}) \(errno: "
            r"98 - Address already in use|port: (?P<port2>\d{1,5}), [^\n]{0,80}?EADDRINUSE|errno: 98 - Address "
            r"already in use|EADDRINUSE)|RuntimeError: Address already in use)"
        ),
        trigger="Address already in use",
        triggers=("EADDRINUSE",),
        meaning="the TCPStore (rank 0's rendezvous server) could not listen on MASTER_PORT",
        cause=(
            "another process already listens on that port: a second job on the same host with the default "
            "port 29500, a stale process of an earlier run, or a port another service owns"
        ),
        fix=(
            "pick a free port per job (--master_port / --rdzv_endpoint host:0 lets torchrun choose), or end "
            "the stale process holding it"
        ),
        verify=("ss -ltnp | grep 29500",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT + "torch/csrc/distributed/c10d/socket.cpp",
        example=(
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            "address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). "
            "The server socket has failed to bind to ?UNKNOWN? (errno: 98 - Address already in use)."
        ),
        example_source="https://github.com/meta-pytorch/torchtune/issues/1025",
        causes=("torch.port-in-use",),
        subject="port {port}",
        notes=(
            "torch/csrc/distributed/c10d/socket.cpp: 'The server socket has failed to listen on any local network "
            "address.', 'The server socket has failed to bind to {}:{} (errno: {} - {}).' (2.0+); 'port: {}, "
            "useIpv6: {}, code: {}, name: {}, message: {}' (2.3+ structured errors)",
        ),
    ),
    Message(
        code="TORCH108",
        name="torch-store-connect-failed",
        title="A rank cannot reach the rendezvous store (MASTER_ADDR:MASTER_PORT)",
        pattern=(
            r"The client socket has failed to connect to (?:any network address of )?(?P<addr>[^\s]{1,120})"
            r"(?: \((?:errno: \d{1,5} - |system error: \d{1,6} - )?(?P<err>[A-Za-z][\w .]{0,60})\))?"
        ),
        trigger="The client socket has failed to connect",
        triggers=("The client socket has timed out after",),
        variants=(
            r"The client socket has timed out after \d{1,12} ?m?s while trying to connect to \((?P<addr2>[^)\n]{1,120})\)",
        ),
        meaning="a rank's TCPStore client could not open a connection to the store on the master host",
        cause=(
            "MASTER_ADDR/MASTER_PORT are wrong or resolve to an address the rank cannot reach (a hostname "
            "that resolves to another interface or a container address), a firewall between the nodes, or the "
            "master (rank 0) has not started or already exited"
        ),
        fix=(
            "check that MASTER_ADDR resolves on every node to the master's routable address and that the "
            "port is open (nc -zv MASTER_ADDR MASTER_PORT); start rank 0 first"
        ),
        verify=("getent hosts $MASTER_ADDR", "nc -zv $MASTER_ADDR $MASTER_PORT"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT + "torch/csrc/distributed/c10d/socket.cpp",
        example=(
            "[W socket.cpp:697] [c10d] The client socket has failed to connect to [::ffff:0.104.99.143]:47389 "
            "(errno: 110 - Connection timed out)."
        ),
        example_source="https://github.com/hpcaitech/Open-Sora/issues/667",
        causes=("torch.rendezvous",),
    ),
    Message(
        code="TORCH109",
        name="torch-collective-fingerprint-mismatch",
        title="Ranks called different collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL)",
        pattern=(
            r"Detected mismatch between collectives on ranks\. Rank (?P<a>\d{1,7}) is running (?:inconsistent )?"
            r"collective: (?:CollectiveFingerPrint\((?:SequenceNumber=(?P<seq>\d{1,20}),? ?)?"
            r"(?:OpType=(?P<op_a>\w{1,40}))?)?(?:[^\n]{0,2000}?but Rank (?P<b>\d{1,7}) is running collective: "
            r"(?:CollectiveFingerPrint\((?:SequenceNumber=\d{1,20},? ?)?(?:OpType=(?P<op_b>\w{1,40}))?)?)?"
        ),
        trigger="Detected mismatch between collectives",
        meaning=(
            "PyTorch's process-group wrapper compared the collectives the ranks were entering and found two "
            "that differ in type, shape, dtype or sequence number"
        ),
        cause=(
            "the ranks took different code paths: a collective inside a rank-dependent branch, metrics or "
            "logging with different keys per rank, data-dependent tensor shapes (MoE, variable sequence "
            "lengths) or one rank skipping a step"
        ),
        fix="make every rank call the same collectives in the same order with the same shapes and dtypes",
        verify=("TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...",),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_PT + "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp",
        example=(
            "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=485, OpType=ALLREDUCE, TensorShape=[25], TensorDtypes=Float, "
            "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), "
            "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))), but Rank 0 "
            "is running collective: CollectiveFingerPrint(SequenceNumber=485, OpType=BROADCAST, TensorShape=[1], "
            "TensorDtypes=Long"
        ),
        example_source="https://github.com/speechbrain/speechbrain/issues/2401",
        causes=("nccl.collective-mismatch",),
        subject="ranks {a} and {b}|rank {a}",  # the inconsistent-collective form names one rank
    ),
    Message(
        code="TORCH110",
        name="torch-nccl-error",
        title="PyTorch reports an NCCL error (the NCCL WARN or 'Last error' line names why)",
        pattern=(
            r"(?:NCCL error in: [^\s,]{1,200}, (?P<err>unhandled system error|unhandled cuda error|internal error"
            r"|invalid usage|invalid argument|remote process exited or there was a network error)"
            r"|NCCL Error \d{1,2}: (?P<err2>[a-z ]{4,60}))"
        ),
        trigger="NCCL error in:",
        triggers=("NCCL Error ",),
        meaning="an NCCL call made by ProcessGroupNCCL returned an error, raised as DistBackendError/RuntimeError",
        cause=(
            "the error class is generic (a system call, a CUDA call, a network peer failed): the specific "
            "cause is the NCCL WARN line before it, or the 'Last error:' line after it (NCCL 2.19+)"
        ),
        fix="rerun with NCCL_DEBUG=WARN (or INFO) and read the first NCCL WARN line; see the findings about it",
        verify=("NCCL_DEBUG=WARN torchrun ...",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source=_PT + "torch/csrc/distributed/c10d/NCCLUtils.hpp",
        example=(
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL"
            ".cpp:1691, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3"
        ),
        example_source="https://github.com/Peterande/D-FINE/issues/289",
        role="symptom",
    ),
    Message(
        code="TORCH112",
        name="torch-dataloader-worker-killed",
        title="A DataLoader worker was killed (SIGKILL): the host ran out of memory",
        pattern=r"DataLoader worker \(pid\(?s?\)? ?(?P<pid>\d{1,10})\)? is killed by signal: Killed",
        trigger="is killed by signal: Killed",
        meaning="a DataLoader worker process died from SIGKILL",
        cause=(
            "the OOM killer (or the job's memory limit) ended it: the workers' memory (dataset copies, "
            "prefetched batches, a leak growing over time) exceeds the host or cgroup limit"
        ),
        fix="fewer workers or a smaller prefetch_factor, avoid copying the dataset per worker, or more host memory",
        verify=("dmesg -T | grep -i -E 'killed process|out of memory'",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT + "torch/utils/data/_utils/signal_handling.py",
        example="RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.",
        example_source="https://github.com/hezhangsprinter/DCPDN/issues/12",
        causes=("torch.host-oom",),
    ),
    Message(
        code="TORCH113",
        name="torch-elastic-rendezvous-failed",
        title="torchrun's rendezvous failed: the agents could not reach the rendezvous store or each other",
        pattern=r"Rendezvous(?P<kind>Connection|Timeout)Error\b",
        trigger="RendezvousConnectionError",
        triggers=("RendezvousTimeoutError",),
        meaning=(
            "torch.distributed.elastic's rendezvous did not complete: the connection to the C10d store failed, "
            "or not enough nodes joined before the rendezvous timeout"
        ),
        cause=(
            "the rendezvous endpoint (--rdzv_endpoint / MASTER_ADDR:PORT) is not reachable from every node "
            "(wrong address, a hostname that resolves elsewhere, a firewall), the node hosting the store is "
            "not up, or fewer nodes than --nnodes started"
        ),
        fix=(
            "check that every node can reach the endpoint (nc -zv HOST PORT), that all --nnodes nodes start "
            "with the same --rdzv_id and endpoint, and that the interface is the one that routes between them"
        ),
        verify=("nc -zv $MASTER_ADDR $MASTER_PORT",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT + "torch/distributed/elastic/rendezvous/api.py",
        example=(
            "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d "
            "store has failed. See inner exception for details."
        ),
        example_source="https://github.com/pytorch/pytorch/issues/107021",
        causes=("torch.rendezvous",),
    ),
    Message(
        code="TORCH114",
        name="torch-no-nccl-built-in",
        title="This PyTorch build has no NCCL, yet the program asks for the nccl backend",
        pattern=r"Distributed package doesn't have NCCL (?:\" \")?built in",
        trigger="Distributed package doesn't have NCCL",
        meaning="init_process_group(backend='nccl') was called on a PyTorch built without NCCL",
        cause=(
            "PyTorch for Windows and macOS (and CPU-only builds) ship without NCCL; the script or its config "
            "hard-codes backend='nccl'"
        ),
        fix="use backend='gloo' on Windows/macOS (or 'cuda:nccl,cpu:gloo' only on Linux CUDA builds), or run on a Linux CUDA build",
        verify=("python -c 'import torch.distributed as d; print(d.is_nccl_available())'",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT + "torch/distributed/distributed_c10d.py",
        example='raise RuntimeError("Distributed package doesn\'t have NCCL " "built in")',
        example_source="https://github.com/PlayVoice/whisper-vits-svc/issues/97",
        causes=("torch.nccl-unavailable",),
        notes=(
            'torch/distributed/distributed_c10d.py: raise RuntimeError("Distributed package doesn\'t have NCCL " '
            "\"built in\") (1.x); 'Distributed package doesn't have NCCL built in' (2.x)",
        ),
    ),
    Message(
        code="TORCH115",
        name="torch-nccl-cpu-tensor",
        title="A collective on the NCCL backend got a CPU (or sparse) tensor",
        pattern=r"Tensors must be CUDA and dense",
        trigger="Tensors must be CUDA and dense",
        meaning="ProcessGroupNCCL refused a tensor that is not a dense CUDA tensor",
        cause=(
            "the program built the tensor on the CPU (torch.tensor / torch.FloatTensor without device=, a "
            "metric or loss moved to .cpu()) or passed a sparse tensor to an NCCL collective"
        ),
        fix=(
            "create the tensor on the rank's GPU (device=torch.device('cuda', local_rank) or .cuda()) before "
            "the collective; for CPU tensors use a gloo group"
        ),
        verify=("python -c 'import torch; t=torch.zeros(1); print(t.device)'",),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_PT + "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
        example="RuntimeError: Tensors must be CUDA and dense",
        example_source="https://github.com/pytorch/examples/issues/1030",
        causes=("torch.cpu-tensor-nccl",),
        notes=(
            "ProcessGroupNCCL.cpp check_gpu_single_tensor: C10_THROW_ERROR(ValueError, 'Tensors must be CUDA and dense')",
        ),
    ),
    Message(
        code="TORCH116",
        name="gloo-loopback-fallback",
        title="Gloo could not resolve the host name to an address and binds to the loopback",
        pattern=r"Unable to resolve hostname to a \(local\) address\. ?Using the loopback",
        trigger="Unable to resolve hostname to a (local) address",
        meaning=(
            "the Gloo process group found no address for the host name and uses 127.0.0.1: fine on one node, "
            "unreachable for ranks on other nodes"
        ),
        cause=(
            "the host (or pod) name does not resolve to a routable address (it maps to 127.0.x.x or to nothing), "
            "and GLOO_SOCKET_IFNAME is not set; common with hostNetwork pods and many NICs"
        ),
        fix=(
            "set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to the interface that routes between the nodes, "
            "or map the host name to that address in /etc/hosts"
        ),
        verify=("getent hosts $(hostname)", "ip -br addr"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_PT + "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp",
        example="[rank8] Warning: Unable to resolve hostname to a (local) address. Using the loopback",
        example_source="https://github.com/aws-samples/aws-do-eks/pull/50",
        causes=("nccl.socket-iface",),
        notes=(
            "ProcessGroupGloo.cpp createDefaultDevice: TORCH_WARN_ONCE('Unable to resolve hostname to a (local) "
            "address. ', 'Using the loopback address as fallback. ', 'Manually set the network interface to bind "
            "to with GLOO_SOCKET_IFNAME.')",
        ),
    ),
    Message(
        code="TORCH117",
        name="gloo-connect-loopback",
        title="Gloo connects to a peer at 127.0.0.1: a rank bound Gloo to the loopback",
        pattern=r"connectFullMesh failed[^\n]{0,300}?remote=\[(?P<peer>127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1)\]",
        trigger="connectFullMesh failed",
        meaning="Gloo's full-mesh connect failed, and the peer address it tried is the loopback",
        cause=(
            "a rank published 127.0.0.1 as its Gloo address (its host name did not resolve to a routable "
            "address and GLOO_SOCKET_IFNAME is unset), so ranks on other nodes connect to themselves"
        ),
        fix="set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to the routable interface on every node",
        verify=("getent hosts $(hostname)", "ip -br addr"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/pytorch/gloo/blob/main/gloo/transport/tcp/pair.cc",
        example=(
            "[rank8] Gloo connectFullMesh failed ... timed out connecting: SO_ERROR: Connection refused, "
            "remote=[127.0.0.1]:14215"
        ),
        example_source="https://github.com/aws-samples/aws-do-eks/pull/50",
        causes=("nccl.socket-iface",),
        notes=(
            "gloo/transport/tcp/pair.cc: 'timed out connecting: ...' / 'SO_ERROR: ...' with 'remote=[addr]:port'",
        ),
    ),
)

# the family in code order, with the process-group entries (torch_group.py) and the watchdog heartbeat
# and cuBLAS entries (torch_runtime.py)
MESSAGES: tuple[Message, ...] = tuple(
    sorted((*_OWN, *GROUP_MESSAGES, *RUNTIME_MESSAGES), key=lambda m: m.code)
)
