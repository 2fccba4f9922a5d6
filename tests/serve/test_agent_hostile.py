"""Issue 25's agent items: a log of long adversarial lines never stalls a scrape (lines cut, parsed
once, in a worker the scrape does not wait for), and a log whose file name is not UTF-8 is served,
escaped, instead of a 500 on every scrape."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import urllib.request

import pytest

from clusterdoctor.serve.agent import Agent, default_sources, make_server

# klog's "Observed pod startup duration" followed by letters: quadratic in logs._RE_KV before issue 25
KLOG = b'I1130 08:51:07.000000 1 pod_startup_latency_tracker.go:102] "Observed pod startup duration" '


def _serve(agent):
    srv = make_server(agent, "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/metrics"


def _get(url):
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.status, r.read().decode(), time.monotonic() - t0


def test_long_adversarial_lines_never_stall_a_scrape(tmp_path):
    p = tmp_path / "kubelet.log"
    p.write_bytes(b"".join(KLOG + b"a" * 200_000 + b"\n" for _ in range(8)))
    agent = Agent(default_sources(str(tmp_path), [str(p)], 2.0), interval_s=0.5)
    srv, url = _serve(agent)
    try:
        _get(url)  # the first scrape waits for the first round (the source is abandoned at 2 s)
        worst = 0.0
        for _ in range(6):
            code, body, secs = _get(url)
            assert code == 200 and "clusterdoctor_build_info" in body
            worst = max(worst, secs)
            time.sleep(0.2)
        assert worst < 5  # generous: one cut line costs the parser well under a second
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            body = _get(url)[1]
            if f'clusterdoctor_source_up{{source="file {p}"}} 1' in body:
                break
            time.sleep(0.5)
        assert f'clusterdoctor_log_lines_truncated_total{{source="file {p}"}} 8' in body
    finally:
        srv.shutdown()
        srv.server_close()
        agent.close()


def test_log_name_not_utf8_is_served(tmp_path):
    name = os.fsdecode(b"kubelet-\xff.log")
    p = tmp_path / name
    p.write_bytes(KLOG + b"\n")
    agent = Agent(default_sources(str(tmp_path), [str(p)], 5.0), interval_s=3600)
    srv, url = _serve(agent)
    try:
        code, body, _ = _get(url)
    finally:
        srv.shutdown()
        srv.server_close()
        agent.close()
    assert code == 200
    assert 'source="file ' in body and "kubelet-\\\\xff.log" in body
    exe = shutil.which("promtool")
    if exe:
        out = subprocess.run([exe, "check", "metrics"], input=body, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


def test_cli_accepts_a_log_name_not_utf8(tmp_path):
    """Through the real CLI process: the file name arrives as bytes in argv."""
    import socket
    import sys

    (tmp_path / "sys").mkdir()
    p = os.path.join(os.fsencode(tmp_path), b"etcd-\xfe.log")
    with open(p, "wb") as f:
        f.write(b'{"level":"warn","ts":"2026-11-30T08:51:07.000Z","msg":"x"}\n')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable.encode(), b"-m", b"clusterdoctor.cli.main", b"serve", b"agent",
         f"--listen=127.0.0.1:{port}".encode(), b"--sysfs-root=" + os.fsencode(tmp_path), b"--log=" + p],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        body = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                body = _get(f"http://127.0.0.1:{port}/metrics")[1]
                break
            except OSError:
                time.sleep(0.2)
        if body is None:
            pytest.fail(
                f"agent did not answer: {proc.stderr.read().decode(errors='replace') if proc.poll() is not None else ''}"
            )
        assert "etcd-\\\\xfe.log" in body
    finally:
        proc.terminate()
        proc.wait(10)
