"""``--web.config.file``: TLS and basic auth for ``/metrics``, in the Prometheus exporter-toolkit's
format (node exporter, dcgm-exporter and Prometheus itself read the same file)::

    tls_server_config:
      cert_file: /etc/clusterdoctor/tls.crt
      key_file: /etc/clusterdoctor/tls.key
      client_ca_file: /etc/clusterdoctor/ca.crt      # optional: with client_auth_type
      client_auth_type: RequireAndVerifyClientCert   # optional (NoClientCert by default)
      min_version: TLS12                             # optional
    basic_auth_users:
      prometheus: $2y$10$…                           # bcrypt hash (htpasswd -nBC 10 "")

Basic auth needs the ``bcrypt`` package (hashes are bcrypt, as exporter-toolkit's are); without it a
file with users is refused with one line, never served open. ``/healthz`` stays open for the
kubelet's probes, as exporter-toolkit leaves no path open but probes usually use TCP: here the
health answer says nothing about the node.

With ``tls_server_config`` the server speaks HTTPS only (:mod:`clusterdoctor.serve.http_tls`): a
plain-HTTP client and a client without an accepted certificate are refused at the handshake. The
certificate, key and CA files are stat'ed at each new connection and loaded again when they change
(a rotated Secret), keeping the last good context while a rotation is half written. Supported keys:
``cert_file``, ``key_file``, ``client_ca_file``, ``client_auth_type`` (``NoClientCert``,
``VerifyClientCertIfGiven``, ``RequireAndVerifyClientCert``; the two that take a certificate
unverified cannot be done with Python's ssl and are refused), ``min_version`` (TLS12 by default) and
``max_version``; any other key (``cipher_suites``, ``client_allowed_sans``...) is refused rather than
ignored.
"""

from __future__ import annotations

import base64
import hmac
import os
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["WebConfig", "load_web_config", "tls_context_factory"]

_UNVERIFIED = {"RequestClientCert", "RequireAnyClientCert"}
_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}


_TLS_KEYS = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version", "max_version"}
_FILES = ("cert_file", "key_file", "client_ca_file")


@dataclass
class _TlsFiles:
    """``tls_server_config`` and its files; builds the context again when a file changes on disk."""

    conf: dict
    files: dict[str, str]
    path: str  # the web config, for messages
    _stamp: tuple = ()
    _ctx: ssl.SSLContext | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _stamps(self) -> tuple:
        out = []
        for k in _FILES:
            try:
                st = os.stat(self.files[k]) if k in self.files else None
            except OSError:
                st = None
            out.append((st.st_mtime_ns, st.st_size, st.st_ino) if st else None)
        return tuple(out)

    def build(self) -> ssl.SSLContext:
        """A server context from the files as they are now (InputError, one line, if unusable)."""
        tls, path = self.conf, self.path
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        for key, attr in (("min_version", "minimum_version"), ("max_version", "maximum_version")):
            if key in tls:
                v = str(tls[key])
                if v not in _VERSIONS:
                    raise InputError(f"{key} {v!r} is not one of {', '.join(_VERSIONS)}", path)
                setattr(ctx, attr, _VERSIONS[v])
            elif key == "min_version":
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # exporter-toolkit's default
        ctx.set_alpn_protocols(["http/1.1"])
        try:
            ctx.load_cert_chain(self.files["cert_file"], self.files["key_file"])
        except (OSError, ssl.SSLError) as e:
            raise InputError(f"tls_server_config: cannot load the certificate/key: {e}", path) from None
        auth = str(tls.get("client_auth_type", "NoClientCert"))
        if auth not in _AUTH_TYPES:
            raise InputError(f"client_auth_type {auth!r} is not one of {', '.join(_AUTH_TYPES)}", path)
        if auth in _UNVERIFIED:
            # Python's ssl verifies every certificate it asks for: accepting one unverified is not possible
            raise InputError(
                f"client_auth_type {auth} (a certificate taken unverified) is not supported; "
                "use RequireAndVerifyClientCert or VerifyClientCertIfGiven with client_ca_file",
                path,
            )
        ctx.verify_mode = _AUTH_TYPES[auth]
        if "client_ca_file" in self.files:
            try:
                ctx.load_verify_locations(self.files["client_ca_file"])
            except (OSError, ssl.SSLError) as e:
                raise InputError(f"client_ca_file: {e}", path) from None
        elif auth != "NoClientCert":
            raise InputError(f"client_auth_type {auth} needs client_ca_file", path)
        with self._lock:
            self._ctx, self._stamp = ctx, self._stamps()
        return ctx

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: rebuilt when a file changed (a rotated certificate);
        while a rotation is half written (key and certificate not matching) the last good one."""
        with self._lock:
            ctx, stamp = self._ctx, self._stamp
        if ctx is not None and stamp == self._stamps():
            return ctx
        try:
            return self.build()
        except InputError:
            if ctx is None:
                raise
            return ctx


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None  # as loaded (the server asks ``tls`` per connection)
    tls: _TlsFiles | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # name -> bcrypt hash
    _ok: dict[tuple[str, str], bool] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header passes (always, without users)."""
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, pw = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        h = self.users.get(user)
        if h is None:
            return False
        key = (user, hmac.new(h, pw.encode(), "sha256").hexdigest())
        with self._lock:
            if (
                key in self._ok
            ):  # bcrypt costs ~50-100 ms: a verified password is cached (as exporter-toolkit does)
                return self._ok[key]
        import bcrypt

        ok = bcrypt.checkpw(pw.encode(), h)
        with self._lock:
            if len(self._ok) > 100:
                self._ok.clear()
            self._ok[key] = ok
        return ok


def tls_context_factory(cfg: WebConfig | None) -> Any:
    """What :func:`clusterdoctor.serve.http.make_server` takes as ``tls``: None without TLS."""
    return cfg.tls.context if cfg is not None and cfg.tls is not None else None


def load_web_config(path: str) -> WebConfig:
    """Read and check the file; InputError (one line) for anything that would not serve safely."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", path) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"not YAML: {str(e).splitlines()[0]}", path) from None
    if not isinstance(doc, dict):
        raise InputError("not a web config (a mapping with tls_server_config / basic_auth_users)", path)
    unknown = set(doc) - {"tls_server_config", "basic_auth_users", "http_server_config"}
    if unknown:
        raise InputError(f"unknown key(s): {', '.join(sorted(map(str, unknown)))}", path)
    cfg = WebConfig()
    tls = doc.get("tls_server_config")
    if tls:
        if not isinstance(tls, dict) or not tls.get("cert_file") or not tls.get("key_file"):
            raise InputError("tls_server_config needs cert_file and key_file", path)
        bad = set(tls) - _TLS_KEYS
        if bad:  # cipher_suites, client_allowed_sans...: never ignored, a silent weakening
            raise InputError(
                f"tls_server_config: {', '.join(sorted(map(str, bad)))} not supported "
                f"(supported: {', '.join(sorted(_TLS_KEYS))})",
                path,
            )
        base = os.path.dirname(os.path.abspath(path))  # relative paths are relative to the file
        files = {k: os.path.join(base, str(tls[k])) for k in _FILES if tls.get(k)}
        cfg.tls = _TlsFiles(dict(tls), files, path)
        cfg.ssl_context = cfg.tls.build()  # checked now: a bad file is one line before listening
    users = doc.get("basic_auth_users") or {}
    if users:
        if not isinstance(users, dict):
            raise InputError("basic_auth_users must map user names to bcrypt hashes", path)
        try:
            import bcrypt  # noqa: F401
        except ModuleNotFoundError:
            raise InputError(
                "basic_auth_users needs the bcrypt package (pip install bcrypt); refusing to serve without auth",
                path,
            ) from None
        for u, h in users.items():
            hs = str(h)
            if not hs.startswith(("$2a$", "$2b$", "$2y$")):
                raise InputError(
                    f'basic_auth_users.{u}: not a bcrypt hash (htpasswd -nBC 10 "" makes one)', path
                )
            cfg.users[str(u)] = hs.encode()
    return cfg
