"""The Prometheus client options that every ``--prometheus`` command takes (``diagnose``, ``gpu
health``, ``watch``): one definition, so the three commands cannot drift apart.

A bearer token read from a file (never from the command line, where ``ps`` shows it), a CA bundle
for a server with its own certificate authority, and extra headers (a Cortex/Mimir tenant's
``X-Scope-OrgID``). Basic auth stays in the URL (``https://user:pass@host``), redacted in reports.
"""

from __future__ import annotations

from typing import Any

import typer

BEARER_TOKEN_FILE: Any = typer.Option(
    None, "--bearer-token-file", help="With --prometheus: send `Authorization: Bearer <file content>`."
)
CA_FILE: Any = typer.Option(
    None, "--ca-file", help="With --prometheus: CA bundle (PEM) that signed the server's certificate."
)
HEADER: Any = typer.Option(
    None,
    "--header",
    help="With --prometheus: an extra request header 'Name: value' (repeatable; X-Scope-OrgID).",
)


def prom_auth(bearer_token_file: str | None, ca_file: str | None, header: list[str] | None) -> Any:
    """A checked :class:`~clusterdoctor.observe.prom_auth.PromAuth`, or None when no option is given.
    Checked now (token file, CA bundle, header syntax): a bad one is one line and exit 2 before any
    query is sent."""
    if not (bearer_token_file or ca_file or header):
        return None
    from clusterdoctor.observe.prom_auth import PromAuth

    auth = PromAuth(bearer_token_file, ca_file, list(header or []))
    auth.http_headers(), auth.ssl_context()
    return auth
