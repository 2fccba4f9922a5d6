"""Test certificates made with the openssl CLI (synthetic: a throwaway CA, a server certificate for
127.0.0.1 and a client certificate, all made in the test's temporary directory)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Pki:
    ca: Path
    server_crt: Path
    server_key: Path
    client_crt: Path
    client_key: Path


# openssl stamps a certificate "not before" with its own clock. Under `make test-clock` libfaketime
# moves that clock a year ahead for every C program, but not for Go programs (Prometheus, node
# exporter read the kernel's clock directly): a certificate made a year ahead is "not yet valid" to
# them. So the certificates are made on the real clock, valid for ten years: both clocks accept them.
_REAL_CLOCK = {
    k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "FAKETIME", "FAKETIME_NO_CACHE")
}


def _ossl(*args: str, cwd: Path) -> None:
    r = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=_REAL_CLOCK
    )
    if r.returncode != 0:
        pytest.skip(f"openssl cannot make test certificates: {r.stderr.strip()[-300:]}")


def make_pki(d: Path, name: str = "test") -> Pki:
    """A CA (``name``) that signed a server certificate (SAN IP:127.0.0.1) and a client certificate."""
    if not shutil.which("openssl"):
        pytest.skip("openssl not installed (apt-get install openssl)")
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _ossl("req", "-x509", *ec, "-subj", f"/CN={name} CA", "-days", "3650",
          "-keyout", "ca.key", "-out", "ca.crt", cwd=d)  # fmt: skip
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for who in ("server", "client"):
        _ossl("req", *ec, "-subj", f"/CN={who}", "-keyout", f"{who}.key", "-out", f"{who}.csr", cwd=d)
        _ossl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
              "-CAcreateserial", "-days", "3650", "-extfile", f"{who}.ext", "-out", f"{who}.crt",
              cwd=d)  # fmt: skip
    return Pki(d / "ca.crt", d / "server.crt", d / "server.key", d / "client.crt", d / "client.key")
