"""The NCCL and PyTorch message catalogues (rules/catalog/nccl.py, torch.py) on real lines: every variant
each entry claims, as printed in public threads (the URL beside each line) or in a dev case of the incident
corpus; the line is read as that entry's code, with the instance its pattern names; near misses are not."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.messages import scan_text
from clusterdoctor.rules.catalog import by_code

INCIDENTS = Path(__file__).resolve().parents[1] / "data" / "incidents"

# (code, real line, subject the entry names or None, source)
LINES = [
    # NCCL101 /dev/shm: 2.12+ shmutils.cc, 2.4-2.11 shm.h, and the message quoted without its prefix
    (
        "NCCL101",
        "ubuntu:9621:9691 [6] misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-fjwOOB to 5967876 bytes",
        None,
        "nccl-tests#166",
    ),
    (
        "NCCL101",
        "ubuntu:9621:9688 [3] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-KWfVyt (size 5967872)",
        None,
        "nccl-tests#166",
    ),
    (
        "NCCL101",
        "Error while creating shared memory segment /dev/shm/nccl-pZafXL (size 7340384)",
        None,
        "video-diffusion-speedrun#2",
    ),
    (
        "NCCL103",
        "[155] crow-ib-new-nccl-256-info-19:5330:7970 [3] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument",
        None,
        "nccl#302",
    ),
    (
        "NCCL104",
        "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 2000",
        "rank 0 and rank 1 on GPU busId 2000",
        "D-FINE#289",
    ),
    ("NCCL105", "[rank0]: Bootstrap : no socket interface found", None, "open-r1-multimodal#7"),
    ("NCCL106", "graph/xml.h:77 NCCL WARN Attribute arch of node cpu not found", None, "nccl#379"),
    (
        "NCCL108",
        "kolyoz2:25146:25854 [0] ib_plugin.c:1105 NCCL WARN NET/IB : Got completion from peer 10.0.35.1<49189> with error 4, opcode 5327, len 5327, vendor err 81 (Send)",
        "peer 10.0.35.1<49189>",
        "nccl-tests#252",
    ),
    (
        "NCCL109",
        "RuntimeError: CUDA error: peer access is not supported between these two devices",
        None,
        "verl#1874",
    ),
    (
        "NCCL110",
        "init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 39. You can use NCCL_DEBUG=INFO",
        "around rank 39",
        "nccl#296",
    ),
    (
        "NCCL111",
        "10.10.23.10: so-ucloud-10-10-23-10:1307367:1307586 [0] transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size 65536",
        None,
        "nccl#969",
    ),
    (
        "NCCL112",
        "compute-st-p4de24xlarge-2:4827:6900 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4",
        None,
        "nccl#1176",
    ),
    (
        "NCCL113",
        "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : Software caused connection abort",
        "peer 10.0.0.2<45763>",
        "nccl-tests#166",
    ),
    (
        "NCCL113",
        "socketPollConnect: connect to 169.254.20.10<52597> returned Connection refused",
        "peer 169.254.20.10<52597>",
        "ms-swift#8043",
    ),
    ("NCCL113", "NCCL WARN Call to connect timeout : Connection refused", None, "horovod#666"),
    # NCCL125: no route to the peer (EHOSTUNREACH / ENETUNREACH): the interface, not the port
    (
        "NCCL125",
        "socketStartConnect: Connect to 192.168.19.14<52822> failed : No route to host",
        "peer 192.168.19.14<52822>",
        "nccl-301 (dev)",
    ),
    # the same failure as 2.28+ prints it (src/os/linux.cc format strings, strerror(ENETUNREACH))
    (
        "NCCL125",
        "ncclOsSocketPollConnect to 10.0.0.3<41234> failed with error Network is unreachable",
        "peer 10.0.0.3<41234>",
        "NVIDIA/nccl src/os/linux.cc",
    ),
    (
        "NCCL125",
        "socketPollConnect: Connect to 10.1.1.2<3456> returned 113(No route to host) errno 115(Operation now in progress)",
        "peer 10.1.1.2<3456>",
        "NVIDIA/nccl v2.21.5-1 src/misc/socket.cc",
    ),
    (
        "NCCL114",
        "a100-st-p4d24xlarge-22:183006:183181 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer a100-st-p4d24xlarge-22.luciodelelis-92732890-0458-4f76-8369-c4fee80b23e7.pcluster<47861>",
        "peer a100-st-p4d24xlarge-22.luciodelelis-92732890-0458-4f76-8369-c4fee80b23e7.pcluster<47861>",
        "nccl#795",
    ),
    # the NVLS bind failure is FABMGR105's (one entry per message; NCCL116 is gone)
    (
        "FABMGR105",
        "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot be performed in the present state'.",
        None,
        "pytorch#177472",
    ),
    # NCCL120: the two messages of an address without a family (no interface found)
    (
        "NCCL120",
        "[trainer0|0]:ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)",
        None,
        "nccl#1837",
    ),
    (
        "NCCL120",
        "e66aa18dc444:3171:3171 [0] include/socket.h:311 WARN Socket creation failed : Address family not supported by protocol",
        None,
        "incidents nccl-013",
    ),
    (
        "NCCL120",
        "include/socket.h:344 WARN Socket creation failed : Address family not supported by protocol",
        None,
        "incidents nccl-047",
    ),
    # NCCL121: the peer is the loopback (NCCL113 is any other peer)
    (
        "NCCL121",
        "10: socketStartConnect: Connect to 127.0.0.1<45069> failed : Software caused connection abort",
        "peer 127.0.0.1<45069>",
        "awsome-distributed-ai#192",
    ),
    (
        "NCCL122",
        "Spotllm:73025:73112 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/microsoft/ncv4/graph.xml",
        "NCCL_GRAPH_FILE=/opt/microsoft/ncv4/graph.xml",
        "nccl#1240",
    ),
    (
        "NCCL117",
        "P2P is disabled between NVLINK connected GPUs 1 and 0. This should not be the case given their connectivity",
        "GPUs 1 and 0",
        "nccl#2329",
    ),
    (
        "NCCL118",
        "ng30903:3063028:3066152 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes",
        "GPU 3",
        "nccl#1235",
    ),
    (
        "NCCL118",
        "VM-0-16-ubuntu:392:494 [2] enqueue.cc:43 NCCL WARN Cuda failure 'out of memory'",
        "GPU 2",
        "TensorRT-LLM#1670",
    ),
    (
        "TORCH101",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory",
        None,
        "nccl#1284",
    ),
    (
        "TORCH101",
        "CUDA out of memory. Tried to allocate 4.00 GiB (GPU 0; 10.73 GiB total capacity; 4.41 GiB already allocated",
        "GPU 0",
        "gtad#30",
    ),
    ("TORCH102", "RuntimeError: CUDA error: an illegal memory access was encountered", None, "TEGNAS#19"),
    (
        "TORCH103",
        "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:658: indexSelectLargeIndex: block: [63,0,0], thread: [56,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
        None,
        "Chart2Text#1",
    ),
    (
        "TORCH104",
        "THCudaCheck FAIL file=/pytorch/torch/csrc/cuda/Module.cpp line=33 error=10 : invalid device ordinal",
        None,
        "HRNet#171",
    ),
    (
        "TORCH105",
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 (pid: 47139) of binary:  xxx",
        "local_rank 1",
        "Qwen#423",
    ),
    (
        "TORCH106",
        "[2024-02-09 09:09:15,164] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 (pid: 170581) of binary: /usr/bin/python3.10",
        "local_rank 0",
        "speechbrain#2401",
    ),
    (
        "TORCH107",
        "[W socket.cpp:401] [c10d] The server socket has failed to listen on [::]:47531 (errno: 98 - Address already in use).",
        None,
        "pytorch#85604",
    ),
    (
        "TORCH108",
        "[W C:\\actions-runner\\_work\\pytorch\\pytorch\\builder\\windows\\pytorch\\torch\\csrc\\distributed\\c10d\\socket.cpp:558] [c10d] The client socket has failed to connect to [neo2]:29500 (system error: 10049 - The requested address context is invalid.).",
        None,
        "llama3#158",
    ),
    (
        "TORCH109",
        "[RANK 1] 2026-05-19 10:10:29,701 [ERROR] GPU circuit breaker OPEN: cuda_error - Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=101, OpType=ALLGATHER, TensorShape=[1], TensorDtypes=Long), but Rank 7 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=REDUCE).",
        "ranks 1 and 7",
        "SimpleTuner#2712",
    ),
    ("TORCH110", "RuntimeError: NCCL Error 2: unhandled system error", None, "nccl#473"),
    (
        "LAUNCH101",
        "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', '--local_rank=0'] exits with return code = -9",
        None,
        "DeepSpeed#3232",
    ),
    (
        "LAUNCH102",
        "[2024-03-20 20:31:29,269] [ERROR] [launch.py:321:sigkill_handler] ['/data/anaconda3/envs/llama/bin/python', '-u', 'src/train_bash.py', '--local_rank=4'] exits with return code = 1",
        None,
        "DeepSpeed#5302",
    ),
    (
        "LAUNCH103",
        "slurmstepd: error: Detected 1 oom_kill event in StepId=11300781.0. Some of the step tasks have been OOM Killed.",
        "step 11300781.0",
        "nextflow#5932",
    ),
    (
        "LAUNCH103",
        "slurmstepd: error: Detected 2 oom-kill event(s) in step 3756240.batch cgroup.",
        "step 3756240.batch",
        "PyBNF#118",
    ),
    ("LAUNCH103", "srun: error: node107: task 0: Out Of Memory", None, "brain-score/vision#950"),
    (
        "LAUNCH104",
        "Abort(3712399) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init: Other MPI error, error stack:",
        None,
        "nccl-tests#92",
    ),
    (
        "LAUNCH106",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        None,
        "ray docs",
    ),
    # TORCH118: the store counted other than world_size ranks (both wordings, both directions)
    (
        "TORCH118",
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: store_based_barrier_key:1 (world_size=2, worker_count=1, timeout=0:10:00)",
        None,
        "Megatron-LM#782",
    ),
    (
        "TORCH118",
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 2, for key: store_based_barrier_key:1 (world_size=2, worker_count=4, timeout=0:30:00)",
        None,
        "tczhangzhi/pytorch-distributed#18",
    ),
    (
        "TORCH118",
        "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/3 clients joined.",
        None,
        "OpenRLHF#1040",
    ),
    (
        "TORCH118",
        "torch.distributed.DistStoreError: Timed out after 6 seconds waiting for workers. 1/2 workers joined.",
        None,
        "pytorch#111805",
    ),
    (
        "TORCH108",
        "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect to (172.17.0.9, 46229).",
        None,
        "vllm#19670",
    ),
    (
        "TORCH114",
        'raise RuntimeError("Distributed package doesn\'t have NCCL " "built in")',
        None,
        "incidents nccl-048",
    ),
    ("TORCH114", "RuntimeError: Distributed package doesn't have NCCL built in", None, "whisper-vits-svc#97"),
    ("TORCH115", "RuntimeError: Tensors must be CUDA and dense", None, "pytorch/examples#1030"),
    (
        "TORCH116",
        "[rank8] Warning: Unable to resolve hostname to a (local) address. Using the loopback",
        None,
        "aws-do-eks#50",
    ),
    (
        "TORCH117",
        "[rank8] Gloo connectFullMesh failed ... timed out connecting: SO_ERROR: Connection refused,remote=[127.0.0.1]:14215",
        None,
        "aws-do-eks#50",
    ),
    (
        "TORCH107",
        "RuntimeError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
        "port 29500",
        "mochi-xdit#22",
    ),
    (
        "TORCH109",
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running inconsistent collective: CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[4], TensorDtypes=Float",
        "rank 0",
        "incidents nccl-038",
    ),
    (
        "TORCH119",
        "RuntimeError: [3] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by key '1', but store->get('1') got error: Socket Timeout",
        "rank 0",
        "nccl#845",
    ),
    (
        "TORCH119",
        "B-nemo-ft3/0 [default1]:[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 600000ms, keys: /default_pg/0//cuda//0",
        "rank 0",
        "NeMo/Speech#14399",
    ),
    (
        "TORCH119",
        "RuntimeError: [3] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got exception: Socket Timeout",
        "rank 0",
        "pytorch#68597",
    ),
    (
        "NCCL123",
        ":41367:41367 [1] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available",
        None,
        "nccl#653",
    ),
    (
        "NCCL123",
        "Error : no algorithm/protocol available for function AllReduce with datatype ncclInt64. NCCL_ALGO was set to reducescatter:nvls;allreduce:nvls.",
        "NCCL_ALGO=reducescatter:nvls;allreduce:nvls",
        "nccl#1898",
    ),
    (
        "NCCL123",
        "238: [rank238]: Error : no algorithm/protocol available for function AllGather with datatype ncclInt8.",
        None,
        "nccl#1709",
    ),
    (
        "TORCH112",
        "[rank0]: RuntimeError: DataLoader worker (pid 2637) is killed by signal: Killed. ",
        None,
        "Megatron-LM#1657",
    ),
    # NCCL126: nccl-tests' unhandled CUDA error, as sichek quotes it and as nccl-tests 2.x prints it
    ("NCCL126", "Test NCCL failure common.cu:1294 'unhandled cuda error ...'", None, "sichek#71"),
    (
        "NCCL126",
        "HCA-14: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '",
        None,
        "nccl-tests#322",
    ),
]


@pytest.mark.parametrize("code,line,subject,source", LINES, ids=[f"{c}-{s}" for c, _, _, s in LINES])
def test_real_line_is_read_as_its_entry(code: str, line: str, subject: str | None, source: str) -> None:
    hits = [h for h in scan_text(line + "\n", "paste") if h.code == code]
    assert hits, f"{code} does not read its line from {source}"
    if subject is not None:
        from clusterdoctor.rules.messages import _subject

        assert _subject(by_code()[code], hits[0]) == subject


NEAR_MISSES = [
    # NCCL's INFO line for PCIe GPUs without P2P (consumer cards): normal, not the NVLink hardware warning
    "bcc:89404:89404 [2] NCCL INFO P2P is disabled between connected GPUs 6 and 7. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.",
    # a flushed work request (status 5) is the consequence of an earlier error, not retries exhausted
    "NET/IB : Got completion from peer 192.168.1.1<40846> with error 5, opcode 0",
    # a peer at the loopback is NCCL121's, not NCCL113's (checked in the test below)
    # normal NCCL init lines
    "node:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    "node:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "node:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P/IPC",
    # a worker that exited 0, and glibc's own assert (apostrophe, not a CUDA kernel's backticks)
    "INFO:torch.distributed.elastic.agent.server.api:[default] worker group successfully finished.",
    "python: malloc.c:2379: sysmalloc: Assertion `(old_top == initial_top (av) && old_size == 0)' failed.",
]


@pytest.mark.parametrize("line", NEAR_MISSES)
def test_normal_or_other_lines_are_not_read(line: str) -> None:
    codes = {h.code for h in scan_text(line + "\n", "paste")}
    assert not {c for c in codes if c.startswith(("NCCL", "TORCH"))}, codes


def test_nccl_tests_failure_by_its_error_string() -> None:
    """An unhandled CUDA error is NCCL126's (what it most often is, sichek#71), every other error NCCL119's."""
    cuda = "HCA-28: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '"
    system = (INCIDENTS / "nccl-028" / "paste.txt").read_text()  # nccl#473: 'unhandled system error'
    assert {h.code for h in scan_text(cuda + "\n", "p")} & {"NCCL119", "NCCL126"} == {"NCCL126"}
    assert {h.code for h in scan_text(system, "p")} & {"NCCL119", "NCCL126"} == {"NCCL119"}
    m = by_code()["NCCL126"]
    assert m.role == "symptom" and "torch.cuda-oom" in m.causes


def test_sigkill_is_the_cause_and_the_generic_failure_a_symptom() -> None:
    """torchrun prints 'failed (exitcode: -9)': the SIGKILL entry reads it, the generic failure does not."""
    line = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 (pid: 4) of binary: x"
    codes = {h.code for h in scan_text(line + "\n", "p")}
    assert "TORCH105" in codes and "TORCH106" not in codes
    assert by_code()["TORCH106"].role == "symptom" and by_code()["TORCH110"].role == "symptom"


def test_entry_variants_share_no_literal_but_are_each_found() -> None:
    """NCCL101 lists three triggers (its wordings share none): each wording alone is found once."""
    m = by_code()["NCCL101"]
    assert len(m.all_triggers) == 3
    text = "\n".join(
        [
            "h:1:2 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
            "h:1:2 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9 bytes",
            "h:1:2 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/x (size 9)",
        ]
    )
    hits = [h for h in scan_text(text + "\n", "p") if h.code == "NCCL101"]
    assert [h.line for h in hits] == [1, 2, 3]


@pytest.mark.parametrize("case", ["nccl-002", "nccl-020"])
def test_nccl_log_whose_lines_start_with_a_bracket_is_scanned(case: str) -> None:
    """A log that starts with '[2026-…]' or '[1,0]<stdout>:' is not JSON: its known messages are read
    beside its own parser (observe/detect.py)."""
    from clusterdoctor.observe.detect import load_path

    what, data = load_path(INCIDENTS / case / "paste.txt")
    assert what == "NCCL log" and {h.code for h in data["messages"]} & {"NCCL101", "NCCL104"}


# the candidate scan (one bytes.find pass per trigger, observe/messages.py) finds exactly the lines a naive
# line-by-line match finds, whatever the text around them
_SAMPLES = [line for _code, line, _subject, _src in LINES[:12]] + [
    "plain text",
    "",
    "NCCL INFO ok",
    "x" * 300,
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(_SAMPLES) | st.text(max_size=80).map(lambda s: s.replace("\n", " ")), max_size=30
    )
)
def test_candidate_scan_equals_naive_per_line_match(lines: list[str]) -> None:
    from clusterdoctor.rules.catalog import all_messages

    text = "\n".join(lines) + "\n"
    got = sorted((h.line, h.code) for h in scan_text(text, "p"))
    want = []
    split = text.split("\n")
    for n, line in enumerate(split[:-1], 1):
        nxt = split[n] if n < len(split) else ""
        for m in all_messages():
            if not any(t in line for t in m.all_triggers):
                continue
            if m.regex.search(line) or (nxt and m.regex.search(line + nxt.strip())):
                want.append((n, m.code))
    assert got == sorted(set(want))


def test_loopback_peer_is_not_the_firewall_entry() -> None:
    line = "10: socketStartConnect: Connect to 127.0.0.1<45069> failed : Software caused connection abort\n"
    assert {h.code for h in scan_text(line, "p")} == {"NCCL121"}
    other = "socketStartConnect: Connect to 10.0.0.2<45763> failed : Software caused connection abort\n"
    assert {h.code for h in scan_text(other, "p")} == {"NCCL113"}


@pytest.mark.parametrize(
    "case,name,line",
    [
        # CuPy's NcclError behind vLLM's logger prefix (dev case nccl-051)
        ("nccl-051", "paste.txt", 2),
        # Caffe's glog CHECK_EQ(result, ncclSuccess), as pasted with Markdown underscores (dev case nccl-045)
        ("nccl-045", "paste-2.txt", 1),
    ],
)
def test_nccl_error_as_bindings_print_it(case: str, name: str, line: int) -> None:
    text = (INCIDENTS / case / name).read_text()
    hits = scan_text(text, name)
    assert [h.code for h in hits] == ["NCCL124"] and hits[0].line == line


def test_nccl_error_binding_names_and_codes() -> None:
    # the other ncclResult_t names CuPy prints (nccl.pyx ERROR2), constructed in its format
    for name, err in (("UNHANDLED_CUDA_ERROR", "unhandled cuda error"), ("INVALID_USAGE", "invalid usage")):
        (hit,) = scan_text(f"cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_{name}: {err}\n", "x")
        assert hit.code == "NCCL124" and dict(hit.groups)["name"] == name
    assert not scan_text("NCCL_ERROR_SUCCESS: no error\n", "x")


def test_elastic_failure_summary_exitcode() -> None:
    # dev case nccl-054: torchrun's ChildFailedError summary, "  exitcode  : 1 (pid: 91)"
    text = (INCIDENTS / "nccl-054" / "paste.txt").read_text()
    hits = [h for h in scan_text(text, "paste.txt") if h.code == "TORCH106"]
    assert [h.line for h in hits] == [21] and dict(hits[0].groups)["code"] == "1"
    # the same summary line for SIGKILL stays TORCH105's (host OOM)
    assert [h.code for h in scan_text("  exitcode  : -9 (pid: 3151)\n", "x")] == ["TORCH105"]


@pytest.mark.parametrize(
    "line",
    [
        # PyTorch's "CUDA error: %s" with cudaGetErrorString of 716 and 715 (CUDA runtime API docs)
        "RuntimeError: CUDA error: misaligned address",
        "RuntimeError: CUDA error: an illegal instruction was encountered",
        "CUDA_ERROR_MISALIGNED_ADDRESS",
    ],
)
def test_other_kernel_faults_read_as_illegal_access(line: str) -> None:
    assert [h.code for h in scan_text(line + "\n", "x")] == ["TORCH102"]


def test_ddp_marked_ready_twice() -> None:
    # a real line (pytorch/pytorch#43259, a comment of 2025-11-16), Markdown bold as pasted
    line = "[rank5]: **RuntimeError: Expected to mark a variable ready only once**. This error is caused by"
    assert [h.code for h in scan_text(line + "\n", "x")] == ["TORCH120"]


@pytest.mark.parametrize(
    "line",
    [
        # real lines: zju3dv/NeuralRecon#91, pytorch/pytorch#34768 (the multiprocessing error before it)
        "RuntimeError: Too many open files. Communication with the workers is no longer possible. Please increase "
        "the limit using `ulimit -n` in the shell or change the sharing strategy by calling "
        "`torch.multiprocessing.set_sharing_strategy('file_system')` at the beginning of your code",
        "RuntimeError: received 0 items of ancdata",
    ],
)
def test_dataloader_out_of_descriptors(line: str) -> None:
    assert [h.code for h in scan_text(line + "\n", "x")] == ["STOR109"]


def test_safetensors_header_errors_in_both_spellings() -> None:
    # real lines: microsoft/OmniParser#34 (0.4: the variant's name), safetensors/safetensors#668 (0.6)
    for line in (
        "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
        "safetensors_rust.SafetensorError: Error while deserializing header: header too large",
    ):
        assert [h.code for h in scan_text(line + "\n", "x")] == ["STOR119"]


@pytest.mark.parametrize(
    "line",
    [
        # real lines: microsoft/Swin-Transformer#267 (torch.distributed.launch), lyu-yx/ACUMEN#4 (mp.spawn)
        "_subprocess.CalledProcessError: Command '['/usr/bin/python3', '-u', 'main.py', '--local_rank=3', '--cfg', "
        "'configs/swin/swin_tiny_patch4_window7_224.yaml', '--data-path', "
        "'/content/Swin-Transformer/dataset/cats_and_dogs_filtered', '--batch-size', '32']' died with "
        "<Signals.SIGKILL: 9>._",
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
    ],
)
def test_sigkill_as_older_launchers_print_it(line: str) -> None:
    assert [h.code for h in scan_text(line + "\n", "x")] == ["TORCH105"]


def test_gloo_read_error_names_the_peer() -> None:
    # real line: RVC-Project/Retrieval-based-Voice-Conversion-WebUI#1882 (a comment of 2024-04-10)
    line = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error [192.168.70.92]:25266: Connection reset by peer"
    (hit,) = scan_text(line + "\n", "x")
    assert hit.code == "TORCH122" and dict(hit.groups)["peer"] == "192.168.70.92"


def test_cuda_driver_init_failed_as_warning_too() -> None:
    # real line: pytorch/pytorch#131117 (the title, torch/cuda/__init__.py's UserWarning)
    line = (
        "UserWarning: CUDA initialization: CUDA driver initialization failed, you might not have a CUDA gpu."
    )
    assert [h.code for h in scan_text(line + "\n", "x")] == ["TORCH123"]
