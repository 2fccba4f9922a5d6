"""`diagnose --prometheus` against an authenticated Prometheus: a real Prometheus serving TLS with a
self-signed certificate (its own --web.config.file), trusted through --ca-file and refused without
it; a bearer token from a file and extra headers (a tenant header) on every request, seen by a
recording HTTP endpoint in front of nothing (what a Cortex/Mimir gateway or kube-rbac-proxy would
check); bad options are one line and exit 2, and no token reaches any output."""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from clusterdoctor.errors import InputError
from clusterdoctor.observe.prom_auth import PromAuth, parse_header
from tests.conftest import run_cli
from tests.live.conftest import PROMETHEUS, Services, free_ports, need, start

pytestmark = [pytest.mark.live]
TOKEN = "eyJhbGciOiJSUzI1NiJ9.planted-token-value"


def _cert(tmp: Path) -> tuple[Path, Path]:
    crt, key = tmp / "tls.crt", tmp / "tls.key"
    r = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-days", "3650", "-keyout", str(key), "-out", str(crt)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"openssl cannot make a test certificate: {r.stderr.strip()[-200:]}")
    return crt, key


def test_ca_file_trusts_a_real_tls_prometheus(tmp_path):
    prom_exe = need(PROMETHEUS, "prometheus")
    crt, key = _cert(tmp_path)
    (tmp_path / "web.yml").write_text(
        yaml.safe_dump({"tls_server_config": {"cert_file": str(crt), "key_file": str(key)}})
    )
    (port,) = free_ports(1)
    (tmp_path / "p.yml").write_text(
        yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": []})
    )
    services = Services()
    try:
        services.procs.append(
            start(
                "prometheus",
                [
                    prom_exe,
                    f"--config.file={tmp_path / 'p.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    f"--web.config.file={tmp_path / 'web.yml'}",
                ],
                tmp_path,
            )  # fmt: skip
        )
        url = f"https://127.0.0.1:{port}"
        c = PromAuth(ca_file=str(crt)).client(url)
        for _ in range(200):  # ready when it answers over TLS
            try:
                assert c.server_time() > 0
                break
            except Exception:
                time.sleep(0.1)
        else:
            pytest.fail("prometheus over TLS did not answer")
        ok = run_cli(
            "diagnose", "--prometheus", url, "--ca-file", str(crt), "--since", "5m", "--format", "json"
        )
        assert ok.code in (0, 1), ok.err
        assert json.loads(ok.out)["sources"], ok.out[:300]
        bad = run_cli("diagnose", "--prometheus", url, "--since", "5m")
        assert bad.code != 0 and "TLS" in bad.err and "Traceback" not in bad.err
        # gpu health and watch take the same --ca-file (one option set, cli/prom_options.py)
        for cmd in (["gpu", "health"], ["watch", "--once"]):
            ok = run_cli(*cmd, "--prometheus", url, "--ca-file", str(crt), "--format", "json")
            assert "Traceback" not in ok.err and "TLS" not in ok.err and "certificate" not in ok.err, (
                cmd,
                ok.err,
            )
            bad = run_cli(*cmd, "--prometheus", url, "--format", "json")
            assert "Traceback" not in bad.err and (
                "TLS" in bad.err + bad.out or "certificate" in bad.err + bad.out
            ), (
                cmd,
                bad.err,
                bad.out[:300],
            )
    finally:
        services.stop_all()


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def _answer(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        if (
            self.headers.get("Authorization") != f"Bearer {TOKEN}"
            or self.headers.get("X-Scope-OrgID") != "team-a"
        ):
            body, code = (
                json.dumps({"status": "error", "errorType": "unauthorized", "error": "no"}).encode(),
                401,
            )
        elif self.path.startswith("/api/v1/label/__name__/values"):
            body, code = json.dumps({"status": "success", "data": []}).encode(), 200
        else:
            data = {"resultType": "scalar", "result": [1796028667.0, "1796028667"]}
            body, code = json.dumps({"status": "success", "data": data}).encode(), 200
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *a) -> None:
        pass


@pytest.mark.parametrize(
    "cmd", [["diagnose", "--since", "5m"], ["gpu", "health"], ["watch", "--once"]], ids=" ".join
)
def test_bearer_token_and_headers_are_sent(tmp_path, cmd):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    _Recorder.seen = []
    tok = tmp_path / "token"
    tok.write_text(TOKEN + "\n")
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        r = run_cli(
            *cmd, "--prometheus", url, "--bearer-token-file", str(tok),
            "--header", "X-Scope-OrgID: team-a", "--format", "json",
        )  # fmt: skip
        # 401 as a word: the random port in a message (e.g. 127.0.0.1:34017) may hold the digits
        assert "Traceback" not in r.err and not re.search(r"\b401\b", r.err), r.err
        assert _Recorder.seen and all(h.get("authorization") == f"Bearer {TOKEN}" for h in _Recorder.seen)
        assert all(h.get("x-scope-orgid") == "team-a" for h in _Recorder.seen)
        assert TOKEN not in r.out + r.err
        # without the token the gateway refuses: one line, exit 2 or 3, the token never echoed
        _Recorder.seen = []
        r = run_cli(*cmd, "--prometheus", url, "--header", "X-Scope-OrgID: team-a", "--format", "json")
        assert "Traceback" not in r.err and TOKEN not in r.out + r.err
        assert _Recorder.seen and not any("authorization" in h for h in _Recorder.seen)
        if cmd[0] == "diagnose":  # the control-plane pull fails on a refused server: one line
            assert r.code not in (0, 1) and "401" in r.err
    finally:
        srv.shutdown()
        srv.server_close()


def test_bad_auth_options_are_one_line(tmp_path):
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "bad.pem").write_text("not a certificate\n")
    for args, what in (
        (["--bearer-token-file", str(tmp_path / "none")], "--bearer-token-file"),
        (["--bearer-token-file", str(tmp_path / "empty")], "--bearer-token-file"),
        (["--ca-file", str(tmp_path / "none.pem")], "--ca-file"),
        (["--ca-file", str(tmp_path / "bad.pem")], "--ca-file"),
        (["--header", "no colon here"], "--header"),
        (["--header", "Host: evil"], "--header"),
    ):
        for cmd in (["diagnose", "--since", "5m"], ["gpu", "health"], ["watch", "--once"]):
            r = run_cli(*cmd, "--prometheus", "http://127.0.0.1:9", *args)
            assert r.code == 2 and what in r.err and "Traceback" not in r.err, (cmd, args, r.err)
            assert len(r.err.strip().splitlines()) == 1


def test_parse_header():
    assert parse_header("X-Scope-OrgID:  team-a ") == ("X-Scope-OrgID", "team-a")
    for bad in ("nocolon", ": v", "Bad Name: v", "X: a\nb"):
        with pytest.raises(InputError):
            parse_header(bad)
