"""Issue 25, deliver 4: every report escapes what it did not write. File and member names carrying
terminal escapes (``ESC[2J``, an OSC window title), raw newlines and bytes that are not UTF-8 are shown
visibly in the text report, the JUnit XML stays well-formed, ``-o FILE`` writes every format, and URL
credentials (``user:password@``, ``?token=``, ``&api_key=``) never reach a report or an error line."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.hostile import generators as g
from tests.hostile.harness import run_capped

pytestmark = pytest.mark.hostile

HEARTBEAT = (
    b'{"level":"warn","ts":"2026-11-30T08:51:03.658Z","caller":"etcdserver/raft.go:416",'
    b'"msg":"leader failed to send out heartbeat on time; took too long, leader is overloaded likely '
    b'from slow disk","to":"b","heartbeat-interval":"100ms","expected-duration":"200ms",'
    b'"exceeded-duration":"2.37s"}\n'
)
CLEAR = "\x1b[2J"
TITLE = "\x1b]0;owned\x07"
FORGED = "1. CRITICAL FAKE001 forged finding"
EVIL = f"etcd{CLEAR}{TITLE}\n{FORGED}\u202e.log"
FORMATS = ("text", "json", "html", "junit")


def _assert_clean(out: str) -> None:
    """Nothing a terminal would obey, no line forged by a raw newline."""
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert not any(line.startswith(FORGED) for line in out.splitlines()), "a raw newline forged a line"


def _check_format(fmt: str, out: str, name_shown: str | None = "\\x1b[2J") -> None:
    """``out`` is well-formed for ``fmt`` and clean; the name is there, escaped (text, HTML, JUnit:
    visibly; JSON carries it exactly, in JSON's own escapes)."""
    _assert_clean(out)
    if fmt == "json":
        doc = json.loads(out)
        if name_shown is not None:
            assert any(CLEAR in x for x in _strings(doc))  # JSON carries the name as it is
        return
    if fmt == "junit":
        ET.fromstring(out.encode())  # well-formed
    if name_shown is not None:
        assert name_shown in out


def _strings(v: object) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return []


def _error_line(r) -> str:
    """The one error line (a progress line may come before it on a loaded machine)."""
    assert "Traceback" not in r.err, r.err[-2000:]
    lines = [ln for ln in r.err.splitlines() if ln.startswith("clusterdoctor: error")]
    assert len(lines) == 1, r.err[-2000:]
    return lines[0]


@pytest.fixture
def incident(tmp_path):
    d = tmp_path / "incident"
    d.mkdir()
    (d / EVIL).write_bytes(HEARTBEAT)
    return d


@pytest.mark.parametrize("fmt", FORMATS)
def test_r25_escapes_in_file_names_are_shown_visibly(incident, fmt):
    r = run_capped("diagnose", str(incident), "--format", fmt, timeout=120)
    assert r.code == 1 and "Traceback" not in r.err, r.err[-2000:]
    _check_format(fmt, r.out)
    _assert_clean(r.err)
    if fmt == "text":
        assert "ETCDLOG002" in r.out and "\\n1. CRITICAL FAKE001" in r.out


@pytest.mark.parametrize("fmt", FORMATS)
def test_r25_escapes_in_bundle_member_names(tmp_path, fmt):
    """Member names of a bundle reach warnings and subjects: the same rules hold."""
    b = g.bundle(
        tmp_path / "b.tar.zst",
        [(f"files/{EVIL}", HEARTBEAT), (f"files/x{CLEAR}\n{FORGED}.bin", b"\x00" * 600)],
    )
    r = run_capped("diagnose", str(b), "--format", fmt, timeout=120)
    assert r.code in (0, 1) and "Traceback" not in r.err, r.err[-2000:]
    _check_format(fmt, r.out)
    _assert_clean(r.err)


def test_r25_error_line_with_escapes_is_one_visible_line(tmp_path):
    p = tmp_path / f"bad{CLEAR}{TITLE}\nline2.prom"
    p.write_text("# TYPE x gauge\n" + "x 1\n" * 10)
    r = run_capped("--limit", "input=16", "diagnose", str(p))
    line = _error_line(r)
    assert r.code == 2 and "\x1b" not in line and "\\x1b[2J" in line and "larger than the input limit" in line


@pytest.mark.parametrize("fmt", FORMATS)
def test_r25_non_utf8_names_with_output_file(tmp_path, fmt):
    """A folder and file whose names are not UTF-8: every format is written with -o (it ended in exit
    70, 'surrogates not allowed'), and the byte reads \\xff."""
    d = os.path.join(os.fsencode(tmp_path), b"inc-\xff\xfe")
    os.mkdir(d)
    with open(os.path.join(d, b"etcd-\xff.log"), "wb") as f:
        f.write(HEARTBEAT)
    out = tmp_path / f"report.{fmt}"
    r = run_capped("diagnose", os.fsdecode(d), "--format", fmt, "-o", str(out), timeout=120)
    assert r.code == 1 and "Traceback" not in r.err and "internal error" not in r.err, r.err[-2000:]
    text = out.read_text(encoding="utf-8")  # valid UTF-8
    _check_format(fmt, text, None)
    assert ("\\udcff" if fmt == "json" else "\\xff") in text
    r = run_capped("watch", "--from", os.fsdecode(d), timeout=60)
    assert r.code == 2 and "internal error" not in r.err and "\\xff" in _error_line(r)


class _Metrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: object) -> None:
        return


SECRETS = [f"R25s3cr3t{i}Q" for i in range(8)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_r25_url_credentials_never_printed(fmt):
    """``--scrape``/``--prometheus`` URLs with ``user:password@``, ``?token=`` and ``&api_key=``: one
    that answers, one that does not, a Prometheus that does not: no secret in any report format or
    on stderr; the hosts are still named."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        port = srv.server_address[1]
        s = SECRETS
        args = (
            "diagnose", "--scrape", f"http://scraper:{s[0]}@127.0.0.1:{port}/metrics?token={s[1]}&a=1",
            "--scrape", f"http://u:{s[2]}@127.0.0.1:9/metrics?api_key={s[3]}",
            "--prometheus", f"http://p:{s[4]}@127.0.0.1:9/?access_token={s[5]}", "--scrape-interval", "0",
            "--format", fmt,
        )  # fmt: skip
        r = run_capped(*args, timeout=120)
    finally:
        srv.shutdown()
        srv.server_close()
    assert "Traceback" not in r.err, r.err[-2000:]
    leaked = [x for x in SECRETS if x in r.out + r.err]
    assert not leaked, (leaked, r.out[-3000:], r.err[-2000:])
    assert "127.0.0.1" in r.out + r.err and "<redacted>" in r.out + r.err


def test_r25_url_credentials_never_in_error_lines():
    s = SECRETS
    for args in (
        ("diagnose", "--prometheus", f"http://p:{s[6]}@127.0.0.1:9/?token={s[7]}"),
        ("diagnose", "--scrape", f"http://u:{s[6]}@127.0.0.1:9/metrics?token={s[7]}"),
        (
            "collect",
            "-o",
            "/nonexistent/dir/b.tar.zst",
            "--scrape",
            f"http://u:{s[6]}@h/metrics?token={s[7]}",
        ),
    ):
        r = run_capped(*args, timeout=60)
        line = _error_line(r)
        assert r.code == 2 and s[6] not in line and s[7] not in line, line


def test_r25_escape_helpers_are_total():
    """Every code point and every byte: ``visible`` leaves none of the unsafe ones and always gives
    text that encodes as UTF-8."""
    from clusterdoctor.escape import terminal_safe, visible

    every = "".join(chr(c) for c in range(0x110000) if c != 0x0A)
    for s in (every, os.fsdecode(bytes(range(256)))):
        for out in (visible(s), terminal_safe(s)):
            out.encode("utf-8")
            assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert visible("a\nb\x1b[2J\udcff") == "a\\nb\\x1b[2J\\xff"
    assert Path(__file__).name.startswith("test_r25_")
