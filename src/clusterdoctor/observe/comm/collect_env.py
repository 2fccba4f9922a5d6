"""PyTorch's environment report, ``python -m torch.utils.collect_env``, as users paste it in bug reports.

The format is the script's own (``torch/utils/collect_env.py``, ``env_info_fmt``): ``Collecting environment
information...``, then ``Key: value`` lines (``PyTorch version: 2.1.0+cu121``, ``CUDA used to build PyTorch:
12.1``, ``OS: Ubuntu 22.04.3 LTS (x86_64)``, ``Is CUDA available: True``, ``CUDA runtime version: 12.1.105``,
``Nvidia driver version: 535.104.05``, ``cuDNN version: ...``), ``GPU models and configuration:`` followed by
``GPU 0: NVIDIA A100-SXM4-80GB`` lines, and ``Versions of relevant libraries:`` with ``[pip3] name==version``
and ``[conda] name version build channel`` lines. Values the script could not find print as ``N/A`` or
``Could not collect``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.pip_freeze import PackageList, normalise

__all__ = ["TorchEnv", "load_collect_env", "parse_collect_env", "sniff_collect_env"]

_KEY = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 ()/._-]{1,60}?): ?(?P<value>[^\n]{0,400})$")
_GPU = re.compile(r"^GPU (?P<i>\d{1,4}): (?P<name>[^\n]{1,120})$")
_PIP = re.compile(r"^\[pip\d?\] (?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,100})==(?P<ver>[0-9][\w.+!-]{0,60})\s*$")
_CONDA = re.compile(
    r"^\[conda\] (?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,100}) +(?P<ver>[0-9][\w.+!-]{0,60})(?: |$)"
)
_UNKNOWN = ("N/A", "Could not collect", "None", "")


@dataclass
class TorchEnv:
    """The facts of one collect_env report (values as printed; None when absent or not collected)."""

    path: str
    fields: dict[str, str] = field(default_factory=dict)
    gpus: list[str] = field(default_factory=list)
    packages: PackageList | None = None

    def get(self, key: str) -> str | None:
        v = self.fields.get(key)
        return None if v is None or v.strip() in _UNKNOWN else v.strip()

    @property
    def torch_version(self) -> str | None:
        return self.get("PyTorch version")

    @property
    def cuda_build(self) -> str | None:
        return self.get("CUDA used to build PyTorch")

    @property
    def driver(self) -> str | None:
        v = self.get("Nvidia driver version")
        m = re.match(r"\d{2,4}(?:\.\d{1,3}){1,2}", v or "")
        return m.group(0) if m else None

    @property
    def os(self) -> str | None:
        return self.get("OS")


def parse_collect_env(text: str, path: str = "<collect_env>") -> TorchEnv:
    """The report's fields; InputError when it has neither ``PyTorch version:`` nor ``CUDA used to build``."""
    env = TorchEnv(path)
    pkgs = PackageList(path, program="collect_env")
    in_gpus = False
    for n, raw in enumerate(text.splitlines()[:5000], 1):
        line = raw.strip()
        if not line:
            in_gpus = False
            continue
        if m := _GPU.match(line):
            env.gpus.append(m.group("name").strip())
            continue
        if m := (_PIP.match(line) or _CONDA.match(line)):
            name = normalise(m.group("name"))
            pkgs.packages.setdefault(name, m.group("ver"))
            pkgs.lines.setdefault(name, n)
            continue
        if m := _KEY.match(line):
            key = m.group("key").strip()
            env.fields.setdefault(key, m.group("value").strip())
            in_gpus = key == "GPU models and configuration"
            if in_gpus and (g := _GPU.match(m.group("value").strip())):
                env.gpus.append(g.group("name").strip())
            continue
        if in_gpus:
            continue
    if "PyTorch version" not in env.fields and "CUDA used to build PyTorch" not in env.fields:
        raise InputError("no 'PyTorch version:' line (not torch.utils.collect_env output)", path)
    env.packages = pkgs if pkgs.packages else None
    return env


_SNIFF = re.compile(
    rb"(?m)^Collecting environment information\.\.\.|^PyTorch version: ?\S|^CUDA used to build PyTorch: ?\S"
)


def sniff_collect_env(head: bytes) -> bool:
    """collect_env output: its banner, or two of its own keys."""
    found = _SNIFF.findall(head[:65536])
    return bool(found) and (any(f.startswith(b"Collecting") for f in found) or len(found) >= 2)


def load_collect_env(path: str | Path) -> TorchEnv:
    from clusterdoctor.observe.limits import read_text

    p = Path(path)
    return parse_collect_env(read_text(p), str(p))
