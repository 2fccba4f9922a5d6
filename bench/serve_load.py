"""Load on the scheduler extender: N requests from C concurrent clients, every request on a new TCP
connection (the harshest case for accept/backlog), against the server stack of ``serve/http.py``
(waitress, bounded threads, backlog 1024) and, side by side, the stdlib ``ThreadingHTTPServer`` the
extender used before issue 15 (thread per connection, backlog 5) serving the same application.

Reported per run: requests answered 200, dropped (no HTTP answer: refused, reset, timed out), p50/p99
latency, and the server process's RSS before and after (each server runs in its own process).

    .venv/bin/python bench/serve_load.py [--requests 1000 10000] [--clients 50 200] [--keepalive]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time

SERVER = r"""
import sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from clusterdoctor.serve.extender import ExtenderApp, Extender, make_server
stack, policy = sys.argv[1], sys.argv[2]
if stack == "waitress":
    srv = make_server("127.0.0.1", 0, policy)
else:
    app = ExtenderApp(Extender(policy))
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *a): pass
        def _run(self):
            n = int(self.headers.get("Content-Length") or 0)
            import io
            env = {"REQUEST_METHOD": self.command, "PATH_INFO": self.path, "CONTENT_LENGTH": str(n),
                   "wsgi.input": io.BytesIO(self.rfile.read(n))}
            out = {}
            def start(status, headers): out["s"], out["h"] = status, headers
            body = b"".join(app(env, start))
            self.send_response(int(out["s"].split()[0]))
            for k, v in out["h"]: self.send_header(k, v)
            self.end_headers(); self.wfile.write(body)
        do_GET = do_POST = _run
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)  # request_queue_size 5: the old extender
    srv.daemon_threads = True
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""


def _node(i: int) -> dict:
    free = ",".join(["1000"] * 4 + ["0"] * (i % 4) + ["500"] * (4 - i % 4))
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"gpu-{i}", "annotations": {"clusterdoctor.io/gpu-free-milli": free,
                                                             "clusterdoctor.io/gpu-model": "A100-SXM4"}},
            "status": {"allocatable": {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"}}}  # fmt: skip


BODY = json.dumps(
    {
        "pod": {"metadata": {"name": "p", "namespace": "ml"},
                "spec": {"containers": [{"resources": {"requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}}}]}},
        "nodes": {"kind": "NodeList", "items": [_node(i) for i in range(4)]},
    }
).encode()  # fmt: skip


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def run(port: int, n: int, clients: int, keepalive: bool) -> tuple[list[float], int, dict[str, int]]:
    lat: list[float] = []
    dropped = 0
    errors: dict[str, int] = {}
    lock = threading.Lock()
    per = [n // clients + (1 if i < n % clients else 0) for i in range(clients)]
    barrier = threading.Barrier(clients)

    def worker(k: int) -> None:
        nonlocal dropped
        conn = None
        barrier.wait()  # every client starts at once: the burst is what fills a backlog
        for i in range(k):
            if conn is None or not keepalive:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            t = time.perf_counter()
            try:
                conn.request("POST", "/filter" if i % 2 else "/prioritize", body=BODY,
                             headers={"Content-Type": "application/json"})  # fmt: skip
                r = conn.getresponse()
                r.read()
                ok = r.status == 200
                if not keepalive:
                    conn.close()
            except (OSError, http.client.HTTPException) as e:
                ok = False
                conn.close()
                conn = None
                with lock:
                    dropped += 1
                    errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
                continue
            with lock:
                if ok:
                    lat.append(time.perf_counter() - t)
                else:
                    errors["non-200"] = errors.get("non-200", 0) + 1

    ts = [threading.Thread(target=worker, args=(k,)) for k in per]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sorted(lat), dropped, errors


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--clients", type=int, nargs="+", default=[50, 200])
    ap.add_argument("--stacks", nargs="+", default=["waitress", "stdlib"])
    ap.add_argument("--policy", default="tidal")
    ap.add_argument(
        "--keepalive", action="store_true", help="one connection per client (default: one per request)"
    )
    a = ap.parse_args()
    print(f"extender load, policy {a.policy}, 4-node NodeList, "
          f"{'keep-alive' if a.keepalive else 'a new connection per request'}, {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'stack':9} {'requests':>8} {'clients':>7} {'ok':>6} {'dropped':>7} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'rss before':>10} {'rss after':>9}  errors")  # fmt: skip
    worst_drops = {}
    for stack in a.stacks:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, stack, a.policy], stdout=subprocess.PIPE, text=True
        )
        try:
            port = int(proc.stdout.readline())  # type: ignore[union-attr]
            run(port, 200, 10, True)  # warm-up: imports, first scores
            for n in a.requests:
                for c in a.clients:
                    before = rss_kib(proc.pid)
                    lat, dropped, errors = run(port, n, c, a.keepalive)
                    after = rss_kib(proc.pid)
                    q = lambda v, x: v[min(len(v) - 1, int(x * len(v)))] * 1000 if v else float("nan")  # noqa: E731
                    print(f"{stack:9} {n:>8} {c:>7} {len(lat):>6} {dropped:>7} {q(lat, .5):>7.1f} {q(lat, .99):>7.1f} "
                          f"{before / 1024:>8.1f}MB {after / 1024:>7.1f}MB  {errors or ''}", flush=True)  # fmt: skip
                    worst_drops[stack] = max(worst_drops.get(stack, 0), dropped)
        finally:
            proc.kill()
            proc.wait()
    if "waitress" in worst_drops:
        print(f"waitress dropped {worst_drops['waitress']} connection(s) at worst"
              + (f"; stdlib baseline {worst_drops['stdlib']}" if "stdlib" in worst_drops else ""))  # fmt: skip
    return 1 if worst_drops.get("waitress") else 0


if __name__ == "__main__":
    sys.exit(main())
