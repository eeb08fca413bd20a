"""The README's explorer screenshot: build `nmt explore` of some runs and photograph it with
the browser the tests use (Debian's chromium driven by Playwright, tests/browser.py).

    .venv/bin/python scripts/explorer_screenshot.py RUN... [--out docs/images/explorer.png]
        [--words 7 12] [--word 2]

Shows the first sentence whose source has between --words words, pointing at target word
--word (0-based) in the first panel.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nmt.explore import build_explorer  # noqa: E402
from tests.browser import open_page, screenshot  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/images/explorer.png"))
    parser.add_argument("--words", type=int, nargs=2, default=(7, 12))
    parser.add_argument("--word", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        page = build_explorer(args.runs, Path(tmp) / "explore.html")
        print(f"explorer: {page.bytes / 1e6:.2f} MB, {page.sentences} sentences, {page.panels}")
        with open_page(page.path, width=1500, height=900) as (pg, errors):
            sizes = pg.evaluate("() => JSON.parse(document.getElementById('nmt-data')"
                                ".textContent).sentences.map(s => s.src.length)")
            low, high = args.words
            pos = next(k for k, n in enumerate(sizes) if low <= n <= high)
            screenshot(pg, args.out, pos, args.word)
            if errors:
                raise SystemExit(f"console errors: {errors}")
    print(f"wrote {args.out} (sentence position {pos})")


if __name__ == "__main__":
    main()
