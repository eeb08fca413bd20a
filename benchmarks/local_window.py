"""Where does local-p look? Its predicted window p_t against the gold, on validation.

Luong et al. (2015) local-p predicts p_t = S * sigmoid(v_p^T tanh(W_p h_t)) and attends
to [p_t - D, p_t + D]. This measures, for trained local-p runs on a corpus with gold
alignments (the synthetic one), teacher-forced on the first N validation pairs:

- distance: |p_t - s| to the nearest source piece of a word the gold aligns the target
  word to (target pieces of unaligned words are skipped), mean over target pieces;
- inside: the share of those pieces whose gold lies inside the window, |p_t - s| <= D;
- saturated: the share of all decoder steps with p_t / S below 0.02 or above 0.98, where
  the sigmoid's slope (p/S)(1 - p/S) is under 0.02 and p_t hardly moves in training.

Usage: python benchmarks/local_window.py RUN [RUN ...] [--sentences 200] [--split val]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch


def predicted_centres(model, src_ids: list[int], tgt_ids: list[int]) -> torch.Tensor:
    """p_t (T,) of each decoder step, teacher-forced on one pair."""
    from nmt.models.attention import LocalWindow
    from nmt.tokens import BOS

    seen: list[torch.Tensor] = []
    original = LocalWindow.centre

    def recording(self, query, step, mask):
        centre = original(self, query, step, mask)
        seen.append(centre.detach().reshape(-1))
        return centre

    LocalWindow.centre = recording
    try:
        with torch.no_grad():
            model(torch.tensor([src_ids]), torch.tensor([[BOS] + tgt_ids]))
    finally:
        LocalWindow.centre = original
    return torch.cat(seen)  # one entry per step: T = len(tgt_ids) + 1 (the EOS step)


def measure(run: str, sentences: int, split: str) -> dict:
    from nmt.align.io import corpus_gold, read_gold
    from nmt.align.words import pieces_to_words
    from nmt.data.corpora import corpus_dir
    from nmt.rundir import load_run

    cfg, vocab, model, _ = load_run(run)
    if cfg.model.attention != "local-p":
        raise SystemExit(f"{run}: model.attention is {cfg.model.attention}, not local-p")
    folder = corpus_dir(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair)
    src = (folder / f"{split}.{cfg.src_lang}").read_text().splitlines()[:sentences]
    tgt = (folder / f"{split}.{cfg.tgt_lang}").read_text().splitlines()[:sentences]
    gold_path = corpus_gold(cfg, split)
    if gold_path is None:
        raise SystemExit(f"{run}: the corpus has no gold alignments for '{split}' ({folder})")
    gold = read_gold(gold_path)[: len(src)]
    distances, inside, saturated, steps = [], 0, 0, 0
    for s, t, g in zip(src, tgt, gold):
        src_ids, tgt_ids = vocab.encode_src([s])[0], vocab.encode_tgt([t])[0]
        p = predicted_centres(model, src_ids, tgt_ids)
        share = p / len(src_ids)
        saturated += int(((share < 0.02) | (share > 0.98)).sum())
        steps += len(p)
        src_word = pieces_to_words(vocab.src_pieces(src_ids[:-1]))
        tgt_word = pieces_to_words(vocab.tgt_pieces(tgt_ids))
        for j, w in enumerate(tgt_word):
            aligned = {i for i, k in g.sure if k == w}
            targets = [n for n, i in enumerate(src_word) if i in aligned]
            if targets:
                d = min(abs(float(p[j]) - n) for n in targets)
                distances.append(d)
                inside += d <= cfg.model.window
    return {"run": run, "pair": cfg.data.pair, "pieces": len(distances),
            "distance": sum(distances) / max(len(distances), 1),
            "inside": inside / max(len(distances), 1), "saturated": saturated / max(steps, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--split", default="val")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print("| run | pair | target pieces | mean distance to gold | gold inside window | "
          "saturated steps |\n|---|---|---|---|---|---|")
    for run in args.runs:
        r = measure(run, args.sentences, args.split)
        print(f"| {r['run']} | {r['pair']} | {r['pieces']} | {r['distance']:.2f} | "
              f"{r['inside']:.3f} | {r['saturated']:.3f} |")


if __name__ == "__main__":
    main()
