"""Communication inputs read in parallel (``comm analyze --workers N`` or ``--ray``), each file once.

The driver only walks the paths and reads each file's head to sort it (:func:`discover_comm_inputs`);
the recognised files are cut into contiguous shares of about equal bytes, one per worker. Each worker
parses its share and sends back, per file, the parsed observations (a Kineto trace as its compact
arrays, a few percent of the JSON's bytes) and the fail-slow summary (step records or a Flight Recorder
collective log, computed there from the parsed trace). The driver merges them in file order — what
:func:`load_comm_observations` would have loaded — and runs the analyses once, on them.

Where the workers find the files: local processes and a local Ray cluster read the paths (same
machine). With a Ray ``address`` the workers may be on other machines without this filesystem, so the
driver ships each share's bytes through the object store (``ship_bytes``; it reads them, it does not
parse them) and the worker spills them to a private temporary folder under the same file name;
reports, warnings and step records name the driver's paths.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.sources import (
    InputFile,
    _load_file,
    discover_comm_inputs,
    empty_observations,
    finish_comm_observations,
)

__all__ = ["load_comm_parallel", "load_share", "split_shares"]

# (path, kinds, the file's bytes when shipped)
ShareItem = tuple[str, tuple[str, ...], "bytes | None"]
# (observation lists, (reason, path) per file that failed, fail-slow results per file)
ShareResult = tuple[dict[str, list[Any]], list[tuple[str, str]], list[tuple[str, Any, Any, list[str]]]]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def split_shares(
    items: Sequence[InputFile], n: int, sizes: Sequence[int] | None = None
) -> list[list[InputFile]]:
    """At most ``n`` contiguous, non-empty shares of ``items`` of about equal total bytes (``sizes``:
    the files' sizes, read when not given)."""
    if not items:
        return []
    n = max(1, min(n, len(items)))
    sizes = [max(1, s) for s in (sizes if sizes is not None else [_size(i.path) for i in items])]
    per = sum(sizes) / n
    shares: list[list[InputFile]] = [[]]
    acc = 0
    for item, sz in zip(items, sizes):
        if shares[-1] and len(shares) < n and acc >= per * len(shares):
            shares.append([])
        shares[-1].append(item)
        acc += sz
    return shares


def _fail_slow(
    path: str, out: dict[str, list[Any]], before: dict[str, int]
) -> list[tuple[str, Any, Any, list[str]]]:
    """The step summary of what one file just added (as :func:`steps_from_loaded` makes it)."""
    from clusterdoctor.observe.comm.flight_recorder import FrDump
    from clusterdoctor.observe.watch.traces import RankIdentity, fr_collectives, steps_from_kineto

    got: list[tuple[str, Any, Any, list[str]]] = []
    for tr in out["kineto"][before["kineto"] :]:
        r, i, w = steps_from_kineto(tr)
        got.append((path, r, i, w))
    for fr in out["flight_recorder"][before["flight_recorder"] :]:
        if isinstance(fr, FrDump):
            log, w = fr_collectives(fr)
            ident = RankIdentity(job="flight-recorder", rank=log.rank, run=path) if log else None
            got.append((path, log if log is not None else [], ident, w))
    return got


def _rename(out: dict[str, list[Any]], before: dict[str, int], local: str, path: str) -> None:
    """A spilled file's observations name the driver's path, not the worker's temporary one."""
    for k, items in out.items():
        for j in range(before[k], len(items)):
            v = items[j]
            if isinstance(v, str):
                items[j] = v.replace(local, path)
            elif isinstance(v, tuple):
                items[j] = tuple(x.replace(local, path) if isinstance(x, str) else x for x in v)
            else:
                if getattr(v, "path", None) == local:
                    try:
                        v.path = path
                    except (AttributeError, TypeError):
                        pass
                ws = getattr(v, "warnings", None)
                if isinstance(ws, list):
                    ws[:] = [w.replace(local, path) if isinstance(w, str) else w for w in ws]


def load_share(share: Sequence[ShareItem]) -> ShareResult:
    """Worker: parse one share of files (paths, or bytes shipped by the driver), in order."""
    out = empty_observations()
    problems: list[tuple[str, str]] = []
    steps: list[tuple[str, Any, Any, list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="cd-share-") as tmp:
        for k, (path, kinds, data) in enumerate(share):
            local = path
            if data is not None:
                d = os.path.join(tmp, str(k))
                os.mkdir(d)
                local = os.path.join(d, os.path.basename(path) or "input")
                with open(local, "wb") as f:
                    f.write(data)
            before = {key: len(v) for key, v in out.items()}
            try:
                _load_file(local, kinds, out)
            except InputError as e:
                for key, v in out.items():  # nothing of a file that failed half way
                    del v[before[key] :]
                problems.append((e.reason, path))
                continue
            if local != path:
                _rename(out, before, local, path)
            steps.extend(_fail_slow(path, out, before))
    return out, problems, steps


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _with_ray(
    shares: list[list[ShareItem]], address: str | None, workers: int | None, ship: bool
) -> list[ShareResult]:
    from clusterdoctor.ray_cluster import start_ray, stop_ray

    ray, mine = start_ray(address, workers)
    try:
        remote = ray.remote(load_share)
        refs = []
        for share in shares:
            if ship:
                share = [(p, k, _read(p)) for p, k, _ in share]
            refs.append(remote.remote(share))
        return list(ray.get(refs))
    finally:
        stop_ray(ray, mine)


def load_comm_parallel(
    paths: Iterable[str | os.PathLike[str]],
    workers: int | None = None,
    use_ray: bool = False,
    ray_address: str | None = None,
    ship_bytes: bool | None = None,
) -> tuple[dict[str, Any], list[tuple[str, Any, Any, list[str]]]]:
    """``(observations, fail-slow results)``: what :func:`load_comm_observations` returns and, per
    trace or dump, what :func:`clusterdoctor.observe.watch.traces.join_step_sources` takes.

    ``workers``: local processes (default: the CPUs); ``use_ray``: tasks on a Ray cluster
    (``ray_address``, else a local one of ``workers`` CPUs). ``ship_bytes`` (default: with an address)
    sends the files' bytes to the workers instead of their paths."""
    given = list(paths)
    inputs = discover_comm_inputs(given)
    order = {i.path: k for k, i in enumerate(inputs)}
    recognised = [i for i in inputs if i.kinds]
    n = workers or os.cpu_count() or 1
    shares = [[(i.path, tuple(i.kinds), None) for i in s] for s in split_shares(recognised, n)]
    if use_ray:
        ship = ship_bytes if ship_bytes is not None else bool(ray_address)
        parts = _with_ray(shares, ray_address, workers, ship)
    elif n > 1 and len(shares) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=len(shares)) as ex:
            parts = list(ex.map(load_share, shares))
    else:
        parts = [load_share(s) for s in shares]
    out = empty_observations()
    failed: list[InputError] = [
        InputError(i.reason or "not recognised", i.path) for i in inputs if not i.kinds
    ]
    steps: list[tuple[str, Any, Any, list[str]]] = []
    for part, problems, st in parts:
        for k, v in part.items():
            out.setdefault(k, []).extend(v)
        failed.extend(InputError(reason, path) for reason, path in problems)
        steps.extend(st)
    failed.sort(key=lambda e: order.get(e.path or "", 0))
    return finish_comm_observations(out, failed, inputs, given), steps
