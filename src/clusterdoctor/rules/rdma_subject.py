"""The device of an IB message that its line does not name: the one device NCCL's IB transport uses.

NCCL's ``Call to ibv_modify_qp failed with error No such device`` names no HCA; its log says which it
uses (``NET/IB : Using [0]mlx5_3:1/RoCE``, catalogue entry IB168). When the inputs list exactly one device
there, an ``ib`` message about a device (its entry's subject is ``{hca}``) is about that device, not about
the rank that printed it. Registered for the ``ib`` family (:func:`register_subject_resolver`).
"""

from __future__ import annotations

from typing import Any

from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.messages import hits_by_code, register_subject_resolver
from clusterdoctor.rules.registry import Observations

__all__ = ["IN_USE_CODE", "ib_device_subject"]

IN_USE_CODE = "IB168"  # rules/catalog/ib_host.py: NET/IB : Using [0]<dev>:<port>/<IB|RoCE> ...


def ib_device_subject(obs: Observations, m: Message, hits: list[Any], subject: str | None) -> str | None:
    """The one device NCCL uses, for a device message without its own; else ``subject`` unchanged."""
    if subject is not None or "{hca}" not in m.subject or m.code == IN_USE_CODE:
        return subject
    used = hits_by_code(obs).get(IN_USE_CODE) or []
    devices = {dict(h.groups).get("hca") for h in used if "[" not in (dict(h.groups).get("more") or "")}
    several = any("[" in (dict(h.groups).get("more") or "") for h in used)
    if len(devices) == 1 and not several and None not in devices:
        return devices.pop()
    return subject


register_subject_resolver("ib", ib_device_subject)
