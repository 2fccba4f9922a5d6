"""Redact secrets from anything clusterdoctor collects: logs, command lines, environments, configs.

Covered: HTTP ``Authorization`` headers (Bearer/Basic), ``token``/``password``/``secret``/``key``-like
fields in ``key=value``, ``key: value`` and JSON ``"key": "value"`` forms, command-line flags
(``--token X``, ``--password=X``), environment variables whose names mark them as secret,
kubeconfig credentials (``token``, ``client-key-data``, ``password``, exec ``env``), PEM private
keys, credentials in URLs (``https://user:pass@host``), and well-known token shapes (AWS access
key ids, GitHub/Slack tokens, JWTs). Replaced values read ``<redacted>``; the key names stay so a
reader sees what was there.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "is_secret_name", "redact_argv", "redact_bytes", "redact_env", "redact_text"]

REDACTED = "<redacted>"

_SECRET_WORDS = (
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "access_key",
    "access-key",
    "accesskey",
    "private_key",
    "private-key",
    "privatekey",
    "client-key",
    "client_key",
    "credential",
    "cookie",
    "signature",
)
_NOT_SECRET = ("author", "authority", "oauth_scope", "tokenizer", "max_tokens", "certificate-authority")


def is_secret_name(name: str) -> bool:
    """True when a variable/field/flag name marks its value as a secret (``DB_PASSWORD``, ``--token``)."""
    n = name.strip().lstrip("-").lower()
    if any(n == x or n.endswith(x) for x in _NOT_SECRET):
        return False
    if n.endswith("_key") or n.endswith("-key") or n == "key":
        return True
    return any(w in n for w in _SECRET_WORDS)


_NAME = r"[A-Za-z0-9_.\-]*"
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # PEM private keys (whole block)
    (
        re.compile(r"-----BEGIN ([A-Z ]*PRIVATE KEY)-----.*?(?:-----END \1-----|\Z)", re.S),
        r"-----BEGIN \1-----" + REDACTED + r"-----END \1-----",
    ),
    # Authorization headers
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*\"?(?:bearer|basic|token)\s+)[^\s\"',;]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]{8,}=*"), r"\1" + REDACTED),
    # credentials in URLs
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^/\s:@]+:)[^@\s/]+(@)"), r"\1" + REDACTED + r"\2"),
    # JSON "key": "value"
    (
        re.compile(r'(?i)("(' + _NAME + r')"\s*:\s*")((?:[^"\\]|\\.)*)(")'),
        None,  # type: ignore[list-item]
    ),
    # --flag=value / --flag value
    (
        re.compile(
            r"(?i)(?:^|(?<=[\s\"']))(--?(" + _NAME + r")(?:=|[ \t]+))(?!-)(\"[^\"]*\"|'[^']*'|[^\s\"']+)"
        ),
        None,
    ),  # type: ignore[list-item]
    # key=value, key: value (env files, logfmt, YAML, kubeconfig)
    (
        re.compile(r"(?im)(^|[\s,;{(])(" + _NAME + r")([ \t]*[:=][ \t]*)(\"[^\"]*\"|'[^']*'|[^\s,;\"'}]+)"),
        None,
    ),  # type: ignore[list-item]
    # token shapes
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"), REDACTED),
]


def _json_repl(m: re.Match[str]) -> str:
    if is_secret_name(m.group(2)) and m.group(3):
        return m.group(1) + REDACTED + m.group(4)
    return m.group(0)


def _flag_repl(m: re.Match[str]) -> str:
    if is_secret_name(m.group(2)):
        return m.group(1) + REDACTED
    return m.group(0)


def _kv_repl(m: re.Match[str]) -> str:
    val = m.group(4)
    if (
        is_secret_name(m.group(2))
        and val not in ("", '""', "''", REDACTED)
        and not val.startswith("<redacted")
    ):
        if val.lower() in ("true", "false", "null", "none", "|", ">"):
            return m.group(0)
        return m.group(1) + m.group(2) + m.group(3) + REDACTED
    return m.group(0)


_FUNCS = {4: _json_repl, 5: _flag_repl, 6: _kv_repl}


def redact_text(text: str) -> str:
    """Text with every recognised secret value replaced by ``<redacted>``."""
    out = text
    for i, (pat, repl) in enumerate(_PATTERNS):
        fn = _FUNCS.get(i)
        out = pat.sub(fn if fn is not None else repl, out)
    return out


def redact_bytes(data: bytes) -> bytes:
    """:func:`redact_text` for bytes (decoded as UTF-8 with replacement where needed)."""
    return redact_text(data.decode("utf-8", errors="replace")).encode("utf-8")


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with secret flag values (``--token X``, ``--password=X``) redacted."""
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if a.startswith("-"):
            name, eq, _ = a.partition("=")
            if is_secret_name(name):
                if eq:
                    out.append(f"{name}={REDACTED}")
                else:
                    out.append(a)
                    hide_next = True
                continue
        out.append(redact_text(a))
    return out


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """An environment with the values of secret-named variables redacted (others scanned too)."""
    return {k: (REDACTED if is_secret_name(k) else redact_text(v)) for k, v in env.items()}
