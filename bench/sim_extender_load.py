"""Scheduler-extender latency: 1,000 filter/prioritize requests (8 clients, keep-alive) on 127.0.0.1 with
a 4-node NodeList; p50/p99 per policy, next to a /healthz baseline measured in the same run.

    .venv/bin/python bench/sim_extender_load.py [--requests 1000] [--clients 8] [--nodes 4]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from clusterdoctor.serve.extender import serve_in_thread


def _node(i: int) -> dict:
    free = ",".join(["1000"] * 4 + ["0"] * (i % 4) + ["500"] * (4 - i % 4))
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"gpu-{i}", "annotations": {"clusterdoctor.io/gpu-free-milli": free,
                                                             "clusterdoctor.io/gpu-model": "A100-SXM4"}},
            "status": {"allocatable": {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"}}}  # fmt: skip


def _run(port: int, body: bytes | None, n: int, clients: int) -> list[float]:
    def worker(k: int) -> list[float]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        out = []
        for i in range(k):
            t = time.perf_counter()
            if body is None:
                conn.request("GET", "/healthz")
            else:
                conn.request("POST", "/filter" if i % 2 else "/prioritize", body=body,
                             headers={"Content-Type": "application/json"})  # fmt: skip
            r = conn.getresponse()
            r.read()
            out.append(time.perf_counter() - t)
        return out

    with ThreadPoolExecutor(clients) as ex:
        return sorted(x for part in ex.map(worker, [n // clients] * clients) for x in part)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=4)
    a = ap.parse_args()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
           "spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "8", "memory": "32Gi",
                                                                             "nvidia.com/gpu": "1"}}}]}}  # fmt: skip
    body = json.dumps(
        {"pod": pod, "nodes": {"kind": "NodeList", "items": [_node(i) for i in range(a.nodes)]}}
    ).encode()
    for policy in ("tidal", "fgd"):
        srv, _ = serve_in_thread("127.0.0.1", 0, policy)
        port = srv.server_address[1]
        base = _run(port, None, a.requests, a.clients)
        lat = _run(port, body, a.requests, a.clients)
        srv.shutdown()
        srv.server_close()
        p = lambda v, q: v[min(len(v) - 1, int(q * len(v)))] * 1000  # noqa: E731
        print(f"{policy}: {len(lat)} requests, {a.clients} clients, {a.nodes} nodes: p50 {p(lat, .5):.1f} ms "
              f"p99 {p(lat, .99):.1f} ms; /healthz baseline p99 {p(base, .99):.1f} ms; "
              f"ratio {p(lat, .99) / max(p(base, .99), 1e-9):.1f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
