"""The host RDMA stack's messages added for issue 19 (IB166's ibstatus variant, IB169, IB170, RDMADP106),
each on the incident's real line and on a real line of the same program from another public thread."""

from __future__ import annotations

import pytest

from clusterdoctor.observe.messages import scan_text


def hits(text: str):
    return scan_text(text + "\n", "t")


def codes(text: str) -> set[str]:
    return {h.code for h in hits(text)}


ABI_MISMATCH = [
    # https://github.com/SoftRoCE/rxe-dev/issues/74 (the incident: rxe provider ABI 2, kernel 4.16 ABI 1)
    (
        "libibverbs: Warning: Driver rxe does not support the kernel ABI of 1 (supports 2 to 2) for device "
        "/sys/class/infiniband/rxe0",
        ("rxe", "1", "2", "rxe0"),
    ),
    # https://github.com/sgl-project/sglang/issues/16242 (Broadcom: container's libbnxt_re vs host driver)
    (
        "libibverbs: Warning: Driver bnxt_re does not support the kernel ABI of 6 (supports 1 to 1) for device "
        "/sys/class/infiniband/bnxt_re2",
        ("bnxt_re", "6", "1", "bnxt_re2"),
    ),
    # https://github.com/open-mpi/ompi/issues/11623 (ucx_info -d on a Soft-RoCE host)
    (
        "libibverbs: Warning: Driver mlx5 does not support the kernel ABI of 2 (supports 1 to 1) for device "
        "/sys/class/infiniband/rxe_eth0",
        ("mlx5", "2", "1", "rxe_eth0"),
    ),
]


@pytest.mark.parametrize(("line", "want"), ABI_MISMATCH)
def test_provider_abi_mismatch_names_driver_abis_and_device(line, want):
    (h,) = hits(line)
    assert h.code == "IB170"
    assert (h.group("driver"), h.group("abi"), h.group("lo"), h.group("ibdev")) == want


def test_missing_provider_is_not_an_abi_mismatch():
    # https://github.com/nminoru/pib/issues/2: no provider at all is IB120, not IB170
    line = "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs1"
    assert "IB170" not in codes(line)
    assert "IB120" in codes(line)


@pytest.mark.parametrize(
    "line",
    [
        # https://github.com/Oneflow-Inc/oneflow/pull/9115 (openibd stopped)
        "Failed to get IB devices list: Function not implemented",
        # https://github.com/WukLab/LITE/issues/5 (as the reporter typed it, no space after the colon)
        "Failed to get IB devices list:Function not implemented",
        # Open MPI users list (libibverbs before rdma-core), template of libibverbs/init.c check_abi_version
        "libibverbs: Fatal: couldn't read uverbs ABI version.",
    ],
)
def test_no_uverbs_abi(line):
    assert codes(line) == {"IB169"}


def test_other_device_list_failures_are_not_enosys():
    # a failed list for another errno (template: perror("Failed to get IB devices list") with EPERM)
    assert "IB169" not in codes("Failed to get IB devices list: Operation not permitted")


def test_ibstatus_no_devices_is_no_sysfs_device():
    # https://github.com/Oneflow-Inc/oneflow/pull/9115: ibstatus with /sys/class/infiniband empty
    text = "ibstatus\nFatal error:  No devices\n/usr/sbin/ibstatus: 21: exit: Illegal number: -1"
    assert codes(text) == {"IB166"}
    # synthetic negative: the words inside a longer sentence
    assert "IB166" not in codes("Fatal error:  No devices were harmed")


VF_GUID = [
    # https://github.com/Mellanox/network-operator/issues/1825 (the incident, as wrapped by the terminal)
    (
        'error adding container to network "ibp192s0": infiniBand SRI-OV CNI failed to configure VF '
        '"VF ibp192s0v10 GUID is not valid" ',
        "ibp192s0v10",
    ),
    # https://github.com/k8snetworkplumbingwg/sriov-network-operator/issues/307
    (
        "  Warning  FailedCreatePodSandBox  1s    kubelet            Failed to create pod sandbox: rpc error: "
        'code = Unknown desc = failed to setup network for sandbox "88aee8b5e04d60a0fdfe9437888521e2f49a170b67ce574adf571f05f644bf74": '
        "[default/test-sriov-ib-pod:example-sriov-ib-network]: error adding container to network "
        '"example-sriov-ib-network": infiniBand SRI-OV CNI failed to configure VF "VF ib2 GUID is not valid"',
        "ib2",
    ),
]


@pytest.mark.parametrize(("line", "vf"), VF_GUID)
def test_ib_sriov_cni_vf_guid(line, vf):
    (h,) = [h for h in hits(line) if h.code == "RDMADP106"]
    assert h.group("vf") == vf
