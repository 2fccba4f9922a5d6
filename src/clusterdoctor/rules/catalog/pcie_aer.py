"""The Linux kernel's PCIe Advanced Error Reporting (AER) lines, as data.

What ``drivers/pci/pcie/aer.c`` prints when a PCIe link or device reports an error — ``PCIe Bus Error:
severity=<S>, type=<layer>, (<agent>)`` (kernels before 4.x add ``id=<hex>``), ``[Multiple ]<S> error
received: <bdf>`` (5.x and later: ``error message received from <bdf>``), then the status bits — and
what ``drivers/pci/pcie/err.c`` prints when it tries to recover: ``device recovery failed`` /
``successful``, ``Root Port link has been reset``; and ``drivers/pci/pcie/dpc.c``'s ``DPC: containment
event`` when a port's Downstream Port Containment cuts the link. The severity strings were ``Corrected``,
``Uncorrected (Non-Fatal)`` and ``Uncorrected (Fatal)``; Linux 6.x renamed them ``Correctable``,
``Uncorrectable (Non-Fatal)`` and ``Uncorrectable (Fatal)``: each pattern reads both.

A fatal uncorrected error takes the link down: the device behind it (a GPU, a NIC) is lost until
the link is reset, and when recovery fails, until the node is rebooted; NVIDIA's Xid 79 ("fallen off
the bus") is often the driver's view of the same event. Corrected errors are retried by the link
itself; a few are normal, a stream of them is a degraded link (a finding only at info).

Sources: Linux ``drivers/pci/pcie/aer.c`` and ``drivers/pci/pcie/err.c``, the kernel's
Documentation/PCI/pcieaer-howto.rst; example lines from public threads.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

_AER = "https://github.com/torvalds/linux/blob/master/drivers/pci/pcie/aer.c"
_ERR = "https://github.com/torvalds/linux/blob/master/drivers/pci/pcie/err.c"
_HOWTO = "https://docs.kernel.org/PCI/pcieaer-howto.html"
# the device the line is about: "pcieport 0000:00:03.0: " (dev_printk's prefix), with "AER: " since 4.19
_DEV = r"(?:(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]):(?: AER:)? )?"
_BDF = r"(?P<pci2>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
_VERIFY = (
    "dmesg -T | grep -E 'AER|PCIe Bus Error'",
    "lspci -vvv -s <bdf> | grep -E 'LnkSta|UESta|CESta'",
    "nvidia-smi -q -d PCIE",
)

MESSAGES: tuple[Message, ...] = (
    Message(
        code="AER101",
        name="pcie-aer-fatal",
        title="An uncorrectable fatal PCIe error (AER): the link and the device behind it are down",
        pattern=_DEV + r"PCIe Bus Error: severity=Uncorrect(?:ed|able) \(Fatal\)",
        trigger="PCIe Bus Error: severity=Uncorrect",
        triggers=(" error received: ", " error message received from "),
        variants=(
            r"AER: (?:Multiple )?Uncorrect(?:ed|able) \(Fatal\) error (?:message )?received(?: from)?:? "
            + _BDF,
        ),
        meaning=(
            "a PCIe device or port reported an uncorrectable fatal error (completion timeout, malformed TLP, "
            "surprise down, data link protocol error): the link is unusable until it is reset"
        ),
        cause=(
            "a failing PCIe link: a badly seated GPU or riser, a faulty cable/retimer or switch port, power "
            "delivery to the card, or the device itself; the GPU behind it falls off the bus (Xid 79)"
        ),
        fix=(
            "drain the node; reseat the device and its riser/cable, check its power; reboot; if it recurs on "
            "the same slot, service the slot or RMA the device"
        ),
        verify=_VERIFY,
        severity=Severity.CRITICAL,
        action=Action.REPLACE_HARDWARE,
        source=_AER,
        example=(
            "[  +0.000004] pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
            "type=Transaction Layer, (Requester ID)"
        ),
        example_source="https://github.com/rwth-i6/returnn/issues/1500",
        causes=("gpu.pcie-degraded", "gpu.fallen-off-bus"),
        subject="PCIe {pci}",
        confidence=0.85,
    ),
    Message(
        code="AER102",
        name="pcie-aer-recovery-failed",
        title="The kernel could not recover a PCIe device after an AER error (it stays lost)",
        pattern=_DEV + r"(?:AER: )?device recovery failed",
        trigger="device recovery failed",
        meaning=(
            "after an uncorrectable PCIe error the kernel reset the link but the device's driver could not "
            "resume it: the device is gone until the node is rebooted"
        ),
        cause=(
            "the error that preceded it (a fatal AER on this port) and a driver without AER recovery (the "
            'NVIDIA driver logs "can\'t recover (no error_detected callback)")'
        ),
        fix="drain and reboot the node; then treat the AER error before it (reseat, check power, RMA if it recurs)",
        verify=_VERIFY,
        severity=Severity.CRITICAL,
        action=Action.REBOOT_NODE,
        source=_ERR,
        example="[  +0.000008] pcieport 0000:00:03.0: AER: device recovery failed",
        example_source="https://github.com/rwth-i6/returnn/issues/1500",
        causes=("gpu.fallen-off-bus", "gpu.pcie-degraded"),
        subject="PCIe {pci}",
        role="symptom",
        confidence=0.8,
    ),
    Message(
        code="AER103",
        name="pcie-aer-nonfatal",
        title="An uncorrectable non-fatal PCIe error (AER): a transaction was lost",
        pattern=_DEV + r"PCIe Bus Error: severity=Uncorrect(?:ed|able) \(Non-Fatal\)",
        trigger="PCIe Bus Error: severity=Uncorrect",
        triggers=(" error received: ", " error message received from "),
        variants=(
            r"AER: (?:Multiple )?Uncorrect(?:ed|able) \(Non-Fatal\) error (?:message )?received(?: from)?:? "
            + _BDF,
        ),
        meaning=(
            "a PCIe transaction failed (unsupported request, completion timeout, poisoned TLP) but the link "
            "stays up; the driver of the device decides whether it recovers"
        ),
        cause="a marginal link or a device/firmware fault; on a GPU often followed by an Xid",
        fix="watch for repeats on the same device; reseat or service the slot if they recur",
        verify=_VERIFY,
        severity=Severity.WARNING,
        action=Action.OBSERVE,
        source=_AER,
        example=(
            "pcieport 0000:00:1d.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, "
            "(Requester ID)"
        ),
        causes=("gpu.pcie-degraded",),
        subject="PCIe {pci}",
        confidence=0.7,
        notes=("example: a report quoted on linux-pci (Kai-Heng Feng, Intel root port 8086:7ab0)",),
    ),
    Message(
        code="AER104",
        name="pcie-aer-corrected",
        title="Corrected PCIe errors (AER): the link retried a transfer",
        pattern=_DEV + r"PCIe Bus Error: severity=Correct(?:ed|able),",
        trigger="PCIe Bus Error: severity=Correct",
        triggers=(" error received: ", " error message received from "),
        variants=(r"AER: (?:Multiple )?Correct(?:ed|able) error (?:message )?received(?: from)?:? " + _BDF,),
        meaning="the link detected and corrected an error (bad TLP/DLLP, replay): no data was lost",
        cause="a few are normal; a steady stream is a marginal link (signal integrity, seating, ASPM)",
        fix="count them per device over time (nvidia-smi -q -d PCIE replay counter); service the link if they keep rising",
        verify=_VERIFY,
        severity=Severity.INFO,
        action=Action.OBSERVE,
        source=_HOWTO,
        example=(
            "pcieport 0000:00:1c.5: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"
        ),
        causes=("gpu.pcie-degraded",),
        subject="PCIe {pci}",
        role="symptom",
        confidence=0.5,
        notes=("example: the AER flood quoted in the Linux commit that disables ASPM for RTL8723BE",),
    ),
    Message(
        code="AER105",
        name="pcie-dpc-containment",
        title="PCIe Downstream Port Containment fired: the port disabled its link after an uncorrectable error",
        # drivers/pci/pcie/dpc.c: "containment event, status:%#06x source:%#06x" then "%s detected"
        pattern=_DEV + r"DPC: containment event, status:(?P<status>0x[0-9a-fA-F]{1,4})",
        trigger="DPC: containment event",
        meaning=(
            "the port's DPC hardware cut the link to stop an uncorrectable error from spreading: the device "
            "below it (a GPU, a NIC, an NVMe drive) is gone until the link is recovered"
        ),
        cause="the same as a fatal AER error: a failing link, device, riser or cable below that port",
        fix="drain the node; reseat the device and its riser/cable, check power; reboot; RMA if the same slot recurs",
        verify=_VERIFY,
        severity=Severity.CRITICAL,
        action=Action.REPLACE_HARDWARE,
        source="https://github.com/torvalds/linux/blob/master/drivers/pci/pcie/dpc.c",
        example="[   50.947817] pcieport 0000:00:1b.0: DPC: containment event, status:0x1f01 source:0x0000",
        notes=("example: a dmesg quoted on linux-pci (Intel root port 8086:06ac)",),
        causes=("gpu.pcie-degraded", "gpu.fallen-off-bus"),
        subject="PCIe {pci}",
        confidence=0.8,
    ),
)
