"""Training progress logs: the loss and step lines that training frameworks print, as typed records.

What a user pastes to show a run that works (or where it stopped) is often its progress lines, not an
NCCL log. Read here, in the frameworks' own formats:

* Hugging Face ``Trainer`` / accelerate (``transformers/trainer.py`` ``log()``: the logs dict printed as
  a Python dict): ``{'loss': 1.306, 'learning_rate': 1.2e-06, 'epoch': 0.0}``, ``{'eval_loss': ...}``,
  ``{'train_runtime': ..., 'train_samples_per_second': ...}`` (``grad_norm`` from 4.38);
* Megatron-LM (``megatron/training/training.py`` ``training_log``): `` iteration      100/  500000 |
  consumed samples: 6400 | elapsed time per iteration (ms): 1234.5 | learning rate: 1.000E-04 | ... |
  lm loss: 7.123456E+00 | ... | number of skipped iterations:   0 | number of nan iterations:   0 |``;
* DeepSpeed (``deepspeed/runtime/engine.py``): ``steps: 100 loss: 1.2345 iter time (s): 0.512
  samples/sec: 62.5`` and ``[Rank 0] step=100, skipped=0, lr=[...]``;
* the PyTorch ImageNet example and the many scripts copied from it (``pytorch/examples``
  ``imagenet/main.py``: ``ProgressMeter`` joins ``AverageMeter`` ``'{name} {val} ({avg})'`` entries with
  tabs; older copies print the same with ``Prec@1``): ``Epoch: [0][10/5005]\tTime 22.424 (7.498)\tData
  22.372 (7.070)\tLoss 6.9065 (6.9074)\t...``; ``Time`` is the whole step, ``Data`` the wait for the batch;
* torchvision's reference scripts' ``MetricLogger.log_every`` (``references/classification/utils.py``,
  copied by DETR, DeiT, MAE): ``Epoch: [0]  [  10/5005]  eta: 1:02:03  lr: 0.1  ...  time: 0.7441
  data: 0.5126  max mem: 10385`` (``time`` and ``data`` as above).

Each line may carry any prefix (a launcher's ``[rank0]:``, a line number the user's viewer added, a
timestamp). :func:`parse_train_log` is pure and never raises for odd lines; :func:`load_train_log` reads
a file and raises :class:`~clusterdoctor.errors.InputError` when no progress line is in it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError

__all__ = ["TrainLog", "TrainStep", "load_train_log", "parse_train_log", "sniff_train_log"]

_NUM = r"[-+]?(?:\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE][-+]?\d{1,4})?|nan|NaN|inf|-inf|Infinity"
# a Hugging Face logs dict: {'loss': 1.3, ...} (single or double quotes); the keys that make it a
# training log, not any dict
_HF = re.compile(
    r"\{['\"](?P<first>loss|eval_loss|train_runtime|train_loss)['\"]: (?P<body>[^{}\n]{0,2000})\}"
)
_HF_ITEM = re.compile(r"['\"](?P<k>\w{1,64})['\"]: (?P<v>" + _NUM + r")")
_MEGATRON = re.compile(
    r"iteration\s{1,16}(?P<it>\d{1,12})/\s{0,16}(?P<total>\d{1,12}) \|(?P<body>[^\n]{0,4000})"
)
_MEG_ITEM = re.compile(r"(?P<k>[a-z][a-z ()/\-]{0,60}?): {0,8}(?P<v>" + _NUM + r") {0,8}\|")
_DS_STEPS = re.compile(
    r"steps: (?P<step>\d{1,12}) loss: (?P<loss>" + _NUM + r")(?: iter time \(s\): (?P<it>" + _NUM + r"))?"
)
_DS_STEP = re.compile(r"\bstep=(?P<step>\d{1,12}), skipped=(?P<skipped>\d{1,12}), lr=\[")
_BATCH = re.compile(r"\[ {0,12}(?P<i>\d{1,12})/(?P<n>\d{1,12})\]")
_EXAMPLES = re.compile(
    r"\bTime {1,8}(?P<t>"
    + _NUM
    + r") \( {0,8}(?P<ta>"
    + _NUM
    + r")\)\s{1,8}Data {1,8}(?P<d>"
    + _NUM
    + r") \( {0,8}(?P<da>"
    + _NUM
    + r")\)"
)
_METRIC_LOGGER = re.compile(r"\btime: (?P<t>" + _NUM + r") {1,8}data: (?P<d>" + _NUM + r")(?: |$)")
_LOSS = re.compile(r"\b[Ll]oss:? {1,8}(?P<l>" + _NUM + r")")
_SNIFF = re.compile(
    rb"\{['\"](?:loss|eval_loss|train_runtime|train_loss)['\"]: |iteration\s{1,16}\d{1,12}/\s{0,16}\d{1,12} \| "
    rb"consumed samples|steps: \d{1,12} loss: |\bstep=\d{1,12}, skipped=\d{1,12}, lr=\["
    rb"|\[ {0,12}\d{1,12}/\d{1,12}\]\s{1,8}(?:Time {1,8}[\d.]{1,20} \( {0,8}[\d.]{1,20}\)\s{1,8}Data |eta: )"
)


@dataclass(frozen=True)
class TrainStep:
    """One progress line: what it reports, as numbers (None where the line does not say)."""

    line: int
    framework: str  # "huggingface", "megatron", "deepspeed"
    step: int | None = None
    loss: float | None = None
    learning_rate: float | None = None
    epoch: float | None = None
    iteration_ms: float | None = None
    skipped: int | None = None  # steps skipped (fp16 overflow) so far, where the framework counts them
    nan_iterations: int | None = None
    kind: str = "train"  # "train", "eval", "summary" (the end-of-training dict)
    step_s: float | None = None  # the step's whole time (s), where the line splits it from ...
    data_s: float | None = None  # ... the time it waited for its batch (the input pipeline)


@dataclass
class TrainLog:
    path: str
    steps: list[TrainStep] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def frameworks(self) -> set[str]:
        return {s.framework for s in self.steps}

    def losses(self) -> list[float]:
        return [s.loss for s in self.steps if s.loss is not None and s.kind == "train"]

    @property
    def non_finite_losses(self) -> list[TrainStep]:
        """Steps whose training loss is NaN or infinite (the run diverged or overflowed)."""
        return [s for s in self.steps if s.loss is not None and not math.isfinite(s.loss)]


def _float(v: str | None) -> float | None:
    if v is None:
        return None
    try:
        return float(v)
    except ValueError:
        return None


def _int(v: str | None) -> int | None:
    f = _float(v)
    return int(f) if f is not None and math.isfinite(f) else None


def parse_train_log(text: str, path: str = "<training log>") -> TrainLog:
    """Every progress line of ``text`` (pure; lines that are not progress lines are ignored)."""
    log = TrainLog(path)
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > 16384:
            continue
        step = _parse_line(line, n)
        if step is not None:
            log.steps.append(step)
    return log


def _parse_line(line: str, n: int) -> TrainStep | None:
    m = _HF.search(line)
    if m is not None:
        items = {k: v for k, v in ((i.group("k"), i.group("v")) for i in _HF_ITEM.finditer(m.group(0)))}
        first = m.group("first")
        kind = (
            "eval"
            if first == "eval_loss"
            else ("summary" if first in ("train_runtime", "train_loss") else "train")
        )
        loss = items.get("loss") or items.get("eval_loss") or items.get("train_loss")
        return TrainStep(
            n,
            "huggingface",
            step=_int(items.get("step")),
            loss=_float(loss),
            learning_rate=_float(items.get("learning_rate")),
            epoch=_float(items.get("epoch")),
            kind=kind,
        )
    m = _MEGATRON.search(line)
    if m is not None:
        items = {i.group("k").strip(): i.group("v") for i in _MEG_ITEM.finditer(m.group("body") + "|")}
        loss = next((v for k, v in items.items() if k.endswith("loss") and k != "loss scale"), None)
        return TrainStep(
            n,
            "megatron",
            step=int(m.group("it")),
            loss=_float(loss),
            learning_rate=_float(items.get("learning rate")),
            iteration_ms=_float(items.get("elapsed time per iteration (ms)")),
            skipped=_int(items.get("number of skipped iterations")),
            nan_iterations=_int(items.get("number of nan iterations")),
        )
    m = _DS_STEPS.search(line)
    if m is not None:
        it = _float(m.group("it"))
        return TrainStep(
            n,
            "deepspeed",
            step=int(m.group("step")),
            loss=_float(m.group("loss")),
            iteration_ms=it * 1000 if it is not None else None,
        )
    m = _DS_STEP.search(line)
    if m is not None:
        return TrainStep(n, "deepspeed", step=int(m.group("step")), skipped=int(m.group("skipped")))
    b = _BATCH.search(line)
    if b is None:
        return None
    m = _EXAMPLES.search(line, b.end())
    framework = "pytorch-examples"
    if m is None:
        m = _METRIC_LOGGER.search(line, b.end())
        framework = "torchvision"
    if m is None:
        return None
    kind = "eval" if line.lstrip().startswith("Test") else "train"
    loss = _LOSS.search(line, b.end())
    return TrainStep(
        n,
        framework,
        step=int(b.group("i")),
        loss=_float(loss.group("l")) if loss else None,
        step_s=_float(m.group("t")),
        data_s=_float(m.group("d")),
        kind=kind,
    )


def sniff_train_log(head: bytes) -> bool:
    """Whether the first bytes hold a training progress line of a framework read here."""
    return _SNIFF.search(head) is not None


def load_train_log(path: str | Path) -> TrainLog:
    """A training log file; InputError when it holds no progress line."""
    from clusterdoctor.observe.limits import read_text

    p = Path(path)
    log = parse_train_log(read_text(p), str(p))
    if not log.steps:
        raise InputError(
            "no training progress line (Hugging Face logs dict, Megatron 'iteration', DeepSpeed 'steps:', "
            "'[i/n] Time .. Data ..' or 'time: .. data: ..')",
            str(p),
        )
    return log
