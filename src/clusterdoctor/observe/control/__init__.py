"""Control plane: Prometheus text and API, /metrics scrapes, etcd (etcdctl), Kubernetes objects, etcd/kubelet/containerd logs."""
