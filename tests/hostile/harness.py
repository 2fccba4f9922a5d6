"""Run the real CLI on a hostile input in a child process under a memory cap and a time limit.

The cap is ``RLIMIT_AS`` (address space) set in the child before it starts Python: a run that tries
to grow to many GB fails inside the child (MemoryError) instead of taking the machine down, and the
assertion on its one-line message catches it. The child's peak RSS comes from ``wait4``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass

MEMORY_CAP = 2 << 30  # address space: Python + numpy + msgspec map ~0.5 GB; reading must stay well below


@dataclass
class Run:
    code: int
    out: str
    err: str
    seconds: float
    peak_rss_mb: float

    def one_line(self) -> str:
        """The single stderr line (asserts there is exactly one and no traceback/'Aborted!')."""
        lines = [ln for ln in self.err.splitlines() if ln.strip()]
        assert "Traceback" not in self.err and "Aborted!" not in self.err, self.err[-2000:]
        assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {self.err[-2000:]}"
        return lines[0]


def run_capped(
    *args: str, timeout: float = 120, memory: int = MEMORY_CAP, env: dict[str, str] | None = None
) -> Run:
    """``clusterdoctor ARGS`` in a child with ``memory`` bytes of address space and ``timeout`` s."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    full_env = dict(os.environ)
    full_env.setdefault("COLUMNS", "200")
    full_env.update(env or {})
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "clusterdoctor.cli.main", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, preexec_fn=cap,
    )  # fmt: skip
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"clusterdoctor {' '.join(args)} ran past {timeout} s: {err[-1000:]}") from None
    took = time.monotonic() - t0
    # communicate() reaped the child; its rusage is in RUSAGE_CHILDREN only as a maximum over all
    # children, so the peak is measured with a fresh wrapper when a test needs it (peak_rss below)
    return Run(p.returncode, out, err, took, 0.0)


PEAK = r"""
import json, os, resource, subprocess, sys
mem = int(sys.argv[1])
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
p = subprocess.run([sys.executable, "-m", "clusterdoctor.cli.main", *sys.argv[2:]], capture_output=True,
                   text=True, preexec_fn=cap)
print(json.dumps({"code": p.returncode, "out": p.stdout[-20000:], "err": p.stderr,
                  "rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def run_measured(
    *args: str, timeout: float = 300, memory: int = MEMORY_CAP, env: dict[str, str] | None = None
) -> Run:
    """Like :func:`run_capped`, with the child's peak RSS (a fresh wrapper process whose only child
    is the CLI, so RUSAGE_CHILDREN is that child's)."""
    import json

    full_env = dict(os.environ)
    full_env.setdefault("COLUMNS", "200")
    full_env.update(env or {})
    t0 = time.monotonic()
    w = subprocess.run(
        [sys.executable, "-c", PEAK, str(memory), *args], capture_output=True, text=True, env=full_env,
        timeout=timeout,
    )  # fmt: skip
    took = time.monotonic() - t0
    doc = json.loads(w.stdout)
    return Run(doc["code"], doc["out"], doc["err"], took, doc["rss"] / 1024)
