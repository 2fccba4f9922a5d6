"""The GPU share's message catalogues (cuda, nvml, nvrm, fabricmanager, deviceplugin) on real lines.

Every line below is copied from a public thread (named beside it) or from a dev case of the incident
corpus: each is read as its entry's code, in every spelling the entry lists (its ``triggers`` and
``variants``), and each variant pattern is linear on a long line of its own trigger."""

from __future__ import annotations

import time

import pytest

from clusterdoctor import diagnosis
from clusterdoctor.observe.messages import scan_text
from clusterdoctor.rules.catalog import all_messages, by_code
from clusterdoctor.rules.registry import run_rules

GPU_FAMILIES = ("cuda", "nvml", "nvrm", "fabricmanager", "deviceplugin")

# (code, real line, where it was published)
REAL_LINES = [
    # CUDA
    ("CUDA101", "-> system not yet initialized", "https://github.com/pytorch/pytorch/issues/35710"),
    (
        "CUDA101",
        'CUDA error at bandwidthTest.cu:256 code=802(cudaErrorSystemNotReady) "cudaSetDevice(currentDevice)" ',
        "https://github.com/pytorch/pytorch/issues/35710",
    ),
    (
        "CUDA101",
        "/opt/conda/envs/workflow/lib/python3.9/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA "
        "initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
        "calling NumCudaDevices() that might have already set an error? Error 802: system not yet "
        "initialized (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)",
        "https://github.com/dstackai/dstack/issues/2348",
    ),
    (
        "CUDA102",
        "/home/drink/Software/stable-diffusion-ui/stable-diffusion/env/lib/python3.8/site-packages/torch/cuda/"
        "__init__.py:82: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did "
        "you run some cuda functions before calling NumCudaDevices() that might have already set an error? "
        "Error 803: system has unsupported display driver / cuda driver combination (Triggered internally at "
        " /opt/conda/conda-bld/pytorch_1646755903507/work/c10/cuda/CUDAFunctions.cpp:112.)",
        "https://github.com/easydiffusion/easydiffusion/issues/379",
    ),
    (
        "CUDA103",
        "Failed to allocate device vector A (error code forward compatibility was attempted on non supported HW)!",
        "https://github.com/NVIDIA/gpu-operator/issues/277",
    ),
    ("CUDA105", "RuntimeError: CUDA error: uncorrectable ECC error encountered", "jade-hpc-gpu #194"),
    (
        "CUDA106",
        "Failed to allocate device vector A (error code no CUDA-capable device is detected)!",
        "https://github.com/NVIDIA/gpu-operator/issues/253",
    ),
    (
        "CUDA107",
        "NCCL WARN Cuda failure 'CUDA driver is a stub library'",
        "https://github.com/horovod/horovod/issues/3831",
    ),
    (
        "CUDA108",
        "THCudaCheck FAIL file=/opt/conda/conda-bld/pytorch_1573049306803/work/aten/src/THC/THCGeneral.cpp "
        "line=50 error=999 : unknown error",
        "https://github.com/pytorch/pytorch/issues/31179",
    ),
    (
        "CUDA109",
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
        "installed a driver from http://www.nvidia.com/Download/index.aspx",
        "https://github.com/runpod/containers/issues/56",
    ),
    # nvidia-smi / NVML
    (
        "NVML103",
        "Unable to determine the device handle for GPU 0000:1C:00.0: Unknown Error",
        "https://github.com/lyulyul/shine-cluster/issues/171",
    ),
    (
        "NVML104",
        "Failed to initialize NVML: Unknown Error",
        "https://github.com/NVIDIA/nvidia-container-toolkit/issues/1227",
    ),
    (
        "NVML106",
        "Warning: MIG mode is in pending disable state for GPU 00000000:C1:00.0:In use by another client",
        "https://github.com/NVIDIA/gpu-operator/issues/118",
    ),
    (
        "NVML106",
        "  GPU 00000000:01:00.0: In use by another client",
        "https://github.com/NVIDIA/mig-parted/issues/181",
    ),
    # NVRM, module build and load
    (
        "NVRM103",
        "192.168.11.119: kern: warning: [2026-04-22T21:30:51.52643656Z]: NVRM: nvAssertFailedNoLog: Assertion "
        "failed: Back to back GSP RPC timeout detected! GPU marked for reset @ kernel_gsp.c:2387",
        "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/942",
    ),
    (
        "NVRM104",
        "Apr 19 12:34:42 Kyrios kernel: NVRM: API mismatch: the client 'nvidia-powerd' (pid 849)",
        "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/829",
    ),
    (
        "NVDRV102",
        "ERROR: modpost: GPL-incompatible module nvidia.ko uses GPL-only symbol 'rcu_read_unlock_strict'",
        "https://github.com/mesosphere/konvoy-image-builder/pull/1200",
    ),
    (
        "NVDRV103",
        "ERROR: Failed to install the kernel module through DKMS. No kernel module was",
        "https://github.com/clearlinux/distribution/issues/1133",
    ),
    (
        "NVDRV104",
        "Consult /var/lib/dkms/nvidia/545.29.02/build/make.log for more information.",
        "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/635",
    ),
    # fabric manager
    (
        "FABMGR102",
        "Sep 18 03:19:01 ubuntu2404 nvidia-fabricmanager-start.sh[4756]: request to query NVSwitch device "
        "information from NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]",
        "https://github.com/data-infra/cube-studio/issues/29",
    ),
    (
        "FABMGR103",
        'Sep 18 03:19:01 ubuntu2404 nvidia-fabricmanager-start.sh[4753]: "/usr/bin/nv-fabricmanager -c '
        '/usr/share/nvidia/nvswitch/fabricmanager.cfg" failed! Exit code: 1',
        "https://github.com/data-infra/cube-studio/issues/29",
    ),
    # device plugin, container toolkit
    (
        "DEVPLG101",
        "2023-10-19T11:11:54.957723331+08:00 stderr F 2023/10/19 03:11:54 Failed to initialize NVML: could not "
        "load NVML library.",
        "https://github.com/NVIDIA/k8s-device-plugin/issues/444",
    ),
    (
        "NVCTK101",
        "nvidia-container-cli: requirement error: unsatisfied condition: brand = tesla",
        "https://github.com/NVIDIA/nvidia-docker/issues/895",
    ),
    (
        "NVCTK102",
        "docker: Error response from daemon: failed to create shim: OCI runtime create failed: "
        "container_linux.go:380: starting container process caused: process_linux.go:545: container init "
        "caused: Running hook #0:: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: "
        "initialization error: nvml error: driver not loaded: unknown.",
        "https://github.com/NVIDIA/nvidia-docker/issues/1629",
    ),
]


@pytest.mark.parametrize(
    ("code", "line", "where"), REAL_LINES, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(REAL_LINES)]
)
def test_real_line_is_read_as_its_code(code, line, where):
    hits = scan_text(line + "\n", "paste")
    assert code in {h.code for h in hits}, (where, [h.code for h in hits])


def _variants():
    for m in all_messages():
        if m.family not in GPU_FAMILIES:
            continue
        for i in range(len(m.variants)):
            yield pytest.param(m, i, id=f"{m.code}-v{i}")


@pytest.mark.parametrize(("m", "i"), list(_variants()))
def test_every_variant_is_led_by_one_of_the_entrys_literals_and_is_linear(m, i):
    rx = m.regexes[i + 1]
    literals = (m.trigger, *m.triggers)
    lead = next((t for t in literals if rx.search(t) or t in rx.pattern.replace("\\", "")), None)
    assert lead is not None, "a variant names one of the entry's literal triggers"

    def cost(n: int) -> float:
        line = (lead + " ") * (n // (len(lead) + 1))
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            rx.search(line)
            best = min(best, time.perf_counter() - t0)
        return best

    small, big = cost(100_000), cost(1_000_000)
    assert big <= max(30 * small, 2.0), (small, big)  # the floor keeps a loaded machine from failing


def test_each_gpu_entry_names_cause_classes_or_is_a_symptom():
    for m in all_messages():
        if m.family in GPU_FAMILIES:
            assert m.causes or m.role == "symptom", m.code


def _diagnose(tmp_path, text: str):
    f = tmp_path / "paste.txt"
    f.write_text(text)
    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    diagnosis.load_sources(obs, [f])
    findings, _, _ = run_rules(obs)
    return findings


def test_one_cuda_error_in_three_spellings_is_one_finding(tmp_path):
    """The bandwidthTest paste prints 802 as a number, its string and its enum name: one finding."""
    paste = (
        "[CUDA Bandwidth Test] - Starting...\nRunning on...\n\ncudaGetDeviceProperties returned 802\n"
        "-> system not yet initialized\n"
        'CUDA error at bandwidthTest.cu:256 code=802(cudaErrorSystemNotReady) "cudaSetDevice(currentDevice)" \n'
    )
    findings = _diagnose(tmp_path, paste)
    assert [f.rule for f in findings] == ["CUDA101"]
    assert "gpu.fabric-manager" in findings[0].causes and "2 lines" in findings[0].summary


def test_reset_refused_names_each_gpu_and_folds_the_count_line(tmp_path):
    """mig-parted's paste (NVIDIA/mig-parted#181): one finding per GPU held by another client; the line
    that only counts the devices is a symptom of those."""
    paste = (
        "The following GPUs could not be reset:\n"
        "  GPU 00000000:01:00.0: In use by another client\n"
        "  GPU 00000000:47:00.0: In use by another client\n"
        "4 devices are currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
        "application, graphics application such as an X server, or a monitoring application such as another "
        "instance of nvidia-smi). Please first kill all processes using these devices and all compute "
        "applications running in the system.\n"
    )
    findings = _diagnose(tmp_path, paste)
    assert sorted(f.subject for f in findings if f.rule == "NVML106") == [
        "GPU 00000000:01:00.0",
        "GPU 00000000:47:00.0",
    ]
    assert not [f for f in findings if f.rule == "NVML107"]  # folded into a cause
    assert all("gpu.reset-blocked" in f.causes for f in findings)


def test_fabric_manager_service_failure_folds_into_its_reason(tmp_path):
    """gpu-operator#610: systemd's 'Control process exited' is the symptom, NV_WARN_NOTHING_TO_DO the reason."""
    paste = (
        "11月 15 14:15:47 leon-NF5468M6 systemd[1]: Starting NVIDIA fabric manager service...\n"
        + by_code()["FABMGR102"].example
        + "\n"
        + by_code()["FABMGR103"].example
        + "\n"
    )
    findings = _diagnose(tmp_path, paste)
    assert [f.rule for f in findings] == ["FABMGR102"]
    assert any("FABMGR103" in e.description for e in findings[0].evidence)
