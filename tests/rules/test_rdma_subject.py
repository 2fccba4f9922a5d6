"""An IB message without a device is about the one device NCCL's IB transport uses (rules/rdma_subject)."""

from __future__ import annotations

from tests.conftest import diagnose_text

# github.com/NVIDIA/nccl/issues/799 (corpus case rdma-037)
H = "72bf7b08-26f3-4ebc-8b9d-85df3e4414c0:76786"
LOG = (
    f"{H}:76786 [0] NCCL INFO NET/IB : Using [0]mlx5_3:1/RoCE ; OOB eth1:9.73.133.81<0>\n"
    f"{H}:77145 [3] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error No such device\n"
)


def _top(tmp_path, text):
    return diagnose_text(tmp_path, text, "nccl.log")[0]


def test_the_one_device_in_use_is_the_subject(tmp_path):
    f = _top(tmp_path, LOG)
    assert f.rule == "IB104" and f.subject == "mlx5_3"


def test_with_several_devices_the_printer_stays(tmp_path):
    two = LOG.replace("[0]mlx5_3:1/RoCE ;", "[0]mlx5_3:1/RoCE [1]mlx5_4:1/RoCE ;")
    f = _top(tmp_path, two)
    assert f.rule == "IB104" and f.subject != "mlx5_3"


# github.com/NVIDIA/k8s-rdma-shared-dev-plugin thread pasted as corpus case rdma-601 (excerpt)
PERFTEST = (
    "root@rdma-cuda-test-pod-1:~# ib_write_bw -d mlx5_0 -F -R -q 2 --use_cuda=0 192.168.111.1\n"
    "initializing CUDA\n"
    "cuMemAlloc() of a 262144 bytes GPU buffer\n"
    "Couldn't allocate MR\n"
    "failed to create mr\n"
)


def test_a_message_without_a_device_is_about_the_device_the_command_selects(tmp_path):
    f = _top(tmp_path, PERFTEST)
    assert f.rule == "IB123" and f.subject == "mlx5_0"


def test_two_selected_devices_name_none(tmp_path):
    two = PERFTEST.replace("192.168.111.1\n", "192.168.111.1\nroot@h:~# ib_read_bw --ib-dev=mlx5_1\n", 1)
    f = _top(tmp_path, two)
    assert f.rule == "IB123" and f.subject != "mlx5_0" and f.subject != "mlx5_1"
