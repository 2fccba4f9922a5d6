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
)
