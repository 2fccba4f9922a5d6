"""`clusterdoctor serve agent|extender` at the CLI boundary: the URL is printed once the socket
listens (so it is the real one, also for port 0), a refused bind is one line and exit 2, Ctrl-C stops
cleanly. Real processes, ephemeral ports."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.conftest import REPO, run_cli


def _start(*args: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "clusterdoctor.cli.main", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    line = p.stderr.readline()  # printed only after the bind succeeded
    return p, line


@pytest.mark.parametrize(
    ("args", "path", "check"),
    [
        (["agent", "--listen", "127.0.0.1:0"], "", lambda body: "clusterdoctor_source_up" in body),
        (["extender", "--listen", "127.0.0.1:0"], "/healthz", lambda body: json.loads(body)["ok"] is True),
    ],
    ids=["agent", "extender"],
)
def test_url_is_printed_once_listening_and_answers(args, path, check):
    p, line = _start(*args)
    try:
        assert " on http://127.0.0.1:" in line, line
        url = line.split(" on ", 1)[1].split()[0]
        port = int(url.split(":")[2].split("/")[0])
        assert port != 0  # the port the kernel gave, not the one asked for
        base = url.rsplit("/", 1)[0] if path else url
        with urllib.request.urlopen(base + path, timeout=60) as r:  # no retry loop: it listens already
            assert check(r.read().decode())
        # SIGTERM, as the kubelet or systemd stop it (Ctrl-C's SIGINT is ignored by a child of a
        # non-interactive shell's background job, e.g. a CI runner started with `&`)
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0
        assert "Traceback" not in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("service", ["agent", "extender"])
def test_busy_port_is_one_line_exit_2_and_no_url(service):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_cli("serve", service, "--listen", f"127.0.0.1:{port}", timeout=120)
    assert r.code == 2
    assert r.err == f"clusterdoctor: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    assert "http://" not in r.err and r.out == ""


@pytest.mark.parametrize(
    ("listen", "says"),
    [
        ("127.0.0.1:70000", "not in 0-65535"),
        ("no-such-host.invalid:0", "cannot listen on no-such-host.invalid"),
    ],
)
def test_bad_listen_address(listen, says):
    r = run_cli("serve", "agent", "--listen", listen, timeout=120)
    assert r.code == 2 and says in r.err and r.err.count("\n") == 1 and "Traceback" not in r.err
