"""Redact secrets from anything clusterdoctor collects: logs, command lines, environments, configs.

Covered: HTTP ``Authorization`` headers (Bearer/Basic), ``token``/``password``/``pass``/``passphrase``/
``secret``/``key``-like fields in ``key=value``, ``key: value`` and JSON ``"key": "value"`` forms
(``DB_PASS=…``, ``db_pass: …``, ``passphrase=…``), command-line flags (``--token X``, ``--password=X``,
``--db-pass=X``, ``--pass X``, ``--passphrase=X``), ``-p VALUE``/``-pVALUE`` after tools whose ``-p`` is
a password (mysql, mysqldump, mysqladmin, mariadb, sshpass; ``redis-cli -a``), ``curl -u user:pass`` /
``--user user:pass``, environment variables whose names mark them as secret, kubeconfig credentials
(``token``, ``client-key-data``, ``password``, exec ``env``), PEM private keys, credentials in URLs
(``https://user:pass@host``) and secret-named URL query parameters (``?token=…``, ``&api_key=…``,
``&X-Amz-Signature=…``), and well-known token shapes (AWS access key ids, GitHub/Slack tokens, JWTs).
Replaced values read ``<redacted>``; the key names stay so a reader sees what was there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

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
    """True when a variable/field/flag name marks its value as a secret (``DB_PASSWORD``, ``--token``,
    ``db_pass``, ``--passphrase``)."""
    n = name.strip().lstrip("-").lower()
    if any(n == x or n.endswith(x) for x in _NOT_SECRET):
        return False
    if n.endswith("_key") or n.endswith("-key") or n == "key":
        return True
    # "pass" as a word of the name (db_pass, --pass, DB-PASS, pass.word), not inside one (bypass, compass)
    if n in ("pass", "pw", "pwd") or n.endswith(("_pass", "-pass", ".pass", "_pw", "-pw")):
        return True
    if n.startswith(("pass_", "pass-", "pass.")) or "passphrase" in n:
        return True
    return any(w in n for w in _SECRET_WORDS)


# tools whose short option is a password: -p VALUE / -pVALUE (mysql: only the attached form is a
# password, but a separate word is redacted too: "mysql -p secret" is how people leak it)
_PASSWORD_SHORT_OPTS = {
    "mysql": "-p", "mysqldump": "-p", "mysqladmin": "-p", "mariadb": "-p", "mariadb-dump": "-p",
    "mysqlimport": "-p", "mysqlshow": "-p", "sshpass": "-p", "redis-cli": "-a", "keydb-cli": "-a",
}  # fmt: skip


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
    # secret-named URL query parameters: ?token=…, &api_key=…
    (re.compile(r"([?&;](" + _NAME + r")=)([^&#\s\"'<>]+)"), None),  # type: ignore[list-item]
    # curl -u user:pass, --user user:pass, --proxy-user user:pass
    (
        re.compile(
            r"(?i)((?:^|(?<=[\s\"']))(?:-u|--user|--proxy-user|-U)(?:=|[ \t]+)[\"']?[^\s:\"']*:)([^\s\"']+)"
        ),
        r"\1" + REDACTED,
    ),
    # tools whose -p/-a is a password: mysql -pSECRET, sshpass -p SECRET, redis-cli -a SECRET
    (
        re.compile(
            r"(?i)\b((?:" + "|".join(re.escape(t) for t in _PASSWORD_SHORT_OPTS) + r")\b[^\n|;&]*?\s-[pa])"
            r"([ \t]*)(?!-)(\S+)"
        ),
        None,  # type: ignore[list-item]
    ),
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


def _query_repl(m: re.Match[str]) -> str:
    if is_secret_name(m.group(2)) and not m.group(3).startswith("<redacted"):
        return m.group(1) + REDACTED
    return m.group(0)


def _tool_repl(m: re.Match[str]) -> str:
    tool = m.group(1).split()[0].lower().rsplit("/", 1)[-1]
    opt = _PASSWORD_SHORT_OPTS.get(tool)
    if opt is None or not m.group(1).lower().endswith(opt) or m.group(3).startswith("<redacted"):
        return m.group(0)
    return m.group(1) + m.group(2) + REDACTED


_FUNCS = {4: _query_repl, 6: _tool_repl, 7: _json_repl, 8: _flag_repl, 9: _kv_repl}


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


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with secret flag values (``--token X``, ``--password=X``, ``--pass X``,
    ``mysql -pX``, ``sshpass -p X``, ``curl -u user:X``) redacted."""
    argv = list(argv)
    out: list[str] = []
    hide_next = False
    user_next = False
    tool = argv[0].rsplit("/", 1)[-1].lower() if argv else ""
    short = _PASSWORD_SHORT_OPTS.get(tool)
    for a in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if user_next:
            user, colon, _ = a.partition(":")
            out.append(f"{user}:{REDACTED}" if colon else a)
            user_next = False
            continue
        if short is not None and a.startswith(short) and not a.startswith("--"):
            if a == short:
                hide_next = True
                out.append(a)
            else:
                out.append(short + REDACTED)
            continue
        if a in ("-u", "--user", "--proxy-user", "-U"):
            out.append(a)
            user_next = True
            continue
        if a.startswith("-"):
            name, eq, value = a.partition("=")
            if is_secret_name(name):
                if eq:
                    out.append(f"{name}={REDACTED}")
                else:
                    out.append(a)
                    hide_next = True
                continue
            if eq and name in ("--user", "--proxy-user") and ":" in value:
                out.append(f"{name}={value.partition(':')[0]}:{REDACTED}")
                continue
        out.append(redact_text(a))
    return out


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """An environment with the values of secret-named variables redacted (others scanned too)."""
    return {k: (REDACTED if is_secret_name(k) else redact_text(v)) for k, v in env.items()}
