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
"""

from __future__ import annotations

import base64
import hmac
import os
import ssl
import threading
from dataclasses import dataclass, field

from clusterdoctor.errors import InputError

__all__ = ["WebConfig", "load_web_config"]

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


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
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
        base = os.path.dirname(os.path.abspath(path))  # relative paths are relative to the file
        rel = lambda p: os.path.join(base, str(p))  # noqa: E731
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = _VERSIONS.get(str(tls.get("min_version", "TLS12")), ssl.TLSVersion.TLSv1_2)
        try:
            ctx.load_cert_chain(rel(tls["cert_file"]), rel(tls["key_file"]))
        except (OSError, ssl.SSLError) as e:
            raise InputError(f"tls_server_config: cannot load the certificate/key: {e}", path) from None
        auth = str(tls.get("client_auth_type", "NoClientCert"))
        if auth not in _AUTH_TYPES:
            raise InputError(f"client_auth_type {auth!r} is not one of {', '.join(_AUTH_TYPES)}", path)
        ctx.verify_mode = _AUTH_TYPES[auth]
        if tls.get("client_ca_file"):
            try:
                ctx.load_verify_locations(rel(tls["client_ca_file"]))
            except (OSError, ssl.SSLError) as e:
                raise InputError(f"client_ca_file: {e}", path) from None
        elif auth == "RequireAndVerifyClientCert":
            raise InputError("client_auth_type RequireAndVerifyClientCert needs client_ca_file", path)
        cfg.ssl_context = ctx
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
