"""Secrets never leak from ``collect``: every shape of issue 15 is planted — on command lines, in
``--file`` content, in a scrape URL (user:password and ?token=) — and the whole bundle, every member
and manifest.json, is decompressed and searched for each secret."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import zstandard

from clusterdoctor.redact import REDACTED, redact_argv, redact_env, redact_text
from tests.conftest import run_cli

pytestmark = pytest.mark.hostile

S = {k: f"S3cr3t{k}x9" for k in range(1, 20)}

SHAPES = {
    # command lines (argv joined, as `ps` shows them)
    f"app --db-pass={S[1]} --v=2": S[1],
    f"gpg --passphrase={S[2]} -d f": S[2],
    f"mysql -u root -p{S[3]} db": S[3],
    f"sshpass -p {S[4]} ssh host": S[4],
    f"tool --pass {S[5]} run": S[5],
    f"redis-cli -a {S[6]} ping": S[6],
    # file content
    f"db_pass: {S[7]}": S[7],
    f"curl -u admin:{S[8]} https://x/api": S[8],
    f"DB_PASS={S[9]}": S[9],
    f"passphrase={S[10]}": S[10],
    f"export API_TOKEN={S[11]}": S[11],
    f"url = https://user:{S[12]}@db.local/x?api_key={S[13]}": S[12],
    f'{{"client_secret": "{S[14]}"}}': S[14],
}


def test_every_shape_redacted_in_text():
    for text, secret in SHAPES.items():
        out = redact_text(text)
        assert secret not in out and REDACTED in out, text
    assert S[13] not in redact_text(f"https://h/x?api_key={S[13]}&a=1")


def test_argv_and_env_shapes():
    cases = [
        (["app", f"--db-pass={S[1]}"], S[1]),
        (["gpg", f"--passphrase={S[2]}"], S[2]),
        (["mysql", "-u", "root", f"-p{S[3]}"], S[3]),
        (["sshpass", "-p", S[4], "ssh"], S[4]),
        (["tool", "--pass", S[5]], S[5]),
        (["redis-cli", "-a", S[6], "ping"], S[6]),
        (["curl", "-u", f"admin:{S[8]}", "https://x"], S[8]),
        (["curl", f"--user=admin:{S[8]}", "https://x"], S[8]),
        (["prom", f"--scrape=http://u:{S[12]}@h/metrics?token={S[13]}"], S[12]),
    ]
    for argv, secret in cases:
        assert secret not in " ".join(redact_argv(argv)), argv
    env = redact_env(
        {"DB_PASS": S[9], "PASSPHRASE": S[10], "URL": f"http://h/?token={S[13]}", "HOME": "/root"}
    )
    assert S[9] not in str(env) and S[10] not in str(env) and S[13] not in str(env) and env["HOME"] == "/root"
    # no false alarm on words that merely contain "pass"
    assert redact_text("bypass=1 compass: north passed=3") == "bypass=1 compass: north passed=3"
    assert redact_argv(["psql", "-p", "5432", "db"]) == ["psql", "-p", "5432", "db"]


class _Metrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"# TYPE up gauge\nup 1\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: object) -> None:
        return


def test_collect_bundle_holds_no_planted_secret(tmp_path):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        captured = tmp_path / "ps.txt"
        captured.write_text("\n".join(SHAPES) + "\n")
        env_file = tmp_path / "app.env"
        env_file.write_text(f"DB_PASS={S[15]}\npassphrase={S[16]}\nHOME=/root\n")
        url = f"http://scraper:{S[17]}@127.0.0.1:{srv.server_address[1]}/metrics?token={S[18]}"
        bad_url = f"http://u:{S[19]}@127.0.0.1:9/metrics"  # fails: its error lands in the manifest
        out = tmp_path / "b.tar.zst"
        r = run_cli(
            "collect", "-o", str(out), "--file", str(captured), "--file", str(env_file), "--scrape", url,
            "--scrape", bad_url, "--scrape-interval", "0.05", "--unit", "none", "--rdma-interval", "0.01",
            "--timeout", "5", timeout=120,
        )  # fmt: skip
        assert r.code == 0, r.err
    finally:
        srv.shutdown()
        srv.server_close()
    raw = zstandard.ZstdDecompressor().stream_reader(out.open("rb")).read()  # every member and the manifest
    assert b"manifest.json" in raw and b"files/ps.txt" in raw and b"metrics/" in raw
    leaked = [k for k, v in S.items() if v.encode() in raw]
    assert not leaked, f"secrets {leaked} found in the bundle"
    # what must stay: the scraped data, the hosts, the key names
    assert b"up 1" in raw and b"127.0.0.1" in raw and b"DB_PASS=" in raw and b"passphrase=" in raw
    # stdout/stderr of collect too
    assert not [k for k, v in S.items() if v in r.out + r.err]
