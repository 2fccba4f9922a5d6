"""Issue 15's network reproducers against real servers on 127.0.0.1: a Prometheus that drips one byte
at a time (never idle long enough for a read timeout), one that answers 500 with a 3 GiB body, one
that answers 200 with more than the input budget, and /metrics scrapes sharing one run deadline."""

from __future__ import annotations

import resource
import socket
import threading
import time

import pytest

from clusterdoctor.errors import CollectError
from clusterdoctor.observe.control.prom_api import PromClient
from clusterdoctor.observe.control.scrape import scrape_window
from tests.conftest import needs_real_lock_timeouts

pytestmark = pytest.mark.hostile


class RawServer:
    """A TCP server on 127.0.0.1 running ``handler(conn)`` per connection (a thread each)."""

    def __init__(self, handler) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.handler = handler
        self.stop = threading.Event()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            self.handler(conn, self.stop)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def serve():
    servers = []

    def start(handler):
        s = RawServer(handler)
        servers.append(s)
        return f"http://127.0.0.1:{s.port}"

    yield start
    for s in servers:
        s.close()


def _drip(conn: socket.socket, stop: threading.Event) -> None:
    body = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
    msg = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    for b in msg:  # one byte every 0.2 s: each read gets data well within the read timeout
        if stop.wait(0.2):
            return
        conn.sendall(bytes([b]))


@needs_real_lock_timeouts  # the watchdog is a threading.Timer (a timed wait)
def test_dripping_server_is_given_up_at_the_total_deadline(serve):
    url = serve(_drip)
    t0 = time.monotonic()
    with pytest.raises(CollectError) as e:
        PromClient(url, timeout=1.0).query("up")  # read timeout 1 s, total 6 s
    took = time.monotonic() - t0
    assert "answer not complete within the total deadline of 6 s" in str(e.value)
    assert 5.5 < took < 9


@needs_real_lock_timeouts  # the watchdog is a threading.Timer (a timed wait)
def test_run_deadline_bounds_all_requests_of_a_client(serve):
    url = serve(_drip)
    c = PromClient(url, timeout=10.0, run_seconds=1.5)
    t0 = time.monotonic()
    with pytest.raises(CollectError, match="the run's deadline of 1.5 s"):
        c.query("up")
    with pytest.raises(CollectError, match="deadline .* has passed"):
        c.query("up")  # nothing left for a second request
    assert time.monotonic() - t0 < 4


def _huge_error(conn: socket.socket, stop: threading.Event) -> None:
    size = 3 << 30
    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n" % size)
    chunk = b"E" * (1 << 20)
    for _ in range(size // len(chunk)):
        if stop.is_set():
            return
        conn.sendall(chunk)


def test_3_gib_error_body_is_read_to_64_kib(serve):
    url = serve(_huge_error)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    with pytest.raises(CollectError) as e:
        PromClient(url, timeout=5).query("up")
    assert "HTTP 500 EEEE" in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 400
    assert time.monotonic() - t0 < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # KiB: < 64 MB more


def _big_ok(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (1 << 30))
    chunk = b" " * (1 << 20)
    for _ in range(1024):
        if stop.is_set():
            return
        conn.sendall(chunk)


def test_answer_over_the_input_budget_is_refused_as_it_arrives(serve, monkeypatch):
    monkeypatch.setenv("CLUSTERDOCTOR_MAX_INPUT_BYTES", "8M")
    url = serve(_big_ok)
    with pytest.raises(CollectError, match="answer larger than the input limit of 8 MiB"):
        PromClient(url, timeout=5).query("up")


@needs_real_lock_timeouts  # the watchdog is a threading.Timer (a timed wait)
def test_scrapes_share_the_run_deadline(serve, monkeypatch):
    """Two dripping /metrics endpoints scraped twice: bounded by the 'seconds' budget, not 4 totals."""
    monkeypatch.setenv("CLUSTERDOCTOR_MAX_SECONDS", "2")
    urls = [serve(_drip) + "/metrics", serve(_drip) + "/metrics"]
    t0 = time.monotonic()
    with pytest.raises(CollectError, match="no /metrics endpoint answered"):
        scrape_window(urls, interval=0.1, timeout=10)
    assert time.monotonic() - t0 < 6


def test_connection_refused_and_connect_timeout_are_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(CollectError, match="cannot connect"):
        PromClient(f"http://127.0.0.1:{port}", timeout=1).query("up")
