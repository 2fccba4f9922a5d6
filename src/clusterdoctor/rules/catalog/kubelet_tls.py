"""The kubelet's certificate and TLS messages, as data: its client certificate expired or its
bootstrap kubeconfig missing, Go's ``crypto/x509`` verdicts as the kubelet, kubectl and the container
runtime print them (expired, not yet valid, not valid for the address dialled, unknown authority) and
``kubeadm certs check-expiration``.

Part of the kubelet family: :mod:`clusterdoctor.rules.catalog.kubelet` merges these entries into its
``MESSAGES`` in code order (sources and conventions in its docstring).
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_K8S = "https://github.com/kubernetes/kubernetes/blob"
_GO_X509 = "https://github.com/golang/go/blob/master/src/crypto/x509/verify.go"
_CERTS_DOC = "https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-certs/"
# a line without the marks of etcd (rules/catalog/etcd.py: there Go's TLS errors are etcd.tls findings)
_NOT_ETCD = (
    r"^(?!.*(?:rafthttp|etcd|:2379\b|:2380\b|:4001\b|:7001\b|[Pp]eer|prober|member|rejected connection))"
)
_ADDR = r"[\w.\-\[\]:%]{1,100}"
_X509_FIX_TIME = (
    "compare the clocks (date -u on both sides; chronyc tracking) and the certificate's validity "
    "(openssl x509 -noout -dates); renew an expired certificate (kubeadm certs renew all, then restart "
    "the control-plane pods and the kubelet), or synchronise the clocks with NTP when one is behind"
)

TLS_MESSAGES: tuple[Message, ...] = (
    Message(
        code="KUBELET107",
        name="kubelet-client-certificate-expired",
        title="the kubelet's client certificate has expired",
        pattern=(
            r"art of the existing bootstrap client certificate(?: in (?P<path>[\w./\-]{1,200}))? "
            r"is expired: (?P<when>[0-9][0-9 :+\-.A-Z]{8,40})"
        ),
        trigger="art of the existing bootstrap client certificate",
        meaning="the kubelet's client certificate (kubelet.conf) is past its notAfter date: the kubelet cannot authenticate",
        cause=(
            "client certificate rotation did not renew it in time: rotateCertificates off, the node was "
            "powered off past the expiry, the cluster's CA or signer was down, or a kubeadm cluster older "
            "than a year whose certificates were never renewed"
        ),
        fix=(
            "renew it: on kubeadm clusters kubeadm certs renew (control plane) and, on the node, point "
            "kubelet.conf at /var/lib/kubelet/pki/kubelet-client-current.pem or re-join the node; keep "
            "rotateCertificates: true"
        ),
        verify=(
            "openssl x509 -noout -enddate -in /var/lib/kubelet/pki/kubelet-client-current.pem",
            "kubeadm certs check-expiration",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_K8S}/master/pkg/kubelet/certificate/bootstrap/bootstrap.go",
        example=(
            "Jan 18 17:33:58 aura kubelet[1457370]: E0118 17:33:58.888700 1457370 bootstrap.go:265] part of "
            "the existing bootstrap client certificate is expired: 2020-12-06 18:55:55 +0000 UTC"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/98150",
        causes=("k8s.cert-expired",),
        detail="(expired {when})",
        notes=(_CERTS_DOC,),
    ),
    Message(
        code="KUBELET108",
        name="kubelet-bootstrap-kubeconfig-missing",
        title="the kubelet falls back to a bootstrap kubeconfig that is not there",
        pattern=r"unable to load bootstrap kubeconfig: stat (?P<path>[\w./\-]{1,200}): no such file or directory",
        trigger="unable to load bootstrap kubeconfig",
        meaning=(
            "the kubelet found no valid client certificate in its kubeconfig and tried the bootstrap "
            "kubeconfig, which does not exist (kubeadm removes it after the node joined)"
        ),
        cause=(
            "the client certificate in kubelet.conf is expired, missing or unreadable, so the kubelet needs "
            "to bootstrap again; the line just before it usually says which"
        ),
        fix=(
            "restore a valid client certificate (renew an expired one, or re-join the node with kubeadm "
            "join, which writes a new bootstrap kubeconfig)"
        ),
        verify=("openssl x509 -noout -enddate -in /var/lib/kubelet/pki/kubelet-client-current.pem",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_K8S}/master/pkg/kubelet/certificate/bootstrap/bootstrap.go",
        example=(
            "Jan 18 17:33:58 aura kubelet[1457370]: F0118 17:33:58.888743 1457370 server.go:271] failed to run "
            "Kubelet: unable to load bootstrap kubeconfig: stat /etc/kubernetes/bootstrap-kubelet.conf: no "
            "such file or directory"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/98150",
        causes=("k8s.cert-expired",),
        role="symptom",
        confidence=0.7,
    ),
    Message(
        code="KUBELET109",
        name="x509-certificate-expired",
        title="a TLS certificate has expired (current time is after its notAfter)",
        pattern=(
            r"x509: certificate has expired or is not yet valid:? current time (?P<now>[\dT:.+\-Z]{10,40}) "
            r"is after (?P<bound>[\dT:.+\-Z]{10,40})"
        ),
        trigger="x509: certificate has expired or is not yet valid",
        meaning="a TLS handshake failed: the certificate presented expired before the verifier's current time",
        cause=(
            "a Kubernetes certificate (API server, kubelet client, etcd, kubeconfig client) reached its "
            "notAfter date without being renewed (kubeadm certificates last one year)"
        ),
        fix=_X509_FIX_TIME,
        verify=(
            "kubeadm certs check-expiration",
            "openssl x509 -noout -dates -in /etc/kubernetes/pki/apiserver.crt",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_GO_X509,
        example=(
            "x509: certificate has expired or is not yet valid: current time 2021-04-26T10:18:22+02:00 is "
            "after 2021-04-07T03:12:06Z"
        ),
        example_source="https://github.com/yashbhutwala/kubectl-df-pv/issues/20",
        causes=("k8s.cert-expired",),
        detail="(now {now}, valid until {bound})",
        notes=(_CERTS_DOC,),
    ),
    Message(
        code="KUBELET110",
        name="x509-certificate-not-yet-valid",
        title="a TLS certificate is not valid yet: the verifier's clock is behind (current time before notBefore)",
        pattern=(
            r"x509: certificate has expired or is not yet valid:? current time (?P<now>[\dT:.+\-Z]{10,40}) "
            r"is before (?P<bound>[\dT:.+\-Z]{10,40})"
        ),
        trigger="x509: certificate has expired or is not yet valid",
        meaning="a TLS handshake failed: the certificate's validity starts after the verifier's current time",
        cause=(
            "the clocks disagree: the machine that verifies is behind the one that issued the certificate "
            "(no NTP, a wrong time zone set as local time, a VM restored with an old clock)"
        ),
        fix=_X509_FIX_TIME,
        verify=("chronyc tracking", "timedatectl status"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_GO_X509,
        example=(
            "Unable to connect to the server: x509: certificate has expired or is not yet valid: current time "
            "2021-04-01T14:43:32+02:00 is before 2021-04-01T15:31:09Z"
        ),
        example_source="https://github.com/rancher/k3os/issues/260",
        causes=("k8s.clock-skew",),
        detail="(now {now}, valid from {bound})",
    ),
    Message(
        code="KUBELET111",
        name="x509-certificate-expired-or-not-yet-valid",
        title="a TLS certificate has expired or is not valid yet (the message does not say which)",
        # Go before 1.15 prints the bare message (pastes cut it after "expired"); with the times it is
        # KUBELET109 or KUBELET110
        pattern=r"x509: certificate has expired(?! or is not yet valid:? current time)(?: or is not yet valid)?",
        trigger="x509: certificate has expired",
        meaning=(
            "a TLS handshake failed on the certificate's validity period: either it expired, or the "
            "verifier's clock is before its start (older Go prints no times to tell)"
        ),
        cause=(
            "an expired Kubernetes certificate (kubeadm certificates last one year), or clocks out of sync "
            "between the machines (a freshly issued certificate looks not yet valid on a machine whose "
            "clock is behind)"
        ),
        fix=_X509_FIX_TIME,
        verify=("kubeadm certs check-expiration", "chronyc tracking"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_GO_X509,
        example="Unable to connect to the server: x509: certificate has expired or is not yet valid",
        example_source="https://github.com/easzlab/kubeasz/issues/922",
        causes=("k8s.cert-expired", "k8s.clock-skew"),
        confidence=0.8,
    ),
    Message(
        code="KUBELET114",
        name="tls-certificate-name-mismatch-k8s",
        title="TLS certificate not valid for the address dialled (API server, registry, webhook)",
        pattern=(
            r"x509: (?:certificate is valid for [^,\n]{1,200}(?:, [^,\n]{1,200}){0,64}, not (?P<addr>"
            + _ADDR
            + r")|certificate is not valid for any names, but wanted to match (?P<addr2>"
            + _ADDR
            + r")|cannot validate certificate for (?P<addr3>"
            + _ADDR
            + r") because it doesn't contain any IP SANs)"
        ),
        trigger="x509: c",
        meaning="a TLS server's certificate does not name the address the client used, so the client refuses it",
        cause=(
            "the server (kube-apiserver, a registry, a webhook) was reached through an address its "
            "certificate does not list: a new IP or load balancer in front of the API server, a kubeconfig "
            "pointing at another name, certificates issued before the address changed"
        ),
        fix=(
            "reach the server by a name its certificate lists (openssl s_client -connect <addr> | openssl "
            "x509 -noout -ext subjectAltName), or re-issue the certificate with the address added "
            "(kubeadm: apiServer.certSANs, then kubeadm init phase certs apiserver)"
        ),
        verify=("openssl x509 -in /etc/kubernetes/pki/apiserver.crt -noout -ext subjectAltName",),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_GO_X509,
        example=(
            "error: couldn't read version from server: Get https://146.148.119.50:6443/api: x509: certificate is "
            "valid for 10.240.0.2, 10.200.100.1, not 146.148.119.50"
        ),
        example_source="https://github.com/kelseyhightower/intro-to-kubernetes-workshop/issues/13",
        subject="{addr}",
        context=_NOT_ETCD,
        confidence=0.7,
    ),
    Message(
        code="KUBELET115",
        name="tls-unknown-authority-k8s",
        title="TLS certificate signed by an authority the client does not trust (API server, registry)",
        pattern=r"x509: certificate signed by unknown authority",
        trigger="x509: certificate signed by unknown authority",
        meaning="a TLS handshake failed: the server's certificate was issued by a CA the client does not trust",
        cause=(
            "the client's CA bundle is not the server's: a kubeconfig whose certificate-authority-data is "
            "from another (or a re-created) cluster, a private registry whose CA the node does not trust "
            "(containerd's hosts.toml / docker certs.d), a TLS-intercepting proxy"
        ),
        fix=(
            "give the client the CA that signed the server's certificate: refresh the kubeconfig "
            "(/etc/kubernetes/admin.conf), add the registry's CA to the runtime's certs.d, or exempt the "
            "address from the proxy"
        ),
        verify=("openssl s_client -connect <host>:<port> -showcerts </dev/null | head -20",),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=_GO_X509,
        example="Unable to connect to the server: x509: certificate signed by unknown authority",
        example_source="https://github.com/kubernetes/kubernetes/issues/24586",
        context=_NOT_ETCD,
        causes=("k8s.tls-ca-mismatch",),
        confidence=0.7,
    ),
    Message(
        code="KUBELET124",
        name="kubeadm-certs-expired",
        title="kubeadm certs check-expiration: certificates have expired (residual time <invalid>)",
        # cmd/kubeadm/app/cmd/certs.go prints each certificate's residual time with
        # duration.ShortHumanDuration, which is "<invalid>" for a negative duration (already expired)
        pattern=r"^(?P<cert>[\w.\-]{1,64}) {1,60}\w{3} \d{1,2}, \d{4} \d\d:\d\d UTC {1,60}<invalid>",
        trigger="<invalid>",
        meaning="the certificate's expiry date has passed: every client using it fails TLS (x509: certificate has expired)",
        cause=(
            "the control plane's kubeadm certificates (one-year validity) were not renewed: no control-plane "
            "upgrade within a year and no kubeadm certs renew"
        ),
        fix=(
            "kubeadm certs renew all on each control-plane node, restart the static pods (kube-apiserver, "
            "controller-manager, scheduler, etcd), and copy the new admin.conf to ~/.kube/config"
        ),
        verify=("kubeadm certs check-expiration",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_CERTS_DOC + "; " + _K8S + "/master/cmd/kubeadm/app/cmd/certs.go",
        example="apiserver                  Jul 18, 2024 08:22 UTC   <invalid>       ca                      no",
        example_source="https://github.com/apache/cloudstack/issues/9418",
        causes=("k8s.cert-expired",),
        detail="({cert})",
    ),
)
