"""Starting or joining a Ray cluster for ``--ray`` (``comm analyze``, ``sim compare``), never implicitly.

Ray is the ``sim`` extra. Starting a local one costs seconds to a minute of CPU (GCS, raylet, workers)
and, on a loaded machine, can fail outright: Ray gives its raylet 30 s to register and then raises
"The current node timed out during startup". Either failure is an :class:`InputError` naming
``--ray`` in one line, which the CLI prints and exits 2 with; never a traceback or exit 70.
"""

from __future__ import annotations

from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["start_ray", "stop_ray"]


def start_ray(
    address: str | None = None, num_cpus: int | None = None, option: str = "--ray"
) -> tuple[Any, bool]:
    """``(ray, started_here)``: the ``ray`` module, connected to ``address`` (``ray://…``, ``auto``) or a
    local cluster of ``num_cpus``; ``started_here`` says the caller should :func:`stop_ray` it."""
    try:
        import ray
    except ImportError:
        raise InputError(
            "needs Ray (pip install 'clusterdoctor[sim]'); leave it out for local processes", option
        ) from None
    if ray.is_initialized():
        return ray, False
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if address:
        unreachable = _unreachable(address)
        if unreachable:
            raise InputError(
                f"the Ray cluster at {address} is not reachable ({unreachable}); "
                f"leave out {option} for local processes",
                option,
            )
        kw["address"] = address
    elif num_cpus:
        kw["num_cpus"] = num_cpus
    import logging
    import warnings

    quiet = logging.getLogger("ray")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # Ray's INFO lines and connection warnings: the one line below says it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ray.init(**kw)
    except Exception as e:  # Ray raises bare Exception, ConnectionError, RuntimeError, TimeoutError
        why = " ".join(str(e).split())[:200] or type(e).__name__
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        try:
            ray.shutdown()  # what did start (a GCS without its raylet) is stopped
        except Exception:
            pass
        raise InputError(
            f"{where} did not start: {why}; leave out {option} for local processes", option
        ) from None
    finally:
        quiet.setLevel(level)
    return ray, True


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` or ``ray://host:port`` address; None for ``auto``/``local``
    or anything without a port (Ray resolves those itself)."""
    rest = address.split("://", 1)[1] if "://" in address else address
    rest = rest.split("/", 1)[0]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


def _unreachable(address: str, timeout: float = 5.0) -> str | None:
    """Why nothing answers on the address's port (one TCP connect), or None. Without this, Ray retries
    an unreachable GCS for about a minute before it says so."""
    hp = _host_port(address)
    if hp is None:
        return None
    import socket

    try:
        with socket.create_connection(hp, timeout=timeout):
            return None
    except OSError as e:
        return e.strerror or type(e).__name__


def stop_ray(ray: Any, started_here: bool) -> None:
    if started_here:
        try:
            ray.shutdown()
        except Exception:
            pass
