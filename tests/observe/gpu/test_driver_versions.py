"""observe/gpu/driver_versions and GPU022 on real pastes: the loaded module against the installed driver
packages, and apt replacing the driver's user space."""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.model import Severity
from clusterdoctor.observe.gpu.driver_versions import parse_driver_versions, sniff_driver_versions
from clusterdoctor.rules.gpu_versions import driver_version_mismatch
from clusterdoctor.rules.registry import Observations, run_rules

# github.com/NVIDIA/nvidia-docker issue quoted in corpus case gpu-302 (prompt lines removed by the paste reader)
PROC_AND_DPKG = """\
NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  Thu Oct  6 21:38:55 UTC 2022
GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)
Desired=Unknown/Install/Remove/Purge/Hold
| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend
|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)
||/ Name           Version      Architecture Description
+++-==============-============-============-==================================
ii  nvidia-smi     525.85.12-1  amd64        NVIDIA System Management Interface
"""
# /var/log/apt/history.log as pasted in corpus case gpu-001
APT = """\
Start-Date: 2021-04-24  06:50:54
Commandline: /usr/bin/unattended-upgrade
Upgrade: libnvidia-common-460:amd64 (460.56-0ubuntu0.20.04.1, 460.73.01-0ubuntu0.20.04.1)
End-Date: 2021-04-24  06:50:54
"""


def judge(text: str):
    obs = Observations({"nvidia_versions": [parse_driver_versions(text, "x.txt")]})
    return run_rules(obs, [driver_version_mismatch])[0]


def test_module_and_packages_are_read():
    assert sniff_driver_versions(PROC_AND_DPKG.encode()) and sniff_driver_versions(APT.encode())
    dv = parse_driver_versions(PROC_AND_DPKG, "x.txt")
    assert dv.kernel_module == "520.56.06" and dv.packages == {"nvidia-smi": ("525.85.12", 8)}
    (c,) = parse_driver_versions(APT, "x.txt").changes
    assert (c.package, c.old, c.new, c.when) == (
        "libnvidia-common-460",
        "460.56",
        "460.73.01",
        "2021-04-24 06:50:54",
    )


def test_a_module_older_than_the_packages_is_a_mismatch():
    (f,) = judge(PROC_AND_DPKG)
    assert f.severity == Severity.CRITICAL and "520.56.06" in f.summary and "525.85.12" in f.summary


def test_matching_versions_are_quiet():
    same = PROC_AND_DPKG.replace("525.85.12-1 ", "520.56.06-1 ")
    assert judge(same) == []


def test_an_apt_upgrade_of_the_driver_is_a_warning():
    (f,) = judge(APT)
    assert f.severity == Severity.WARNING and "460.56 -> 460.73.01" in f.summary


def test_no_version_is_refused():
    with pytest.raises(InputError, match="no NVIDIA driver version"):
        parse_driver_versions("Start-Date: 2021-04-24  06:50:54\nUpgrade: vim:amd64 (1, 2)\n", "x.txt")


def test_a_paste_with_nvidia_smi_is_left_to_its_reader():
    smi = (
        "+-----------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 525.85.12    Driver Version: 525.85.12    CUDA Version: 12.0     |\n"
        "|-------------------------------+----------------------+----------------------+\n"
    )
    from clusterdoctor.observe.gpu.load import sniff_gpu

    assert sniff_gpu((PROC_AND_DPKG + smi).encode())
    assert not sniff_driver_versions((PROC_AND_DPKG + smi).encode())
