"""Test BLEU of trained runs alone, averaged over their last N kept checkpoints, and as
an ensemble; and one table of beam, greedy and sampled outputs (docs/benchmarks.md).

    nmt train -c configs/multi30k/transformer.yaml --set train.threads=1 \
        --set train.keep_last=5 --set train.valid_every=100 &
    nmt train -c configs/multi30k/bahdanau.yaml --set train.threads=1 \
        --set train.keep_last=5 --set train.valid_every=100 &
    wait
    python benchmarks/averaging_ensemble.py runs/transformer runs/bahdanau --last 5

The runs must share their vocabulary (both Multi30k configs do). Prints a Markdown table
and writes it, the decoding table and a figure to --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--last", type=int, default=5, help="checkpoints to average")
    parser.add_argument("--split", default=None, help="default: the runs' test split")
    parser.add_argument("--sentences", type=int, default=4, help="rows of the decoding table")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("reports/bench-average"))
    args = parser.parse_args()

    import torch

    import nmt
    from nmt.core.checkpoint import average_run
    from nmt.core.errors import NMTError
    from nmt.data.corpora import load_split
    from nmt.decoding.api import Sampling
    from nmt.decoding.evaluate import evaluate_model

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for run in args.runs:
            for checkpoint in ("best", "averaged"):
                if checkpoint == "averaged":
                    _, used = average_run(run, args.last)
                model = nmt.load(run, checkpoint=checkpoint)
                split = args.split or model.cfg.data.test
                entry = evaluate_model(model, split, write=False)
                what = ("best validation checkpoint" if checkpoint == "best" else
                        f"mean of {', '.join(p.stem for p in used)}")
                rows.append((run.name, what, entry))
                print(f"{run.name:<14} {what:<60} BLEU {entry['bleu']:.2f} chrF "
                      f"{entry['chrf']:.2f}", flush=True)
        for checkpoint in ("best", "averaged"):
            model = nmt.load(*args.runs, checkpoint=checkpoint)
            entry = evaluate_model(model, split, write=False)
            name = " + ".join(r.name for r in args.runs)
            rows.append((name, f"ensemble of the {checkpoint} checkpoints", entry))
            print(f"{name:<14} ensemble ({checkpoint}) BLEU {entry['bleu']:.2f} chrF "
                  f"{entry['chrf']:.2f}", flush=True)
    except NMTError as exc:
        sys.exit(f"averaging_ensemble: {exc}")
    table = ["| run | checkpoint | test BLEU | test chrF |", "|---|---|---|---|"]
    table += [f"| {r} | {w} | {e['bleu']:.2f} | {e['chrf']:.2f} |" for r, w, e in rows]
    table.append(f"\nsacreBLEU: `{rows[0][2]['bleu_signature']}`, beam "
                 f"{rows[0][2]['beam']}, {rows[0][2]['sentences']} sentences of `{split}`")
    (args.out / "bleu.md").write_text("\n".join(table) + "\n")
    (args.out / "bleu.json").write_text(json.dumps(
        [{"run": r, "checkpoint": w, **e} for r, w, e in rows], indent=2) + "\n")
    print("\n".join(table))

    model = nmt.load(args.runs[0])
    cfg = model.cfg
    sources, refs = load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair, split)
    picks = sorted(range(len(sources)), key=lambda i: len(sources[i].split()))[
        len(sources) // 2: len(sources) // 2 + args.sentences]  # mid-length sentences
    texts = [sources[i] for i in picks]
    outputs = {"beam 5": model.translate(texts, beam=5), "greedy": model.translate(texts, beam=1)}
    for seed in (1, 2):
        outputs[f"top-k 10, T 1, seed {seed}"] = model.translate(
            texts, sampling=Sampling(top_k=10, seed=seed))
    outputs["top-p 0.9, T 0.7, seed 1"] = model.translate(
        texts, sampling=Sampling(top_p=0.9, temperature=0.7, seed=1))
    lines = [f"Decoding {args.runs[0].name} ({split}, sentences {picks}):", ""]
    for k, i in enumerate(picks):
        lines += [f"**{sources[i]}**", "", "| decoding | output |", "|---|---|",
                  f"| reference | {refs[i]} |"]
        lines += [f"| {how} | {out[k].text} |" for how, out in outputs.items()]
        lines.append("")
    (args.out / "decoding.md").write_text("\n".join(lines))
    print("\n".join(lines))
    plot(outputs, texts, [refs[i] for i in picks], args.out / "decoding.png")
    print(f"wrote {args.out}")


def plot(outputs: dict, sources: list[str], refs: list[str], path: Path) -> None:
    """One panel of text per sentence: the reference, then each decoding's output."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = len(outputs) + 2
    fig, axes = plt.subplots(len(sources), 1, figsize=(11, 0.42 * rows * len(sources)))
    for ax, source, ref, k in zip(axes if len(sources) > 1 else [axes], sources, refs,
                                  range(len(sources))):
        ax.axis("off")
        lines = [("source", source), ("reference", ref)] + [
            (how, out[k].text) for how, out in outputs.items()]
        for row, (how, text) in enumerate(lines):
            y = 1 - (row + 0.5) / rows
            ax.text(0.0, y, how, fontsize=8, weight="bold", va="center",
                    color="black" if row < 2 else "tab:blue")
            ax.text(0.22, y, text, fontsize=8, va="center")
    fig.suptitle("beam search, greedy search and sampling on the same sentences", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
