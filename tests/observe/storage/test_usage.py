"""df and quota listings, on real pastes and on the tools' own formats."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.storage.usage import load_usage, parse_df, parse_quota, sniff_usage

# https://github.com/BSC-ES/autosubmit/issues/596 (a GPFS site wrapper over mmlsquota)
BSC_QUOTA = """\
Filesystem      type        blocks      quota      limit   in_doubt    grace |      files   in_doubt
gpfs_home       USR         79.15G     78.15G     79.15G          0  expired |      13644          0
gpfs_projects   GRP          8.36T     48.83T     51.27T          0     none |      79617          0
Archive quota updated on 2020-10-01 at 07:00
"""

# quota(1) -s, and lfs quota with a wrapped mount point (their documented layouts)
QUOTA_S = """\
Disk quotas for user alice (uid 1000):
     Filesystem   space   quota   limit   grace   files   quota   limit   grace
      /dev/sda1  10000M*  9000M  10000M  6days    1234       0       0
"""
LFS_QUOTA = """\
Disk quotas for usr alice (uid 1000):
     Filesystem  kbytes   quota   limit   grace   files   quota   limit   grace
/lustre/scratch01
                1000000  900000 1000000       -  400000  500000  500000       -
"""

DF_H = """\
Filesystem      Size  Used Avail Use% Mounted on
udev             16G     0   16G   0% /dev
/dev/mapper/ubuntu--vg-ubuntu--lv
                 98G   98G     0 100% /
/dev/loop0       56M   56M     0 100% /snap/core18/1885
tmpfs           7.8G  7.1G  700M  92% /dev/shm
"""


def test_gpfs_quota_at_limit():
    home, projects = parse_quota(BSC_QUOTA)
    assert (home.filesystem, home.qtype, home.grace) == ("gpfs_home", "USR", "expired")
    assert home.used == home.hard > home.soft
    assert projects.used < projects.soft


def test_quota_s_and_lfs_quota():
    blocks, files = parse_quota(QUOTA_S)
    assert (files.used, files.soft, files.hard) == (1234, 0, 0)  # no file limit
    assert (blocks.filesystem, blocks.over_mark, blocks.grace) == ("/dev/sda1", True, "6days")
    assert blocks.used == blocks.hard == 10000 << 20
    rows = parse_quota(LFS_QUOTA)
    assert [(r.filesystem, r.kind, r.used, r.hard) for r in rows] == [
        ("/lustre/scratch01", "blocks", 1000000 << 10, 1000000 << 10),
        ("/lustre/scratch01", "files", 400000, 500000),
    ]


def test_df_wrapped_device_names_and_units():
    rows = parse_df(DF_H)
    assert [(r.mount, r.use_pct) for r in rows] == [
        ("/dev", 0.0),
        ("/", 100.0),
        ("/snap/core18/1885", 100.0),
        ("/dev/shm", 92.0),
    ]
    root = rows[1]
    assert root.filesystem == "/dev/mapper/ubuntu--vg-ubuntu--lv" and root.avail == 0 and root.line == 3
    (r,) = parse_df(
        "Filesystem     Type  1K-blocks    Used Available Use% Mounted on\n/dev/nvme0n1p1 ext4  100 90 10  90% /data\n"
    )
    assert (r.fstype, r.size, r.used) == ("ext4", 100 << 10, 90 << 10)
    (i,) = parse_df(
        "Filesystem      Inodes  IUsed IFree IUse% Mounted on\n/dev/sdb1  6553600 6553600 0 100% /scratch\n"
    )
    assert i.inodes and i.avail == 0


def test_sniff_and_load(tmp_path):
    for text in (BSC_QUOTA, QUOTA_S, LFS_QUOTA, DF_H):
        assert sniff_usage(text.encode())
    assert not sniff_usage(b"Filesystem is mounted read-only\n")
    p = tmp_path / "q.txt"
    p.write_text(BSC_QUOTA)
    out = load_usage(p)
    assert out["described_as"] == "quota listing (2 filesystems)"
    p.write_text("nothing\n")
    with pytest.raises(InputError):
        load_usage(p)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_read_or_refused(text):
    for parse in (parse_df, parse_quota):
        try:
            parse(text, "t")
        except InputError as e:
            assert e.one_line().startswith("t")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**9), st.integers(0, 100)), min_size=1, max_size=8))
def test_df_round_trip(rows):
    """df's own layout (1K-blocks) reads back its numbers."""
    lines = ["Filesystem     1K-blocks    Used Available Use% Mounted on"]
    for i, (size, pct) in enumerate(rows):
        used = size * pct // 100
        lines.append(f"/dev/sd{i}1 {size} {used} {size - used} {pct}% /mnt/d{i}")
    got = parse_df("\n".join(lines) + "\n")
    assert [(g.size, g.use_pct, g.mount) for g in got] == [
        (size << 10, float(pct), f"/mnt/d{i}") for i, (size, pct) in enumerate(rows)
    ]


def test_df_rows_without_their_header():
    # dev case stor-007 (pytorch#5040): `df -h | grep sh` every 10 s while DataLoader workers fill /dev/shm
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "data" / "incidents" / "stor-007" / "paste.txt").read_text()
    assert sniff_usage(text.encode())
    rows = parse_df(text)
    assert len(rows) == 12 and {r.mount for r in rows} == {"/dev/shm"}
    assert rows[-1].use_pct == 96.0 and rows[-1].avail == int(1.1 * (1 << 30))
    # other tables with a % column are not df rows
    for other in (
        "sda      8:0    0   1.8T  0 disk /\n",  # lsblk
        "4.0K\t/home/user\n",  # du -h
        "tmpfs 24G 38M 24G 1% /dev/shm\nand a line of prose\n",  # not every line a row
    ):
        assert not sniff_usage(other.encode())
        with pytest.raises(InputError):
            parse_df(other)
