"""Mount failures as the kubelet and mount(8) print them when a pod's volume cannot be set up, as data:
a filesystem type whose mount helper is not installed on the node.

Wording from util-linux (``sys-utils/mount.c``: ``bad option; for several filesystems (e.g. nfs, cifs)
you might need a /sbin/mount.<type> helper program``). Example lines are from public issue threads, each
named in ``example_source``.

Part of the storage family: :mod:`clusterdoctor.rules.catalog.storage` merges these entries into its
``MESSAGES`` in code order.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

MOUNT_MESSAGES: tuple[Message, ...] = (
    Message(
        code="STOR127",
        name="mount-helper-missing",
        title="A volume cannot be mounted: the node lacks the filesystem's mount helper (nfs-common, cifs-utils)",
        # mount(8) on a filesystem type handled by an external /sbin/mount.<type> that is not installed;
        # the message is often wrapped ("filesys" / "tems") by the terminal or a TUI pane
        pattern=r"(?:mount: (?P<path>/[^\s:]{1,400}): )?bad option; for several filesys",
        trigger="bad option; for several filesys",
        meaning=(
            "mount(8) did not understand the options because no helper program for the filesystem type "
            "(mount.nfs, mount.cifs) is installed: the kubelet cannot set up the pod's volume and the pod "
            "stays in ContainerCreating (FailedMount)"
        ),
        cause=(
            "the node has no NFS/CIFS client utilities (nfs-common / nfs-utils, cifs-utils): common on "
            "minimal images when a volume (an NFS PersistentVolume, Longhorn RWX share-manager, an SMB "
            "share) is first used there"
        ),
        fix="install the client package on every node that may run the pod (apt install nfs-common / dnf install nfs-utils)",
        verify=("ls /sbin/mount.nfs /sbin/mount.cifs", "kubectl describe pod <pod> | grep -A5 FailedMount"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/util-linux/util-linux/blob/master/sys-utils/mount.c",
        example=(
            "mount: /var/lib/kubelet/pods/ee57885a-0cc8-4c87-aef2-668b82fb388d/volumes/kubernetes.io~nfs/pvc-b3f8d754-"
            "bdee-4409-96b7-77daec7d22d0: bad option; for several filesys"
        ),
        example_source="https://github.com/longhorn/longhorn/issues/1799",
        causes=("k8s.volume-mount",),
        subject="{path}",
    ),
)
