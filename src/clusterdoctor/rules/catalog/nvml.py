"""What ``nvidia-smi`` and other NVML clients print when they cannot use the driver or a GPU, as data.

NVML's return codes (``nvml.h``: ``NVML_ERROR_LIB_RM_VERSION_MISMATCH``, ``NVML_ERROR_GPU_IS_LOST``,
``NVML_ERROR_DRIVER_NOT_LOADED``, ``NVML_ERROR_IN_USE`` ...) reach the user as ``nvmlErrorString`` text
("Driver/library version mismatch", "GPU is lost", "Unknown Error") after ``nvidia-smi``'s own words
("Failed to initialize NVML: ...", "Unable to determine the device handle for GPU ...: ..."), or as
go-nvml's names (``ERROR_LIB_RM_VERSION_MISMATCH``) in the logs of the Go tools (device plugin, DCGM
exporter). The lines ``nvidia-smi`` prints for its own checks ("couldn't communicate with the NVIDIA
driver", "No devices were found", a GPU reset refused "In use by another client") are documented in
the nvidia-smi manual.

Sources: nvml.h (NVIDIA/go-nvml ``gen/nvml/nvml.h``), the NVML API reference and the nvidia-smi
manual (docs.nvidia.com/deploy/nvidia-smi); example lines from public threads.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_NVML_H = "https://github.com/NVIDIA/go-nvml/blob/main/gen/nvml/nvml.h"
_SMI = "https://docs.nvidia.com/deploy/nvidia-smi/index.html"
_PCI = r"(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"

MESSAGES: tuple[Message, ...] = (
    Message(
        code="NVML101",
        name="nvml-driver-library-mismatch",
        title="NVML: the NVIDIA user-space libraries and the loaded kernel module are different versions",
        pattern=r"Driver/library version mismatch",
        variants=(
            r"ERROR_LIB_RM_VERSION_MISMATCH",
            r"NVMLError_LibRmVersionMismatch",
            r"NVML/RM version mismatch",
            r"nvml error: driver/library version mismatch",
        ),
        trigger="Driver/library version mismatch",
        triggers=(
            "ERROR_LIB_RM_VERSION_MISMATCH",
            "NVMLError_LibRmVersionMismatch",
            "NVML/RM version mismatch",
            "driver/library version mismatch",
        ),
        meaning="NVML refused to start: libnvidia-ml and the running nvidia kernel module are of different versions",
        cause=(
            "the driver's user-space packages were upgraded (unattended-upgrades, a package or .run install) "
            "while the old kernel module stays loaded until a reboot; or the user-space driver and the kernel "
            "module were installed from different releases"
        ),
        fix=(
            "reboot the node (or stop every GPU client and reload the nvidia modules) so the module matches the "
            "libraries; install user space and kernel module from one release; pin the driver packages so "
            "automatic upgrades cannot replace them under running jobs"
        ),
        verify=(
            "cat /proc/driver/nvidia/version",
            "nvidia-smi -L",
            "grep -i nvidia /var/log/apt/history.log",
        ),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source=_NVML_H + " (NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18)",
        example="Failed to initialize NVML: Driver/library version mismatch",
        example_source="https://github.com/lyulyul/shine-cluster/issues/30",
        causes=("gpu.driver-mismatch",),
    ),
    Message(
        code="NVML102",
        name="nvidia-smi-no-driver",
        title="nvidia-smi cannot communicate with the NVIDIA driver",
        pattern=r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
        variants=(r"Failed to initialize NVML: (?:Driver Not Loaded|ERROR_DRIVER_NOT_LOADED)",),
        trigger="couldn't communicate with the NVIDIA driver",
        triggers=("Driver Not Loaded", "ERROR_DRIVER_NOT_LOADED"),
        meaning="the nvidia kernel module is not loaded (or not loadable), so no GPU can be used",
        cause=(
            "the kernel module was not built for the running kernel (a kernel upgrade without DKMS, a failed "
            "DKMS build), it is refused (Secure Boot rejects an unsigned module), another driver (nouveau) "
            "holds the GPU, or the driver was removed or half-upgraded"
        ),
        fix=(
            "read why the module does not load (sudo modprobe nvidia; dmesg | grep -i nvidia; dkms status): "
            "rebuild it for the running kernel (install DKMS and the headers), sign it or disable Secure Boot, "
            "blacklist nouveau; then reboot"
        ),
        verify=("sudo modprobe nvidia", "dkms status", "lsmod | grep nvidia", "nvidia-smi -L"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SMI + "; " + _NVML_H + " (NVML_ERROR_DRIVER_NOT_LOADED = 9)",
        example=(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
            "the latest NVIDIA driver is installed and running."
        ),
        example_source="https://github.com/GoogleCloudPlatform/compute-gpu-installation/pull/18",
        causes=("gpu.driver-not-loaded",),
    ),
    Message(
        code="NVML103",
        name="nvml-gpu-lost",
        title="NVML cannot reach a GPU: it is lost (fell off the bus) or unreadable",
        pattern=(
            # newer drivers put the index before the bus id: "for GPU0: 0000:81:00.0: Unknown Error"
            r"Unable to determine the device handle for (?:GPU|gpu) ?(?:\d{1,3}: )?" + _PCI + r": "
            r"(?:Unknown Error|GPU is lost|The GPU has fallen off the bus)"
        ),
        trigger="Unable to determine the device handle for",
        meaning="nvidia-smi could not open one GPU: the driver reports it lost or in an unknown state",
        cause=(
            "the GPU stopped answering on PCIe (it fell off the bus: power, overheating, riser or seating, a "
            "failing board); the kernel log shows Xid 79 or 'GPU has fallen off the bus', lspci 'rev ff'. "
            "Where one GPU fails so and the others of the node answer, that board is the suspect"
        ),
        fix=(
            "drain the node and reboot it; check the GPU's power cables, cooling and seating; if the same GPU "
            "is lost again, replace it"
        ),
        verify=("nvidia-smi -L", "lspci -d 10de: | grep 'rev ff'", "dmesg -T | grep -E 'Xid|fallen off'"),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source=_NVML_H + " (NVML_ERROR_GPU_IS_LOST = 15, NVML_ERROR_UNKNOWN = 999)",
        example="Unable to determine the device handle for GPU0000:07:00.0: Unknown Error",
        example_source="https://github.com/pdbear/syno_nvidia_gpu_driver/issues/22",
        causes=("gpu.fallen-off-bus", "gpu.hw-faulty"),
        subject="GPU {pci}",
    ),
    Message(
        code="NVML104",
        name="nvml-unknown-error-in-container",
        title="NVML fails with 'Unknown Error' (a container that lost its GPU device access)",
        pattern=r"Failed to initialize NVML: (?:Unknown Error|ERROR_UNKNOWN)\b",
        trigger="Failed to initialize NVML: ",
        meaning="NVML could not open the GPU device nodes although the driver is loaded",
        cause=(
            "inside a container: the container lost access to /dev/nvidia* (systemd with the cgroup driver "
            "'systemd' rewrote the container's device rules on 'systemctl daemon-reload', because the "
            "NVIDIA device nodes have no /dev/char links); on the host: a driver in a bad state"
        ),
        fix=(
            "recreate the container; prevent it by creating the /dev/char symlinks (nvidia-ctk system "
            "create-dev-char-symlinks, or the toolkit's udev rule), using CDI, or the cgroupfs driver"
        ),
        verify=("nvidia-smi (inside the container)", "ls -l /dev/char | grep nvidia"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/NVIDIA/nvidia-container-toolkit/issues/48",
        example="Failed to initialize NVML: Unknown Error",
        example_source="https://github.com/NVIDIA/nvidia-container-toolkit/issues/1227",
        causes=("gpu.container-runtime",),
    ),
    Message(
        code="NVML105",
        name="nvidia-smi-no-devices",
        title="nvidia-smi found no devices: the driver is loaded but initialised no GPU",
        # nvidia-smi prints it alone on its line: anchored (a short prefix allowed: a journal, klog or
        # kubectl --prefix), so that a long line is rejected at once
        pattern=r"^.{0,80}?No devices were found\.?\s{0,8}$",
        trigger="No devices were found",
        meaning="the nvidia module is loaded but no GPU came up (or none is visible here)",
        cause=(
            "the driver could not initialise the GPU: RmInitAdapter failed (BIOS settings such as Above 4G "
            "decoding or resizable BAR, firmware, a GPU too new or too old for this driver branch, an open "
            "module on a GPU without GSP), or the GPU fell off the bus; in a container: no GPU was given to it"
        ),
        fix=(
            "read dmesg for the NVRM line that says why (RmInitAdapter failed, not supported, fallen off the "
            "bus) and act on it; enable Above 4G decoding, install a driver branch that supports the GPU"
        ),
        verify=("dmesg -T | grep NVRM", "lspci -d 10de:", "nvidia-smi -L"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_SMI,
        example="No devices were found",
        example_source="https://github.com/shkhln/libc6-shim/issues/10",
        causes=("gpu.init-failed",),
    ),
    Message(
        code="NVML106",
        name="gpu-reset-blocked-in-use",
        title="A GPU reset (or MIG mode change) is refused: another client holds the GPU",
        pattern=(
            r"GPU " + _PCI + r":? ?(?:is currently in use by another process|[Ii]n use by another client)"
        ),
        trigger="in use by another",
        triggers=("In use by another client",),
        meaning="nvidia-smi could not reset the GPU (or apply a pending MIG mode) because a client has it open",
        cause=(
            "a process still holds the device: nvidia-persistenced (persistence mode), the nvidia_drm / "
            "nvidia_modeset modules or an X server, DCGM / dcgm-exporter, the fabric manager, a monitoring "
            "agent or a CUDA process, often one started by the GPU operator's daemonsets"
        ),
        fix=(
            "stop the holders first (nvidia-smi -pm 0 or stop nvidia-persistenced, stop DCGM/exporter and "
            "fabric manager, unload nvidia_drm), check with lsof /dev/nvidia*, then reset; or reboot to apply "
            "a pending MIG mode"
        ),
        verify=("sudo lsof /dev/nvidia*", "nvidia-smi --gpu-reset -i <bus id>", "nvidia-smi -q -d MIG"),
        severity=Severity.WARNING,
        action=Action.RESTART_SERVICE,
        source=_SMI + " (-r/--gpu-reset, -mig); " + _NVML_H + " (NVML_ERROR_IN_USE = 19)",
        example="GPU 00000000:C1:00.0 is currently in use by another process.",
        example_source="https://github.com/NVIDIA/gpu-operator/issues/118",
        causes=("gpu.reset-blocked",),
        subject="GPU {pci}",
    ),
    Message(
        code="NVML107",
        name="gpu-reset-blocked-count",
        title="nvidia-smi names how many GPUs are held by other processes (a reset cannot run)",
        pattern=r"devices? (?:is|are) currently being used by one or more other processes",
        variants=(r"Unable to reset this GPU because it's being used by some other process",),
        trigger="being used by",
        meaning="a GPU reset was refused because processes still use the GPUs",
        cause="a client holds the GPUs (persistence daemon, nvidia_drm, DCGM, fabric manager, CUDA processes)",
        fix="stop the holders (see the per-GPU finding), then reset the GPUs or reboot",
        verify=("sudo lsof /dev/nvidia*",),
        severity=Severity.WARNING,
        action=Action.RESTART_SERVICE,
        source=_SMI + " (-r/--gpu-reset)",
        example=(
            "4 devices are currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
            "application, graphics application such as an X server, or a monitoring application such as "
            "another instance of nvidia-smi). Please first kill all processes using these devices and all "
            "compute applications running in the system."
        ),
        example_source="https://github.com/NVIDIA/mig-parted/issues/181",
        causes=("gpu.reset-blocked",),
        role="symptom",
    ),
    Message(
        code="NVML108",
        name="nvml-insufficient-permissions",
        title="NVML cannot open the GPU: 'Insufficient Permissions' (device nodes denied)",
        pattern=r"Failed to initialize NVML: (?:Insufficient Permissions|ERROR_NO_PERMISSION)\b",
        trigger="Failed to initialize NVML: ",
        meaning=(
            "NVML_ERROR_NO_PERMISSION: the process may not open /dev/nvidiactl or /dev/nvidia<N>, so NVML "
            "(nvidia-smi, the device plugin, CUDA's device query) sees no GPU"
        ),
        cause=(
            "a security policy or the device nodes' mode: SELinux denying containers the devices (Fedora/RHEL: "
            "the container_use_devices boolean off), the driver's NVreg_DeviceFileMode/UID/GID, a cgroup "
            "device rule, or a rootless container without the nodes mapped"
        ),
        fix=(
            "on SELinux hosts setsebool -P container_use_devices 1 (or run with the NVIDIA SELinux policy / "
            "CDI); check ls -l /dev/nvidia* and the device cgroup of the container"
        ),
        verify=(
            "ls -lZ /dev/nvidia*",
            "getsebool container_use_devices",
            "nvidia-smi (inside the container)",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_NVML_H,
        example="Failed to initialize NVML: Insufficient Permissions",
        example_source="https://github.com/NVIDIA/nvidia-container-toolkit/issues/33",
        causes=("gpu.container-runtime",),
    ),
    Message(
        code="NVML109",
        name="nvml-library-missing",
        title="A program cannot load libnvidia-ml.so.1 (no NVIDIA driver user space where it runs)",
        # glibc ld.so: "<prog>: error while loading shared libraries: <lib>: cannot open shared object file"
        pattern=(
            r"(?P<prog>[\w./\-]{1,200}): error while loading shared libraries: libnvidia-ml\.so(?:\.1)?: "
            r"cannot open shared object file"
        ),
        trigger="loading shared libraries: libnvidia-ml",
        meaning="the dynamic loader found no NVML library: the program (nvidia-smi, a benchmark, a monitor) cannot start",
        cause=(
            "the NVIDIA driver's user-space libraries are absent where the program runs: a container started "
            "without the NVIDIA runtime (no --gpus / runtimeClassName: nvidia), a node or remote MPI rank "
            "without the driver, or a library path (LD_LIBRARY_PATH, ldconfig) that does not include it"
        ),
        fix=(
            "run the container with the NVIDIA runtime (docker --gpus all, runtimeClassName: nvidia) or install "
            "the driver on that host; check ldconfig -p | grep libnvidia-ml"
        ),
        verify=("ldconfig -p | grep libnvidia-ml", "nvidia-smi -L"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/troubleshooting.html",
        example=(
            "/workspace/hpl-mxp-linux-x86_64/xhpl_mxp: error while loading shared libraries: libnvidia-ml.so.1: "
            "cannot open shared object file: No such file or directory"
        ),
        notes=("example: an MPI rank's error quoted in a public HPL-MxP run log",),
        causes=("gpu.container-runtime", "gpu.driver-not-loaded"),
        subject="{prog}",
        confidence=0.8,
    ),
    Message(
        code="NVML110",
        name="nvml-blocked-by-os",
        title="NVML: GPU access blocked by the operating system (cgroups, or a GPU-PV guest)",
        pattern=r"GPU access blocked by the operating system",
        trigger="GPU access blocked by the operating system",
        triggers=("NVML_ERROR_OPERATING_SYSTEM", "NVMLError_OperatingSystem"),
        variants=(r"NVML_ERROR_OPERATING_SYSTEM\b", r"NVMLError_OperatingSystem\b"),
        meaning="NVML could not open the GPU's control device: the operating system refused it (NVML_ERROR_OPERATING_SYSTEM = 20)",
        cause=(
            "in a WSL2 or Hyper-V GPU-PV guest the host's paravirtual GPU is not offered to this guest or its "
            "driver files (/usr/lib/wsl) do not match the host's driver; in a container the cgroup device rules "
            "deny the /dev/nvidia* nodes"
        ),
        fix=(
            "in a GPU-PV guest: assign the GPU partition to the VM on the host and copy the host driver's "
            "/usr/lib/wsl files of the same version into the guest; in a container: run it with the NVIDIA "
            "runtime so that its device rules allow the GPUs"
        ),
        verify=("ls -l /dev/dxg /dev/nvidia* 2>&1", "nvidia-smi -L"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_NVML_H
        + " (NVML_ERROR_OPERATING_SYSTEM = 20: 'The GPU control device has been blocked by the operating system/cgroups')",
        example="Failed to initialize NVML: GPU access blocked by the operating system",
        example_source="https://github.com/staralt/dxgkrnl-dkms/issues/7",
        causes=("gpu.gpu-pv", "gpu.container-runtime"),
    ),
    Message(
        code="NVML111",
        name="mig-enabled-no-instances",
        title="MIG mode is on but no MIG device (GPU/compute instance) exists: programs see no GPU",
        # Slurm src/interfaces/gpu/nvml (gpu_nvml.c): fatal("MIG mode is enabled, but no MIG devices were
        # found. Please either create MIG instances, disable MIG mode, remove AutoDetect=nvml, or remove
        # GPUs from the configuration completely."); nvidia-smi mig -lgi / -lci: "No GPU instances found",
        # "No compute instances found"
        pattern=r"MIG mode is enabled, but no MIG devices were found",
        trigger="MIG mode is enabled, but no MIG devices",
        triggers=("No GPU instances found", "No compute instances found"),
        variants=(r"No (?:GPU|compute) instances found",),
        meaning=(
            "the GPU is in MIG mode, so only its MIG devices can run work, and none is created: CUDA finds no "
            "device, Slurm's NVML autodetection stops, the device plugin advertises nothing"
        ),
        cause=(
            "MIG mode was enabled (or left enabled) without creating GPU and compute instances, or they were lost "
            "at a reboot (instances do not persist; a MIG manager or boot script must recreate them)"
        ),
        fix=(
            "create the instances (nvidia-smi mig -cgi <profiles> -C, or the MIG manager's config / the GPU "
            "operator's mig.strategy with a nvidia.com/mig.config label), or disable MIG (nvidia-smi -mig 0 "
            "and reset the GPU)"
        ),
        verify=(
            "nvidia-smi -L",
            "nvidia-smi mig -lgi",
            "nvidia-smi --query-gpu=mig.mode.current --format=csv",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/SchedMD/slurm/blob/master/src/plugins/gpu/nvml/gpu_nvml.c; "
        "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/",
        example=(
            "slurmd: fatal: MIG mode is enabled, but no MIG devices were found. Please either create MIG "
            "instances, disable MIG mode, remove AutoDetect=nvml, or remove GPUs from ..."
        ),
        example_source="https://github.com/ComputeCanada/puppet-magic_castle/pull/276",
        causes=("gpu.mig-config",),
    ),
)
