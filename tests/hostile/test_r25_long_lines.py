"""Issue 25: one long line froze the parsers (regexes that backtrack): a containerd logfmt line of
40-80 KB (``logs._LOGFMT_PAIR``), a klog "Observed pod startup duration" line followed by letters
(``logs._RE_KV``), ``Using network`` followed by spaces (``nccl_log._NET``): 30-70 s each, a 1 MB
line hours. Each through the real CLI, with 1 MiB lines, under the 2 GiB address-space cap and a
generous time cap (the rewritten patterns take milliseconds)."""

from __future__ import annotations

import pytest

from tests.hostile.harness import run_capped

pytestmark = pytest.mark.hostile

MB = 1 << 20
TS = "2024-05-01T10:00:00.000000000Z"


def _lines(*extra: str) -> str:
    return "".join(x + "\n" for x in extra)


CASES = {
    # containerd: a logfmt line whose tail is one run of letters (each pair start rescanned it)
    "containerd.log": _lines(
        f'time="{TS}" level=info msg="starting containerd" version=1.7.2',
        f'time="{TS}" level=error msg="pull failed" ' + "a" * MB,
        f'time="{TS}" level=info msg="dots" ' + "a." * (MB // 2),
    ),
    # kubelet: the pod startup line of klog followed by letters
    "kubelet.log": _lines(
        'I0501 10:00:00.000000    1234 pod_startup_latency_tracker.go:102] "Observed pod startup duration" '
        'pod="default/p" podStartSLOduration=1.5 ' + "a" * MB,
    ),
    # NCCL: "Using network" then spaces (the lazy name rescanned the spaces at every step)
    "rank0.log": _lines(
        "node1:1234:1234 [0] NCCL INFO NCCL version 2.18.3+cuda12.1",
        "node1:1234:1234 [0] NCCL INFO Using network IB" + " " * MB + "x",
        "node1:1234:1234 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5" + " " * MB + "x",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("command", [("diagnose",), ("diagnose", "--format", "json")])
def test_r25_long_line_parsed_in_linear_time(tmp_path, name, command):
    p = tmp_path / name
    p.write_text(CASES[name])
    r = run_capped(*command, str(p), timeout=180)
    assert "Traceback" not in r.err and "internal error" not in r.err and r.code != 70, r.err[-2000:]
    assert r.code in (0, 1, 2), (r.code, r.err[-2000:])
    assert r.seconds < 60, r.seconds  # before: hours (quadratic in the 1 MiB line)


def test_r25_long_nccl_lines_through_comm_analyze(tmp_path):
    p = tmp_path / "rank0.log"
    p.write_text(CASES["rank0.log"])
    r = run_capped("comm", "analyze", str(p), timeout=180)
    assert "Traceback" not in r.err and "internal error" not in r.err and r.code != 70, r.err[-2000:]
    assert r.seconds < 60, r.seconds
