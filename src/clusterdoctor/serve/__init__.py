"""Long-running services: the node agent (Prometheus exporter of findings) and the kube-scheduler extender."""
