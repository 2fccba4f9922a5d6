"""NCCL's own messages (``NCCL WARN`` lines and the errors NCCL returns), as data.

Wording from NVIDIA/nccl ``src/`` (``misc/shmutils.cc``, ``transport/net_ib.cc``, ``bootstrap.cc``,
``init.cc``) and the NCCL troubleshooting guide
(docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html); example lines from public
issue threads, each named in ``example_source``.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_GUIDE = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"

MESSAGES: tuple[Message, ...] = (
    Message(
        code="NCCL101",
        name="nccl-shm-no-space",
        title="NCCL cannot allocate its shared-memory segment (/dev/shm too small or full)",
        pattern=(
            r"NCCL WARN (?:Error: failed to extend /dev/shm/\S{1,64} to \d{1,20} bytes"
            r"|Call to posix_fallocate failed ?: No space left on device"
            r"|Error while creating shared memory segment \S{1,128} \(size \d{1,20}\)(?:, error: No space left)?)"
        ),
        trigger="NCCL WARN",
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
    ),
)
