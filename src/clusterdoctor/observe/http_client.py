"""HTTP GET/POST for live sources (Prometheus API, ``/metrics`` scrapes), with every wait bounded.

``urllib`` gives one socket timeout per ``recv``: a server that drips a byte every few seconds is never
given up, and ``read()`` of an error reply reads all of it (a 3 GiB 500 reply took 6.3 GB). Here:

- **connect** within ``connect_timeout``; each **read** (``recv``) within ``read_timeout``;
- the whole exchange (headers and body) within a **total** deadline per request, and within the
  **run's** deadline (:class:`Deadline`, shared by every request of one source in one run): a
  watchdog shuts the socket down when it passes, whatever the server does;
- a **body** larger than ``max_body`` (default: the ``input`` budget) is refused as it arrives; an
  **error body** is read up to ``max_error_body`` (64 KiB) and the rest is never read.

Every failure is a :class:`~clusterdoctor.errors.CollectError` of one line naming the URL and what
ran out. Redirects (up to 3, same scheme) are followed for GET. Proxies from the environment are not
used (these are in-cluster endpoints).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable

from clusterdoctor.errors import CollectError, InputError

__all__ = ["MAX_ERROR_BODY", "Deadline", "Response", "request"]

MAX_ERROR_BODY = 64 << 10  # what a useful error message can be; the rest of an error reply is dropped
_CHUNK = 64 << 10


class Deadline:
    """A point in time for a whole run (``seconds`` from now, monotonic); ``None`` means none."""

    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.seconds = seconds
        self.at = None if seconds is None else clock() + seconds

    def remaining(self) -> float | None:
        return None if self.at is None else self.at - self.clock()


class Response:
    __slots__ = ("body", "headers", "status", "url")

    def __init__(self, url: str, status: int, headers: dict[str, str], body: bytes) -> None:
        self.url, self.status, self.headers, self.body = url, status, headers, body


class _Ran(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def request(
    url: str, *, method: str = "GET", data: bytes | None = None, headers: dict[str, str] | None = None,
    connect_timeout: float = 5.0, read_timeout: float = 10.0, total_timeout: float = 60.0,
    run: Deadline | None = None, max_body: int | None = None, max_error_body: int = MAX_ERROR_BODY,
    insecure: bool = False, redirects: int = 3, ssl_context: ssl.SSLContext | None = None,
) -> Response:  # fmt: skip
    """One HTTP exchange within all the bounds of the module docstring. A non-2xx status is returned
    (with at most ``max_error_body`` bytes of its body) for the caller to word. ``ssl_context``: the
    TLS client context for https (a CA file, a client certificate); default: the system's CAs."""
    from clusterdoctor.observe.limits import human_size, limit_help, max_input_bytes

    cap = max_input_bytes() if max_body is None else max_body
    t0 = time.monotonic()
    budget = total_timeout
    run_left = run.remaining() if run is not None else None
    limited_by_run = run_left is not None and run_left < budget
    if run_left is not None:
        budget = min(budget, run_left)
    if budget <= 0:
        raise CollectError(f"{url}: not started: the run's deadline ({run.seconds:g} s) has passed")  # type: ignore[union-attr]
    for _hop in range(redirects + 1):
        p = urllib.parse.urlsplit(url)
        if p.scheme not in ("http", "https") or not p.hostname:
            raise InputError("not an http(s) URL", url)
        left = budget - (time.monotonic() - t0)
        try:
            status, hdrs, body = _exchange(
                p, method, data, headers or {}, connect_timeout, read_timeout, left, cap,
                max_error_body, insecure, ssl_context,
            )  # fmt: skip
        except _Ran as e:
            if e.what == "total":
                why = (
                    f"the run's deadline of {run.seconds:g} s"  # type: ignore[union-attr]
                    if limited_by_run
                    else f"the total deadline of {total_timeout:g} s"
                )
                raise CollectError(f"{url}: answer not complete within {why}") from None
            if e.what == "connect":
                raise CollectError(f"{url}: no connection within {connect_timeout:g} s") from None
            if e.what == "read":
                raise CollectError(f"{url}: no answer within {read_timeout:g} s (read timeout)") from None
            raise CollectError(
                f"{url}: answer larger than the input limit of {human_size(cap)} ({limit_help('input')})"
            ) from None
        except ssl.SSLError as e:
            raise CollectError(f"{url}: TLS: {e.reason or e}") from None
        except (OSError, http.client.HTTPException) as e:
            msg = getattr(e, "strerror", None) or str(e) or type(e).__name__
            raise CollectError(f"{url}: cannot connect ({msg})") from None
        if status in (301, 302, 303, 307, 308) and method == "GET" and hdrs.get("location"):
            nxt = urllib.parse.urljoin(url, hdrs["location"])
            if urllib.parse.urlsplit(nxt).scheme != p.scheme:
                raise CollectError(f"{url}: redirected to another scheme ({nxt[:100]}); not followed")
            url = nxt
            continue
        return Response(url, status, hdrs, body)
    raise CollectError(f"{url}: more than {redirects} redirects")


def _exchange(
    p: urllib.parse.SplitResult, method: str, data: bytes | None, headers: dict[str, str],
    connect_timeout: float, read_timeout: float, left: float, cap: int, max_error_body: int, insecure: bool,
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    if left <= 0:
        raise _Ran("total")
    port = p.port or (443 if p.scheme == "https" else 80)
    deadline = time.monotonic() + left
    try:
        sock = socket.create_connection((p.hostname, port), timeout=min(connect_timeout, left))
    except TimeoutError:
        raise _Ran("total" if left < connect_timeout else "connect") from None
    expired = threading.Event()

    def watchdog() -> None:  # a server dripping bytes never trips the read timeout: cut it off
        expired.set()
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    timer = threading.Timer(max(0.0, deadline - time.monotonic()), watchdog)
    timer.daemon = True
    timer.start()
    conn: http.client.HTTPConnection | None = None
    try:
        if p.scheme == "https":
            ctx = ssl_context or ssl.create_default_context()
            if insecure and ssl_context is None:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            sock.settimeout(min(read_timeout, max(0.01, deadline - time.monotonic())))
            sock = ctx.wrap_socket(sock, server_hostname=p.hostname)
        conn = http.client.HTTPConnection(p.hostname, port)  # type: ignore[arg-type]
        conn.sock = sock
        sock.settimeout(read_timeout)
        target = p.path or "/"
        if p.query:
            target += "?" + p.query
        hdrs = {"Host": p.netloc.rpartition("@")[2], "Connection": "close", **headers}
        if p.username is not None:  # credentials in the URL: HTTP basic auth, never logged
            import base64

            user = urllib.parse.unquote(p.username)
            pw = urllib.parse.unquote(p.password or "")
            hdrs["Authorization"] = "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()
        conn.request(method, target, body=data, headers=hdrs)
        resp = conn.getresponse()
        status = resp.status
        rh = {k.lower(): v for k, v in resp.getheaders()}
        limit = cap if 200 <= status < 300 else max_error_body
        chunks: list[bytes] = []
        total = 0
        while True:
            if time.monotonic() > deadline:
                raise _Ran("total")
            b = resp.read(
                min(_CHUNK, limit + 1 - total) if 200 <= status < 300 else min(_CHUNK, limit - total)
            )
            if not b:
                break
            chunks.append(b)
            total += len(b)
            if 200 <= status < 300 and total > cap:
                raise _Ran("size")
            if not 200 <= status < 300 and total >= limit:
                break  # enough of an error reply; the rest is never read
        return status, rh, b"".join(chunks)
    except TimeoutError:
        raise _Ran("total" if expired.is_set() else "read") from None
    except (OSError, http.client.HTTPException):
        if expired.is_set():
            raise _Ran("total") from None
        raise
    finally:
        timer.cancel()
        if conn is not None:
            conn.close()
        try:
            sock.close()
        except OSError:
            pass
