"""NCCL's messages about the host libraries it loads at init, as data: rdma-core's libibverbs (without it
NCCL has no IB/RoCE transport and falls back to TCP sockets).

Wording from NVIDIA/nccl ``src/misc/ibvwrap.cc`` (``Failed to open libibverbs.so[.1]``: a WARN up to
2.7, an INFO line since), example lines from public threads. Part of the nccl family:
:mod:`clusterdoctor.rules.catalog.nccl` merges these entries into its ``MESSAGES`` in code order.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

LIB_MESSAGES: tuple[Message, ...] = (
    Message(
        code="NCCL130",
        name="nccl-no-libibverbs",
        title="NCCL cannot load libibverbs: no IB/RoCE transport, traffic goes over TCP sockets",
        pattern=r"Failed to open libibverbs\.so\[\.1\]",
        trigger="Failed to open libibverbs.so",
        meaning=(
            "NCCL's dlopen of rdma-core's verbs library failed, so the IB plugin is not loaded and NCCL uses "
            "NET/Socket between nodes (NCCL INFO NET/Socket : Using ... follows): on an InfiniBand/RoCE "
            "cluster inter-node bandwidth drops to what TCP on that interface gives"
        ),
        cause=(
            "the user-space RDMA libraries are not installed where the process runs: a container image "
            "without libibverbs1/ibverbs-providers (rdma-core), or a host without them; harmless on nodes "
            "that have no RDMA NIC (or on AWS EFA, which NCCL reaches through aws-ofi-nccl)"
        ),
        fix=(
            "install rdma-core's libraries in the image (apt-get install libibverbs1 ibverbs-providers, or "
            "the MOFED/DOCA user space matching the host) and give the container the RDMA devices; check "
            "with NCCL_DEBUG=INFO that NET/IB is used"
        ),
        verify=("ldconfig -p | grep libibverbs", "NCCL_DEBUG=INFO <job> 2>&1 | grep -E 'NET/IB|NET/Socket'"),
        # the line alone cannot tell an RDMA node (bandwidth lost) from one without RDMA NICs (harmless)
        severity=Severity.INFO,
        action=Action.CONFIGURE,
        source="https://github.com/NVIDIA/nccl/blob/master/src/misc/ibvwrap.cc",
        example=(
            "26a46eb2b1d3:111329:111329 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]"
        ),
        example_source="https://github.com/NVIDIA/nccl/issues/367",
        causes=("rdma.driver-or-module",),
        confidence=0.6,
    ),
)
