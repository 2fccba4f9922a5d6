"""The kubelet's own messages (klog and structured log lines, pod status messages, node conditions), as data.

Wording from kubernetes/kubernetes: ``pkg/kubelet/pleg/generic.go`` (PLEG health), ``pkg/kubelet/runtime.go``
(``container runtime is down``, the runtime's network readiness), ``pkg/kubelet/eviction/helpers.go`` and
``eviction_manager.go`` (``The node was low on resource``, ``attempting to reclaim``),
``pkg/kubelet/dockershim/docker_service.go`` (the cgroup driver check, up to 1.23),
``pkg/kubelet/cm/container_manager_linux.go`` (swap), ``pkg/kubelet/certificate/bootstrap/bootstrap.go``
and ``cmd/kubelet/app/server.go`` (client certificate and bootstrap kubeconfig), and Go's
``crypto/x509`` for certificate validity as kubectl and the kubelet print it. Example lines are from
public issue threads, each named in ``example_source``.

Several of these appear briefly while a kubelet starts (its first runtime status check, its first PLEG
relist: ``pleg has yet to be successful``); the entries match only the forms that mean something stayed
broken.

The certificate and TLS entries (KUBELET107-111, 114, 115, 124) are
:mod:`clusterdoctor.rules.catalog.kubelet_tls`, the CNI plugins' sandbox network errors (KUBELET129-132)
:mod:`clusterdoctor.rules.catalog.kubelet_cni`; ``MESSAGES`` here is the whole family in code order.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.catalog.kubelet_cni import CNI_MESSAGES
from clusterdoctor.rules.catalog.kubelet_oom import OOM_MESSAGES
from clusterdoctor.rules.catalog.kubelet_tls import _K8S, TLS_MESSAGES

_DUR = r"[0-9hmsµun.]{1,40}"


_NODE_MESSAGES: tuple[Message, ...] = (
    Message(
        code="KUBELET101",
        name="kubelet-pleg-not-healthy",
        title="kubelet's pod lifecycle event generator (PLEG) is stuck: the container runtime answers too slowly",
        pattern=(
            r"PLEG is not healthy: pleg was last seen active (?P<ago>" + _DUR + r") ago; "
            r"threshold is (?P<threshold>" + _DUR + r")"
        ),
        trigger="PLEG is not healthy",
        meaning=(
            "the kubelet's PLEG has not completed a relist of the containers for longer than its threshold "
            "(3 min): the kubelet stops syncing pods and the node goes NotReady"
        ),
        cause=(
            "the container runtime (dockerd, containerd, CRI-O) does not answer its list calls in time: it "
            "is hung or overloaded (docker ps hangs), too many containers on the node, a runc or storage "
            "driver bug, or the node's disk or CPU is saturated"
        ),
        fix=(
            "check the runtime on that node (crictl ps / docker ps answering? journalctl -u containerd or "
            "docker); restart the runtime, then the kubelet; if it recurs, upgrade runc/containerd, reduce "
            "the containers per node, and look for I/O saturation (iostat -x)"
        ),
        verify=("crictl ps", "journalctl -u kubelet --since -10min"),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source=f"{_K8S}/master/pkg/kubelet/pleg/generic.go",
        example=(
            "Nov 08 16:25:22 paas-node010014.99bill.com origin-node[29837]: I1108 16:25:22.761754   29837 "
            "kubelet.go:1758] skipping pod synchronization - [PLEG is not healthy: pleg was last seen active "
            "2562047h47m16.854775807s ago; threshold is 3m0s]"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/84978",
        causes=("kubelet.pleg",),
        detail="(last active {ago} ago, threshold {threshold})",
    ),
    Message(
        code="KUBELET102",
        name="kubelet-container-runtime-down",
        title="the kubelet finds the container runtime down",
        pattern=r"ontainer runtime (?:is down|not ready: RuntimeReady=false)",
        trigger="ontainer runtime ",
        meaning="the kubelet's runtime status check failed: it skips pod synchronisation, the node goes NotReady",
        cause=(
            "the container runtime daemon (containerd, CRI-O, dockerd) is stopped, crashed or hung, or its "
            "socket is not where the kubelet looks (--container-runtime-endpoint)"
        ),
        fix=(
            "start or restart the runtime (systemctl restart containerd) and check its log (journalctl -u "
            "containerd); make the kubelet's --container-runtime-endpoint point at its socket"
        ),
        verify=("systemctl status containerd", "crictl info"),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source=f"{_K8S}/release-1.26/pkg/kubelet/runtime.go",
        example=(
            "Apr 09 21:14:19 k8s-node1 kubelet[26014]: I0409 21:14:19.210702   26014 kubelet.go:1794] "
            "skipping pod synchronization - [container runtime is down]"
        ),
        example_source="https://github.com/kubernetes/website/issues/8030",
        causes=("kubelet.runtime-down",),
        confidence=0.95,  # when PLEG is unhealthy too, the runtime being down is the deeper cause
    ),
    Message(
        code="KUBELET103",
        name="kubelet-cni-not-ready",
        title="the node's network plugin (CNI) is not ready",
        pattern=(
            # dockershim: "network plugin is not ready: cni config uninitialized"; containerd (go-cni):
            # "cni plugin not initialized" (with "no network config found in /etc/cni/net.d" beside it)
            r"cni (?:config uninitiali[sz]ed|plugin not initiali[sz]ed)"
        ),
        trigger="cni ",
        meaning="the container runtime reports its pod network not ready: no pod can get a network, the node stays NotReady",
        cause=(
            "no CNI plugin is installed or configured yet: the network add-on (Flannel, Calico, Cilium ...) "
            "was not applied or its pod crashes, /etc/cni/net.d holds no valid config (or one without "
            "cniVersion), or the plugin binaries are missing from /opt/cni/bin"
        ),
        fix=(
            "install the cluster's network add-on and check that its DaemonSet pod runs on this node "
            "(kubectl -n kube-system get pods -o wide); check /etc/cni/net.d and /opt/cni/bin on the node"
        ),
        verify=("ls /etc/cni/net.d /opt/cni/bin", "kubectl get nodes"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_K8S}/release-1.23/pkg/kubelet/dockershim/network/cni/cni.go",
        example=(
            "Jun 01 10:13:40 vncub0626 kubelet[18861]: E0601 10:13:40.665874   18861 kubelet.go:2105] "
            "Container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
            "message:docker: network plugin is not ready: cni config uninitialized"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/48798",
        causes=("kubelet.cni",),
        notes=("containerd: vendor/github.com/containerd/go-cni/errors.go ErrCNINotInitialized",),
    ),
    Message(
        code="KUBELET104",
        name="kubelet-cgroup-driver-mismatch",
        title="the kubelet's cgroup driver differs from the container runtime's",
        pattern=(
            r"kubelet cgroup driver: \\{0,2}\"(?P<kubelet>\w{1,20})\\{0,2}\" is different from "
            r"(?P<runtime>docker|containerd|CRI|runtime) cgroup driver: \\{0,2}\"(?P<other>\w{1,20})\\{0,2}\""
        ),
        trigger="cgroup driver",
        meaning="the kubelet refuses to start: it and the container runtime manage cgroups with different drivers",
        cause=(
            "the kubelet runs with --cgroup-driver (cgroupDriver in its config) set to one of cgroupfs or "
            "systemd while the runtime (docker's native.cgroupdriver, containerd's SystemdCgroup) uses the "
            "other"
        ),
        fix=(
            "use one driver on both sides (systemd on systemd hosts): set cgroupDriver in "
            "/var/lib/kubelet/config.yaml and the runtime's setting (docker exec-opts native.cgroupdriver=systemd, "
            "or SystemdCgroup = true in containerd's config), then restart both"
        ),
        verify=("docker info --format '{{.CgroupDriver}}'", "grep cgroupDriver /var/lib/kubelet/config.yaml"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_K8S}/release-1.23/pkg/kubelet/dockershim/docker_service.go",
        example=(
            "Apr 05 05:33:40 master kubelet[4759]: F0405 05:33:40.511159    4759 server.go:274] failed to run "
            'Kubelet: misconfiguration: kubelet cgroup driver: "cgroupfs" is different from docker cgroup '
            'driver: "systemd"'
        ),
        example_source="https://github.com/kubernetes/kubelet/issues/9",
        causes=("kubelet.config",),
        detail="(kubelet: {kubelet}, {runtime}: {other})",
    ),
    Message(
        code="KUBELET126",
        name="kubelet-cgroup-driver-quoted",
        title="the kubelet's --cgroup-driver value holds literal quotes ('systemd'), so it matches no driver",
        # the check of KUBELET104, where the kubelet's value is wrapped in single quotes: "'cgroupfs'";
        # KUBELET104's pattern takes only a bare word, so one line is one of the two entries
        pattern=(
            r"kubelet cgroup driver: \\{0,2}\"'(?P<kubelet>\w{1,20})'\\{0,2}\" is different from "
            r"(?P<runtime>docker|containerd|CRI|runtime) cgroup driver: \\{0,2}\"(?P<other>\w{1,20})\\{0,2}\""
        ),
        trigger="cgroup driver: ",
        meaning=(
            "the kubelet refuses to start: its cgroup driver is a name wrapped in single quotes (the quotes "
            "are part of the value), which never equals the runtime's driver"
        ),
        cause=(
            "whatever starts the kubelet passes the flag with single quotes where no shell strips them: a "
            "systemd unit or drop-in (Environment=, 10-kubeadm.conf, an EnvironmentFile such as "
            "kubeadm-flags.env) written as --cgroup-driver='systemd'; systemd keeps the quotes in the value"
        ),
        fix=(
            "remove the single quotes around the value in the kubelet's unit, drop-in or flags file "
            "(--cgroup-driver=systemd), or set cgroupDriver in the kubelet config file; then systemctl "
            "daemon-reload and restart the kubelet"
        ),
        verify=(
            "systemctl cat kubelet | grep -n cgroup-driver",
            'grep -rn "cgroup-driver=\'" /etc/systemd/system/kubelet.service.d /var/lib/kubelet',
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_K8S}/release-1.23/pkg/kubelet/dockershim/docker_service.go",
        example=(
            'failed to run Kubelet: failed to create kubelet: misconfiguration:"kubelet cgroup driver: '
            '"\'cgroupfs\'" is different from docker cgroup driver: "cgroupfs"'
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/87918",
        causes=("kubelet.config",),
        detail="(kubelet: '{kubelet}' with its quotes, {runtime}: {other})",
        notes=(
            "kubernetes#87918: liggitt: 'whatever is invoking the kubelet is passing in single-quotes in a "
            "non-shell environment'; the reporter: minikube's 10-kubeadm.conf, removing the quotes solved it",
        ),
    ),
    Message(
        code="KUBELET105",
        name="kubelet-swap-on",
        title="the kubelet refuses to run with swap on",
        pattern=r"unning with swap on is not supported",
        trigger="with swap on is not supported",
        meaning="the kubelet exited: swap is active on the node and --fail-swap-on (the default) forbids it",
        cause=(
            "a swap partition or swap file is active (/proc/swaps lists it): vm.swappiness=0 does not turn "
            "swap off, and an installer that reads the swap size from facts may miss a partition"
        ),
        fix=(
            "turn swap off (swapoff -a) and keep it off across reboots (remove it from /etc/fstab, mask "
            "swap.target or the .swap unit); or, on 1.28+, allow it deliberately (failSwapOn: false with the "
            "NodeSwap feature)"
        ),
        verify=("swapon --show", "cat /proc/swaps"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_K8S}/release-1.26/pkg/kubelet/cm/container_manager_linux.go",
        example=(
            "Feb 12 18:20:35 node9 kubelet[13941]: F0212 18:20:35.565065   13941 server.go:261] failed to run "
            "Kubelet: Running with swap on is not supported, please disable swap! or set --fail-swap-on flag "
            "to false. /proc/swaps contained: [Filename#011#011#011#011Type#011#011Size#011Used#011Priority "
            "/dev/vdb                                partition#0114194300#0110#011-1]"
        ),
        example_source="https://github.com/kubernetes-sigs/kubespray/pull/4216",
        causes=("kubelet.config",),
    ),
    Message(
        code="KUBELET106",
        name="kubelet-failed-to-run",
        title="the kubelet exited at start (failed to run Kubelet)",
        pattern=r"failed to run Kubelet: (?P<reason>[^\n]{1,200})",
        trigger="failed to run Kubelet",
        meaning="the kubelet exited during start-up; its reason follows on the same line",
        cause="the reason after 'failed to run Kubelet:' (a configuration, certificate or runtime problem)",
        fix="fix what the reason names; the lines just before it in journalctl -u kubelet usually say more",
        verify=("journalctl -u kubelet -b --no-pager | tail -50",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_K8S}/master/cmd/kubelet/app/server.go",
        example=(
            "Jan 18 17:33:58 aura kubelet[1457370]: F0118 17:33:58.888743 1457370 server.go:271] failed to run "
            "Kubelet: unable to load bootstrap kubeconfig: stat /etc/kubernetes/bootstrap-kubelet.conf: no "
            "such file or directory"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/98150",
        role="symptom",
        confidence=0.6,
    ),
    Message(
        code="KUBELET112",
        name="kubelet-eviction-low-resource",
        title="the kubelet evicted a pod: the node was low on a resource",
        pattern=(
            r"The node (?:was low on resource: (?P<resource>[\w\-/]{1,40}(?:\.[\w\-/]{1,40}){0,3})"
            r"|had condition: \[?(?P<condition>\w{1,30}))"
        ),
        trigger="The node ",
        meaning="the kubelet's eviction manager evicted the pod because the node crossed an eviction threshold",
        cause=(
            "the node ran short of the resource named (memory, ephemeral-storage: the node or image "
            "filesystem, inodes, PIDs): pods using more than they request, full logs or images, an "
            "emptyDir growing, or eviction thresholds set close to capacity"
        ),
        fix=(
            "free or add the resource on the node (df -h /var/lib/kubelet /var/lib/containerd; prune "
            "images: crictl rmi --prune), set requests and limits (ephemeral-storage too) so pods are "
            "placed by what they use, and move heavy writers to volumes"
        ),
        verify=("kubectl describe node <node> | grep -A8 Conditions", "df -h /var/lib/kubelet"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_K8S}/master/pkg/kubelet/eviction/helpers.go",
        example=(
            "Message:      The node was low on resource: ephemeral-storage. Threshold quantity: 2146223340, "
            "available: 1883424Ki. Container helmer was using 10304Ki, request is 10Mi, has larger "
            "consumption of ephemeral-storage."
        ),
        example_source="https://github.com/cloud-ark/kubeplus/issues/1382",
        causes=("kubelet.eviction",),
        detail="({resource})",
    ),
    Message(
        code="KUBELET113",
        name="kubelet-eviction-reclaim",
        title="the kubelet's eviction manager is reclaiming a resource (node under pressure)",
        # klog: "eviction manager: attempting to reclaim nodefs"; structured: "Eviction manager: attempting
        # to reclaim" resourceName="ephemeral-storage"; "must evict pod(s) to reclaim"
        pattern=(
            r"viction manager: (?:attempting to reclaim|must evict pod\(s\) to reclaim)"
            r"(?:\\?\"? resourceName=\\?\"| )(?P<resource>[\w.\-]{1,40})"
        ),
        trigger="viction manager: ",
        meaning="the node crossed an eviction threshold: the kubelet deletes unused images and containers, then evicts pods",
        cause=(
            "the node's disk (nodefs, imagefs) or memory is nearly full: images and container logs piling "
            "up, pods writing to their writable layer or emptyDir, or workloads using more memory than "
            "requested"
        ),
        fix=(
            "free space on the node (crictl rmi --prune, rotate logs, move data to volumes) or give it more; "
            "set ephemeral-storage and memory requests so the scheduler accounts for them"
        ),
        verify=(
            "df -h /var/lib/kubelet /var/lib/containerd",
            "kubectl describe node <node> | grep -i pressure",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_K8S}/master/pkg/kubelet/eviction/eviction_manager.go",
        example=(
            "Jan 10 09:41:08 speed3 dockerd-current[21270]: W0110 14:41:08.646423   23589 "
            "eviction_manager.go:332] eviction manager: attempting to reclaim imagefs"
        ),
        example_source="https://github.com/fusor/catasb/pull/201",
        causes=("kubelet.eviction",),
        detail="({resource})",
    ),
    Message(
        code="KUBELET116",
        name="kubelet-admit-refused-node-condition",
        title="the kubelet refuses new pods: the node has a pressure condition (DiskPressure, MemoryPressure)",
        # eviction_manager.go Admit: klog "Failed to admit pod %s - node has conditions: %v" (1.10-1.19);
        # structured since 1.20: "Failed to admit pod to node" pod=... nodeCondition=[DiskPressure]
        pattern=r"Failed to admit pod (?P<pod>\S{1,256}) - node has conditions: \[(?P<condition>[\w ,]{1,80})\]",
        trigger="Failed to admit pod",
        variants=(
            r"Failed to admit pod to node\\?\"[^\n]{0,400}?nodeCondition=\[\\?\"?(?P<condition2>\w{1,30})",
        ),
        meaning=(
            "the node is under resource pressure, so the kubelet's eviction manager rejects every pod that "
            "is not critical (and evicts running ones): pods on it fail with reason Evicted"
        ),
        cause=(
            "the node's disk (nodefs/imagefs: images, container logs, emptyDir or hostPath data) or memory "
            "crossed an eviction threshold; a hostPath file survives the eviction, so the pressure stays"
        ),
        fix=(
            "free the resource on the node (crictl rmi --prune, clean logs and hostPath data; docker system "
            "prune on minikube) or give the node more disk/memory; set ephemeral-storage requests and limits"
        ),
        verify=(
            "kubectl describe node <node> | grep -i pressure",
            "df -h /var/lib/kubelet /var/lib/containerd",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_K8S}/master/pkg/kubelet/eviction/eviction_manager.go",
        example=(
            "Mar 17 12:44:49 minikube kubelet[2278]: W0317 12:44:49.953485    2278 eviction_manager.go:159] "
            "Failed to admit pod kindnet-z7vcs_kube-system(d228d315-f1c8-46ea-86ba-a8750c9686cb) - node has "
            "conditions: [DiskPressure]"
        ),
        example_source="https://github.com/kubernetes/minikube/issues/7073",
        causes=("kubelet.eviction",),
        detail="({condition})",
    ),
    Message(
        code="KUBELET117",
        name="kernel-memcg-oom-kill",
        title="the kernel killed a process at its memory cgroup's limit (container OOM)",
        # mm/memcontrol.c / oom_kill.c: "Memory cgroup out of memory: Killed process N (comm)" (older
        # "Kill process"), "oom-kill:constraint=CONSTRAINT_MEMCG"; the memcg OOM path in a call trace
        pattern=r"Memory cgroup out of memory: Kill(?:ed)? process (?P<pid>\d{1,10}) \((?P<proc>[^)\n]{1,64})\)",
        trigger="Memory cgroup out of memory",
        triggers=("CONSTRAINT_MEMCG", "mem_cgroup_oom"),
        variants=(r"oom-kill:constraint=CONSTRAINT_MEMCG", r"\bmem_cgroup_oom(?:_synchronize)?\+0x"),
        meaning="a container (its cgroup) reached its memory limit and the kernel's OOM killer ended a process in it",
        cause=(
            "the container needs more memory than its limit (resources.limits.memory): the workload grew, the "
            "limit was set from an idle measurement, or a leak; Kubernetes shows it as OOMKilled, exit code 137"
        ),
        fix=(
            "raise the container's memory limit to what it uses at peak (kubectl top pod, the cgroup's "
            "memory.max_usage_in_bytes / memory.peak), or make it use less"
        ),
        verify=("kubectl describe pod <pod> | grep -A3 'Last State'", "dmesg -T | grep -i 'out of memory'"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/torvalds/linux/blob/master/mm/oom_kill.c",
        example=(
            "[337533.314412] Memory cgroup out of memory: Killed process 23793 (leaker) total-vm:2623712kB, "
            "anon-rss:506500kB, file-rss:1268kB, shmem-rss:0kB"
        ),
        notes=("example: a kernel log quoted in a public write-up of a memcg OOM reproduction",),
        causes=("k8s.oom-killed",),
        subject="{proc}",
    ),
    Message(
        code="KUBELET118",
        name="kernel-oom-killer-invoked",
        title="the kernel's OOM killer ran (a process asked for memory none was left for)",
        pattern=r"(?P<proc>[\w\-.:/]{1,64}) invoked oom-killer: gfp_mask=",
        trigger="invoked oom-killer",
        meaning="memory ran out for the allocating process: the kernel picks a process to kill (the next lines say which)",
        cause="the node (or the cgroup, when the trace shows mem_cgroup_oom) is out of memory",
        fix="see which process was killed and whose limit was hit; give the workload or the node more memory",
        verify=("dmesg -T | grep -iE 'killed process|out of memory'",),
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source="https://github.com/torvalds/linux/blob/master/mm/oom_kill.c",
        example=(
            "Oct 21 21:08:58 kubernetes-minion-2 kernel: [75254.207495] supervisord invoked oom-killer: "
            "gfp_mask=0xd0, order=0, oom_score_adj=0"
        ),
        example_source="https://github.com/kubernetes/kubernetes/pull/1962",
        causes=("k8s.oom-killed", "torch.host-oom"),
        subject="{proc}",
        role="symptom",
        confidence=0.6,
    ),
    Message(
        code="KUBELET119",
        name="flannel-pod-cidr-not-assigned",
        title="flannel cannot start: the node has no pod CIDR (controller-manager does not allocate them)",
        pattern=r"failed to acquire lease: node \\?\"?(?P<node>[\w.\-]{1,253})\\?\"? pod cidr not assigned",
        trigger="pod cidr not assigned",
        meaning="flannel's kube subnet manager found no spec.podCIDR on its node, so it exits (CrashLoopBackOff) and pods get no network",
        cause=(
            "kube-controller-manager runs without --allocate-node-cidrs=true and --cluster-cidr (kubeadm init "
            "without --pod-network-cidr, or a manifest rewritten by an upgrade), or the cluster CIDR is exhausted"
        ),
        fix=(
            "give kube-controller-manager --allocate-node-cidrs=true --cluster-cidr=<flannel Network, e.g. "
            "10.244.0.0/16> (kubeadm: --pod-network-cidr) or set spec.podCIDR on the node; restart flannel"
        ),
        verify=(
            "kubectl get nodes -o jsonpath='{.items[*].spec.podCIDR}'",
            "kubectl -n kube-flannel logs <pod>",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/flannel-io/flannel/blob/master/pkg/subnet/kube/kube.go",
        example=(
            "E0613 09:03:38.016872       1 main.go:280] Error registering network: failed to acquire lease: node "
            '"hostname" pod cidr not assigned**'
        ),
        example_source="https://github.com/kubernetes/community/issues/5339",
        causes=("kubelet.cni",),
        subject="node {node}",
    ),
    Message(
        code="KUBELET120",
        name="image-not-found",
        title="the image cannot be pulled: its name or tag does not exist, or the repository needs credentials",
        # dockerd: "pull access denied for %s, repository does not exist or may require 'docker login'";
        # containerd (remotes/docker resolver): "failed to resolve reference \"%s\": %s: not found";
        # registries: "manifest unknown"
        pattern=r"pull access denied for (?P<image>[\w./:@\-]{1,256}), repository does not exist",
        trigger="pull access denied for ",
        triggers=(
            "failed to resolve reference",
            "manifest unknown",
            "pull access denied, repository",
            "manifest for ",
        ),
        variants=(
            r"failed to resolve reference \\?\"(?P<image2>[\w./:@\-]{1,256})\\?\": [^\n]{0,300}?: not found",
            r"failed to resolve reference \\?\"(?P<image4>[\w./:@\-]{1,256})\\?\": pull access denied, repository does not exist",
            # older dockerd: "manifest for <image> not found" alone
            r"manifest for (?P<image3>[\w./:@\-]{1,256}) not found(?:: manifest unknown)?",
        ),
        meaning="the registry says the image reference does not exist for this client: the pod stays in ErrImagePull/ImagePullBackOff",
        cause=(
            "a typo in the image name or tag, a tag that was never pushed (or was deleted), or a private "
            "repository pulled without credentials (Docker Hub answers 'pull access denied' for both)"
        ),
        fix=(
            "check the exact reference (docker manifest inspect <image> / crane ls), push the tag, or add an "
            "imagePullSecret with credentials for the registry"
        ),
        verify=("crictl pull <image>", "kubectl get pod <pod> -o jsonpath='{.spec.containers[*].image}'"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/moby/moby/blob/master/distribution/errors.go",
        example=(
            '>>Failed to pull image "rediss": rpc error: code = Unknown desc = Error response from daemon: pull '
            "access denied for rediss, repository does not exist or may require 'docker login'"
        ),
        notes=("example: a kubectl describe event quoted in a public troubleshooting write-up",),
        causes=("image.not-found",),
        subject="{image}",
    ),
    Message(
        code="KUBELET121",
        name="volume-setup-failed",
        title="the kubelet cannot set up a pod's volume (FailedMount)",
        # pkg/volume/util/operationexecutor: "MountVolume.SetUp failed for volume %q : %v"
        pattern=r"MountVolume\.SetUp failed for volume \\?\"(?P<volume>[\w.\-]{1,253})\\?\"\s?: (?P<why>[^\n]{1,200})",
        trigger="MountVolume.SetUp failed for volume",
        meaning="the pod stays ContainerCreating: one of its volumes cannot be mounted",
        cause=(
            'the object the volume names does not exist in the pod\'s namespace (configmap/secret/PVC "x" not '
            "found: a typo or not created yet), a key it selects is missing, or the storage driver (CSI, NFS) "
            "fails to mount"
        ),
        fix="create the ConfigMap/Secret/PVC the volume names (or fix the name), or fix the storage backend the error names",
        verify=(
            "kubectl describe pod <pod> | grep -A3 FailedMount",
            "kubectl get configmap,secret,pvc -n <ns>",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/kubernetes/kubernetes/blob/master/pkg/volume/util/operationexecutor/operation_generator.go",
        example=(
            "  Warning  FailedMount  19s (x8 over 83s)  kubelet, minikube  MountVolume.SetUp failed for volume "
            '"templates-volume" : configmap "alertmanager-templates" not found'
        ),
        notes=("example: a kubectl describe event quoted in a public Prometheus setup write-up",),
        causes=("k8s.volume-mount",),
        subject="volume {volume}",
        detail="({why})",
    ),
    Message(
        code="KUBELET122",
        name="container-oomkilled",
        title="a container was OOMKilled: it reached its memory limit (kubectl describe, container state)",
        # kubectl describe prints the container's State / Last State with "Reason:" from the CRI status;
        # the kubelet/runtime set reason "OOMKilled" when the kernel's memcg OOM killer ended it
        pattern=r"^\s{0,16}Reason:\s{1,30}OOMKilled\b",
        trigger="OOMKilled",
        meaning="the container's last run ended because the kernel's OOM killer killed it at its memory cgroup limit",
        cause=(
            "the container uses more memory than resources.limits.memory (a default limit from a chart or a "
            "LimitRange that is too small, the workload grew, a leak); it restarts and loops into "
            "CrashLoopBackOff"
        ),
        fix="raise the container's memory limit to its peak use (kubectl top pod, the cgroup's memory.peak) or make it use less",
        verify=(
            "kubectl describe pod <pod> | grep -B2 -A6 'Last State'",
            "kubectl top pod <pod> --containers",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://kubernetes.io/docs/tasks/configure-pod-container/assign-memory-resource/ "
        "(OOMKilled); kubernetes staging/src/k8s.io/kubectl/pkg/describe/describe.go (describeContainerState)",
        example="  Reason:       OOMKilled",
        example_source="https://github.com/Azure/azure-service-operator/issues/298",
        causes=("k8s.oom-killed",),
    ),
    Message(
        code="KUBELET123",
        name="node-cgroup-controller-missing",
        title="the kubelet (or k3s) cannot start: a cgroup controller it needs is not in the kernel",
        # k3s pkg/agent (cgroup check): "failed to find memory cgroup, you may need to add ..."; the kubelet's
        # container_manager_linux.go validateSystemRequirements: "system validation failed - Following
        # Cgroup subsystem not mounted: [memory]"
        pattern=r"failed to find (?P<ctrl>memory|cpuset|cpu|pids) cgroup",
        trigger="failed to find ",
        triggers=("Following Cgroup subsystem not mounted",),
        variants=(r"Following Cgroup subsystem not mounted: \[(?P<ctrl2>[\w ]{1,60})\]",),
        meaning="the node agent stops at start-up: the kernel offers no cgroup controller it must use to limit pods",
        cause=(
            "the controller is disabled on the kernel command line (Raspberry Pi OS: no cgroup_memory=1 "
            "cgroup_enable=memory) or the kernel was built without it (absent from /proc/cgroups)"
        ),
        fix=(
            "enable it on the kernel command line (cgroup_enable=memory cgroup_memory=1, /boot/cmdline.txt on a "
            "Pi) and reboot; if /proc/cgroups still lacks it, install a kernel built with the controller"
        ),
        verify=("cat /proc/cgroups", "cat /proc/cmdline", "mount | grep cgroup"),
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source="https://github.com/k3s-io/k3s/blob/master/pkg/agent/run.go (cgroup check); "
        + _K8S
        + "/master/pkg/kubelet/cm/container_manager_linux.go (validateSystemRequirements)",
        example=(
            'Jul 23 18:27:01 pi-kub1 k3s[763]: time="2020-07-23T18:27:01.047449579+01:00" level=fatal '
            'msg="failed to find memory cgroup, you may need to add \\"cgroup_memory=1 cgroup_enable=memory\\" '
            'to your linux cmdline (/boot/cmdline.txt on a Raspberry Pi)"'
        ),
        example_source="https://github.com/Hexxeh/rpi-firmware/issues/234",
        causes=("node.cgroup-missing",),
        detail="({ctrl})",
    ),
    Message(
        code="KUBELET125",
        name="device-allocate-failed",
        title="The kubelet admitted a GPU pod but its device manager has no device to give it (UnexpectedAdmissionError)",
        # pkg/kubelet/cm/devicemanager/manager.go: "requested number of devices unavailable for %s. Requested:
        # %d, Available: %d"; "no healthy devices present; cannot allocate unhealthy devices %s"; "cannot
        # allocate unregistered device %s"; pkg/kubelet/lifecycle/predicate.go: "Allocate failed due to %v,
        # which is unexpected" (reason UnexpectedAdmissionError)
        pattern=(
            r"requested number of devices unavailable for (?P<resource>[\w./\-]{1,100})\. Requested: "
            r"(?P<req>\d{1,6}), Available: (?P<avail>\d{1,6})"
        ),
        trigger="requested number of devices unavailable for ",
        triggers=("cannot allocate unhealthy devices", "cannot allocate unregistered device"),
        variants=(
            r"no healthy devices present; cannot allocate unhealthy devices (?P<resource2>[\w./\-]{1,100})",
            r"cannot allocate unregistered device (?P<resource3>[\w./\-]{1,100})",
        ),
        meaning=(
            "the pod was scheduled for the node's advertised devices, but at admission the kubelet's device "
            "manager had fewer healthy, registered devices of that resource than it asked for: the pod fails "
            "with UnexpectedAdmissionError"
        ),
        cause=(
            "the device plugin is not (or no longer) registered: the kubelet restarted and the plugin did not "
            "re-register, the plugin pod crashed, or it marked the GPUs unhealthy (an Xid, a lost GPU); the "
            "node's capacity still shows the devices the scheduler counted"
        ),
        fix=(
            "restart the device plugin pod on that node (kubectl delete pod -n <ns> <nvidia-device-plugin pod>) "
            "so it registers again, check its log for unhealthy devices (Xid), and delete the failed pods so "
            "they are rescheduled"
        ),
        verify=(
            "kubectl describe node <node> | grep -A8 -E 'Capacity|Allocatable'",
            "kubectl logs -n <ns> <nvidia-device-plugin pod>",
        ),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source=f"{_K8S}/master/pkg/kubelet/cm/devicemanager/manager.go; pkg/kubelet/lifecycle/predicate.go",
        example=(
            "Warning UnexpectedAdmissionError 11s kubelet Allocate failed due to requested number of devices "
            "unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected"
        ),
        notes=(
            "example: the Events line of kubectl describe pod (reason UnexpectedAdmissionError) as quoted in a "
            "public write-up of GPU sharing on Kubernetes; the kubelet's predicate.go/manager.go wording",
        ),
        causes=("k8s.gpu-not-advertised", "gpu.device-plugin"),
        detail="({resource}: requested {req}, available {avail})",
    ),
    Message(
        code="KUBELET127",
        name="kubelet-evicted-local-storage-limit",
        title="the kubelet evicted a pod for using more local ephemeral storage than its limit",
        # eviction_manager.go: podEphemeralStorageMessageFmt, containerEphemeralStorageMessageFmt,
        # emptyDirMessageFmt
        pattern=(
            r"Pod ephemeral local storage usage exceeds the total limit of containers (?P<limit>[\w.]{1,20})"
        ),
        trigger="ephemeral local storage usage exceeds",
        triggers=("exceeded its local ephemeral storage limit", "Usage of EmptyDir volume"),
        variants=(
            r"Container (?P<container>[\w.\-]{1,253}) exceeded its local ephemeral storage limit "
            r"\\?\"?(?P<limit2>[\w.]{1,20})",
            r"Usage of EmptyDir volume \\?\"?(?P<volume>[\w.\-]{1,253})\\?\"? exceeds the limit",
        ),
        meaning=(
            "the pod itself, not the node, crossed a limit: the sum of its containers' writable layers, logs "
            "and emptyDir volumes passed their ephemeral-storage limits (or an emptyDir its sizeLimit), and "
            "the kubelet evicted it"
        ),
        cause=(
            "the program writes to the container filesystem or an emptyDir (a checkpoint, a model, a dataset "
            "cache, logs) instead of a mounted volume, or the limit (set by the pod or injected by a sidecar "
            "webhook) is smaller than what it writes"
        ),
        fix=(
            "write large outputs to a mounted persistent volume or bucket mount; raise the containers' "
            "resources.limits.ephemeral-storage (or the emptyDir sizeLimit) to what the job really writes"
        ),
        verify=(
            "kubectl get pod <pod> -o jsonpath='{.status.message}'",
            "kubectl get pod <pod> -o yaml | grep -B2 -A2 ephemeral-storage",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_K8S}/master/pkg/kubelet/eviction/eviction_manager.go",
        example=(
            "Warning  Evicted              109s  kubelet                                Pod ephemeral local "
            "storage usage exceeds the total limit of containers 5Gi."
        ),
        example_source="https://github.com/substratusai/runbooks/issues/92",
        causes=("kubelet.eviction",),
        subject="container {container}|emptyDir {volume}",
        detail="(limit {limit})",
    ),
    Message(
        code="KUBELET128",
        name="k3s-node-password-rejected",
        title="the k3s/RKE2 server rejects the agent's join: the node name is registered with another password",
        pattern=r"Node password rejected, duplicate hostname",
        trigger="Node password rejected",
        # the server's side (k3s before 1.19: "Node password validation failed for [<node>]")
        triggers=("Node password validation failed",),
        variants=(r"Node password validation failed for \[(?P<node>[\w.\-]{1,253})\]",),
        meaning=(
            "the k3s (or RKE2) server refused to hand the agent its configuration because the node name it "
            "joins under already has a node-password secret that does not match /etc/rancher/node/password"
        ),
        cause=(
            "the node was replaced or reinstalled (or deleted with kubectl delete node and recreated) under "
            "the same hostname while the server kept the old node's password secret, or two hosts share a "
            "hostname"
        ),
        fix=(
            "delete the old node's password secret on the server (kubectl -n kube-system delete secret "
            "<node>.node-password.k3s) and restart the agent, or give each node a unique name "
            "(--with-node-id / --node-name)"
        ),
        verify=(
            "kubectl -n kube-system get secrets | grep node-password",
            "journalctl -u k3s-agent -n 50",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://docs.k3s.io/architecture#how-agent-node-registration-works",
        example=(
            "Waiting to retrieve agent configuration; server is not ready: Node password rejected, duplicate "
            "hostname or contents of '/etc/rancher/node/password' may not match server node-passwd entry, try "
            "enabling a unique node name with the --with-node-id flag"
        ),
        example_source="https://github.com/vitobotta/hetzner-k3s/issues/390",
        causes=("node.stale-registration",),
        subject="node {node}",
    ),
    Message(
        code="KUBELET133",
        name="kubelet-system-container-stats-missing",
        title="the kubelet finds no cgroup stats for a system service (benign: only its stats are missing)",
        # pkg/kubelet/server/stats/summary_sys_containers.go: "Failed to get system container stats" with
        # cAdvisor's "failed to get container info for %q: unknown container %q"
        pattern=r"Failed to get system container stats\W{1,8}(?:for \\?\"(?P<cgroup>[^\"\\\n]{1,200})\\?\")?",
        trigger="Failed to get system container stats",
        meaning=(
            "the kubelet's summary API cannot read resource usage of the runtime's or its own systemd service "
            "(the cgroup is not tracked by cAdvisor); it repeats every 10 s but nothing else is affected"
        ),
        cause=(
            "systemd does not create the per-service cgroups the kubelet looks in (CPU/memory accounting off "
            "for the unit, as on CentOS/RHEL 7), or --runtime-cgroups/--kubelet-cgroups name a path that does "
            "not exist; not the cause of a node or pod failure"
        ),
        fix=(
            "nothing is broken; to silence it enable accounting for the units (CPUAccounting=true, "
            "MemoryAccounting=true in a drop-in) or set --runtime-cgroups/--kubelet-cgroups to the real "
            "cgroup (/systemd/system.slice); look elsewhere for the failure being debugged"
        ),
        verify=(
            "systemctl show kubelet -p CPUAccounting -p MemoryAccounting",
            "cat /proc/$(pidof kubelet)/cgroup",
        ),
        severity=Severity.INFO,
        action=Action.OBSERVE,
        source=f"{_K8S}/master/pkg/kubelet/server/stats/summary_sys_containers.go",
        example=(
            "Dec  5 12:42:03  kubelet: E1205 12:42:03.527763   23059 summary.go:92] Failed to get system "
            'container stats for "/system.slice/kubelet.service": failed to get cgroup stats for '
            '"/system.slice/kubelet.service": failed to get container info for "/system.slice/kubelet.service": '
            'unknown container "/system.slice/kubelet.service"'
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/56850",
        subject="{cgroup}",
    ),
)

# the family in code order: the node and runtime entries here, the certificate/TLS ones (kubelet_tls.py),
# the CNI plugins' sandbox network errors (kubelet_cni.py), the host's OOM killer (kubelet_oom.py)
MESSAGES: tuple[Message, ...] = tuple(
    sorted((*_NODE_MESSAGES, *TLS_MESSAGES, *CNI_MESSAGES, *OOM_MESSAGES), key=lambda m: m.code)
)
