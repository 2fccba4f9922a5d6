"""The NVIDIA kernel driver's own lines other than Xid (NVRM), and what building or loading it prints.

The Xid table is :mod:`clusterdoctor.rules.xid_catalog`; the kernel-log parser
(:mod:`clusterdoctor.observe.gpu.kernel_log`) turns Xid, "fallen off the bus", probe and RmInitAdapter
failures into GPU events that rules/gpu.py judges. This catalogue holds the other NVRM lines that name
a cause: a status the driver returned (``Reset required [NV_ERR_RESET_REQUIRED]``, printed by
``nvstatusToString`` as ``<text> [<NAME>]``), GSP firmware timeouts outside an Xid, a user-space/kernel
version mismatch ("API mismatch"), another driver owning the GPU; and the lines of the tools that
build or load the module (kmod's modprobe, the kernel's modpost, DKMS, nvidia-installer).

Wording from NVIDIA/open-gpu-kernel-modules (``kernel-open/nvidia/nv.c``,
``src/nvidia/arch/nvalloc/unix/src/osapi.c``, ``src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c``,
``src/nvidia/src/kernel/vgpu/rpc.c``, ``src/common/sdk/nvidia/inc/nvstatuscodes.h``), Linux
``scripts/mod/modpost.c``, kmod's modprobe, DKMS and NVIDIA/nvidia-installer; example lines from
public threads.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.catalog.nvrm_build import BUILD_MESSAGES

_OGKM = "https://github.com/NVIDIA/open-gpu-kernel-modules/blob/main/"
_PCI = r"(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})"

_OWN_MESSAGES: tuple[Message, ...] = (
    Message(
        code="NVRM101",
        name="nvrm-reset-required",
        title="The NVIDIA driver says the GPU needs a reset (NV_ERR_RESET_REQUIRED)",
        pattern=(
            r"NVRM: (?:(?P<gpu>GPU\d{1,3}) )?\w{1,64}: (?:Assertion|Check) failed: Reset required "
            r"\[NV_ERR_RESET_REQUIRED\]"
        ),
        variants=(r"Reset required \[NV_ERR_RESET_REQUIRED\]",),
        trigger="[NV_ERR_RESET_REQUIRED]",
        meaning="driver calls on this GPU fail with NV_ERR_RESET_REQUIRED: the GPU cannot be used until it is reset",
        cause=(
            "an earlier fault left the GPU unusable: a GSP firmware timeout (Xid 119/120), an uncontained "
            "error or an Xid 154 recovery action; every new CUDA context on it fails"
        ),
        fix=(
            "drain the GPU's jobs and reset it (nvidia-smi -r -i <id>) or reboot the node; read the Xid lines "
            "before the first NV_ERR_RESET_REQUIRED for what broke; update driver/firmware if it recurs"
        ),
        verify=("nvidia-smi -q -d RESET_STATUS", "dmesg -T | grep -E 'Xid|NV_ERR_RESET_REQUIRED'"),
        severity=Severity.CRITICAL,
        action=Action.RESET_DEVICE,
        source=_OGKM + "src/common/sdk/nvidia/inc/nvstatuscodes.h (NV_ERR_RESET_REQUIRED, 0x62)",
        example=(
            "[Sun Jan 11 09:52:01 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required "
            "[NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874"
        ),
        example_source="https://github.com/scitix/sichek/issues/51",
        causes=("gpu.reset-required",),
        subject="{gpu}",
    ),
    Message(
        code="NVRM102",
        name="nvrm-gsp-rate-limited-needs-reset",
        title="GSP firmware RPCs keep timing out: the driver says the GPU likely needs a reset",
        pattern=(
            r"Rate limiting GSP RPC error prints for GPU at PCI:" + _PCI + r".{0,80}?"
            r"The GPU likely needs to be reset"
        ),
        trigger="Rate limiting GSP RPC error prints",
        meaning="RPCs to the GPU System Processor (GSP) timed out repeatedly; the driver stopped printing each one",
        cause=(
            "the GSP firmware on the GPU hung or the GPU stopped answering (a driver/firmware bug, a GPU "
            "fault, or the GPU falling off the bus); every call into the driver for this GPU now times out"
        ),
        fix=(
            "drain and reset the GPU (or reboot the node); if it recurs, update the driver (GSP firmware "
            "ships with it), collect nvidia-bug-report.sh and look for hardware Xids on that GPU"
        ),
        verify=("nvidia-smi -q -i <bus id>", "dmesg -T | grep -E 'Xid|GSP'"),
        severity=Severity.CRITICAL,
        action=Action.RESET_DEVICE,
        source=_OGKM
        + "src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c (_kgspRpcIncrementTimeoutCountAndRateLimitPrints)",
        example=(
            "[Sun Feb 23 16:24:36 2025] NVRM: Rate limiting GSP RPC error prints for GPU at PCI:0000:9b:00 "
            "(printing 1 of every 30).  The GPU likely needs to be reset."
        ),
        example_source=(
            "https://github.com/leptonai/gpud/blob/main/components/accelerator/nvidia/xid/testdata/dmesg-with-xid-119.log"
        ),
        causes=("gpu.gsp-timeout", "gpu.reset-required"),
        subject="GPU {pci}",
    ),
    Message(
        code="NVRM103",
        name="nvrm-gsp-rpc-timeout",
        title="An RPC to the GPU System Processor (GSP) timed out",
        pattern=r"rpcRecvPoll timedout for fn \d{1,5} sequence \d{1,12}",
        variants=(r"GPU marked for reset",),
        trigger="rpcRecvPoll timedout",
        triggers=("GPU marked for reset",),
        meaning="the driver waited in vain for the GSP firmware to answer a call",
        cause=(
            "the GSP firmware hung or the GPU is not responding (driver/firmware bug, a GPU fault); it comes "
            "with Xid 119 and leaves the GPU needing a reset"
        ),
        fix="drain and reset the GPU (or reboot); update the driver if it recurs; RMA if hardware Xids follow",
        verify=("dmesg -T | grep -E 'Xid 119|GSP'", "nvidia-smi -L"),
        severity=Severity.CRITICAL,
        action=Action.RESET_DEVICE,
        source=_OGKM
        + "src/nvidia/src/kernel/vgpu/rpc.c (rpcRecvPoll timedout); kernel_gsp.c (_kgspHandleFatalTimeout)",
        example=(
            "192.168.11.119: kern: warning: [2026-04-22T21:30:51.803749334Z]: NVRM: _issueRpcAndWait: "
            "rpcRecvPoll timedout for fn 76 sequence 4129!"
        ),
        example_source="https://github.com/NVIDIA/open-gpu-kernel-modules/issues/942",
        causes=("gpu.gsp-timeout",),
    ),
    Message(
        code="NVRM104",
        name="nvrm-api-mismatch",
        title="NVRM API mismatch: a user-space driver component and the kernel module differ in version",
        pattern=(
            r"NVRM: API mismatch: the client (?:has the version (?P<client>[\d.]{3,20})"
            r"|'[^'\n]{0,64}' \(pid \d{1,9}\))"
        ),
        trigger="API mismatch: the client",
        meaning="a program using the driver (Xorg, nvidia-smi, CUDA) brings user-space libraries of another version than the loaded module",
        cause=(
            "the driver was upgraded and the old kernel module is still loaded (no reboot yet), the module "
            "was rebuilt from another version (DKMS, .run vs packages), or a container ships its own driver "
            "libraries"
        ),
        fix="reboot (or reload the nvidia modules) so they match; install module and libraries from one release",
        verify=("cat /proc/driver/nvidia/version", "modinfo nvidia | grep ^version"),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source=_OGKM + "src/nvidia/arch/nvalloc/unix/src/osapi.c (RmVersionCheck: API mismatch)",
        example="[ 8957.099615] NVRM: API mismatch: the client has the version 570.148.08, but",
        example_source="https://github.com/nvidiavgpuarchive/index/issues/1",
        causes=("gpu.driver-mismatch",),
    ),
    Message(
        code="NVRM105",
        name="nvrm-probe-not-called",
        title="The NVIDIA driver's probe was not called: another driver owns the GPU",
        pattern=r"NVRM: The NVIDIA probe routine was not called for \d{1,4} device\(s\)",
        trigger="The NVIDIA probe routine was not called",
        # newer drivers name the GPU and the driver that holds it (nv-pci.c)
        triggers=("is already bound to",),
        variants=(
            r"NVRM: GPU (?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) is already bound to "
            r"(?P<drv>[\w\-]{1,40})",
        ),
        meaning="the nvidia module loaded but never got the GPU: another kernel driver had claimed it",
        cause=(
            "nouveau, nova_core (the in-tree Rust driver of recent kernels, NovaCore), nvidiafb, rivafb or "
            "vfio-pci was loaded first and bound the GPU, so the nvidia driver has no device"
        ),
        fix=(
            "blacklist the driver that holds it (nouveau, and nova_core/nova_drm on kernels that build them; "
            "nvidiafb/rivafb), rebuild the initramfs and reboot; on a passthrough host check the vfio-pci "
            "binding is intended"
        ),
        verify=("lspci -k -d 10de:", "lsmod | grep -E 'nouveau|nvidia'"),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source=_OGKM + "kernel-open/nvidia/nv.c (nvidia_init_module)",
        example="[ 9687.215135] NVRM: The NVIDIA probe routine was not called for 1 device(s).",
        example_source="https://github.com/MrMEEE/ironhide/issues/41",
        causes=("gpu.driver-not-loaded",),
        subject="GPU {pci}",
        detail="(bound to {drv})",
    ),
    Message(
        code="NVDRV101",
        name="nvidia-module-insert-failed",
        title="modprobe cannot load the nvidia kernel module",
        pattern=(
            r"modprobe: (?:ERROR|FATAL): (?:could not insert '(?P<mod>nvidia(?!_peermem)[\w-]{0,16})': (?P<why>[^\n]{1,120})"
            r"|Module (?P<mod2>nvidia[\w-]{0,16}) not found in directory (?P<dir>\S{1,200}))"
        ),
        trigger="modprobe: ",
        meaning="the nvidia kernel module could not be inserted, so the driver is not loaded",
        cause=(
            "'Key was rejected by service': Secure Boot refuses the unsigned (DKMS-built) module; 'Module "
            "nvidia not found': no module was built for the running kernel (kernel upgraded without DKMS or "
            "headers); 'Unknown symbol' / 'Exec format error' / 'Invalid argument': a module built for another "
            "kernel; 'No such device': no supported GPU, or another driver holds it"
        ),
        fix=(
            "Secure Boot: enrol the DKMS signing key (mokutil --import) or disable Secure Boot; missing module: "
            "install the headers and DKMS and rebuild (dkms autoinstall); wrong kernel: rebuild for uname -r"
        ),
        verify=("sudo modprobe nvidia", "mokutil --sb-state", "dkms status", "uname -r"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://git.kernel.org/pub/scm/utils/kernel/kmod/kmod.git/tree/tools/modprobe.c",
        example="modprobe: ERROR: could not insert 'nvidia': Key was rejected by service",
        example_source="https://github.com/canonical/nvidia-graphics-drivers/issues/61",
        causes=("gpu.driver-not-loaded",),
    ),
    Message(
        code="NVDRV102",
        name="nvidia-module-gpl-only-symbol",
        title="The nvidia module does not build: it uses a symbol this kernel exports GPL-only",
        pattern=(
            r"modpost: GPL-incompatible module (?P<mod>nvidia[\w-]{0,16})\.ko uses GPL-only symbol "
            r"'(?P<sym>[\w.]{1,80})'"
        ),
        trigger="GPL-incompatible module nvidia",
        meaning="the kernel build refused to link the proprietary nvidia module, so no driver loads on this kernel",
        cause=(
            "the running (new) kernel made a symbol the driver uses GPL-only (e.g. __rcu_read_lock in 6.6.15 / "
            "6.7.3, rcu_read_unlock_strict in some 5.15 builds); this driver release cannot be built for it"
        ),
        fix=(
            "boot the previous kernel, or install a driver release that supports this kernel (or the open "
            "kernel modules, which are GPL); pin the kernel until then"
        ),
        verify=("dkms status", "uname -r", "cat /var/lib/dkms/nvidia/*/build/make.log"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/torvalds/linux/blob/master/scripts/mod/modpost.c",
        example="ERROR: modpost: GPL-incompatible module nvidia.ko uses GPL-only symbol '__rcu_read_lock'",
        example_source="https://github.com/xanmod/linux/issues/411",
        # on a host the driver is then not loaded; in the GPU operator's driver container it is that
        # container's build that fails (the same cause, named where it happens)
        causes=("gpu.driver-not-loaded", "gpu.operator-driver"),
    ),
    Message(
        code="NVDRV105",
        name="gdrdrv-gpl-only-symbol",
        title="gdrcopy's gdrdrv module does not build: it uses a symbol this kernel exports GPL-only",
        pattern=r"modpost: GPL-incompatible module gdrdrv\.ko uses GPL-only symbol '(?P<sym>[\w.]{1,80})'",
        trigger="GPL-incompatible module gdrdrv",
        meaning=(
            "the kernel build refused to link gdrdrv (the GPUDirect copy driver of gdrcopy), so no gdrdrv "
            "loads on this kernel and GPUDirect copies (NCCL's GDRCOPY, UCX's gdr_copy) are unavailable"
        ),
        cause=(
            "this gdrcopy release links against a symbol the running kernel exports GPL-only (e.g. cc_mkdec "
            "on RHEL 9.1 kernels); the release predates that kernel"
        ),
        fix="build gdrcopy from a release (or master) that supports this kernel, or boot a kernel it supports",
        verify=("lsmod | grep gdrdrv", "uname -r", "dkms status"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/torvalds/linux/blob/master/scripts/mod/modpost.c",
        example="ERROR: modpost: GPL-incompatible module gdrdrv.ko uses GPL-only symbol 'cc_mkdec'",
        example_source="https://github.com/NVIDIA/gdrcopy/issues/254",
        causes=("nccl.gdr-or-plugin", "rdma.driver-or-module"),
        subject="gdrdrv",
    ),
    Message(
        code="NVDRV103",
        name="nvidia-installer-module-failed",
        title="nvidia-installer could not build or load the kernel module",
        pattern=(
            r"ERROR: An error occurred while performing the step: \"(?:Checking to see whether the nvidia "
            r"kernel module was successfully built|Building kernel modules)\""
        ),
        trigger="An error occurred while performing the step",
        triggers=(
            "Unable to load the kernel module",
            "Unable to find the kernel source tree",
            "Failed to install the kernel module through DKMS",
        ),
        variants=(
            r"ERROR: Unable to load the kernel module '?nvidia(?:[\w-]{0,16})\.ko'?",
            r"ERROR: Unable to find the kernel source tree for the currently running kernel",
            r"ERROR: Failed to install the kernel module through DKMS",
        ),
        meaning="the NVIDIA installer failed at the kernel module: no driver will load",
        cause=(
            "the module does not compile or link for the running kernel (kernel too new for this driver, "
            "GPL-only symbols, compiler mismatch), the kernel headers are missing, or the built module is "
            "refused at load (Secure Boot, nouveau holding the GPU)"
        ),
        fix=(
            "read /var/log/nvidia-installer.log for the first error; install the headers of uname -r, use a "
            "driver release that supports this kernel, blacklist nouveau, sign the module or disable Secure Boot"
        ),
        verify=("tail -50 /var/log/nvidia-installer.log", "uname -r", "ls /lib/modules/$(uname -r)/build"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/NVIDIA/nvidia-installer/blob/main/kernel.c",
        example=(
            'ERROR: An error occurred while performing the step: "Checking to see whether the nvidia kernel '
            'module was successfully built". See /var/log/nvidia-installer.log for details.'
        ),
        example_source="https://github.com/mesosphere/konvoy-image-builder/pull/1200",
        causes=("gpu.driver-not-loaded",),
    ),
    Message(
        code="NVDRV104",
        name="nvidia-dkms-build-failed",
        title="DKMS failed to build the nvidia module for a kernel",
        pattern=r"Consult /var/lib/dkms/(?P<mod>nvidia[\w-]{0,24})/(?P<ver>[\w.\-]{1,40})/build/make\.log",
        trigger="/var/lib/dkms/nvidia",
        meaning="DKMS could not build the nvidia kernel module for a kernel; that kernel boots without the driver",
        cause=(
            "the driver release does not support that kernel (new kernel APIs, GPL-only symbols), the kernel "
            "headers or the right compiler are missing"
        ),
        fix=(
            "read the make.log it names for the first error; install the headers and the kernel's compiler, or "
            "a driver release that supports the kernel; keep booting the previous kernel until then"
        ),
        verify=("dkms status", "uname -r"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/dell/dkms/blob/master/dkms.in",
        example="Consult /var/lib/dkms/nvidia/390.157/build/make.log for more information.",
        example_source="https://github.com/NVIDIA/open-gpu-kernel-modules/issues/526",
        causes=("gpu.driver-not-loaded", "gpu.driver-build"),
    ),
    Message(
        code="NVRM106",
        name="nvrm-gsp-firmware-missing",
        title="The NVIDIA driver finds no GSP firmware of its own version: the GPU is not initialised",
        # the kernel's firmware loader names the file ("nvidia <pci>: Direct firmware load for
        # nvidia/<version>/gsp_<chip>.bin failed with error -2"); the driver then says RmFetchGspRmImages
        pattern=r"nvidia (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})\.\d: Direct firmware load for nvidia/(?P<version>[\d.]{3,20})/gsp_\w{1,20}\.bin failed",
        trigger="Direct firmware load for nvidia/",
        meaning="the kernel module needs the GSP firmware file of its own version and /lib/firmware/nvidia has none",
        cause=(
            "the kernel module and the driver's firmware/user-space packages are of different versions (an "
            "image or package update shipped a new user space and firmware but left an older module, or the "
            "reverse), or the firmware package is not installed; RmInitAdapter then fails on the GPU"
        ),
        fix=(
            "install kernel module, firmware and user space from one driver release (the firmware lives in "
            "/lib/firmware/nvidia/<version>/), then reload the modules or reboot"
        ),
        verify=(
            "modinfo nvidia | grep ^version",
            "ls /lib/firmware/nvidia/",
            "cat /proc/driver/nvidia/version",
        ),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source=_OGKM
        + "kernel-open/nvidia/nv.c (nv_get_firmware, request_firmware of nvidia/<version>/gsp_*.bin)",
        example=(
            "[   23.991660] nvidia 0000:07:00.0: Direct firmware load for nvidia/570.144/gsp_ga10x.bin failed with error -2"
        ),
        example_source="https://github.com/ublue-os/bazzite/issues/2668",
        causes=("gpu.driver-mismatch",),
        subject="GPU {pci}",
        # it names the GPU and the reason its initialisation failed: before the API mismatch that a
        # client's connection prints for the same version skew
        confidence=0.95,
    ),
    Message(
        code="NVRM107",
        name="nvrm-gsp-image-not-found",
        title="The NVIDIA driver found no GSP firmware image (RmFetchGspRmImages)",
        pattern=r"RmFetchGspRmImages: No firmware image found",
        trigger="RmFetchGspRmImages: No firmware image found",
        meaning="the driver could not load the GSP firmware the GPU needs, so it cannot initialise the GPU",
        cause=(
            "the firmware files of the loaded module's version are missing from /lib/firmware/nvidia/<version>/: "
            "module and firmware/user-space packages of different releases, or no firmware package installed"
        ),
        fix="install the kernel module and its firmware from one driver release, then reload the modules or reboot",
        verify=("modinfo nvidia | grep ^version", "ls /lib/firmware/nvidia/"),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source=_OGKM + "src/nvidia/arch/nvalloc/unix/src/osinit.c (RmFetchGspRmImages)",
        example="[   23.991667] NVRM: RmFetchGspRmImages: No firmware image found",
        example_source="https://github.com/ublue-os/bazzite/issues/2668",
        causes=("gpu.driver-mismatch",),
        confidence=0.85,
    ),
)

MESSAGES: tuple[Message, ...] = tuple(sorted((*_OWN_MESSAGES, *BUILD_MESSAGES), key=lambda m: m.code))
