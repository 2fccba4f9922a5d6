"""GPU health (data plane): dcgm-exporter, nvidia-smi -q, query-gpu CSV, Xid kernel logs, nvlink, lspci, dcgmi."""
