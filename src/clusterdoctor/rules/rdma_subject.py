"""The device of an IB message that its line does not name: the one device NCCL's IB transport uses.

NCCL's ``Call to ibv_modify_qp failed with error No such device`` names no HCA; its log says which it
uses (``NET/IB : Using [0]mlx5_3:1/RoCE``, catalogue entry IB168). When the inputs list exactly one device
there, an ``ib`` message about a device (its entry's subject is ``{hca}``) is about that device, not about
the rank that printed it. An ``ib`` message whose entry names no device at all (perftest's
``Couldn't allocate MR``) is about the one device the paste's command lines select
(``ib_write_bw -d mlx5_0 ...``, ``--ib-dev=mlx5_1``), when they select exactly one. Registered for the
``ib`` family (:func:`register_subject_resolver`).
"""

from __future__ import annotations

import re
from typing import Any

from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.messages import hits_by_code, register_subject_resolver
from clusterdoctor.rules.registry import Observations

__all__ = ["IN_USE_CODE", "command_device", "ib_device_subject"]

IN_USE_CODE = "IB168"  # rules/catalog/ib_host.py: NET/IB : Using [0]<dev>:<port>/<IB|RoCE> ...
# perftest / ibv_* device selection on a command line: "-d mlx5_0", "--ib-dev=mlx5_1", "--ib-dev mlx5_1"
_DEVICE_ARG = re.compile(r"(?:^|\s)(?:-d|--ib-dev)(?:=|\s+)([A-Za-z][\w.\-]{0,39})(?=\s|$)")


def command_device(obs: Observations, hits: list[Any]) -> str | None:
    """The one device the command lines of the hits' pastes select (``-d``/``--ib-dev``), or None."""
    paths = {h.path for h in hits}
    devices = {
        m.group(1)
        for p in obs.get("pastes") or []
        if p.path in paths
        for c in getattr(p, "commands", ())
        for m in _DEVICE_ARG.finditer(c)
    }
    return devices.pop() if len(devices) == 1 else None


def ib_device_subject(obs: Observations, m: Message, hits: list[Any], subject: str | None) -> str | None:
    """The one device NCCL uses, for a device message without its own; else ``subject`` unchanged."""
    if subject is None and not m.subject:
        return command_device(obs, hits)
    if subject is not None or "{hca}" not in m.subject or m.code == IN_USE_CODE:
        return subject
    used = hits_by_code(obs).get(IN_USE_CODE) or []
    devices = {dict(h.groups).get("hca") for h in used if "[" not in (dict(h.groups).get("more") or "")}
    several = any("[" in (dict(h.groups).get("more") or "") for h in used)
    if len(devices) == 1 and not several and None not in devices:
        return devices.pop()
    return subject


register_subject_resolver("ib", ib_device_subject)
