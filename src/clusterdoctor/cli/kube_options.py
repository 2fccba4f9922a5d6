"""Checks of the Kubernetes-related options (pod list, procfs, URLs): one line and exit 2 on bad input."""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

from clusterdoctor.cli.common import EXIT_BAD_INPUT, CliExit


def check_http_url(flag: str, url: str) -> str:
    """``url`` when it is an http(s) URL with a host, else a one-line usage error."""
    p = urllib.parse.urlparse(url)
    if p.scheme not in ("http", "https") or not p.netloc:
        raise CliExit(
            EXIT_BAD_INPUT, f"error: {flag} {url!r}: not an http(s) URL (e.g. http://prometheus:9090)"
        )
    return url


def check_dir(flag: str, path: str) -> str:
    if not os.path.isdir(path):
        why = "not a directory" if os.path.exists(path) else "no such directory"
        raise CliExit(EXIT_BAD_INPUT, f"error: {flag} {path}: {why}")
    return path


def check_pods_file(path: Path) -> None:
    """A PodList that exists and parses (the parser's InputError is the one line)."""
    from clusterdoctor.errors import InputError
    from clusterdoctor.observe.control.kube_pods import parse_pod_index

    if not path.is_file():
        why = "is a directory" if path.is_dir() else "no such file"
        raise CliExit(EXIT_BAD_INPUT, f"error: --pods {path}: {why}")
    try:
        parse_pod_index(path.read_bytes(), str(path))
    except InputError as e:
        raise CliExit(EXIT_BAD_INPUT, f"error: --pods {e.one_line()}") from None
