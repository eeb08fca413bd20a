"""docs/serve.md's screenshot: start `nmt serve` on loopback over some runs, ask one sentence
in the browser the tests use (Debian's chromium driven by Playwright: tests/browser.py,
tests/serve_page.py) and photograph the answer.

    .venv/bin/python scripts/serve_screenshot.py RUN... [--out docs/images/serve.png]
        [--source TEXT] [--words 6 9] [--word 1] [--beam 4] [--n-best 2]

Without --source: the first sentence of the first run's test split with between --words
words. Points at target word --word (0-based) of the first panel.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.serve_page import ask, open_url, screenshot  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/images/serve.png"))
    parser.add_argument("--source")
    parser.add_argument("--words", type=int, nargs=2, default=(6, 9))
    parser.add_argument("--word", type=int, default=1)
    parser.add_argument("--beam", default="4")
    parser.add_argument("--n-best", default="2")
    args = parser.parse_args()
    source = args.source
    if source is None:
        from nmt.data.corpora import load_split
        from nmt.models.runs import load_config

        cfg = load_config(args.runs[0])
        src, _ = load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair, cfg.data.test)
        low, high = args.words
        source = next(s for s in src if low <= len(s.split()) <= high)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runs = [str(r.resolve()) for r in args.runs]  # the server starts in the checkout
    server = subprocess.Popen([sys.executable, "-m", "nmt", "serve", *runs,
                               "--port", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        import httpx

        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        with open_url(f"http://127.0.0.1:{port}/", width=1500, height=900) as (page, errors):
            ask(page, source, beam=args.beam, n_best=args.n_best)
            screenshot(page, args.out, 0, args.word)
            if errors:
                raise SystemExit(f"console errors: {errors}")
    finally:
        server.terminate()
        server.wait(10)
    print(f"wrote {args.out} ({source!r})")


if __name__ == "__main__":
    main()
