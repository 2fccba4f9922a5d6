"""The fail-slow probe's outputs (:mod:`clusterdoctor.training.watch`): its ``/metrics`` server and its
JSON-lines file, each safe in a hostile place (issue 25).

- **Metrics server.** Binds ``127.0.0.1`` unless told otherwise (``bind=`` or
  ``$CLUSTERDOCTOR_WATCH_BIND``, e.g. ``0.0.0.0`` for Prometheus to scrape the pod), on the server
  stack of :mod:`clusterdoctor.serve.http` (one event loop reads every connection, a fixed pool of
  :data:`LIMITS` ``threads`` answers whole requests, deadlines for headers and requests, the oldest
  idle connections closed at the connection cap): 1,000 idle sockets cost sockets, not threads,
  and a scrape is still answered at once.
- **JSON lines.** The file is opened with ``O_NOFOLLOW`` and must be a regular file: a symlink (or a
  FIFO, a device) planted in a shared folder under the probe's file name is refused with a warning,
  never followed to a file outside the folder; training goes on.
"""

from __future__ import annotations

import json
import os
import stat
import statistics
import threading
import warnings
from collections.abc import Callable
from typing import Any

__all__ = [
    "BIND_ENV",
    "DIR_ENV",
    "LIMITS",
    "METRICS",
    "exposition_text",
    "WatchWarning",
    "open_append",
    "serve_metrics",
]

BIND_ENV = "CLUSTERDOCTOR_WATCH_BIND"
DIR_ENV = "CLUSTERDOCTOR_WATCH_DIR"
# the probe answers one scraper: small limits (threads handling requests; connections past the cap
# close the oldest idle ones; a request's headers within 5 s, the whole of it within 10 s)
LIMITS = {"threads": 2, "connections": 256, "max_body": 64 << 10, "header_timeout": 5.0,
          "read_timeout": 10.0, "idle_timeout": 30.0}  # fmt: skip


class WatchWarning(RuntimeWarning):
    """A probe problem that does not stop training (port in use, peer gone, file unwritable)."""


def _warn(msg: str) -> None:
    warnings.warn(f"clusterdoctor watch: {msg}", WatchWarning, stacklevel=3)


# --- /metrics -------------------------------------------------------------------------------------

METRICS: dict[str, tuple[str, str]] = {
    "clusterdoctor_watch_steps_total": ("counter", "Training steps completed by this rank."),
    "clusterdoctor_watch_step_seconds_total": ("counter", "Wall time of the completed steps."),
    "clusterdoctor_watch_own_seconds_total": (
        "counter",
        "Own work of each step, data wait included: until the rank entered its first collective (DDP), "
        "or the time outside collectives (FSDP, plain loops).",
    ),
    "clusterdoctor_watch_collective_seconds_total": (
        "counter",
        "Time from the first collective of each step until the last one completed (DDP), or inside "
        "collectives (FSDP, plain loops).",
    ),
    "clusterdoctor_watch_collective_wait_seconds_total": (
        "counter",
        "Time the last collective of each step took from its start (waiting for the other ranks).",
    ),
    "clusterdoctor_watch_data_wait_seconds_total": ("counter", "Time blocked in the wrapped data loader."),
    "clusterdoctor_watch_stall_seconds_total": (
        "counter",
        "Time the process did not run when it should have (frozen, CPU-throttled), seen by a heartbeat thread.",
    ),
    "clusterdoctor_watch_step": ("gauge", "Index of the last completed step."),
    "clusterdoctor_watch_last_step_timestamp_seconds": ("gauge", "Wall clock at the end of the last step."),
    "clusterdoctor_watch_start_time_seconds": ("gauge", "When this probe (process) started."),
    "clusterdoctor_watch_recent_step_seconds": ("gauge", "Quantiles of the wall time of the recent steps."),
    "clusterdoctor_watch_link_seconds": (
        "gauge",
        "Last timed transfer from a ring neighbour (peer_rank) to this rank, seconds.",
    ),
    "clusterdoctor_watch_exchange_ok": ("gauge", "1 while the ranks' exchange works, 0 after it failed."),
    "clusterdoctor_watch_job_slowest_rank": (
        "gauge",
        "The rank that entered its collectives last, in the last exchanged picture.",
    ),
    "clusterdoctor_watch_job_lateness_ratio": (
        "gauge",
        "How long the others waited for the slowest rank, as a fraction of the median step time.",
    ),
}


def _labels(**kv: str) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{k}="{esc(v)}"' for k, v in kv.items())


def _slowest(pic: dict[int, dict[str, float]]) -> tuple[int, float]:
    owns = {r: v["own"] for r, v in pic.items()}
    med_own = statistics.median(owns.values())
    med_wall = statistics.median(v["wall"] for v in pic.values()) or 1e-9
    slow = max(owns, key=lambda r: owns[r])
    return slow, max(0.0, owns[slow] - med_own) / med_wall


def exposition_text(
    lab: str,
    tot: dict[str, float],
    walls: list[float],
    last_t: float | None,
    started: float,
    step_index: int,
    links: dict[int, float],
    exchange_ok: float,
    pic: dict[int, dict[str, float]],
) -> str:
    """The probe's metrics in the Prometheus text format, from a snapshot of its state."""
    lines: list[str] = []

    def fam(name: str, samples: list[tuple[str, float]]) -> None:
        typ, help_ = METRICS[name]
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} {typ}")
        for extra, v in samples:
            lines.append(f"{name}{{{lab}{extra}}} {v!r}")

    fam("clusterdoctor_watch_steps_total", [("", tot["steps"])])
    fam("clusterdoctor_watch_step_seconds_total", [("", tot["wall"])])
    fam("clusterdoctor_watch_own_seconds_total", [("", tot["own"])])
    fam("clusterdoctor_watch_collective_seconds_total", [("", tot["coll"])])
    fam("clusterdoctor_watch_collective_wait_seconds_total", [("", tot["wait"])])
    fam("clusterdoctor_watch_data_wait_seconds_total", [("", tot["data"])])
    fam("clusterdoctor_watch_stall_seconds_total", [("", tot["stall"])])
    fam("clusterdoctor_watch_step", [("", float(step_index))])
    if last_t is not None:
        fam("clusterdoctor_watch_last_step_timestamp_seconds", [("", last_t)])
    fam("clusterdoctor_watch_start_time_seconds", [("", started)])
    if walls:
        qs = [(f',quantile="{q}"', walls[min(len(walls) - 1, int(q * len(walls)))]) for q in (0.5, 0.9)]
        fam("clusterdoctor_watch_recent_step_seconds", qs)
    if links:
        fam(
            "clusterdoctor_watch_link_seconds",
            [(f',peer_rank="{p}"', s) for p, s in sorted(links.items())],
        )
    fam("clusterdoctor_watch_exchange_ok", [("", exchange_ok)])
    if pic:
        slow, ratio = _slowest(pic)
        fam("clusterdoctor_watch_job_slowest_rank", [("", float(slow))])
        fam("clusterdoctor_watch_job_lateness_ratio", [("", ratio)])
    return "\n".join(lines) + "\n"


def serve_metrics(exposition: Callable[[], str], bind: str, port: int) -> Any:
    """Serve ``exposition()`` at ``/metrics`` (and ``/``) on ``bind:port`` in a daemon thread, on the
    server stack of :mod:`clusterdoctor.serve.http` with the probe's small limits; None with a
    warning when the address cannot be bound."""
    from clusterdoctor.serve.http import ServerLimits, make_server

    def app(environ: dict[str, Any], start: Any) -> list[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            body, code, ctype = b"method not allowed; GET /metrics\n", "405 Method Not Allowed", "text/plain"
        elif path not in ("/metrics", "/"):
            body, code, ctype = b"not found; try /metrics\n", "404 Not Found", "text/plain"
        else:
            body = exposition().encode("utf-8", "replace")
            code, ctype = "200 OK", "text/plain; version=0.0.4; charset=utf-8"
        start(code, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
        return [body]

    try:
        srv = make_server(app, bind, int(port), ServerLimits(**LIMITS))
    except (OSError, OverflowError, ValueError) as e:
        why = getattr(e, "strerror", None) or e
        _warn(f"metrics not served: cannot listen on {bind}:{port} ({why}); training goes on")
        return None
    threading.Thread(target=srv.serve_forever, name="clusterdoctor-watch-http", daemon=True).start()
    return srv


# --- JSON lines -----------------------------------------------------------------------------------


def open_append(path: str) -> Any:
    """``open(path, "a")`` that refuses a symlink (``O_NOFOLLOW``) and anything but a regular file
    (a FIFO is opened non-blocking, then refused): OSError naming the problem."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if os.path.islink(path):
            raise OSError(e.errno, "is a symlink (not followed)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


class _JsonlWriter:
    """Buffered JSON lines, flushed every ``every`` steps, rotated once at ``max_bytes``."""

    def __init__(self, watch: Any, path: str, max_bytes: int) -> None:
        self.watch = watch
        self.path = path
        self.max_bytes = max_bytes
        self.buf: list[str] = []
        self.lock = threading.Lock()
        self.f: Any = open_append(path)
        self.size = self.f.tell()
        self._header()

    @classmethod
    def open(cls, watch: Any, jsonl_dir: Any, max_bytes: int) -> _JsonlWriter | None:
        if jsonl_dir == "auto":
            jsonl_dir = os.environ.get(DIR_ENV) or None
        if jsonl_dir is None:
            return None
        d = os.fspath(jsonl_dir)
        try:
            os.makedirs(d, exist_ok=True)
            return cls(watch, os.path.join(d, f"watch-rank{watch.rank}.jsonl"), max_bytes)
        except OSError as e:
            _warn(f"JSON lines not written: {d}: {e.strerror or e}; training goes on")
            return None

    def _header(self) -> None:
        w = self.watch
        head = {
            "kind": "start",
            "v": 1,
            "job": w.job,
            "rank": w.rank,
            "local_rank": w.local_rank,
            "world_size": w.world_size,
            "host": w.host,
            "gpu": w.gpu,
            "nic": w.nic,
            "run": w.run_id,
            "t": round(w.started, 6),
        }
        self._write(json.dumps(head, separators=(",", ":")) + "\n")

    def step(
        self,
        step: int,
        t: float,
        wall: float,
        own: float,
        coll: float,
        wait: float,
        data: float,
        stall: float,
        io: int | None = None,
    ) -> None:
        extra = f',"io":{io}' if io is not None else ""
        self.buf.append(
            f'{{"kind":"step","step":{step},"t":{t:.6f},"wall":{wall:.6f},"own":{own:.6f},'
            f'"coll":{coll:.6f},"wait":{wait:.6f},"data":{data:.6f},"stall":{stall:.6f}{extra}}}\n'
        )
        if len(self.buf) >= self.watch.every:
            self.flush()

    def link(self, src: int, dst: int, nbytes: int, seconds: float, t: float) -> None:
        line = json.dumps(
            {"kind": "link", "src": src, "dst": dst, "bytes": nbytes, "s": round(seconds, 6), "t": t}
        )
        with self.lock:
            self.buf.append(line + "\n")

    def flush(self) -> None:
        with self.lock:
            text, self.buf = "".join(self.buf), []
        if text:
            self._write(text)

    def _write(self, text: str) -> None:
        if self.f is None:
            return
        try:
            if self.size + len(text) > self.max_bytes and self.size > 0:
                self.f.close()
                os.replace(self.path, self.path[: -len(".jsonl")] + ".1.jsonl")
                self.f = open_append(self.path)
                self.size = 0
                self._header()
            self.f.write(text)
            self.f.flush()
            self.size += len(text)
        except OSError as e:
            _warn(f"JSON lines stopped: {self.path}: {e.strerror or e}; training goes on")
            try:
                self.f.close()
            except OSError:
                pass
            self.f = None

    def close(self) -> None:
        self.flush()
        if self.f is not None:
            try:
                self.f.close()
            except OSError:
                pass
            self.f = None
