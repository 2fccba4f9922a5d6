"""Capture real Flight Recorder dumps (and Kineto traces) of the fault lab's 4-rank job with one rank
slowed from outside. Needs root (cgroups) and the training extra.

Usage: python tests/data/failslow/make_fr_capture.py OUT_DIR [fr|loader-traces]

* ``fr``: ``OUT_DIR/fr-quota-rank2/fr_trace_rank_<r>`` — the Flight Recorder buffer of each rank
  (``torch._C._distributed_c10d._dump_fr_trace``, gloo, ``TORCH_FR_BUFFER_SIZE=4000``) after a
  70-step DDP run in which rank 2's process was put in a cgroup with a CPU quota of ``$FRAC``
  (default 0.1) of one CPU per ``$PERIOD_US`` (default 5000 µs) once rank 0's probe file showed
  step 25 (until the end of the run);
* ``loader-traces``: ``OUT_DIR/traces-slowloader-rank1/rank<r>.pt.trace.json`` — Kineto traces
  (CPU activity, every step profiled) of a 60-step run in which rank 1's data-loader worker process
  got a CPU quota of 2 % from step 25, gzipped (level 9);

Each run's probe files (``watch-rank<r>.jsonl``) are kept beside it in ``<folder>-probe``: the
ground truth. Prints the episode (fault, step and time of injection) as JSON, for the README.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
from pathlib import Path


def main() -> None:
    from clusterdoctor.training.faultlab import CpuQuota, Lab, SlowLoader

    out = Path(sys.argv[1])
    what = sys.argv[2] if len(sys.argv) > 2 else "fr"
    work = out / f".lab-{os.getpid()}"
    env = {"TORCH_FR_BUFFER_SIZE": "4000"} if what == "fr" else {}
    with Lab(work, world=4, netns=False, env=env) as lab:
        if what == "fr":
            d = out / "fr-quota-rank2"
            fault = CpuQuota(
                2, float(os.environ.get("FRAC", "0.1")), int(os.environ.get("PERIOD_US", "5000"))
            )
            res = lab.episode(70, fault, onset_step=25, extra={"fr_dir": str(d)})
        else:
            d = out / "traces-slowloader-rank1"
            res = lab.episode(60, SlowLoader(1, 0.02), onset_step=25, extra={"profile_dir": str(d)})
        print(json.dumps(res.__dict__, default=str, indent=1))
    # the probe's own files of the same run: the ground truth the dumps are judged against
    probe = d.parent / f"{d.name}-probe"
    probe.mkdir(parents=True, exist_ok=True)
    for f in sorted(Path(res.dir).glob("watch-rank*.jsonl")):
        shutil.copy(f, probe / f.name)
    shutil.rmtree(work)
    for f in sorted(d.glob("*.json")):  # traces: gzipped as the profiler's users keep them
        with open(f, "rb") as src, gzip.open(f"{f}.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        f.unlink()


if __name__ == "__main__":
    main()
