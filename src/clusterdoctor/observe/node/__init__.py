"""One node's topology and placement: sysfs, procfs, hwloc XML, nvidia-smi topo -m, NCCL topology XML, numactl -H, NVML."""
