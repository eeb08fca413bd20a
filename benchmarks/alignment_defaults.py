"""How `nmt align` turns weights into links, measured: which reading (naive / shifted), layer
and head pooling of the Transformer, and which link extraction (argmax per target word, or
every cell above a threshold) give the lowest AER. Run on gold that is not the benchmark's
test set: the synthetic corpus's *validation* split and the Hansards en-fr sentences.

For each run: forced attention of every pair once (`nmt.align.extract.forced_weights`),
then every combination is reduced to words (`nmt.align.words.reduce_to_words`), turned into
links (`links_from_matrix`) and scored (`alignment_error_rate`), so only the choice varies.
Writes reports/bench-align/defaults.md and defaults.json.

Usage: python benchmarks/alignment_defaults.py [--runs runs/synth/transformer ...]
       [--hansards runs/hansards/bahdanau ...] [--limit N] [--gold-dir DIR]
The Hansards runs need the gold folder (hansards.en-fr, hansards.en-fr.gold): --gold-dir DIR
or NMT_ALIGN_GOLD_DIR=DIR, asked for only when one of them is trained.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from data_dirs import align_gold_dir, gold_dir_option

ROOT = Path(__file__).resolve().parents[1]
SYNTH_RUNS = [f"runs/synth/{f}" for f in ("bahdanau", "luong_general", "luong_local_p",
                                         "transformer")]
HANSARDS_RUNS = [f"runs/hansards/{f}{d}" for f in ("bahdanau", "luong_general", "transformer")
                 for d in ("", "_fr-en")]
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)


def pairs_and_gold(cfg, dataset: str, limit: int, gold_dir: Path | None = None):
    """(sources, targets, gold) of the synthetic validation split or of Hansards, in the
    run's direction (a fr-en run gets the pairs and gold flipped)."""
    from nmt.data.corpora import corpus_dir, load_split, read_pairs
    from nmt.data.links import GoldAlignment, read_gold

    if dataset == "synth-val":
        src, tgt = load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair, "val")
        gold = read_gold(corpus_dir(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair)
                         / "val.gold")
    else:
        src, tgt = read_pairs(gold_dir / "hansards.en-fr")
        gold = read_gold(gold_dir / "hansards.en-fr.gold", one_based=True)
        if cfg.data.pair == "fr-en":
            src, tgt = tgt, src
            gold = [GoldAlignment(frozenset((j, i) for i, j in g.sure),
                                  frozenset((j, i) for i, j in g.possible)) for g in gold]
    n = limit or len(src)
    return src[:n], tgt[:n], gold[:n]


def readings(weights: list[np.ndarray]) -> dict[str, list[np.ndarray]]:
    """Every (T, S) map worth trying from raw (L, H, T+1, S) weights, by name."""
    L, H = weights[0].shape[:2]
    out = {}
    for shifted in (False, True):
        rows = slice(1, None) if shifted else slice(None, -1)
        tag = "shifted" if shifted else "naive"
        if L * H == 1:
            out[tag] = [w[0, 0, rows] for w in weights]
            continue
        for layer in range(L):
            out[f"{tag} layer {layer} mean"] = [w[layer].mean(0)[rows] for w in weights]
            out[f"{tag} layer {layer} max"] = [w[layer].max(0)[rows] for w in weights]
            for head in range(H):
                out[f"{tag} layer {layer} head {head}"] = [w[layer, head, rows] for w in weights]
        out[f"{tag} all layers mean"] = [w.mean((0, 1))[rows] for w in weights]
    return out


def sweep(run: Path, dataset: str, limit: int, gold_dir: Path | None = None) -> list[dict]:
    """AER, precision, recall of every reading x link extraction for one run."""
    from nmt.align.extract import forced_weights
    from nmt.align.metrics import alignment_error_rate
    from nmt.align.words import links_from_matrix, pieces_to_words, reduce_to_words
    from nmt.core.tokens import EOS
    from nmt.models.runs import load_run

    cfg, vocab, model, _ = load_run(run)
    sources, targets, gold = pairs_and_gold(cfg, dataset, limit, gold_dir)
    src_ids, tgt_ids = vocab.encode_src(sources), vocab.encode_tgt(targets)
    weights = forced_weights(model, src_ids, tgt_ids)
    maps = [(pieces_to_words(vocab.src_pieces([i for i in s if i != EOS])) + [-1],
             pieces_to_words(vocab.tgt_pieces(list(t)))) for s, t in zip(src_ids, tgt_ids)]
    rows = []
    for name, raw in readings(weights).items():
        words = [reduce_to_words(m, tw, sw) for m, (sw, tw) in zip(raw, maps)]
        for links, threshold in [("argmax", 0.0)] + [("threshold", t) for t in THRESHOLDS]:
            hard = [links_from_matrix(m, links, threshold) for m in words]
            scores = alignment_error_rate(hard, gold)
            rows.append({"run": str(run), "family": cfg.model.family, "dataset": dataset,
                         "reading": name, "links": links, "threshold": threshold,
                         "aer": scores["aer"], "precision": scores["precision"],
                         "recall": scores["recall"]})
    return rows


def best_lines(rows: list[dict]) -> list[str]:
    """Per run: the best setting, the best argmax setting and the best of each reading."""
    out = []
    for run in dict.fromkeys(r["run"] for r in rows):
        mine = [r for r in rows if r["run"] == run]
        out += [f"### {run} ({mine[0]['family']}, {mine[0]['dataset']})", "",
                "| reading | links | AER | precision | recall |", "|---|---|---|---|---|"]
        for name in dict.fromkeys(r["reading"] for r in mine):
            if " head " in name:
                continue
            for kind in ("argmax", "threshold"):
                best = min((r for r in mine if r["reading"] == name and r["links"] == kind),
                           key=lambda r: r["aer"])
                label = "argmax" if kind == "argmax" else f"threshold {best['threshold']}"
                out.append(f"| {name} | {label} | {best['aer']:.3f} | "
                           f"{best['precision']:.3f} | {best['recall']:.3f} |")
        heads = [r for r in mine if " head " in r["reading"] and r["links"] == "argmax"]
        if heads:
            best = min(heads, key=lambda r: r["aer"])
            out.append(f"| best single head: {best['reading']} | argmax | {best['aer']:.3f} | "
                       f"{best['precision']:.3f} | {best['recall']:.3f} |")
        out.append("")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="*", default=SYNTH_RUNS, help="synthetic runs")
    parser.add_argument("--hansards", nargs="*", default=HANSARDS_RUNS,
                        help="Multi30k en-fr / fr-en runs")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-align")
    gold_dir_option(parser)
    args = parser.parse_args()
    trained = [run for run in args.hansards if (Path(run) / "checkpoints").is_dir()]
    gold_dir = align_gold_dir(args.gold_dir, also="; or --hansards with no runs") if trained else None

    import torch

    torch.set_num_threads(args.threads)
    rows, skipped = [], []
    for dataset, runs in (("synth-val", args.runs), ("hansards", args.hansards)):
        for run in map(Path, runs):
            if not (run / "checkpoints").is_dir():
                skipped.append(f"{run} (not trained)")
                continue
            start = time.perf_counter()
            rows += sweep(run, dataset, args.limit, gold_dir)
            print(f"{run} on {dataset}: {time.perf_counter() - start:.0f} s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "defaults.json").write_text(json.dumps(rows, indent=1) + "\n")
    text = "\n".join(["# Readings and link extraction, measured", "",
                      *best_lines(rows), *(["Skipped: " + ", ".join(skipped)] if skipped
                                           else [])]) + "\n"
    (args.out / "defaults.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
