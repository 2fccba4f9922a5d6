"""Storage, checkpoint and data-loading messages, as data.

From the programs' own sources:

* PyTorch checkpoints: ``caffe2/serialize/inline_container.cc`` (``PytorchStreamReader failed reading zip
  archive: failed finding central directory``, ``PytorchStreamWriter failed writing file data/N: file write
  failed``), ``torch/csrc/serialization.cpp`` (``write(): fd N failed with ...``), Python's pickle
  (``invalid load key``);
* DataLoader workers and shared memory: ``torch/csrc/DataLoader.cpp`` (``DataLoader worker (pid N) is killed
  by signal: Bus error. It is possible that dataloader's workers are out of shared memory``, ``Unexpected
  bus error encountered in worker``), ``aten/src/ATen/MapAllocator.cpp`` (``unable to write to file
  </torch_...>``, ``unable to open shared memory object </torch_...> in read-write mode``);
* the OS, as Python raises it (``OSError: [Errno 28] No space left on device``, ``[Errno 122] Disk quota
  exceeded``, ``[Errno 24] Too many open files``: CPython ``Objects/exceptions.c`` over ``strerror``);
* Detectron's training stats (``mb_qsize``: the minibatch queue, empty when loading is the bottleneck).

A write that fails on a full or over-quota filesystem names the disk; the same failure on ``/dev/shm``
names shared memory (a container's 64 MB default), so the two are separate entries. Example lines come
from public threads, each named in ``example_source``.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.catalog.storage_fuse import FUSE_MESSAGES
from clusterdoctor.rules.catalog.storage_mounts import MOUNT_MESSAGES

_TORCH = "https://github.com/pytorch/pytorch/blob/main"
_CONTAINER = f"{_TORCH}/caffe2/serialize/inline_container.cc"
_SHM_FIX = (
    "give the job more shared memory (docker run --shm-size=16g or --ipc=host; in Kubernetes an emptyDir "
    "with medium: Memory mounted at /dev/shm), or lower num_workers / batch size per worker"
)

_OWN_MESSAGES: tuple[Message, ...] = (
    Message(
        code="STOR101",
        name="torch-checkpoint-unreadable",
        title="A PyTorch checkpoint is truncated or corrupt (its zip archive cannot be read)",
        pattern=(
            r"PytorchStreamReader failed (?P<what>reading zip archive|reading file [^:\n]{1,200}|"
            r"finding central directory): (?P<err>[^\n]{1,120})"
        ),
        trigger="PytorchStreamReader failed",
        meaning="torch.load could not read the checkpoint's zip container (no central directory, a corrupt "
        "record): the file is not a complete PyTorch archive",
        cause="the file is truncated or damaged: a save interrupted by a full disk or a killed job, an "
        "incomplete download or upload, a Git LFS pointer or HTML page saved under the checkpoint's name",
        fix="re-save or re-download the checkpoint and compare its size/checksum with the original; load an "
        "earlier checkpoint; write checkpoints to a temporary name and rename when complete",
        verify=(
            "ls -l <checkpoint>",
            'python -c "import zipfile,sys; zipfile.ZipFile(sys.argv[1]).testzip()" <checkpoint>',
        ),
        severity=Severity.CRITICAL,
        action=Action.RESTART_JOB,
        source=_CONTAINER,
        example=(
            "RuntimeError: [enforce fail at inline_container.cc:145] . PytorchStreamReader failed reading zip "
            "archive: failed finding central directory"
        ),
        example_source="https://github.com/guoweiyu/Context-Enhanced-Stereo-Transformer/issues/1",
        causes=("storage.checkpoint-corrupt",),
    ),
    Message(
        code="STOR102",
        name="torch-checkpoint-write-failed",
        title="torch.save could not write the checkpoint (PytorchStreamWriter failed)",
        pattern=(
            r"PytorchStreamWriter failed (?P<what>writing (?:file [^:\n]{1,200}|central directory[^:\n]{0,200}))"
            r"(?::\s?(?P<err>[^\n]{1,120})|\.)"
        ),
        trigger="PytorchStreamWriter failed",
        meaning="a write into the checkpoint file failed part-way: the file on disk is incomplete",
        cause="the target filesystem is full or over quota (most often), or the storage under it failed "
        "(a network filesystem that went away)",
        fix="free space or raise the quota on the checkpoint directory (check df -h and the quota of the "
        "volume actually written to), keep fewer checkpoints, then save again",
        verify=("df -h <checkpoint dir>", "quota -s"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_CONTAINER,
        example=(
            "RuntimeError: [enforce fail at inline_container.cc:471] . PytorchStreamWriter failed writing file "
            "data/228: file write failed"
        ),
        example_source="https://github.com/h2oai/h2o-llmstudio/issues/214",
        causes=("storage.disk-full",),
    ),
    Message(
        code="STOR103",
        name="torch-write-fd-failed",
        title="torch.save: a write() to the checkpoint file failed",
        pattern=r"write\(\): fd (?P<fd>\d{1,9}) failed with (?P<err>[^\n]{1,120})",
        trigger="write(): fd",
        meaning="the operating system failed a write of tensor data into the checkpoint file",
        cause="a full filesystem (ENOSPC, or EIO from a network filesystem that ran out of space), a quota, "
        "or failing storage",
        fix="check free space and quota where the checkpoint goes, free space, and save again",
        verify=("df -h <checkpoint dir>", "dmesg | tail"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_TORCH}/torch/csrc/serialization.cpp",
        example="RuntimeError: write(): fd 29 failed with Input/output error",
        example_source="https://github.com/pytorch/pytorch/issues/10577",
        causes=("storage.disk-full",),
        confidence=0.75,
    ),
    Message(
        code="STOR104",
        name="os-no-space-left",
        title="A write failed: no space left on the device",
        pattern=r"\[Errno 28\] No space left on device(?!: '/dev/shm)(?:: '(?P<path>[^'\n]{1,512})')?",
        trigger="No space left on device",
        # Rust's std::io::Error (safetensors, tokenizers, huggingface hub): "... No space left on device (os
        # error 28)"; coreutils and shells: "<prog>: error writing '<path>': No space left on device"
        variants=(
            r"No space left on device \(os error 28\)",
            r"(?:error writing|write error|cannot (?:create|write)[^:\n]{0,40}) ?'?(?P<path2>/[^'\n:]{1,512})?'?: "
            r"No space left on device",
        ),
        meaning="the filesystem being written to is full (ENOSPC)",
        cause="checkpoints, logs, caches or datasets filled the disk or volume the job writes to",
        fix="free space on that filesystem (old checkpoints, caches such as ~/.cache/huggingface), move the "
        "output to a larger volume, or keep fewer checkpoints",
        verify=("df -h", "du -sh <output dir>/*"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/python/cpython/blob/main/Objects/exceptions.c",
        example=(
            "2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160] "
            "OSError: [Errno 28] No space left on device"
        ),
        example_source="https://github.com/databrickslabs/dolly/issues/139",
        causes=("storage.disk-full",),
        subject="{path}",
    ),
    Message(
        code="STOR105",
        name="os-disk-quota-exceeded",
        title="A write failed: the user's or group's disk quota is exhausted",
        pattern=r"(?:\[Errno 122\] )?Disk quota exceeded(?:: '(?P<path>[^'\n]{1,512})')?",
        trigger="Disk quota exceeded",
        meaning="the filesystem refused the write because the owner's quota is used up (EDQUOT), even if "
        "the filesystem itself has space",
        cause="the home, project or scratch quota (blocks or number of files) is at its limit, or its soft "
        "limit's grace period expired",
        fix="delete or move files on the over-quota filesystem (caches under $HOME, old checkpoints), point "
        "caches and outputs at a filesystem with room (scratch), or ask for a larger quota",
        verify=("quota -s", "lfs quota -h -u $USER <mount>", "mmlsquota"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/python/cpython/blob/main/Objects/exceptions.c",
        example=(
            "OSError: [Errno 122] Disk quota exceeded: "
            "'/home/pr1eld00/pr1eld24/.cache/matplotlib/fontlist-v310.json.matplotlib-lock'"
        ),
        example_source="https://github.com/BSC-ES/autosubmit/issues/596",
        causes=("storage.disk-full",),
        subject="{path}",
        confidence=0.85,
    ),
    Message(
        code="STOR106",
        name="dataloader-bus-error",
        title="A DataLoader worker died of a bus error (out of shared memory)",
        pattern=r"DataLoader worker \(pid (?P<pid>\d{1,9})\) is killed by signal: Bus error",
        trigger="is killed by signal: Bus error",
        meaning="a worker touched shared memory that could not be backed: /dev/shm ran out while tensors "
        "were passed from workers to the main process",
        cause="/dev/shm is too small for num_workers x prefetch x batch size: a container's default 64 MB, a "
        "pod without a memory-backed /dev/shm, or a node whose shm is full",
        fix=_SHM_FIX,
        verify=("df -h /dev/shm",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_TORCH}/torch/csrc/DataLoader.cpp",
        example=(
            "RuntimeError: DataLoader worker (pid 46794) is killed by signal: Bus error. It is possible that "
            "dataloader's workers are out of shared memory. Please try to raise your shared memory limit."
        ),
        example_source="https://github.com/hkchengrex/STCN/issues/132",
        causes=("storage.shm-dataloader",),
    ),
    Message(
        code="STOR112",
        name="dataloader-worker-bus-error",
        title="A DataLoader worker hit a bus error (insufficient shared memory)",
        pattern=r"Unexpected bus error encountered in worker\. This might be caused by insufficient shared memory",
        trigger="Unexpected bus error encountered in worker",
        meaning="a DataLoader worker received SIGBUS: a page of the shared memory it wrote could not be backed",
        cause="/dev/shm is too small or full for the workers' tensors (a container's 64 MB default, a pod "
        "without a memory-backed /dev/shm)",
        fix=_SHM_FIX,
        verify=("df -h /dev/shm",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_TORCH}/torch/csrc/DataLoader.cpp",
        example=(
            "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
            "memory (shm)."
        ),
        example_source="https://github.com/msr-fiddle/pipedream/issues/28",
        causes=("storage.shm-dataloader",),
    ),
    Message(
        code="STOR107",
        name="torch-shm-write-failed",
        title="A tensor could not be written to shared memory (/dev/shm full)",
        pattern=r"unable to write to file </torch_\d{1,10}_\d{1,12}(?:_\d{1,12})?>",
        trigger="unable to write to file </torch_",
        meaning="a DataLoader worker could not grow the shared-memory file that carries a tensor to the "
        "main process",
        cause="/dev/shm is full or too small (a container's 64 MB default)",
        fix=_SHM_FIX,
        verify=("df -h /dev/shm",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_TORCH}/aten/src/ATen/MapAllocator.cpp",
        example="RuntimeError: unable to write to file </torch_74396_2983595444>",
        example_source="https://github.com/zylo117/Yet-Another-EfficientDet-Pytorch/issues/147",
        causes=("storage.shm-dataloader",),
    ),
    Message(
        code="STOR108",
        name="torch-shm-open-failed",
        title="A shared-memory tensor could not be opened (too many open files or /dev/shm exhausted)",
        pattern=r"unable to open shared memory object </torch_\d{1,10}_\d{1,12}(?:_\d{1,12})?> in read-write mode",
        trigger="unable to open shared memory object",
        meaning="the main process could not open the shared-memory file a worker sent a tensor in",
        cause="the default file_descriptor sharing strategy keeps one descriptor per shared tensor: the "
        "open-files limit (ulimit -n) runs out, or /dev/shm itself is exhausted",
        fix="raise ulimit -n, or call torch.multiprocessing.set_sharing_strategy('file_system'); give the "
        "job more /dev/shm if it is full",
        verify=("ulimit -n", "df -h /dev/shm"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_TORCH}/aten/src/ATen/MapAllocator.cpp",
        example="RuntimeError: unable to open shared memory object </torch_4094450_3914785142> in read-write mode",
        example_source="https://github.com/openclimatefix-archives/nowcasting_dataset/issues/158",
        causes=("storage.open-files", "storage.shm-dataloader"),
        confidence=0.8,
    ),
    Message(
        code="STOR109",
        name="os-too-many-open-files",
        title="The process ran out of file descriptors (Too many open files)",
        pattern=r"\[Errno 24\] Too many open files",
        # the DataLoader's own words for it (torch/utils/data/dataloader.py _try_get_data, and the
        # multiprocessing error it replaced: a descriptor dropped from a worker's message, pytorch#34768)
        variants=(
            r"Too many open files\. Communication with the workers is no longer possible",
            r"received 0 items of ancdata",
        ),
        trigger="Too many open files",
        triggers=("received 0 items of ancdata",),
        meaning="a file or socket could not be opened: the process reached its open-files limit (EMFILE)",
        cause="ulimit -n too low for the DataLoader's shared tensors (one descriptor each with the default "
        "sharing strategy), many dataset files held open, or a descriptor leak",
        fix="raise the limit (ulimit -n 65536, LimitNOFILE for a service, the container's --ulimit nofile), "
        "or use torch.multiprocessing.set_sharing_strategy('file_system')",
        verify=("ulimit -n", "ls /proc/<pid>/fd | wc -l"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/python/cpython/blob/main/Objects/exceptions.c",
        example="OSError: [Errno 24] Too many open files",
        example_source="https://github.com/facebookresearch/maskrcnn-benchmark/issues/158",
        causes=("storage.open-files",),
    ),
    Message(
        code="STOR110",
        name="pickle-invalid-load-key",
        title="A checkpoint is not a pickle at all (invalid load key)",
        # a 'v' key is STOR120's (a Git LFS pointer's "version https://git-lfs..."): one line, one entry
        pattern=r"UnpicklingError: invalid load key, '(?P<key>(?!v')[^'\n]{1,8})'",
        trigger="invalid load key",
        meaning="torch.load / pickle found bytes that do not start a pickle: the file is not the checkpoint "
        "it is named after",
        cause="a failed or partial download: an HTML error page ('<'), a Git LFS pointer ('v'), a truncated "
        "or zero-filled file ('\\x00')",
        fix="download the file again (for Git LFS: git lfs pull) and check its size; open the first bytes "
        "(head -c 200) to see what it really is",
        verify=("ls -l <checkpoint>", "head -c 200 <checkpoint>"),
        severity=Severity.CRITICAL,
        action=Action.RESTART_JOB,
        source="https://github.com/python/cpython/blob/main/Modules/_pickle.c",
        example="_pickle.UnpicklingError: invalid load key, '<'.",
        example_source="https://github.com/pytorch/pytorch/issues/16203",
        causes=("storage.checkpoint-corrupt",),
    ),
    Message(
        code="STOR120",
        name="pickle-git-lfs-pointer",
        title="A checkpoint is a Git LFS pointer, not the weights (invalid load key, 'v')",
        pattern=r"UnpicklingError: invalid load key, 'v'",
        trigger="invalid load key, 'v'",
        meaning=(
            "torch.load / pickle read a file whose first byte is 'v': the text stub Git LFS leaves in a "
            "clone in place of a large file (version https://git-lfs.github.com/spec/v1, oid, size)"
        ),
        cause=(
            "the repository was cloned (or downloaded as an archive) without git-lfs, or git lfs pull was "
            "not run or ran out of quota: the .pt/.pth/.pkl file is a pointer of about 130 bytes"
        ),
        fix=(
            "install git-lfs (git lfs install), run git lfs pull in the clone (or download the file from the "
            "project's release / model hub), and check the file's size before loading it again"
        ),
        verify=("head -c 200 <checkpoint>", "git lfs ls-files"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md",
        example="_pickle.UnpicklingError: invalid load key, 'v'.",
        example_source="https://github.com/Rose-STL-Lab/LIMO/issues/3",
        causes=("storage.lfs-pointer",),
        confidence=0.85,
        notes=(
            "a pointer file starts with the line 'version https://git-lfs.github.com/spec/v1' (the LFS spec); "
            "pickle's load opcode table has no 'v', so the first byte is reported as the invalid key; "
            "git-lfs#4366 (bk2204): 'Python's pickle module [tries] to read the pointer file instead'",
        ),
    ),
    Message(
        code="STOR113",
        name="dataloader-timed-out",
        title="The DataLoader timed out waiting for a batch from its workers",
        pattern=r"DataLoader timed out after (?P<secs>\d{1,9}) seconds",
        trigger="DataLoader timed out after",
        meaning="no batch arrived from the worker processes within the DataLoader's timeout",
        cause="reading the data is stalled or far too slow: a hung or overloaded network filesystem or object "
        "store, a worker blocked in I/O or in a library call, or workers starved of CPU",
        fix="check the storage the dataset is read from (NFS/Lustre/object-store latency, the kernel log for "
        "'server not responding'), stack-dump a worker (py-spy dump) to see where it waits, raise timeout only "
        "once the cause is known",
        verify=("py-spy dump --pid <worker pid>", "dmesg | grep -i 'not responding'"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_TORCH}/torch/utils/data/dataloader.py",
        example="RuntimeError: DataLoader timed out after 5 seconds",
        example_source="https://github.com/pytorch/pytorch/issues/68643",
        causes=("storage.slow-io",),
        confidence=0.7,
    ),
    Message(
        code="STOR111",
        name="detectron-minibatch-queue-empty",
        title="Detectron's minibatch queue is empty: the GPU waits for data loading",
        pattern=r"\"mb_qsize\": 0(?P<end>[,}])",
        trigger='"mb_qsize": 0',
        meaning="Detectron reports an empty minibatch queue: the loader threads do not keep up with training",
        cause="reading and decoding the training images is too slow: images on slow or remote storage, too "
        "few loader threads or CPUs",
        fix="put the dataset on fast local storage (or a page-cached copy), add loader threads, check the "
        "storage's read throughput while training",
        verify=("iostat -x 5", "nfsiostat 5"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/facebookresearch/Detectron/blob/main/detectron/utils/training_stats.py",
        example=(
            'json_stats: {"accuracy_cls": 0.973633, "eta": "4:53:19", "iter": 660, "loss": 0.735692, '
            '"loss_bbox": 0.006042, "loss_cls": 0.116962, "loss_rpn_bbox_fpn2": 0.112087, '
            '"loss_rpn_bbox_fpn3": 0.018113, "loss_rpn_bbox_fpn4": 0.000688, "loss_rpn_bbox_fpn5": 0.000000, '
            '"loss_rpn_bbox_fpn6": 0.000000, "loss_rpn_cls_fpn2": 0.290812, "loss_rpn_cls_fpn3": 0.083534, '
            '"loss_rpn_cls_fpn4": 0.012439, "loss_rpn_cls_fpn5": 0.001868, "loss_rpn_cls_fpn6": 0.000000, '
            '"lr": 0.002500, "mb_qsize": 0, "mem": 4099, "time": 1.884333}'
        ),
        example_source="https://github.com/facebookresearch/Detectron/issues/408",
        causes=("storage.slow-io",),
        confidence=0.7,
    ),
    Message(
        code="STOR114",
        name="torch-checkpoint-cannot-be-opened",
        title="torch.save cannot create the checkpoint file (File ... cannot be opened)",
        pattern=r"File (?P<file>[^\n]{1,300}?) cannot be opened\.",
        trigger=" cannot be opened.",
        meaning="PyTorch's checkpoint writer could not open the target file for writing; nothing was saved",
        cause=(
            "the filesystem holding the checkpoint directory is full or over quota, the process may not write "
            "there (permissions, a read-only mount), or, before PyTorch 2.1, the directory does not exist"
        ),
        fix=(
            "check free space and quota of the volume the path is on (df -h, quota), that the directory exists "
            "and is writable by the job's user, then save again; keep fewer checkpoints"
        ),
        verify=("df -h <checkpoint dir>", "touch <checkpoint dir>/.probe"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_CONTAINER,
        example="RuntimeError: File my_out/checkpoints/checkpoint_0.pt cannot be opened.",
        example_source="https://github.com/Sachini/ronin/issues/51",
        causes=("storage.disk-full", "storage.checkpoint-path"),
        subject="{file}",
        context=r"PyTorchFileWriter|_open_zipfile_writer|RuntimeError: File ",
        notes=(
            "caffe2/serialize/inline_container.cc PyTorchStreamWriter::setup: TORCH_CHECK(file_stream_, "
            "'File ', file_name_, ' cannot be opened.')",
        ),
    ),
    Message(
        code="STOR115",
        name="torch-checkpoint-parent-missing",
        title="torch.save: the checkpoint's directory does not exist",
        pattern=r"Parent directory (?P<dir>[^\n]{1,300}?) does not exist\.",
        trigger="Parent directory ",
        meaning="PyTorch's checkpoint writer found no directory to create the file in; nothing was saved",
        cause=(
            "the path names a directory that was never created (a typo, a relative path from another working "
            "directory, an output directory a rank other than 0 creates), or a mount that is not there"
        ),
        fix="create the directory before saving (os.makedirs(dir, exist_ok=True)) or fix the path",
        verify=("ls -ld <checkpoint dir>",),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_CONTAINER,
        example="RuntimeError: Parent directory ckpts does not exist.",
        example_source="https://github.com/thunlp/KnowledgeablePromptTuning/issues/24",
        causes=("storage.checkpoint-path",),
        subject="{dir}",
        notes=(
            "caffe2/serialize/inline_container.cc PyTorchStreamWriter::setup (2.1+): TORCH_CHECK("
            "c10::filesystem::exists(parent_dir), 'Parent directory ', parent_dir, ' does not exist.')",
        ),
    ),
    Message(
        code="STOR116",
        name="object-store-request-failed",
        title="An S3 (object store) request timed out or lost its connection (botocore)",
        pattern=(
            r"botocore\.exceptions\.(?P<exc>ConnectionClosedError|ReadTimeoutError|ConnectTimeoutError"
            r"|EndpointConnectionError)\b"
        ),
        trigger="botocore.exceptions.",
        meaning=(
            "a request to the object store (S3 or an S3-compatible endpoint) got no valid response in time or "
            "the connection closed, and botocore's retries ran out"
        ),
        cause=(
            "the store or the path to it is slow or overloaded for the request's size: a large checkpoint "
            "upload (multipart parts) or many jobs at once exceed botocore's 60 s read_timeout; less often "
            "the endpoint is unreachable (proxy, DNS, security group)"
        ),
        fix=(
            "raise read_timeout / connect_timeout and the retries (botocore Config(read_timeout=600, "
            "retries={'max_attempts': 10, 'mode': 'adaptive'})), use multipart uploads with smaller parts "
            "(TransferConfig), spread uploads over time, and check the endpoint from the node"
        ),
        verify=("aws s3 cp <file> s3://<bucket>/probe --debug",),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/boto/botocore/blob/develop/botocore/exceptions.py",
        example=(
            "botocore.exceptions.ConnectionClosedError: Connection was closed before we received a valid "
            "response from endpoint URL:"
        ),
        example_source="https://github.com/sillsdev/silnlp/issues/565",
        causes=("storage.object-store", "storage.slow-io"),
        detail="({exc})",
        notes=(
            "botocore/exceptions.py: ConnectionClosedError 'Connection was closed before we received a valid "
            "response from endpoint URL: \"{endpoint_url}\".', ReadTimeoutError 'Read timeout on endpoint URL', "
            "ConnectTimeoutError 'Connect timeout on endpoint URL', EndpointConnectionError 'Could not connect "
            "to the endpoint URL'",
        ),
    ),
    Message(
        code="STOR117",
        name="stale-file-handle",
        title="A shared filesystem returned ESTALE (Stale file handle)",
        pattern=r"Stale (?:NFS )?file handle",
        trigger="Stale file handle",
        triggers=("Stale NFS file handle",),
        variants=(r"Stale NFS file handle",),
        meaning=(
            "a file the process had open (or had looked up) on a network filesystem no longer exists on the "
            "server under that handle: the read, write or stat failed with ESTALE (errno 116)"
        ),
        cause=(
            "another node deleted or replaced the file or its directory while this one used it: shared caches "
            "(HF datasets/modelscope caches, lock files that filelock deletes on release), checkpoints rewritten "
            "by another rank, an output directory cleaned by a second job; also an NFS/EFS server restart or "
            "export change"
        ),
        fix=(
            "give each node (or job) its own cache and temp directories (HF_HOME, HF_DATASETS_CACHE, TMPDIR on "
            "local disk), write shared files from one rank only and atomically (write then rename), upgrade "
            "filelock, and remount the share if the server restarted"
        ),
        verify=("mount | grep -E 'nfs|efs|lustre'", "ls -la <the file's directory>"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://man7.org/linux/man-pages/man3/errno.3.html",
        example="OSError: [Errno 116] Stale file handle",
        example_source="https://github.com/nanoporetech/taiyaki/issues/66",
        causes=("storage.stale-handle",),
        notes=(
            "errno.h ESTALE (116): strerror 'Stale file handle' (glibc 2.17+), 'Stale NFS file handle' before",
        ),
    ),
    Message(
        code="STOR118",
        name="dataloader-worker-exited",
        title="A DataLoader worker exited unexpectedly (shared memory or host memory, most often)",
        pattern=r"DataLoader worker \(pid(?:\(s\))? (?P<pids>[\d, ]{1,200})\) exited unexpectedly",
        trigger="exited unexpectedly",
        meaning="a DataLoader worker process died without reporting an exception; the main process gave up",
        cause=(
            "the worker was killed: in a container the 64 MB /dev/shm is exhausted by the batches workers pass "
            "through shared memory (docker without --shm-size / --ipc=host), or the host ran out of memory and "
            "the OOM killer took it (many workers, a large dataset held in each)"
        ),
        fix=(
            "give the container more shared memory (--shm-size=8g or --ipc=host; a memory-backed emptyDir at "
            "/dev/shm in Kubernetes), check dmesg for the OOM killer, lower num_workers / prefetch_factor; rerun "
            "with num_workers=0 to see a worker's own error"
        ),
        verify=("df -h /dev/shm", "dmesg -T | grep -i -E 'killed process|out of memory'"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_TORCH + "/torch/utils/data/dataloader.py",
        example="RuntimeError: DataLoader worker (pid(s) 25) exited unexpectedly",
        example_source="https://github.com/facebookresearch/detectron2/issues/384",
        causes=("storage.shm-dataloader", "torch.host-oom"),
        role="symptom",
        confidence=0.6,
        notes=(
            "torch/utils/data/dataloader.py _try_get_data: RuntimeError(f'DataLoader worker (pid(s) {pids_str}) "
            "exited unexpectedly'); older: 'DataLoader worker (pid N) exited unexpectedly with exit code N'",
        ),
    ),
    Message(
        code="STOR119",
        name="safetensors-bad-header",
        title="A .safetensors file is not one: its header cannot be read (a Git LFS pointer or a cut download)",
        pattern=(
            r"Error while deserializing header: (?P<err>HeaderTooLarge|header too large|HeaderTooSmall|header too "
            r"small|InvalidHeaderLength|invalid header length|InvalidHeaderStart|invalid header start"
            r"|MetadataIncompleteBuffer|incomplete metadata|InvalidHeaderDeserialization|invalid header "
            r"deserialization)"
        ),
        trigger="Error while deserializing header",
        meaning=(
            "safetensors reads a file's first 8 bytes as the length of its JSON header; the length is absurd "
            "(too large or too small), the header does not parse, or the file is shorter than the header says"
        ),
        cause=(
            "the file is not the weights: a Git LFS pointer (a 130-byte text stub, cloned without git-lfs), an "
            "HTML error page saved under the weights' name, or a download or copy that stopped part-way"
        ),
        fix=(
            "check the file's size against the hub's (ls -l; a few hundred bytes is a pointer); install git-lfs "
            "and run git lfs pull in the clone, or download the file again (huggingface-cli download)"
        ),
        verify=("ls -l model.safetensors", "head -c 200 model.safetensors"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/huggingface/safetensors/blob/main/safetensors/src/tensor.rs",
        example="safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
        example_source="https://github.com/microsoft/OmniParser/issues/34",
        causes=("storage.lfs-pointer", "storage.checkpoint-corrupt"),
        subject="{err}",
        notes=(
            "tensor.rs SafeTensorError: HeaderTooLarge, HeaderTooSmall, InvalidHeaderLength, InvalidHeaderStart, "
            "InvalidHeaderDeserialization, MetadataIncompleteBuffer; the Python binding prints 'Error while "
            "deserializing header: {err:?}' (the variant's name; its lower-case description in 0.6)",
        ),
    ),
    Message(
        code="STOR121",
        name="volume-multi-attach",
        title="A ReadWriteOnce volume is still attached to another node (Multi-Attach error)",
        # pkg/controller/volume/attachdetach/reconciler: 'Multi-Attach error for volume %q Volume is already
        # exclusively attached to one node and can't be attached to another' / '... used by pod(s) %s'
        pattern=(
            r"Multi-Attach error for volume \\?\"(?P<volume>[\w.\-]{1,253})\\?\"(?: \(UniqueName: [^)\n]{1,400}\)"
            r"(?: from node \\?\"[\w.\-]{1,253}\\?\")?)? Volume is already "
            r"(?:exclusively attached to one node|used by pod)"
        ),
        trigger="Multi-Attach error for volume",
        meaning=(
            "the attach/detach controller will not attach the volume to the pod's node because it is attached "
            "to (or used by a pod on) another node and its access mode allows one node only: the pod stays "
            "ContainerCreating"
        ),
        cause=(
            "a ReadWriteOnce (block) volume is wanted on two nodes at once: a Deployment's rolling update "
            "starts the new pod on another node before the old one let go, two pods of a job share one RWO "
            "claim, or the old node is down or NotReady so the volume is never detached (a stale "
            "VolumeAttachment; the controller waits 6 minutes before a forced detach)"
        ),
        fix=(
            "let the old pod finish first (strategy Recreate for a Deployment with an RWO claim), give each "
            "pod its own claim or use a ReadWriteMany volume; for a dead node, delete its pod and the stale "
            "VolumeAttachment (kubectl get volumeattachment) so that the volume detaches"
        ),
        verify=(
            "kubectl get volumeattachment | grep <pv>",
            "kubectl get pods -A -o wide --field-selector spec.nodeName=<old-node>",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=(
            "https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/volume/attachdetach/"
            "reconciler/reconciler.go"
        ),
        example=(
            "  Warning  FailedAttachVolume      71s   attachdetach-controller  Multi-Attach error for volume "
            '"pvc-7a81d56f-1cf9-11eb-8295-b6961e0a47ed" Volume is already exclusively attached to one node and '
            "can't be attached to another"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/96142",
        causes=("k8s.volume-mount",),
        subject="volume {volume}",
    ),
    Message(
        code="STOR122",
        name="nfs-access-denied",
        title="The NFS server refuses the mount (access denied by server)",
        # nfs-utils utils/mount/error.c: 'mount.nfs: access denied by server while mounting %s' (EACCES)
        pattern=r"access denied by server while mounting (?P<export>[^\s\"\\]{1,300})",
        trigger="access denied by server while mounting",
        meaning=(
            "mount.nfs got EACCES from the server for the export: the node (or the kubelet for a pod's NFS "
            "volume, FailedMount ... exit status 32) cannot mount it"
        ),
        cause=(
            "the server's exports do not allow this client: the node's address (or the subnet it mounts "
            "from) is not in /etc/exports for that path, the path is not exported at all (a typo, a "
            "subdirectory of an export with no crossmnt), or the client asks for an NFS version or security "
            "flavour the export does not offer (nfsvers=3 vs 4, sec=krb5)"
        ),
        fix=(
            "on the server, export the path to the nodes' addresses (/etc/exports, exportfs -ra) and check "
            "showmount -e <server> from the node; give the PV the mountOptions the export needs "
            "(nfsvers=3 / 4.1)"
        ),
        verify=("showmount -e <server>", "mount -t nfs -o nfsvers=4.1 <server>:<path> /mnt"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://git.linux-nfs.org/?p=steved/nfs-utils.git;a=blob;f=utils/mount/error.c",
        example="Output: mount.nfs: access denied by server while mounting 192.168.43.16:/nfs_share",
        example_source="https://github.com/kubernetes/kubernetes/issues/108963",
        causes=("k8s.volume-mount",),
        subject="{export}",
    ),
    Message(
        code="STOR123",
        name="fuse-endpoint-not-connected",
        title="A FUSE mount's daemon is gone: Transport endpoint is not connected",
        # ENOTCONN on a FUSE mount point whose daemon exited; other programs print the same strerror for a
        # socket, so the line must also name a mount or a file operation (context)
        pattern=r"Transport endpoint is not connected",
        trigger="Transport endpoint is not connected",
        context=(
            r"(?:[Mm]ount|fuse|FUSE|cannot (?:access|open|stat|remove)|failed to access|"
            r"ls: |stat |No such device|error reading '|failed to close '"
            # CPython's OSError on a path ("[Errno 107] Transport endpoint is not connected: '/data/x.json'")
            r"|\[Errno 107\] Transport endpoint is not connected: '/)"
        ),
        meaning=(
            "every access to the mount point fails with ENOTCONN: the user-space filesystem behind it "
            "(gcsfuse, s3fs, mountpoint-s3, rclone, blobfuse, mfsmount) has exited while the kernel mount "
            "stayed, so data loading or checkpointing on that path fails"
        ),
        cause=(
            "the FUSE daemon died: killed by the OOM killer (its cache or a large file), crashed (a bug of "
            "its release), or was stopped when its pod or session ended; a new mount on top of the stale "
            "one fails the same way"
        ),
        fix=(
            "unmount the stale mount (fusermount -uz <path> or umount -l <path>) and mount again; find why "
            "the daemon died (journalctl, dmesg | grep -i oom) and give it memory or upgrade it"
        ),
        verify=("mount | grep fuse", "dmesg | grep -i -E 'oom|fuse'"),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source="https://github.com/GoogleCloudPlatform/gcsfuse/blob/master/docs/troubleshooting.md",
        example=(
            "ERROR gcsf > Could not mount to /root/mediaserver/drive: Transport endpoint is not connected "
            "(os error 107)"
        ),
        example_source="https://github.com/harababurel/gcsf/issues/67",
        causes=("storage.fuse-daemon",),
        # the daemon's death is the cause when the inputs show it (STOR128: the OOM killer killed it)
        role="symptom",
    ),
    Message(
        code="STOR124",
        name="write-read-only-filesystem",
        title="A write fails: the filesystem is mounted read-only (EROFS)",
        # CPython: "[Errno 30] Read-only file system: '<path>'"
        pattern=r"\[Errno 30\] Read-only file system(?:: '(?P<path>[^'\n]{1,500})')?",
        trigger="[Errno 30] Read-only file system",
        meaning="the program could not create or write a file (a checkpoint, a log, a lock) because its filesystem is read-only",
        cause=(
            "the path is on a read-only mount: a container's read-only root or image layer (readOnlyRootFilesystem, "
            "an Apptainer/Singularity image), a volume mounted readOnly, a parent directory the job may not "
            "create (makedirs walking up to a read-only mount), or a disk the kernel remounted read-only "
            "after I/O errors"
        ),
        fix=(
            "write checkpoints and caches to a writable volume (point the output/cache directory at it: "
            "HF_HOME, TMPDIR, the trainer's output_dir); if the disk went read-only on errors, check dmesg "
            "and fsck before remounting"
        ),
        verify=("findmnt -T <path> -o TARGET,OPTIONS", "dmesg | grep -i 'remount\\|read-only'"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/python/cpython/blob/main/Objects/exceptions.c",
        example=(
            "Warning: Failed to acquire lock for /fsx/mingyuan/verify/3B_V2/global_step_1/actor: [Errno 30] "
            "Read-only file system: '/fsx'"
        ),
        example_source="https://github.com/verl-project/verl/issues/3354",
        causes=("storage.checkpoint-path",),
        subject="{path}",
    ),
    Message(
        code="STOR125",
        name="nfs-server-not-responding",
        title="The kernel's NFS client gets no answer from the server (server not responding)",
        # net/sunrpc/clnt.c call_timeout: "%s: server %s not responding, still trying" (hard mount) /
        # "..., timed out" (soft mount); "%s: server %s OK" when it answers again
        pattern=r"nfs: server (?P<server>[^\s,]{1,253}) not responding, (?P<state>still trying|timed out)",
        trigger=" not responding, ",
        meaning=(
            "RPCs to the NFS server time out: on a hard mount every process touching the mount blocks in D "
            "state until the server answers (a training job, its data loader or checkpoint write hangs; hung "
            "task warnings follow), on a soft mount the calls fail with EIO"
        ),
        cause=(
            "the server or the path to it: the NFS server overloaded (all nfsd threads busy, its disks slow) "
            "or down or failing over, packet loss or an MTU mismatch on the network between client and "
            "server, or a client that floods it (many ranks reading small files at once)"
        ),
        fix=(
            "check the server (load, nfsd thread count, its disks) and the network path (ping -M do -s 8972 "
            "for jumbo frames, drops on the NICs); spread the I/O (stage data to local disk, fewer parallel "
            "readers); nfs: server ... OK in the log marks when it recovered"
        ),
        verify=("dmesg -T | grep -E 'nfs: server .* (not responding|OK)'", "nfsstat -rc", "mountstats"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/torvalds/linux/blob/master/net/sunrpc/clnt.c",
        example="[32956.142249] nfs: server thinkcentre not responding, still trying",
        example_source="https://github.com/linux-surface/linux-surface/issues/1494",
        causes=("storage.slow-io",),
        subject="NFS server {server}",
    ),
    Message(
        code="STOR126",
        name="lustre-rpc-timeout",
        title="A Lustre RPC to a server target timed out (ptlrpc: Request sent has timed out)",
        # lustre/ptlrpc/client.c ptlrpc_expire_one_request: "@@@ Request sent has timed out for slow reply" /
        # "... for sent delay"
        pattern=r"Request sent has timed out for (?P<kind>slow reply|sent delay)",
        trigger="Request sent has timed out for",
        meaning=(
            "a Lustre client (or server) got no reply to a request within its adaptive timeout (slow reply), "
            "or could not send it (sent delay): the import to that target (MGS, MDT or OST, named after o<opc>->) "
            "reconnects and I/O on it stalls meanwhile"
        ),
        cause=(
            "the target's server is overloaded, hung or failing over, or the LNet path to it drops packets "
            "(an IB/Ethernet link or router problem); a burst of metadata or small-file I/O from many clients "
            "at once (all ranks opening files, a checkpoint storm) makes servers slow to reply"
        ),
        fix=(
            "check the target's server (load, its own log for service threads inactive, failover) and LNet "
            "(lctl ping <nid>, lnetctl net show); spread the I/O (fewer files, stage data, stagger checkpoint "
            "writes); repeated timeouts to one target point at that server"
        ),
        verify=(
            "lfs check servers",
            "lctl ping <server nid>",
            "lctl get_param osc.*.import | grep -E 'state|target'",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/lustre/lustre-release/blob/master/lustre/ptlrpc/client.c",
        example=(
            "[ 3963.751497] Lustre: 1160:0:(client.c:2114:ptlrpc_expire_one_request()) @@@ Request sent has timed "
            "out for slow reply: [sent 1507651404/real 1507651404]  req@ffff88005ef8c000 x1580882981821232/t0(0) "
            "o250->MGC10.14.81.0@tcp@10.14.81.0@tcp:26/25 lens 520/544 e 0 to 1 dl 1507651425 ref 1 fl "
            "Rpc:XN/0/ffffffff rc 0/-1"
        ),
        example_source="https://github.com/whamcloud/integrated-manager-for-lustre/pull/329",
        causes=("storage.slow-io",),
        detail="({kind})",
    ),
)

MESSAGES: tuple[Message, ...] = tuple(
    sorted((*_OWN_MESSAGES, *MOUNT_MESSAGES, *FUSE_MESSAGES), key=lambda m: m.code)
)
