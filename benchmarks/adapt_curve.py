"""AER against `--adapt` steps on Hansards en-fr, both directions, with the symmetrisations
of `nmt align` (agreement at several thresholds, grow-diag-final-and, intersection): the
measurement behind the adapt steps and the agreement threshold that the README recommends.

Settings are chosen on a *development* prefix of the gold (the first 100 of the 447 pairs)
and the remaining 347 pairs are reported beside it, so a choice can be checked on pairs
it was not chosen on. Both models are fine-tuned on all 447 pairs (no gold is used for
that: adapting trains on the text being aligned, as `nmt align --adapt` does) by
`nmt.align.adapt.adapting`, the generator behind `--adapt`, and read after each checkpoint.

Usage: python benchmarks/adapt_curve.py [--family bahdanau] [--steps 0 100 300 600]
       [--lr 1e-3] [--dev 100] [--threads 1]
Writes reports/bench-align/adapt_<family>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLD_DIR = ROOT.parent / "shared" / "corpora" / "alignment-gold" / "en-fr"
THRESHOLDS = (0.1, 0.2, 0.3)


def records(model, vocab, src_ids, tgt_ids):
    from nmt.align.extract import collect

    model.eval()
    return collect(model, vocab, src_ids, tgt_ids, meta={})


def link_sets(forward: list, reverse: list) -> dict[str, list]:
    """Each symmetrisation's links per sentence from the two directions' records."""
    from nmt.align.bidirectional import flip_record
    from nmt.align.symmetrize import agreement, symmetrize

    flipped = [flip_record(r) for r in reverse]
    out = {"forward": [set(r.links) for r in forward], "reverse": [set(r.links) for r in flipped]}
    for h in ("intersection", "grow-diag-final-and"):
        out[h] = [symmetrize(f.links, b.links, len(f.src_words), len(f.tgt_words), h)
                  for f, b in zip(forward, flipped)]
    for t in THRESHOLDS:
        out[f"agreement {t}"] = [agreement(f.word_weights, b.word_weights, t)[1]
                                 for f, b in zip(forward, flipped)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="bahdanau")
    parser.add_argument("--steps", type=int, nargs="+", default=[0, 100, 300, 600])
    parser.add_argument("--lr", type=float, default=None, help="default: --adapt-lr's")
    parser.add_argument("--dev", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-align")
    args = parser.parse_args()

    import torch

    from nmt.align.adapt import DEFAULT_LR, adapting
    from nmt.align.io import read_gold, read_pairs
    from nmt.align.metrics import alignment_error_rate
    from nmt.rundir import load_run

    torch.set_num_threads(args.threads)
    lr = args.lr or DEFAULT_LR
    sources, targets = read_pairs(GOLD_DIR / "hansards.en-fr")
    gold = read_gold(GOLD_DIR / "hansards.en-fr.gold", one_based=True)
    sides = []
    for run, (src, tgt) in ((f"{args.family}_en-fr", (sources, targets)),
                            (f"{args.family}_fr-en", (targets, sources))):
        cfg, vocab, model, _ = load_run(ROOT / "runs" / run)
        src_ids, tgt_ids = vocab.encode_src(src), vocab.encode_tgt(tgt)
        sides.append({"model": model, "vocab": vocab, "ids": (src_ids, tgt_ids),
                      "steps": adapting(model, src_ids, tgt_ids, lr, cfg.train)})
    rows, done, seconds = [], 0, 0.0
    for steps in sorted(set(args.steps)):
        start = time.perf_counter()
        for side in sides:
            for _ in range(steps - done):
                side["model"], _ = next(side["steps"])
        seconds += time.perf_counter() - start
        done = steps
        got = [records(s["model"], s["vocab"], *s["ids"]) for s in sides]
        for name, links in link_sets(*got).items():
            dev = alignment_error_rate(links[:args.dev], gold[:args.dev])
            rest = alignment_error_rate(links[args.dev:], gold[args.dev:])
            rows.append({"steps": steps, "links": name, "dev_aer": dev["aer"],
                         "rest_aer": rest["aer"], "rest_precision": rest["precision"],
                         "rest_recall": rest["recall"], "adapt_seconds": seconds})
            print(f"{steps:5d} {name:22s} dev {dev['aer']:.3f}  rest {rest['aer']:.3f} "
                  f"(P {rest['precision']:.3f} R {rest['recall']:.3f})", flush=True)
    write(args, lr, rows)


def write(args, lr: float, rows: list[dict]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"adapt_{args.family}"
    stem.with_suffix(".json").write_text(json.dumps({"lr": lr, "dev": args.dev, "rows": rows},
                                                    indent=1) + "\n")
    lines = [f"# Hansards AER against --adapt steps: {args.family} (lr {lr:g})", "",
             f"dev = the first {args.dev} pairs, rest = the other pairs; both directions "
             "adapted on all pairs.", "",
             "| steps | links | dev AER | rest AER | rest P | rest R | adapt s (both) |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['steps']} | {r['links']} | {r['dev_aer']:.3f} | {r['rest_aer']:.3f} | "
              f"{r['rest_precision']:.3f} | {r['rest_recall']:.3f} | {r['adapt_seconds']:.0f} |"
              for r in rows]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {stem}.md")


if __name__ == "__main__":
    main()
