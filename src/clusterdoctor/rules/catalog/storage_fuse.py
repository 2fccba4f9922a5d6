"""The kernel's OOM killer ending a FUSE filesystem daemon (s3/gcs/blob mounts), as data.

The kernel prints ``Out of memory: Killed process <pid> (<comm>)`` (mm/oom_kill.c) and, since 5.0, an
``oom-kill:constraint=...,task=<comm>,pid=...`` summary line; when ``<comm>`` is the user-space daemon
of a FUSE mount (mountpoint-s3, goofys, s3fs, gcsfuse, rclone, blobfuse, JuiceFS ...), the mount stays
and every access through it fails with ``Transport endpoint is not connected`` (STOR123): the daemon's
memory is the cause, not the reader. Other processes killed the same way are KUBELET134's.

Part of the storage family: :mod:`clusterdoctor.rules.catalog.storage` merges these entries into its
``MESSAGES`` in code order.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

# the process names (comm, at most 15 characters) of FUSE filesystem daemons
FUSE_DAEMONS = (
    r"mount-s3|goofys|geesefs|s3fs|gcsfuse|rclone|blobfuse2?|juicefs|alluxio-fuse|mfsmount|ossfs|cosfs"
    r"|sshfs|cvmfs2|lxcfs|s3backer|fuse\.\w{1,10}"
)

FUSE_MESSAGES: tuple[Message, ...] = (
    Message(
        code="STOR128",
        name="fuse-daemon-oom-killed",
        title="The kernel's OOM killer killed a FUSE filesystem daemon: its mount is left dead",
        pattern=(
            r"Out of memory: Kill(?:ed)? process (?P<pid>\d{1,10}) \((?P<proc>" + FUSE_DAEMONS + r")\)"
            r"(?: total-vm:(?P<vm>\d{1,12})kB, anon-rss:(?P<rss>\d{1,12})kB)?"
        ),
        trigger="Out of memory: Kill",
        triggers=("oom-kill:constraint=",),
        variants=(r"oom-kill:constraint=\w{1,40},.{0,400}?,task=(?P<proc2>" + FUSE_DAEMONS + r"),pid=",),
        meaning=(
            "the node ran out of memory and the kernel killed the daemon that serves a FUSE mount; the mount "
            "point stays, so the data loader, checkpoint writer or cp reading through it gets ENOTCONN "
            "('Transport endpoint is not connected')"
        ),
        cause=(
            "the FUSE daemon itself grew (metadata and read-ahead caches of a bucket with millions of objects, "
            "large prefetch windows) or the host is small (no swap, a few hundred MB), so it is the largest "
            "process when memory runs out"
        ),
        fix=(
            "give the host or the daemon's cgroup more memory, bound its caches (mount-s3 --max-threads / "
            "--cache limits, goofys/gcsfuse stat and type cache sizes), list buckets in pages, then unmount "
            "the dead mount (fusermount -uz <path>) and mount again"
        ),
        verify=("dmesg -T | grep -i 'out of memory'", "mount | grep fuse", "free -m"),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source="https://github.com/torvalds/linux/blob/master/mm/oom_kill.c",
        example=(
            "Out of memory: Killed process 3221 (mount-s3) total-vm:10828136kB, anon-rss:8286384kB, "
            "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:16908kB oom_score_adj:0"
        ),
        example_source="https://github.com/awslabs/mountpoint-s3/issues/1378",
        causes=("storage.fuse-daemon",),
        subject="{proc}",
    ),
)
