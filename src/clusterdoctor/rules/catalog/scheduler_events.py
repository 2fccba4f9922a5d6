"""kube-scheduler's reasons why a pod cannot be placed (the ``FailedScheduling`` event and the pod's
``PodScheduled=False`` condition message), as data.

The message is ``0/N nodes are available: <count> <reason>, <count> <reason>...`` (1.10+; older releases
printed ``No nodes are available that match all of the following predicates:: <reason> (<count>)``). Each
reason comes from one filter plugin of kubernetes/kubernetes ``pkg/scheduler/framework/plugins``:
``noderesources/fit.go`` (``Insufficient <resource>``), ``tainttoleration/taint_toleration.go``
(``node(s) had untolerated taint {key: value}``; before 1.26 ``node(s) had taint {key: value}, that the pod
didn't tolerate``; before 1.14 ``node(s) had taints that the pod didn't tolerate``),
``nodeaffinity/node_affinity.go``, ``interpodaffinity``, ``podtopologyspread``, ``volumebinding``,
``nodeunschedulable/node_unschedulable.go``. One entry per reason; the count in front of it (``count_before``) is the
entry's ``rank_group``: of several reasons in one message, the one that rules out most nodes leads.
Kueue's admission (the ``kueue-admission`` Pending event and the workload's condition, ``couldn't assign
flavors to pod set ...``) is the queue-level step before the scheduler and is read here too. Example lines
are from public issue threads, each named in ``example_source``.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_PLUGINS = "https://github.com/kubernetes/kubernetes/blob/master/pkg/scheduler/framework/plugins"
_TAINT_DOC = "https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/"
# a resource name as Kubernetes spells one: a standard name or an extended resource <domain>/<name>
# (nvidia.com/gpu); a full stop that ends the sentence is not part of it
_RES = (
    r"(?:cpu|memory|ephemeral-storage|pods|storage|hugepages-\w{1,20}"
    r"|[a-z0-9][\w\-]{0,62}(?:\.[\w\-]{1,62}){0,6}/[\w\-]{1,62}(?:\.[\w\-]{1,62}){0,3})"
)
_VERIFY = ("kubectl describe pod <pod>", "kubectl describe nodes | grep -A6 -E 'Taints|Allocated resources'")

MESSAGES: tuple[Message, ...] = (
    Message(
        code="SCHED101",
        name="sched-insufficient-resource",
        title="no node has enough of a resource the pod requests",
        pattern=r"Insufficient (?P<resource>" + _RES + r")",
        trigger="Insufficient ",
        meaning="the scheduler found nodes without enough free (allocatable minus requested) of a resource",
        cause=(
            "the pod requests more of the resource than any node has unreserved: other pods' requests "
            "fill the nodes, the request is larger than a node (a GPU count above the GPUs per node), or "
            "the nodes do not advertise the extended resource at all (nvidia.com/gpu needs the NVIDIA "
            "device plugin running and registered)"
        ),
        fix=(
            "lower the request or free capacity (kubectl describe nodes: Allocated resources), add nodes, "
            "or, for nvidia.com/gpu, check that the nodes' Allocatable lists it (device plugin pods running)"
        ),
        verify=_VERIFY,
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/noderesources/fit.go",
        example=(
            "There are no nodes that your pod can schedule to - check your requests, tolerations, and node "
            "selectors (0/31 nodes are available: 28 Insufficient cpu, 3 node(s) had untolerated taint "
            "{node-group: stable}. preemption: 0/31 nodes are available: 28 No preemption victims found for "
            "incoming pod, 3 Preemption is not helpful for scheduling..)"
        ),
        example_source="https://github.com/kubernetes/test-infra/pull/32945",
        causes=("sched.insufficient-resource",),
        detail="({count} node(s) short of {resource})",
        rank_group="count",
        count_before=True,
    ),
    Message(
        code="SCHED102",
        name="sched-untolerated-taint",
        title="the pod does not tolerate a taint of the nodes",
        pattern=(
            r"node\(s\) had (?:untolerated taint(?:\(s\))?|taints? that the pod didn't tolerate"
            r"|taint)(?: \{(?!node-role\.kubernetes\.io/|node\.kubernetes\.io/(?!unschedulable))"
            r"(?P<taint>[^{}\n]{0,200})\}|(?! \{))"
        ),
        trigger="node(s) had ",
        meaning="the scheduler excluded nodes whose taints the pod has no toleration for",
        cause=(
            "the nodes carry a taint (a dedicated pool, a GPU node taint such as nvidia.com/gpu=present on "
            "GKE, a cloud provider's uninitialized taint) and the pod spec has no matching toleration"
        ),
        fix=(
            "add the toleration to the pod template (tolerations: key/operator/value/effect as the node's "
            "taint), or remove the taint if the nodes should take any pod (kubectl taint nodes <node> <key>-)"
        ),
        verify=_VERIFY,
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/tainttoleration/taint_toleration.go",
        example=(
            "FailedScheduling   2m21s (x42 over 60m)  default-scheduler  1 node(s) had untolerated taint "
            "{nvidia.com/gpu: present}"
        ),
        example_source="https://github.com/vllm-project/aibrix/pull/909",
        causes=("sched.taint-or-affinity",),
        detail="({count} node(s), taint {taint})",
        rank_group="count",
        count_before=True,
        notes=(_TAINT_DOC,),
    ),
    Message(
        code="SCHED103",
        name="sched-control-plane-taint",
        title="the only nodes left are control-plane nodes, which take no ordinary pods",
        pattern=(
            r"node\(s\) had (?:untolerated )?taints? "
            r"\{node-role\.kubernetes\.io/(?P<role>master|control-plane)"
        ),
        trigger="node(s) had ",
        meaning="the scheduler excluded control-plane nodes (their node-role taint keeps ordinary pods off them)",
        cause=(
            "excluding control-plane nodes is by design; it is the cause only when no worker node is left: "
            "a single-node cluster, or workers that are not joined, NotReady or ruled out for another reason"
        ),
        fix=(
            "join or repair worker nodes; on a single-node cluster, remove the taint "
            "(kubectl taint nodes --all node-role.kubernetes.io/control-plane-)"
        ),
        verify=("kubectl get nodes -o wide", "kubectl describe nodes | grep Taints"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/tainttoleration/taint_toleration.go",
        example=(
            " Warning  FailedScheduling  61s (x2 over 6m23s)  default-scheduler  0/1 nodes are available: 1 "
            "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: 0/1 nodes "
            "are available: 1 Preemption is not helpful for scheduling.."
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/116133",
        causes=("sched.taint-or-affinity",),
        detail="({count} {role} node(s))",
        rank_group="count",
        count_before=True,
        confidence=0.6,  # by design on every cluster: another reason in the same message leads
    ),
    Message(
        code="SCHED104",
        name="sched-node-pressure-taint",
        title="nodes under disk, memory or PID pressure take no new pods",
        pattern=(
            r"node\(s\) had (?:untolerated )?taints? "
            r"\{node\.kubernetes\.io/(?P<condition>disk-pressure|memory-pressure|pid-pressure)"
        ),
        trigger="node(s) had ",
        meaning="the scheduler excluded nodes that the kubelet tainted for crossing an eviction threshold",
        cause=(
            "the node is short of disk (nodefs/imagefs), memory or PIDs: the kubelet sets the pressure taint "
            "when a hard eviction threshold is crossed, evicts pods, and lifts it when the pressure ends"
        ),
        fix=(
            "free the resource on the node (images: crictl rmi --prune; logs; emptyDirs) or enlarge it; the "
            "taint goes away by itself once the kubelet sees the pressure gone"
        ),
        verify=(
            "kubectl describe node <node> | grep -A8 Conditions",
            "df -h /var/lib/kubelet /var/lib/containerd",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/tainttoleration/taint_toleration.go",
        example=(
            "Warning  FailedScheduling  4s    default-scheduler  0/1 nodes are available: 1 node(s) had taint "
            "{node.kubernetes.io/disk-pressure: }, that the pod didn't tolerate."
        ),
        example_source="https://github.com/snowdrop/k8s-infra/issues/249",
        causes=("kubelet.eviction",),
        detail="({count} node(s) with {condition})",
        rank_group="count",
        count_before=True,
        notes=(
            "taint set by the kubelet's eviction manager: https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/",
        ),
    ),
    Message(
        code="SCHED105",
        name="sched-node-not-ready-taint",
        title="nodes that are NotReady or unreachable take no new pods",
        pattern=(
            r"node\(s\) had (?:untolerated )?taints? "
            r"\{node\.kubernetes\.io/(?P<condition>not-ready|unreachable|network-unavailable|out-of-disk)"
        ),
        trigger="node(s) had ",
        meaning="the scheduler excluded nodes that the node controller tainted as NotReady or unreachable",
        cause=(
            "the node's kubelet stopped reporting Ready (runtime or CNI down, kubelet stopped, node off the "
            "network); the node's own condition says why"
        ),
        fix="repair the node: kubectl describe node shows its Ready condition's reason; check the kubelet and runtime there",
        verify=("kubectl get nodes", "kubectl describe node <node> | grep -A8 Conditions"),
        severity=Severity.WARNING,
        action=Action.RESTART_SERVICE,
        source=f"{_PLUGINS}/tainttoleration/taint_toleration.go",
        example=(
            "39h         Warning   FailedScheduling          pod/ohsu-7ffd6bcb7f-mnsjf                      "
            "                            0/1 nodes are available: 1 node(s) had untolerated taint "
            "{node.kubernetes.io/unreachable: }. preemption: 0/1 nodes are available: 1 Preemption is not "
            "helpful for scheduling."
        ),
        example_source="https://github.com/hystax/optscale/issues/568",
        role="symptom",
        detail="({count} node(s) {condition})",
        rank_group="count",
        count_before=True,
    ),
    Message(
        code="SCHED106",
        name="sched-affinity-mismatch",
        title="the pod's node selector or affinity rules exclude the nodes",
        pattern=(
            r"node\(s\) (?:didn't match (?P<rule>Pod's node affinity(?:/selector)?|node selector"
            r"|pod affinity(?:/anti-affinity)?(?: rules)?|pod anti-affinity rules|pod topology spread constraints"
            r"|PersistentVolume's node affinity)|(?P<rule2>didn't satisfy existing pods anti-affinity rules"
            r"|had volume node affinity conflict))"
        ),
        trigger="node(s) ",
        meaning="the scheduler excluded nodes that the pod's nodeSelector, node affinity, pod (anti-)affinity, spread constraints or volumes' zones rule out",
        cause=(
            "the pod asks for labels no (free) node has (a typo, a label never applied, a GPU product label "
            "that differs), anti-affinity with pods already on every node, or a PersistentVolume bound in "
            "another zone than the nodes"
        ),
        fix=(
            "compare the pod's nodeSelector/affinity with the nodes' labels (kubectl get nodes --show-labels) "
            "and fix either; for a volume conflict, create the volume in the nodes' zone or use "
            "volumeBindingMode: WaitForFirstConsumer"
        ),
        verify=("kubectl get nodes --show-labels", "kubectl get pod <pod> -o jsonpath='{.spec.affinity}'"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/nodeaffinity/node_affinity.go",
        example=(
            "11s   Warning FailedScheduling pod/nmap     0/20 nodes are available: 1 node(s) didn't match pod "
            "affinity/anti-affinity, 19 node(s) didn't match node selector."
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/100400",
        causes=("sched.taint-or-affinity",),
        detail="({count} node(s): {rule})",
        rank_group="count",
        count_before=True,
        # a selector or affinity excludes nodes by the pod's own intent: when the same message gives the
        # nodes it targets another reason (Insufficient cpu, a taint), that reason leads
        confidence=0.8,
    ),
    Message(
        code="SCHED107",
        name="sched-nodes-unschedulable",
        title="nodes are cordoned (marked unschedulable)",
        pattern=r"node\(s\) were unschedulable",
        trigger="node(s) were unschedulable",
        meaning="the scheduler excluded nodes marked unschedulable (kubectl cordon, a drain in progress)",
        cause="the nodes were cordoned or are being drained and were never uncordoned",
        fix="uncordon the nodes that should take pods again (kubectl uncordon <node>)",
        verify=("kubectl get nodes",),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/nodeunschedulable/node_unschedulable.go",
        example="0/5 nodes are available: 2 node(s) were unschedulable, 3 Insufficient pods.",
        example_source="https://github.com/kubernetes/kubernetes/issues/107194",
        causes=("sched.taint-or-affinity",),
        detail="({count} node(s) cordoned)",
        rank_group="count",
        count_before=True,
    ),
    Message(
        code="SCHED108",
        name="sched-insufficient-resource-legacy",
        title="no node has enough of a resource the pod requests (scheduler before 1.10)",
        # "No nodes are available that match all of the following predicates:: Insufficient cpu (9), ..."
        # and "fit failure summary on nodes : Insufficient pods (2), ...": the count follows the reason
        pattern=r"Insufficient (?P<resource>" + _RES + r") \((?P<nodes>\d{1,6})\)",
        trigger="Insufficient ",
        meaning="the scheduler found nodes without enough free (allocatable minus requested) of a resource",
        cause=(
            "the pod requests more of the resource than any node has unreserved: other pods' requests fill "
            "the nodes, or the request is larger than a node"
        ),
        fix="lower the request or free capacity (kubectl describe nodes: Allocated resources), or add nodes",
        verify=_VERIFY,
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/kubernetes/kubernetes/blob/release-1.9/plugin/pkg/scheduler/algorithm/predicates/error.go",
        example=(
            "  2h\t\t48m\t\t7\tdefault-scheduler\t\t\tWarning\t\tFailedScheduling\tNo nodes are available that "
            "match all of the following predicates:: Insufficient cpu (9), Insufficient memory (15), "
            "MatchNodeSelector (18)."
        ),
        example_source="https://github.com/argoproj/argo-workflows/issues/190",
        causes=("sched.insufficient-resource",),
        detail="({nodes} node(s) short of {resource})",
        rank_group="nodes",
    ),
    Message(
        code="SCHED109",
        name="sched-selector-excludes-every-node",
        title="the pod's node selector or affinity excludes every node of the cluster",
        # the same FailedScheduling message (schedule_one.go FitError) when the selector count equals the
        # node count: no node is left for any other reason to matter
        pattern=(
            r"0/(?P<total>\d{1,6}) nodes are available: (?:[^.\n]{0,400}?, )?(?P=total) node\(s\) didn't match "
            r"(?P<rule>Pod's node affinity(?:/selector)?|node selector)"
        ),
        trigger=" nodes are available: ",
        meaning="no node of the cluster carries the labels the pod's nodeSelector/node affinity asks for",
        cause=(
            "a label that no node has: a typo, a label never applied (kubectl label node), or a GPU product / "
            "instance-type label whose value differs from the one the pod names"
        ),
        fix="compare the pod's nodeSelector/affinity with kubectl get nodes --show-labels; label the nodes or fix the pod",
        verify=(
            "kubectl get nodes --show-labels",
            "kubectl get pod <pod> -o jsonpath='{.spec.nodeSelector}'",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/nodeaffinity/node_affinity.go",
        example=(
            "message: '0/10 nodes are available: 10 node(s) didn't match node selector, 4 Insufficient cpu.'"
        ),
        example_source="https://github.com/kubernetes/kubernetes/issues/49896",
        causes=("sched.taint-or-affinity",),
        detail="({total} of {total} node(s): {rule})",
        rank_group="total",
    ),
    Message(
        code="SCHED110",
        name="sched-volcano-queue-overused",
        title="Volcano holds the job back: its queue's resources are used up (queue overused)",
        # Volcano's enqueue/allocate actions record this on the PodGroup when the queue's allocated plus
        # the job's minResources pass the queue's share (proportion/capacity plugins' overused check)
        pattern=r"resource in cluster is overused",
        trigger="resource in cluster is overused",
        meaning=(
            "Volcano did not enqueue or allocate the pod group because its queue is overused: what the "
            "queue's running and admitted pod groups hold (their minResources) already reaches the queue's "
            "deserved share or capability"
        ),
        cause=(
            "the queue is full: other jobs of the queue hold its share, or pod groups whose pods have "
            "finished or were deleted still count against it (stale PodGroups), or the queue's "
            "capability/weight is set below what the job needs"
        ),
        fix=(
            "list the queue's pod groups (kubectl get podgroups -A) and delete those of finished jobs; raise "
            "the queue's capability or weight if the job should fit"
        ),
        verify=(
            "kubectl get podgroups -A -o wide",
            "kubectl get queue <queue> -o yaml",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://volcano.sh/en/docs/queue_resource_management/",
        example="Normal   Unschedulable  17s (x13 over 29s)  volcano  resource in cluster is overused",
        example_source="https://github.com/volcano-sh/volcano/issues/2633",
        causes=("sched.insufficient-resource",),
    ),
    Message(
        code="SCHED111",
        name="sched-unbound-immediate-pvc",
        title="the pod waits for a PersistentVolumeClaim that is not bound",
        # plugins/volumebinding: ErrReasonBindConflict / "pod has unbound immediate PersistentVolumeClaims"
        pattern=r"pod has unbound immediate PersistentVolumeClaims",
        trigger="pod has unbound immediate PersistentVolumeClaims",
        meaning=(
            "the scheduler will not place the pod: a claim it mounts has Immediate binding and is still "
            "Pending (no PersistentVolume bound to it), so the pod stays Pending"
        ),
        cause=(
            "nothing can satisfy the claim: no StorageClass named (and no default StorageClass) or a class "
            "whose provisioner is not installed/running, no static PV of the size, access mode and class the "
            "claim asks for, or a provisioner that fails (its log says why)"
        ),
        fix=(
            "kubectl describe pvc <claim> names why it is Pending: install or fix the provisioner, set a "
            "default StorageClass or name one in the claim, or create a PV that matches; use "
            "volumeBindingMode: WaitForFirstConsumer for topology-bound storage"
        ),
        verify=("kubectl get pvc -A | grep -v Bound", "kubectl get storageclass"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/volumebinding/volume_binding.go",
        example=(
            "  Warning  FailedScheduling        2m58s                default-scheduler        0/3 nodes are "
            "available: 3 pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: "
            "3 Preemption is not helpful for scheduling."
        ),
        example_source="https://github.com/radondb/radondb-mysql-kubernetes/issues/524",
        causes=("k8s.volume-mount",),
    ),
    Message(
        code="SCHED112",
        name="sched-too-many-pods",
        title="the nodes are at their pod limit (Too many pods)",
        # plugins/noderesources/fit.go: "Too many pods" when the node's allowed pod number is reached
        pattern=r"Too many pods",
        trigger="Too many pods",
        meaning="the scheduler found nodes already running as many pods as they allow (status.allocatable.pods)",
        cause=(
            "the node's pod capacity is used up although CPU and memory are free: the kubelet's maxPods "
            "(110 by default) or, on EKS, the ENI/IP-based pod limit of the instance type, filled by many "
            "small pods (DaemonSets, finished Job pods are not counted but sidecars and pods of other "
            "tenants are)"
        ),
        fix=(
            "add nodes or spread the pods; raise the kubelet's maxPods where the pod network has addresses "
            "for it (EKS: prefix delegation or a larger instance type)"
        ),
        verify=_VERIFY,
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=f"{_PLUGINS}/noderesources/fit.go",
        example=(
            "0/7 nodes are available: 1 Too many pods, 6 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/7 nodes are available: 1 No preemption victims found for incoming pod, 6 Preemption "
            "is not helpful for scheduling."
        ),
        example_source="https://github.com/Panfactum/stack/issues/129",
        causes=("sched.insufficient-resource",),
        detail="({count} node(s) at their pod limit)",
        rank_group="count",
        count_before=True,
    ),
    Message(
        code="SCHED113",
        name="kueue-resource-not-in-clusterqueue",
        title="Kueue cannot admit the workload: its ClusterQueue does not cover a resource it requests",
        # kueue pkg/scheduler/flavorassigner/flavorassigner.go: the workload's pending condition and the
        # kueue-admission event are "couldn't assign flavors to pod set %s: %s", where a resource that no
        # resource group of the ClusterQueue lists (coveredResources) reads "resource %s unavailable in
        # ClusterQueue"
        pattern=(
            r"couldn't assign flavors to pod set (?P<podset>[\w.\-]{1,63}): (?:[^\n]{0,300}?)"
            r"resource (?P<resource>" + _RES + r") unavailable in ClusterQueue"
        ),
        trigger="unavailable in ClusterQueue",
        meaning=(
            "Kueue's admission found no flavor for a resource the workload's pod set requests, because the "
            "ClusterQueue has no resource group that covers that resource; the workload stays Pending (suspended)"
        ),
        cause=(
            "the ClusterQueue's resourceGroups[*].coveredResources omit a resource the pods request: a queue "
            "made for the accelerator only (nvidia.com/gpu, google.com/tpu) while the pods also request cpu "
            "and memory, or a resource name misspelt in the queue"
        ),
        fix=(
            "add the resource to a resource group of the ClusterQueue (coveredResources and a nominalQuota "
            "per flavor; a very large quota if it is not meant to be limited), or drop the request from the "
            "pod template"
        ),
        verify=(
            "kubectl get clusterqueue <cq> -o yaml  # spec.resourceGroups[*].coveredResources",
            "kubectl get workloads -A; kubectl describe workload <wl>",
        ),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source=(
            "https://github.com/kubernetes-sigs/kueue/blob/main/pkg/scheduler/flavorassigner/flavorassigner.go; "
            "https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#resources"
        ),
        example=(
            "  Warning  Pending  4m23s (x3 over 4m23s)  kueue-admission  couldn't assign flavors to pod set "
            "job: resource cpu unavailable in ClusterQueue"
        ),
        example_source="https://github.com/AI-Hypercomputer/xpk/issues/603",
        causes=("kueue.resource-not-covered",),
        detail="({resource} not covered)",
    ),
)
