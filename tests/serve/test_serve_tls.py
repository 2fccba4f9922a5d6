"""HTTPS from ``--web.config.file``'s ``tls_server_config`` (agent and extender): real certificates made
with openssl in the test (synthetic CA), real clients (urllib/http.client with the CA, ssl sockets);
a plain-HTTP client refused, a client without (or with an untrusted) certificate refused when one is
required, min_version held, a stalled handshake closed at its deadline while other clients are
served, large bodies both ways, the body cap kept, a rotated certificate served from the next
connection; bad configs are one line and exit 2."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from clusterdoctor.errors import InputError
from clusterdoctor.serve.agent import Agent, make_server
from clusterdoctor.serve.agent_web import load_web_config, tls_context_factory
from clusterdoctor.serve.http import ServerLimits
from clusterdoctor.serve.http import make_server as http_server
from tests.conftest import run_cli
from tests.serve.tls_certs import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _web(tmp: Path, pki: Pki, **tls) -> Path:
    conf = {"cert_file": str(pki.server_crt), "key_file": str(pki.server_key), **tls}
    p = tmp / "web.yml"
    p.write_text(yaml.safe_dump({"tls_server_config": conf}))
    return p


def _client_ctx(pki: Pki, cert: bool = False, **kw) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert:
        ctx.load_cert_chain(str(pki.client_crt), str(pki.client_key))
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


class _Running:
    def __init__(self, srv, agent=None):
        self.srv, self.agent = srv, agent
        self.port = srv.server_address[1]
        threading.Thread(target=srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
        if self.agent is not None:
            self.agent.close()


def _agent_tls(web_file: Path, limits=None) -> _Running:
    agent = Agent([], interval_s=3600)
    return _Running(
        make_server(agent, "127.0.0.1", 0, limits=limits, web=load_web_config(str(web_file))), agent
    )


def _refused(fn) -> bool:
    """Whether the call failed at the connection (handshake refused, connection closed)."""
    try:
        fn()
    except (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected, urllib.error.URLError, OSError):
        return True
    return False


def test_agent_serves_https_and_refuses_plain_http(tmp_path, pki):
    r = _agent_tls(_web(tmp_path, pki))
    assert r.srv.tls
    try:
        url = f"https://127.0.0.1:{r.port}"
        with urllib.request.urlopen(url + "/metrics", timeout=30, context=_client_ctx(pki)) as resp:
            assert resp.status == 200 and b"clusterdoctor_build_info" in resp.read()
        # keep-alive: two requests on one TLS connection
        c = http.client.HTTPSConnection("127.0.0.1", r.port, timeout=30, context=_client_ctx(pki))
        for path in ("/healthz", "/metrics"):
            c.request("GET", path)
            resp = c.getresponse()
            assert resp.status == 200 and resp.read()
        c.close()
        # the server's certificate is not trusted without the CA
        assert _refused(lambda: urllib.request.urlopen(url + "/metrics", timeout=30))
        # a plain-HTTP client gets no HTTP answer at all (never the metrics in clear)
        with socket.create_connection(("127.0.0.1", r.port), timeout=30) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            try:
                while chunk := s.recv(65536):
                    got += chunk
            except ConnectionError:
                pass
        assert b"clusterdoctor" not in got and not got.startswith(b"HTTP/")
        # and the server still serves TLS clients after it
        with urllib.request.urlopen(url + "/healthz", timeout=30, context=_client_ctx(pki)) as resp:
            assert resp.read() == b"ok\n"
    finally:
        r.close()


def test_client_certificate_required_and_verified(tmp_path, pki):
    other = make_pki(tmp_path / "other", "other")
    r = _agent_tls(
        _web(tmp_path, pki, client_auth_type="RequireAndVerifyClientCert", client_ca_file=str(pki.ca))
    )
    url = f"https://127.0.0.1:{r.port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=30, context=_client_ctx(pki, cert=True)) as resp:
            assert b"clusterdoctor_build_info" in resp.read()
        assert _refused(lambda: urllib.request.urlopen(url, timeout=30, context=_client_ctx(pki)).read())
        # a certificate from a CA the server does not trust
        foreign = ssl.create_default_context(cafile=str(pki.ca))
        foreign.load_cert_chain(str(other.client_crt), str(other.client_key))
        assert _refused(lambda: urllib.request.urlopen(url, timeout=30, context=foreign).read())
        with urllib.request.urlopen(url, timeout=30, context=_client_ctx(pki, cert=True)) as resp:
            assert resp.status == 200
    finally:
        r.close()


def test_verify_if_given(tmp_path, pki):
    r = _agent_tls(
        _web(tmp_path, pki, client_auth_type="VerifyClientCertIfGiven", client_ca_file=str(pki.ca))
    )
    other = make_pki(tmp_path / "other", "other")
    url = f"https://127.0.0.1:{r.port}/metrics"
    try:
        for ctx in (_client_ctx(pki), _client_ctx(pki, cert=True)):
            with urllib.request.urlopen(url, timeout=30, context=ctx) as resp:
                assert resp.status == 200
        foreign = ssl.create_default_context(cafile=str(pki.ca))
        foreign.load_cert_chain(str(other.client_crt), str(other.client_key))
        assert _refused(lambda: urllib.request.urlopen(url, timeout=30, context=foreign).read())
    finally:
        r.close()


def test_min_version(tmp_path, pki):
    r = _agent_tls(_web(tmp_path, pki, min_version="TLS13"))
    url = f"https://127.0.0.1:{r.port}/healthz"
    try:
        old = _client_ctx(pki, maximum_version=ssl.TLSVersion.TLSv1_2)
        assert _refused(lambda: urllib.request.urlopen(url, timeout=30, context=old).read())
        with urllib.request.urlopen(url, timeout=30, context=_client_ctx(pki)) as resp:
            assert resp.read() == b"ok\n"
    finally:
        r.close()


def test_stalled_handshake_closed_while_others_are_served(tmp_path, pki):
    """A client that connects (or sends half a ClientHello) and stops is closed at the handshake
    deadline; meanwhile the single worker thread serves everyone else."""
    limits = ServerLimits(handshake_timeout=1.0, header_timeout=5.0, threads=1)
    r = _agent_tls(_web(tmp_path, pki), limits=limits)
    try:
        silent = socket.create_connection(("127.0.0.1", r.port), timeout=120)
        partial = socket.create_connection(("127.0.0.1", r.port), timeout=120)
        partial.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's first bytes
        for _ in range(3):
            with urllib.request.urlopen(
                f"https://127.0.0.1:{r.port}/healthz", timeout=30, context=_client_ctx(pki)
            ) as resp:
                assert resp.read() == b"ok\n"
        for s in (silent, partial):
            try:
                assert s.recv(100) == b""  # closed by the server (the timeout is a cap on a hang)
            except ConnectionResetError:
                pass
            s.close()
        # a handshake stalled after it started is no different: the deadline counts from connect
        assert r.srv.limits.handshake_timeout == 1.0
    finally:
        r.close()


def test_large_bodies_and_body_cap_over_tls(tmp_path, pki):
    """Several TLS records each way (a record read in halves must not stall), and the 413 cap."""
    big = bytes(range(256)) * 20000  # 5 MB

    def app(environ, start):
        n = int(environ.get("CONTENT_LENGTH") or 0)
        data = environ["wsgi.input"].read(n) if n else b""
        body = big if environ["PATH_INFO"] == "/big" else str(len(data)).encode()
        start("200 OK", [("Content-Length", str(len(body))), ("Content-Type", "application/octet-stream")])
        return [body]

    web = load_web_config(str(_web(tmp_path, pki)))
    srv = http_server(app, "127.0.0.1", 0, ServerLimits(max_body=2 << 20), tls=tls_context_factory(web))
    r = _Running(srv)
    try:
        c = http.client.HTTPSConnection("127.0.0.1", r.port, timeout=60, context=_client_ctx(pki))
        c.request("GET", "/big")
        resp = c.getresponse()
        assert resp.read() == big
        c.request("POST", "/echo", body=b"x" * (1 << 20))
        assert c.getresponse().read() == str(1 << 20).encode()
        c.close()
        c = http.client.HTTPSConnection("127.0.0.1", r.port, timeout=60, context=_client_ctx(pki))
        try:
            c.request("POST", "/echo", body=b"x" * (3 << 20))
            assert c.getresponse().status == 413
        except (ConnectionError, ssl.SSLError):
            pass  # closed while still sending: also refused
        c.close()
    finally:
        r.close()


def test_rotated_certificate_served_from_next_connection(tmp_path, pki):
    d = tmp_path / "live"
    d.mkdir()
    crt, key = d / "tls.crt", d / "tls.key"
    shutil.copy(pki.server_crt, crt)
    shutil.copy(pki.server_key, key)
    (d / "web.yml").write_text(
        yaml.safe_dump({"tls_server_config": {"cert_file": "tls.crt", "key_file": "tls.key"}})
    )
    r = _agent_tls(d / "web.yml")
    url = f"https://127.0.0.1:{r.port}/healthz"
    new = make_pki(tmp_path / "new", "renewed")
    try:
        assert urllib.request.urlopen(url, timeout=30, context=_client_ctx(pki)).read() == b"ok\n"
        shutil.copy(new.server_key, key)  # half a rotation: key and certificate do not match
        assert urllib.request.urlopen(url, timeout=30, context=_client_ctx(pki)).read() == b"ok\n"
        shutil.copy(new.server_crt, crt)
        assert urllib.request.urlopen(url, timeout=30, context=_client_ctx(new)).read() == b"ok\n"
        assert _refused(lambda: urllib.request.urlopen(url, timeout=30, context=_client_ctx(pki)).read())
    finally:
        r.close()


def test_extender_over_tls_with_client_certificate(tmp_path, pki):
    from clusterdoctor.serve.extender import make_server as extender_server

    web = load_web_config(
        str(_web(tmp_path, pki, client_auth_type="RequireAndVerifyClientCert", client_ca_file=str(pki.ca)))
    )
    r = _Running(extender_server("127.0.0.1", 0, "tidal", web=web))
    from tests.serve.test_extender import ARGS as args

    try:
        c = http.client.HTTPSConnection("127.0.0.1", r.port, timeout=60, context=_client_ctx(pki, cert=True))
        c.request(
            "POST", "/scheduler/filter", body=json.dumps(args), headers={"Content-Type": "application/json"}
        )
        resp = c.getresponse()
        assert resp.status == 200
        kept = {n["metadata"]["name"] for n in json.loads(resp.read())["nodes"]["items"]}
        assert "gpu-a" in kept
        c.close()
        c = http.client.HTTPSConnection("127.0.0.1", r.port, timeout=60, context=_client_ctx(pki))
        assert _refused(
            lambda: (c.request("POST", "/scheduler/filter", body=json.dumps(args)), c.getresponse())
        )
    finally:
        r.close()


@pytest.mark.parametrize(
    ("tls", "expect"),
    [
        ({"client_auth_type": "RequireAnyClientCert", "client_ca_file": "ca"}, "not supported"),
        ({"client_auth_type": "VerifyClientCertIfGiven"}, "needs client_ca_file"),
        ({"client_auth_type": "RequireAndVerifyClientCert"}, "needs client_ca_file"),
        ({"min_version": "TLS14"}, "min_version 'TLS14'"),
        ({"cipher_suites": ["TLS_AES_128_GCM_SHA256"]}, "cipher_suites not supported"),
        ({"client_allowed_sans": ["prometheus"]}, "client_allowed_sans not supported"),
    ],
)
def test_tls_config_refusals(tmp_path, pki, tls, expect):
    with pytest.raises(InputError) as e:
        load_web_config(str(_web(tmp_path, pki, **tls)))
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_cli_tls_refusals_and_extender_basic_auth(tmp_path, pki):
    (tmp_path / "sys").mkdir()
    bad = tmp_path / "bad.yml"
    bad.write_text(
        yaml.safe_dump({"tls_server_config": {"cert_file": str(pki.server_crt), "key_file": str(pki.ca)}})
    )
    r = run_cli(
        "serve",
        "agent",
        "--sysfs-root",
        str(tmp_path),
        "--listen",
        "127.0.0.1:0",
        "--web.config.file",
        str(bad),
    )
    assert r.code == 2 and "cannot load the certificate/key" in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1
    users = tmp_path / "users.yml"
    users.write_text(
        "basic_auth_users:\n  prom: $2y$10$abcdefghijklmnopqrstuu7Wb0Y5X1Yd8Z0E1b5O3aJHq8M8G1xW2\n"
    )
    r = run_cli("serve", "extender", "--listen", "127.0.0.1:0", "--web.config.file", str(users))
    assert r.code == 2 and "Traceback" not in r.err, r.err
    assert "basic_auth_users" in r.err or "bcrypt" in r.err


def test_cli_agent_prints_https_url(tmp_path, pki):
    (tmp_path / "sys").mkdir()
    web = _web(tmp_path, pki)
    p = subprocess.Popen(
        [sys.executable, "-m", "clusterdoctor.cli.main", "serve", "agent", "--sysfs-root", str(tmp_path),
         "--listen", "127.0.0.1:0", "--web.config.file", str(web), "--interval", "1h"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        line = p.stderr.readline()
        assert line.startswith("clusterdoctor agent on https://127.0.0.1:"), line
        url = line.split(" on ", 1)[1].strip()
        with urllib.request.urlopen(url, timeout=60, context=_client_ctx(pki)) as resp:
            assert b"clusterdoctor_build_info" in resp.read()
    finally:
        p.terminate()
        p.wait(30)
