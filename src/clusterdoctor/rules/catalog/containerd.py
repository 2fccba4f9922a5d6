"""containerd's messages (and the container runtime errors the kubelet reports from it), as data.

Wording from containerd/containerd: ``runtime/v1/shim/client/client.go`` and ``core/runtime/v2/task_manager.go``
(``failed to start shim``), ``core/runtime/v2/shim_manager.go`` (``shim disconnected``),
``internal/cri/server/container_start.go`` (``failed to create containerd task``); the socket errors are
gRPC's dial errors as the kubelet's CRI client (``pkg/kubelet/cri/remote``) logs them; the back-off
message is the kubelet's (``pkg/kubelet/kuberuntime``). Example lines are from public issue threads,
each named in ``example_source``.
"""

from __future__ import annotations

import re

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_CTRD = "https://github.com/containerd/containerd/blob"
_K8S = "https://github.com/kubernetes/kubernetes/blob"

MESSAGES: tuple[Message, ...] = (
    Message(
        code="CTRD101",
        name="containerd-shim-start-failed",
        title="containerd cannot start a container's runtime shim",
        pattern=r"failed to start shim: (?P<why>[^\n]{1,200})",
        trigger="failed to start shim",
        meaning="containerd could not start the shim process that runs a container, so the container never starts",
        cause=(
            "the shim binary the container's runtime needs is missing or not on containerd's PATH "
            "(containerd-shim for the v1 runtime, containerd-shim-runc-v2 for v2: an upgrade that dropped "
            "the legacy shim, a runtime class naming a shim that is not installed), or it fails at start "
            "(permissions, a broken binary)"
        ),
        fix=(
            "install the shim the runtime needs (which containerd-shim containerd-shim-runc-v2) in "
            "containerd's PATH, or move the containers to the runtime whose shim is there "
            "(io.containerd.runc.v2), then restart containerd and the pods"
        ),
        verify=("which containerd-shim containerd-shim-runc-v2", "crictl ps -a"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_CTRD}/v1.4.0/runtime/v1/shim/client/client.go",
        example=(
            "  Warning  Failed     14s (x3 over 32s)  kubelet, k3s-1     Error: failed to create containerd "
            'task: failed to start shim: exec: "containerd-shim": executable file not found in $PATH: unknown'
        ),
        example_source="https://github.com/k3s-io/k3s/pull/916",
        causes=("containerd.shim",),
        detail="({why})",
        notes=(f"{_CTRD}/main/core/runtime/v2/task_manager.go",),
    ),
    Message(
        code="CTRD102",
        name="cri-socket-unreachable",
        title="the container runtime's socket cannot be reached",
        pattern=(
            r"dial unix (?P<socket>/[\w./\-]{1,200}\.sock): (?:connect: )?"
            r"(?:no such file or directory|connection refused)"
        ),
        trigger="dial unix ",
        meaning="a client of the container runtime (the kubelet, crictl, dockerd) cannot connect to its socket",
        cause=(
            "the runtime daemon (containerd, CRI-O, dockerd) is not running or still starting, or the "
            "client points at another socket path than the one the runtime listens on"
        ),
        fix=(
            "start the runtime (systemctl enable --now containerd) and check its log; make the kubelet's "
            "--container-runtime-endpoint (and crictl's /etc/crictl.yaml) name the socket it serves"
        ),
        verify=("systemctl status containerd", "crictl info"),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source=f"{_K8S}/master/pkg/kubelet/cri/remote/remote_runtime.go",
        example=(
            "Jun 28 02:09:51 hostname microk8s.daemon-kubelet[2890]: E0628 02:09:51.136211    2890 "
            "kuberuntime_sandbox.go:210] ListPodSandbox failed: rpc error: code = Unavailable desc = all "
            "SubConns are in TransientFailure, latest connection error: connection error: desc = "
            '"transport: Error while dialing dial unix /var/snap/microk8s/common/run/containerd.sock: '
            'connect: connection refused"'
        ),
        example_source="https://github.com/canonical/microk8s/issues/525",
        causes=("kubelet.runtime-down",),
        detail="({socket})",
    ),
    Message(
        code="CTRD103",
        name="kubelet-container-back-off",
        title="the kubelet backs off restarting a container that keeps failing (CrashLoopBackOff)",
        pattern=r"Back-off restarting failed container",
        trigger="Back-off restarting failed container",
        meaning="a container exits again and again; the kubelet waits longer before each restart",
        cause=(
            "whatever makes the container exit: its own error (see kubectl logs --previous), a failed "
            "start (the event before this one), an OOM kill, or a missing dependency"
        ),
        fix="read the container's last log (kubectl logs --previous) and the pod's events before this one",
        verify=("kubectl logs <pod> --previous", "kubectl describe pod <pod>"),
        severity=Severity.WARNING,
        action=Action.FIX_PROGRAM,
        source=f"{_K8S}/master/pkg/kubelet/kuberuntime/kuberuntime_manager.go",
        example="  Warning  BackOff    8s (x5 over 31s)   kubelet, k3s-1     Back-off restarting failed container",
        example_source="https://github.com/k3s-io/k3s/pull/916",
        role="symptom",
        confidence=0.5,
    ),
    Message(
        code="CTRD104",
        name="cri-service-not-served",
        title="the container runtime does not serve the CRI API the kubelet speaks",
        pattern=r"unknown service runtime\.(?P<api>v1(?:alpha2)?)\.(?:RuntimeService|ImageService)",
        trigger="unknown service runtime.",
        meaning="the kubelet (or crictl) reached the runtime's socket, but the runtime answers that it has no CRI service",
        cause=(
            'containerd runs with its CRI plugin disabled (disabled_plugins = ["cri"] in '
            "/etc/containerd/config.toml, as the docker packages ship it) or is too old for the kubelet's CRI "
            "version (runtime.v1 needs containerd 1.6+ for Kubernetes 1.26+), or the socket is docker's own "
            "containerd"
        ),
        fix=(
            'enable the CRI plugin (remove "cri" from disabled_plugins, or regenerate the file with '
            "containerd config default), restart containerd, then the kubelet; upgrade containerd if it is "
            "older than the kubelet needs"
        ),
        verify=("crictl info", "grep disabled_plugins /etc/containerd/config.toml"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_K8S}/master/staging/src/k8s.io/cri-client/pkg/remote_runtime.go",
        example=(
            "F0123 09:17:30.895924   18641 server.go:261] failed to run Kubelet: failed to create kubelet: rpc "
            "error: code = Unimplemented desc = unknown service runtime.v1alpha2.RuntimeService"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/73189",
        causes=("containerd.cri-disabled", "kubelet.runtime-down"),  # the CRI plugin off or not loaded
        detail="(runtime.{api})",
    ),
    Message(
        code="CTRD105",
        name="containerd-shim-cannot-connect",
        title="a runtime v2 shim started but cannot connect to containerd (failed to connect: dial unix ...ttrpc)",
        pattern=(
            r"(?P<runtime>io\.containerd\.[\w\-]{1,40}\.v\d): failed to connect: dial unix "
            r"(?P<sock>[^\s:]{1,200})"
        ),
        trigger=": failed to connect: dial unix ",
        meaning=(
            "containerd started the runtime's shim (runc v2, kata v2, gVisor ...) but the shim could not "
            "reach containerd's ttrpc socket, so no task (sandbox or container) is created"
        ),
        cause=(
            "a shim built for another containerd (a shim/runtime release that regressed or expects another "
            "socket path), containerd's ttrpc socket missing (containerd restarted, another root/state "
            "directory), or the shim running in a namespace without that path"
        ),
        fix=(
            "use a shim release that matches the containerd version (roll back a runtime upgrade that "
            "regressed), check containerd's socket paths in config.toml, restart containerd, then the pods"
        ),
        verify=("ls -l /run/containerd/", "containerd --version", "ctr plugins ls | grep runtime"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_CTRD}/main/core/runtime/v2/shim.go",
        example=(
            "remote_runtime.go:105] RunPodSandbox from runtime service failed: rpc error: code = Unknown desc = "
            "failed to start sandbox container: failed to create containerd task: io.containerd.kata.v2: failed "
            "to connect: dial unix /run/containerd/containerd.sock.ttrpc: connect: no such file or directory"
        ),
        example_source="https://github.com/kata-containers/runtime/issues/1781",
        causes=("containerd.shim",),
        subject="{runtime}",
    ),
    Message(
        code="CTRD106",
        name="registry-pull-rate-limit",
        title="the image registry refuses the pull: rate limit reached (429 Too Many Requests)",
        # OCI distribution spec error code TOOMANYREQUESTS ("toomanyrequests: ..."): Docker Hub's "You have
        # reached your pull rate limit", other registries' "Rate exceeded"
        pattern=r"toomanyrequests: (?P<why>You have reached your pull rate limit|Rate exceeded|too many requests)",
        trigger="toomanyrequests: ",
        flags=re.I,
        meaning="the registry answered the image pull with HTTP 429: this client (its IP or account) exceeded its pull quota",
        cause=(
            "anonymous or free-tier pulls from Docker Hub (100-200 pulls per 6 h per IP), shared by every "
            "node behind one NAT address; CI jobs or DaemonSets pulling the same image on many nodes"
        ),
        fix=(
            "authenticate the pulls (imagePullSecrets / registry credentials in containerd's config), mirror "
            "the images into your own registry or a pull-through cache, and use imagePullPolicy: IfNotPresent"
        ),
        verify=("crictl pull <image>", "kubectl describe pod <pod> | grep -A3 Failed"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/opencontainers/distribution-spec/blob/main/spec.md",
        example="429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit.",
        example_source="https://github.com/kata-containers/kata-containers/issues/10109",
        causes=("image.pull-rate-limit",),
    ),
    Message(
        code="CTRD107",
        name="crio-cgroup-manager-mismatch",
        title="CRI-O's cgroup manager differs from the kubelet's cgroup driver (cgroupfs vs systemd)",
        pattern=(
            r"cri-o configured with (?P<crio>systemd|cgroupfs) cgroup manager, but received "
            r"(?P<got>systemd slice|cgroupfs path|[\w ]{1,30}?) as (?:the )?parent"
        ),
        trigger="cri-o configured with ",
        # CRI-O before 1.9 (server/sandbox_run.go): "... systemd cgroup manager, but did not receive slice as parent"
        variants=(
            r"cri-o configured with (?P<crio2>systemd) cgroup manager, but did not receive slice as parent",
        ),
        meaning="every pod sandbox fails: CRI-O manages cgroups one way and the kubelet names cgroup parents the other way",
        cause=(
            "cgroup_manager in /etc/crio/crio.conf (or crio.conf.d) is not the kubelet's cgroupDriver: an "
            "installer rewrote crio.conf (cgroupfs) while the kubelet uses systemd, or the reverse"
        ),
        fix=(
            'set the same driver on both (systemd on systemd hosts): cgroup_manager = "systemd" in CRI-O and '
            "cgroupDriver: systemd in the kubelet config; restart crio and the kubelet"
        ),
        verify=("grep -r cgroup_manager /etc/crio/", "grep cgroupDriver /var/lib/kubelet/config.yaml"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/cri-o/cri-o/blob/main/internal/config/cgmgr/cgmgr.go",
        example=(
            "Warning  FailedCreatePodSandBox  2s (x17 over 3m25s)  kubelet            Failed to create pod "
            "sandbox: rpc error: code = Unknown desc = cri-o configured with cgroupfs cgroup manager, but "
            "received systemd slice as parent: /kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-"
            "pod368236bb_a128_"
        ),
        example_source="https://github.com/nestybox/sysbox/issues/893",
        causes=("kubelet.config",),
    ),
    Message(
        code="CTRD108",
        name="registry-tls-unknown-authority",
        title="the runtime does not trust the image registry's certificate (x509: unknown authority)",
        # a registry API request (/v2/...) that failed its TLS check: containerd's resolver ("failed to do
        # request: Head https://<registry>/v2/...: x509: ..."), docker's and cri-o's the same way
        pattern=(
            r"https?://(?P<registry>[\w.\-]{1,253}(?::\d{1,5})?)/v2/\S{0,600}: x509: certificate signed by "
            r"unknown authority"
        ),
        trigger="x509: certificate signed by unknown authority",
        meaning=(
            "the container runtime's HTTPS request to the registry failed: the registry's certificate is not "
            "signed by a CA the runtime trusts, so no image can be pulled from it"
        ),
        cause=(
            "a private registry whose CA is not configured for the runtime (containerd's "
            "config_path/hosts.toml or registry.configs tls ca_file, docker's certs.d, the host's CA bundle), "
            "or a TLS option this runtime version does not read (containerd before 1.3 ignores "
            "registry.configs), or a proxy that re-signs TLS"
        ),
        fix=(
            "install the registry's CA where the runtime reads it (/etc/containerd/certs.d/<registry>/ca.crt "
            "with config_path set, or the system CA bundle) and restart the runtime; upgrade a runtime that "
            "ignores the setting"
        ),
        verify=(
            "crictl pull <registry>/<image>",
            "openssl s_client -connect <registry>:443 -showcerts </dev/null",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/containerd/containerd/blob/main/docs/hosts.md",
        example=(
            "failed to do request: Head https://registry.xxx.xxxx/v2/core/portal-backend/manifests/1: x509: "
            "certificate signed by unknown authority"
        ),
        example_source="https://github.com/containerd/containerd/issues/3804",
        causes=("image.registry-tls",),
        subject="registry {registry}",
    ),
    Message(
        code="CTRD109",
        name="containerd-config-invalid",
        title="containerd refuses its configuration file, so it does not start (no container runtime)",
        # containerd's config loader (services/server/config): "failed to load TOML from <path>: <why>",
        # e.g. an invalid plugin key URI, a TOML syntax error, an unsupported config version
        pattern=r"failed to load TOML(?: from (?P<path>/[^\s:]{1,400}))?: (?P<why>[^\n]{1,200})",
        trigger="failed to load TOML",
        meaning=(
            "containerd could not load /etc/containerd/config.toml (or the file named) and exits: the "
            "node has no container runtime, the kubelet reports the runtime down and pods do not start"
        ),
        cause=(
            "the file is not valid for this containerd: a TOML syntax error, a plugin key in the old short "
            "form (containerd.runtime.v1.linux) where full URIs (io.containerd.runtime.v1.linux) are "
            "expected, or a config `version` it does not read (a version 3 file on containerd 1.x)"
        ),
        fix=(
            "fix the file (containerd config default > /etc/containerd/config.toml gives a valid one to "
            "compare with; use the plugin URIs and version of the containerd installed), then restart "
            "containerd"
        ),
        verify=("containerd config dump", "systemctl status containerd"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/containerd/containerd/blob/main/docs/man/containerd-config.toml.5.md",
        example=(
            "failed to load TOML from /etc/containerd/config.toml: invalid plugin key URI "
            '"containerd.runtime.v1.linux" expect io.containerd.x.vx'
        ),
        example_source="https://github.com/sapcc/kubernikus/pull/834",
        causes=("containerd.config-invalid",),
        subject="{path}",
    ),
    Message(
        code="CTRD110",
        name="containerd-sandbox-name-reserved",
        title="containerd is still busy with an earlier sandbox of the pod (failed to reserve sandbox name)",
        # internal/cri/server/sandbox_run.go: "failed to reserve sandbox name %q: %w" over the name index's
        # "name %q is reserved for %q"
        pattern=r"failed to reserve (?P<what>sandbox|container) name\b",
        trigger="failed to reserve ",
        meaning=(
            "the kubelet retried RunPodSandbox (or CreateContainer) while containerd still holds the name for an "
            "earlier attempt that has not returned or was not cleaned up: the pod stays ContainerCreating"
        ),
        cause=(
            "the first attempt is stuck inside containerd past the kubelet's 4-minute deadline (context deadline "
            "exceeded just before): a CNI add that hangs, a volume mount or stat that blocks (an NFS/CSI path), "
            "slow disk I/O, or an overloaded node; after a hard reboot, stale sandbox metadata can hold the name"
        ),
        fix=(
            "find what the first attempt waits on (containerd's log for that sandbox id: CNI, mounts; iostat -x); "
            "fix that, then remove the stale sandbox (crictl rmp -f <id>) or restart containerd"
        ),
        verify=("crictl pods --name <pod>", "journalctl -u containerd | grep <sandbox-id>"),
        severity=Severity.WARNING,
        action=Action.RESTART_SERVICE,
        source=f"{_CTRD}/main/internal/cri/server/sandbox_run.go",
        example=(
            'CreateContainer within sandbox \\"a79cd1ac7ca0\\" for &ContainerMetadata{Name:portal-iui,Attempt:3,} '
            'failed, err=failed to reserve container name xxxx ": name xxx" is reserved for '
            '\\"d6fc1b513ce3c4840ff93d38dbeefda622afed3b2fd917ab81e25d9a5fadcf50\\""'
        ),
        example_source="https://github.com/containerd/containerd/issues/13867",
        causes=("containerd.sandbox-stuck",),
    ),
    Message(
        code="CTRD111",
        name="containerd-sandbox-image-pull-failed",
        title="containerd cannot pull its sandbox (pause) image, so no pod starts on the node",
        # internal/cri/server/sandbox_run.go: "failed to get sandbox image %q: %w"
        pattern=r"failed to get sandbox image \\{0,3}\"(?P<image>[^\"\\\s]{1,300})\\{0,3}\"",
        trigger="failed to get sandbox image",
        meaning=(
            "every RunPodSandbox fails before the pod's own images are looked at: containerd does not have the "
            "pause image its config names and cannot pull it"
        ),
        cause=(
            "the node cannot reach the registry of sandbox_image (registry.k8s.io / k8s.gcr.io): an air-gapped "
            "or proxied node, DNS or firewall; or config.toml names a pause image other than the one preloaded "
            "(kubeadm pulls pause:3.9 while containerd's default is another tag), or a private mirror without it"
        ),
        fix=(
            "set sandbox_image in /etc/containerd/config.toml to a pause image the node has or can pull (the "
            "private registry's copy, the tag kubeadm uses), restart containerd; or preload it (ctr -n k8s.io "
            "images import)"
        ),
        verify=(
            "grep sandbox_image /etc/containerd/config.toml",
            "crictl images | grep pause",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_CTRD}/main/internal/cri/server/sandbox_run.go",
        example=(
            "Apr 28 06:10:56 detox01-dm kubelet[1334]: E0428 06:10:56.970976    1334 remote_runtime.go:105] "
            "RunPodSandbox from runtime service failed: rpc error: code = Unknown desc = failed to get sandbox image "
            '"k8s.gcr.io/pause:3.1": failed to pull image "k8s.gcr.io/pause:3.1": failed to pull and unpack image '
            '"k8s.gcr.io/pause:3.1": failed to resolve reference "k8s.gcr.io/pause:3.1": failed to do request: '
            'Head "https://k8s.gcr.io/v2/pause/manifests/3.1": dial tcp: lookup k8s.gcr.io on [::1]:53: dial udp '
            "[::1]:53: connect: cannot assign requested address"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/90326",
        causes=("image.registry-unreachable",),
        subject="image {image}",
    ),
)
