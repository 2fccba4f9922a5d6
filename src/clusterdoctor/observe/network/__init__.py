"""Network / RDMA: InfiniBand/RoCE port counters, queue pairs, ethtool -S and DPDK xstats; port and GID
listings (ibstat, ibstatus, ibv_devinfo, rdma link, show_gids, ibdev2netdev, lshca), perftest and
ucx_info -d output."""
