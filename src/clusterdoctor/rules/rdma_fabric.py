"""libfabric's view of the host (``fi_info_failures``: fi_info printing only fi_getinfo's error code)."""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input(
    "fi_info_failures", "no failed fi_info run (fi_info -p <provider> printing only an error code)"
)


@rule(
    id="RDMA026",
    name="fi-info-no-provider",
    layer="rdma",
    title="fi_info finds no libfabric provider matching the request (-61, FI_ENODATA)",
    requires=("fi_info_failures",),
    severity=Severity.WARNING,
    causes=("rdma.container-access", "rdma.driver-or-module"),
)
def fi_info_no_provider(obs: Observations) -> Iterator[Finding]:
    """``fi_info -p <provider>`` prints only ``-61``.

    **Symptom**: NCCL's OFI plugin (aws-ofi-nccl) fails with ``OFI fi_getinfo() call failed: No data
    available`` and NCCL falls back to sockets or aborts; ``fi_info -p efa`` prints ``-61``.
    **Why**: -61 is ``-FI_ENODATA``: fi_getinfo found no provider and device matching the filters.
    On a host that should have them, the provider's devices are not visible (a container started without
    ``/dev/infiniband/uverbs*``, the EFA or RDMA kernel driver not loaded) or the libfabric build lacks
    the provider; asking for a provider name that does not exist (``-p efa-direct``: a fabric, not a
    provider) gives the same code.
    **Fix**: pass the devices into the container (``--device /dev/infiniband/uverbs0`` ... or the
    ``vpc.amazonaws.com/efa`` resource in Kubernetes), load the driver (``modprobe efa``), use the
    libfabric that ships the provider (``/opt/amazon/efa``); check the provider name with ``fi_info -l``.
    **Verify**: `fi_info -p efa` lists ``provider: efa`` blocks; `ls /dev/infiniband`.
    """
    for f in obs.get("fi_info_failures") or []:
        if f.code != -61:
            continue
        prov = f.provider
        asked = f"provider {prov}" if prov else "the requested provider"
        yield fi_info_no_provider.finding(
            f"`{f.command}` printed -61 (FI_ENODATA): libfabric has no usable {asked} here: its devices "
            "are not visible (container without /dev/infiniband, driver not loaded) or it is not built in.",
            evidence=[Evidence(f"{f.command}: {f.code}", source=f"{f.source}:{f.line}")],
            subject=prov or "libfabric",
            confidence=0.6,
        ).acting(Action.CONFIGURE)
