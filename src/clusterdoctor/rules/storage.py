"""Storage rules over pasted listings: full filesystems (``df``) and exhausted quotas.

Inputs: ``fs_usage`` and ``quotas`` (:mod:`clusterdoctor.observe.storage.usage`); ``train_log``
(:mod:`clusterdoctor.observe.comm.train_log`) where its lines split a step into its wait for data and
the rest (STOR003). Messages about storage
(``No space left on device``, ``Disk quota exceeded``, a corrupt checkpoint, a DataLoader bus error) are
catalogue entries (:mod:`clusterdoctor.rules.catalog.storage`); these rules name the filesystem itself.

What is normal is not a finding: read-only images are always 100 % used (snap and loop-mounted
squashfs, ISO images), and a quota over its soft limit is a warning only until its grace period ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Action, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules import storage_subject  # noqa: F401  (registers the storage subject resolver)
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("fs_usage", "no df output")
register_input("quotas", "no quota listing (quota -s, lfs quota, mmlsquota)")
register_input("train_log", "no training progress log")

FS_USE_WARNING = Threshold(
    "filesystem_used_pct_warning",
    95,
    "% used",
    "kubernetes-monitoring node-mixin NodeFilesystemAlmostOutOfSpace: warning when less than 5 % is available",
    "used share at which a filesystem is almost full",
)
FS_USE_CRITICAL = Threshold(
    "filesystem_used_pct_critical",
    97,
    "% used",
    "kubernetes-monitoring node-mixin NodeFilesystemAlmostOutOfSpace: critical when less than 3 % is available",
    "used share at which writes are about to fail",
)
QUOTA_AT_LIMIT = Threshold(
    "quota_used_fraction",
    1.0,
    "fraction of the hard limit (or of the soft quota once its grace expired)",
    "quota(1), lfs-quota(1), mmlsquota: writes fail with EDQUOT at the hard limit, and at the soft quota "
    "once its grace period has expired",
    "usage at which writes to the filesystem fail",
)

_READ_ONLY_TYPES = ("squashfs", "iso9660", "udf", "cramfs", "erofs")
_SHM = ("/dev/shm", "/run/shm")
# a container's own /dev/shm as the node sees it: Docker's .../containers/<id>/mounts/shm, containerd's
# CRI .../sandboxes/<id>/shm (both tmpfs)
_CONTAINER_DIRS = ("/containers/", "/sandboxes/")


def mountpoint(mount: str) -> str:
    """The path of a row's mount: ``df`` rows name it as is, the fleet's node exporter rows
    (:func:`clusterdoctor.observe.node.prom_fleet.node_filesystems`) as ``NODE:MOUNTPOINT``."""
    if mount.startswith("/"):
        return mount
    i = mount.find(":/")
    return mount[i + 1 :] if i > 0 else mount


def _is_shm(u: Any) -> bool:
    path = mountpoint(u.mount)
    if path in _SHM:
        return True
    tmpfs = (u.fstype or "").lower() == "tmpfs"
    return tmpfs and path.endswith("/shm") and any(d in path for d in _CONTAINER_DIRS)


def _read_only_image(u: Any) -> bool:
    return (
        (u.fstype or "").lower() in _READ_ONLY_TYPES
        or u.filesystem.startswith("/dev/loop")
        or mountpoint(u.mount).startswith("/snap/")
    )


def _act(f: Finding, action: Action) -> Finding:
    f.action = action
    return f


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, k in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} B"


@rule(
    id="STOR001",
    name="filesystem-full",
    layer="storage",
    title="Filesystem full or almost full",
    requires=("fs_usage",),
    thresholds=(FS_USE_WARNING, FS_USE_CRITICAL),
    causes=("storage.disk-full",),
)
def filesystem_full(obs: Observations) -> Iterator[Finding]:
    """A ``df`` row at 95 % or more used (or 0 bytes / 0 inodes available); node exporter's rows of
    the fleet (``diagnose --prometheus``) are judged the same, named ``NODE:MOUNTPOINT``.

    **Symptom**: checkpoint saves fail (``PytorchStreamWriter failed writing file``, ``[Errno 28] No space
    left on device``), logs stop, DataLoader workers die when the filesystem is ``/dev/shm``.
    **Why**: a write needs free blocks and, for a new file, a free inode; at 100 % either is gone.
    Checkpoints (several GB each), caches (~/.cache, dataset caches) and core dumps fill a volume quickly.
    On ``/dev/shm`` the space is shared memory: DataLoader workers and NCCL's shared-memory transport live there.
    **Fix**: free space (old checkpoints, caches), write outputs to a larger volume, keep fewer checkpoints;
    for ``/dev/shm`` give the container more (--shm-size, an emptyDir with medium: Memory) or remove stale
    files.
    **Verify**: `df -h` and `df -i` (Use% below 95 on the written filesystem).
    """
    seen: set[tuple[str, bool]] = set()
    for u in obs.get("fs_usage") or []:
        if _read_only_image(u) or (u.mount, u.inodes) in seen:
            continue
        full = u.avail == 0 and (u.size or 0) > 0
        pct = u.use_pct if u.use_pct is not None else (100.0 if full else None)
        if pct is None or pct < FS_USE_WARNING.value:
            continue
        seen.add((u.mount, u.inodes))
        sev = Severity.CRITICAL if pct >= FS_USE_CRITICAL.value or full else Severity.WARNING
        what = "inodes" if u.inodes else "space"
        shm = _is_shm(u)
        causes = ("storage.shm-dataloader", "nccl.shm-no-space") if shm else ("storage.disk-full",)
        avail = f"{u.avail} inodes" if u.inodes else _size(u.avail)
        yield _act(
            filesystem_full.finding(
                f"{u.mount} ({u.filesystem}) is {pct:g} % used ({what}; {avail} available)"
                + (": shared memory for DataLoader workers and NCCL is exhausted." if shm else "."),
                evidence=[
                    Evidence(
                        f"{u.source}{f':{u.line}' if u.line else ''}: {u.filesystem} {_size(u.size) if not u.inodes else u.size} "
                        f"{pct:g}% {u.mount}",
                        pct,
                        FS_USE_WARNING.value,
                        "%",
                        source=u.source,
                    )
                ],
                severity=sev,
                confidence=0.9 if sev == Severity.CRITICAL else 0.7,
                subject=u.mount,
                causes=causes,
            ),
            Action.CONFIGURE,
        )


@rule(
    id="STOR002",
    name="quota-exhausted",
    layer="storage",
    title="Disk quota exhausted",
    requires=("quotas",),
    thresholds=(QUOTA_AT_LIMIT,),
    causes=("storage.disk-full",),
)
def quota_exhausted(obs: Observations) -> Iterator[Finding]:
    """A quota at its hard limit, or over its soft quota (critical once the grace period expired).

    **Symptom**: ``[Errno 122] Disk quota exceeded`` on writes to a filesystem that ``df`` shows with free
    space; caches under $HOME (pip, matplotlib, Hugging Face) and checkpoints fail to write.
    **Why**: the quota of the user, group or fileset (blocks or number of files) is used up; above the
    soft quota writes continue only until the grace period expires, then the soft quota acts as the limit.
    **Fix**: delete or move data off that filesystem (redirect caches with XDG_CACHE_HOME/HF_HOME to
    scratch, prune checkpoints), or ask for a larger quota.
    **Verify**: `quota -s` / `lfs quota -h -u $USER <mount>` / `mmlsquota` (used below the quota, grace none).
    """
    for q in obs.get("quotas") or []:
        at_hard = q.hard > 0 and q.used >= q.hard * QUOTA_AT_LIMIT.value
        over_soft = (q.soft > 0 and q.used >= q.soft) or q.over_mark
        expired = (q.grace or "").lower() == "expired"
        if not (at_hard or over_soft):
            continue
        unit = (lambda n: f"{n} files") if q.kind == "files" else _size
        if at_hard or (over_soft and expired):
            sev, conf = Severity.CRITICAL, 0.9
            state = "at its hard limit" if at_hard else "over its soft quota with the grace period expired"
        else:
            sev, conf = Severity.WARNING, 0.7
            state = f"over its soft quota (grace {q.grace or 'running'})"
        qt = f" {q.qtype}" if q.qtype else ""
        yield _act(
            quota_exhausted.finding(
                f"{q.filesystem}{qt} {q.kind} quota is {state}: {unit(q.used)} used of {unit(q.soft)} quota / "
                f"{unit(q.hard)} limit; writes there fail with 'Disk quota exceeded'.",
                evidence=[
                    Evidence(
                        f"{q.source}:{q.line}: {q.filesystem} used {unit(q.used)}, quota {unit(q.soft)}, "
                        f"limit {unit(q.hard)}, grace {q.grace or '-'}",
                        source=q.source,
                    )
                ],
                severity=sev,
                confidence=conf,
                subject=q.filesystem,
            ),
            Action.CONFIGURE,
        )


DATA_WAIT_SHARE = Threshold(
    "data_wait_share_of_step",
    0.5,
    "of the step time",
    "pytorch/examples imagenet/main.py and torchvision references (MetricLogger): 'Data'/'data' is the "
    "time a step waited for its batch, 'Time'/'time' the whole step; PyTorch Performance Tuning Guide: "
    "the input pipeline must keep up with the GPU (num_workers, pin_memory). Above half the step the "
    "input pipeline, not the model, sets the speed",
    "median share of a step spent waiting for the batch",
)
MIN_DATA_S = 0.05  # a wait shorter than this is noise, whatever its share


def _median(vals: list[float]) -> float:
    vals = sorted(vals)
    return vals[len(vals) // 2]


@rule(
    id="STOR003",
    name="data-loading-bound",
    layer="storage",
    title="Training waits on data loading (slow storage or too few DataLoader workers)",
    requires=("train_log",),
    thresholds=(DATA_WAIT_SHARE,),
    severity=Severity.WARNING,
    causes=("storage.slow-io",),
)
def data_loading_bound(obs: Observations) -> Iterator[Finding]:
    """Progress lines whose data time is most of the step time.

    **Symptom**: GPUs mostly idle, steps seconds long; the ImageNet example's ``Data`` column (or
    MetricLogger's ``data:``) is nearly equal to ``Time``.
    **Why**: each step waits for its batch: the files are read from a slow disk or network filesystem
    (HDD, NFS, object store), or decoding and augmentation on too few DataLoader workers (CPU) cannot
    keep up with the GPU.
    **Fix**: put the dataset on local SSD/NVMe or in page cache, use a packed format (WebDataset,
    LMDB, FFCV), raise ``num_workers`` (and ``pin_memory=True``, ``persistent_workers=True``).
    **Verify**: the ``Data`` time falls to a small share of ``Time``; ``iostat -x 1`` (disk %util near
    100 says storage) and ``top`` (workers at 100 % CPU say decoding).
    """
    for log in obs.get("train_log") or []:
        # the first step of an epoch includes starting the workers: not a steady step
        timed = [
            (s, s.data_s, s.step_s)
            for s in log.steps
            if s.kind == "train" and s.step != 0 and s.step_s and s.step_s > 0 and s.data_s is not None
        ]
        if not timed:
            continue
        share = _median([min(d / t, 1.0) for _, d, t in timed])
        wait = _median([d for _, d, _ in timed])
        if share < DATA_WAIT_SHARE.value or wait < MIN_DATA_S:
            continue
        step = _median([t for _, _, t in timed])
        last = timed[-1][0]
        yield _act(
            data_loading_bound.finding(
                f"steps wait on data loading: {share:.0%} of a step (median {wait:.3g} s of {step:.3g} s) "
                "is the wait for its batch: the input pipeline (storage reads or DataLoader workers), "
                "not the GPU, sets the speed.",
                evidence=[
                    Evidence(
                        f"{log.path}:{last.line}: step {last.step}: data {last.data_s} s of {last.step_s} s",
                        round(share, 3),
                        DATA_WAIT_SHARE.value,
                        "of the step",
                        source=log.path,
                    )
                ],
                severity=Severity.WARNING,
                confidence=0.7,
                subject="data loading",
            ),
            Action.CONFIGURE,
        )
