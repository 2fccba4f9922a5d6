"""etcd's own messages (server log lines in capnslog and zap form, errors its clients print), as data.

Wording from etcd-io/etcd: ``rafthttp/probing_status.go`` (clock difference), ``rafthttp/http.go`` and
``rafthttp/util.go`` (cluster ID mismatch), ``api/v3rpc/rpctypes/error.go`` (``mvcc: database space
exceeded``), ``etcdctl/ctlv3/command/printer_simple.go`` (``alarm list`` prints each alarm member with
``%+v``: ``memberID:<n> alarm:NOSPACE``), ``etcdctl/ctlv3/command/ep_command.go`` (``Active Alarm(s):``),
``etcdserver/server.go`` (``has already been bootstrapped``), ``raft/raft.go`` (``failed to send message
to %x because it is unreachable``), ``embed/config.go`` (``rejected connection``); TLS verification
errors are Go's ``crypto/x509`` (``verify.go``) as etcd logs them. The meaning and fixes follow the etcd
operations guide (maintenance: space quota; FAQ; failure modes). Example lines are from public issue
threads, each named in ``example_source``.

The slow-disk messages (``apply request took too long``, ``slow fdatasync``, ``failed to send out
heartbeat on time``) and elections are not here: :mod:`clusterdoctor.observe.control.logs` reads them as
timed events that ETCDLOG001-003 and CHAIN001 judge together.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_ETCD = "https://github.com/etcd-io/etcd/blob"
_QUOTA_DOC = "https://etcd.io/docs/v3.5/op-guide/maintenance/#space-quota"
_FAQ = "https://etcd.io/docs/v3.5/faq/"
_GO_X509 = "https://github.com/golang/go/blob/master/src/crypto/x509/verify.go"

_ID = r"[0-9a-f]{1,16}"
# marks of an etcd line (its packages, its ports, its peer words): Go's TLS errors are etcd's only there
_ETCD_CONTEXT = r"rafthttp|etcd|:2379\b|:2380\b|:4001\b|:7001\b|[Pp]eer|prober|member|rejected connection"
_ADDR = r"[\w.\-\[\]:%]{1,100}"

MESSAGES: tuple[Message, ...] = (
    Message(
        code="ETCD101",
        name="etcd-db-space-exceeded",
        title="etcd refuses writes: its backend database exceeded the space quota",
        # "mvcc: " as etcd words it; a UI or a user retyping it may drop or misspell the middle word
        pattern=r"(?:mvcc|etcdserver|\bm\w{0,4}): database space exceeded",
        trigger="database space exceeded",
        meaning="etcd answered a write with 'mvcc: database space exceeded': the cluster is read-only",
        cause=(
            "the backend database reached --quota-backend-bytes (default 2 GiB): too much history kept "
            "(no or too rare compaction), a fragmented file that was never defragmented, or an application "
            "that writes more than the quota holds"
        ),
        fix=(
            "compact the history (etcdctl compact <current revision>), defragment every member (etcdctl "
            "defrag --cluster), then disarm the alarm (etcdctl alarm disarm); enable auto-compaction "
            "(--auto-compaction-retention) or raise --quota-backend-bytes if the data really is that large"
        ),
        verify=("etcdctl endpoint status --cluster -w table", "etcdctl alarm list"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_QUOTA_DOC,
        example="Error:  etcdserver: mvcc: database space exceeded",
        example_source="https://github.com/etcd-io/jetcd/issues/90",
        causes=("etcd.db-space-exceeded",),
        confidence=0.9,
        notes=(f"{_ETCD}/main/api/v3rpc/rpctypes/error.go: ErrGRPCNoSpace",),
    ),
    Message(
        code="ETCD102",
        name="etcd-nospace-alarm",
        title="etcd's NOSPACE alarm is raised: the cluster accepts no writes until it is disarmed",
        # etcdctl alarm list / endpoint status errors (memberID:<n> alarm:NOSPACE), a client's
        # AlarmList (alarm: NOSPACE), endpoint health (Active Alarm(s): NOSPACE), zap "alarm":"NOSPACE"
        pattern=r"larm(?:\(s\))?\W{1,4}(?:[A-Z]{2,12} ){0,3}NOSPACE\b",
        trigger="NOSPACE",
        meaning="an etcd member raised the NOSPACE alarm: every member now refuses writes (puts, leases)",
        cause=(
            "the backend database of a member reached its space quota (--quota-backend-bytes, default "
            "2 GiB); the alarm stays raised until an operator disarms it, even after space is freed"
        ),
        fix=(
            "compact (etcdctl compact <revision>), defragment each member (etcdctl defrag --cluster), then "
            "etcdctl alarm disarm; keep auto-compaction on, and raise --quota-backend-bytes (up to 8 GiB is "
            "supported) if the data needs it"
        ),
        verify=("etcdctl alarm list", "etcdctl endpoint status --cluster -w table"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_QUOTA_DOC,
        example=(
            'time="2026-04-28T03:57:45+08:00" level=warning msg="Errors present on etcd cluster: '
            'memberID:13118187214589646828 alarm:NOSPACE "'
        ),
        example_source="https://github.com/rancher/k3k/issues/815",
        causes=("etcd.db-space-exceeded",),
        confidence=0.95,
        notes=(
            f"{_ETCD}/v3.5.0/etcdctl/ctlv3/command/printer_simple.go: Alarm prints each member with %+v",
            f"{_ETCD}/v3.5.0/etcdctl/ctlv3/command/ep_command.go: 'Active Alarm(s): NOSPACE'",
        ),
    ),
    Message(
        code="ETCD103",
        name="etcd-clock-difference",
        title="etcd's clock differs from a peer's by more than 1 s",
        pattern=(
            r"the clock difference against peer (?P<peer>" + _ID + r") is too high "
            r"\[(?P<drift>[0-9hmsµun.]{1,40}) > (?P<limit>[0-9hmsµun.]{1,20})\]"
        ),
        trigger="the clock difference against peer",
        meaning="etcd's prober measured its clock more than 1 s apart from a peer's",
        cause=(
            "the system clocks of the etcd machines are not synchronised (NTP/chrony not running or not "
            "reaching its servers, a VM resumed with a stale clock); leases and TLS certificate checks "
            "depend on the clocks"
        ),
        fix=(
            "run NTP (chronyd or systemd-timesyncd) on every member against the same servers and step the "
            "clock once (chronyc makestep); the warning stops when the clocks agree within 1 s"
        ),
        verify=("chronyc tracking", "timedatectl status"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_ETCD}/v3.3.0/rafthttp/probing_status.go",
        example=(
            "2016-12-22 17:00:29.475936 W | rafthttp: the clock difference against peer 5bd0394181f126dd "
            "is too high [10.449391606s > 1s]"
        ),
        example_source="https://github.com/etcd-io/etcd/issues/7051",
        causes=("etcd.clock-skew",),
        subject="member {peer}",
        detail="(peer {peer}: {drift} > {limit})",
    ),
    Message(
        code="ETCD104",
        name="etcd-cluster-id-mismatch",
        title="etcd members of two different clusters talk to each other (cluster ID mismatch)",
        # capnslog: request cluster ID mismatch (got X want Y); streaming request ignored (cluster ID
        # mismatch got X want Y); request sent was ignored (cluster ID mismatch: peer[X]=Y, local=Z);
        # zap: "request cluster ID mismatch", "request sent was ignored due to cluster ID mismatch"
        # "got X": the cluster ID of the peer that sent the request (the stray one), "want Y": this one's
        pattern=(
            r"cluster ID mismatch(?:[ :(]{1,3}got (?P<got>[0-9a-f]{1,16}) want (?P<want>[0-9a-f]{1,16}))?"
        ),
        trigger="cluster ID mismatch",
        meaning="an etcd member rejected a peer's request because the peer belongs to another cluster ID",
        cause=(
            "a member's data directory or membership disagrees with the cluster: a machine was rebuilt or "
            "re-bootstrapped as a new cluster without being removed from the old one (etcdctl member "
            "remove), a stale data dir was kept, or two clusters share peer addresses or "
            "--initial-cluster-token"
        ),
        fix=(
            "remove the stray member from the cluster it left (etcdctl member remove <ID>); to rejoin, wipe "
            "its data dir and add it again (etcdctl member add, then start it with "
            "--initial-cluster-state=existing); give every cluster its own --initial-cluster-token"
        ),
        verify=("etcdctl member list -w table", "etcdctl endpoint status --cluster -w table"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_FAQ,
        example="request cluster ID mismatch (got dfc9373077e01b35 want 3b7efc3170756a6b)",
        example_source="https://github.com/etcd-io/etcd/issues/6181",
        causes=("etcd.member-config",),
        subject="a peer of cluster {got} (this member's cluster: {want})",
        notes=(f"{_ETCD}/v3.3.0/rafthttp/http.go", f"{_ETCD}/v3.3.0/rafthttp/util.go"),
    ),
    Message(
        code="ETCD105",
        name="etcd-member-already-bootstrapped",
        title="etcd member started as new over a data dir that already belongs to a cluster",
        pattern=r"member (?P<member>" + _ID + r") has already been bootstrapped",
        trigger="has already been bootstrapped",
        meaning="etcd refused to start: the member was told to bootstrap a new cluster but it already has one",
        cause=(
            "the member was started with --initial-cluster-state=new (or a discovery URL) over an existing "
            "data dir, or re-provisioned with the same name after its old self was never removed from the "
            "cluster"
        ),
        fix=(
            "for a member of a running cluster, start it with --initial-cluster-state=existing; for a "
            "rebuilt machine, remove its old member (etcdctl member remove <ID>), wipe the data dir, "
            "etcdctl member add it and start it"
        ),
        verify=("etcdctl member list -w table",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_ETCD}/v3.4.0/etcdserver/server.go",
        example="May 20 17:57:39 localhost etcd2[761]: member 51eecfc041171d8f has already been bootstrapped",
        example_source="https://github.com/etcd-io/etcd/issues/5422",
        causes=("etcd.member-config",),
        subject="member {member}",
    ),
    Message(
        code="ETCD106",
        name="tls-certificate-name-mismatch",
        title="TLS certificate not valid for the address dialled (its SANs lack it)",
        # Go crypto/x509 HostnameError: "x509: certificate is valid for %s, not %s",
        # "x509: certificate is not valid for any names, but wanted to match %s",
        # "x509: cannot validate certificate for %s because it doesn't contain any IP SANs"
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
        meaning=(
            "a TLS peer's certificate does not name the address it was reached at, so verification fails "
            "and the connection is dropped"
        ),
        cause=(
            "the certificate was issued without that IP or DNS name in its subject alternative names: a "
            "certificate reused for a new etcd member, issued for 127.0.0.1 or one address only, or a "
            "member (or API server) reached through an address the certificate never listed"
        ),
        fix=(
            "issue each etcd member (and server) its own certificate whose SANs list every IP and DNS name "
            "peers and clients use (openssl x509 -noout -ext subjectAltName shows them), then restart it"
        ),
        verify=("openssl x509 -in /etc/etcd/pki/peer.crt -noout -ext subjectAltName",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_GO_X509,
        example=(
            '{"level":"warn","ts":"2020-12-03T14:21:49.213Z","caller":"rafthttp/probing_status.go:68",'
            '"msg":"prober detected unhealthy status","round-tripper-name":"ROUND_TRIPPER_RAFT_MESSAGE",'
            '"remote-peer-id":"11dbe0c25c7bc09a","rtt":"0s","error":"x509: certificate is valid for '
            '192.168.17.153, 10.19.157.4, 127.0.0.1, not 10.19.157.3"}'
        ),
        example_source="https://github.com/etcd-io/etcd/issues/12567",
        causes=("etcd.tls",),
        context=_ETCD_CONTEXT,
        subject="{addr}",
        notes=("etcd transport guide: https://etcd.io/docs/v3.5/op-guide/security/",),
    ),
    Message(
        code="ETCD107",
        name="tls-unknown-authority",
        title="TLS certificate signed by an authority the other side does not trust",
        pattern=r"x509: certificate signed by unknown authority",
        trigger="x509: certificate signed by unknown authority",
        meaning="a TLS handshake failed: the certificate's issuer is not in the verifying side's CA bundle",
        cause=(
            "client and server (or two etcd peers) use certificates from different CAs: a CA regenerated "
            "on one node, a wrong --trusted-ca-file / --peer-trusted-ca-file, or a kubeconfig with a stale "
            "certificate-authority-data"
        ),
        fix=(
            "give every member and client the CA that signed the others' certificates (--trusted-ca-file, "
            "--peer-trusted-ca-file, kubeconfig certificate-authority-data); re-issue certificates from "
            "one CA where several were made"
        ),
        verify=("openssl verify -CAfile /etc/etcd/pki/ca.crt /etc/etcd/pki/peer.crt",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=_GO_X509,
        example=(
            "health check for peer ec2a7add58746895 could not connect: x509: certificate signed by unknown "
            'authority (possibly because of "crypto/rsa: verification error" while trying to verify candidate '
            'authority certificate "kubernetes")'
        ),
        example_source="https://github.com/opsnull/follow-me-install-kubernetes-cluster/issues/82",
        causes=("etcd.tls",),
        context=_ETCD_CONTEXT,
    ),
    Message(
        code="ETCD108",
        name="etcd-raft-peer-unreachable",
        title="etcd cannot reach a peer (raft: unreachable)",
        pattern=r"failed to send message to (?P<peer>" + _ID + r") because it is unreachable",
        trigger="because it is unreachable",
        meaning="the raft leader could not deliver messages to a member: that member is down or cut off",
        cause=(
            "the etcd process of that member stopped (killed, crashed, its host down) or the network "
            "between the members drops port 2380"
        ),
        fix=(
            "find why the member stopped on its host (journalctl -u etcd, dmesg for OOM kills, a full disk) "
            "and restart it; if it cannot come back, replace it (etcdctl member remove, then member add)"
        ),
        verify=("etcdctl endpoint health --cluster -w table", "etcdctl member list -w table"),
        severity=Severity.WARNING,
        action=Action.RESTART_SERVICE,
        source=f"{_ETCD}/v3.4.0/raft/raft.go",
        example=(
            "INFO: raft: 4d4ab69f33ba6775 failed to send message to e402adc05fa52b85 because it is unreachable "
            "[next = 47228, match = 0, state = ProgressStateProbe, waiting = false, pendingSnapshot = 0]"
        ),
        example_source="https://github.com/etcd-io/etcd/issues/2790",
        causes=("etcd.member-down",),
        subject="member {peer}",
        layer="control-plane",  # with ETCD007/ETCD009: a member down is a control-plane finding
    ),
    Message(
        code="ETCD109",
        name="etcd-peer-connection-refused",
        title="etcd's connection to a peer's port is refused or times out",
        # rafthttp: roundtripping error / failed to dial X on stream / health check for peer X could not
        # connect / failed to reach the peerURL(...) ... dial tcp <addr>: [connect: ]connection refused
        pattern=(
            r"(?:roundtripping error|failed to dial|health check for peer|failed to reach the peer ?URL"
            r"|prober detected unhealthy status)[^\n]{0,400}?dial tcp (?P<addr>" + _ADDR + r"): "
            r"(?:connect: )?(?:connection refused|i/o timeout|no route to host)"
        ),
        trigger="dial tcp",
        meaning="an etcd member's connections to a peer's address fail (refused, timed out, no route)",
        cause=(
            "nothing listens on the peer's address: the member's etcd process is down, or it listens on "
            "another address or port than the one the cluster has for it, or a firewall blocks port 2380"
        ),
        fix=(
            "check the member at that address: is etcd running (systemctl status etcd), does it listen "
            "on its --listen-peer-urls (ss -ltnp | grep 2380), is the port open between members; restart or "
            "replace the member"
        ),
        verify=("etcdctl endpoint health --cluster -w table",),
        # members starting one after the other refuse each other for seconds: the lines alone are evidence,
        # ETCD009 judges whether a member stayed down (it sees the connection come back)
        severity=Severity.INFO,
        action=Action.RESTART_SERVICE,
        source=f"{_ETCD}/v3.4.0/etcdserver/api/rafthttp/peer_status.go",
        example=(
            "2015/05/06 14:04:26 rafthttp: roundtripping error: error roundtripping to "
            "http://172.17.0.14:2380/raft/stream/msgapp/4d4ab69f33ba6775: dial tcp 172.17.0.14:2380: "
            "connection refused"
        ),
        example_source="https://github.com/etcd-io/etcd/issues/2790",
        causes=("etcd.member-down",),
        subject="{addr}",
        layer="control-plane",
        # evidence of a member down: folded into ETCD009/ETCD108 when they are found, alone it is the finding
        role="symptom",
    ),
    Message(
        code="ETCD110",
        name="tls-handshake-rejected",
        title="TLS handshake rejected: a certificate the other side refuses",
        # etcd embed: rejected connection from "<addr>" (error "...", ServerName "...") and zap
        # "rejected connection" {"error":"remote error: tls: bad certificate"}; gRPC clients: "transport:
        # authentication handshake failed: remote error: tls: bad certificate"
        pattern=(
            r"tls: (?:bad certificate|unknown certificate authority|certificate required|expired certificate"
            r"|failed to verify (?:client's )?certificate|first record does not look like a TLS handshake)"
        ),
        trigger="tls: ",
        meaning="a TLS connection was refused during the handshake because of the certificate presented",
        cause=(
            "the client (or peer) presents no certificate, one from another CA, or one without the "
            "client-auth usage, while the server requires client certificates (--client-cert-auth, "
            "--peer-client-cert-auth); or it dials with the wrong --cert/--key pair; or one side speaks plain "
            "http to the other's https port (first record does not look like a TLS handshake)"
        ),
        fix=(
            "give the client a certificate signed by the server's trusted CA, with clientAuth in its "
            "extended key usage (openssl x509 -noout -purpose), and pass it (--cert, --key, --cacert)"
        ),
        verify=("openssl x509 -in /etc/etcd/pki/peer.crt -noout -purpose -issuer",),
        severity=Severity.WARNING,  # often one misconfigured client (a scraper without certificates)
        action=Action.CONFIGURE,
        source=f"{_ETCD}/v3.4.0/embed/config_logging.go",
        example=(
            '{"level":"warn","ts":"2022-01-06T23:14:33.765Z","caller":"embed/config_logging.go:169",'
            '"msg":"rejected connection","remote-addr":"172.25.143.104:40124","server-name":'
            '"etcd-np02-0.etcd-np02-headless.etcd.svc.cluster.local","error":"remote error: tls: bad certificate"}'
        ),
        example_source="https://github.com/bitnami/charts/issues/8591",
        causes=("etcd.tls",),
        context=_ETCD_CONTEXT,
        confidence=0.8,
    ),
    Message(
        code="ETCD111",
        name="apiserver-storage-backend-failed",
        title="kube-apiserver cannot create its etcd storage backend",
        pattern=r"Unable to create storage backend: config \(.{0,600}?\), err \((?P<err>[^()\n]{1,200})",
        trigger="Unable to create storage backend",
        meaning="kube-apiserver exited at start: it could not reach or use the etcd cluster it stores everything in",
        cause=(
            "etcd is unreachable from the API server (etcd down, wrong --etcd-servers address or port, "
            "a firewall), its TLS client certificate is refused, or no etcd server was given at all "
            "(etcdclient: no available endpoints)"
        ),
        fix=(
            "check --etcd-servers and the etcd client certificates in the kube-apiserver manifest "
            "(/etc/kubernetes/manifests/kube-apiserver.yaml) and that etcd answers there "
            "(etcdctl --endpoints=<the same URL> endpoint health with the same certificates)"
        ),
        verify=(
            "etcdctl endpoint health --cluster -w table",
            "crictl logs $(crictl ps -a --name kube-apiserver -q | head -1)",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=(
            "https://github.com/kubernetes/kubernetes/blob/release-1.13/staging/src/k8s.io/apiserver/pkg/"
            "server/storage/storage_decorator.go"
        ),
        example=(
            "F0508 18:36:00.213324       1 storage_decorator.go:61] Unable to create storage backend: config (&{ "
            "/registry/wardle.kubernetes.io []    false 0 0xc42008d9e0 0xc4202c0600}), err (etcdclient: no "
            "available endpoints)"
        ),
        example_source="https://github.com/kubernetes/sample-apiserver/issues/5",
        causes=("apiserver.etcd-backend",),
        detail="({err})",
    ),
    Message(
        code="ETCD112",
        name="etcd-client-port-refused",
        title="a client cannot connect to etcd's client port (2379)",
        # grpc-go: "grpc: addrConn.createTransport failed to connect to {https://127.0.0.1:2379 ...}. Err
        # :connection error: desc = \"transport: Error while dialing dial tcp 127.0.0.1:2379: connect:
        # connection refused\""
        pattern=(
            r"addrConn\.createTransport failed to connect to \{(?P<endpoint>[\w:/.\-\[\]]{1,200}:2379)\b"
            r"[^\n]{0,300}?(?:connection refused|i/o timeout|no route to host)"
        ),
        trigger="addrConn.createTransport failed to connect to {",
        meaning="a gRPC client of etcd (kube-apiserver, k3s, etcdctl) cannot open a connection to an etcd endpoint",
        cause=(
            "etcd is not running or not listening at that endpoint (crashed, still starting, listening on "
            "another address than --listen-client-urls says), or a firewall drops port 2379"
        ),
        fix=(
            "check etcd on that host (systemctl status etcd, crictl ps -a | grep etcd, its log) and that it "
            "listens on the endpoint the client uses (ss -ltnp | grep 2379)"
        ),
        verify=("etcdctl endpoint health --cluster -w table",),
        severity=Severity.WARNING,
        action=Action.RESTART_SERVICE,
        source="https://github.com/grpc/grpc-go/blob/v1.26.0/clientconn.go",
        example=(
            '{"level":"warn","ts":"2021-06-04T07:03:40.458Z","caller":"grpclog/grpclog.go:60","msg":"grpc: '
            "addrConn.createTransport failed to connect to {https://127.0.0.1:2379  <nil> 0 <nil>}. Err :connection "
            'error: desc = \\"transport: Error while dialing dial tcp 127.0.0.1:2379: connect: connection refused'
            '\\". Reconnecting..."}'
        ),
        example_source="https://github.com/k3d-io/k3d/issues/619",
        causes=("apiserver.etcd-backend",),
        subject="{endpoint}",
        confidence=0.8,
    ),
    Message(
        code="ETCD113",
        name="etcd-wal-sync-slow",
        title="etcd's WAL fsync took longer than a second (slow disk)",
        # capnslog (v3.0-3.3): "wal: sync duration of 1.13s, expected less than 1s"; zap logs "slow fdatasync",
        # which the log parser reads as a timed event for ETCDLOG003
        pattern=r"sync duration of (?P<took>[0-9hmsµun.]{1,40}), expected less than (?P<limit>[0-9hmsµun.]{1,20})",
        trigger="sync duration of",
        meaning="etcd waited longer than a second for its write-ahead log to reach the disk",
        cause=(
            "the disk under the etcd data dir is too slow for etcd (an HDD, a network volume without "
            "provisioned IOPS, a disk shared with busy workloads) or the host's I/O is saturated"
        ),
        fix=(
            "give etcd a dedicated SSD/NVMe (or provisioned-IOPS volume) for its data dir, keep other I/O "
            "off it, ionice -c2 -n0 the etcd process; etcd's docs want a WAL fsync p99 under 10 ms"
        ),
        verify=(
            "etcdctl check perf",
            "fio --name=etcd --rw=write --ioengine=sync --fdatasync=1 --size=22m --bs=2300 --directory=/var/lib/etcd",
        ),
        severity=Severity.WARNING,
        action=Action.REPLACE_HARDWARE,
        source=f"{_ETCD}/v3.3.0/wal/wal.go",
        example="2018-10-25 16:20:35.185438 W | wal: sync duration of 1.134771573s, expected less than 1s",
        example_source="https://github.com/etcd-io/etcd/issues/10215",
        causes=("etcd.slow-disk",),
        detail="({took} > {limit})",
        notes=("etcd hardware guide: https://etcd.io/docs/v3.5/op-guide/hardware/#disks",),
    ),
    Message(
        code="ETCD114",
        name="http-client-to-tls-server",
        title="A client spoke plain HTTP to etcd's TLS port (malformed HTTP response: a TLS alert)",
        # Go net/http transport: "malformed HTTP response %q" when the reply is a TLS record (0x15 alert,
        # 0x16 handshake, version 0x03 0x0N); etcdctl v2 defaults to http://127.0.0.1:2379 and :4001
        pattern=r"malformed HTTP response \"\\x1[56]\\x03\\x0[0-4]",
        trigger="malformed HTTP response",
        meaning=(
            "the client sent plain HTTP and got back a TLS record (an alert): the server on that port "
            "speaks only TLS, so the client never reaches etcd"
        ),
        cause=(
            "etcd serves clients over https only (--cert-file/--key-file, often with client certificates) "
            "while the client uses http:// endpoints or etcdctl's v2 defaults (http://127.0.0.1:2379,4001)"
        ),
        fix=(
            "use https endpoints and the certificates: ETCDCTL_API=3 etcdctl --endpoints=https://<host>:2379 "
            "--cacert=<ca> --cert=<cert> --key=<key> endpoint health"
        ),
        verify=(
            "ETCDCTL_API=3 etcdctl --endpoints=https://<host>:2379 --cacert=<ca> --cert=<c> --key=<k> endpoint health",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/golang/go/blob/master/src/net/http/transport.go",
        example='; error #1: malformed HTTP response "\\x15\\x03\\x01\\x00\\x02\\x02"',
        example_source="https://github.com/kairen/kube-ansible/issues/70",
        causes=("etcd.tls",),
        confidence=0.85,
    ),
    Message(
        code="ETCD115",
        name="raft-tocommit-out-of-range",
        title="etcd panics: the leader's commit index is beyond this member's raft log (its data was lost)",
        pattern=(
            r"tocommit\((?P<tocommit>\d{1,20})\) is out of range \[lastIndex\((?P<last>\d{1,20})\)\]\. "
            r"Was the raft log corrupted, truncated, or lost\?"
        ),
        trigger="is out of range [lastIndex(",
        meaning=(
            "a follower received a heartbeat committing entries its raft log does not have: its log is far "
            "shorter than the cluster's, so raft panics and the member crash-loops"
        ),
        cause=(
            "the member's data directory was wiped or replaced (a new disk, an emptyDir, a restore of one member) "
            "and it restarted under its old member ID without being removed and re-added"
        ),
        fix=(
            "remove the member (etcdctl member remove <id>), add it back (etcdctl member add), and start it "
            "with an empty data dir and --initial-cluster-state=existing; keep member data on persistent disks"
        ),
        verify=("etcdctl member list -w table", "etcdctl endpoint status --cluster -w table"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/etcd-io/raft/blob/main/log.go",
        example="panic: tocommit(458) is out of range [lastIndex(3)]. Was the raft log corrupted, truncated, or lost?",
        example_source="https://github.com/etcd-io/etcd/issues/13509",
        causes=("etcd.member-config",),
    ),
    Message(
        code="ETCD116",
        name="client-endpoint-without-scheme",
        title="A client was given an endpoint without http(s):// (unsupported protocol scheme)",
        # Go net/http: `unsupported protocol scheme %q`; a bare "host:2379" parses with the host as the scheme
        pattern=r"unsupported protocol scheme \\?\"(?P<scheme>[^\"\\\s]{1,253})\\?\"",
        trigger="unsupported protocol scheme",
        meaning=(
            "the endpoint string has no http:// or https:// in front, so Go parses its host name as the URL "
            "scheme and refuses it: the client never connects"
        ),
        cause=(
            "--endpoints/--peers (etcdctl), ETCDCTL_ENDPOINTS or an application's etcd URL set to host:port "
            "(often from a variable meant to hold an IP or a full URL)"
        ),
        fix="give full URLs: --endpoints=http://<host>:2379 (or https:// with the TLS flags)",
        verify=("etcdctl --endpoints=http://<host>:2379 endpoint health",),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source="https://github.com/golang/go/blob/master/src/net/http/transport.go",
        example='Error:  unsupported protocol scheme "vm01.prod"',
        example_source="https://github.com/ceph/ceph-container/issues/758",
        causes=("etcd.client-config",),
        subject="{scheme}",
    ),
    Message(
        code="ETCD117",
        name="check-perf-failed",
        title="etcdctl check perf failed: the cluster cannot sustain the test's write load (disk or network too slow)",
        # etcdctl/ctlv3/command/check.go: "FAIL: Throughput too low: %d writes/s", "Slowest request took too
        # long: %fs" (> 500 ms), "Stddev too high: %fs" (> 100 ms)
        pattern=r"FAIL: Throughput too low: (?P<wps>\d{1,9}) writes/s",
        trigger="FAIL: Throughput too low",
        triggers=("Slowest request took too long: ", "Stddev too high: "),
        variants=(
            r"^\s{0,8}Slowest request took too long: (?P<slowest>\d{1,6}(?:\.\d{1,9})?)s",
            r"^\s{0,8}Stddev too high: (?P<stddev>\d{1,6}(?:\.\d{1,9})?)s",
        ),
        meaning=(
            "etcd's own benchmark wrote below 90% of the load's target rate, or a write took over 500 ms, or "
            "the latency spread exceeded 100 ms: the members commit too slowly for that cluster size"
        ),
        cause="slow WAL fsyncs (HDD, network or burstable volumes, a shared disk), an overloaded member, or a slow network between members",
        fix="move the etcd data dir (at least --wal-dir) to a dedicated SSD/NVMe with low fsync latency; keep other I/O off it",
        verify=(
            "etcdctl check perf",
            "fio --rw=write --ioengine=sync --fdatasync=1 --size=22m --bs=2300 --name=etcd",
        ),
        severity=Severity.WARNING,
        action=Action.REPLACE_HARDWARE,
        source=f"{_ETCD}/main/etcdctl/ctlv3/command/check.go",
        example="FAIL: Throughput too low: 72 writes/s",
        notes=("example: etcdctl check perf quoted in a public write-up of a home-lab cluster's disks",),
        causes=("etcd.slow-disk",),
        detail="({wps} writes/s)",
    ),
    Message(
        code="ETCD118",
        name="check-perf-passed",
        title="etcdctl check perf passed (the members commit the test's load in time)",
        pattern=r"PASS: Throughput is (?P<wps>\d{1,9}) writes/s",
        trigger="PASS: Throughput is ",
        meaning="etcd's own benchmark sustained the target write rate: disk and network are fast enough for that load",
        cause="nothing: a healthy result (look at its Slowest request and Stddev lines too)",
        fix="nothing to fix",
        verify=("etcdctl check perf",),
        severity=Severity.INFO,
        action=Action.NONE,
        source=f"{_ETCD}/main/etcdctl/ctlv3/command/check.go",
        example="PASS: Throughput is 146 writes/s",
        notes=("example: etcdctl check perf quoted in a public salt/etcd setup guide",),
        detail="({wps} writes/s)",
        confidence=0.3,
    ),
    Message(
        code="ETCD119",
        name="etcd-v2-client-cluster-unavailable",
        title="etcdctl (v2 API) reached no member: 'etcd cluster is unavailable or misconfigured'",
        # client/v2 client.go: ErrClusterUnavailable, printed with each endpoint's error ("error #0: ...");
        # etcdctl v2 cluster-health first prints "cluster may be unhealthy: failed to list members"
        pattern=r"etcd cluster is unavailable or misconfigured(?:; error #0: (?P<why>[^\n]{1,200}))?",
        trigger="etcd cluster is unavailable or misconfigured",
        meaning="the v2 client tried every endpoint and none answered its request",
        cause=(
            "the client cannot talk to the members it was given: its TLS settings do not match the "
            "members' (http:// to a member that serves only TLS never gets a response header, or the "
            "certificates are invalid for that CA/host), the endpoints are wrong (the default "
            "127.0.0.1:2379 and :4001 where etcd listens elsewhere), or every member is down"
        ),
        fix=(
            "use the members' client URLs with https:// and --ca-file/--cert-file/--key-file of the "
            "cluster's CA (v3: --cacert/--cert/--key), check the certificates' SANs cover the endpoint, and "
            "check each member runs (systemctl status etcd)"
        ),
        verify=(
            "etcdctl --endpoints https://<member>:2379 --cacert ca.pem --cert c.pem --key k.pem endpoint health",
            "openssl x509 -in <member cert> -noout -text | grep -A1 'Subject Alternative Name'",
        ),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_ETCD}/release-3.4/client/client.go (ErrClusterUnavailable); etcdctl/ctlv2/command/cluster_health.go",
        example=(
            "error: client: etcd cluster is unavailable or misconfigured; error #0: client: endpoint "
            "http:/127.0.0.1:2379 exceeded header timeout"
        ),
        example_source="https://github.com/kelseyhightower/kubernetes-the-hard-way/issues/223",
        causes=("etcd.tls", "etcd.client-config", "etcd.member-down"),
        detail="({why})",
        confidence=0.7,
    ),
    Message(
        code="ETCD120",
        name="etcd-member-removed",
        title="This etcd member was removed from the cluster but still runs with its old data dir",
        # etcdserver/server.go (capnslog): "the member has been permanently removed from the cluster" then
        # "the data-dir used by this member must be removed."; etcdserver/errors.go ErrMemberRemoved (the
        # same words, in rafthttp's "failed to dial ... (the member has been permanently removed from the
        # cluster)"); rafthttp/http.go: "streaming request ignored (ID mismatch got %s want %s)", zap:
        # "ignored streaming request; ID mismatch"; rafthttp: "rejected the stream from peer %s since it was
        # removed", zap "rejected stream from remote peer because it was removed"
        pattern=(
            r"^(?:[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d{1,9})? (?P<host>[\w.\-]{1,128}) "
            r"etcd\[\d{1,10}\]: )?[^\n]{0,200}?the (?:member has been permanently removed from the cluster|"
            r"data-dir used by this member must be removed)"
        ),
        trigger="the member has been permanently removed",
        triggers=("data-dir used by this member must be removed", "ID mismatch got", "ID mismatch"),
        variants=(
            r"^(?:[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d{1,9})? (?P<host2>[\w.\-]{1,128}) "
            r"etcd\[\d{1,10}\]: )?[^\n]{0,200}?streaming request ignored \(ID mismatch got (?P<got>[0-9a-f]{1,16}) "
            r"want (?P<want>[0-9a-f]{1,16})\)",
            r"ignored streaming request; ID mismatch",
        ),
        meaning=(
            "the cluster removed this member (etcdctl member remove), yet it was started again with the data "
            "dir and member ID it had: its peers refuse its streams, it cannot rejoin and stops"
        ),
        cause=(
            "a member re-added or restarted after removal without wiping its data dir (it keeps the old member "
            "ID), or a stale member entry that was removed by mistake"
        ),
        fix=(
            "stop the member, delete (or move away) its data dir, add it again (etcdctl member add <name> "
            "--peer-urls=...) and start it with --initial-cluster-state=existing and the member list that add "
            "prints"
        ),
        verify=("etcdctl member list -w table", "etcdctl endpoint status --cluster -w table"),
        severity=Severity.CRITICAL,
        action=Action.CONFIGURE,
        source=f"{_ETCD}/v3.3.0/etcdserver/server.go (ErrMemberRemoved: etcdserver/errors.go); "
        "https://etcd.io/docs/v3.5/op-guide/runtime-configuration/#remove-a-member",
        example="Apr 23 03:18:36.522337 mn-1 etcd[1753]: the member has been permanently removed from the cluster",
        example_source="https://github.com/etcd-io/etcd/issues/9613",
        causes=("etcd.member-config",),
        subject="{host}",
    ),
    Message(
        code="ETCD121",
        name="etcd-request-too-large",
        title="etcd refuses a request larger than its request size limit",
        # api/v3rpc/rpctypes: ErrGRPCRequestTooLarge = "etcdserver: request is too large"
        pattern=r"etcdserver: request is too large",
        trigger="etcdserver: request is too large",
        meaning=(
            "etcd rejected a write (or a transaction) bigger than --max-request-bytes (1.5 MiB by default); "
            "the client's create/update fails, through kube-apiserver as a 500 or 413"
        ),
        cause=(
            "one object is too large for etcd: a ConfigMap or Secret near 1 MiB, a Helm release secret of a "
            "big chart, a custom resource whose status keeps growing (workflow nodes, large annotations such "
            "as last-applied-configuration), or an application storing blobs in etcd"
        ),
        fix=(
            "make the object smaller (split the ConfigMap, keep data out of annotations, prune the status, "
            "use server-side apply instead of kubectl.kubernetes.io/last-applied-configuration); raise "
            "--max-request-bytes on every member only as a last resort (the clients' limits too)"
        ),
        verify=("kubectl get <kind> <name> -o json | wc -c", "etcdctl endpoint status -w table"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://etcd.io/docs/v3.5/dev-guide/limit/",
        example=(
            'error creating volume agroblock2: rpc error: code = 3 desc = "etcdserver: request is too large"'
        ),
        example_source="https://github.com/coreos/torus/issues/120",
        causes=("etcd.request-too-large",),
    ),
)
