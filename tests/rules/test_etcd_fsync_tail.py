"""ETCD010 on the wal fsync histogram pasted in an etcd issue (tests/data/incidents/ctrl-052): p99 in a
few ms, 48 fsyncs over 0.5 s; a histogram without a tail is quiet."""

from __future__ import annotations

from clusterdoctor import diagnosis
from clusterdoctor.rules.etcd_fsync_tail import etcd_fsync_stalls
from clusterdoctor.rules.registry import run_rules

BUCKETS = [
    ("0.001", 340252), ("0.002", 348832), ("0.004", 366540), ("0.008", 366978), ("0.016", 367038),
    ("0.032", 367069), ("0.064", 367099), ("0.128", 367181), ("0.256", 367332), ("0.512", 367487),
    ("1.024", 367535), ("2.048", 367535), ("4.096", 367535), ("8.192", 367535), ("+Inf", 367535),
]  # fmt: skip


def _dump(buckets) -> str:
    lines = [f'etcd_disk_wal_fsync_duration_seconds_bucket{{le="{le}"}} {c}' for le, c in buckets]
    lines += ["etcd_disk_wal_fsync_duration_seconds_sum 344.94922837100",
              f"etcd_disk_wal_fsync_duration_seconds_count {buckets[-1][1]}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _run(tmp_path, text):
    p = tmp_path / "metrics.txt"
    p.write_text(text)
    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    diagnosis.load_sources(obs, [p])
    return run_rules(obs, [etcd_fsync_stalls])[0]


def test_stalls_in_the_tail_are_named(tmp_path):
    (f,) = _run(tmp_path, _dump(BUCKETS))
    assert "48 of 367535 WAL fsyncs took over 0.512 s (up to 1.024 s)" in f.summary


def test_no_tail_is_quiet(tmp_path):
    flat = [(le, c if float(le.replace("+Inf", "inf")) < 0.5 else 367332) for le, c in BUCKETS]
    assert not _run(tmp_path, _dump(flat))
