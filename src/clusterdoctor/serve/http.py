"""The HTTP server stack of ``clusterdoctor serve`` (agent and extender): waitress, with limits.

Why waitress (evaluated against the stdlib's ``ThreadingHTTPServer`` and uvicorn/h11 for issue 15):
one event loop reads every connection and hands only *complete* requests to a fixed pool of worker
threads, so a slow or idle client costs a socket, never a thread; it buffers request bodies with a
size cap (413 past it), answers malformed HTTP with 400/431 itself, listens with a real backlog and
caps open connections. It is pure Python with no dependencies (the CLI imports it only for
``serve``). ``ThreadingHTTPServer`` gives a thread per connection, a backlog of 5 and no read
timeout — the extender dropped 248 of 2,000 requests from 200 clients on it; uvicorn would need the
CPU-bound scoring moved off its event loop, has no body limit and no per-request read deadline of
its own, and pulls click, h11 and asyncio into the agent.

What waitress lacks, added here (issues 15 and 25): a deadline for reading one request (headers and
body) — a client dripping a byte every few seconds is never "idle" — and a shorter one for its
headers, enforced by the server's maintenance pass; a connection that never sends a request is closed
at the header deadline, not the idle timeout; and at the connection limit the oldest idle connections
are closed at once to make room (waitress would stop accepting until one times out: 1,000 idle
sockets made every normal request wait for the 60 s idle timeout).

Limits (environment variables; the defaults suit a scheduler extender on a 5,000-node cluster):

=====================================  ==========  ==================================================
``CLUSTERDOCTOR_SERVE_MAX_BODY``       64 MiB      request body (413 past it)
``CLUSTERDOCTOR_SERVE_READ_TIMEOUT``   30 s        to receive one whole request once it has started
``CLUSTERDOCTOR_SERVE_HEADER_TIMEOUT`` 10 s        to receive a request's headers (or a first request)
``CLUSTERDOCTOR_SERVE_IDLE_TIMEOUT``   60 s        a keep-alive connection with no request
``CLUSTERDOCTOR_SERVE_THREADS``        4           requests handled at once (the rest wait, queued)
``CLUSTERDOCTOR_SERVE_CONNECTIONS``    1000        open connections (past it the oldest idle are closed)
``CLUSTERDOCTOR_SERVE_BACKLOG``        1024        listen backlog (capped by net.core.somaxconn)
=====================================  ==========  ==================================================

With ``tls`` (an ``ssl.SSLContext``, or a callable giving one at each accept) the server speaks
HTTPS only, with the same limits and one more, ``CLUSTERDOCTOR_SERVE_TLS_HANDSHAKE_TIMEOUT`` (10 s,
at most the header deadline) to finish the handshake: :mod:`clusterdoctor.serve.http_tls`.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["HttpServer", "ServerLimits", "json_response", "make_server", "read_body"]

Start = Callable[[str, list[tuple[str, str]]], Any]
App = Callable[[dict[str, Any], Start], Iterable[bytes]]


class ServerLimits:
    """The limits of one server (see the module docstring); every field overridable in the call."""

    _ENV = {
        "max_body": ("CLUSTERDOCTOR_SERVE_MAX_BODY", 64 << 20),
        "read_timeout": ("CLUSTERDOCTOR_SERVE_READ_TIMEOUT", 30.0),
        "header_timeout": ("CLUSTERDOCTOR_SERVE_HEADER_TIMEOUT", 10.0),
        "idle_timeout": ("CLUSTERDOCTOR_SERVE_IDLE_TIMEOUT", 60.0),
        "threads": ("CLUSTERDOCTOR_SERVE_THREADS", 4),
        "connections": ("CLUSTERDOCTOR_SERVE_CONNECTIONS", 1000),
        "backlog": ("CLUSTERDOCTOR_SERVE_BACKLOG", 1024),
        "handshake_timeout": ("CLUSTERDOCTOR_SERVE_TLS_HANDSHAKE_TIMEOUT", 10.0),
    }

    def __init__(self, **override: float) -> None:
        from clusterdoctor.observe.limits import parse_size

        for name, (env, default) in self._ENV.items():
            v: float = default
            raw = os.environ.get(env, "").strip()
            if raw:
                n = parse_size(raw)
                if n is not None:
                    v = n
            if override.get(name) is not None:
                v = override[name]
            setattr(self, name, float(v) if isinstance(default, float) else max(1, int(v)))

    max_body: int
    read_timeout: float
    header_timeout: float
    idle_timeout: float
    threads: int
    connections: int
    backlog: int
    handshake_timeout: float


class HttpServer:
    """A bound, listening server (``OSError`` at construction if the port is taken); the
    ``ThreadingHTTPServer`` calls the CLI and tests use: ``server_address``, ``serve_forever()``,
    ``shutdown()``, ``server_close()``."""

    def __init__(
        self, app: App, host: str, port: int, limits: ServerLimits | None = None, tls: Any = None
    ) -> None:
        from waitress.channel import HTTPChannel
        from waitress.server import TcpWSGIServer

        from clusterdoctor.serve.http_tls import tls_channel, wrap_accept

        context = (lambda: tls) if isinstance(tls, ssl.SSLContext) else tls
        self.tls = context is not None

        lim = limits or ServerLimits()
        self.limits = lim
        import logging

        # "Task queue depth is N" per queued request under load is expected (bounded concurrency)
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)

        header_timeout = min(lim.header_timeout, lim.read_timeout)
        handshake_timeout = min(lim.handshake_timeout, header_timeout)

        class PlainChannel(HTTPChannel):
            read_started: float | None = None
            served = 0  # requests received whole on this connection

            def received(self, data: bytes) -> bool:
                if data and self.request is None and self.read_started is None:
                    self.read_started = time.time()  # waitress's own clock (time.time) below too
                out = super().received(data)
                if self.request is None:  # every request in the data is complete
                    if self.read_started is not None:
                        self.served += 1
                    self.read_started = None
                return out

            def idle(self) -> bool:
                return not (
                    self.requests
                    or self.read_started is not None
                    or self.total_outbufs_len
                    or self.will_close
                )

        Channel = tls_channel(PlainChannel) if context is not None else PlainChannel

        class Server(TcpWSGIServer):
            channel_class = Channel

            def accept(self) -> Any:
                if context is None:
                    return super().accept()
                return wrap_accept(super().accept, context)

            def maintenance(self, now: float) -> None:
                super().maintenance(now)  # idle keep-alive connections (channel_timeout)
                cutoff, hcut = now - lim.read_timeout, now - header_timeout
                tlscut = now - handshake_timeout
                for ch in list(self.active_channels.values()):
                    if getattr(ch, "tls_done", True) is False:
                        if ch.creation_time < tlscut:
                            ch.will_close = True  # a TLS handshake never finished
                        continue
                    if ch.requests:
                        continue
                    started = getattr(ch, "read_started", None)
                    if started is not None:
                        headers = ch.request is not None and ch.request.headers_finished
                        if started < cutoff or (not headers and started < hcut):
                            ch.will_close = True  # a request (or its headers) too slow to arrive
                    elif not getattr(ch, "served", 1) and ch.creation_time < hcut:
                        ch.will_close = True  # connected, and never sent a request

            def readable(self) -> bool:
                if self.accepting and len(self._map) >= lim.connections:
                    self._evict_idle()
                return super().readable()

            def _evict_idle(self) -> None:
                """At the limit: close the oldest idle connections (1/16 of the limit at a time)."""
                idle = [ch for ch in self.active_channels.values() if getattr(ch, "idle", lambda: False)()]
                idle.sort(key=lambda ch: ch.last_activity)
                for ch in idle[: max(1, lim.connections // 16)]:
                    ch.will_close = True  # closed by the loop on this pass (writable -> handle_write)

        self._srv = Server(
            app,
            host=host,
            port=port,
            threads=lim.threads,
            connection_limit=lim.connections,
            backlog=lim.backlog,
            channel_timeout=max(1, int(lim.idle_timeout)),
            cleanup_interval=max(
                1, int(min(handshake_timeout if context else header_timeout, lim.idle_timeout) / 4)
            ),
            max_request_body_size=lim.max_body,
            max_request_header_size=64 << 10,
            asyncore_use_poll=True,  # select() stops at 1024 descriptors
            expose_tracebacks=False,
            ident="clusterdoctor",
        )
        self.server_address = (self._srv.effective_host, self._srv.effective_port)
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        try:
            self._srv.run()
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serving (from another thread) and close every connection."""
        self._srv.task_dispatcher.shutdown(cancel_pending=True, timeout=5)
        import waitress.wasyncore as wasyncore

        wasyncore.close_all(self._srv._map)
        self._stopped.wait(5)

    def server_close(self) -> None:
        try:
            self._srv.close()
        except OSError:
            pass


def make_server(
    app: App, host: str, port: int, limits: ServerLimits | None = None, tls: Any = None
) -> HttpServer:
    """Bind ``host:port`` (0: any free port) and listen; serve with ``serve_forever()``; with
    ``tls`` (an ``ssl.SSLContext`` or a callable returning one) HTTPS only."""
    return HttpServer(app, host, port, limits, tls)


def read_body(environ: dict[str, Any]) -> bytes:
    """The whole request body (waitress has already received it, within ``max_body``)."""
    try:
        n = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        n = 0
    stream = environ["wsgi.input"]
    return stream.read(n) if n > 0 else stream.read()


def json_response(start: Start, code: int, doc: Any, reason: str = "") -> list[bytes]:
    """Send ``doc`` as JSON with status ``code``."""
    from http import HTTPStatus

    data = json.dumps(doc).encode()
    start(
        f"{code} {reason or HTTPStatus(code).phrase}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
    )
    return [data]
