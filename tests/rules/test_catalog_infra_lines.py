"""Real lines of the GPU, RDMA and control-plane catalogue families, each read as its entry's code:
the variants an entry's own example does not show (older wordings, other programs' forms). Each line
is quoted from a public thread (the incident case that holds it) or the program's source."""

from __future__ import annotations

import pytest

from clusterdoctor.observe.messages import scan_text

LINES = (
    # k8s-device-plugin 1.x main.go: log.Printf("Failed to start nvml with error: %s.", err)
    ("DEVPLG101", "Failed to start nvml with error:  could not load NVML library", "incidents/gpu-014"),
)


@pytest.mark.parametrize(("code", "line", "where"), LINES, ids=[f"{c}-{w}" for c, _, w in LINES])
def test_real_line_is_read_as_its_code(code, line, where):
    hits = scan_text(line + "\n", where)
    assert hits and hits[0].code == code, [h.code for h in hits]
