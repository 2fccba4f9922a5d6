"""procfs parsers and collectors, tested on real processes started here and on real kernel output.

Children are real Python processes: they allocate and touch memory, pin themselves and a named
thread with sched_setaffinity, carry a chosen environment, and wait on stdin until the test is done.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from clusterdoctor.errors import InputError, UsageError
from clusterdoctor.observe.node import procfs
from clusterdoctor.observe.node.procfs import (
    collect_process,
    collect_processes,
    find_pids,
    list_pids,
    parse_numa_maps,
    parse_policy,
    parse_status,
    redact_cmdline,
    redact_env,
)
from tests.conftest import TEST_DATA

POLICIES_FILE = TEST_DATA / "procfs" / "numa_maps_policies.txt"
MIB = 1 << 20

CHILD = r"""
import ctypes, os, sys, threading
mib, cpus, thread_cpus = int(sys.argv[1]), sys.argv[2], sys.argv[3]
buf = bytearray(mib << 20)
for i in range(0, len(buf), 4096):
    buf[i] = 1
if cpus != "-":
    os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
started, stop = threading.Event(), threading.Event()
def worker():
    ctypes.CDLL(None).prctl(15, b"cd-worker", 0, 0, 0)
    if thread_cpus != "-":
        os.sched_setaffinity(threading.get_native_id(), {int(c) for c in thread_cpus.split(",")})
    started.set()
    stop.wait()
t = threading.Thread(target=worker)
t.start()
started.wait()
print(threading.get_native_id(), t.native_id, flush=True)
sys.stdin.read()
stop.set()
t.join()
"""


class Child:
    def __init__(self, proc: subprocess.Popen[str], main_tid: int, worker_tid: int) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.main_tid = main_tid
        self.worker_tid = worker_tid


@contextmanager
def start_child(
    mib: int = 16,
    cpus: Sequence[int] | None = None,
    thread_cpus: Sequence[int] | None = None,
    env: dict[str, str] | None = None,
    extra_args: Sequence[str] = (),
    prefix: Sequence[str] = (),
) -> Iterator[Child]:
    """Start a real child that touches ``mib`` MiB, pins itself/its worker thread, and waits."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "NVIDIA_", "NCCL_"))}
    full_env.update(env or {})
    args = [
        *prefix,
        sys.executable,
        "-c",
        CHILD,
        str(mib),
        ",".join(map(str, cpus)) if cpus else "-",
        ",".join(map(str, thread_cpus)) if thread_cpus else "-",
        *extra_args,
    ]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=full_env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"child did not start: {args}")
        main_tid, worker_tid = map(int, line.split())
        yield Child(proc, main_tid, worker_tid)
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=20)
        if proc.stdout:
            proc.stdout.close()


def two_cpus() -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two allowed CPUs")
    return cpus[:2]


def status_kb(text: str, key: str) -> int:
    m = re.search(rf"^{key}:\s+(\d+) kB$", text, re.M)
    assert m, key
    return int(m.group(1)) * 1024


def oracle_bytes_by_node(text: str) -> dict[int, int]:
    """An independent reading of numa_maps: regex per line, N pages times that line's page size."""
    out: dict[int, int] = {}
    for line in text.splitlines():
        page = re.search(r" kernelpagesize_kB=(\d+)$", line)
        for node, pages in re.findall(r" N(\d+)=(\d+)", line):
            assert page, line
            out[int(node)] = out.get(int(node), 0) + int(pages) * int(page.group(1)) * 1024
    return out


# -- parse_numa_maps on the captured real file ------------------------------------------------


def test_captured_policies_file_each_policy_with_its_bytes() -> None:
    text = POLICIES_FILE.read_text()
    nm = parse_numa_maps(text, str(POLICIES_FILE))
    # Read from the file: each mbind()'ed region was fully touched (README: sizes in MiB).
    expected = {
        "bind:0": 8 * MIB,
        "bind=static:0": 3 * MIB,
        "interleave:0": 5 * MIB,
        "prefer:0": 2 * MIB,
        "prefer=relative:0": 1 * MIB,
        "prefer (many):0": 6 * MIB,
        "weighted interleave:0": 7 * MIB,
        "local": 4 * MIB,
    }
    for policy, nbytes in expected.items():
        assert nm.policy_bytes[policy] == nbytes, policy
    by_text = {v.policy.text: v for v in nm.policy_vmas}
    assert set(by_text) == set(expected)
    assert by_text["bind:0"].start == 0x7F257F964000
    assert by_text["bind:0"].bytes_by_node == {0: 8 * MIB}
    wi = by_text["weighted interleave:0"].policy
    assert (wi.mode, wi.nodes, wi.flags, wi.binds) == ("weighted interleave", (0,), (), True)
    pm = by_text["prefer (many):0"].policy
    assert (pm.mode, pm.nodes) == ("prefer (many)", (0,))
    assert by_text["bind=static:0"].policy.flags == ("static",)
    assert by_text["prefer=relative:0"].policy.flags == ("relative",)
    assert by_text["local"].policy.binds is False
    assert nm.vma_count == 126  # lines in the file, including six with no resident pages
    assert nm.bytes_by_node == oracle_bytes_by_node(text)
    assert set(nm.bytes_by_node) == {0}
    assert nm.total_bytes == sum(nm.policy_bytes.values())
    assert nm.huge_bytes_by_node == {}
    assert nm.warnings == []


def test_bytes_follow_each_lines_page_size() -> None:
    # Real line from the captured file, and the same VMA as a 2 MB hugetlb mapping would print.
    real = POLICIES_FILE.read_text().splitlines()
    bind_line = next(line for line in real if " bind:0 " in line)
    huge_line = (
        "7f0000000000 bind:1 file=/anon_hugepage\\040(deleted) huge dirty=3 N1=3 kernelpagesize_kB=2048"
    )
    nm = parse_numa_maps(bind_line + "\n" + huge_line + "\n")
    assert nm.bytes_by_node == {0: 2048 * 4096, 1: 3 * 2048 * 1024}
    assert nm.huge_bytes_by_node == {1: 3 * 2048 * 1024}
    assert nm.policy_bytes == {"bind:0": 8 * MIB, "bind:1": 6 * MIB}


def test_parse_policy_forms() -> None:
    p = parse_policy("prefer (many)=static|balancing:0-2,5")
    assert (p.mode, p.flags, p.nodes) == ("prefer (many)", ("static", "balancing"), (0, 1, 2, 5))
    assert parse_policy("default").nodes == ()
    for bad in ("bogus:0", "bind=wobbly:0", "bind:x", "bind=:0"):
        with pytest.raises(InputError):
            parse_policy(bad)


def test_empty_numa_maps_is_empty_not_an_error() -> None:
    nm = parse_numa_maps("")
    assert (nm.total_bytes, nm.vma_count, nm.bytes_by_node) == (0, 0, {})


def test_truncated_last_line_is_dropped_with_warning() -> None:
    text = POLICIES_FILE.read_text()
    lines = text.splitlines()
    # Cut the last line that has pages just before its page-size item, as a short read would.
    idx = max(i for i, line in enumerate(lines) if " N0=" in line)
    cut = lines[idx][: lines[idx].index(" kernelpagesize_kB")]
    truncated = "\n".join([*lines[:idx], cut])
    nm = parse_numa_maps(truncated)
    assert nm.warnings == [f"line {idx + 1}: truncated, dropped"]
    assert nm.vma_count == idx
    assert nm.bytes_by_node == oracle_bytes_by_node("\n".join(lines[:idx]))


@pytest.mark.parametrize(
    ("mutation", "line"),
    [
        (lambda ls: [*ls[:3], "hello world", *ls[3:]], 4),
        (lambda ls: [*ls[:2], ls[2].replace("default", "sometimes", 1), *ls[3:]], 3),
        (lambda ls: [*ls[:1], ls[1].replace(" N0=", " N0=x"), *ls[2:]], 2),
        (lambda ls: [*ls[:1], ls[1].replace(" kernelpagesize_kB=4", ""), *ls[2:]], 2),
        (lambda ls: [*ls[:1], ls[1].replace("kernelpagesize_kB=4", "kernelpagesize_kB=0"), *ls[2:]], 2),
        (lambda ls: ["zz" + ls[0], *ls[1:]], 1),
    ],
)
def test_garbage_raises_input_error_with_line(mutation, line: int) -> None:
    lines = POLICIES_FILE.read_text().splitlines()
    assert " N0=" in lines[1]
    with pytest.raises(InputError) as ei:
        parse_numa_maps("\n".join(mutation(lines)) + "\n", "x/numa_maps")
    assert ei.value.line == line
    assert ei.value.path == "x/numa_maps"


def test_numa_maps_of_a_live_process_matches_its_rss() -> None:
    with start_child(mib=48) as child:
        text = Path(f"/proc/{child.pid}/numa_maps").read_text()
        status = Path(f"/proc/{child.pid}/status").read_text()
    nm = parse_numa_maps(text)
    assert nm.bytes_by_node == oracle_bytes_by_node(text)
    rss = status_kb(status, "VmRSS")
    assert nm.total_bytes >= 48 * MIB
    # numa_maps counts the same mapped pages the RSS does (both walk the page tables).
    assert 0.8 * rss <= nm.total_bytes <= 1.2 * rss


@pytest.mark.parametrize(
    ("option", "policy"),
    [
        ("--membind=0", "bind:0"),
        ("--preferred-many=0", "prefer (many):0"),
        ("--interleave=0", "interleave:0"),
        ("--localalloc", "local"),
    ],
)
def test_live_policy_from_numactl(option: str, policy: str) -> None:
    if shutil.which("numactl") is None:
        pytest.skip("numactl not installed")
    with start_child(mib=16, prefix=["numactl", option, "--"]) as child:
        text = Path(f"/proc/{child.pid}/numa_maps").read_text()
    nm = parse_numa_maps(text)
    # numactl sets the task policy before exec: every VMA shows it.
    assert set(nm.policy_bytes) == {policy}
    assert nm.policy_bytes[policy] == nm.total_bytes >= 16 * MIB
    assert len(nm.policy_vmas) == nm.vma_count


# -- parse_status ------------------------------------------------------------------------------


def test_parse_status_of_a_pinned_child() -> None:
    cpus = two_cpus()
    with start_child(mib=8, cpus=[cpus[1]]) as child:
        text = Path(f"/proc/{child.pid}/status").read_text()
    st = parse_status(text)
    assert st["Pid"] == child.pid and st["Tgid"] == child.pid
    assert st["PPid"] == os.getpid()
    assert st["Name"] == "python3" or st["Name"].startswith("python")
    assert st["Cpus_allowed_list"] == (cpus[1],)
    online = Path("/sys/devices/system/node/online").read_text().strip()
    assert set(st["Mems_allowed_list"]) <= set(procfs.parse_cpulist(online))
    assert st["VmRSS"] == status_kb(text, "VmRSS") >= 8 * MIB
    assert st["Threads"] == 2
    assert st["State"][0] in "RSD"


def test_parse_status_escaped_name_and_errors() -> None:
    text = Path("/proc/self/status").read_text()
    named = re.sub(r"^Name:\t.*$", lambda m: "Name:\ta\\\\b\\nc", text, flags=re.M)
    assert parse_status(named)["Name"] == "a\\b\nc"
    with pytest.raises(InputError):
        parse_status(re.sub(r"^Pid:.*\n", "", text, flags=re.M), "x/status")
    with pytest.raises(InputError):
        parse_status(text.replace("Pid:\t", "Pid:\tx"))
    with pytest.raises(InputError):
        parse_status(text + "no colon here\n")
    with pytest.raises(InputError):
        parse_status(re.sub(r"^Cpus_allowed_list:.*$", "Cpus_allowed_list:\t3-1", text, flags=re.M))


# -- collect_process on real children ----------------------------------------------------------


def test_collect_process_env_threads_and_redaction() -> None:
    cpus = two_cpus()
    env = {
        "CUDA_VISIBLE_DEVICES": "1",
        "LOCAL_RANK": "1",
        "NCCL_DEBUG": "INFO",
        "NCCL_TEST_AUTH_TOKEN": "nccl-secret-value",
        "HF_TOKEN": "hf-secret-value",
        "UNRELATED": "x",
    }
    args = [
        "--api-key=sekrit-1",
        "--password",
        "sekrit-2",
        "https://bob:sekrit-3@example.invalid/x",
        "--lr=3",
    ]
    with start_child(mib=8, cpus=cpus, thread_cpus=[cpus[0]], env=env, extra_args=args) as child:
        info = collect_process(child.pid)
    assert info.error is None, info.error
    assert info.comm and info.comm.startswith("python")
    assert info.cpus_allowed == tuple(cpus)
    assert info.env == {
        "CUDA_VISIBLE_DEVICES": "1",
        "LOCAL_RANK": "1",
        "NCCL_DEBUG": "INFO",
        "NCCL_TEST_AUTH_TOKEN": "<redacted>",
    }
    dumped = json.dumps(info.as_dict())
    for secret in ("sekrit-1", "sekrit-2", "sekrit-3", "nccl-secret-value", "hf-secret-value"):
        assert secret not in dumped
    assert "--lr=3" in info.cmdline and "--api-key=<redacted>" in info.cmdline
    by_tid = {t.tid: t for t in info.threads}
    assert set(by_tid) == {child.main_tid, child.worker_tid}
    assert by_tid[child.worker_tid].name == "cd-worker"
    assert by_tid[child.worker_tid].cpus_allowed == (cpus[0],)
    assert by_tid[child.main_tid].cpus_allowed == tuple(cpus)
    assert info.numa_maps is not None and info.numa_maps.total_bytes >= 8 * MIB
    assert info.nvidia_devices == () and info.uverbs == {}


def test_collect_process_that_already_exited_is_vanished() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=20)
    info = collect_process(proc.pid)
    assert info.error == "vanished"
    assert info.pid == proc.pid


def copy_proc_tree(
    pid: int, dest: Path, names: Sequence[str] = ("status", "numa_maps", "cmdline", "comm")
) -> Path:
    """Copy real /proc/<pid> files into a proc-like tree (for cases a live /proc cannot stage)."""
    d = dest / str(pid)
    d.mkdir(parents=True)
    for name in names:
        (d / name).write_bytes(Path(f"/proc/{pid}/{name}").read_bytes())
    return d


def test_vanishing_mid_scan_gives_vanished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pid_dir = copy_proc_tree(os.getpid(), tmp_path)
    real_read = procfs._read_bytes

    def read_then_exit(path: str) -> bytes:
        data = real_read(path)
        if path.endswith("/status"):  # the process exits right after its status was read
            shutil.rmtree(pid_dir)
        return data

    monkeypatch.setattr(procfs, "_read_bytes", read_then_exit)
    info = collect_process(os.getpid(), str(tmp_path))
    assert info.error == "vanished"


def test_unreadable_status_is_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy_proc_tree(os.getpid(), tmp_path)

    def deny(path: str) -> bytes:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(procfs, "_read_bytes", deny)
    info = collect_process(os.getpid(), str(tmp_path))
    assert info.error == "permission denied: status"


def test_unreadable_numa_maps_of_a_real_process_is_recorded() -> None:
    # In this container even root may not read numa_maps of pid 1 (ptrace access check).
    try:
        Path("/proc/1/numa_maps").read_bytes()
        pytest.skip("/proc/1/numa_maps is readable here")
    except PermissionError:
        pass
    info = collect_process(1)
    assert info.error is None
    assert info.unreadable["numa_maps"] == "permission denied"
    assert info.numa_maps is None
    assert info.cpus_allowed is not None


def test_bad_numa_maps_in_a_tree_is_reported_not_raised(tmp_path: Path) -> None:
    d = copy_proc_tree(os.getpid(), tmp_path)
    (d / "numa_maps").write_text("this is not numa_maps\n")
    info = collect_process(os.getpid(), str(tmp_path))
    assert info.error is not None and info.error.startswith("bad input:")
    assert "numa_maps" in info.error


def test_open_gpu_and_uverbs_fds_in_a_constructed_tree(tmp_path: Path) -> None:
    """A proc-like tree (real status/numa_maps of this process) whose fd/ links name GPU and RDMA
    devices, with a sysfs root mapping uverbs0 -> mlx5_0: both constructed, no such devices here."""
    d = copy_proc_tree(os.getpid(), tmp_path / "proc")
    fd = d / "fd"
    fd.mkdir()
    targets = [
        "/dev/nvidia1",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/infiniband/uverbs0",
        "/dev/infiniband/uverbs3",
        "/dev/null",
        "socket:[1234]",
        "/dev/nvidia1",
    ]
    for i, t in enumerate(targets):
        os.symlink(t, fd / str(i))
    ib = tmp_path / "sys" / "sys" / "class" / "infiniband_verbs" / "uverbs0"
    ib.mkdir(parents=True)
    (ib / "ibdev").write_text("mlx5_0\n")
    info = collect_process(os.getpid(), str(tmp_path / "proc"), sysfs_root=str(tmp_path / "sys"))
    assert info.error is None
    assert info.nvidia_devices == (1,)
    assert info.uverbs == {0: "mlx5_0", 3: None}
    assert info.unreadable.get("environ") == "missing"
    assert info.unreadable.get("task") == "missing"


# -- listing and matching ----------------------------------------------------------------------


def test_list_and_find_pids() -> None:
    marker = "cd-find-marker-7d1"
    with start_child(mib=1, extra_args=[marker]) as child:
        pids = list_pids()
        assert child.pid in pids and os.getpid() in pids
        assert pids == sorted(pids)
        assert find_pids(re.escape(marker)) == [child.pid]
        assert child.pid in find_pids(r"^python")  # comm or argv[0]
    assert list_pids("/nonexistent") == []
    with pytest.raises(UsageError):
        find_pids("(unclosed")


def test_find_pids_excludes_self() -> None:
    assert os.getpid() not in find_pids(re.escape(" ".join(sys.argv[:1])))
    assert os.getpid() in find_pids(".", exclude_self=False)


def test_collect_processes_without_nvml() -> None:
    with start_child(mib=1) as child:
        infos = collect_processes([child.pid], threads=False)
    assert [i.pid for i in infos] == [child.pid]
    assert infos[0].threads == []
    assert infos[0].nvml_gpus is None  # nvidia-ml-py absent here: not asked, no error


# -- redaction ---------------------------------------------------------------------------------


def test_redact_cmdline_forms() -> None:
    args = [
        "torchrun",
        "--hf_token=abc",
        "--secret-file",
        "/run/s",
        "AWS_SECRET_ACCESS_KEY=xyz",
        "Authorization: Bearer qq",
        "s3://u:pw@bucket/k",
        "--batch=8",
    ]
    assert redact_cmdline(args) == [
        "torchrun",
        "--hf_token=<redacted>",
        "--secret-file",
        "<redacted>",
        "AWS_SECRET_ACCESS_KEY=<redacted>",
        "Authorization: Bearer <redacted>",
        "s3://u:<redacted>@bucket/k",
        "--batch=8",
    ]


def test_redact_env() -> None:
    assert redact_env({"NCCL_IB_HCA": "mlx5_0", "MY_API_KEY": "k", "URL": "http://a:b@h"}) == {
        "NCCL_IB_HCA": "mlx5_0",
        "MY_API_KEY": "<redacted>",
        "URL": "http://a:<redacted>@h",
    }


def test_kernel_thread_is_marked_and_not_probed() -> None:
    status = Path("/proc/2/status")
    if not status.exists() or "Kthread:\t1" not in status.read_text():
        pytest.skip("pid 2 is not a kernel thread here (e.g. in a pid namespace)")
    info = collect_process(2)
    assert info.error is None and info.kernel_thread
    assert info.cmdline == [] and info.env == {} and info.unreadable == {}
    assert info.numa_maps is not None and info.numa_maps.total_bytes == 0


# -- NVML (optional) ---------------------------------------------------------------------------


def test_nvml_absent_gives_empty_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterdoctor.observe.node import nvml

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert nvml.gpu_processes() == {}
    assert nvml.gpu_uuids() == {}


def test_nvml_mapping_with_a_stub_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in for pynvml (constructed: nvidia-ml-py is not installed here) with two GPUs."""
    import types

    from clusterdoctor.observe.node import nvml

    class NVMLError(Exception):
        pass

    calls: list[str] = []
    procs = {
        0: [types.SimpleNamespace(pid=101), types.SimpleNamespace(pid=102)],
        1: [types.SimpleNamespace(pid=101)],
    }

    def graphics(h: int) -> list:
        raise NVMLError("not supported")

    stub = types.SimpleNamespace(
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetComputeRunningProcesses=lambda h: procs[h],
        nvmlDeviceGetGraphicsRunningProcesses=graphics,
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}".encode(),
    )
    monkeypatch.setitem(sys.modules, "pynvml", stub)
    assert nvml.gpu_processes() == {101: [0, 1], 102: [0]}
    assert nvml.gpu_uuids() == {"GPU-0": 0, "GPU-1": 1}
    assert calls == ["init", "shutdown", "init", "shutdown"]
    stub.nvmlInit = lambda: (_ for _ in ()).throw(NVMLError("driver not loaded"))
    assert nvml.gpu_processes() == {}
