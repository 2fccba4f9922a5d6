"""Network / RDMA: InfiniBand/RoCE port counters, queue pairs, ethtool -S and DPDK xstats."""
