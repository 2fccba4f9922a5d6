"""NCCL settings as users paste them: ``env | grep NCCL``, ``/etc/nccl.conf`` (NCCL reads ``NAME=value`` lines
from it and ``~/.nccl.conf``: NCCL env docs), and the ``export NCCL_...=...`` lines of a job script.

Every non-empty line must be a setting (``NAME=value``, optionally after ``export``, ``#`` comments allowed)
and at least one must be an ``NCCL_`` variable: what is read is the settings, for the rules that check them
against other inputs (the interfaces NCCL_SOCKET_IFNAME can select: rules/comm_ifaces.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError

__all__ = ["EnvListing", "load_env_listing", "parse_env_listing", "sniff_env_listing"]

_SET = re.compile(r"^(?:export +)?(?P<name>[A-Z][A-Z0-9_]{0,80})=(?P<value>[^\n]{0,1000})$")


@dataclass
class EnvListing:
    path: str
    env: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _settings(text: str) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for raw in text.splitlines()[:20_000]:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _SET.match(line)
        if m is None:
            return None
        out[m.group("name")] = m.group("value").strip().strip("'\"")
    return out if any(k.startswith("NCCL_") for k in out) else None


def parse_env_listing(text: str, path: str = "<env>") -> EnvListing:
    """The settings; InputError unless every line is one and an NCCL_ variable is among them."""
    env = _settings(text)
    if env is None:
        raise InputError("not a list of NCCL settings (NAME=value lines with an NCCL_ variable)", path)
    return EnvListing(path, env)


def sniff_env_listing(head: bytes) -> bool:
    if b"\x00" in head[:4096] or b"NCCL_" not in head:
        return False
    text = head[:16384].decode("utf-8", "replace")
    if len(head) > 16384:
        text = text[: text.rfind("\n") + 1]
    return _settings(text) is not None


def load_env_listing(path: str | Path) -> EnvListing:
    from clusterdoctor.observe.limits import read_text

    p = Path(path)
    return parse_env_listing(read_text(p), str(p))
