"""crictl info as pasted in a cri-containerd PR (tests/data/incidents/ok-ctrl-011): conditions read,
true ones quiet; the same output with NetworkReady false (edited here, not a real paste) is judged
as the kubelet would log it."""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.crictl import load_crictl_info, parse_crictl_info, sniff_crictl_info

HEALTHY = """\
{
  "status": {
    "conditions": [
      {
        "type": "RuntimeReady",
        "status": true
      },
      {
        "type": "NetworkReady",
        "status": true
      }
    ]
  },
  "config": {
    "containerd": {
      "rootDir": "/var/lib/containerd",
      "snapshotter": "overlayfs"
    }
  }
}
"""


def test_conditions_and_quiet_when_ready(tmp_path):
    assert sniff_crictl_info(HEALTHY.encode())
    assert [(c["type"], c["status"]) for c in parse_crictl_info(HEALTHY)] == [
        ("RuntimeReady", True),
        ("NetworkReady", True),
    ]
    p = tmp_path / "info.txt"
    p.write_text(HEALTHY)
    assert load_crictl_info(p)["messages"] == []


def test_false_network_condition_is_the_kubelets_cni_message(tmp_path):
    edited = HEALTHY.replace(
        '"type": "NetworkReady",\n        "status": true',
        '"type": "NetworkReady",\n        "status": false,\n        "reason": "NetworkPluginNotReady",\n'
        '        "message": "Network plugin returns error: cni plugin not initialized"',
    )
    p = tmp_path / "info.txt"
    p.write_text(edited)
    assert [h.code for h in load_crictl_info(p)["messages"]] == ["KUBELET103"]


def test_not_crictl_is_refused():
    with pytest.raises(InputError):
        parse_crictl_info('{"status": {}}')
    assert not sniff_crictl_info(b'{"conditions": []}')
