"""The instance of an NCCL message that its line does not name: the interface NCCL was told to use.

An NCCL socket message (no interface, an address without a family) is about the interface NCCL was
given, not about the rank that printed it: when the NCCL logs of the diagnosis set one
``NCCL_SOCKET_IFNAME`` (NCCL prints ``NCCL_SOCKET_IFNAME set by environment to eth2``), that setting is
the finding's subject. Registered for the ``nccl`` family (:func:`register_subject_resolver`).
"""

from __future__ import annotations

from typing import Any

from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.messages import register_subject_resolver
from clusterdoctor.rules.registry import Observations

__all__ = ["socket_iface_subject"]

IFACE_CLASS = "nccl.socket-iface"
IFACE_ENV = "NCCL_SOCKET_IFNAME"


def socket_iface_subject(obs: Observations, m: Message, hits: list[Any], subject: str | None) -> str | None:
    """``NCCL_SOCKET_IFNAME=<value>`` for a socket-interface message without its own subject, when the
    NCCL logs set exactly one value; else ``subject`` unchanged."""
    if subject is not None or IFACE_CLASS not in m.causes:
        return subject
    values = {
        v.strip()
        for src in (*(obs.get("nccl_log") or []), *(obs.get("nccl_env") or []))
        if (v := (getattr(src, "env", None) or {}).get(IFACE_ENV))
    }
    if len(values) == 1:
        return f"{IFACE_ENV}={values.pop()}"
    return subject


register_subject_resolver("nccl", socket_iface_subject)
