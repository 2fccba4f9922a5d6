"""The kernel's OOM killer on the node (not a container's cgroup limit): ``Out of memory: Killed process``.

KUBELET117 is the memory-cgroup case (``Memory cgroup out of memory: Killed process``, a container at its
limit); here the whole host ran out (mm/oom_kill.c, ``constraint=CONSTRAINT_NONE``). A FUSE daemon killed
that way is STOR128's (its mount is left dead), so its names are left out here.

Part of the kubelet family: :mod:`clusterdoctor.rules.catalog.kubelet` merges these entries into its
``MESSAGES`` in code order.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.catalog.storage_fuse import FUSE_DAEMONS

OOM_MESSAGES: tuple[Message, ...] = (
    Message(
        code="KUBELET134",
        name="kernel-host-oom-kill",
        title="the kernel's OOM killer killed a process: the node ran out of memory",
        # "Out of memory: Killed process N (comm)" (4.x+; older "Kill process"); never the cgroup form
        pattern=(
            r"(?<!cgroup )\bOut of memory: Kill(?:ed)? process (?P<pid>\d{1,10}) "
            r"\((?!(?:" + FUSE_DAEMONS + r")\))(?P<proc>[^)\n]{1,64})\)"
        ),
        trigger="Out of memory: Kill",
        meaning=(
            "the host had no memory left for an allocation and the kernel killed the process with the highest "
            "OOM score; a training worker killed this way exits with SIGKILL (-9, exit code 137)"
        ),
        cause=(
            "the processes on the node need more memory than it has: data loader workers each holding a copy "
            "of the dataset, a model loaded on the CPU by every rank, pinned memory, a leak; no swap"
        ),
        fix=(
            "use less host memory per node (fewer DataLoader workers or ranks per node, load weights once, "
            "memory-map data) or give the node more; limit the workload's memory so its own cgroup, not the "
            "host, takes the hit"
        ),
        verify=("dmesg -T | grep -iE 'killed process|out of memory'", "free -g"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/torvalds/linux/blob/master/mm/oom_kill.c",
        # LTP's oom01 test on linux-next, as quoted on LKML (the kernel wrapped the rest onto the next line)
        example="[  804.322751] Out of memory: Killed process 3261 (oom01)",
        example_source="https://lore.kernel.org/lkml/20200702155935.GB90961@carbon.dhcp.thefacebook.com/",
        causes=("torch.host-oom", "k8s.oom-killed"),
        subject="{proc}",
    ),
)
