"""The fail-slow probe: per-rank step timing inside a training job, exported to Prometheus and files.

Two lines install it on a DDP or FSDP model (FSDP1 ``FullyShardedDataParallel`` or FSDP2
``fully_shard``; a plain loop: ``model=None``)::

    from clusterdoctor.training import watch
    w = watch.install(ddp_model, job="llm-7b")      # after init_process_group, on every rank
    for batch in w.loader(train_loader):              # optional: measures data-loader wait
        loss = ddp_model(batch).sum(); loss.backward(); opt.step(); opt.zero_grad()
        w.step()                                      # end of one training step

or as a context manager (``with watch.install(model) as w: ...``), which closes it at the end.

Per rank and step it records the wall time, the time until the rank entered its first collective
(its own work, data wait included), the time from then until its collectives completed, the time
its last collective waited, the data-loader wait, the time its process did not run (a heartbeat
thread that wakes late: CPU throttling, SIGSTOP, a frozen host) and the step index. Collectives are
seen, for DDP, through gradient-ready hooks (DDP launches a bucket's all-reduce when its gradients
are ready) and the optimizer's step pre-hook (DDP has waited for its all-reduces by then) — DDP's
C++ all-reduce is not replaced; with ``comm_hook=`` your own DDP hook is wrapped and timed. For FSDP
and plain loops, through the ``torch.distributed`` collective functions (FSDP1 and FSDP2 call
``all_gather_single``/``reduce_scatter_single``, ``all_gather_into_tensor``/``reduce_scatter_tensor``
in older torch): there a step's collectives are spread through forward and backward, so the rank's
own work is the step's time *outside* collectives (the union of each collective's span from its
call to its completion), and its collective and wait times are the time inside them; a straggler
spends the least time inside (the others wait there for it). The probe never touches the tensors.

Every ``every`` steps the ranks exchange a few numbers each with one tiny all-gather on a gloo
process group of the probe's own (its own store prefix and timeout, run by a background thread):
every rank then knows the job's picture (:meth:`Watch.picture`) without any external service.
When the picture shows collectives slower than at the start (or every ``link_every`` exchanges),
the same thread times a small transfer from each ring neighbour (both directions), so a slow link
can be localised to a rank. Nothing of this blocks training: a peer that died makes the exchange
time out in the background thread, which warns once and stops exchanging.

Outputs, per rank (:mod:`clusterdoctor.training.watch_out`): Prometheus metrics on
``port + local_rank``, bound to 127.0.0.1 unless ``bind=``/``$CLUSTERDOCTOR_WATCH_BIND`` says
otherwise (``0.0.0.0`` for a scrape of the pod's IP), on :mod:`clusterdoctor.serve.http` (labels
job, rank, local_rank, host, gpu; see :data:`METRICS`) and, with ``jsonl_dir``, JSON lines in
``<jsonl_dir>/watch-rank<R>.jsonl`` (format: :mod:`clusterdoctor.observe.watch.records`),
rotated at ``jsonl_max_bytes``. Memory is bounded (a fixed window of recent steps). A port in use
or an unwritable file is a warning; training goes on. Read the outputs with
``clusterdoctor watch --from DIR`` or ``clusterdoctor watch --prometheus URL``.

Timing on GPUs: the step clock is the host's. With NCCL, host-side marks see when work was
enqueued, not when the GPU ran it, unless the loop synchronises (``loss.item()``); measured on CPU
(gloo) in this repository's tests only: the NCCL check is listed in bench/RESULTS.md as not run.
"""

from __future__ import annotations

import os
import queue
import socket
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from clusterdoctor.training.watch_out import (
    BIND_ENV,
    METRICS,
    WatchWarning,
    _JsonlWriter,
    _labels,
    _warn,
    exposition_text,
    serve_metrics,
)

__all__ = ["DEFAULT_PORT", "METRICS", "Watch", "WatchWarning", "install"]

DEFAULT_PORT = 9721  # base port; each rank listens on DEFAULT_PORT + local_rank
PORT_ENV = "CLUSTERDOCTOR_WATCH_PORT"
WINDOW = 256  # recent steps kept in memory per rank (bounded however long the job runs)
LINK_BYTES = 256 << 10

# Names, types and help of the exported series (label set: job, rank, local_rank, host, gpu).


class _StepClock:
    """The current step's marks; written from the training thread and collective callbacks."""

    __slots__ = ("data", "first_enter", "last_done", "last_enter", "start")

    def __init__(self, now: float) -> None:
        self.start = now
        self.first_enter: float | None = None
        self.last_enter: float | None = None
        self.last_done: float | None = None
        self.data = 0.0

    def enter(self) -> None:
        t = time.perf_counter()
        if self.first_enter is None:
            self.first_enter = t
        self.last_enter = t

    def done(self, *_: Any) -> None:
        self.last_done = time.perf_counter()


class _CollTimer:
    """Cumulative time inside collectives: the union of the spans from a collective's call to its
    completion (async collectives overlap each other and the caller's work). Entered from the
    training thread, left from the training thread or a completion callback (another thread)."""

    __slots__ = ("depth", "lock", "since", "total")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.since = 0.0
        self.total = 0.0

    def enter(self) -> None:
        with self.lock:
            if self.depth == 0:
                self.since = time.perf_counter()
            self.depth += 1

    def leave(self, *_: Any) -> None:
        with self.lock:
            if self.depth == 0:
                return
            self.depth -= 1
            if self.depth == 0:
                self.total += time.perf_counter() - self.since

    def read(self, now: float) -> float:
        with self.lock:
            return self.total + (now - self.since if self.depth else 0.0)


class Watch:
    """The probe of one rank. Make it with :func:`install`; call :meth:`step` once per step."""

    def __init__(
        self,
        model: Any = None,
        *,
        job: str | None = None,
        every: int = 10,
        port: int | None | str = "auto",
        bind: str | None = None,
        jsonl_dir: str | None | os.PathLike[str] = "auto",
        jsonl_max_bytes: int = 64 << 20,
        exchange: bool = True,
        exchange_timeout: float = 60.0,
        link_every: int = 20,
        link_bytes: int = LINK_BYTES,
        comm_hook: Callable[..., Any] | None = None,
        hook_state: Any = None,
        tap_collectives: bool = True,
        heartbeat: bool = True,
        gpu: str | None = None,
        host: str | None = None,
        nic: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self.every = max(1, int(every))
        self.rank, self.world_size, self.local_rank = _dist_identity()
        self.job = (
            job or os.environ.get("CLUSTERDOCTOR_JOB") or os.environ.get("TORCHELASTIC_RUN_ID") or "job"
        )
        self.host = host or socket.gethostname()
        self.gpu = gpu if gpu is not None else _gpu_label(model)
        self.nic = nic or _nic_label()
        self.started = clock()
        self.run_id = f"{os.getpid()}-{self.started:.3f}"
        self.step_index = 0
        self.totals = {k: 0.0 for k in ("steps", "wall", "own", "coll", "wait", "data", "stall")}
        self.recent: deque[tuple[float, float, float, float, float, float]] = deque(maxlen=WINDOW)
        self.last_t: float | None = None
        self.links: dict[int, float] = {}  # peer rank -> last transfer seconds (peer -> me)
        self._picture: dict[int, dict[str, float]] = {}
        self.exchange_ok = 1.0
        self._lock = threading.Lock()
        self._closed = False
        self._clk = _StepClock(time.perf_counter())
        self._coll = _CollTimer()  # time inside torch.distributed collectives (the tap)
        self._coll_mark = 0.0
        self._ddp_timed = False  # DDP's own all-reduces are timed by hooks (own = until the first one)
        self._labels = _labels(
            job=self.job, rank=str(self.rank), local_rank=str(self.local_rank), host=self.host, gpu=self.gpu
        )
        self._restore: list[Callable[[], None]] = []
        if model is not None:
            self._hook_ddp(model, comm_hook, hook_state)
        if tap_collectives:
            self._tap_collectives()
        self._writer = _JsonlWriter.open(self, jsonl_dir, jsonl_max_bytes)
        self.port: int | None = None
        self._server: Any = None
        self._serve(port, bind or os.environ.get(BIND_ENV) or "127.0.0.1")
        self._heart: _Heartbeat | None = _Heartbeat() if heartbeat else None
        self._stall_mark = 0.0
        self._io = _IoCounter()
        self._exchanger: _Exchanger | None = None
        if exchange and self.world_size > 1:
            self._exchanger = _Exchanger(self, exchange_timeout, link_every, link_bytes)
        import atexit

        atexit.register(self._atexit)  # threads and the gloo group end before the interpreter does

    # -- the training loop's calls -------------------------------------------------------------
    def step(self) -> None:
        """Mark the end of one training step (call once per optimizer step, on every rank)."""
        now = time.perf_counter()
        c = self._clk
        wall = now - c.start
        inside = self._coll.read(now)
        blocked, self._coll_mark = max(0.0, inside - self._coll_mark), inside
        if blocked > 0.0 and not self._ddp_timed:
            # collectives through torch.distributed (FSDP, plain loops): own work is the time outside them
            coll = wait = min(blocked, wall)
            own = wall - coll
        elif c.first_enter is not None:
            own = c.first_enter - c.start
            done = c.last_done if c.last_done is not None and c.last_done >= c.first_enter else now
            coll = done - c.first_enter
            wait = max(0.0, done - (c.last_enter or c.first_enter))
        else:
            own, coll, wait = wall, 0.0, 0.0
        data = min(c.data, wall)
        stall = 0.0
        if self._heart is not None:
            acc = self._heart.settled()
            stall, self._stall_mark = min(wall, acc - self._stall_mark), acc
        io = self._io.delta()
        self._clk = _StepClock(now)
        t = self._clock()
        self.step_index += 1
        with self._lock:
            tot = self.totals
            tot["steps"] += 1
            tot["wall"] += wall
            tot["own"] += own
            tot["coll"] += coll
            tot["wait"] += wait
            tot["data"] += data
            tot["stall"] += stall
            self.recent.append((wall, own, coll, wait, data, stall))
            self.last_t = t
        if self._writer is not None:
            self._writer.step(self.step_index, t, wall, own, coll, wait, data, stall, io)
        if self._exchanger is not None and self.step_index % self.every == 0:
            self._exchanger.offer(self.step_index, t)

    def loader(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """Iterate ``iterable`` (a DataLoader) and count the time blocked in it as data wait."""
        it = iter(iterable)
        while True:
            t0 = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                return
            self._clk.data += time.perf_counter() - t0
            yield item

    def picture(self) -> dict[int, dict[str, float]]:
        """The job's picture from the last exchange: rank -> median step, own, wait, data seconds
        over the last ``every`` steps, last step index and time (empty before the first exchange)."""
        with self._lock:
            return {r: dict(v) for r, v in self._picture.items()}

    def close(self) -> None:
        """Stop serving, flush the file, remove the hooks on torch.distributed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._exchanger is not None:
            self._exchanger.stop()
        if self._heart is not None:
            self._heart.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._writer is not None:
            self._writer.close()
        for undo in reversed(self._restore):
            undo()
        self._restore.clear()

    def _atexit(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- collectives -----------------------------------------------------------------------------
    def _hook_ddp(self, model: Any, comm_hook: Callable[..., Any] | None, hook_state: Any) -> None:
        if _is_fsdp(model):
            # FSDP1 has a register_comm_hook of its own (another signature): not DDP's. Its all-gathers
            # and reduce-scatters go through torch.distributed, where the tap times them.
            if comm_hook is not None:
                _warn("comm_hook= is for DDP models; FSDP's collectives are timed through torch.distributed")
            return
        register = getattr(model, "register_comm_hook", None)
        if register is None:
            return  # not DDP (a plain module): the torch.distributed tap sees the collectives
        if comm_hook is None and self._hook_grads(model):
            self._ddp_timed = True
            return
        if comm_hook is None:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            comm_hook = default_hooks.allreduce_hook
            hook_state = hook_state if hook_state is not None else getattr(model, "process_group", None)
        inner = comm_hook
        watch = self

        def timed_hook(state: Any, bucket: Any) -> Any:
            watch._clk.enter()
            clk = watch._clk
            fut = inner(state, bucket)

            def finished(f: Any) -> Any:
                clk.done()
                return f.value()

            return fut.then(finished)

        timed_hook.__annotations__ = {}  # DDP inspects annotations; postponed ones are strings
        try:
            register(hook_state, timed_hook)
            self._ddp_timed = True
        except (RuntimeError, ValueError, TypeError) as e:
            _warn(
                f"cannot register a DDP communication hook ({e}); pass your hook as comm_hook= to have it "
                "timed. Collective times are taken from torch.distributed calls only."
            )

    def _hook_grads(self, model: Any) -> bool:
        """Time DDP without replacing its C++ all-reduce (a Python communication hook costs ~0.1 ms a
        bucket): a gradient becoming ready is DDP entering its collectives (DDP launches a bucket's
        all-reduce as its last gradient is ready), and the optimizer's step starting is DDP done
        waiting for them (backward returns only then)."""
        try:
            import torch.optim.optimizer as optim_mod

            params = [p for p in model.module.parameters() if p.requires_grad]
            if not params or not hasattr(params[0], "register_post_accumulate_grad_hook"):
                return False
            watch = self

            def ready(_p: Any) -> None:
                watch._clk.enter()

            def stepping(*_a: Any) -> None:
                clk = watch._clk
                if clk.first_enter is not None and clk.last_done is None:
                    clk.done()

            handles = [p.register_post_accumulate_grad_hook(ready) for p in params]
            handles.append(optim_mod.register_optimizer_step_pre_hook(stepping))
        except (AttributeError, RuntimeError, TypeError):
            return False

        def undo() -> None:
            for h in handles:
                h.remove()

        self._restore.append(undo)
        return True

    def _tap_collectives(self) -> None:
        import torch.distributed as dist

        if getattr(dist, "_clusterdoctor_watch_tapped", False):
            return
        watch = self
        # torch >= 2.13 names FSDP's collectives all_gather_single / reduce_scatter_single (the
        # *_into_tensor / *_tensor names call them inside torch, not through this namespace: no double count)
        names = (
            "all_reduce",
            "all_reduce_coalesced",
            "all_gather",
            "all_gather_into_tensor",
            "all_gather_single",
            "all_gather_coalesced",
            "reduce_scatter",
            "reduce_scatter_tensor",
            "reduce_scatter_single",
            "all_to_all",
            "all_to_all_single",
            "broadcast",
            "reduce",
            "gather",
            "scatter",
            "barrier",
        )
        originals = {n: getattr(dist, n) for n in names if hasattr(dist, n)}

        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            def tapped(*args: Any, **kwargs: Any) -> Any:
                clk, timer = watch._clk, watch._coll
                clk.enter()
                timer.enter()
                try:
                    work = fn(*args, **kwargs)
                except BaseException:
                    timer.leave()
                    raise
                if work is None:
                    clk.done()
                    timer.leave()
                else:
                    try:
                        fut = work.get_future()
                    except Exception:  # a Work without a future: completion taken at the step's end
                        timer.leave()
                    else:

                        def finished(_f: Any) -> None:
                            clk.done()
                            timer.leave()

                        fut.then(finished)
                return work

            tapped.__wrapped__ = fn  # type: ignore[attr-defined]
            tapped.__name__ = fn.__name__
            tapped.__doc__ = fn.__doc__
            return tapped

        for n, fn in originals.items():
            setattr(dist, n, wrap(fn))
        dist._clusterdoctor_watch_tapped = True  # type: ignore[attr-defined]

        def undo() -> None:
            for n, fn in originals.items():
                setattr(dist, n, fn)
            dist._clusterdoctor_watch_tapped = False  # type: ignore[attr-defined]

        self._restore.append(undo)

    # -- Prometheus ------------------------------------------------------------------------------
    def _serve(self, port: int | None | str, bind: str) -> None:
        if port == "auto":
            env = os.environ.get(PORT_ENV)
            if env is not None and env.strip().lower() in ("", "off", "none", "no"):
                return
            try:
                base = int(env) if env else DEFAULT_PORT
            except ValueError:
                _warn(f"${PORT_ENV}={env!r} is not a port; metrics not served")
                return
            port = base + self.local_rank
        if port is None:
            return
        self._server = serve_metrics(self.exposition, bind, int(port))
        if self._server is not None:
            self.port = self._server.server_address[1]

    def exposition(self) -> str:
        """The metrics in the Prometheus text format (what ``/metrics`` serves)."""
        with self._lock:
            tot = dict(self.totals)
            walls = sorted(r[0] for r in self.recent)
            last_t = self.last_t
            links = dict(self.links)
            pic = {r: dict(v) for r, v in self._picture.items()}
        return exposition_text(
            self._labels, tot, walls, last_t, self.started, self.step_index, links, self.exchange_ok, pic
        )

    # -- what the exchanger reports back ---------------------------------------------------------
    def _summary(self, step: int, t: float) -> list[float]:
        with self._lock:
            rows = list(self.recent)[-self.every :]
        if not rows:
            return [float(self.rank), float(step), t, 0.0, 0.0, 0.0, 0.0, 0.0]
        cols = list(zip(*rows))
        med = [statistics.median(c) for c in cols]
        return [float(self.rank), float(step), t, med[0], med[1], med[2], med[3], med[4]]

    def _set_picture(self, rows: list[list[float]]) -> None:
        pic = {}
        for row in rows:
            r = int(row[0])
            pic[r] = {
                "step": row[1],
                "t": row[2],
                "wall": row[3],
                "own": row[4],
                "coll": row[5],
                "wait": row[6],
                "data": row[7],
            }
        with self._lock:
            self._picture = pic

    def _set_links(self, measured: dict[int, float], nbytes: int, t: float) -> None:
        with self._lock:
            self.links.update(measured)
        if self._writer is not None:
            for src, s in measured.items():
                self._writer.link(src, self.rank, nbytes, s, t)

    def _exchange_failed(self, why: str) -> None:
        self.exchange_ok = 0.0
        _warn(f"exchange between ranks stopped: {why}; training goes on, per-rank metrics still work")


class _IoCounter:
    """Bytes this process read from and wrote to storage since the last call (``read_bytes`` +
    ``write_bytes`` of /proc/self/io: storage only, not sockets; a write counts when it dirties the page
    cache). None where the kernel has no I/O accounting (or not Linux): the field is then left out."""

    PATH = "/proc/self/io"

    def __init__(self) -> None:
        self.last = self._read()

    def _read(self) -> int | None:
        try:
            with open(self.PATH, "rb") as f:
                text = f.read()
        except OSError:
            return None
        n = 0
        for line in text.splitlines():
            if line.startswith((b"read_bytes:", b"write_bytes:")):
                n += int(line.split()[1])
        return n

    def delta(self) -> int | None:
        if self.last is None:
            return None
        now = self._read()
        if now is None:
            self.last = None
            return None
        d, self.last = max(0, now - self.last), now
        return d


class _Heartbeat:
    """A thread that sleeps ``interval`` seconds at a time and adds up how late it wakes beyond
    ``tolerance``: time the whole process was not running (SIGSTOP, cgroup CPU throttling, a host
    that froze). 50 wake-ups a second, a few microseconds each."""

    def __init__(self, interval: float = 0.02, tolerance: float = 0.003) -> None:
        self.interval = interval
        self.tolerance = tolerance
        self.stalled = 0.0
        self.last = time.perf_counter()
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, name="clusterdoctor-watch-heartbeat", daemon=True)
        self.thread.start()

    def _count(self, now: float) -> None:
        late = now - self.last - self.interval
        if late > self.tolerance:
            self.stalled += late
            self.last = now - self.interval  # counted: the next wake-up counts only what follows
        else:
            self.last = max(self.last, now - self.interval)

    def _run(self) -> None:
        clock, iv = time.perf_counter, self.interval
        while not self.halt.is_set():
            time.sleep(iv)  # not Event.wait: a timed lock wait overruns under libfaketime
            with self.lock:
                now = clock()
                self._count(now)
                self.last = now

    def settled(self) -> float:
        """The stall time so far, including a stall the thread has not woken up to count yet (after a
        SIGCONT the training thread may reach its next step first)."""
        with self.lock:
            self._count(time.perf_counter())
            return self.stalled

    def stop(self) -> None:
        self.halt.set()


class _Exchanger:
    """Runs the ranks' exchange on a gloo process group of its own, in a background thread.

    The group is built from the default store under a prefix of its own (not through
    ``new_group``, so it never disturbs the order of the job's own groups), with its own timeout;
    a failure (peer died, timeout) is a warning and the end of the exchange, never of training.
    """

    def __init__(self, watch: Watch, timeout: float, link_every: int, link_bytes: int) -> None:
        self.watch = watch
        self.timeout = timeout
        self.link_every = max(0, int(link_every))
        self.link_bytes = max(4, int(link_bytes))
        self.requests: queue.SimpleQueue[tuple[int, float] | None] = queue.SimpleQueue()
        self.busy = threading.Event()
        self.dead = False
        self.baseline_coll: float | None = None
        self.count = 0
        self.last_link = -(10**9)
        self.thread = threading.Thread(target=self._run, name="clusterdoctor-watch-exchange", daemon=True)
        self.thread.start()

    def offer(self, step: int, t: float) -> None:
        """Ask for an exchange unless one is still running (never blocks)."""
        if self.dead or self.busy.is_set():
            return
        self.busy.set()
        self.requests.put((step, t))

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread and release the gloo group before the interpreter exits (a gloo group
        destroyed during interpreter shutdown aborts the process)."""
        self.dead = True
        self.requests.put(None)
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)

    def _group(self) -> Any:
        import datetime

        import torch.distributed as dist

        store = dist.PrefixStore(
            f"clusterdoctor-watch/{self.watch.job}", dist.distributed_c10d._get_default_store()
        )
        # the C++ constructor picks the devices as torch's own gloo groups do (GLOO_SOCKET_IFNAME)
        timeout = datetime.timedelta(seconds=self.timeout)
        return dist.ProcessGroupGloo(store, self.watch.rank, self.watch.world_size, timeout)

    def _run(self) -> None:
        try:
            import torch

            pg = self._group()
        except Exception as e:
            self.dead = True
            self.watch._exchange_failed(f"cannot build the probe's gloo group ({e})")
            return
        n = self.watch.world_size
        try:
            self._serve(pg, torch, n)
        finally:
            del pg  # destroyed here, by this thread, not at interpreter exit

    def _serve(self, pg: Any, torch: Any, n: int) -> None:
        while True:
            req = self.requests.get()
            if req is None or self.dead:
                return
            step, t = req
            try:
                mine = torch.tensor(self.watch._summary(step, t), dtype=torch.float64)
                outs = [torch.empty_like(mine) for _ in range(n)]
                pg.allgather([outs], [mine]).wait()
                rows = [o.tolist() for o in outs]
                self.watch._set_picture(rows)
                if self._want_link_test(rows):
                    self._link_test(pg, torch)
            except Exception as e:
                self.dead = True
                self.watch._exchange_failed(str(e).splitlines()[0] if str(e) else type(e).__name__)
                return
            finally:
                self.count += 1
                self.busy.clear()

    def _want_link_test(self, rows: list[list[float]]) -> bool:
        """Same answer on every rank: decided from the gathered rows and the exchange count only."""
        # the collective time of the rank that arrived last = the transfer itself (it waited for nobody)
        late = max(rows, key=lambda r: (r[4], r[0]))
        coll = late[6]
        if self.count < 2:  # skip the warm-up exchanges
            return False
        if self.baseline_coll is None:
            self.baseline_coll = coll
            self.last_link = self.count
            return self.link_every > 0
        if self.link_every and self.count % self.link_every == 0:
            self.last_link = self.count
            return True
        # collectives slower than at the start: time the links, at most every 5th exchange
        if coll > 1.5 * self.baseline_coll + 1e-3 and self.count - self.last_link >= 5:
            self.last_link = self.count
            return True
        return False

    def _link_test(self, pg: Any, torch: Any) -> None:
        w = self.watch
        n, r = w.world_size, w.rank
        if n < 2:
            return
        buf = torch.zeros(self.link_bytes // 4, dtype=torch.float32)
        got = torch.empty_like(buf)
        measured: dict[int, float] = {}
        for direction in (1, -1):
            dst, src = (r + direction) % n, (r - direction) % n
            if n == 2 and direction == -1:
                break
            best = float("inf")
            for rep in range(3):
                pg.barrier().wait()
                t0 = time.perf_counter()
                s = pg.send([buf], dst, 7 + rep)
                pg.recv([got], src, 7 + rep).wait()
                best = min(best, time.perf_counter() - t0)
                s.wait()
            measured[src] = best
        w._set_links(measured, self.link_bytes, w._clock())


def _dist_identity() -> tuple[int, int, int]:
    rank, world = 0, 1
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    else:
        if world == 1:
            rank = int(os.environ.get("RANK", rank))
            world = int(os.environ.get("WORLD_SIZE", world))
    local = int(os.environ.get("LOCAL_RANK", "0") or 0)
    return rank, world, local


def _gpu_label(model: Any) -> str:
    try:
        import torch

        params = getattr(model, "parameters", None)
        if params is not None:
            for p in params():
                if p.device.type == "cuda":
                    return str(p.device.index)
                return p.device.type
        if torch.cuda.is_available():
            return str(torch.cuda.current_device())
    except Exception:
        pass
    return "cpu"


def _is_fsdp(model: Any) -> bool:
    """FSDP1 (``FullyShardedDataParallel``) or FSDP2 (``fully_shard``: an ``FSDPModule``)."""
    if model is None:
        return False
    try:
        from torch.distributed import fsdp
    except ImportError:  # pragma: no cover - torch without distributed
        return False
    classes = tuple(
        c for c in (getattr(fsdp, "FullyShardedDataParallel", None), getattr(fsdp, "FSDPModule", None)) if c
    )
    return bool(classes) and isinstance(model, classes)


def _nic_label() -> str | None:
    for var in ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        v = os.environ.get(var)
        if v:
            return v
    return None


def install(model: Any = None, **options: Any) -> Watch:
    """Install the fail-slow probe on this rank (call on every rank, after ``init_process_group``).

    ``model``: a DDP model (its all-reduces are timed through gradient-ready hooks; pass your own
    communication hook as ``comm_hook=`` if you use one, and it is wrapped and timed), an FSDP model
    (FSDP1 or FSDP2; its collectives are timed through the ``torch.distributed`` functions, and the
    GPU label is read from its parameters), or None for plain loops (``torch.distributed`` too). Options (see :class:`Watch`): ``job``, ``every``
    (steps between exchanges, default 10), ``port`` (``"auto"``: ``$CLUSTERDOCTOR_WATCH_PORT`` or
    9721, plus the local rank; None: no metrics; 0: any free port), ``jsonl_dir`` (``"auto"``:
    ``$CLUSTERDOCTOR_WATCH_DIR``), ``exchange``, ``exchange_timeout``, ``link_every``.
    """
    return Watch(model, **options)
