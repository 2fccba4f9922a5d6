"""CUDA driver and runtime errors that name a GPU, driver or node cause, as data.

A CUDA error reaches the user in several spellings: the runtime's string (``cudaGetErrorString``:
"system not yet initialized"), its enum name (``cudaErrorSystemNotReady``), the driver API's name
(``CUDA_ERROR_SYSTEM_NOT_READY``), its number (``error 802``, ``code=802``), and inside the messages
of the programs that called CUDA (PyTorch's ``RuntimeError: CUDA error: ...`` and ``cuda runtime error
(802) : ...``, its ``UserWarning: CUDA initialization: ... Error 802: ...``, NCCL's ``Cuda failure
'...'``, the CUDA samples' ``code=802(cudaErrorSystemNotReady)``). Each entry matches every spelling
of one error; ``trigger``/``triggers`` name the literal parts.

Strings and names: CUDA Runtime API, "Data types used by CUDA Runtime" (enum ``cudaError``), and CUDA
Driver API, "Data types used by CUDA driver" (enum ``CUresult``). Errors that the program causes
(out of memory, illegal memory access, launch failures) belong to the PyTorch catalogue
(:mod:`clusterdoctor.rules.catalog.torch`); the ones here are the node's: driver, fabric, memory.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_RT = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"
_DRV = "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html"
_FM = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html"
_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/index.html"
_PT_CUDA_INIT = "https://github.com/pytorch/pytorch/blob/main/torch/cuda/__init__.py"

MESSAGES: tuple[Message, ...] = (
    Message(
        code="CUDA101",
        name="cuda-system-not-ready",
        title="CUDA error 802 'system not yet initialized': the NVSwitch fabric is not ready",
        pattern=r"system not yet initiali[sz]ed",
        trigger="system not yet initialized",
        triggers=("cudaErrorSystemNotReady", "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialised"),
        variants=(r"cudaErrorSystemNotReady", r"CUDA_ERROR_SYSTEM_NOT_READY"),
        meaning="CUDA refused to start on this node: the system is not yet initialised (CUDA error 802)",
        cause=(
            "on an NVSwitch system (HGX/DGX A100, H100, H200, B200) CUDA waits until the fabric manager has "
            "set up the NVLink fabric: nvidia-fabricmanager is not installed, not running, failed to start, "
            "is of another version than the driver, or was restarted without a GPU reset"
        ),
        fix=(
            "install the nvidia-fabricmanager package of exactly the driver's version, enable and start it "
            "(systemctl enable --now nvidia-fabricmanager), read its log for errors, reset the GPUs (or "
            "reboot) after restarting it; nvidia-smi -q should show Fabric State: Completed"
        ),
        verify=(
            "systemctl status nvidia-fabricmanager",
            "nvidia-smi -q | grep -A3 Fabric",
            "cat /var/log/fabricmanager.log",
        ),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source=_RT + " (cudaErrorSystemNotReady = 802); " + _FM,
        example=(
            "RuntimeError: cuda runtime error (802) : system not yet initialized at "
            "/opt/conda/conda-bld/pytorch_1579022034529/work/aten/src/THC/THCGeneral.cpp:50"
        ),
        example_source="https://github.com/pytorch/pytorch/issues/35710",
        # the same cause as the NCCL/PyTorch corpus names it (a job's error, not the node's GPU report)
        causes=("gpu.fabric-manager", "nccl.fabric-manager"),
    ),
    Message(
        code="CUDA102",
        name="cuda-system-driver-mismatch",
        title="CUDA error 803: the CUDA user-mode driver does not match the kernel driver",
        pattern=r"system has unsupported display driver ?/ ?cuda driver combination",
        trigger="system has unsupported display driver",
        triggers=("cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
        variants=(r"cudaErrorSystemDriverMismatch", r"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
        meaning="libcuda (the user-mode driver) and the loaded nvidia kernel module are of different versions",
        cause=(
            "the driver packages were upgraded (or a container brings its own libcuda / cuda-compat) while "
            "the old kernel module stays loaded; or two driver installs (.run and distribution packages) mix"
        ),
        fix=(
            "make the user-space driver and the kernel module one version: reboot (or reload the nvidia "
            "modules) after a driver upgrade, remove the second install, and do not put a cuda-compat "
            "libcuda on LD_LIBRARY_PATH of a GPU that does not need it"
        ),
        verify=("cat /proc/driver/nvidia/version", "nvidia-smi -L", "ldconfig -p | grep libcuda"),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source=_RT + " (cudaErrorSystemDriverMismatch = 803)",
        example=(
            "CUDA: Check failed: e == cudaSuccess (803 vs. 0) : system has unsupported display driver / "
            "cuda driver combination"
        ),
        example_source="https://github.com/NVIDIA/nvidia-docker/issues/1256",
        causes=("gpu.driver-mismatch",),
    ),
    Message(
        code="CUDA103",
        name="cuda-forward-compat-unsupported",
        title="CUDA error 804: forward compatibility attempted on a GPU that does not support it",
        pattern=r"forward compatibility was attempted on non supported HW",
        trigger="forward compatibility was attempted on non supported HW",
        triggers=("cudaErrorCompatNotSupportedOnDevice", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
        variants=(r"cudaErrorCompatNotSupportedOnDevice", r"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
        meaning=(
            "CUDA loaded the forward-compatibility libcuda (cuda-compat) on a GPU that does not support "
            "forward compatibility (GeForce and most workstation boards)"
        ),
        cause=(
            "the container or environment puts the CUDA forward-compatibility package ahead of the host's "
            "driver (an image's /usr/local/cuda/compat on LD_LIBRARY_PATH, or a container-toolkit release "
            "that mounted it), on a non-datacenter GPU; or a CUDA runtime newer than the host driver"
        ),
        fix=(
            "use the host driver's libcuda: remove the compat directory from LD_LIBRARY_PATH (or the "
            "cuda-compat package), update or downgrade the NVIDIA container toolkit, or install a host "
            "driver new enough for the CUDA version of the image"
        ),
        verify=("nvidia-smi -L", "ldconfig -p | grep libcuda", "echo $LD_LIBRARY_PATH"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_RT + " (cudaErrorCompatNotSupportedOnDevice = 804); " + _COMPAT,
        example=(
            "/opt/conda/lib/python3.8/site-packages/torch/cuda/__init__.py:52: UserWarning: CUDA "
            "initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
            "before calling NumCudaDevices() that might have already set an error? Error 804: forward "
            "compatibility was attempted on non supported HW (Triggered internally at  "
            "/opt/conda/conda-bld/pytorch_1623448278899/work/c10/cuda/CUDAFunctions.cpp:115.)"
        ),
        example_source="https://github.com/DeepVAC/TorchPod/issues/43",
        causes=("gpu.container-runtime", "gpu.driver-mismatch"),
    ),
    Message(
        code="CUDA104",
        name="cuda-driver-insufficient",
        title="CUDA error 35: the driver is older than the CUDA runtime needs",
        pattern=r"CUDA driver version is insufficient for CUDA runtime version",
        trigger="CUDA driver version is insufficient for CUDA runtime version",
        triggers=("cudaErrorInsufficientDriver", "The NVIDIA driver on your system is too old"),
        variants=(
            r"cudaErrorInsufficientDriver",
            r"The NVIDIA driver on your system is too old \(found version \d{2,6}\)",
        ),
        meaning="the program's CUDA runtime needs a newer NVIDIA driver than the node has",
        cause=(
            "the container or the program was built for a newer CUDA (e.g. an image from nvidia/cuda:12.x) "
            "than the node's driver supports (each CUDA release has a minimum driver version; "
            "nvidia-smi's header shows the highest CUDA the driver supports)"
        ),
        fix=(
            "upgrade the node's driver to one that supports that CUDA, or use an image / a PyTorch build for "
            "the CUDA version the driver supports; on datacenter GPUs the cuda-compat package is an option"
        ),
        verify=("nvidia-smi -L", "python -c 'import torch; print(torch.version.cuda)'"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_RT + " (cudaErrorInsufficientDriver = 35); " + _COMPAT,
        example=(
            "ERROR: CUDA driver version is insufficient for CUDA runtime version in "
            "/var/tmp/relion/src/ml_optimiser.cpp at line 1143 (error-code 35)"
        ),
        example_source="https://github.com/NVIDIA/hpc-container-maker/issues/239",
        causes=("gpu.driver-mismatch", "nccl.cuda-driver-runtime"),
    ),
    Message(
        code="CUDA105",
        name="cuda-ecc-uncorrectable",
        title="CUDA error 214: uncorrectable ECC error in GPU memory",
        pattern=r"uncorrectable ECC error encountered",
        trigger="uncorrectable ECC error encountered",
        triggers=("cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE"),
        variants=(r"cudaErrorECCUncorrectable", r"CUDA_ERROR_ECC_UNCORRECTABLE"),
        meaning="a kernel read GPU memory that ECC could not correct; the context is lost",
        cause=(
            "a memory fault on the GPU (a failing HBM/GDDR cell or row); the kernel log shows Xid 48, 94 or "
            "95 and nvidia-smi -q the uncorrectable count and a pending row remap"
        ),
        fix=(
            "drain the GPU, reset it (nvidia-smi -r, or reboot) so the row remap / page retirement takes "
            "effect, and run dcgmi diag -r 3; if errors return or the remap fails, RMA the board"
        ),
        verify=("nvidia-smi -q -d ECC,ROW_REMAPPER", "dmesg -T | grep -E 'Xid'", "dcgmi diag -r 3"),
        severity=Severity.CRITICAL,
        action=Action.RESET_DEVICE,
        source=_RT
        + " (cudaErrorECCUncorrectable = 214); https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html",
        example="RuntimeError: CUDA error: uncorrectable ECC error encountered",
        example_source="https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194",
        causes=("gpu.ecc-uncorrectable",),
    ),
    Message(
        code="CUDA106",
        name="cuda-no-device",
        title="CUDA error 100: no CUDA-capable device is detected",
        pattern=r"no CUDA-capable device is detected",
        trigger="no CUDA-capable device is detected",
        # nvidia-container-cli lower-cases CUDA's string ("cuda error: no cuda-capable device is detected")
        triggers=("cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE", "no cuda-capable device is detected"),
        variants=(r"cudaErrorNoDevice\b", r"CUDA_ERROR_NO_DEVICE\b", r"no cuda-capable device is detected"),
        meaning="the program sees no GPU at all",
        cause=(
            "in a container: the GPUs were not given to it (no --gpus / nvidia runtime, NVIDIA_VISIBLE_DEVICES "
            "empty or void, no nvidia.com/gpu request); on the node: the driver is not loaded or "
            "CUDA_VISIBLE_DEVICES names no existing GPU; on a GPU with MIG mode enabled CUDA sees only MIG "
            "devices, so a job given no MIG instance (none created, or none assigned to the session) sees none"
        ),
        fix=(
            "request the GPUs (docker --gpus all, runtimeClassName: nvidia, resources.limits nvidia.com/gpu), "
            "check CUDA_VISIBLE_DEVICES, and check on the node that nvidia-smi lists the GPUs"
        ),
        verify=("nvidia-smi -L", "echo $CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES", "ls -l /dev/nvidia*"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_RT + " (cudaErrorNoDevice = 100)",
        example="Failed to allocate device vector A (error code no CUDA-capable device is detected)!",
        example_source="https://github.com/NVIDIA/gpu-operator/issues/253",
        causes=("gpu.container-runtime", "gpu.driver-not-loaded", "gpu.mig-config"),
        notes=(
            "MIG: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/index.html (CUDA device enumeration)",
        ),
    ),
    Message(
        code="CUDA107",
        name="cuda-stub-library",
        title="CUDA error 34: the program loaded the CUDA driver stub instead of the driver",
        pattern=r"CUDA driver is a stub library",
        trigger="CUDA driver is a stub library",
        triggers=("cudaErrorStubLibrary", "CUDA_ERROR_STUB_LIBRARY"),
        variants=(r"cudaErrorStubLibrary", r"CUDA_ERROR_STUB_LIBRARY"),
        meaning="libcuda.so found by the program is the toolkit's link-time stub, not the driver",
        cause=(
            "the driver's libcuda is not in the container or not on the library path (the container was "
            "started without the NVIDIA runtime), and /usr/local/cuda/lib64/stubs is on LD_LIBRARY_PATH"
        ),
        fix=(
            "run the container with the NVIDIA runtime so the host's libcuda is mounted, and remove the stubs "
            "directory from LD_LIBRARY_PATH"
        ),
        verify=("ldconfig -p | grep libcuda", "echo $LD_LIBRARY_PATH"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_RT + " (cudaErrorStubLibrary = 34)",
        example="NCCL WARN Cuda failure 'CUDA driver is a stub library'",
        example_source="https://github.com/horovod/horovod/issues/3831",
        causes=("gpu.container-runtime",),
    ),
    Message(
        code="CUDA108",
        name="cuda-unknown-error",
        title="CUDA error 999: unknown error (the driver hit an internal error)",
        # the literal first, its CUDA context checked behind it (fixed-width look-behinds)
        pattern=(
            r"unknown error(?:(?<=CUDA error: unknown error)|(?<=\(999\) : unknown error)"
            r"|(?<=Error 999: unknown error)|(?<=error=999 : unknown error))"
        ),
        trigger="unknown error",
        triggers=("CUDA_ERROR_UNKNOWN", "cudaErrorUnknown", "CUDA unknown error"),
        variants=(
            r"CUDA_ERROR_UNKNOWN\b",
            r"cudaErrorUnknown\b",
            r"CUDA unknown error - this may be due to an incorrectly set up environment",
        ),
        meaning="CUDA returned its catch-all error: the driver could not say what failed",
        cause=(
            "the GPU or the driver is in a bad state: the GPU fell off the bus or needs a reset (read the "
            "kernel log for an Xid), the nvidia_uvm module is missing or broken (after suspend/resume), or "
            "the driver was upgraded under running programs"
        ),
        fix=(
            "read dmesg for Xid/NVRM lines on that GPU and act on them; check that nvidia_uvm is loaded; "
            "reboot the node if the driver was upgraded or the GPU is lost"
        ),
        verify=("dmesg -T | grep -E 'NVRM|Xid'", "lsmod | grep nvidia_uvm", "nvidia-smi -L"),
        severity=Severity.WARNING,
        action=Action.REBOOT_NODE,
        source=_RT + " (cudaErrorUnknown = 999); " + _DRV,
        example=(
            "RuntimeError: cuda runtime error (999) : unknown error at "
            "/opt/conda/conda-bld/pytorch_1573049306803/work/aten/src/THC/THCGeneral.cpp:50"
        ),
        example_source="https://github.com/pytorch/pytorch/issues/31179",
        causes=("gpu.suspend-resume",),
        role="symptom",
        confidence=0.6,
    ),
    Message(
        code="CUDA110",
        name="cuda-devices-unavailable",
        title="CUDA error 46: the GPU is busy or unavailable",
        pattern=r"CUDA-capable device\(s\) is/are busy or unavailable",
        trigger="is/are busy or unavailable",
        triggers=("all CUDA-capable devices are busy or unavailable", "cudaErrorDevicesUnavailable"),
        variants=(r"all CUDA-capable devices are busy or unavailable", r"cudaErrorDevicesUnavailable"),
        meaning="CUDA could not create a context on the GPU",
        cause=(
            "the GPU is in Exclusive_Process compute mode and another process holds it, or the GPU is in a "
            "state where it accepts no new work (it needs a reset after a fault: look for Xid or "
            "NV_ERR_RESET_REQUIRED lines)"
        ),
        fix=(
            "check the compute mode (nvidia-smi -q -d COMPUTE; nvidia-smi -c DEFAULT) and the processes on the "
            "GPU; if the driver reports a fault, reset the GPU"
        ),
        verify=("nvidia-smi -q -d COMPUTE", "nvidia-smi --query-compute-apps=pid,name --format=csv"),
        severity=Severity.WARNING,
        action=Action.RESET_DEVICE,
        source=_RT + " (cudaErrorDevicesUnavailable = 46)",
        example="'CUDA-capable device(s) is/are busy or unavailable'",
        example_source="https://github.com/scitix/sichek/issues/51",
        causes=("gpu.compute-mode",),
        role="symptom",
        confidence=0.6,
    ),
    Message(
        code="CUDA109",
        name="torch-no-nvidia-driver",
        title="PyTorch found no NVIDIA driver on the system",
        pattern=r"Found no NVIDIA driver on your system",
        trigger="Found no NVIDIA driver on your system",
        meaning="PyTorch could not load the NVIDIA driver (libcuda) at all",
        cause=(
            "the nvidia kernel driver is not installed or not loaded on the node, or the container runs "
            "without the NVIDIA runtime (no driver libraries inside)"
        ),
        fix=(
            "install/load the driver on the node (nvidia-smi must work there), and start the container with "
            "the NVIDIA runtime (--gpus all, runtimeClassName: nvidia)"
        ),
        verify=("nvidia-smi -L", "lsmod | grep nvidia"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/pytorch/pytorch/blob/main/torch/cuda/__init__.py (_check_driver)",
        example=(
            "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
            "and installed a driver from http://www.nvidia.com/Download/index.aspx"
        ),
        example_source="https://github.com/runpod/containers/issues/56",
        causes=("gpu.driver-not-loaded", "gpu.container-runtime"),
    ),
    Message(
        code="CUDA111",
        name="cuda-unspecified-launch-failure",
        title="CUDA error 719 (4 before CUDA 10.1): unspecified launch failure, a kernel crashed",
        pattern=r"unspecified launch failure",
        trigger="unspecified launch failure",
        triggers=("CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure"),
        variants=(r"CUDA_ERROR_LAUNCH_FAILED\b", r"cudaErrorLaunchFailure\b"),
        meaning=(
            "a kernel on the GPU faulted while it ran (CUDA does not say how); the CUDA context is lost and "
            "every later call of the process fails"
        ),
        cause=(
            "a kernel bug (an out-of-bounds access in the program, an extension or a library kernel), or the "
            "GPU itself: a memory or hardware fault the kernel log shows as an Xid (13, 31, 43, 48, 79, 109) "
            "when it happens after hours of good training"
        ),
        fix=(
            "read dmesg for an Xid on that GPU at that time (then act on the GPU: reset, drain, RMA); without "
            "one rerun with CUDA_LAUNCH_BLOCKING=1 (or compute-sanitizer) to find the kernel, and update the "
            "library that owns it"
        ),
        verify=("dmesg -T | grep -E 'NVRM|Xid'", "CUDA_LAUNCH_BLOCKING=1 python train.py"),
        severity=Severity.CRITICAL,
        action=Action.FIX_PROGRAM,
        source=_RT + " (cudaErrorLaunchFailure = 719)",
        example="RuntimeError: CUDA error: unspecified launch failure",
        example_source="https://github.com/XPixelGroup/BasicSR/issues/211",
        causes=("torch.illegal-memory-access",),
        confidence=0.75,
        notes=(
            "cudaGetErrorString(cudaErrorLaunchFailure) = 'unspecified launch failure' (= 4 up to CUDA 10.0); "
            "printed by PyTorch ('CUDA error: ...', THCudaCheck 'error=4 : ...'), Paddle ('CUDA error(719), "
            "...'), NCCL ('Cuda failure ...')",
        ),
    ),
    Message(
        code="CUDA112",
        name="cuda-no-kernel-image",
        title="CUDA error 209: the build has no kernels for this GPU's architecture",
        pattern=r"no kernel image is available for execution on the device",
        trigger="no kernel image is available",
        triggers=(
            "is not compatible with the current PyTorch installation",
            "cudaErrorNoKernelImageForDevice",
        ),
        variants=(
            r"with CUDA capability sm_(?P<sm>\d{2,3}) is not compatible with the current PyTorch installation",
            r"cudaErrorNoKernelImageForDevice\b",
        ),
        meaning=(
            "the program (PyTorch, an extension, a library) has no compiled kernel for the GPU's compute "
            "capability, so the launch fails"
        ),
        cause=(
            "the wheel or extension was built for other architectures than the GPU's: a new GPU (sm_120 "
            "Blackwell consumer cards, sm_90 H100) with an older PyTorch/CUDA build, an old GPU dropped by a "
            "newer build, or an extension compiled with TORCH_CUDA_ARCH_LIST that leaves it out"
        ),
        fix=(
            "install a build whose CUDA version supports the GPU (e.g. a cu128 wheel for sm_120) or rebuild the "
            "extension with TORCH_CUDA_ARCH_LIST naming the GPU's capability"
        ),
        verify=(
            "python -c 'import torch; print(torch.cuda.get_arch_list(), torch.cuda.get_device_capability())'",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_RT + " (cudaErrorNoKernelImageForDevice = 209); " + _PT_CUDA_INIT,
        example="RuntimeError: CUDA error: no kernel image is available for execution on the device",
        example_source="https://github.com/facebookresearch/detectron2/issues/235",
        causes=("torch.arch-unsupported",),
        subject="sm_{sm}",
        notes=(
            "torch/cuda/__init__.py _check_capability: '{} with CUDA capability sm_{} is not compatible with the "
            "current PyTorch installation. The current PyTorch install supports CUDA capabilities {}.'",
        ),
    ),
    Message(
        code="CUDA113",
        name="cuda-too-many-peers",
        title="CUDA error 711: peer mapping resources exhausted (too many GPUs peer-mapped by one process)",
        pattern=r"peer mapping resources exhausted",
        trigger="peer mapping resources exhausted",
        triggers=("CUDA_ERROR_TOO_MANY_PEERS", "cudaErrorTooManyPeers"),
        variants=(r"CUDA_ERROR_TOO_MANY_PEERS\b", r"cudaErrorTooManyPeers\b"),
        meaning=(
            "enabling peer access to one more GPU failed: the driver's per-device limit of peer mappings "
            "(8 peers per GPU) is reached"
        ),
        cause=(
            "one process drives more than 8 GPUs that can reach each other (nccl-tests -g 10, a framework that "
            "enables peer access between all visible GPUs, 10-GPU PCIe servers), so NCCL or the framework asks "
            "for more peer mappings than a GPU has"
        ),
        fix=(
            "run one process per GPU (mpirun -np N ... -g 1, torchrun) instead of one process for all, or "
            "limit the GPUs a process sees (CUDA_VISIBLE_DEVICES) to 8; NCCL_P2P_DISABLE=1 avoids the peer "
            "mappings at a bandwidth cost"
        ),
        verify=("nvidia-smi topo -p2p r", "mpirun -np 10 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 1"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_RT + " (cudaErrorTooManyPeers = 711)",
        example=(
            "[2025-06-20 02:14:03] ubuntu:33207:33207 [0] allocator.cc:79 NCCL WARN Cuda failure 711 'peer "
            "mapping resources exhausted'"
        ),
        example_source="https://github.com/NVIDIA/nccl-tests/issues/324",
        causes=("nccl.too-many-peers",),
        notes=(
            "cudaGetErrorString(cudaErrorTooManyPeers) = 'peer mapping resources exhausted' (CUDA_ERROR_TOO_MANY_PEERS = 711)",
        ),
    ),
    Message(
        code="CUDA114",
        name="cuda-launch-timeout",
        title="CUDA error 702: the launch timed out (the display watchdog killed a long kernel)",
        pattern=r"the launch timed out and was terminated",
        trigger="the launch timed out and was terminated",
        triggers=("cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT"),
        variants=(r"cudaErrorLaunchTimeout\b", r"CUDA_ERROR_LAUNCH_TIMEOUT\b"),
        meaning="a kernel ran longer than the device's run-time limit and the driver terminated it",
        cause=(
            "the GPU also drives a display (an X server or desktop runs on it), so the driver's watchdog "
            '("Run time limit on kernels: Yes" in deviceQuery) ends any kernel that runs for more than a few '
            "seconds; the context is unusable afterwards"
        ),
        fix=(
            "run compute on a GPU that drives no display (stop X on it, or use another GPU), or split the work "
            "into shorter kernels; on Windows raise the TDR delay"
        ),
        verify=(
            "nvidia-smi --query-gpu=index,display_active,display_mode --format=csv",
            "deviceQuery | grep -i 'run time limit'",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_RT + " (cudaErrorLaunchTimeout = 702: 'the launch timed out and was terminated'); " + _DRV,
        example=(
            "'ret = cudaEventQuery( event.m_spEventImpl->m_CudaEvent)' returned error  : 'cudaErrorLaunchTimeout': "
            "'the launch timed out and was terminated'!"
        ),
        example_source="https://github.com/ComputationalRadiationPhysics/picongpu/issues/2704",
        causes=("gpu.display-watchdog",),
    ),
    Message(
        code="CUDA115",
        name="cuda-invalid-device",
        title="CUDA error 101: invalid device (no such ordinal, or the GPU's compute mode refuses a context)",
        # the enum names only: the runtime's string "invalid device ordinal" is the PyTorch catalogue's
        pattern=r"CUDA_ERROR_INVALID_DEVICE\b",
        trigger="CUDA_ERROR_INVALID_DEVICE",
        triggers=("cudaErrorInvalidDevice",),
        variants=(r"cudaErrorInvalidDevice\b",),
        meaning=(
            "the device the program asked for is not a valid CUDA device, or the requested action (creating a "
            "context) is invalid for it"
        ),
        cause=(
            "the GPU is in Exclusive_Process / Exclusive_Thread or Prohibited compute mode and another context "
            "holds it (or none may be created), or the program names a device index beyond the visible GPUs "
            "(CUDA_VISIBLE_DEVICES)"
        ),
        fix=(
            "check the compute mode (nvidia-smi -q -d COMPUTE) and set DEFAULT where the GPU is shared "
            "(nvidia-smi -c DEFAULT), or ask the scheduler for the GPU; check the device index against "
            "CUDA_VISIBLE_DEVICES"
        ),
        verify=("nvidia-smi -q -d COMPUTE", "echo $CUDA_VISIBLE_DEVICES"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_DRV + " (CUDA_ERROR_INVALID_DEVICE = 101; cuCtxCreate and compute modes)",
        example=(
            "exception: Error initializing Context: CUDA_ERROR_INVALID_DEVICE (101) at "
            "/home/stanford/pande/users/rmcgibbo/projects/openmm/platforms/cuda/src/CudaContext.cpp:167"
        ),
        example_source="https://github.com/openmm/openmm/issues/1203",
        causes=("gpu.compute-mode",),
        confidence=0.8,
    ),
    Message(
        code="CUDA116",
        name="cuda-fabric-memory-not-permitted",
        title="GPU memory for NVLink sharing is refused (cuMemCreate: not permitted): no IMEX channel",
        # cuMemCreate / cuMemExportToShareableHandle with CU_MEM_HANDLE_TYPE_FABRIC answer
        # CUDA_ERROR_NOT_PERMITTED (800) without an IMEX channel; NCCL, mscclpp and NVSHMEM print the call
        pattern=(
            r"cuMem(?P<call>Create|ExportToShareableHandle|ImportFromShareableHandle)\b[^\n]{0,300}?"
            r"(?:operation not permitted|CUDA_ERROR_NOT_PERMITTED)"
        ),
        trigger="cuMem",
        meaning=(
            "the CUDA driver refused to create (or share) GPU memory with a FABRIC handle, which NVLink "
            "SHARP buffers and multi-node NVLink need: the process may not use fabric handles"
        ),
        cause=(
            "no IMEX channel is available to the process: the nvidia-caps-imex-channels device was not "
            "created (/dev/nvidia-caps-imex-channels/channelN), the container was not given it, or the "
            "IMEX daemon is not running on a multi-node NVLink system"
        ),
        fix=(
            "create an IMEX channel (mknod /dev/nvidia-caps-imex-channels/channel0 c <major> 0, major from "
            "/proc/devices nvidia-caps-imex-channels) or load the driver with NVreg_CreateImexChannel0=1, "
            "pass it into the container; start nvidia-imex where nodes share NVLink; or disable NVLS "
            "(NCCL_NVLS_ENABLE=0)"
        ),
        verify=("ls -l /dev/nvidia-caps-imex-channels/", "grep imex /proc/devices"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/imexchannels.html",
        example=(
            "mscclpp._mscclpp.CuError: (800, 'Call to cuMemCreate(&memHandle, nbytes, &prop, 0 ) failed./root/"
            "mscclpp/src/gpu_utils.cc:113 (Cu failure: operation not permitted)')"
        ),
        example_source="https://github.com/microsoft/mscclpp/issues/467",
        causes=("gpu.imex-channel",),
    ),
    Message(
        code="CUDA117",
        name="cuda-no-gpus-visible",
        title="The process sees no GPU at all (No CUDA GPUs are available)",
        # c10/cuda/CUDAFunctions.cpp device_count_ensure_non_zero: TORCH_CHECK(count, "No CUDA GPUs are available")
        pattern=r"No CUDA GPUs are available",
        trigger="No CUDA GPUs are available",
        meaning=(
            "PyTorch found zero CUDA devices when the program first used the GPU (torch.cuda.set_device, "
            ".cuda(), .to('cuda')): the process is given no GPU"
        ),
        cause=(
            "the GPUs are hidden from the process: CUDA_VISIBLE_DEVICES names an index the node does not have "
            "(a script that hard-codes '1' or '7' on a one-GPU machine, a launcher that sets it per rank "
            "wrongly) or is empty; or the container got no GPU (no --gpus / nvidia.com/gpu limit, "
            "NVIDIA_VISIBLE_DEVICES=void, the runtime is not nvidia)"
        ),
        fix=(
            "print CUDA_VISIBLE_DEVICES in the failing process and remove or correct it (indices are 0..N-1 of "
            "the GPUs the process may see); in a container, request the GPUs (docker --gpus all, a "
            "nvidia.com/gpu limit) and check nvidia-smi inside it"
        ),
        verify=(
            "echo $CUDA_VISIBLE_DEVICES",
            "nvidia-smi -L",
            "python -c 'import torch; print(torch.cuda.device_count())'",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_PT_CUDA_INIT,
        example="RuntimeError: No CUDA GPUs are available",
        example_source="https://github.com/jiaw-z/CoR-GS/issues/23",
        causes=("torch.device-ordinal", "gpu.container-runtime"),
    ),
)
