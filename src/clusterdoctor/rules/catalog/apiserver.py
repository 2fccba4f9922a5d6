"""kube-apiserver's answers and its own log lines, as data: what a client is told when RBAC refuses it,
and what the apiserver logs when its etcd storage connection fails.

The forbidden message is the apiserver's ``forbiddenMessage`` (``k8s.io/apiserver/pkg/endpoints/handlers/
responsewriters/errors.go``): ``<resource> "<name>" is forbidden: User "<user>" cannot <verb> resource
"<resource>" in API group "<group>" [at the cluster scope | in the namespace "<ns>"]``; clients (controllers,
node-problem-detector, operators) log it verbatim. Before Kubernetes 1.14 the resource was not quoted
(``cannot patch nodes/status at the cluster scope``): the pattern reads both.

Sources: kubernetes/kubernetes (apiserver, storage), the RBAC documentation; example lines from
public threads.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_K8S = "https://github.com/kubernetes/kubernetes/blob/master/staging/src/k8s.io/apiserver/pkg"

MESSAGES: tuple[Message, ...] = (
    Message(
        code="APISRV101",
        name="rbac-forbidden",
        title="The apiserver refuses a client: its user or service account lacks the RBAC permission",
        pattern=(
            r"is forbidden: User \\?\"(?P<user>[^\"\\\n]{1,200})\\?\" cannot (?P<verb>[\w\-]{1,24}) "
            r"(?:resource \\?\"(?P<resource>[^\"\\\n]{1,120})\\?\"|(?P<resource2>[\w./\-]{1,120}))"
        ),
        trigger="is forbidden: User ",
        meaning="the request was authenticated but no Role/ClusterRole bound to that user allows the verb on the resource",
        cause=(
            "the component runs under a service account without its binding: a manifest that lacks the "
            "ServiceAccount/ClusterRoleBinding (so it runs as the namespace's default account), a binding to a "
            "role name that does not exist (system: prefix), or a role missing the verb"
        ),
        fix=(
            "create the ServiceAccount and a ClusterRoleBinding to a role that grants the verb on the resource "
            "(kubectl create clusterrolebinding ... --clusterrole=<role> --serviceaccount=<ns>:<sa>) and set "
            "serviceAccountName on the pod"
        ),
        verify=("kubectl auth can-i <verb> <resource> --as=<user>", "kubectl get clusterrolebinding -o wide"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_K8S}/endpoints/handlers/responsewriters/errors.go",
        example=(
            "E1122 21:46:22.131359       1 manager.go:162] failed to update node conditions: nodes "
            '"ip-10-200-20-18.eu-west-1.compute.internal" is forbidden: User '
            '"system:serviceaccount:kube-system:default" cannot patch resource "nodes/status" in API group "" at '
        ),
        example_source="https://github.com/kubernetes/kops/issues/12817",
        causes=("k8s.rbac-forbidden",),
        subject="{user}",
        detail="({verb} {resource})",
    ),
    Message(
        code="APISRV102",
        name="apiserver-etcd-transport-closing",
        title="kube-apiserver's etcd connection keeps closing (storage backend or TLS mismatch)",
        pattern=(
            r"apiserver received an error that is not an metav1\.Status: rpc error: code = "
            r"(?:13|Internal|Unavailable) desc = transport is closing"
        ),
        trigger="transport is closing",
        meaning=(
            "every storage call of the apiserver fails: the gRPC connection to etcd closes as soon as it is "
            "used, so API requests answer 500"
        ),
        cause=(
            "the apiserver speaks etcd's v3 gRPC API (--storage-backend=etcd3, the default since 1.6) to a "
            "cluster that serves only v2 (etcd 2.x, or v3 data never migrated), or the TLS settings differ "
            "(client certificate/CA wrong, http vs https in --etcd-servers), or etcd restarts"
        ),
        fix=(
            "run etcd 3.x and point --etcd-servers at its client URLs with the right scheme and "
            "--etcd-cafile/--etcd-certfile/--etcd-keyfile; for a v2 cluster set --storage-backend=etcd2 "
            "until it is migrated"
        ),
        verify=("ETCDCTL_API=3 etcdctl --endpoints=<etcd-servers> endpoint health", "etcd --version"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_K8S}/storage/etcd3/store.go",
        example=(
            "E0807 08:53:16.206535   26771 status.go:62] apiserver received an error that is not an "
            "metav1.Status: rpc error: code = 13 desc = transport is closing"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/43634",
        causes=("apiserver.etcd-backend", "etcd.tls"),
        confidence=0.7,
    ),
    Message(
        code="APISRV103",
        name="npd-cannot-update-node",
        title="node-problem-detector may not update its node's conditions (RBAC binding missing)",
        # node-problem-detector pkg/exporters/k8sexporter/condition/manager.go: "failed to update
        # node conditions: %v"; the apiserver's 403 without details reads "the server does not allow access
        # to the requested resource" (client-go before the forbidden message named the user)
        pattern=(
            r"failed to update node conditions: (?:the server does not allow access to the requested resource"
            r"|nodes \\?\"[^\"\\\n]{1,253}\\?\" is forbidden)"
        ),
        trigger="failed to update node conditions: ",
        meaning=(
            "node-problem-detector found a problem but cannot write it to the node's status: the apiserver "
            "refuses its patch of nodes/status, so the node's conditions never show it"
        ),
        cause=(
            "NPD runs without its RBAC: the ServiceAccount/ClusterRoleBinding to system:node-problem-detector was "
            "not created (an addon manifest of an API version the cluster no longer serves, a binding to a role "
            "name without the system: prefix, a manifest that omits them)"
        ),
        fix=(
            "create NPD's ServiceAccount and a ClusterRoleBinding to the system:node-problem-detector role "
            "(rbac.authorization.k8s.io/v1) and run the DaemonSet with that serviceAccountName"
        ),
        verify=(
            "kubectl auth can-i patch nodes/status --as=system:serviceaccount:kube-system:node-problem-detector",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/kubernetes/node-problem-detector/blob/master/pkg/exporters/k8sexporter/condition/manager.go",
        example=(
            "E0324 05:08:26.745545    1328 manager.go:160] failed to update node conditions: the server does not "
            "allow access to the requested resource (patch nodes gke-bootstrap-e2e-default-pool-fd91d792-mqh4)"
        ),
        example_source="https://github.com/kubernetes/kubernetes/pull/43609",
        causes=("k8s.rbac-forbidden",),
        subject="node-problem-detector",
    ),
    Message(
        code="APISRV104",
        name="kubectl-no-kubeconfig",
        title="kubectl has no kubeconfig and falls back to localhost:8080",
        # kubectl (k8s.io/kubectl/pkg/cmd/util/helpers.go): "The connection to the server %s was refused -
        # did you specify the right host or port?"; localhost:8080 is client-go's default with no config
        pattern=r"The connection to the server (?:localhost|127\.0\.0\.1):8080 was refused",
        trigger="The connection to the server ",
        meaning=(
            "kubectl found no cluster to talk to and tried the old insecure default localhost:8080, which no "
            "current apiserver serves: the message says nothing about the cluster's health"
        ),
        cause=(
            "no kubeconfig for the user running kubectl: ~/.kube/config missing (kubeadm's admin.conf not "
            "copied, a worker node that never had one), KUBECONFIG unset or pointing at a missing file, "
            "kubectl run with sudo or as another user, or a broken config (bad indentation, no current-context)"
        ),
        fix=(
            "give kubectl a kubeconfig: mkdir -p $HOME/.kube && sudo cp /etc/kubernetes/admin.conf "
            "$HOME/.kube/config && sudo chown $(id -u):$(id -g) $HOME/.kube/config (or export KUBECONFIG=...; "
            "for a managed cluster fetch it, e.g. gcloud container clusters get-credentials)"
        ),
        verify=("kubectl config view --minify", "echo $KUBECONFIG"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/kubernetes/kubectl/blob/master/pkg/cmd/util/helpers.go",
        example="The connection to the server localhost:8080 was refused - did you specify the right host or port?",
        example_source="https://github.com/kubernetes/kubectl/issues/737",
        causes=("k8s.kubeconfig-missing",),
    ),
    Message(
        code="APISRV105",
        name="apiserver-connection-refused",
        title="Nothing listens at the API server's address: kube-apiserver is not running",
        pattern=(
            r"The connection to the server (?!localhost:8080|127\.0\.0\.1:8080)(?P<server>[\w.\-\[\]:]{1,200}) "
            r"was refused"
        ),
        trigger="The connection to the server ",
        meaning=(
            "kubectl reached the API server's host but the connection was refused: no kube-apiserver is "
            "listening there (or the load balancer in front has no healthy backend)"
        ),
        cause=(
            "kube-apiserver is down or restarting on the control plane: it cannot reach etcd (etcd down, its "
            "data or certificates broken), its certificates expired, the kubelet that runs it as a static pod "
            "is not running (swap on after a reboot, a failed kubelet, containerd down), or the control-plane "
            "node was rebooted and is still coming up; less often the kubeconfig names a wrong address or port"
        ),
        fix=(
            "on a control-plane node: crictl ps -a | grep kube-apiserver and its logs, journalctl -u kubelet; "
            "fix what it reports (etcd, certificates: kubeadm certs check-expiration, swap off, containerd), "
            "then check the server address in the kubeconfig"
        ),
        verify=(
            "crictl ps -a | grep -E 'kube-apiserver|etcd'",
            "journalctl -u kubelet -n 50",
            "kubeadm certs check-expiration",
        ),
        severity=Severity.CRITICAL,
        action=Action.RESTART_SERVICE,
        source="https://github.com/kubernetes/kubectl/blob/master/pkg/cmd/util/helpers.go",
        example="The connection to the server 10.190.67.31:6443 was refused - did you specify the right host or port?",
        example_source="https://github.com/kubernetes/website/issues/19461",
        causes=("k8s.component-down",),
        role="symptom",  # etcd down, an expired certificate, a stopped kubelet explain it when present
        subject="apiserver {server}",
    ),
)
