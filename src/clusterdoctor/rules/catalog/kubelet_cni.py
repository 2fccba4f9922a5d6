"""The CNI plugins' errors as the kubelet and containerd report them when a pod's sandbox gets no network
(``FailedCreatePodSandBox``), as data: flannel's missing subnet file, the bridge plugin's address
conflict, host-local IPAM out of addresses, Calico's unauthorized datastore access.

Wording from containernetworking/plugins (``plugins/main/bridge/bridge.go``: ``%q already has an IP
address different from %v``; ``plugins/ipam/host-local/backend/allocator``: ``no IP addresses available
in range set``), flannel-io/cni-plugin (``loadFlannelSubnetEnv``) and projectcalico/calico
(``cni-plugin``: ``error getting ClusterInformation``). Example lines are from public issue threads,
each named in ``example_source``.

Part of the kubelet family: :mod:`clusterdoctor.rules.catalog.kubelet` merges these entries into its
``MESSAGES`` in code order.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_PLUGINS = "https://github.com/containernetworking/plugins/blob/main/plugins"

CNI_MESSAGES: tuple[Message, ...] = (
    Message(
        code="KUBELET129",
        name="flannel-subnet-env-missing",
        title="flannel's CNI plugin finds no /run/flannel/subnet.env: flanneld is not running on the node",
        pattern=r"open /run/flannel/subnet\.env: no such file or directory",
        trigger="/run/flannel/subnet.env",
        meaning=(
            "the flannel CNI plugin cannot read the node's subnet lease (written by the flanneld daemon of the "
            "kube-flannel DaemonSet), so no pod on the node gets a network: they stay ContainerCreating"
        ),
        cause=(
            "flanneld has not started or keeps crashing on that node: most often the node has no podCIDR "
            "(kubeadm init without --pod-network-cidr, or a CIDR other than the Network in flannel's "
            "net-conf.json), the flannel pod cannot reach the API server, or flannel is not installed yet"
        ),
        fix=(
            "look at the kube-flannel pod of that node (kubectl -n kube-flannel logs); give the nodes a "
            "podCIDR that matches net-conf.json (kubeadm --pod-network-cidr=10.244.0.0/16 or edit the "
            "ConfigMap), then restart the flannel pod"
        ),
        verify=(
            "kubectl -n kube-flannel get pods -o wide",
            "kubectl get nodes -o jsonpath='{.items[*].spec.podCIDR}'",
            "cat /run/flannel/subnet.env",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/flannel-io/cni-plugin/blob/main/flannel.go",
        example=(
            "Warning  FailedCreatePodSandBox  11s    kubelet            Failed to create pod sandbox: rpc error: "
            'code = Unknown desc = failed to setup network for sandbox "3c05350cf5717b9bcf92a63ffafb7a3d27bd5ad1880de'
            '39272e72aa1661e637e": plugin type="flannel" failed (add): loadFlannelSubnetEnv failed: open '
            "/run/flannel/subnet.env: no such file or directory"
        ),
        example_source="https://github.com/flannel-io/flannel/issues/2253",
        causes=("kubelet.cni",),
    ),
    Message(
        code="KUBELET130",
        name="cni-bridge-address-conflict",
        title="the CNI bridge (cni0) holds an address of another pod subnet than the node's",
        pattern=(
            r"failed to set bridge addr: \\{0,3}\"(?P<bridge>[\w.\-]{1,15})\\{0,3}\" already has an IP address "
            r"different from (?P<cidr>[0-9a-fA-F.:]{2,39}/\d{1,3})"
        ),
        trigger="already has an IP address different from",
        meaning=(
            "the bridge plugin found its bridge already configured with an address outside the node's current "
            "pod subnet and refused to set up the pod's network"
        ),
        cause=(
            "the node kept its old cni0 bridge (and /var/lib/cni state) from an earlier cluster or pod CIDR: "
            "it was reset and rejoined (kubeadm reset does not delete cni0), the flannel/pod CIDR changed, or "
            "the node got another podCIDR after a restart"
        ),
        fix=(
            "on that node: delete the stale bridge and CNI state (ip link delete cni0; ip link delete "
            "flannel.1; rm -rf /var/lib/cni/networks), then restart the CNI pod and the kubelet so that the "
            "bridge is recreated with the node's podCIDR"
        ),
        verify=("ip -4 addr show cni0", "kubectl get node <node> -o jsonpath='{.spec.podCIDR}'"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/main/bridge/bridge.go",
        example=(
            'CNI: failed to set bridge addr: "cni-podman1" already has an IP address different from 10.25.31.1/24'
        ),
        example_source="https://github.com/podman-container-tools/podman/issues/12306",
        causes=("kubelet.cni",),
        subject="bridge {bridge}",
        detail="(node subnet {cidr})",
    ),
    Message(
        code="KUBELET131",
        name="cni-ipam-range-exhausted",
        title="the node's pod IP range is exhausted (host-local IPAM has no free address)",
        pattern=r"no IP addresses available in range set: (?P<range>[0-9a-fA-F.:\-]{3,80})",
        trigger="no IP addresses available in range set",
        meaning="host-local IPAM found every address of the node's pod range allocated, so the new pod gets no network",
        cause=(
            "addresses leaked: the reservation files in /var/lib/cni/networks/<net>/ of pods that no longer "
            "exist were not released (a container runtime or kubelet restart, a node reboot with the state "
            "kept, a CNI DEL that failed); less often the node really runs more pods than its range holds "
            "(a /24 has 254 addresses; maxPods above that)"
        ),
        fix=(
            "compare the files in /var/lib/cni/networks/<net>/ with the running pods' IPs and remove the stale "
            "ones (or drain the node, delete the directory, restart containerd and the kubelet); keep maxPods "
            "below the range size"
        ),
        verify=("ls /var/lib/cni/networks/*/ | wc -l", "crictl pods | wc -l"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/ipam/host-local/backend/allocator/allocator.go",
        example=(
            "Dec 28 00:04:45 node4 kubelet[8024]: E1228 00:04:45.997242    8024 remote_runtime.go:92] "
            "RunPodSandbox from runtime service failed: rpc error: code = Unknown desc = NetworkPlugin cni failed "
            'to set up pod "nginx-596ddc9cb7-q78q4_default" network: failed to allocate for range 0: no IP '
            "addresses available in range set: 10.244.1.1-10.244.1.254"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/57280",
        causes=("kubelet.cni",),
        detail="(range {range})",
    ),
    Message(
        code="KUBELET132",
        name="calico-cni-unauthorized",
        title="Calico's CNI plugin is refused by the API server (its token is not accepted)",
        pattern=r"error getting ClusterInformation: connection is unauthorized",
        trigger="error getting ClusterInformation",
        meaning=(
            "the Calico CNI plugin could not read its ClusterInformation from the API server (401 Unauthorized), "
            "so it can neither add nor delete pod networks on that node"
        ),
        cause=(
            "the service-account token in the node's CNI kubeconfig (/etc/cni/net.d/calico-kubeconfig) is "
            "expired or invalid: calico-node, which refreshes it, is not running on the node or cannot reach "
            "the API server, the token was issued by a cluster that was re-created, or an old Calico release "
            "that did not refresh it"
        ),
        fix=(
            "restart the calico-node pod of that node (it rewrites the token), check that it stays Running; "
            "upgrade Calico if the token keeps expiring"
        ),
        verify=(
            "kubectl -n kube-system get pods -l k8s-app=calico-node -o wide",
            "cat /etc/cni/net.d/calico-kubeconfig",
        ),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source="https://github.com/projectcalico/calico/blob/master/cni-plugin/pkg/plugin/plugin.go",
        example=(
            "Warning  FailedCreatePodSandBox  33s               kubelet            Failed to create pod sandbox: "
            'rpc error: code = Unknown desc = failed to setup network for sandbox "b6385006e8b3eedeaa1fd60e3e69afc9fb'
            '758a27666c93708a9211b3c988ab34": plugin type="calico" failed (add): error getting ClusterInformation: '
            "connection is unauthorized: Unauthorized"
        ),
        example_source="https://github.com/projectcalico/calico/issues/9215",
        causes=("kubelet.cni",),
    ),
)
