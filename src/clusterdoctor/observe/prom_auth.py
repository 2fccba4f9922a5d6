"""How to authenticate to a Prometheus API (``diagnose --prometheus``): what Prometheus's own
``http_config`` offers a client, as command-line options.

- ``--bearer-token-file FILE``: ``Authorization: Bearer <the file's content>`` (a service account
  token, ``/var/run/secrets/kubernetes.io/serviceaccount/token``; kube-rbac-proxy, OpenShift);
- ``--ca-file FILE``: the CA bundle that signed the server's certificate (instead of the system's);
- ``--header 'Name: value'`` (repeatable): a tenant header (``X-Scope-OrgID`` for Cortex, Mimir,
  Thanos receive) or a proxy's own.

Basic auth stays in the URL (``https://user:pass@host``; never printed, :mod:`clusterdoctor.redact`).
Token values are never part of an error message.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field

from clusterdoctor.errors import InputError

__all__ = ["PromAuth", "parse_header"]

_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)
MAX_TOKEN = 64 << 10


def parse_header(text: str) -> tuple[str, str]:
    """``Name: value`` -> (name, value); InputError for anything else (the value is not echoed)."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not _NAME.match(name):
        raise InputError("expected 'Name: value' with an HTTP header name", f"--header {name[:40]!r}")
    if any(c in value for c in "\r\n\0"):
        raise InputError("header value holds a line break or NUL", f"--header {name}")
    if name.lower() in ("host", "content-length", "transfer-encoding", "connection"):
        raise InputError("this header is set by the HTTP client itself", f"--header {name}")
    return name, value


@dataclass
class PromAuth:
    bearer_token_file: str | None = None
    ca_file: str | None = None
    headers: list[str] = field(default_factory=list)

    def http_headers(self) -> dict[str, str]:
        """The request headers these options add (read the token file now: it may be rotated)."""
        out: dict[str, str] = {}
        for h in self.headers:
            k, v = parse_header(h)
            out[k] = v
        if self.bearer_token_file:
            where = f"--bearer-token-file {self.bearer_token_file}"
            try:
                with open(self.bearer_token_file, "rb") as f:
                    raw = f.read(MAX_TOKEN + 1)
            except OSError as e:
                raise InputError(f"cannot read: {e.strerror or e}", where) from None
            if len(raw) > MAX_TOKEN:
                raise InputError("larger than 64 KiB: not a token", where)
            try:
                token = raw.decode("ascii").strip()
            except UnicodeDecodeError:
                raise InputError("not an ASCII token", where) from None
            if not token or any(c in token for c in "\r\n\0 "):
                raise InputError("empty, or not one token on one line", where)
            out["Authorization"] = f"Bearer {token}"
        return out

    def ssl_context(self) -> ssl.SSLContext | None:
        """A TLS client context trusting ``ca_file`` (None: the system's CAs)."""
        if not self.ca_file:
            return None
        ctx = ssl.create_default_context()
        try:
            ctx.load_verify_locations(cafile=self.ca_file)
        except FileNotFoundError:
            raise InputError("no such file", f"--ca-file {self.ca_file}") from None
        except (OSError, ssl.SSLError) as e:
            raise InputError(
                f"not a PEM CA bundle ({getattr(e, 'reason', None) or e})", f"--ca-file {self.ca_file}"
            ) from None
        return ctx

    def client(self, url: str, timeout: float = 10.0):  # -> PromClient
        from clusterdoctor.observe.control.prom_api import PromClient

        return PromClient(url, timeout=timeout, headers=self.http_headers(), ssl_context=self.ssl_context())
