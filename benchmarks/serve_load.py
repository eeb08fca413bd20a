"""Load on `nmt serve` with Locust: start the server on loopback over its runs, warm it
up, then run benchmarks/locustfile.py headless for each number of users, one after the
other, and report latency (p50/p95), requests/s, errors, 503s with Retry-After, and the
server's memory (VmRSS of /proc/<pid>/status) after the warm-up and after each step.

    .venv/bin/python benchmarks/serve_load.py RUN_A RUN_B [--users 8 16 32]
        [--seconds 60] [--soak-minutes 0] [--threads 1] [--pairs FILE] [--out report.json]
        [--engine pytorch|ctranslate2] [--quantize int8] [--kinds all|translate]

--soak-minutes M then runs 8 users for M minutes, reading the server's RSS every 30 s.
Sentences: `source ||| target` lines of --pairs, or the first run's corpus test split (as
`nmt align` reads it), up to 30 words each. The server keeps its default limits (2 decodes
at once, 8 waiting, 10 s of waiting). Loopback only; every step stops after its seconds.
Exit code 1 when any request failed other than with 503 and Retry-After.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
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


def percentile_ms(stats: dict, q: str) -> float:
    value = stats.get(q)
    return float(value) if value not in (None, "", "N/A") else float("nan")


def locust(url: str, users: int, seconds: float, pairs_file: Path, work: Path,
           kinds: str = "all") -> dict:
    """One headless Locust step: users spawned at once, run for `seconds`; the aggregated
    row of its stats CSV and the failures split into 503-with-Retry-After and errors."""
    prefix = work / f"u{users}"
    subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "benchmarks" / "locustfile.py"),
         "--headless", "-u", str(users), "-r", str(users), "-t", f"{int(seconds)}s",
         "--host", url, "--csv", str(prefix), "--only-summary", "--stop-timeout", "60",
         "--loglevel", "WARNING"],
        env={**os.environ, "NMT_LOAD_PAIRS": str(pairs_file), "NMT_LOAD_KINDS": kinds},
        check=False,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=seconds + 180)
    with open(f"{prefix}_stats.csv", encoding="utf-8") as handle:
        total = next(r for r in csv.DictReader(handle) if r["Name"] == "Aggregated")
    busy = errors = 0
    with open(f"{prefix}_failures.csv", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            count = int(row["Occurrences"])
            busy, errors = ((busy + count, errors) if "Retry-After" in row["Error"]
                            else (busy, errors + count))
    requests = int(total["Request Count"])
    return {"users": users, "requests": requests,
            "requests_per_s": round(float(total["Requests/s"]), 2),
            "p50_ms": percentile_ms(total, "50%"), "p95_ms": percentile_ms(total, "95%"),
            "busy_503": busy, "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--engine", default="pytorch", choices=["pytorch", "ctranslate2"])
    parser.add_argument("--quantize", choices=["int8", "int8_float32"])
    parser.add_argument("--kinds", default="all", choices=["all", "translate"],
                        help="every kind of request the page sends, or translations only")
    parser.add_argument("--users", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds per step")
    parser.add_argument("--soak-minutes", type=float, default=0.0)
    parser.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    parser.add_argument("--warmup", type=int, default=10,
                        help="requests sent one at a time before the memory is first read "
                             "(every kind twice: the allocator's first growth is not a leak)")
    parser.add_argument("--pairs", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not all(1 <= u <= 64 for u in args.users) or not 1 <= args.seconds <= 900 \
            or not 0 <= args.soak_minutes <= 60:
        raise SystemExit("serve_load: --users 1..64, --seconds 1..900, --soak-minutes 0..60")
    import httpx

    pairs = sentences(args)
    work = Path(tempfile.mkdtemp(prefix="nmt-load-"))
    pairs_file = work / "pairs.json"
    pairs_file.write_text(json.dumps(pairs))
    args.runs = [r.resolve() for r in args.runs]  # the server starts in the checkout
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile("w+")  # the server's log (a pipe could fill and block it)
    server = subprocess.Popen(
        [sys.executable, "-m", "nmt", "serve", *map(str, args.runs), "--host", "127.0.0.1",
         "--port", str(port), "--threads", str(args.threads), "--engine", args.engine,
         *(["--quantize", args.quantize] if args.quantize else [])],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)
    steps, soak = [], []
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
        os.environ.update(NMT_LOAD_PAIRS=str(pairs_file), NMT_LOAD_KINDS=args.kinds)
        from locustfile import KINDS  # the kinds the users send, each warmed in turn

        with httpx.Client(base_url=url, timeout=60) as http:
            for k in range(args.warmup):
                source, target = pairs[k % len(pairs)]
                _, path, body = KINDS[k % len(KINDS)]
                http.post(path, json=body(source, target))
        warm = rss_mb(server.pid)
        for users in args.users:
            steps.append({**locust(url, users, args.seconds, pairs_file, work, args.kinds),
                          "rss_after_mb": round(rss_mb(server.pid), 1)})
            print(json.dumps(steps[-1]), flush=True)
        if args.soak_minutes:
            soak_start = rss_mb(server.pid)
            sampler = threading.Thread(target=lambda: soak_rss(server.pid, soak,
                                                               args.soak_minutes * 60))
            sampler.start()
            steps.append({**locust(url, 8, args.soak_minutes * 60, pairs_file, work, args.kinds),
                          "soak": True, "rss_soak_start_mb": round(soak_start, 1),
                          "rss_after_mb": round(rss_mb(server.pid), 1)})
            sampler.join()
            print(json.dumps(steps[-1]), flush=True)
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
    report = {"runs": [str(r) for r in args.runs], "server_threads": args.threads,
              "engine": args.engine, "quantize": args.quantize, "kinds": args.kinds,
              "rss_warm_mb": round(warm, 1), "steps": steps, "soak_rss_mb": soak,
              "healthy_after": healthy, "server_logged_failures": failed}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    if any(step["errors"] for step in steps) or failed:
        sys.exit(1)


def soak_rss(pid: int, samples: list, seconds: float) -> None:
    """The server's RSS every 30 s for `seconds`: [seconds since start, MB]."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        samples.append([round(time.monotonic() - start), round(rss_mb(pid), 1)])
        time.sleep(30)


if __name__ == "__main__":
    main()
