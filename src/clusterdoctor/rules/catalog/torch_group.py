"""PyTorch messages about forming and tearing down a process group, as data: ranks that never reach the
store, the NCCL unique id that never arrives, DDP's unused parameters, ProcessGroupNCCL's abort, gloo's
lost connections, CUDA driver initialisation, and a MASTER_ADDR that does not resolve.

Part of the torch family: :mod:`clusterdoctor.rules.catalog.torch` merges these entries into its
``MESSAGES`` in code order (split out of it by size). Example lines are from public issue threads, each
named in ``example_source``.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_PT = "https://github.com/pytorch/pytorch/blob/main/"

GROUP_MESSAGES: tuple[Message, ...] = (
    Message(
        code="TORCH118",
        name="torch-store-ranks-missing",
        title="Not every rank reached the store: the process group cannot form (workers joined < world size)",
        pattern=(
            r"Timed out initializing process group in store based barrier on rank: ?(?P<reporter>\d{1,7}), for key: "
            r"[^\s(]{1,120} \(world_size=(?P<world>\d{1,7}), worker_count=(?P<joined>\d{1,7})"
        ),
        trigger="in store based barrier on rank",
        triggers=("waiting for clients.", "waiting for workers."),
        variants=(
            r"Timed out after \d{1,9} seconds waiting for (?:clients|workers)\. (?P<joined2>\d{1,7})/(?P<world2>\d{1,7}) "
            r"(?:clients|workers) joined",
        ),
        meaning=(
            "the rendezvous store counted another number of ranks than the world size before its timeout: the "
            "process group never formed"
        ),
        cause=(
            "fewer joined: ranks that never started (WORLD_SIZE or --nnodes/--nproc_per_node larger than what was "
            "launched, a node whose launcher failed), cannot reach MASTER_ADDR:MASTER_PORT, or are still busy before "
            "init_process_group (loading data or a model past the timeout); more joined than the world size: two "
            "launches share the store (mp.spawn inside torchrun, two jobs on one MASTER_PORT)"
        ),
        fix=(
            "launch exactly world_size processes (derive world size and rank from the launcher's WORLD_SIZE/RANK, "
            "not from the GPU count), start every node's launcher, check that all reach MASTER_ADDR:MASTER_PORT, "
            "give each job its own port, and move slow preparation after init or raise the timeout"
        ),
        verify=("nc -zv $MASTER_ADDR $MASTER_PORT", "env | grep -E 'WORLD_SIZE|RANK|MASTER_'"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT + "torch/distributed/distributed_c10d.py",
        example=(
            "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: "
            "store_based_barrier_key:1 (world_size=2, worker_count=1, timeout=0:10:00)"
        ),
        example_source="https://github.com/NVIDIA/Megatron-LM/issues/782",
        causes=("torch.world-size-mismatch", "torch.rendezvous", "nccl.rank-behind"),
        detail="({joined} of {world} ranks joined)",
        notes=(
            "distributed_c10d.py _store_based_barrier: 'Timed out initializing process group in store based barrier "
            "on rank: {}, for key: {} (world_size={}, worker_count={}, timeout={})' (1.x-2.1); c10d TCPStore server "
            "(2.2+): 'Timed out after {} seconds waiting for clients. {}/{} clients joined.' ('workers' in 2.2)",
        ),
    ),
    Message(
        code="TORCH119",
        name="torch-nccl-unique-id-not-received",
        title="A rank waited in vain for the NCCL unique id that the group's first rank publishes",
        pattern=(
            r"is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from \[(?P<root>\d{1,7})\] via c10d "
            r"key-value store by key '[^'\n]{1,80}', but store->get\('[^'\n]{1,80}'\) got (?:error|exception): "
            r"(?P<err>[^\n,]{1,80})"
        ),
        trigger="ncclUniqueId from [",
        meaning=(
            "creating an NCCL communicator, a rank asked the store for the id that the first rank of the group "
            "publishes when it reaches the same collective, and the id never came"
        ),
        cause=(
            "the group's first rank did not reach that collective in time: it is still busy before it (downloading "
            "or preprocessing data, loading a model: only rank 0 does it), took another code path, or died; less "
            "often the store itself is unreachable (MASTER_ADDR/PORT, firewall)"
        ),
        fix=(
            "look at rank 0's log for what it was doing (a progress bar, an error); move one-rank preparation "
            "before init_process_group or behind a barrier with a long enough timeout, prepare data offline, and "
            "check that rank 0 is alive and reachable"
        ),
        verify=("nc -zv $MASTER_ADDR $MASTER_PORT", "py-spy dump --pid RANK0_PID"),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_PT + "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
        example=(
            "RuntimeError: [3] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d "
            "key-value store by key '1', but store->get('1') got error: Socket Timeout"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/845",
        causes=("nccl.rank-behind", "torch.rendezvous"),
        subject="rank {root}",
        detail="({err})",
        notes=(
            "ProcessGroupNCCL.cpp broadcastUniqueNCCLID: '[', rank_, '] is setting up NCCL communicator and "
            "retrieving ncclUniqueId from [0] via c10d key-value store by key ', storeKey, ', but store->get(', "
            "storeKey, ') got error: ' ('retreiving' and 'got exception' before 2.0)",
        ),
    ),
    Message(
        code="TORCH120",
        name="torch-ddp-unused-parameters",
        title="DDP's reducer found parameters that took no part in the loss (or were marked ready twice)",
        pattern=r"Expected to have finished reduction in the prior iteration before starting a new one",
        variants=(r"Expected to mark a variable ready only once",),
        trigger="Expected to have finished reduction in the prior iteration",
        triggers=("Expected to mark a variable ready only once",),
        meaning=(
            "DistributedDataParallel's reducer waits for a gradient of every parameter each iteration; some "
            "never arrived (the previous reduction did not finish), or one arrived twice in one iteration"
        ),
        cause=(
            "the program: a branch of forward() leaves parameters out of the loss on some iterations or ranks "
            "(frozen or conditional sub-modules, outputs not used in the loss), or a parameter is used twice "
            "(shared weights with checkpointing, a module called twice); not the cluster or NCCL"
        ),
        fix=(
            "pass find_unused_parameters=True to DistributedDataParallel (or static_graph=True when the set "
            "of used parameters never changes), make every forward output take part in the loss, or freeze "
            "(requires_grad=False) what is not trained; TORCH_DISTRIBUTED_DEBUG=DETAIL names the parameters"
        ),
        verify=("TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun --nproc_per_node 2 train.py",),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_PT + "torch/csrc/distributed/c10d/reducer.cpp",
        example=(
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new "
            "one. This error indicates that your module has parameters that were not used in producing loss."
        ),
        example_source="https://github.com/va1shn9v/PromptIR/issues/30",
        causes=("torch.ddp-unused-parameters",),
        notes=(
            "reducer.cpp ensure_prior_reduction_finished: 'Expected to have finished reduction in the prior "
            "iteration before starting a new one. This error indicates that your module has parameters that "
            "were not used in producing loss. ...'; mark_variable_ready: 'Expected to mark a variable ready "
            "only once. ...'",
        ),
    ),
    Message(
        code="TORCH121",
        name="torch-nccl-communicator-aborted",
        title="ProcessGroupNCCL aborted its NCCL communicator (the 'Original reason' names why)",
        pattern=r"NCCL communicator was aborted on rank (?P<rank>\d{1,7})",
        trigger="NCCL communicator was aborted on rank",
        meaning=(
            "this rank's ProcessGroupNCCL called ncclCommAbort after an error (a collective timed out, an NCCL "
            "error, another rank's abort seen through the store) and every later collective on it fails"
        ),
        cause=(
            "a consequence: the reason is the 'Original reason for failure was:' text after it (1.10+), most "
            "often a watchdog timeout, whose cause is the rank that fell behind or died; the rank named here "
            "is the one that aborted, not the culprit"
        ),
        fix="read the original reason and the findings about it (the timeout, the rank behind, the NCCL WARN line)",
        verify=("grep -n -m5 -E 'Original reason|Watchdog caught|NCCL WARN' <the job log>",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source=_PT + "torch/csrc/distributed/c10d/NCCLUtils.hpp",
        example=(
            "RuntimeError: : NCCL communicator was aborted on rank 3.  Original reason for failure was: [Rank 3] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=266392, OpType=ALLGATHER, "
            "Timeout(ms)=1800000) ran for 1803169 milliseconds before timing out."
        ),
        example_source="https://github.com/mlfoundations/open_clip/issues/1087",
        role="symptom",
        subject="rank {rank}",
        notes=(
            "NCCLUtils.hpp: 'NCCL communicator was aborted on rank ', rank_, '. ' then 'Original reason for "
            "failure was: ', commFailureReason_ (pytorch#64241, 1.10)",
        ),
    ),
    Message(
        code="TORCH122",
        name="gloo-peer-connection-lost",
        title="gloo lost its TCP connection to a peer process (the peer died or the network dropped)",
        pattern=(
            r"gloo/transport/tcp/pair\.cc:\d{1,6}\] (?:Connection closed by peer|(?:Read|Write) error) "
            r"\[(?P<peer>[0-9A-Fa-f.:]{2,64})\]:(?P<port>\d{1,5})"
        ),
        trigger="gloo/transport/tcp/pair.cc",
        meaning=(
            "a gloo collective (or a CPU barrier) on this rank found its socket to another rank closed or reset "
            "(pair.cc: 'Connection closed by peer', 'Read error ...: Connection reset by peer')"
        ),
        cause=(
            "a consequence: the peer process ended (crashed, was killed by the OOM killer or the scheduler, or "
            "exited early after its own error), or the network between the hosts dropped the connection; the "
            "peer's own log holds the cause"
        ),
        fix="read the log of the rank at that address first (its traceback, an OOM kill in its dmesg); then the network",
        verify=("dmesg -T | grep -i -E 'killed process|out of memory'",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://github.com/pytorch/gloo/blob/main/gloo/transport/tcp/pair.cc",
        example=(
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
            "[127.0.0.1]:10895"
        ),
        example_source="https://github.com/RVC-Project/Retrieval-based-Voice-Conversion-WebUI/issues/1882",
        role="symptom",
        subject="peer {peer}",
        notes=(
            "pair.cc: GLOO_ENFORCE/signalException with 'Connection closed by peer ' + peer address, 'Read error ' "
            "/ 'Write error ' + address + ': ' + strerror(errno)",
        ),
    ),
    Message(
        code="TORCH123",
        name="torch-cuda-driver-init-failed",
        title="PyTorch could not initialise the CUDA driver (cudaErrorInitializationError): no usable GPU",
        pattern=r"CUDA driver initialization failed, you might not have a CUDA gpu",
        trigger="CUDA driver initialization failed",
        meaning=(
            "the CUDA runtime's first call (cudaGetDeviceCount) failed with cudaErrorInitializationError (3): "
            "the process sees no working NVIDIA driver; as a UserWarning ('CUDA initialization: ...') "
            "torch.cuda.is_available() is False, as a RuntimeError the first CUDA use failed"
        ),
        cause=(
            "the NVIDIA kernel driver is not loaded or cannot reach the GPU (not installed, not rebuilt after a "
            "kernel update, a failed GPU), the container was started without the GPU (no --gpus / NVIDIA "
            "runtime), or the machine has no NVIDIA GPU (a VM, macOS)"
        ),
        fix=(
            "run nvidia-smi on the host and in the container: install or reload the driver (and reboot after a "
            "kernel update), start the container with --gpus all / the NVIDIA runtime; read dmesg for NVRM "
            "errors"
        ),
        verify=("nvidia-smi -L", "python -c 'import torch; print(torch.cuda.is_available())'"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT + "c10/cuda/CUDAFunctions.cpp",
        example="RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.",
        example_source="https://github.com/ErlerPhilipp/points2surf/issues/17",
        causes=("gpu.driver-not-loaded", "gpu.container-runtime"),
        notes=(
            "c10/cuda/CUDAFunctions.cpp device_count_impl: cudaErrorInitializationError -> 'CUDA driver "
            "initialization failed, you might not have a CUDA gpu.'; torch/cuda/__init__.py warns it as "
            "'CUDA initialization: ...'",
        ),
    ),
    Message(
        code="TORCH124",
        name="torch-store-host-unresolved",
        title="The rendezvous host (MASTER_ADDR) does not resolve: the TCPStore cannot be reached",
        pattern=(
            r"host not found: (?P<err>Name or service not known|Temporary failure in name resolution"
            r"|No address associated with hostname|nodename nor servname provided, or not known)"
        ),
        trigger="host not found: ",
        triggers=("IPv4 network addresses of (",),
        variants=(
            r"The IPv4 network addresses of \((?P<host>[^,()\s]{1,253}), ?\d{1,5}\) cannot be retrieved "
            r"\(gai error: -?\d{1,4} - (?P<err2>[^)\n]{1,80})\)",
        ),
        meaning=(
            "the env:// rendezvous (or a TCPStore client) looked up MASTER_ADDR and the resolver answered "
            "that the name does not exist or cannot be resolved now, so the rank cannot connect to the store "
            "and init_process_group fails"
        ),
        cause=(
            "MASTER_ADDR names a host the rank cannot resolve: a Kubernetes Service or pod name that does not "
            "exist yet (workers started before the master pod; a headless service without ready endpoints), "
            "a typo, or a resolver (/etc/hosts, cluster DNS) the container does not use"
        ),
        fix=(
            "start workers only once the master's name resolves and its port answers (an init container "
            "that waits with `nc -z $MASTER_ADDR $MASTER_PORT`, not only nslookup), or set MASTER_ADDR to a "
            "name or address every rank resolves"
        ),
        verify=("getent hosts $MASTER_ADDR", "nc -zv $MASTER_ADDR $MASTER_PORT"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT + "torch/csrc/distributed/c10d/socket.cpp",
        example="ValueError: host not found: Name or service not known",
        example_source="https://github.com/kubeflow/pytorch-operator/issues/125",
        causes=("torch.rendezvous",),
        subject="{host}",
        notes=(
            "before 1.8 the TCPStore client raised 'host not found: ' + gai_strerror (ValueError); later "
            "socket.cpp warns 'The IPv4 network addresses of (host, port) cannot be retrieved (gai error: "
            "N - ...)' while it retries. The IPv6 form of that warning is left out: it is printed on "
            "healthy hosts without IPv6 and the IPv4 lookup then succeeds",
        ),
    ),
)
