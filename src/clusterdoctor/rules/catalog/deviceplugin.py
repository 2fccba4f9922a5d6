"""GPUs in containers and Kubernetes: the NVIDIA device plugin, the GPU operator's validators and the
NVIDIA container toolkit (nvidia-container-cli, the runtime hook), as data.

What the device plugin logs when it cannot find NVML or any GPU (``internal/plugin/factory.go``,
``cmd/nvidia-device-plugin/main.go``), what ``nvidia-container-cli`` answers through the OCI runtime
when a container asks for GPUs it cannot get (libnvidia-container), and what docker says when no GPU
runtime is installed. The Xid events the device plugin reports ("XidCriticalError: Xid=79 on
Device=...") are read as GPU events by :mod:`clusterdoctor.observe.gpu.k8s_logs`, so the Xid table
judges them; the validators' CUDA errors are CUDA's (:mod:`clusterdoctor.rules.catalog.cuda`).

Sources: NVIDIA/k8s-device-plugin, NVIDIA/libnvidia-container, NVIDIA/nvidia-container-toolkit and its
documentation; example lines from public threads.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.catalog.deviceplugin_mig import MIG_MESSAGES

_DP = "https://github.com/NVIDIA/k8s-device-plugin/blob/main/"
_CTK = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/troubleshooting.html"
_LNC = "https://github.com/NVIDIA/libnvidia-container"

_OWN_MESSAGES: tuple[Message, ...] = (
    Message(
        code="DEVPLG101",
        name="device-plugin-no-nvml",
        title="The NVIDIA device plugin cannot load NVML (no driver libraries in its container)",
        pattern=r"Failed to initialize NVML: (?:could not load NVML library|ERROR_LIBRARY_NOT_FOUND)",
        trigger="Failed to initialize NVML: ",
        # device plugin 1.0-1.11 (main.go): log.Printf("Failed to start nvml with error: %s.", err),
        # then "If this is a GPU node, did you set the docker default runtime to `nvidia`?"
        # 0.15+ and the operator's other components (mig-manager, GFD): "error initializing NVML: %w"
        triggers=("Failed to start nvml with error:", "error initializing NVML: "),
        variants=(
            r"error initializing NVML: (?:ERROR_LIBRARY_NOT_FOUND|could not load NVML library)",
            r"Failed to start nvml with error:\s{1,4}(?:could not load NVML library|ERROR_LIBRARY_NOT_FOUND)",
        ),
        meaning="the device plugin found no libnvidia-ml in its container, so the node advertises no nvidia.com/gpu",
        cause=(
            "the container runtime did not inject the driver: the NVIDIA runtime is not the default runtime "
            "(docker default-runtime, containerd/CRI-O runtime handler, or no runtimeClassName: nvidia), the "
            "container toolkit is not installed, or the node has no driver"
        ),
        fix=(
            "install the NVIDIA container toolkit and configure it (nvidia-ctk runtime configure --runtime="
            "containerd|docker|crio --set-as-default), restart the runtime, or deploy the plugin with "
            "runtimeClassName: nvidia; then restart the plugin pod"
        ),
        verify=(
            "kubectl describe node <node> | grep nvidia.com/gpu",
            "nvidia-ctk --version",
            "nvidia-smi -L",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_DP + "internal/plugin/factory.go",
        example="2022/05/13 23:09:23 Failed to initialize NVML: could not load NVML library.",
        example_source="https://github.com/NVIDIA/k8s-device-plugin/issues/303",
        causes=("gpu.container-runtime", "gpu.device-plugin"),
    ),
    Message(
        code="DEVPLG102",
        name="device-plugin-no-devices",
        title="The NVIDIA device plugin found no GPU and waits (the node advertises no nvidia.com/gpu)",
        pattern=r"No devices found\. Waiting indefinitely",
        trigger="No devices found. Waiting indefinitely",
        meaning="the device plugin started but saw no GPU, so it registers nothing with the kubelet",
        cause=(
            "the plugin's container sees no GPU: the NVIDIA runtime is not used for it (no driver libraries "
            "or device nodes injected), the driver is not loaded on the node, or every GPU is in a mode the "
            "plugin skips (MIG strategy mismatch)"
        ),
        fix=(
            "check nvidia-smi on the node, make the NVIDIA runtime the default (or use runtimeClassName: "
            "nvidia) for the plugin, check the MIG strategy, then restart the plugin pod"
        ),
        verify=("nvidia-smi -L", "kubectl logs -n kube-system <device-plugin pod>"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_DP + "cmd/nvidia-device-plugin/main.go",
        example="2023/06/12 09:21:25 No devices found. Waiting indefinitely.",
        example_source="https://github.com/NVIDIA/k8s-device-plugin/issues/414",
        causes=("gpu.device-plugin", "gpu.container-runtime"),
    ),
    Message(
        code="DEVPLG103",
        name="device-plugin-incompatible-strategy",
        title="The NVIDIA device plugin found neither NVML nor Tegra ('Incompatible strategy detected')",
        pattern=r"Incompatible strategy detected(?: (?P<strategy>\w{1,16}))?",
        trigger="Incompatible strategy detected",
        meaning="the device plugin could not detect any GPU platform in its container and gives up",
        cause=(
            "the driver's libraries are not visible in the plugin container: the NVIDIA container runtime is "
            "not configured as the default for the runtime the kubelet uses (containerd, CRI-O, docker)"
        ),
        fix=(
            "configure the runtime (nvidia-ctk runtime configure --runtime=<containerd|crio|docker> "
            "--set-as-default) and restart it, or give the plugin runtimeClassName: nvidia"
        ),
        verify=("nvidia-ctk runtime configure --help", "kubectl logs -n kube-system <device-plugin pod>"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_DP + "internal/plugin/factory.go",
        example="Incompatible strategy detected auto",
        example_source="https://github.com/NVIDIA/k8s-device-plugin/issues/1134",
        causes=("gpu.container-runtime", "gpu.device-plugin"),
    ),
    Message(
        code="NVCTK101",
        name="container-cuda-requirement-unsatisfied",
        title="The container needs a newer driver than the node has (nvidia-container-cli requirement error)",
        pattern=r"nvidia-container-cli: requirement error: unsatisfied condition: (?P<cond>[^\n\\]{1,80})",
        trigger="nvidia-container-cli: requirement error",
        meaning="the runtime hook refused to start the container: the image's NVIDIA_REQUIRE_CUDA is not met by the host driver",
        cause=(
            "the image was built for a newer CUDA (cuda>=X) than the node's driver supports, or for a GPU "
            "brand/driver branch the node does not have (brand = tesla)"
        ),
        fix="upgrade the node's driver, or use an image built for the CUDA version the driver supports",
        verify=("nvidia-smi -L", "docker inspect <image> | grep NVIDIA_REQUIRE_CUDA"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_LNC + " (src/cli/configure.c: requirement error)",
        example=(
            "OCI runtime create failed: container_linux.go:349: starting container process caused "
            '"process_linux.go:449: container init caused \\"process_linux.go:432: running prestart hook 1 '
            'caused \\\\\\"error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: '
            "requirement error: unsatisfied condition: cuda>=10.2, please update your driver to a newer "
            'version, or use an earlier cuda container\\\\\\\\n\\\\\\"\\"": unknown'
        ),
        example_source="https://github.com/nodefluxio/vortex/issues/106",
        causes=("gpu.driver-mismatch",),
    ),
    Message(
        code="NVCTK102",
        name="container-cli-driver-not-loaded",
        title="nvidia-container-cli: the NVIDIA driver is not loaded on the host",
        pattern=r"nvidia-container-cli(?:\.real)?: initialization error: nvml error: driver not loaded",
        trigger="initialization error: nvml error: driver not loaded",
        meaning="the runtime hook could not start the GPU container: NVML reports no driver on the host",
        cause="the nvidia kernel module is not loaded on the host (not installed, not built for this kernel, refused by Secure Boot)",
        fix="make nvidia-smi work on the host first (install/rebuild/load the driver), then start the container",
        verify=("nvidia-smi -L", "lsmod | grep nvidia", "dkms status"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_LNC + " (src/nvc_info.c)",
        example=(
            "docker: Error response from daemon: OCI runtime create failed: container_linux.go:380: starting "
            "container process caused: process_linux.go:545: container init caused: Running hook #0:: error "
            "running hook: exit status 1, stdout: , stderr: nvidia-container-cli: initialization error: nvml "
            "error: driver not loaded: unknown."
        ),
        example_source="https://github.com/cedricxie/apollo_perception_ros/issues/20",
        causes=("gpu.driver-not-loaded",),
    ),
    Message(
        code="NVCTK103",
        name="container-cli-no-nvml-library",
        title="nvidia-container-cli cannot find the driver's libnvidia-ml on the host",
        # "nvidia-container-cli.real" when the GPU operator's toolkit wraps the binary
        pattern=(
            r"nvidia-container-cli(?:\.real)?: initialization error: load library failed: libnvidia-ml\.so(?:\.1)?"
        ),
        trigger="initialization error: load library failed: libnvidia-ml",
        meaning="the runtime hook found no NVML library on the host to set the container up",
        cause=(
            "the NVIDIA driver's user-space libraries are not installed on the host (driver missing, or a "
            "driver container whose root the toolkit is not pointed at), or ldconfig does not list them"
        ),
        fix=(
            "install the driver on the host (nvidia-smi must work), or with the GPU operator's driver "
            "container set the toolkit's driver root (/run/nvidia/driver); run ldconfig"
        ),
        verify=("ldconfig -p | grep libnvidia-ml", "nvidia-smi -L"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_LNC + " (src/nvc_info.c)",
        example="nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1",
        example_source="https://github.com/NVIDIA/nvidia-container-toolkit/issues/154",
        causes=("gpu.driver-not-loaded", "gpu.container-runtime"),
    ),
    Message(
        code="NVCTK104",
        name="docker-no-gpu-device-driver",
        title="docker has no GPU device driver: the NVIDIA container toolkit is missing or not configured",
        pattern=r"could not select device driver \"[^\"\n]{0,32}\" with capabilities: \[\[gpu\]\]",
        trigger="could not select device driver",
        meaning="docker cannot give the container a GPU (--gpus) because no GPU device driver is registered",
        cause=(
            "the NVIDIA container toolkit is not installed, docker was not restarted after installing it, or "
            "docker runs as a snap / in a way that does not see the toolkit"
        ),
        fix=(
            "install nvidia-container-toolkit, run nvidia-ctk runtime configure --runtime=docker and restart "
            "docker"
        ),
        verify=(
            "nvidia-ctk --version",
            "docker info | grep -i runtime",
            "docker run --rm --gpus all ubuntu nvidia-smi",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_CTK,
        example=(
            'docker: Error response from daemon: could not select device driver "" with capabilities: '
            "[[gpu]]."
        ),
        example_source="https://github.com/NVIDIA/dcgm-exporter/issues/33",
        causes=("gpu.container-runtime",),
    ),
    Message(
        code="NVCTK105",
        name="container-cli-file-exists",
        title="nvidia-container-cli cannot mount a driver file: the image already has a file at that path",
        # libnvidia-container's mount code: "file creation failed: <path>" + strerror (EEXIST)
        pattern=r"file creation failed: (?P<path>/[^:\s]{1,1000}): file exists",
        trigger="file creation failed: ",
        meaning="the runtime hook tried to bind-mount a host driver file into the container and found a file there",
        cause=(
            "the image ships NVIDIA driver files (nvidia-smi, libcuda.so.1, libnvidia-ml.so.1) at the paths "
            "where the container toolkit mounts the host's driver: an image built with a driver installed, or "
            "one committed from a running GPU container"
        ),
        fix="remove the driver files from the image (build it from a CUDA base image without a driver) and rebuild",
        verify=(
            "docker run --rm --entrypoint ls <image> -l /usr/bin/nvidia-smi /usr/lib/x86_64-linux-gnu/libcuda.so.1",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_LNC + " (src/nvc_mount.c: mount_files, 'file creation failed')",
        example=(
            "ount error: file creation failed: /var/lib/docker/overlay2/bd4f3570d4eb99d9df1117bd3751a00c8c0eb63429e65eba2a196c6c543cc52f"
            '/merged/usr/bin/nvidia-smi: file exists\\\\n\\""": unknown'
        ),
        example_source="https://github.com/NVIDIA/nvidia-docker/issues/825",
        causes=("gpu.container-runtime",),
        subject="{path}",
    ),
    Message(
        code="NVCTK106",
        name="gpu-device-node-missing",
        title="A GPU device node (/dev/nvidiaN) does not exist where the program runs",
        # coreutils ls/stat: "cannot access '<file>': No such file or directory"
        pattern=r"cannot (?:access|stat) '?(?P<dev>/dev/nvidia(?:\d{1,3}|ctl|-uvm))'?: No such file or directory",
        trigger="/dev/nvidia",
        meaning="the device file of a GPU is absent in this job's or container's /dev",
        cause=(
            "the container or job was given other GPUs than it was told about: the device nodes the runtime "
            "(enroot/pyxis, nvidia-container-toolkit) created and CUDA_VISIBLE_DEVICES disagree, because the "
            "scheduler does not constrain devices (Slurm cgroup.conf without ConstrainDevices=yes) or the "
            "runtime was not configured for GPUs; on a bare node, the driver has not created the nodes"
        ),
        fix=(
            "let the scheduler bind GPUs through cgroups (Slurm: ConstrainDevices=yes in cgroup.conf and "
            "gres.conf File=/dev/nvidia*), start containers with the NVIDIA runtime; on a node run "
            "nvidia-modprobe or load the driver"
        ),
        verify=(
            "ls -l /dev/nvidia*",
            "echo $CUDA_VISIBLE_DEVICES",
            "grep -i ConstrainDevices /etc/slurm/cgroup.conf",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://slurm.schedmd.com/cgroup.conf.html#OPT_ConstrainDevices; " + _CTK,
        example="/usr/bin/ls: cannot access '/dev/nvidia0': No such file or directory",
        example_source="https://github.com/NVIDIA/pyxis/issues/47",
        causes=("gpu.container-runtime", "gpu.driver-not-loaded"),
        subject="{dev}",
        confidence=0.7,
    ),
    Message(
        code="GPUOP101",
        name="driver-container-driver-in-use",
        title="The GPU operator's driver container cannot unload the host's NVIDIA driver (it is in use)",
        pattern=r"Could not unload NVIDIA driver kernel modules, driver is in use",
        trigger="Could not unload NVIDIA driver kernel modules",
        meaning="the driver container (nvidia-driver-daemonset) stops: an NVIDIA driver is loaded and used on the host",
        cause=(
            "the host already has an NVIDIA driver installed and loaded (from packages or a .run file), or a "
            "process holds it (nvidia-persistenced, Xorg, DCGM, a GPU container); the operator's driver "
            "container must unload it to install its own"
        ),
        fix=(
            "either use the host's driver (install the operator with driver.enabled=false) or remove the host "
            "driver packages and reboot so the driver container installs its own"
        ),
        verify=(
            "lsmod | grep nvidia",
            "cat /proc/driver/nvidia/version",
            "kubectl logs -n gpu-operator -l app=nvidia-driver-daemonset",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://gitlab.com/nvidia/container-images/driver (nvidia-driver: _unload_driver); https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/troubleshooting.html",
        example="Could not unload NVIDIA driver kernel modules, driver is in use",
        example_source="https://github.com/NVIDIA/gpu-operator/issues/126",
        causes=("gpu.operator-driver",),
    ),
    Message(
        code="GPUOP102",
        name="driver-container-build-packages-missing",
        title="The driver container cannot install the packages it builds the driver with (kernel headers, libelf)",
        # dnf/yum's "No match for argument" family as dnf 4 prints it; the package names are those the
        # driver container's _install_prerequisites asks for (kernel-headers/-devel/-core of the running
        # kernel, elfutils-libelf-devel)
        pattern=(
            r"Unable to find a match: (?P<pkg>(?:kernel-(?:headers|devel|core)|kernel-rt-devel|elfutils-libelf-devel)"
            r"[\w.+\-]{0,120})"
        ),
        trigger="Unable to find a match: ",
        meaning=(
            "dnf found no package of that name in the repositories the container can reach, so the driver "
            "container cannot compile the NVIDIA kernel module for the node's kernel and stops"
        ),
        cause=(
            "the node's kernel is newer or older than the kernel packages in the reachable repositories, or "
            "the cluster is not entitled to them (an expired or too old RHEL entitlement/subscription, no "
            "EUS repositories), or a proxy/mirror blocks them"
        ),
        fix=(
            "give the driver container access to the kernel packages of the node's exact kernel: renew or "
            "regenerate the cluster's entitlement (or use driver toolkit images / precompiled drivers), or "
            "point it at a repository that carries them"
        ),
        verify=(
            "uname -r",
            "kubectl logs -n gpu-operator -l app=nvidia-driver-daemonset -c nvidia-driver-ctr",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/troubleshooting.html",
        example=(
            "Error: Unable to find a match: kernel-headers-4.18.0-240.23.2.el8_3.x86_64 "
            "kernel-devel-4.18.0-240.23.2.el8_3.x86_64"
        ),
        example_source="https://github.com/NVIDIA/gpu-operator/issues/234",
        causes=("gpu.operator-driver",),
        subject="{pkg}",
    ),
    Message(
        code="NVCTK107",
        name="docker-nvidia-runtime-unknown",
        title="docker has no runtime named nvidia (the container toolkit is not registered with docker)",
        # moby: "unknown or invalid runtime name: %s"; before 20.10 "Unknown runtime specified %s"
        pattern=r"unknown or invalid runtime name: (?P<runtime>nvidia[\w\-]{0,20})",
        variants=(r"Unknown runtime specified (?P<runtime>nvidia[\w\-]{0,20})",),
        trigger="invalid runtime name: nvidia",
        triggers=("Unknown runtime specified nvidia",),
        meaning="docker was asked for --runtime=nvidia (or a compose runtime: nvidia) and has no runtime by that name",
        cause=(
            "the NVIDIA container toolkit is not installed, or installed but not registered in "
            "/etc/docker/daemon.json (nvidia-ctk runtime configure not run), or docker was not restarted "
            "after it; a rootless docker or Docker Desktop reads another daemon.json"
        ),
        fix=(
            "install nvidia-container-toolkit, run sudo nvidia-ctk runtime configure --runtime=docker and "
            "restart docker (for rootless docker, configure $HOME/.config/docker/daemon.json); or use --gpus "
            "all, which needs no runtime entry"
        ),
        verify=("docker info | grep -i runtimes", "cat /etc/docker/daemon.json"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_CTK,
        example="docker: Error response from daemon: unknown or invalid runtime name: nvidia.",
        example_source="https://github.com/NVIDIA/nvidia-container-toolkit/issues/150",
        causes=("gpu.container-runtime",),
    ),
    Message(
        code="NVCTK108",
        name="containerd-nvidia-runtime-not-configured",
        title="containerd has no nvidia runtime handler for the pod's RuntimeClass",
        # containerd CRI: "failed to get sandbox runtime: no runtime for %q is configured"
        pattern=r"no runtime for \\{0,3}[\"“](?P<runtime>nvidia[\w\-]{0,30})\\{0,3}[\"”] is configured",
        trigger="no runtime for ",
        meaning=(
            "a pod with runtimeClassName nvidia cannot start: the containerd the kubelet talks to has no runtime "
            "handler of that name in its config, so every GPU pod (the operator's own daemonsets too) fails "
            "FailedCreatePodSandBox"
        ),
        cause=(
            "the GPU operator's toolkit container did not configure the containerd that runs: it writes "
            "another config file or socket than the node's (RKE2, k3s, MicroK8s keep theirs elsewhere: the "
            "CONTAINERD_CONFIG / CONTAINERD_SOCKET settings), it has not run yet or failed, containerd was not "
            "restarted after, or a config rewrite (node upgrade, another tool) dropped the nvidia runtime"
        ),
        fix=(
            "check the nvidia-container-toolkit daemonset's log on the node; point its CONTAINERD_CONFIG and "
            "CONTAINERD_SOCKET at the node's containerd (for k3s/RKE2 the config.toml.tmpl and their socket), "
            "or add the nvidia runtime yourself (nvidia-ctk runtime configure --runtime=containerd) and "
            "restart containerd"
        ),
        verify=(
            "grep -A3 'runtimes.nvidia' /etc/containerd/config.toml",
            "kubectl -n gpu-operator logs -l app=nvidia-container-toolkit-daemonset",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html",
        example=(
            "  Warning  FailedCreatePodSandBox  12s (x10 over 2m11s)  kubelet            Failed to create pod "
            'sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "nvidia" is '
            "configured"
        ),
        example_source="https://github.com/NVIDIA/gpu-operator/issues/730",
        causes=("gpu.container-runtime", "gpu.device-plugin"),
    ),
    Message(
        code="NVCTK109",
        name="container-cli-unknown-device",
        title="nvidia-container-cli is asked for a GPU the node does not have (unknown device)",
        # libnvidia-container: "device error: %s: unknown device"
        pattern=r"device error: (?P<device>[^\s:\\]{1,200}): unknown device",
        trigger="device error: ",
        meaning=(
            "the runtime hook could not find the GPU the container asks for (by index, UUID or MIG UUID), so "
            "the container is not created"
        ),
        cause=(
            "the request names a device that is not there: --gpus N or an index larger than the node's GPU "
            "count, NVIDIA_VISIBLE_DEVICES carrying indices of a scheduler's allocation (enroot/Slurm: "
            "4 on a node whose container view has 0..3), a GPU UUID of another node, or a MIG device in the old "
            "MIG-GPU-<uuid>/gi/ci form that newer drivers no longer accept"
        ),
        fix=(
            "ask for devices that exist (nvidia-smi -L lists indices and UUIDs; --gpus '\"device=0\"'); under "
            "Slurm/enroot leave NVIDIA_VISIBLE_DEVICES=all and let the gres binding choose; use the MIG-<uuid> "
            "names of nvidia-smi -L"
        ),
        verify=("nvidia-smi -L", "echo $NVIDIA_VISIBLE_DEVICES"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_LNC,
        example=(
            "nvidia-container-cli.real: device error: MIG-GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39/1/0: unknown device"
        ),
        example_source="https://github.com/NVIDIA/nvidia-container-toolkit/issues/203",
        causes=("gpu.container-runtime",),
        subject="device {device}",
    ),
    Message(
        code="NVCTK110",
        name="container-cli-cuda-requirement",
        title="The container needs a newer CUDA than the host driver supports (nvidia-container-cli requirement)",
        # libnvidia-container checks the image's NVIDIA_REQUIRE_CUDA against the driver's CUDA version
        pattern=(
            r"nvidia-container-cli(?:\.real)?: requirement error: unsatisfied condition: "
            r"(?P<cond>cuda ?>= ?[\d.]{1,10})"
        ),
        trigger="requirement error: unsatisfied condition",
        meaning=(
            "the image declares that it needs CUDA of at least this version (NVIDIA_REQUIRE_CUDA) and the "
            "host's driver supports an older one, so the runtime hook refuses to start the container"
        ),
        cause=(
            "the image was built on a newer CUDA base than the node's driver (e.g. a CUDA 12.9 image on a "
            "570 driver, CUDA 12.8)"
        ),
        fix=(
            "upgrade the node's driver to one that supports that CUDA, or use an image built for the "
            "driver's CUDA; forward compatibility (cuda-compat) works only on data-center GPUs"
        ),
        verify=("nvidia-smi | head -4", "docker inspect <image> | grep NVIDIA_REQUIRE_CUDA"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_LNC + " (src/nvc_container.c: requirement check)",
        example=(
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9, please update your "
            "driver to a newer version, or use an earlier cuda container: unknown"
        ),
        example_source="https://github.com/TabbyML/tabby/issues/4309",
        causes=("nccl.cuda-driver-runtime", "gpu.driver-mismatch"),
        detail="({cond})",
    ),
)

MESSAGES: tuple[Message, ...] = tuple(sorted((*_OWN_MESSAGES, *MIG_MESSAGES), key=lambda m: m.code))
