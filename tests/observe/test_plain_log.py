"""observe/plain_log and its use by detect: a dmesg or journal excerpt without a known message is read
(nothing judged), never refused; text that is not a log is still refused."""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.detect import load_path
from clusterdoctor.observe.plain_log import system_log_kind

# github.com/clustervision/trinity/issues/219 (corpus case rdma-304), the driver's normal lines
DMESG = (
    "[  939.318674] mlx4_en: Mellanox ConnectX HCA Ethernet driver v2.2-1 (Feb 2014)\n"
    "[  939.319023] mlx4_en 0000:0d:00.0: UDP RSS is not supported on this device\n"
    "[  939.325643] <mlx4_ib> mlx4_ib_add: mlx4_ib: Mellanox ConnectX InfiniBand driver v2.2-1 (Feb 2014)\n"
)
# github.com/NVIDIA/nccl (corpus case gpu-021): journalctl -u nvidia-fabricmanager
JOURNAL = "Feb 24 09:28:18 ip-172-31-92-157 systemd[1]: Starting NVIDIA fabric manager service...\n"


def test_kinds():
    assert system_log_kind(DMESG) == "kernel log"
    assert system_log_kind(JOURNAL) == "system log"
    assert system_log_kind(
        "[Mon Mar  4 10:00:01 2024] nvidia-nvlink: Nvlink Core is being initialized\n"
    ) == ("kernel log")
    assert system_log_kind("IPv4\t0800\tip ip4\nARP\t0806\tether-arp\n") is None  # /etc/ethertypes
    assert system_log_kind("The GPU works now, thanks!\nclosing\n") is None


def test_a_dmesg_excerpt_without_a_known_message_is_read_quietly(tmp_path):
    p = tmp_path / "paste.txt"
    p.write_text(DMESG)
    what, data = load_path(p)
    assert what.startswith("kernel log") and data["messages"] == []


def test_prose_is_still_refused(tmp_path):
    p = tmp_path / "paste.txt"
    p.write_text("I tried everything and it still fails\nany idea?\n")
    with pytest.raises(InputError, match="unrecognised input"):
        load_path(p)
