"""TLS for the waitress stack of :mod:`clusterdoctor.serve.http` (``--web.config.file``'s
``tls_server_config``).

waitress has no TLS of its own. Here the accepted socket is wrapped (``server_side``, no handshake
on connect) and the channel drives the handshake itself from the event loop, non-blocking: a client
that connects and never finishes the handshake costs a socket, never a thread, and is closed at the
handshake deadline (``CLUSTERDOCTOR_SERVE_TLS_HANDSHAKE_TIMEOUT``, 10 s) by the server's maintenance
pass. A failed handshake (a plain-HTTP client, a missing or untrusted client certificate, a version
below ``min_version``) closes the connection; nothing is served before the handshake completes.

After the handshake the channel reads and writes through the TLS socket with waitress's own
buffering: ``recv`` also drains what OpenSSL has already decrypted (a 16 KiB record read in 8 KiB
halves would otherwise wait for a socket event that never comes), ``send`` returns 0 when OpenSSL
wants the socket again (waitress retries the same bytes, as OpenSSL needs).

The context comes from a callable at each accept, so a certificate rotated on disk (cert-manager
renewing a Secret) is served from the next connection on, as exporter-toolkit re-reads its files.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from typing import Any

__all__ = ["tls_channel", "wrap_accept"]

_WANT = (ssl.SSLWantReadError, ssl.SSLWantWriteError)


def tls_channel(base: type) -> type:
    """A subclass of waitress channel class ``base`` that speaks TLS on an already wrapped socket."""

    class TlsChannel(base):  # type: ignore[misc, valid-type]
        tls_done = False  # the handshake completed
        tls_want_write = False  # the handshake waits for the socket to take its bytes

        def _handshake(self) -> None:
            try:
                self.socket.do_handshake()
            except ssl.SSLWantReadError:
                self.tls_want_write = False
                return
            except ssl.SSLWantWriteError:
                self.tls_want_write = True
                return
            except (ssl.SSLError, OSError, ValueError):
                # not TLS, a refused client certificate, a version below min_version, a reset
                self.handle_close()
                return
            self.tls_done, self.tls_want_write = True, False
            self.last_activity = time.time()

        def readable(self) -> bool:
            if not self.tls_done:
                return not self.will_close
            return bool(super().readable())

        def writable(self) -> bool:
            if not self.tls_done:
                return bool(self.tls_want_write or self.will_close)
            return bool(super().writable())

        def handle_read(self) -> None:
            if not self.tls_done:
                self._handshake()
                return
            try:
                data = self.recv(self.adj.recv_bytes)
            except _WANT:
                return  # a partial record: more bytes to come
            except OSError:  # SSLError included: a bad record, an alert, a reset
                self.handle_close()
                return
            if data:
                self.last_activity = time.time()
                self.received(data)
            else:
                self.handle_close()  # the client closed (TLS close_notify or EOF)

        def handle_write(self) -> None:
            if not self.tls_done:
                if self.will_close:
                    self.handle_close()  # the handshake deadline passed
                else:
                    self._handshake()
                return
            super().handle_write()

        def recv(self, buffer_size: int) -> bytes:
            data = self.socket.recv(buffer_size)
            while data and self.socket.pending():
                data += self.socket.recv(self.socket.pending())
            return bytes(data)

        def send(self, data: Any, do_close: bool = True) -> int:
            try:
                return int(self.socket.send(data))
            except _WANT:
                return 0

    return TlsChannel


def wrap_accept(accept: Callable[[], Any], context: Callable[[], ssl.SSLContext]) -> Any:
    """``accept()``'s ``(conn, addr)`` with ``conn`` wrapped for a server-side handshake (or None)."""
    pair = accept()
    if pair is None:
        return None
    conn, addr = pair
    try:
        return context().wrap_socket(conn, server_side=True, do_handshake_on_connect=False), addr
    except (ssl.SSLError, OSError):
        conn.close()
        return None
