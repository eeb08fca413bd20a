"""How big and how quick `nmt explore` is at 1,000 sentences x 6 runs (prints figures).

Six record sets of synthetic attention over Multi30k-like sentences (8-20 words, some words
in two pieces): four single-map sets (RNN families) and two Transformers with 3 decoder
layers x 4 heads (every layer, head and reading is precomputed). Reports the build time, the
file size and, when chromium and Playwright are installed, the page's load time and the time
to draw the next sentence.

    .venv/bin/python benchmarks/explore_size.py [--sentences 1000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nmt.align.io import save_alignments  # noqa: E402
from nmt.align.records import AlignmentRecord
from nmt.align.words import word_matrix  # noqa: E402
from nmt.explore import build_explorer  # noqa: E402


def synthetic_records(n: int, layers: int, heads: int, seed: int) -> list[AlignmentRecord]:
    rng, same = np.random.default_rng(seed), np.random.default_rng(0)  # same words in every set
    out = []
    for index in range(n):
        words = [f"w{index}_{k}" for k in range(int(same.integers(8, 21)))]
        twords = [f"t{index}_{k}" for k in range(len(words) + int(same.integers(-2, 3)))]
        src = [p for w in words for p in (["▁" + w] if len(w) % 3 else ["▁" + w[:2], w[2:]])]
        tgt = [p for w in twords for p in (["▁" + w] if len(w) % 3 else ["▁" + w[:2], w[2:]])]
        w = rng.random((layers, heads, len(tgt) + 1, len(src) + 1)) ** 8
        w /= w.sum(axis=-1, keepdims=True)
        m = word_matrix(w, src, tgt)
        out.append(AlignmentRecord(index=index, src_tokens=src + ["</s>"],
                                   tgt_tokens=tgt + ["</s>"], weights=w, src_words=words,
                                   tgt_words=twords, word_weights=m,
                                   links=[(int(m[j].argmax()), j) for j in range(len(m))]))
    return out


def browser_timings(html: Path) -> str:
    try:
        from playwright.sync_api import sync_playwright

        from tests.browser import chromium
    except ImportError:
        return "browser: playwright not installed"
    if chromium() is None:
        return "browser: no chromium"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        tick = time.perf_counter()
        page.goto(html.resolve().as_uri())
        page.wait_for_selector("#panels .panel td")
        load = time.perf_counter() - tick
        ms = page.evaluate("""() => { const t = performance.now();
            for (let k = 0; k < 20; k++) document.getElementById('next').click();
            return (performance.now() - t) / 20; }""")
        cells = page.eval_on_selector_all("#panels td", "tds => tds.length")
        browser.close()
    return f"browser: load {load:.2f} s, next sentence {ms:.1f} ms ({cells} cells drawn)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sentences", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "align"
        for k, (layers, heads) in enumerate([(1, 1)] * 4 + [(3, 4)] * 2):
            save_alignments(folder / f"run{k}.npz",
                            synthetic_records(args.sentences, layers, heads, seed=k))
        tick = time.perf_counter()
        page = build_explorer([], Path(tmp) / "explore.html", align_dirs=[folder])
        seconds = time.perf_counter() - tick
        print(f"{page.sentences} sentences x {len(page.panels)} panels: built in {seconds:.1f} s, "
              f"{page.bytes / 1e6:.2f} MB")
        print(browser_timings(page.path))


if __name__ == "__main__":
    main()
