"""Secrets never leak: tokens, passwords and keys in text, argv, env and kubeconfigs are redacted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.redact import REDACTED, is_secret_name, redact_argv, redact_env, redact_text
from tests.conftest import TEST_DATA, shared_fixture

SECRET = "s3cr3tV4lue9"


@pytest.mark.parametrize(
    "text",
    [
        f"Authorization: Bearer {SECRET}",
        f'curl -H "authorization: bearer {SECRET}" https://api',
        f"DB_PASSWORD={SECRET}",
        f"export AWS_SECRET_ACCESS_KEY={SECRET}",
        f'{{"level":"info","password":"{SECRET}"}}',
        f"kube-apiserver --oidc-client-secret {SECRET} --v=2",
        f"etcd --password={SECRET}",
        f"https://admin:{SECRET}@registry.local/v2",
        f"users:\n- name: u\n  user:\n    token: {SECRET}\n    client-key-data: {SECRET}\n",
        f"-----BEGIN EC PRIVATE KEY-----\n{SECRET}\n-----END EC PRIVATE KEY-----\n",
        f'time="2024-01-01T00:00:00Z" level=info msg="x" token={SECRET}',
    ],
)
def test_secret_values_are_redacted(text):
    out = redact_text(text)
    assert SECRET not in out
    assert REDACTED in out


def test_token_shapes():
    assert "AKIAIOSFODNN7EXAMPLE" not in redact_text("key id AKIAIOSFODNN7EXAMPLE here")
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlc2lnbmF0dXJl"
    assert jwt not in redact_text(f"token seen: {jwt}")


def test_real_logs_unchanged_where_no_secret():
    for p in (
        shared_fixture("ctrl/kubelet_cni_sandbox_timeouts_k8s122938_calico2463.txt"),
        shared_fixture("ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log"),
        TEST_DATA / "etcd_stall" / "capnslog" / "etcd-m1.log",
    ):
        text = p.read_text()
        assert redact_text(text) == text


def test_argv_and_env():
    argv = [
        "kubelet",
        "--token",
        SECRET,
        f"--bootstrap-token={SECRET}",
        "--kubeconfig",
        "/etc/kubernetes/kubelet.conf",
    ]
    out = redact_argv(argv)
    assert SECRET not in " ".join(out)
    assert out[-2:] == ["--kubeconfig", "/etc/kubernetes/kubelet.conf"]
    env = redact_env({"GITHUB_TOKEN": SECRET, "PATH": "/usr/bin", "NCCL_IB_HCA": "mlx5_0"})
    assert env == {"GITHUB_TOKEN": REDACTED, "PATH": "/usr/bin", "NCCL_IB_HCA": "mlx5_0"}


@pytest.mark.parametrize(
    "name,secret",
    [
        ("DB_PASSWORD", True),
        ("--token", True),
        ("api_key", True),
        ("author", False),
        ("PATH", False),
        ("certificate-authority", False),
    ],
)
def test_is_secret_name(name, secret):
    assert is_secret_name(name) is secret


@given(
    st.sampled_from(["password", "TOKEN", "client_secret", "api-key"]),
    st.from_regex(r"[A-Za-z0-9]{6,30}", fullmatch=True),
)
def test_property_key_value_forms(key, value):
    for text in (f"{key}={value}", f"{key}: {value}", f'"{key}": "{value}"', f"--{key}={value}"):
        assert value not in redact_text(text), text


@given(st.text(max_size=300))
def test_never_crashes(text):
    redact_text(text)
