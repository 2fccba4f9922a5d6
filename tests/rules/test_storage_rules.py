"""Storage rules (STOR001-003) and the storage catalogue through the pipeline."""

from __future__ import annotations

from pathlib import Path

from clusterdoctor.model import Severity
from clusterdoctor.rules import storage
from clusterdoctor.rules.registry import REQUIRED_SECTIONS
from tests.observe.storage.test_usage import BSC_QUOTA, DF_H, QUOTA_S
from tests.rules.test_rdma_ports import alarms, diagnose, first


def test_documented():
    for r in (storage.filesystem_full, storage.quota_exhausted, storage.data_loading_bound):
        assert set(REQUIRED_SECTIONS) <= set(r.sections()) and r.thresholds


def test_full_root_but_not_the_snap_images(tmp_path):
    d = diagnose(tmp_path, "$ df -h\n" + DF_H)
    assert alarms(d) == [("STOR001", "/")]
    assert d.findings[0].severity == Severity.CRITICAL and d.findings[0].causes == ("storage.disk-full",)


def test_dev_shm_full_names_shared_memory(tmp_path):
    d = diagnose(
        tmp_path,
        DF_H.replace("7.1G  700M  92%", "7.8G     0 100%").replace("98G     0 100%", "98G   10G  90%"),
    )
    f = d.findings[0]
    assert (f.rule, f.subject) == ("STOR001", "/dev/shm")
    assert "storage.shm-dataloader" in f.causes


def test_quota_at_limit_beside_the_failed_write(tmp_path):
    # https://github.com/BSC-ES/autosubmit/issues/596
    err = (
        " return self._accessor.open(self, flags, mode)\n"
        "OSError: [Errno 122] Disk quota exceeded: '/home/pr1eld00/pr1eld24/.cache/matplotlib/fontlist-v310.json.matplotlib-lock'\n"
    )
    d = diagnose(tmp_path, err, "pr1eld24@login1:~> bsc_quota\n" + BSC_QUOTA)
    assert first(d) == ("STOR002", "gpfs_home")
    assert {f.rule for f in d.findings} >= {"STOR105"}
    assert not any(w for w in d.warnings if "bsc_quota" in w)  # the SUSE prompt line is a command


def test_soft_quota_within_grace_is_a_warning(tmp_path):
    d = diagnose(tmp_path, QUOTA_S.replace("10000M*  9000M  10000M", "9500M*  9000M  10000M"))
    (f,) = d.findings
    assert (f.rule, f.severity) == ("STOR002", Severity.WARNING)


def test_checkpoint_and_dataloader_messages_name_their_class(tmp_path):
    cases = {
        # https://github.com/guoweiyu/Context-Enhanced-Stereo-Transformer/issues/1
        ">>> torch.load('epoch_15_model.pth.tar')\nRuntimeError: [enforce fail at inline_container.cc:145] . "
        "PytorchStreamReader failed reading zip archive: failed finding central directory\n": "storage.checkpoint-corrupt",
        # https://github.com/zylo117/Yet-Another-EfficientDet-Pytorch/issues/147
        "    fd, size = storage._share_fd_()\nRuntimeError: unable to write to file </torch_74396_2983595444>\n": "storage.shm-dataloader",
        # https://github.com/pytorch/pytorch/issues/10577
        "    serialized_storages[key]._write_file(f, _should_read_directly(f))\n"
        "RuntimeError: write(): fd 29 failed with Input/output error\n": "storage.disk-full",
    }
    for text, cls in cases.items():
        d = diagnose(tmp_path, text)
        assert cls in d.findings[0].causes, (text, d.findings[0].rule)


def test_checkpoint_writer_and_object_store_messages(tmp_path):
    def sub(name: str) -> Path:
        (tmp_path / name).mkdir()
        return tmp_path / name

    inc = Path(__file__).resolve().parents[1] / "data" / "incidents"
    # dev case stor-002: torch.save's writer cannot open the file (the disk was full)
    d = diagnose(tmp_path, (inc / "stor-002" / "paste.txt").read_text())
    f = d.findings[0]
    assert (f.rule, f.subject) == ("STOR114", "my_out/checkpoints/checkpoint_0.pt")
    assert "storage.disk-full" in f.causes
    # thunlp/KnowledgeablePromptTuning#24: PyTorch 2.1+ names a missing directory itself
    d = diagnose(sub("b"), "RuntimeError: Parent directory ckpts does not exist.\n")
    assert first(d) == ("STOR115", "ckpts")
    # dev case stor-018: botocore gave up on the S3 upload
    d = diagnose(sub("c"), (inc / "stor-018" / "paste.txt").read_text())
    assert d.findings[0].rule == "STOR116" and "storage.object-store" in d.findings[0].causes
    # another program's "cannot be opened." is not torch.save's
    from clusterdoctor.observe.messages import scan_text

    assert not [
        h for h in scan_text("xdg-open: File /tmp/x.pdf cannot be opened.\n", "p") if h.code == "STOR114"
    ]


STORAGE_LINES = [
    ("STOR117", "OSError: [Errno 116] Stale file handle", "taiyaki#66"),
    ("STOR117", "[rank1]: OSError: [Errno 116] Stale file handle: xxx", "ms-swift#6695"),
    (
        "STOR117",
        "OSError: [Errno 116] Unable to synchronously create file (unable to fstat file, errno = 116, error message = 'Stale file handle')",
        "h5py#2346",
    ),
    ("STOR118", "RuntimeError: DataLoader worker (pid(s) 25) exited unexpectedly", "detectron2#384"),
    (
        "STOR118",
        "RuntimeError: DataLoader worker (pid 7948) exited unexpectedly with exit code 1",
        "semantic-segmentation-pytorch#80",
    ),
    (
        "STOR116",
        "botocore.exceptions.ConnectionClosedError: Connection was closed before we received a valid response from endpoint URL:",
        "silnlp#565",
    ),
]


def test_storage_lines_are_read_as_their_entry():
    from clusterdoctor.observe.messages import scan_text

    for code, line, source in STORAGE_LINES:
        assert {h.code for h in scan_text(line + "\n", "p")} == {code}, source


def test_a_bus_error_beside_the_worker_exit_leads(tmp_path):
    # CVPR21Chal-SLR#5: the bus error names shared memory; the exit is its symptom
    text = (
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
        "RuntimeError: DataLoader worker (pid(s) 49) exited unexpectedly\n"
    )
    d = diagnose(tmp_path, text)
    assert d.findings[0].rule == "STOR112" and "storage.shm-dataloader" in d.findings[0].causes


_INCIDENTS = Path(__file__).resolve().parents[1] / "data" / "incidents"


def test_imagenet_example_waiting_on_data(tmp_path):
    # dev case stor-016 (pytorch/pytorch#680): Data ~ Time on every step, dataset on a HDD
    d = diagnose(tmp_path, (_INCIDENTS / "stor-016" / "paste.txt").read_text())
    f = d.findings[0]
    assert (f.rule, f.severity) == ("STOR003", Severity.WARNING) and "storage.slow-io" in f.causes
    assert "99%" in f.summary or "100%" in f.summary


def test_steps_that_do_not_wait_on_data_are_quiet(tmp_path):
    # constructed in the two printers' formats (not a pasted sample): data a small share of the step
    lines = (
        "Epoch: [3][ 100/5005]\tTime  0.412 ( 0.420)\tData  0.003 ( 0.010)\tLoss 4.1e+00 (4.2e+00)\n"
        "Epoch: [3][ 110/5005]\tTime  0.409 ( 0.419)\tData  0.002 ( 0.010)\tLoss 4.0e+00 (4.2e+00)\n"
        "Epoch: [0]  [  20/5005]  eta: 0:40:00  lr: 0.1  loss: 6.9 (6.9)  time: 0.4800  data: 0.0020  max mem: 9000\n"
    )
    d = diagnose(tmp_path, lines)
    assert not [f for f in d.findings if f.rule == "STOR003"]


def test_metric_logger_waiting_on_data(tmp_path):
    # constructed in torchvision's MetricLogger format: data 0.51 s of a 0.74 s step
    line = "Epoch: [0]  [  10/5005]  eta: 1:02:03  lr: 0.1  loss: 6.9 (6.9)  time: 0.7441  data: 0.5126  max mem: 10385\n"
    d = diagnose(tmp_path, line * 3)
    assert first(d) == ("STOR003", "data loading")


# invalid load key 'v': the first byte of a Git LFS pointer ("version https://git-lfs...")
LFS_POINTER = {
    # github.com/Rose-STL-Lab/LIMO/issues/3 (the maintainer: "It's a GIT LFS file")
    "LIMO#3": (
        "    magic_number = pickle_module.load(f, **pickle_load_args)\n"
        "_pickle.UnpicklingError: invalid load key, 'v'.\n"
    ),
    # github.com/nasir6/rPPG/issues/27 (resolved with git lfs install, git lfs pull)
    "rPPG#27": (
        "    self.model.load_state_dict(torch.load('linknet.pth'))\n"
        '  File "/home/snowuyl/.local/lib/python3.10/site-packages/torch/serialization.py", line 713, in load\n'
        "    return _legacy_load(opened_file, map_location, pickle_module, **pickle_load_args)\n"
        '  File "/home/snowuyl/.local/lib/python3.10/site-packages/torch/serialization.py", line 920, in '
        "_legacy_load\n"
        "    magic_number = pickle_module.load(f, **pickle_load_args)\n"
        "_pickle.UnpicklingError: invalid load key, 'v'.\n"
    ),
    # github.com/git-lfs/git-lfs/issues/4366 (bk2204: pickle reads the pointer file instead)
    "git-lfs#4366": "\"UnpicklingError: invalid load key, 'v'\"\n",
}


def test_invalid_load_key_v_is_a_git_lfs_pointer(tmp_path):
    for source, text in LFS_POINTER.items():
        d = diagnose(tmp_path, text)
        f = d.findings[0]
        assert f.rule == "STOR120" and f.causes == ("storage.lfs-pointer",), source
        assert "STOR110" not in {g.rule for g in d.findings}, source


def test_other_load_keys_stay_stor110(tmp_path):
    from clusterdoctor.observe.messages import scan_text

    # github.com/pytorch/pytorch/issues/16203 (an HTML page saved as the checkpoint)
    assert {h.code for h in scan_text("_pickle.UnpicklingError: invalid load key, '<'.\n", "p")} == {
        "STOR110"
    }
    # synthetic: a key that only starts with v is not the pointer's (the pattern's boundary)
    hits = scan_text("_pickle.UnpicklingError: invalid load key, 'v1'.\n", "p")
    assert {h.code for h in hits} == {"STOR110"}
