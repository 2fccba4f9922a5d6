"""The IB and storage message catalogues: every version's wording is read as the right entry, and
healthy or neighbouring lines are not.

Lines are real (the thread is named) or, marked "template", printed from the program's format string at
the version named (NVIDIA/nccl, openucx/ucx sources)."""

from __future__ import annotations

import pytest

from clusterdoctor.observe.messages import scan_text
from clusterdoctor.rules.catalog import all_messages


def codes(line: str) -> set[str]:
    return {h.code for h in scan_text(line + "\n", "t")}


def hit(line: str):
    (h,) = scan_text(line + "\n", "t")
    return h


MINE = [m for m in all_messages() if m.family in ("ib", "storage")]


@pytest.mark.parametrize("m", MINE, ids=[m.code for m in MINE])
def test_each_example_is_only_its_own_entry(m):
    assert codes(m.example) == {m.code}


NCCL_ERROR_12 = [
    # 2.4-2.10 (template, src/transport/net_ib.cc v2.7.8)
    "host:1:2 [0] transport/net_ib.cc:818 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129",
    # 2.11-2.19 (https://github.com/NVIDIA/nccl/issues/733)
    "task-646--1-mhpnk:91:123 [0] transport/net_ib.cc:881 NCCL WARN NET/IB : Got completion from peer 172.17.127.143<49577> with error 12, opcode 1, len 0, vendor err 129",
    # 2.21 (https://github.com/NVIDIA/nccl/issues/1814)
    "hostname-test:984:1357 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 172.36.143.59<44206> with status=12 opcode=129 len=65536 vendor err 129 (Recv) localGid ::ffff:29.87.88.182 remoteGids::ffff:29.87.4.221",
    # the IB plugin build (https://github.com/NVIDIA/nccl/issues/1664)
    "NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 len=32696 vendor err 129 (Send)",
]


@pytest.mark.parametrize("line", NCCL_ERROR_12)
def test_nccl_error_12_every_version(line):
    assert codes(line) == {"IB101"}


def test_nccl_error_12_names_the_hca_when_printed():
    # 2.23-2.27 (template, src/transport/net_ib.cc v2.26.2) and 2.28+ (template, net_ib/p2p.cc)
    h = hit(
        "n1:1:2 [0] NCCL WARN NET/IB: Got completion from peer 10.0.0.2<1234> with status=12 opcode=0 len=0 "
        "vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_3"
    )
    assert (h.code, h.group("hca")) == ("IB101", "mlx5_3")
    h = hit(
        "n1:1:2 [0] NCCL WARN NET/IB: Got completion from peer 10.0.0.2<1234> with status=IBV_WC_RETRY_EXC_ERR(12) "
        "opcode=IBV_WC_SEND(0) vendor_err=129  localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_0"
    )
    assert (h.code, h.group("hca")) == ("IB101", "mlx5_0")


def test_other_completion_statuses_are_not_error_12():
    # https://github.com/NVIDIA/nccl/issues/1814: status=5 follows the 12s (a consequence)
    assert codes(
        "hostname-test:984:1357 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 172.36.143.59<44206> "
        "with status=5 opcode=32656 len=32659 vendor err 249 (Recv) localGid ::ffff:29.87.88.182 remoteGids::ffff:29.87.4.221"
    ) == {"IB102"}
    assert codes("NCCL WARN NET/IB : Got completion with error 120, opcode 1, len 0, vendor err 129") == set()


@pytest.mark.parametrize(
    "line, hca",
    [
        ("NCCL WARN NET/IB : Got async event : port error", None),  # 2.4-2.19
        ("NCCL WARN NET/IB : mlx5_2:1 Got async event : port error", "mlx5_2"),  # 2.21 (template)
        ("NCCL WARN NET/IB : mlx5_2:1 Got async error event: port error", "mlx5_2"),  # 2.23-2.27 (template)
        (
            "NCCL WARN NET/IB : mlx5_2:1 Got non-fatal async event: port error(10)",
            "mlx5_2",
        ),  # 2.28+ (template)
    ],
)
def test_nccl_port_error_event_every_version(line, hca):
    h = hit(line)
    assert (h.code, h.group("hca")) == ("IB103", hca)


@pytest.mark.parametrize(
    "line, hca",
    [
        ("_ibvwrap.cc: NCCL WARN Call to ibv_modify_qp failed with error Connection timed out_", None),
        # https://github.com/NVIDIA/nccl-tests/issues/185
        (
            "misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable",
            None,
        ),
        # https://github.com/NVIDIA/nccl/issues/2013 (2.27)
        (
            "[2026-03-13 22:26:02] host-01.example.com:XXXXXX [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp "
            "failed with 110 Connection timed out, on dev mlx_x:1, curr state INIT, next state RTR, local GID index "
            "3, local GID ::ffff:xxx.xx.xx.xx, remote GID ::ffff:xxx.xx.xxx.xx",
            "mlx_x",
        ),
    ],
)
def test_modify_qp_every_version(line, hca):
    h = hit(line)
    assert (h.code, h.group("hca")) == ("IB104", hca)


def test_ucx_memlock_old_and_new_wording():
    # UCX 1.12 (https://github.com/openucx/ucx/issues/8229) and 1.16+ (template, src/uct/ib/base/ib_log.h)
    assert (
        hit(
            "[1652739463.054681] [cn0022:4071024:0]        ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) "
            "failed: Cannot allocate memory"
        ).group("hca")
        is None
    )
    h = hit(
        "[1700000000.000001] [n1:1:0]        ib_iface.c:1377 UCX  ERROR mlx5_0: ibv_create_cq(cqe=4096) failed: "
        "Cannot allocate memory : Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)"
    )
    assert (h.code, h.group("hca")) == ("IB112", "mlx5_0")


@pytest.mark.parametrize(
    "line",
    [
        # NCCL's topology decision, not a missing peermem (v2.21 src/graph/paths.cc)
        "n1:1:2 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 1b000 / HCA 0 (distance 5 > 4)",
        # a cable plugged in and the link coming up (https://jishuzhan.net/article/1911252493641777153)
        "[32704.121294] mlx5_core 0000:01:00.0: Port module event: module 0, Cable plugged",
        "[32710.060490] mlx5_core 0000:01:00.0 enp1s0f0: Link up",
        # a failed command with a status is not a timeout (https://github.com/openucx/ucx/issues/6264)
        "[33059.091472] mlx5_core 0000:41:00.0: mlx5_cmd_out_err:800:(pid 233522): CREATE_MKEY(0x200) op_mod(0x0) "
        "failed, status limits exceeded(0x8), syndrome (0x18af6), err(-12)",
        # perftest status 4 is not a retry timeout (https://github.com/linux-rdma/perftest/issues/173)
        "  Failed status 4: wr_id 0 syndrom 0x51",
        # the help-message aggregation line of Open MPI
        "[lxbk1039:106838] 11 more processes have sent help message help-mpi-btl-openib.txt / ib port not selected",
    ],
)
def test_healthy_or_neighbouring_lines_are_not_faults(line):
    from clusterdoctor.model import Severity
    from clusterdoctor.rules.catalog import by_code

    assert all(by_code()[c].severity < Severity.WARNING for c in codes(line)), codes(line)


def test_mlx5_timeout_names_the_pci_device_behind_any_prefix():
    for prefix in ("b1360: [14280.445220] ", "Dec 02 10:00:01 node7 kernel: ", ""):
        h = hit(
            prefix + "mlx5_core 0000:61:00.0: wait_func_handle_exec_timeout:1104:(pid 141183): cmd[22]: "
            "CREATE_DCT(0x710) No done completion"
        )
        assert (h.code, h.group("pci"), h.group("cmd")) == ("IB140", "0000:61:00.0", "CREATE_DCT")


def test_peermem_both_module_names():
    # https://github.com/Mellanox/nv_peer_memory/issues/84 (the legacy module)
    h = hit("[Fri Feb 12 11:47:20 2021] nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)")
    assert (h.code, h.group("module")) == ("IB141", "nv_peer_mem")
    h = hit(
        "modprobe: ERROR: could not insert 'nv_peer_mem': Unknown symbol in module, or unknown parameter (see dmesg)"
    )
    assert (h.code, h.group("module")) == ("IB142", "nv_peer_mem")


def test_storage_no_space_is_not_shared_memory_and_nccl_keeps_its_own():
    assert codes("OSError: [Errno 28] No space left on device: '/data/ckpt/model_5.pt'") == {"STOR104"}
    assert (
        hit("OSError: [Errno 28] No space left on device: '/data/ckpt/model_5.pt'").group("path")
        == "/data/ckpt/model_5.pt"
    )
    assert codes("OSError: [Errno 28] No space left on device: '/dev/shm/torch_1_2'") == set()
    nccl = "gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device"
    assert codes(nccl) == {"NCCL101"}


def test_shared_memory_object_names():
    # https://github.com/pytorch/pytorch/issues/73644 (a counter instead of a random suffix)
    assert codes("RuntimeError: unable to open shared memory object </torch_5566_0> in read-write mode") == {
        "STOR108"
    }


def test_catalogue_checkpoint_reader_skips_missing_records():
    """torch.jit.load of a plain state_dict ("locating file constants.pkl: file not found") is a misuse,
    not a corrupt file."""
    assert (
        codes("RuntimeError: PytorchStreamReader failed locating file constants.pkl: file not found") == set()
    )
