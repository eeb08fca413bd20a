"""AER against `--adapt` steps on Hansards en-fr, both directions, with the symmetrisations
of `nmt align` (agreement at several thresholds, grow-diag-final-and, intersection): the
measurement behind the adapt steps and the agreement threshold that docs/alignment.md recommends.

Settings are chosen on a *development* prefix of the gold (the first 100 of the 447 pairs)
and the remaining 347 pairs are reported beside it, so a choice can be checked on pairs
it was not chosen on. Both models are fine-tuned on all 447 pairs (no gold is used for
that: adapting trains on the text being aligned, as `nmt align --adapt` does) by
`nmt.training.adapt.adapting`, the generator behind `--adapt`, and read after each checkpoint.

Each step count's records are saved (reports/bench-align/adapt_<family>/steps<N>/), so
`--ensemble bahdanau transformer` can then pool two families' saved maps per direction
(`nmt align --ensemble`'s `mean_records`) at every step count both have, without adapting
again; two one-thread processes can adapt the two families side by side first.

Usage: python benchmarks/adapt_curve.py [--family bahdanau] [--steps 0 100 300 600]
       [--lr 1e-3] [--dev 100] [--threads 1] [--gold-dir DIR]
       python benchmarks/adapt_curve.py --ensemble bahdanau transformer [--steps ...]
Writes reports/bench-align/adapt_<family>.md and .json (adapt_<a>+<b> for an ensemble).
The gold folder (hansards.en-fr, hansards.en-fr.gold): --gold-dir DIR or NMT_ALIGN_GOLD_DIR.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from data_dirs import align_gold_dir, gold_dir_option

ROOT = Path(__file__).resolve().parents[1]
THRESHOLDS = (0.1, 0.2, 0.3)


def records(model, vocab, src_ids, tgt_ids):
    from nmt.align.extract import collect

    model.eval()
    return collect(model, vocab, src_ids, tgt_ids, meta={})


def link_sets(forward: list, flipped: list) -> dict[str, list]:
    """Each symmetrisation's links per sentence from the forward records and the reverse
    direction's records flipped into the forward order (`nmt align`'s own
    `symmetrized_records`)."""
    from nmt.align.bidirectional import symmetrized_records
    from nmt.data.symmetrize import AGREEMENT, DEFAULT_AGREEMENT

    def links(heuristic: str, threshold: float = DEFAULT_AGREEMENT) -> list[set]:
        return [set(r.links) for r in symmetrized_records(forward, flipped, heuristic, {},
                                                          threshold)]

    out = {"forward": [set(r.links) for r in forward], "reverse": [set(r.links) for r in flipped]}
    out |= {h: links(h) for h in ("intersection", "grow-diag-final-and")}
    out |= {f"agreement {t}": links(AGREEMENT, t) for t in THRESHOLDS}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="bahdanau")
    parser.add_argument("--ensemble", nargs="+", default=None,
                        help="pool these families' saved records instead of adapting")
    parser.add_argument("--steps", type=int, nargs="+", default=[0, 100, 300, 600])
    parser.add_argument("--lr", type=float, default=None, help="default: --adapt-lr's")
    parser.add_argument("--dev", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-align")
    gold_dir_option(parser)
    args = parser.parse_args()
    args.gold_dir = align_gold_dir(args.gold_dir)

    import torch

    from nmt.data.links import read_gold
    from nmt.training.adapt import DEFAULT_LR

    torch.set_num_threads(args.threads)
    gold = read_gold(args.gold_dir / "hansards.en-fr.gold", one_based=True)
    if args.ensemble:
        args.family = "+".join(args.ensemble)
        rows = pooled_curve(args, gold)
    else:
        rows = adapt_curve(args, gold, args.lr or DEFAULT_LR)
    write(args, args.lr or DEFAULT_LR, rows)


def adapt_curve(args, gold: list, lr: float) -> list[dict]:
    """Adapt both directions of one family, reading and saving their records at each
    step count."""
    from nmt.align.bidirectional import flip_record
    from nmt.align.io import save_alignments
    from nmt.data.corpora import read_pairs
    from nmt.models.runs import load_run
    from nmt.training.adapt import adapting

    sources, targets = read_pairs(args.gold_dir / "hansards.en-fr")
    sides = []
    for run, (src, tgt) in ((args.family, (sources, targets)),
                            (f"{args.family}_fr-en", (targets, sources))):
        cfg, vocab, model, _ = load_run(ROOT / "runs" / "hansards" / run)
        src_ids, tgt_ids = vocab.encode_src(src), vocab.encode_tgt(tgt)
        sides.append({"run": run, "model": model, "vocab": vocab, "ids": (src_ids, tgt_ids),
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
        for side, recs in zip(sides, got):
            path = saved(args.out, args.family, steps, side["run"])
            path.parent.mkdir(parents=True, exist_ok=True)
            save_alignments(path, recs)
        forward, flipped = got[0], [flip_record(r) for r in got[1]]
        rows += score(steps, link_sets(forward, flipped), gold, args.dev, seconds)
    return rows


def saved(out: Path, family: str, steps: int, run: str) -> Path:
    """Where one run's records after `steps` adapt steps are kept."""
    return out / f"adapt_{family}" / f"steps{steps}" / f"{run}.npz"


def pooled_curve(args, gold: list) -> list[dict]:
    """The mean maps of several families' saved records per direction, at every step
    count that all of them saved, re-read from their raw weights with `nmt align`'s
    current default reading (records saved under an earlier default follow the new one)."""
    from nmt.align.bidirectional import flip_record, mean_records
    from nmt.align.extract import reread
    from nmt.align.io import load_alignments

    def load(path: Path) -> list:
        return [reread(r) for r in load_alignments(path)]

    rows = []
    for steps in sorted(set(args.steps)):
        paths = [(saved(args.out, f, steps, f), saved(args.out, f, steps, f"{f}_fr-en"))
                 for f in args.ensemble]
        if not all(a.is_file() and b.is_file() for a, b in paths):
            print(f"{steps:5d} skipped: not every family saved records at this step count")
            continue
        forward = mean_records([load(a) for a, _ in paths], {})
        flipped = mean_records([[flip_record(r) for r in load(b)] for _, b in paths],
                               {}, flipped=True)
        rows += score(steps, link_sets(forward, flipped), gold, args.dev, 0.0)
    return rows


def score(steps: int, sets: dict[str, list], gold: list, dev: int, seconds: float
          ) -> list[dict]:
    """AER of every link set on the development prefix and on the rest."""
    from nmt.align.metrics import alignment_error_rate

    rows = []
    for name, links in sets.items():
        d = alignment_error_rate(links[:dev], gold[:dev])
        rest = alignment_error_rate(links[dev:], gold[dev:])
        every = alignment_error_rate(links, gold)
        rows.append({"steps": steps, "links": name, "dev_aer": d["aer"],
                     "rest_aer": rest["aer"], "rest_precision": rest["precision"],
                     "rest_recall": rest["recall"], "all_aer": every["aer"],
                     "adapt_seconds": seconds})
        print(f"{steps:5d} {name:22s} dev {d['aer']:.3f}  rest {rest['aer']:.3f} "
              f"(P {rest['precision']:.3f} R {rest['recall']:.3f})  all {every['aer']:.3f}",
              flush=True)
    return rows


def write(args, lr: float, rows: list[dict]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"adapt_{args.family}"
    stem.with_suffix(".json").write_text(json.dumps({"lr": lr, "dev": args.dev, "rows": rows},
                                                    indent=1) + "\n")
    lines = [f"# Hansards AER against --adapt steps: {args.family} (lr {lr:g})", "",
             f"dev = the first {args.dev} pairs, rest = the other pairs; both directions "
             "adapted on all pairs.", "",
             "| steps | links | dev AER | rest AER | rest P | rest R | all AER | adapt s (both) |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['steps']} | {r['links']} | {r['dev_aer']:.3f} | {r['rest_aer']:.3f} | "
              f"{r['rest_precision']:.3f} | {r['rest_recall']:.3f} | {r['all_aer']:.3f} | "
              f"{r['adapt_seconds']:.0f} |" for r in rows]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {stem}.md")


if __name__ == "__main__":
    main()
