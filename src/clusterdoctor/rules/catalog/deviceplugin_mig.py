"""NVIDIA MIG Partition Editor (nvidia-mig-parted, also run by the GPU operator's MIG manager) failing on its
configuration file, as data.

Part of the deviceplugin family: :mod:`clusterdoctor.rules.catalog.deviceplugin` merges these entries into its
``MESSAGES`` in code order. Example lines are from public issue threads, each named in ``example_source``.
"""

from __future__ import annotations

from clusterdoctor.model import Action, Severity
from clusterdoctor.rules.catalog import Message

MIG_MESSAGES: tuple[Message, ...] = (
    Message(
        code="GPUOP103",
        name="mig-parted-config-invalid",
        title="nvidia-mig-parted cannot parse its MIG configuration: no MIG layout is applied",
        # cmd/nvidia-mig-parted: "Error parsing config file: %v" with the YAML/JSON decoder's error; a
        # mig-configs entry's "devices" must be "all" or a list of GPU indices
        pattern=(
            r"Error parsing config file: (?:unmarshal error: )?(?P<err>[^\n]{0,200}?"
            r"(?:'devices'|mig-configs|mig-devices|mig-enabled)[^\n]{0,100})"
        ),
        trigger="Error parsing config file:",
        meaning=(
            "mig-parted read the config file (the MIG manager's ConfigMap) and rejected it, so the requested "
            "MIG geometry is not applied and the GPUs keep their old layout"
        ),
        cause=(
            "the mig-configs entry does not follow the schema: devices given as a bare number (devices: 7) "
            "instead of `all` or a list ([7]), a misspelt key, a profile name the GPU does not offer, YAML "
            "indentation"
        ),
        fix=(
            "write devices as `all` or a list of indices (devices: [7]) and check each entry against "
            "`nvidia-mig-parted export` / the examples of the mig-parted README, then apply again"
        ),
        verify=("nvidia-mig-parted assert -f <config> -c <name>", "nvidia-smi mig -lgi"),
        severity=Severity.WARNING,
        action=Action.CONFIGURE,
        source="https://github.com/NVIDIA/mig-parted#readme",
        example=(
            "FATA[0000] Error parsing config file: unmarshal error: error unmarshaling JSON: while decoding JSON: "
            "invalid string input for 'devices': 7"
        ),
        example_source="https://github.com/NVIDIA/mig-parted/issues/44",
        causes=("gpu.mig-parted-config",),
    ),
)
