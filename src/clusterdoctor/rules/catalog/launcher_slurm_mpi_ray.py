"""Launcher and workload-manager messages: Slurm's GRES core check, Open MPI / PRRTE's host-name check
and Ray's memory monitor, as data.

Part of the launcher family: :mod:`clusterdoctor.rules.catalog.launcher` merges these entries into its
``MESSAGES`` in code order. Example lines are from public issue threads, each named in ``example_source``.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

MORE_MESSAGES: tuple[Message, ...] = (
    Message(
        code="LAUNCH112",
        name="slurm-gres-core-spec-invalid",
        title="slurmctld rejects the CPU/core affinity a gres.conf line gives a GPU",
        # src/common/gres.c: "%s: invalid GRES core specification (%s) on node %s"
        pattern=(
            r"gres/(?P<gres>\w{1,40}): invalid GRES core specification \((?P<cores>[\d,\-]{1,200})\)"
            r"(?: on node (?P<node>[\w.\-]{1,253}))?"
        ),
        trigger="invalid GRES core specification",
        meaning=(
            "the Cores= (or old CPUs=) list of a gres.conf line does not fit the node's cores as slurmd reports "
            "them, so slurmctld drops the GPU's core binding (and may leave the node INVAL or drained)"
        ),
        cause=(
            "gres.conf gives CPU ids (hyperthread siblings included, CPUs=) where Slurm expects core ids "
            "(Cores=, counted per socket without threads), or a core list from another node type; a generator "
            "(DeepOps, a template) wrote the old syntax"
        ),
        fix=(
            "write Cores= with the core indices of the GPU's socket as `slurmd -C` / `nvidia-smi topo -m` show "
            "them (not thread ids), or let AutoDetect=nvml fill them; scontrol reconfigure"
        ),
        verify=("slurmd -G", "slurmd -C", "scontrol show node <node>"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://slurm.schedmd.com/gres.conf.html#OPT_Cores",
        example=(
            "[2022-06-10T09:46:22.044] error: _node_config_validate: gres/gpu: invalid GRES core specification "
            "(48-63,176-191) on node node01"
        ),
        example_source="https://github.com/NVIDIA/deepops/issues/1195",
        causes=("slurm.gres-conf-invalid",),
        subject="node {node}",
        detail="(cores {cores})",
    ),
    Message(
        code="LAUNCH113",
        name="mpi-node-name-illegal-character",
        title="mpirun (Open MPI 4 / PRRTE) refuses a node name with a character a host name may not hold",
        # PRRTE src/util/help-regex.txt [regex:invalid-name] (Open MPI 4.x orte: the same text); the node
        # name itself is on the next line (" node:  <name>"), which a one-line pattern does not see
        pattern=r"presence of an illegal character in the following node name",
        trigger="illegal character in the following node name",
        meaning=(
            "mpirun builds a compact expression of the node names and found one with a character outside "
            "letters, digits, dots and hyphens; it stops before starting any process"
        ),
        cause=(
            "the host name holds an underscore or another character host names may not (CI runners, "
            "container and VM names generated with '_'); Open MPI 4's launcher rejects it"
        ),
        fix=(
            "give the host a valid name (hostnamectl set-hostname, the container's --hostname), pass a hostfile "
            "of valid names or IPs, or upgrade to Open MPI 5 (PRRTE), which the thread found to accept it"
        ),
        verify=("hostname", "mpirun --version"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/openpmix/prrte/blob/master/src/util/help-regex.txt",
        example="presence of an illegal character in the following node name:",
        example_source="https://github.com/esmf-org/esmf/pull/490",
        causes=("launcher.hostname-invalid",),
    ),
    Message(
        code="LAUNCH114",
        name="ray-memory-monitor-killed-worker",
        title="Ray's memory monitor killed a worker: the node's memory use passed the threshold",
        # python/ray/_private/... / raylet memory monitor: "Memory on the node (IP: X, ID: Y) where the task
        # ... was running was A / B (r), which exceeds the memory usage threshold of T. Ray killed this worker"
        pattern=(
            r"Memory on the node \(IP: (?P<ip>[\d.:a-fA-F]{3,45}), ID: [0-9a-f]{8,64}\) where the "
            r"(?P<what>task|actor)\b.{0,400}? was running was (?P<used>[\d.]{1,10})GB / (?P<total>[\d.]{1,10})GB"
        ),
        trigger="which exceeds the memory usage threshold of",
        meaning=(
            "the raylet saw the node's memory use above RAY_memory_usage_threshold (0.95 by default) and "
            "killed a worker (the most recently scheduled task) to keep the node alive; the task is retried or fails"
        ),
        cause=(
            "the tasks and actors on the node need more host memory than it has: too many concurrent tasks, "
            "an object store or data loading that grows, or a leak in one worker (the message's top-10 list "
            "names the biggest)"
        ),
        fix=(
            "give tasks a memory requirement (num_cpus / memory= in @ray.remote) so fewer run per node, use "
            "bigger nodes, or fix the growing worker; RAY_memory_usage_threshold only moves the line"
        ),
        verify=("ray logs raylet.out -ip <node ip>", "ray memory --stats-only"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html",
        example=(
            "Memory on the node (IP: 172.31.237.1, ID: 2c0ca846c8a9b1630ce2a4aae5ce82dd974531325a67acab1801dbf1) "
            "where the task (task ID: 76b2551f16836f9d58427a0096d8ccf5ba077e2703000000, name=pi4_sample, pid=664672, "
            "memory used=0.05GB) was running was 219.41GB / 230.40GB (0.952289), which exceeds the memory usage "
            "threshold of 0.95. Ray killed this worker"
        ),
        example_source="https://github.com/ray-project/ray/issues/32730",
        causes=("torch.host-oom",),
        subject="node {ip}",
        detail="({used} of {total} GB)",
    ),
)
