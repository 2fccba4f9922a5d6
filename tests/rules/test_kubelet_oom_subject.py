"""A memcg OOM call trace names no process; the report's "invoked oom-killer" line does.

Lines: a real kernel log from https://github.com/kubernetes/kubernetes/pull/1962 (incident ctrl-050).
"""

from __future__ import annotations

from pathlib import Path

from clusterdoctor import diagnosis

NOW = 1_780_000_000.0

LOG = """\
Oct 21 21:08:58 kubernetes-minion-2 kernel: [75254.207495] supervisord invoked oom-killer: gfp_mask=0xd0, order=0, oom_score_adj=0
Oct 21 21:08:58 kubernetes-minion-2 kernel: [75254.229995]  [<ffffffff8114e30a>] ? oom_kill_process+0x28a/0x3e0
Oct 21 21:08:58 kubernetes-minion-2 kernel: [75254.231977]  [<ffffffff811b1faf>] ? mem_cgroup_oom_synchronize+0x50f/0x580
"""


def _top(tmp_path: Path, text: str):
    p = tmp_path / "paste.txt"
    p.write_text(text)
    obs = diagnosis.new_observations(clock=lambda: NOW)
    return diagnosis.run(obs, diagnosis.load_sources(obs, [p])).findings[0]


def test_memcg_oom_names_the_process_that_invoked_the_killer(tmp_path: Path) -> None:
    top = _top(tmp_path, LOG)
    assert top.rule == "KUBELET117"
    assert top.subject == "supervisord"


def test_without_the_invoking_line_no_subject_is_made_up(tmp_path: Path) -> None:
    top = _top(tmp_path, LOG.splitlines(keepends=True)[2])
    assert top.rule == "KUBELET117"
    assert top.subject != "supervisord"


# a kubelet journal (real lines, https://github.com/kubermatic/machine-controller/issues/989, ctrl-042)
PLEG = (
    "Jun 01 16:46:01 node-pool-7fddb5656f-gg9jj kubelet[179303]: E0601 16:46:01.993106  179303 kubelet.go:1799] "
    "skipping pod synchronization - [container runtime status check may not have completed yet, PLEG is not "
    "healthy: pleg was last seen active 11m54.676753691s ago; threshold is 3m0s]\n"
)


def test_a_node_agent_message_names_the_node_its_journal_prefix_names(tmp_path: Path) -> None:
    top = _top(tmp_path, PLEG)
    assert top.rule == "KUBELET101"
    assert top.subject == "node-pool-7fddb5656f-gg9jj"
