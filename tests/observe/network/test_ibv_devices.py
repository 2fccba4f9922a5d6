"""ibv_devices output (real paste: https://github.com/openshift/sriov-network-device-plugin/issues/20, incident rdma-026)."""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.ibv_devices import parse_ibv_devices, sniff_ibv_devices

PASTE = """\
ibv_devices
device node GUID
------ ----------------
mlx5_2 0000000000000000
mlx5_0 506b4b0300285028
mlx5_3 0000000000000000
mlx5_1 506b4b0300285034
"""

# the program's own spacing (libibverbs/examples/device_list.c)
NATIVE = "    device          \t   node GUID\n    ------          \t----------------\n    mlx5_0          \t248a0703004bf0a8\n"


def test_rows_and_unset_guids() -> None:
    assert sniff_ibv_devices(PASTE.encode())
    devs, skipped = parse_ibv_devices(PASTE)
    assert [d.name for d in devs if d.guid_unset] == ["mlx5_2", "mlx5_3"]
    assert not skipped


def test_native_spacing() -> None:
    assert sniff_ibv_devices(NATIVE.encode())
    (d,), _ = parse_ibv_devices(NATIVE)
    assert (d.name, d.guid_unset) == ("mlx5_0", False)


def test_not_ibv_devices() -> None:
    assert not sniff_ibv_devices(b"device size\nsda 1T\n")
    with pytest.raises(InputError):
        parse_ibv_devices("device node GUID\nnothing here\n")


def test_unset_guids_are_the_finding(tmp_path) -> None:
    from clusterdoctor import diagnosis

    p = tmp_path / "paste.txt"
    p.write_text(PASTE)
    obs = diagnosis.new_observations(clock=lambda: 1_780_000_000.0)
    top = diagnosis.run(obs, diagnosis.load_sources(obs, [p])).findings[0]
    assert top.rule == "RDMA023" and top.subject == "mlx5_2, mlx5_3"


def test_all_guids_set_is_quiet(tmp_path) -> None:
    from clusterdoctor import diagnosis

    p = tmp_path / "paste.txt"
    p.write_text(NATIVE)
    obs = diagnosis.new_observations(clock=lambda: 1_780_000_000.0)
    assert not [
        f for f in diagnosis.run(obs, diagnosis.load_sources(obs, [p])).findings if f.rule == "RDMA023"
    ]


# https://github.com/SoftRoCE/rxe-dev/issues/75: the header and no device (rxe0 not usable by libibverbs)
EMPTY_75 = """root@arria10:/# ibv_devices
    device                 node GUID
    ------              ----------------
"""
# https://github.com/zrlio/softiwarp/issues/12: the program's own tab spacing, no device
EMPTY_SIW = "ibv_devices\n    device          \t   node GUID\n    ------          \t----------------\n"


# https://github.com/SoftRoCE/rxe-dev/issues/74 (incident rdma-501): the ABI warning above the empty list
EMPTY_74 = """root@arria10:~# ibv_devices
libibverbs: Warning: Driver rxe does not support the kernel ABI of 1 (supports 2 to 2) for device /sys/class/infiniband/rxe0
    device                 node GUID
    ------              ----------------
root@arria10:~#
"""


def test_header_under_libibverbs_warning_is_read_with_the_warning(tmp_path) -> None:
    from clusterdoctor.observe.detect import load_path

    p = tmp_path / "d.txt"
    p.write_text(EMPTY_74)
    what, data = load_path(p)
    assert what == "ibv_devices output (no device listed)"
    assert [h.code for h in data["messages"]] == ["IB170"]


@pytest.mark.parametrize("text", [EMPTY_75, EMPTY_SIW])
def test_header_alone_is_no_device_listed(text, tmp_path) -> None:
    from clusterdoctor.observe.detect import load_path

    p = tmp_path / "d.txt"
    p.write_text(text)
    what, data = load_path(p)
    assert (what, data["rdma_devices"]) == ("ibv_devices output (no device listed)", [])
