"""A folder given to ``diagnose`` holds files that are not inputs: an incident case's case.toml (whose
strings quote the log lines of its cause) is metadata, never an NCCL log or a log excerpt; a log that is
merely named ``.toml`` is still read; the folder's other files are read as usual."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdoctor import diagnosis
from clusterdoctor.observe.comm.sources import TOML_DOCUMENT, discover_comm_inputs, is_toml_document

INCIDENTS = Path(__file__).resolve().parents[2] / "data" / "incidents"
NOW = 1_796_083_200.0  # 2026-12-01T00:00:00Z, as tests/incident_corpus.py
# nccl-019's case.toml quotes NCCL INFO lines, nccl-051's a WARN line: both were read as an NCCL log
CASES = ["nccl-019", "nccl-051", "nccl-402"]


def _load(*paths: Path) -> tuple[list[str], list[str]]:
    obs = diagnosis.new_observations(clock=lambda: NOW)
    refs = diagnosis.load_sources(obs, list(paths))
    return [r.location for r in refs], obs.data.get("warnings_list", [])


@pytest.mark.parametrize("case", CASES)
def test_case_toml_is_metadata_not_a_log(case: str) -> None:
    folder = INCIDENTS / case
    assert is_toml_document(folder / "case.toml")
    used, warnings = _load(folder)
    assert not [u for u in used if u.endswith("case.toml")]
    assert any("case.toml" in w and TOML_DOCUMENT in w for w in warnings)
    # the comm walker (clusterdoctor comm analyze DIR) says the same
    (toml,) = [i for i in discover_comm_inputs(str(folder)) if i.path.endswith("case.toml")]
    assert not toml.kinds and toml.reason == TOML_DOCUMENT


def test_a_log_named_toml_is_still_read(tmp_path: Path) -> None:
    # nccl-051's WARN line (vllm#19613) in a file a user happened to name .toml: not TOML, so a log
    line = (INCIDENTS / "nccl-051" / "paste-2.txt").read_text()
    (tmp_path / "rank5.toml").write_text(line)
    (tmp_path / "settings.toml").write_text('[job]\nname = "train"\nnote = "NCCL WARN quoted"\n')
    assert not is_toml_document(tmp_path / "rank5.toml") and is_toml_document(tmp_path / "settings.toml")
    used, warnings = _load(tmp_path)
    assert [Path(u).name for u in used] == ["rank5.toml"]
    assert any("settings.toml" in w for w in warnings)
    # an empty .toml parses to no key: not metadata either (read, and refused as empty, as before)
    (tmp_path / "empty.toml").write_text("")
    assert not is_toml_document(tmp_path / "empty.toml")
