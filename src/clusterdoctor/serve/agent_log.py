"""Structured logs for the agent: one line per event, logfmt (``ts=… level=… msg=… key=value``) or
JSON, at or above ``--log-level`` (debug, info, warn, error), on stderr. The clock is injected."""

from __future__ import annotations

import datetime as _dt
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

__all__ = ["LEVELS", "Logger"]

LEVELS = {"debug": 10, "info": 20, "warn": 30, "error": 40}


def _logfmt_value(v: Any) -> str:
    s = str(v)
    if s and all(c.isalnum() or c in "-._/:@+" for c in s):
        return s
    return json.dumps(s, ensure_ascii=False)


class Logger:
    """``log.info("msg", key=value, …)``; ``fmt`` is ``logfmt`` or ``json``."""

    def __init__(
        self,
        level: str = "info",
        fmt: str = "logfmt",
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if level not in LEVELS:
            raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
        if fmt not in ("logfmt", "json"):
            raise ValueError(f"log format {fmt!r} is not logfmt or json")
        self.level, self.fmt, self.clock = LEVELS[level], fmt, clock
        self.stream = stream
        self._lock = threading.Lock()

    def log(self, level: str, msg: str, **kv: Any) -> None:
        if LEVELS[level] < self.level:
            return
        ts = _dt.datetime.fromtimestamp(self.clock(), _dt.timezone.utc).isoformat(timespec="milliseconds")
        rec = {"ts": ts.replace("+00:00", "Z"), "level": level, "msg": msg, **kv}
        if self.fmt == "json":
            line = json.dumps(rec, ensure_ascii=False, default=str)
        else:
            line = " ".join(f"{k}={_logfmt_value(v)}" for k, v in rec.items())
        stream = self.stream or sys.stderr
        with self._lock:
            stream.write(line.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")
            stream.flush()

    def debug(self, msg: str, **kv: Any) -> None:
        self.log("debug", msg, **kv)

    def info(self, msg: str, **kv: Any) -> None:
        self.log("info", msg, **kv)

    def warn(self, msg: str, **kv: Any) -> None:
        self.log("warn", msg, **kv)

    def error(self, msg: str, **kv: Any) -> None:
        self.log("error", msg, **kv)
