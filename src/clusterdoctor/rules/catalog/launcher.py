"""What the launchers around a training job print when it dies: DeepSpeed's launcher, Slurm's step daemon,
MPI, Horovod, Ray. As data, like the other families.

Their lines say how a worker ended, which is often the cause the worker's own log never gets to print: a
SIGKILL (-9) from the kernel's OOM killer or a cgroup limit, an MPI that never started. Wording from the
programs' sources (``source``): DeepSpeed ``deepspeed/launcher/launch.py`` (``sigkill_handler``), Slurm
``src/plugins/task/cgroup`` / ``src/slurmd/slurmstepd`` (the oom-kill notice), MPICH's and Intel MPI's
``Fatal error in PMPI_Init``, Horovod ``horovod/common/operations.cc``, Ray's memory monitor
(``src/ray/raylet/node_manager.cc``). Horovod's stall inspector, which names the missing ranks, is read with
the cross-rank inputs (:mod:`clusterdoctor.observe.comm.torch_dist`).
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.catalog.launcher_slurm_mpi_ray import MORE_MESSAGES

_OOM_CAUSE = (
    "the host (or the job's memory limit) ran out of memory and the kernel's OOM killer or the cgroup's "
    "limit ended the worker with SIGKILL: every worker holds a copy of the model or dataset in RAM, CPU "
    "offload (ZeRO-Offload) or pinned buffers grow, or more workers per node than the RAM holds"
)
_OOM_FIX = (
    "confirm in the kernel log ('Out of memory: Killed process') or the scheduler's accounting (sacct "
    "MaxRSS); give the job more host memory (--mem, the pod's limit) or fewer workers per node, load "
    "weights memory-mapped / lazily, reduce offload and DataLoader workers"
)

_OWN_MESSAGES: tuple[Message, ...] = (
    Message(
        code="LAUNCH101",
        name="deepspeed-worker-sigkill",
        title="DeepSpeed's launcher saw a worker killed with SIGKILL (return code -9): host out of memory",
        pattern=r"exits with return code = -9\b",
        trigger="exits with return code = -9",
        meaning="a training process started by the deepspeed launcher died from SIGKILL",
        cause=_OOM_CAUSE,
        fix=_OOM_FIX,
        verify=("dmesg -T | grep -i -E 'killed process|out of memory'", "free -g"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/launcher/launch.py",
        example="[ERROR] [launch.py:321:sigkill_handler [xxx] exits with return code = -9",
        example_source="https://github.com/deepspeedai/DeepSpeed/issues/4890",
        causes=("torch.host-oom",),
    ),
    Message(
        code="LAUNCH102",
        name="deepspeed-worker-failed",
        title="DeepSpeed's launcher saw a worker fail (its own log holds the cause)",
        pattern=r"exits with return code = (?!-9\b)(?P<code>-?\d{1,4})\b",
        trigger="exits with return code = ",
        meaning="a training process started by the deepspeed launcher exited with an error; the others were killed",
        cause=(
            "the worker raised an exception (return code 1) or crashed in native code (-11 segfault, -6 abort, "
            "-7 bus error); the first error in that worker's output names why"
        ),
        fix="read the first traceback or error of the worker before the launcher's 'Killing subprocess' lines",
        verify=("grep -n -m3 -E 'Error|Traceback' <the job log>",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/launcher/launch.py",
        example=(
            "[2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] ['/global/D1/homes/sushant/sushanta/"
            "venv/bin/python3.10', '-u', 'trainCLM.py', '--local_rank=1', '--deepspeed', '/home/sushant/D1/"
            "sushanta/try/nepaligpt/clm/config/deepspeed_config.json'] exits with return code = -11"
        ),
        example_source="https://github.com/deepspeedai/DeepSpeedExamples/issues/626",
        role="symptom",
    ),
    Message(
        code="LAUNCH103",
        name="slurm-oom-kill",
        title="Slurm killed processes of the step for exceeding its memory (oom-kill event)",
        pattern=(
            r"(?:Detected (?P<n>\d{1,9}) oom[-_]kill events?(?:\(s\))? in (?:StepId=|step )?(?P<step>\w{1,32}(?:\.\w{1,32}){0,3})"
            r"|srun: error: (?P<node>[\w.\-]{1,128}): tasks? (?P<task>[\d,\-]{1,64}): Out Of Memory)"
        ),
        trigger="oom-kill event",
        triggers=("oom_kill event", "Out Of Memory"),
        meaning="slurmstepd saw the cgroup out-of-memory handler kill processes of the job step",
        cause=_OOM_CAUSE.replace(
            "the host (or the job's memory limit)", "the job step's memory limit (--mem)"
        ),
        fix=(
            "raise the step's memory (#SBATCH --mem / --mem-per-cpu, or --mem=0 for the whole node), or use "
            "fewer workers per node; check MaxRSS against ReqMem with sacct"
        ),
        verify=("sacct -j JOBID --format=JobID,State,ReqMem,MaxRSS,NodeList",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://slurm.schedmd.com/cgroup.conf.html",
        example=(
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=37205392.0. Some of your processes may "
            "have been killed by the cgroup out-of-memory handler."
        ),
        example_source="https://github.com/brain-score/vision/pull/950",
        notes=(
            "Slurm 23.11+: 'Detected 1 oom_kill event in StepId=11300781.0. Some of the step tasks have been OOM Killed.'",
        ),
        causes=("torch.host-oom",),
        subject="step {step}",
    ),
    Message(
        code="LAUNCH104",
        name="mpi-init-failed",
        title="MPI itself does not start between the nodes (MPI_Init fails)",
        pattern=r"Fatal error in P?MPI_Init(?:_thread)?: (?P<err>[\w ,]{1,80})",
        trigger="Fatal error in",
        meaning="MPI_Init failed before the program ran: the MPI runtime could not wire up its processes",
        cause=(
            "the MPI launch is broken, not NCCL: the process manager cannot reach the other nodes (PMI "
            "key-value exchange fails, ssh/hydra blocked), mismatched MPI installations between mpirun and "
            "the binary, or the network interface MPI picked does not route between the nodes"
        ),
        fix=(
            "make a plain MPI hello world run across the same hosts first (mpirun -np 2 -H a,b hostname, then an "
            "MPI program); use one MPI install for build and launch; set the interface (I_MPI_HYDRA_IFACE, "
            "--mca btl_tcp_if_include)"
        ),
        verify=("mpirun -np 2 -H host1,host2 hostname",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/pmodels/mpich/blob/main/src/mpi/init/init_impl.c",
        example=(
            "Abort(3712399) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init: Other MPI error, error stack:"
        ),
        example_source="https://github.com/NVIDIA/nccl-tests/issues/92",
        causes=("launcher.mpi-broken",),
    ),
    Message(
        code="LAUNCH105",
        name="horovod-shut-down",
        title="Horovod shut down: a rank failed or finished before the others",
        pattern=r"Horovod has been shut down\. This was caused by an exception on one of the ranks",
        trigger="Horovod has been shut down",
        meaning=(
            "Horovod's background thread stopped because one rank raised an exception or left the training "
            "loop while the others still submitted collectives"
        ),
        cause=(
            "one rank ended first: an exception on that rank (its log shows it before the first shutdown "
            "message), or uneven work per rank (a rank that ran out of data or skipped steps)"
        ),
        fix="find the first exception in the logs of all ranks; give every rank the same number of steps",
        verify=("grep -n -m1 -E 'Error|Exception' <every rank's log>",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://github.com/horovod/horovod/blob/master/horovod/common/operations.cc",
        example=(
            "tensorflow.python.framework.errors_impl.UnknownError:  Horovod has been shut down. This was caused "
            "by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor "
            "after one of the ranks finished execution."
        ),
        example_source="https://github.com/DEKHTIARJonathan/HVD_TF_Worker_Desync_BugReport",
        causes=("nccl.rank-behind",),
        role="symptom",
    ),
    Message(
        code="LAUNCH106",
        name="ray-memory-monitor-kill",
        title="Ray's memory monitor killed a worker: the node is running low on host memory",
        # "Task was killed ..." (2.2-2.54), "N worker(s) were killed ..." (2.55+): the sentence itself is Ray's
        pattern=r"killed due to the node running low on memory",
        trigger="killed due to the node running low on memory",
        meaning="Ray's memory monitor killed a task or actor worker because the node's memory use passed its threshold",
        cause=_OOM_CAUSE.replace("the kernel's OOM killer or the cgroup's limit", "Ray's memory monitor"),
        fix=(
            "give each worker less to hold (fewer concurrent tasks per node: num_cpus/memory resources in the "
            "task options), more nodes or memory; RAY_memory_usage_threshold only moves the limit"
        ),
        verify=("ray memory --stats-only", "free -g"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html",
        example="ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        example_source="https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html",
        causes=("torch.host-oom",),
    ),
    Message(
        code="LAUNCH107",
        name="slurm-gres-gpu-count-lower",
        title="Slurm drained a node: it reports fewer GPUs than slurm.conf/gres.conf configure",
        # gres.c: "gres/%s count reported lower than configured (%lu < %lu)" as the node's drain reason;
        # `sinfo -R` cuts its REASON column at 20 characters ("gres/gpu count repor")
        # slurmctld's own log line first (it names the node), then the reason as `sinfo -R` shows it
        pattern=(
            r"Setting node (?P<node2>[\w.\-]{1,253}) state to INVAL with reason:gres/gpu count reported lower"
            r"(?: than configured \((?P<got2>\d{1,6}) < (?P<want2>\d{1,6})\))?"
        ),
        trigger="gres/gpu",
        variants=(
            (
                r"gres/(?P<gres>gpu)(?::\w{1,40})? count repor(?:ted lower than configured"
                r"(?: \((?P<got>\d{1,6}) < (?P<want>\d{1,6})\))?)?"
                # a `sinfo -R` row: USER, TIMESTAMP, NODELIST after the reason
                r"(?:\s{1,40}[\w.\-]{1,64}\s{1,40}\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\s{1,40}(?P<node>[\w.\-\[\],]{1,200}))?"
            ),
        ),
        meaning=(
            "slurmd registered with fewer GPUs than the configuration gives the node, so slurmctld marked the "
            "node invalid and drained it: no job gets its GPUs"
        ),
        cause=(
            "slurmd cannot count the GPUs: with AutoDetect=nvml a slurmd built without NVML (no gpu_nvml.so "
            "plugin in the package or image) finds none; else the NVIDIA driver is not loaded, a GPU fell "
            "off the bus, the device files in gres.conf (File=/dev/nvidia[0-3]) do not exist, or the node "
            "changed (a new MIG layout with fewer instances) while slurm.conf still says the old count"
        ),
        fix=(
            "on the node: check that the Slurm build has gpu_nvml.so (rpm -ql / the image's plugin dir) and "
            "rebuild with NVML if not, or list the GPUs in gres.conf without AutoDetect; check nvidia-smi; "
            "then scontrol update nodename=<node> state=resume"
        ),
        verify=("slurmd -G", "ls /usr/lib64/slurm/ | grep gpu_nvml", "nvidia-smi -L"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/SchedMD/slurm/blob/master/src/common/gres.c",
        example=(
            "May 23 12:49:52 mgmt1.int.p2-ecole.calculquebec.cloud slurmctld[80708]: slurmctld: error: Setting "
            "node nodegpu1 state to INVAL with reason:gres/gpu count reported lower than configured (3 < 4)"
        ),
        example_source="https://github.com/ComputeCanada/puppet-magic_castle/issues/361",
        causes=("slurm.gres-nvml", "slurm.node-config-mismatch", "gpu.driver-not-loaded"),
        subject="node {node}",
        detail="({got} < {want})",
    ),
    Message(
        code="LAUNCH108",
        name="slurmd-gres-device-file-missing",
        title="slurmd cannot start: a device file its gres.conf names does not exist",
        # gres.c: "Waiting for gres.conf file %s" then "can't stat gres.conf file %s: %m" (fatal)
        pattern=r"can't stat gres\.conf file (?P<file>/[^\s:]{1,200}): (?P<err>[^\n]{1,80})",
        trigger="can't stat gres.conf file",
        meaning="slurmd checks every File= of gres.conf at start; one is missing, so slurmd exits and the node stays down",
        cause=(
            "gres.conf lists GPUs the node does not have yet: the NVIDIA driver is not installed or not "
            "loaded (no /dev/nvidia0), the device nodes were not created, or the configuration was rolled "
            "out to nodes without GPUs"
        ),
        fix=(
            "install/load the NVIDIA driver on the node (nvidia-smi must list the GPUs and /dev/nvidia* exist, "
            "nvidia-modprobe -u -c=0 creates them) or fix gres.conf for that node, then restart slurmd"
        ),
        verify=("ls -l /dev/nvidia*", "nvidia-smi -L", "slurmd -G"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://slurm.schedmd.com/gres.conf.html",
        example=(
            "Feb 02 09:52:07 bibigrid-worker slurmd[12912]: slurmd: fatal: can't stat gres.conf file /dev/nvidia0: "
            "No such file or directory"
        ),
        example_source="https://github.com/BiBiServ/bibigrid/issues/705",
        causes=("slurm.gres-device-missing",),
        subject="{file}",
    ),
    Message(
        code="LAUNCH109",
        name="slurm-gres-count-changed",
        title="Slurm rejects a node whose GPU count changed from what slurm.conf says",
        # node_mgr.c _node_config_validate: "gres/%s: Count changed on node %s (%lu != %lu)"
        pattern=(
            r"gres/(?P<gres>\w{1,40}): Count changed on node (?P<node>[\w.\-]{1,253}) "
            r"\((?P<was>\d{1,6}) != (?P<now>\d{1,6})\)"
        ),
        trigger="Count changed on node",
        meaning=(
            "slurmctld found that the node registers another count of a GRES than it holds for it; with "
            "fewer it sets the node INVAL and drains it"
        ),
        cause=(
            "the node's hardware or partitioning changed (a MIG layout with another number of instances, a "
            "GPU removed or fallen off the bus) while slurm.conf/gres.conf keep the old count"
        ),
        fix=(
            "make slurm.conf's Gres= for the node match what the node has (slurmd -G shows it), scontrol "
            "reconfigure, then resume the node; if a GPU is missing, find out why (nvidia-smi, dmesg)"
        ),
        verify=("slurmd -G", "scontrol show node <node> | grep -i gres"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/SchedMD/slurm/blob/master/src/slurmctld/node_mgr.c",
        example=(
            "May 23 12:49:52 mgmt1.int.p2-ecole.calculquebec.cloud slurmctld[80708]: slurmctld: "
            "_node_config_validate: gres/gpu: Count changed on node nodegpu1 (4 != 3)"
        ),
        example_source="https://github.com/ComputeCanada/puppet-magic_castle/issues/361",
        causes=("slurm.node-config-mismatch",),
        subject="node {node}",
        detail="({was} -> {now})",
    ),
    Message(
        code="LAUNCH110",
        name="slurmd-gres-conf-duplicate",
        title="slurmd refuses its gres.conf: duplicate records for a GRES",
        # gres.c: "gres.conf duplicate records for %s" (fatal)
        pattern=r"gres\.conf duplicate records for (?P<gres>\w{1,40})",
        trigger="gres.conf duplicate records",
        meaning="slurmd read two definitions of the same GRES in gres.conf and exits: the node stays down",
        cause=(
            "gres.conf both autodetects the GPUs (AutoDetect=nvml) and lists them by hand (a Name=gpu line "
            "per GPU, often written by a configuration template), or lists the same device twice"
        ),
        fix="keep one source of the GPU records: AutoDetect=nvml alone, or explicit Name=gpu File=... lines without AutoDetect",
        verify=("slurmd -G", "grep -v '^#' /etc/slurm/gres.conf"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://slurm.schedmd.com/gres.conf.html",
        example=(
            "Feb 20 18:59:13 node2.int.rubberducky.calculquebec.cloud slurmd[57977]: fatal: gres.conf duplicate "
            "records for gpu"
        ),
        example_source="https://github.com/ComputeCanada/puppet-magic_castle/issues/27",
        causes=("slurm.gres-conf-invalid",),
    ),
    Message(
        code="LAUNCH111",
        name="slurm-node-low-resource",
        title="Slurm drained nodes that register less memory or fewer CPUs than slurm.conf declares",
        # slurmctld's drain reasons "Low RealMemory", "Low socket*core*thread count", "Low TmpDisk" (node_mgr.c)
        pattern=(
            r"\bLow (?P<what>RealMemory|socket\*core\*thread count|CPUs|TmpDisk)\b"
            # a `sinfo -R` row: the reason column, then (USER, TIMESTAMP or straight) the NODELIST last
            r"(?:[ \t]{1,60}(?:[\w.\-]{1,64}[ \t]{1,40}\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[ \t]{1,40})?"
            r"(?P<node>[A-Za-z][\w.\-]{0,200}(?:\[[\d,\-]{1,200}\])?)[ \t]*$)?"
        ),
        trigger="Low ",
        meaning=(
            "slurmd registered less of a resource than slurm.conf gives the node, so slurmctld drained it: "
            "jobs stay PENDING for that partition"
        ),
        cause=(
            "slurm.conf (or the template that writes it) declares more RealMemory/CPUs/TmpDisk than the "
            "machine has or reports (a VM shape smaller than assumed, memory reserved by the firmware or "
            "hypervisor)"
        ),
        fix=(
            "set the node's RealMemory (etc.) to at most what `slurmd -C` prints on it, scontrol reconfigure, "
            "then scontrol update nodename=<nodes> state=resume"
        ),
        verify=("slurmd -C", "sinfo -R"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://slurm.schedmd.com/slurm.conf.html#OPT_RealMemory",
        example="Low RealMemory                          compute[001-003]    ",
        example_source="https://github.com/clusterinthecloud/terraform/issues/11",
        causes=("slurm.node-config-mismatch",),
        subject="node {node}",
        detail="({what})",
    ),
)

MESSAGES: tuple[Message, ...] = tuple(sorted((*_OWN_MESSAGES, *MORE_MESSAGES), key=lambda m: m.code))
