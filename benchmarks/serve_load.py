"""Load on `nmt serve`: start the server on loopback over two runs, send a bounded number of
mixed requests from a few concurrent clients, report latency, errors, 503s and the server's
memory (VmRSS of /proc/<pid>/status) before and after.

    .venv/bin/python benchmarks/serve_load.py RUN_A RUN_B [--requests 400] [--clients 8]
        [--threads 1] [--max-seconds 600] [--pairs FILE] [--out report.json]

The requests cycle through five kinds: translate (greedy), translate (beam 4, 2-best),
align free with the page's views (attention), align forced (attention), align forced
(saliency). Sentences: `source ||| target` lines of --pairs, or the first run's corpus test
split (as `nmt align` reads it), up to 30 words each. The server keeps its default limits
(2 decodes at once, 8 waiting, 10 s of waiting), so 8 clients fit without 503s unless a
decode is slow. Loopback only; every request is bounded, and the whole run stops after
--max-seconds. Exit code 1 when any request failed (other than 503).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sentences(args) -> list[tuple[str, str]]:
    if args.pairs:
        from nmt.data.corpora import read_pairs

        src, tgt = read_pairs(args.pairs)
    else:
        from nmt.data.corpora import load_split
        from nmt.models.runs import load_config

        cfg = load_config(args.runs[0])
        src, tgt = load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair, cfg.data.test)
    pairs = [(s, t) for s, t in zip(src, tgt) if 0 < len(s.split()) <= 30 and t.strip()]
    if not pairs:
        raise SystemExit("serve_load: no sentence pairs of 1-30 words; pass --pairs FILE")
    return pairs[:500]


def request(kind: int, source: str, target: str) -> tuple[str, dict]:
    return [
        ("/api/translate", {"source": source, "beam": 1}),
        ("/api/translate", {"source": source, "beam": 4, "n_best": 2}),
        ("/api/align", {"source": source, "views": True}),
        ("/api/align", {"source": source, "target": target}),
        ("/api/align", {"source": source, "target": target, "method": "saliency"}),
    ][kind % 5]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs=2, type=Path)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--warmup", type=int, default=10,
                        help="requests sent one at a time before the memory is first read "
                             "(every kind twice: the allocator's first growth is not a leak)")
    parser.add_argument("--pairs", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not 1 <= args.requests <= 10_000 or not 1 <= args.clients <= 64:
        raise SystemExit("serve_load: --requests 1..10000 and --clients 1..64")
    import httpx

    pairs = sentences(args)
    args.runs = [r.resolve() for r in args.runs]  # the server starts in the checkout
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile("w+")  # the server's log (a pipe could fill and block it)
    server = subprocess.Popen(
        [sys.executable, "-m", "nmt", "serve", *map(str, args.runs), "--host", "127.0.0.1",
         "--port", str(port), "--threads", str(args.threads)],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        start = time.monotonic()
        while True:
            if server.poll() is not None:
                log.seek(0)
                raise SystemExit(f"serve_load: the server exited: {log.read()[-2000:]}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() - start > 120:
                raise SystemExit("serve_load: the server did not start within 120 s")
            time.sleep(0.2)
        startup = time.monotonic() - start
        started = rss_mb(server.pid)
        with httpx.Client(base_url=url, timeout=60) as http:
            for k in range(args.warmup):
                path, body = request(k, *pairs[k % len(pairs)])
                http.post(path, json=body)
        before = rss_mb(server.pid)
        jobs = iter(range(args.requests))
        lock = threading.Lock()
        results: list[tuple[int, float, int]] = []  # kind, seconds, status (0: failed)
        deadline = time.monotonic() + args.max_seconds

        def client() -> None:
            with httpx.Client(base_url=url, timeout=60) as http:
                while time.monotonic() < deadline:
                    with lock:
                        k = next(jobs, None)
                    if k is None:
                        return
                    source, target = pairs[k % len(pairs)]
                    path, body = request(k, source, target)
                    t0 = time.perf_counter()
                    try:
                        status = http.post(path, json=body).status_code
                    except httpx.HTTPError:
                        status = 0
                    with lock:
                        results.append((k % 5, time.perf_counter() - t0, status))

        t0 = time.monotonic()
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        after = rss_mb(server.pid)
        healthy = httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.seek(0)
        failed = log.read().count("failed:")  # requests the server logged as failed (500)
        log.close()
    ok = [s for _, s, st in results if st == 200]
    report = {
        "runs": [str(r) for r in args.runs], "requests": len(results), "clients": args.clients,
        "server_threads": args.threads, "startup_s": round(startup, 2), "wall_s": round(wall, 2),
        "requests_per_s": round(len(results) / wall, 2) if wall else None,
        "p50_ms": round(1000 * percentile(ok, 50), 1), "p95_ms": round(1000 * percentile(ok, 95), 1),
        "max_ms": round(1000 * max(ok), 1) if ok else None,
        "errors": sum(1 for *_, st in results if st not in (200, 503)),
        "busy_503": sum(1 for *_, st in results if st == 503),
        "rss_started_mb": round(started, 1), "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1), "rss_growth": round(after / before - 1, 4),
        "healthy_after": healthy, "server_logged_failures": failed,
        "p50_ms_by_kind": {name: round(1000 * percentile([s for k, s, st in results
                                                           if k == i and st == 200], 50), 1)
                           for i, name in enumerate(["translate greedy", "translate beam4 2-best",
                                                     "align free views", "align forced",
                                                     "align forced saliency"])},
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    if report["errors"] or len(results) < args.requests:
        sys.exit(1)


if __name__ == "__main__":
    main()
