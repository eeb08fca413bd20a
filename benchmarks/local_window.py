"""Where does local-p look? Its predicted window p_t against the gold, on validation.

Luong et al. (2015) local-p predicts p_t = S * sigmoid(v_p^T tanh(W_p h_t)) and attends
to [p_t - D, p_t + D]. This measures, for trained local-p runs on a corpus with gold
alignments (the synthetic one), teacher-forced on the first N validation pairs:

- distance: |p_t - s| to the nearest source piece of a word the gold aligns the target
  word to (target pieces of unaligned words are skipped), mean over target pieces;
- inside: the share of those pieces whose gold lies inside the window, |p_t - s| <= D;
- saturated: the share of all decoder steps with p_t / S below 0.02 or above 0.98, where
  the sigmoid's slope (p/S)(1 - p/S) is under 0.02 and p_t hardly moves in training.

On other text with gold (`--pairs FILE --gold FILE`, `source ||| target` lines with
the gold's source and target sides; a run trained the other way round reads them
flipped: `--flip`), `--adapt K [K ...]` also measures the adapted copy after K steps of
`nmt align --adapt` (nmt.training.adapt, its default rate): does adapting move the window
toward the gold or away from it?

Usage: python benchmarks/local_window.py RUN [RUN ...] [--sentences 200] [--split val]
       python benchmarks/local_window.py RUN --pairs P --gold G [--one-based] [--flip]
                                         [--adapt 25 300]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch


def predicted_centres(model, src_ids: list[int], tgt_ids: list[int]) -> torch.Tensor:
    """p_t (T,) of each decoder step, teacher-forced on one pair."""
    from nmt.core.tokens import BOS
    from nmt.models.attention import LocalWindow

    seen: list[torch.Tensor] = []
    original = LocalWindow._position  # what the decoder's attend calls, step by step

    def recording(self, query, step, mask):
        out = original(self, query, step, mask)
        seen.append(out[0].detach().reshape(-1))
        return out

    LocalWindow._position = recording
    try:
        with torch.no_grad():
            model(torch.tensor([src_ids]), torch.tensor([[BOS] + tgt_ids]))
    finally:
        LocalWindow._position = original
    return torch.cat(seen)  # one entry per step: T = len(tgt_ids) + 1 (the EOS step)


def corpus_pairs(cfg, sentences: int, split: str) -> tuple[list, list, list]:
    """The first `sentences` pairs of the run's own corpus split with its gold."""
    from nmt.data.corpora import corpus_dir
    from nmt.data.links import read_gold
    from nmt.data.pin import gold_of

    folder = corpus_dir(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair)
    src = (folder / f"{split}.{cfg.src_lang}").read_text().splitlines()[:sentences or None]
    tgt = (folder / f"{split}.{cfg.tgt_lang}").read_text().splitlines()[:sentences or None]
    gold_path = gold_of(cfg, split)
    if gold_path is None:
        raise SystemExit(f"{cfg.run_dir}: the corpus has no gold alignments for '{split}' "
                         f"({folder}); give --pairs and --gold")
    return src, tgt, [g.sure for g in read_gold(gold_path)[: len(src)]]


def file_pairs(pairs: str, gold: str, one_based: bool, flip: bool, sentences: int
               ) -> tuple[list, list, list]:
    """`source ||| target` pairs and their sure links; `flip` for a reverse-direction run."""
    from nmt.data.corpora import read_pairs
    from nmt.data.links import read_gold

    src, tgt = read_pairs(Path(pairs))
    sure = [g.sure for g in read_gold(Path(gold), one_based)]
    if flip:
        src, tgt, sure = tgt, src, [frozenset((j, i) for i, j in s) for s in sure]
    n = sentences or len(src)
    return src[:n], tgt[:n], sure[:n]


def window_stats(model, vocab, src: list, tgt: list, sure: list, window: int) -> dict:
    """Distance from p_t to the gold, share of gold inside the window, saturated steps."""
    from nmt.align.words import pieces_to_words

    model.eval()
    distances, inside, saturated, steps = [], 0, 0, 0
    for s, t, g in zip(src, tgt, sure):
        src_ids, tgt_ids = vocab.encode_src([s])[0], vocab.encode_tgt([t])[0]
        p = predicted_centres(model, src_ids, tgt_ids)
        share = p / len(src_ids)
        saturated += int(((share < 0.02) | (share > 0.98)).sum())
        steps += len(p)
        src_word = pieces_to_words(vocab.src_pieces(src_ids[:-1]))
        tgt_word = pieces_to_words(vocab.tgt_pieces(tgt_ids))
        for j, w in enumerate(tgt_word):
            aligned = {i for i, k in g if k == w}
            targets = [n for n, i in enumerate(src_word) if i in aligned]
            if targets:
                d = min(abs(float(p[j]) - n) for n in targets)
                distances.append(d)
                inside += d <= window
    return {"pieces": len(distances), "distance": sum(distances) / max(len(distances), 1),
            "inside": inside / max(len(distances), 1), "saturated": saturated / max(steps, 1)}


def measure(run: str, args) -> list[dict]:
    """One row for the run, and one per --adapt step count (an adapted copy)."""
    from nmt.models.runs import load_run
    from nmt.training.adapt import DEFAULT_LR, adapting

    cfg, vocab, model, _ = load_run(run)
    if cfg.model.attention != "local-p":
        raise SystemExit(f"{run}: model.attention is {cfg.model.attention}, not local-p")
    if args.pairs:
        src, tgt, sure = file_pairs(args.pairs, args.gold, args.one_based, args.flip,
                                    args.sentences)
    else:
        src, tgt, sure = corpus_pairs(cfg, args.sentences, args.split)
    rows = [{"run": run, "pair": cfg.data.pair, "adapt": 0,
             **window_stats(model, vocab, src, tgt, sure, cfg.model.window)}]
    wanted = sorted(set(args.adapt))
    if wanted:
        src_ids, tgt_ids = vocab.encode_src(src), vocab.encode_tgt(tgt)
        tuning = adapting(model, src_ids, tgt_ids, DEFAULT_LR, cfg.train)
        for step, (tuned, _) in enumerate(tuning, 1):
            if step in wanted:
                rows.append({"run": run, "pair": cfg.data.pair, "adapt": step,
                             **window_stats(tuned, vocab, src, tgt, sure, cfg.model.window)})
            if step >= wanted[-1]:
                break
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--sentences", type=int, default=200, help="first N pairs (0 = all)")
    parser.add_argument("--split", default="val")
    parser.add_argument("--pairs", help="'source ||| target' file instead of the run's corpus")
    parser.add_argument("--gold", help="gold links of --pairs")
    parser.add_argument("--flip", action="store_true",
                        help="the run translates the target side of --pairs into its source")
    parser.add_argument("--one-based", action="store_true")
    parser.add_argument("--adapt", type=int, nargs="*", default=[],
                        help="also measure copies adapted for these step counts")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if bool(args.pairs) != bool(args.gold):
        raise SystemExit("--pairs and --gold go together")
    torch.set_num_threads(args.threads)
    print("| run | pair | adapt steps | target pieces | mean distance to gold | "
          "gold inside window | saturated steps |\n|---|---|---|---|---|---|---|")
    for run in args.runs:
        for r in measure(run, args):
            print(f"| {r['run']} | {r['pair']} | {r['adapt']} | {r['pieces']} | "
                  f"{r['distance']:.2f} | {r['inside']:.3f} | {r['saturated']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
