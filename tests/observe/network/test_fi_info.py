"""fi_info output (real paste: https://github.com/ofiwg/libfabric/issues/5689, incident ok-rdma-012)."""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.fi_info import parse_fi_info, sniff_fi_info

PASTE = """\
provider: efa
    fabric: EFA-fe80::39:beff:fe6e:c23
    domain: efa_0-rdm
    version: 2.0
    type: FI_EP_RDM
    protocol: FI_PROTO_EFA
provider: efa;ofi_rxd
    fabric: EFA-fe80::39:beff:fe6e:c23
    domain: efa_0-dgrm
    version: 1.0
    type: FI_EP_RDM
    protocol: FI_PROTO_RXD
"""


def test_blocks() -> None:
    assert sniff_fi_info(PASTE.encode())
    blocks, skipped = parse_fi_info(PASTE)
    assert [(b.provider, b.type, b.protocol) for b in blocks] == [
        ("efa", "FI_EP_RDM", "FI_PROTO_EFA"),
        ("efa;ofi_rxd", "FI_EP_RDM", "FI_PROTO_RXD"),
    ]
    assert not skipped


def test_not_fi_info() -> None:
    assert not sniff_fi_info(b"provider: aws\nregion: us-east-1\n")
    with pytest.raises(InputError):
        parse_fi_info("nothing\n")
