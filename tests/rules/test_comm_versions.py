"""COMM016: NCCL versions that differ between the nodes of a job (pip listings, NCCL logs)."""

from __future__ import annotations

from pathlib import Path

from clusterdoctor import diagnosis

INCIDENTS = Path(__file__).resolve().parents[1] / "data" / "incidents"
NOW = 1_790_000_000.0


def _diagnose(*paths: Path):
    obs = diagnosis.new_observations(clock=lambda: NOW)
    refs = diagnosis.load_sources(obs, list(paths))
    return diagnosis.run(obs, refs).findings


def test_two_nodes_with_other_nccl_wheels() -> None:
    # dev case nccl-007: the problem node has nvidia-nccl-cu12 2.20.5, the others 2.19.3
    (f, *_) = _diagnose(INCIDENTS / "nccl-007" / "paste.txt", INCIDENTS / "nccl-007" / "paste-2.txt")
    assert f.rule == "COMM016" and f.causes == ("nccl.version-mismatch",)
    assert "2.19.3" in f.subject and "2.20.5" in f.subject


def test_the_odd_node_is_the_subject_and_one_listing_is_quiet(tmp_path: Path) -> None:
    for i, v in enumerate(("2.19.3", "2.19.3", "2.20.5")):
        (tmp_path / f"n{i}.txt").write_text(f"nvidia-nccl-cu12=={v}\ntorch==2.2.0\n")
    (f, *_) = _diagnose(*sorted(tmp_path.glob("n*.txt")))
    assert f.rule == "COMM016" and f.subject == "nvidia-nccl-cu12 2.20.5 (n2.txt)"
    assert "COMM016" not in {x.rule for x in _diagnose(tmp_path / "n0.txt")}


def test_nccl_logs_of_one_host_are_a_before_and_after(tmp_path: Path) -> None:
    for name, v in (("a.log", "2.18.5"), ("b.log", "2.21.5")):
        (tmp_path / name).write_text(
            f"h1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\nNCCL version {v}+cuda12.1\n"
        )
    assert "COMM016" not in {x.rule for x in _diagnose(tmp_path / "a.log", tmp_path / "b.log")}
    (tmp_path / "b.log").write_text(
        "h2:1:1 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\nNCCL version 2.21.5+cuda12.1\n"
    )
    (f, *_) = [x for x in _diagnose(tmp_path / "a.log", tmp_path / "b.log") if x.rule == "COMM016"]
    assert "2.18.5" in f.summary and "2.21.5" in f.summary
