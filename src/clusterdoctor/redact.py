"""Redact secrets from anything clusterdoctor collects or prints: logs, command lines, environments,
configs, JSON documents, URLs.

Covered: HTTP credential headers (``Authorization``/``Proxy-Authorization`` with any scheme, ``Cookie``,
``X-Api-Key``, ``X-Auth-Token``, ...), ``token``/``password``/``pass``/``passphrase``/``secret``/
``key``-like fields in ``key=value``, ``key: value`` and JSON ``"key": "value"`` forms (``DB_PASS=…``,
``db_pass: …``, ``AccountKey=…``, ``accessKey: …``), command-line flags (``--token X``, ``--password=X``,
``--db-pass=X``, ``--pass X``, ``--passphrase=X``), ``-p VALUE``/``-pVALUE`` after tools whose ``-p`` is
a password (mysql and friends, sshpass, mongo, ``docker login``; ``redis-cli -a``), ``curl -u
user:pass`` / ``--user user:pass``, environment variables whose names mark them as secret, Kubernetes
``env`` pairs (``name: DB_PASSWORD`` / ``value: …``), kubeconfig credentials (``token``,
``client-key-data``, ``password``, ``id-token``, ``refresh-token``), PEM private keys (any kind, also
inside JSON strings), credentials in URLs (``https://user:pass@host``) and secret-named URL query
parameters (``?token=…``, ``&api_key=…``, ``&X-Amz-Signature=…``, ``&sig=…``), and well-known token
shapes (AWS and Alibaba access key ids, Google API keys and OAuth tokens, GitHub, GitLab, Slack, Stripe,
OpenAI, Hugging Face, npm and PyPI tokens, Slack webhooks, JWTs). Replaced values read ``<redacted>``;
the key names stay so a reader sees what was there.

Every pattern runs in time linear in the text (no nested or overlapping quantifiers; the URL and
tool scans are done with ``str.find`` and bounded matches): an 80 KB line costs milliseconds.

:func:`redact_bytes` understands the format it edits: a JSON document (or JSON lines) is redacted
value by value — strings decoded, redacted, encoded again — so that it stays valid JSON whatever the
secret held (escaped quotes, ``"--password=\\"X\\""``), a value under a secret-named key is replaced,
argument lists (``["--token", "X"]``) are redacted as command lines, and a string that is itself a
JSON document (``last-applied-configuration``) is redacted as one. Other text goes through
:func:`redact_text`. :func:`redact_urls` removes only URL credentials (for reports and error lines).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable

__all__ = [
    "REDACTED",
    "is_secret_name",
    "redact_argv",
    "redact_bytes",
    "redact_env",
    "redact_json_text",
    "redact_text",
    "redact_urls",
]

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
    "accountkey",
    "private_key",
    "private-key",
    "privatekey",
    "client-key",
    "client_key",
    "credential",
    "cookie",
    "signature",
)
_SECRET_EXACT = (
    "pass",
    "pw",
    "pwd",
    "key",
    "sig",
    "passin",
    "passout",
    "otp",
    "authorization",
    "proxy-authorization",
)
_NOT_SECRET = ("author", "authority", "oauth_scope", "tokenizer", "max_tokens", "certificate-authority")
# secret only as a JSON key (docker's config.json "auths": {"registry": {"auth": "<base64 user:pass>"}});
# in text, "auth: ..." is a log subsystem (etcd's capnslog)
_JSON_SECRET_KEYS = frozenset({"auth", "identitytoken", "registrytoken"})
_CAMEL_KEY = re.compile(r"[a-z0-9]Key$")  # accessKey, AccountKey, sharedAccessKey, apiKey


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True when a variable/field/flag name marks its value as a secret (``DB_PASSWORD``, ``--token``,
    ``db_pass``, ``--passphrase``, ``AccountKey``)."""
    raw = name.strip().lstrip("-")
    n = raw.lower()
    if any(n == x or n.endswith(x) for x in _NOT_SECRET):
        return False
    if n.endswith("_key") or n.endswith("-key") or n.endswith(".key") or n in _SECRET_EXACT:
        return True
    if _CAMEL_KEY.search(raw):
        return True
    # "pass" as a word of the name (db_pass, --pass, DB-PASS, pass.word), not inside one (bypass, compass)
    if n.endswith(("_pass", "-pass", ".pass", "_pw", "-pw")):
        return True
    if n.startswith(("pass_", "pass-", "pass.")) or "passphrase" in n:
        return True
    return any(w in n for w in _SECRET_WORDS)


# tools whose short option is a password: -p VALUE / -pVALUE (mysql: only the attached form is a
# password, but a separate word is redacted too: "mysql -p secret" is how people leak it)
_PASSWORD_SHORT_OPTS = {
    "mysql": "-p", "mysqldump": "-p", "mysqladmin": "-p", "mariadb": "-p", "mariadb-dump": "-p",
    "mysqlimport": "-p", "mysqlshow": "-p", "sshpass": "-p", "redis-cli": "-a", "keydb-cli": "-a",
    "mongo": "-p", "mongosh": "-p", "docker login": "-p", "podman login": "-p", "nerdctl login": "-p",
}  # fmt: skip

_NAME = r"[A-Za-z0-9_.\-]"  # one character of a key name; patterns say how many
# a quoted value, with backslash escapes, on one line (the alternatives never overlap: linear)
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'"
_HEADERS = (
    r"(?:proxy-)?authorization|cookie|set-cookie|x-api-key|api-key|x-auth-token|x-vault-token|"
    r"private-token|x-amz-security-token|x-goog-api-key|ocp-apim-subscription-key"
)
_AUTH_SCHEME = re.compile(r"(?i)(?:bearer|basic|token|digest|negotiate|aws4-hmac-sha256|sharedkey)[ \t]+")

# Every name is_secret_name accepts holds one of these (lower case): a text without any skips the
# patterns that judge names
_NAME_HINTS = ("pass", "pw", "secret", "token", "key", "sig", "otp", "auth", "cred", "cookie")

# (pattern, replacement or the name of a function in _FUNCS, literals one of which the lower-cased text
# must hold for the pattern to run, lower-cased once below)
_PATTERNS: list[tuple[re.Pattern[str], str, tuple[str, ...]]] = [
    # PEM private keys (whole block; the END is looked for once, not per character)
    (
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)", re.S
        ),
        r"-----BEGIN \1-----" + REDACTED + r"-----END \1-----",
        ("-----BEGIN ",),
    ),
    # credential headers: the whole value (after its scheme word), to the end of the line or quote
    (
        re.compile(r"(?i)(?<![\w-])(" + _HEADERS + r")([ \t]*[:=][ \t]*)([^\r\n\"']+)"),
        "header",
        ("authorization", "cookie", "key", "token"),
    ),
    (re.compile(r"(?i)\b(bearer[ \t]+)[A-Za-z0-9\-._~+/]{8,}=*"), r"\1" + REDACTED, ("bearer",)),
    # secret-named URL query parameters: ?token=…, &api_key=…, &sig=…
    (_QUERY := re.compile(r"([?&;](" + _NAME + r"+)=)([^&#\s\"'<>]+)"), "query", _NAME_HINTS),
    # curl -u user:pass, --user user:pass, --proxy-user user:pass
    (
        re.compile(
            r"(?i)((?:^|(?<=[\s\"']))(?:-u|--user|--proxy-user|-U)(?:=|[ \t]+)[\"']?[^\s:\"']*:)([^\s\"']+)"
        ),
        r"\1" + REDACTED,
        ("-u",),
    ),
    # Kubernetes env pairs in YAML: "- name: DB_PASSWORD" then "value: X" on the next line
    (
        re.compile(
            r"(?m)^([ \t]*(?:-[ \t]*)?name:[ \t]*[\"']?)("
            + _NAME
            + r"+)([\"']?[ \t]*\r?\n[ \t]*value:[ \t]*)"
            r"([^\r\n]+)"
        ),
        "envpair",
        _NAME_HINTS,
    ),
    # JSON "key": "value" (text that is not a whole JSON document: a log line, a fragment)
    (re.compile(r'(?i)("(' + _NAME + r'+)"[ \t]*:[ \t]*")((?:[^"\\]|\\.)*)(")'), "json", _NAME_HINTS),
    # --flag=value / --flag value
    (
        re.compile(
            r"(?i)(?:^|(?<=[\s\"']))(--?(" + _NAME + r"+)(?:=|[ \t]+))(?!-)(" + _QUOTED + r"|[^\s\"']+)"
        ),
        "flag",
        _NAME_HINTS,
    ),
    # key=value, key: value (env files, logfmt, YAML, kubeconfig, connection strings)
    (
        re.compile(r"(?im)(^|[\s,;{(])(" + _NAME + r"+)([ \t]*[:=][ \t]*)(" + _QUOTED + r"|[^\s,;\"'}]+)"),
        "kv",
        _NAME_HINTS,
    ),
    # token shapes
    (
        re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b"),
        REDACTED,
        ("AKIA", "ASIA", "AGPA", "AIDA", "AROA"),
    ),
    (re.compile(r"\bLTAI[0-9A-Za-z]{12,20}\b"), REDACTED, ("LTAI",)),  # Alibaba Cloud AccessKey id
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), REDACTED, ("AIza",)),  # Google API key
    (re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}"), REDACTED, ("ya29.",)),  # Google OAuth access token
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), REDACTED, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}\b"), REDACTED, ("github_pat_",)),
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}\b"), REDACTED, ("glpat-",)),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"), REDACTED, ("xox",)),
    (
        re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+"),
        "https://hooks.slack.com/services/" + REDACTED,
        ("hooks.slack.com",),
    ),
    (re.compile(r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}\b"), REDACTED, ("k_live_", "k_test_")),  # Stripe
    (re.compile(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{32,}"), REDACTED, ("sk-",)),  # OpenAI
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), REDACTED, ("hf_",)),  # Hugging Face
    (re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), REDACTED, ("npm_",)),
    (re.compile(r"\bpypi-[A-Za-z0-9_\-]{50,}"), REDACTED, ("pypi-",)),
    (
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"),
        REDACTED,
        ("eyJ",),
    ),  # JWT
]


_PATTERNS = [(p, r, tuple(w.lower() for w in needs)) for p, r, needs in _PATTERNS]


def _json_key_is_secret(key: str) -> bool:
    return is_secret_name(key) or key.lower() in _JSON_SECRET_KEYS


def _json_repl(m: re.Match[str]) -> str:
    if _json_key_is_secret(m.group(2)) and m.group(3):
        return m.group(1) + REDACTED + m.group(4)
    return m.group(0)


def _flag_repl(m: re.Match[str]) -> str:
    if is_secret_name(m.group(2)) and not m.group(3).startswith(REDACTED):
        return m.group(1) + REDACTED
    return m.group(0)


_HEADER_NAMES = frozenset(_HEADERS.replace("(?:proxy-)?", "").split("|")) | {"proxy-authorization"}


def _kv_repl(m: re.Match[str]) -> str:
    val = m.group(4)
    if m.group(2).lower() in _HEADER_NAMES and _AUTH_SCHEME.match(val + " "):
        return m.group(0)  # "Authorization: Bearer <redacted>": the header pattern has judged it
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


def _header_repl(m: re.Match[str]) -> str:
    value = m.group(3)
    scheme = _AUTH_SCHEME.match(value)
    keep = scheme.group(0) if scheme else ""
    if value[len(keep) :].startswith(REDACTED) or not value[len(keep) :].strip():
        return m.group(0)
    return m.group(1) + m.group(2) + keep + REDACTED


def _envpair_repl(m: re.Match[str]) -> str:
    val = m.group(4).strip()
    if is_secret_name(m.group(2)) and val not in ("", '""', "''") and not val.startswith(REDACTED):
        return m.group(1) + m.group(2) + m.group(3) + REDACTED
    return m.group(0)


_FUNCS = {"json": _json_repl, "flag": _flag_repl, "kv": _kv_repl, "query": _query_repl,
          "header": _header_repl, "envpair": _envpair_repl}  # fmt: skip


# --- URLs: found with str.find, each authority read once -------------------------------------------

_SCHEME_TAIL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,31}\Z")
_AUTHORITY = re.compile(r"[^/\s\"'<>]*")


def _url_userinfo(text: str) -> str:
    """``scheme://user:PASSWORD@host`` with the password redacted, in every URL of ``text``."""
    i = text.find("://")
    if i < 0:
        return text
    out: list[str] = []
    last = 0
    while i >= 0:
        start = i + 3
        end = _AUTHORITY.match(text, start).end()  # type: ignore[union-attr]
        at = text.rfind("@", start, end)
        if at > start and _SCHEME_TAIL.search(text, max(0, i - 32), i):
            colon = text.find(":", start, at)
            if 0 <= colon < at - 1 and not text.startswith(REDACTED, colon + 1):
                out.append(text[last : colon + 1])
                out.append(REDACTED)
                last = at
        i = text.find("://", max(end, start))
    out.append(text[last:])
    return "".join(out)


def redact_urls(text: str) -> str:
    """Credentials removed from every URL in ``text`` (``user:<redacted>@``, secret-named query
    parameters): what reports and error lines apply to the URLs they print."""
    out = _url_userinfo(text)
    return _QUERY.sub(_query_repl, out) if "=" in out else out


# --- tools whose -p/-a is a password: scanned per command segment ----------------------------------

_TOOL = re.compile(
    r"(?i)(?<![\w.-])("
    + "|".join(
        re.escape(t).replace(r"\ ", r"[ \t]+") for t in sorted(_PASSWORD_SHORT_OPTS, key=len, reverse=True)
    )
    + r")(?![\w-])"
)
_SEGMENT_END = re.compile(r"[\n|;&]")
_SHORT = {opt: re.compile(r"(\s" + re.escape(opt) + r")([ \t]*)(?!-)(\S+)") for opt in ("-p", "-a")}


def _short_repl(m: re.Match[str]) -> str:
    if m.group(3).startswith(REDACTED):
        return m.group(0)
    return m.group(1) + m.group(2) + REDACTED


def _redact_tools(text: str) -> str:
    """``mysql -pSECRET``, ``sshpass -p SECRET``, ``redis-cli -a SECRET``: the option's value after its
    tool, in the same command (up to a newline, ``|``, ``;`` or ``&``). Each stretch of text between
    two tool names is scanned once."""
    m = _TOOL.search(text)
    if m is None:
        return text
    out: list[str] = []
    pos = 0
    seg_end = -1
    while m is not None:
        if m.start() >= seg_end:
            e = _SEGMENT_END.search(text, m.end())
            seg_end = e.start() if e else len(text)
        nxt = _TOOL.search(text, m.end(), seg_end) if m.end() < seg_end else None
        stop = nxt.start() if nxt else seg_end
        tool = re.sub(r"[ \t]+", " ", m.group(1).lower())
        out.append(text[pos : m.end()])
        out.append(_SHORT[_PASSWORD_SHORT_OPTS[tool]].sub(_short_repl, text[m.end() : stop]))
        pos = stop
        m = nxt if nxt is not None else _TOOL.search(text, seg_end)
    out.append(text[pos:])
    return "".join(out)


def redact_text(text: str) -> str:
    """Text with every recognised secret value replaced by ``<redacted>`` (linear in its length)."""
    out = _url_userinfo(text)
    out = _redact_tools(out)
    low = out.lower()
    for pat, repl, needs in _PATTERNS:
        if not any(w in low for w in needs):
            continue  # none of the literals a match needs: the pattern cannot match
        fn = _FUNCS.get(repl)
        new = pat.sub(fn if fn is not None else repl, out)
        if new is not out and new != out:
            out, low = new, new.lower()
    return out


# --- JSON, value by value ---------------------------------------------------------------------------

_JSON_TOKEN = re.compile(r'[ \t\r\n]+|"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
_JSON_BARE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\Z|true\Z|false\Z|null\Z|NaN\Z|-?Infinity\Z")
_MAX_JSON_NESTING = 4  # JSON documents inside JSON strings, redacted as documents this deep


class _NotJson(Exception):
    pass


def redact_json_text(text: str, _level: int = 0) -> str | None:
    """A JSON document (or several: JSON lines) with its secrets redacted value by value, formatting
    kept; None when ``text`` is not JSON (see the module docstring)."""
    try:
        return _redact_json_tokens(text, _level)
    except _NotJson:
        return None


def _redact_json_tokens(text: str, level: int) -> str:
    out: list[str] = []
    # one frame per open container: [kind, key of the value to come / argv state]
    stack: list[list[object]] = []
    pos, n = 0, len(text)
    expect_key = False
    secret_value = False  # the next value is under a secret-named key
    while pos < n:
        m = _JSON_TOKEN.match(text, pos)
        if m is None:
            raise _NotJson
        tok = m.group(0)
        pos = m.end()
        c = tok[0]
        if c in " \t\r\n" or c == ":":
            out.append(tok)
            continue
        if c in "{[":
            # an object: [kind, key of the value to come, name of an env-style pair, -];
            # a list: [kind, -, its first string (the program of a command line), hide next element]
            stack.append([c, None, None, False])
            expect_key = c == "{"
            secret_value = False  # a secret-named key holding a container: its insides are judged
            out.append(tok)
            continue
        if c in "}]":
            if not stack or stack[-1][0] != ("{" if c == "}" else "["):
                raise _NotJson
            stack.pop()
            out.append(tok)
            expect_key = False
            continue
        if c == ",":
            out.append(tok)
            expect_key = bool(stack) and stack[-1][0] == "{"
            continue
        if c == '"':
            try:
                s = json.loads(tok)
            except ValueError:
                raise _NotJson from None
            if expect_key and stack:
                stack[-1][1] = s
                secret_value = _json_key_is_secret(s)
                expect_key = False
                out.append(tok)
                continue
            out.append(_redact_json_string(s, tok, stack[-1] if stack else None, secret_value, level))
            secret_value = False
            continue
        if not _JSON_BARE.match(tok):
            raise _NotJson
        out.append(json.dumps(REDACTED) if secret_value and tok not in ("true", "false", "null") else tok)
        secret_value = False
    if stack:
        raise _NotJson
    return "".join(out)


def _redact_json_string(s: str, tok: str, frame: list[object] | None, secret_value: bool, level: int) -> str:
    """One string value: replaced under a secret-named key or after a secret flag in an argument
    list, redacted as a JSON document or as text otherwise; encoded again (valid JSON)."""
    if secret_value and s and not s.startswith(REDACTED):
        return json.dumps(REDACTED)
    if frame is not None and frame[0] == "{" and frame[1] == "value" and isinstance(frame[2], str):
        if is_secret_name(frame[2]) and s:  # {"name": "DB_PASSWORD", "value": "…"}
            return json.dumps(REDACTED)
    if frame is not None and frame[0] == "{" and frame[1] in ("name", "key"):
        frame[2] = s  # the name of an env-style pair, for its "value"
    if frame is not None and frame[0] == "[":
        new = _argv_element(frame, s)
        if new is not None:
            return json.dumps(new)
    if _MAYBE_SECRET.search(s) is None:
        return tok
    stripped = s.lstrip()
    if level < _MAX_JSON_NESTING and stripped[:1] in ("{", "["):
        inner = redact_json_text(s, level + 1)
        if inner is not None:
            return tok if inner == s else json.dumps(inner)
    red = redact_text(s)
    return tok if red == s else json.dumps(red)


def _argv_element(frame: list[object], s: str) -> str | None:
    """An element of a list of strings read as a command line (``["--token", "X"]``,
    ``["mysql", "-p", "X"]``): REDACTED for a secret flag's value, else None (redacted as text)."""
    if frame[3]:
        frame[3] = False
        return REDACTED if s else None
    if frame[2] is None:  # the first element: the program, whose -p may be a password
        frame[2] = s.rsplit("/", 1)[-1].lower()
    elif s == _PASSWORD_SHORT_OPTS.get(str(frame[2])):
        frame[3] = True
    elif s.startswith("-") and "=" not in s and s.strip("-") and is_secret_name(s):
        frame[3] = True
    return None


# a string that no pattern could change: none of these characters or token prefixes
_MAYBE_SECRET = re.compile(
    r"[:=/@?&;\-]|AKIA|ASIA|AGPA|AIDA|AROA|LTAI|AIza|ya29|gh[pousr]_|github_pat|glpat|xox|[sr]k_|hf_|npm_|"
    r"eyJ|(?i:bearer|basic|token)"
)


def redact_bytes(data: bytes) -> bytes:
    """A collected file with its secrets redacted, in its own format: a JSON document or JSON lines
    value by value (still valid JSON), other text by :func:`redact_text` (a JSON line inside a log
    is redacted as JSON). Decoded as UTF-8 with replacement where needed."""
    text = data.decode("utf-8", errors="replace")
    if text.lstrip()[:1] in ("{", "["):
        whole = redact_json_text(text)
        if whole is not None:
            return whole.encode("utf-8")
    if '{"' not in text:
        return redact_text(text).encode("utf-8")
    # a log holding JSON lines among text lines: each JSON line as JSON, the runs between as text
    out: list[str] = []
    run: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.lstrip()[:1] == "{":
            red = redact_json_text(line)
            if red is not None:
                if run:
                    out.append(redact_text("".join(run)))
                    run = []
                out.append(red)
                continue
        run.append(line)
    if run:
        out.append(redact_text("".join(run)))
    return "".join(out).encode("utf-8")


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with secret flag values (``--token X``, ``--password=X``, ``--pass X``,
    ``mysql -pX``, ``sshpass -p X``, ``curl -u user:X``) redacted."""
    argv = list(argv)
    out: list[str] = []
    hide_next = False
    user_next = False
    tool = argv[0].rsplit("/", 1)[-1].lower() if argv else ""
    if tool in ("docker", "podman", "nerdctl") and len(argv) > 1 and argv[1] == "login":
        tool = f"{tool} login"
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
