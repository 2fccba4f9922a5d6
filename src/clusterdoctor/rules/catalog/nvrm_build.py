"""The NVIDIA kernel module build (DKMS, the .run installer, a driver container) failing on the compiler,
as data: the driver's own compiler check, a compiler that does not know the kernel's flags, and the
make error that ends a failed DKMS build of the nvidia module.

Part of the nvrm family: :mod:`clusterdoctor.rules.catalog.nvrm` merges these entries into its
``MESSAGES`` in code order. Example lines are from public issue threads, each named in ``example_source``.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_CC_FIX = (
    "build the module with the compiler the kernel was built with: install that gcc (the kernel's "
    "/proc/version names it) and make it the default or set CC=gcc-<version> for DKMS/the installer, then "
    "rebuild (dkms autoinstall, or reinstall the driver); do not set IGNORE_CC_MISMATCH to get past it"
)

BUILD_MESSAGES: tuple[Message, ...] = (
    Message(
        code="NVDRV106",
        name="nvidia-module-compiler-mismatch",
        title="The NVIDIA kernel module build refuses a compiler other than the kernel's",
        # kernel-open/Kbuild cc_version_check (conftest.sh): "Compiler version check failed:" ... "*** Failed
        # CC version check. Bailing out! ***"; Linux's top Makefile: "warning: the compiler differs from the
        # one used to build the kernel"
        pattern=r"\*\*\* Failed CC version check\. Bailing out! \*\*\*",
        trigger="Failed CC version check",
        triggers=(
            "Compiler version check failed",
            "the compiler differs from the one used to build the kernel",
        ),
        variants=(
            r"^Compiler version check failed:",
            r"warning: the compiler differs from the one used to build the kernel",
        ),
        meaning=(
            "DKMS (or the installer) builds the nvidia module with a compiler whose major/minor version is "
            "not the kernel's, and the driver's build stops: no module is installed for this kernel"
        ),
        cause=(
            "the default cc/gcc is not the one the distribution built the kernel with (a newer gcc from an "
            "update, update-alternatives pointing at another gcc, a container image's compiler)"
        ),
        fix=_CC_FIX,
        verify=(
            "cat /proc/version",
            "gcc --version",
            "dkms status",
            "cat /var/lib/dkms/nvidia/*/build/make.log",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/NVIDIA/open-gpu-kernel-modules/blob/main/kernel-open/conftest.sh",
        example="*** Failed CC version check. Bailing out! ***",
        example_source="https://github.com/GoogleCloudPlatform/compute-gpu-installation/issues/15",
        causes=("gpu.driver-build",),
    ),
    Message(
        code="NVDRV107",
        name="kernel-module-compiler-too-old",
        title="A kernel module build uses a compiler that does not know the kernel's flags",
        # gcc: "gcc: error: unrecognized command line option '-mharden-sls=all'" (flags of kernels >= 5.17
        # built with gcc >= 11: -mharden-sls, -ftrivial-auto-var-init, -fzero-call-used-regs ...)
        pattern=(
            r"(?:gcc|cc|x86_64-linux-gnu-gcc(?:-\d{1,2})?): error: unrecognized command[- ]line option "
            r"'(?P<flag>-m(?:harden-sls|function-return|indirect-branch|record-mcount)[=\w\-]{0,40}"
            r"|-f(?:trivial-auto-var-init|zero-call-used-regs|min-function-alignment|stack-clash-protection|cf-protection)[=\w\-]{0,40})'"
        ),
        trigger="unrecognized command",
        meaning=(
            "an out-of-tree kernel module (the NVIDIA driver's, by DKMS) is compiled with the kernel's own "
            "flags by an older compiler that does not know them, so the build fails"
        ),
        cause=(
            "the default gcc is older than the one the kernel was built with (update-alternatives or a "
            "Dockerfile that selects an older gcc for other software)"
        ),
        fix=_CC_FIX,
        verify=("cat /proc/version", "gcc --version", "update-alternatives --display gcc"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://gcc.gnu.org/onlinedocs/gcc/x86-Options.html",
        example="gcc: error: unrecognized command line option '-mharden-sls=all'",
        example_source="https://github.com/intel/hdk/pull/622",
        causes=("gpu.driver-build",),
        subject="{flag}",
        confidence=0.75,
    ),
    Message(
        code="NVDRV108",
        name="nvidia-dkms-make-error",
        title="The DKMS build of the NVIDIA kernel module failed (make error)",
        # make's "make[N]: *** [<target under /var/lib/dkms/nvidia/<version>/build>] Error N"
        pattern=(
            r"make\[\d{1,2}\]: \*\*\* \[[^\]\n]{0,200}/dkms/nvidia/(?P<version>[\w.\-]{1,40})/build/"
            r"[^\]\n]{1,200}\] Error \d{1,3}"
        ),
        trigger="/dkms/nvidia/",
        meaning="make stopped while DKMS built the nvidia module for this kernel: the driver is not installed for it",
        cause=(
            "the build's first error says why (the compiler check, a compiler that lacks a kernel flag, "
            "missing kernel headers, a kernel newer than the driver release supports)"
        ),
        fix="read the first error above in /var/lib/dkms/nvidia/<version>/build/make.log and fix that",
        verify=("dkms status", "cat /var/lib/dkms/nvidia/*/build/make.log"),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://github.com/dell/dkms",
        example=(
            "make[2]: *** [scripts/Makefile.build:297: /var/lib/dkms/nvidia/525.125.06/build/nvidia/nv.o] Error 1"
        ),
        example_source="https://github.com/intel/hdk/pull/622",
        causes=("gpu.driver-build",),
        role="symptom",
        subject="driver {version}",
    ),
)
