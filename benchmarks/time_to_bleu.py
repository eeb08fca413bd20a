"""Time to BLEU: two families trained at once for the same wall-clock budget, one thread
each (the README's protocol), then every test split of the corpus decoded with beam 5
(docs/benchmarks.md).

    python benchmarks/time_to_bleu.py transformer bahdanau --seed 1
    python benchmarks/time_to_bleu.py luong_general fixed_context --seed 2 --minutes 20
    python benchmarks/time_to_bleu.py --report            # the table of every result so far

Families are config stems under configs/multi30k/ (or paths to YAML files). Each result
(steps, training tokens/s, validation BLEU over time, test BLEU/chrF with sacreBLEU's
signatures, and the same for the mean of the last kept checkpoints) is appended to
<out>/results.jsonl; <out>/time_to_bleu.md (the median over seeds per family, every
seed listed) and <out>/validation.png (validation BLEU against minutes) are rewritten
from all results. Needs the corpus imported (`nmt data download multi30k --pair de-en`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NMT = [sys.executable, "-m", "nmt"]


def config_path(family: str) -> Path:
    path = Path(family)
    if path.suffix in (".yaml", ".yml"):
        return path
    return ROOT / "configs" / "multi30k" / f"{family}.yaml"


def check_data(families: list[str]) -> None:
    """A missing config or corpus stops here with nmt's one-line error, before training."""
    from nmt.core.errors import NMTError
    from nmt.data.corpora import load_split
    from nmt.models.checks import load_config

    try:
        for family in families:
            cfg = load_config(config_path(family))
            load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair, cfg.data.valid)
    except NMTError as err:
        sys.exit(f"time_to_bleu: {err}")


def train_pair(families: list[str], args) -> list[Path]:
    """Start one training per family at once (one thread each) and wait for all."""
    check_data(families)
    runs, procs = [], []
    args.out.mkdir(parents=True, exist_ok=True)
    for family in families:
        name = f"{Path(family).stem}_s{args.seed}"
        runs.append(args.runs_dir / name)
        sets = [f"runs_dir={args.runs_dir}", f"name={name}", "train.threads=1",
                f"train.seed={args.seed}", f"train.max_minutes={args.minutes}",
                f"train.keep_last={args.average}"] + args.set
        cmd = NMT + ["train", "-c", str(config_path(family)), "--no-evaluate"]
        for s in sets:
            cmd += ["--set", s]
        log = open(args.out / f"{name}.log", "w")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env))
        print("started:", " ".join(cmd[2:]), flush=True)
    codes = [p.wait() for p in procs]
    for run, code in zip(runs, codes):
        if code:
            sys.exit(f"training {run} failed (exit {code}): see {args.out / (run.name + '.log')}")
    return runs


def test_splits(model) -> list[str]:
    """The test splits the run's corpus holds (its manifest), the config's own first."""
    from nmt.data.corpora import corpus_dir

    cfg = model.cfg
    directory = corpus_dir(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair)
    manifest = json.loads((directory / "manifest.json").read_text())
    names = sorted(s for s in manifest["splits"] if s.startswith("test"))
    return [cfg.data.test] + [s for s in names if s != cfg.data.test]


def evaluate(run: Path, average: int) -> dict:
    """Test scores of the best checkpoint (and of the mean of the last kept ones)."""
    import nmt
    from nmt.core.checkpoint import average_run
    from nmt.core.machine import cpu_model
    from nmt.core.rundir import RunDir
    from nmt.decoding.evaluate import evaluate_model

    metrics = RunDir(run).read_metrics()
    train = [m for m in metrics if m["kind"] == "train"]
    valid = [m for m in metrics if m["kind"] == "valid"]
    model = nmt.load(run)
    data = next((m for m in metrics if m["kind"] == "data"), {})
    rss = [(m["elapsed"], m["rss_mib"]) for m in train if m.get("rss_mib")]
    at_2 = next((r for t, r in rss if t >= 120), None)
    result = {"run": str(run), "family": run.name.rsplit("_s", 1)[0],
              "date": time.strftime("%F"), "machine": f"{cpu_model()}, {os.cpu_count()} cores",
              "precision": data.get("precision"), "rss_2min_mib": at_2,
              "rss_end_mib": rss[-1][1] if rss else None,
              "seed": model.cfg.train.seed, "minutes": model.cfg.train.max_minutes,
              "steps": valid[-1]["step"], "tokens_per_s": round(valid[-1]["train_tokens_per_s"]),
              "valid": [(round(m["elapsed"] / 60, 2), m["step"], m["bleu"]) for m in valid],
              "final_lr": train[-1]["lr"] if train else None, "test": {}, "averaged": {}}
    splits = test_splits(model)
    for split in splits:
        entry = evaluate_model(model, split, write=False)
        result["test"][split] = {k: entry[k] for k in ("bleu", "chrf", "bleu_signature",
                                                       "chrf_signature")}
    kept = sorted((run / "checkpoints").glob("step*.pt"))
    if average > 1 and len(kept) > 1:
        _, used = average_run(run, average)
        result["averaged_over"] = [p.stem for p in used]
        averaged = nmt.load(run, checkpoint="averaged")
        for split in splits:
            entry = evaluate_model(averaged, split, write=False)
            result["averaged"][split] = {k: entry[k] for k in ("bleu", "chrf")}
    return result


def report(out: Path) -> str:
    """The Markdown table of every result in results.jsonl, and the validation plot."""
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    results = list({(r["family"], r["seed"]): r for r in results}.values())  # a re-run: its last
    families = list(dict.fromkeys(r["family"] for r in results))
    splits = list(dict.fromkeys(s for r in results for s in r["test"]))
    lines = ["| family | seeds | precision | steps | tokens/s | RSS MiB at 2 min → end | "
             "final valid BLEU | " +
             " | ".join(f"{s} BLEU (median) | per seed | chrF" for s in splits) +
             " | averaged (median) |",
             "|---" * (8 + 3 * len(splits)) + "|"]
    for family in families:
        rows = sorted((r for r in results if r["family"] == family), key=lambda r: r["seed"])
        mib = lambda v: f"{v:,.0f}" if v else "?"  # noqa: E731
        cells = [family, ", ".join(str(r["seed"]) for r in rows),
                 "/".join(str(r.get("precision") or "?") for r in rows),
                 "/".join(str(r["steps"]) for r in rows),
                 "/".join(str(r["tokens_per_s"]) for r in rows),
                 " / ".join(f"{mib(r.get('rss_2min_mib'))} → {mib(r.get('rss_end_mib'))}"
                            for r in rows),
                 "/".join(f"{r['valid'][-1][2]:.1f}" for r in rows)]
        for split in splits:
            bleu = [r["test"][split]["bleu"] for r in rows if split in r["test"]]
            chrf = [r["test"][split]["chrf"] for r in rows if split in r["test"]]
            cells += [f"**{statistics.median(bleu):.2f}**", "/".join(f"{b:.2f}" for b in bleu),
                      f"{statistics.median(chrf):.2f}"]
        avg = [r["averaged"][splits[0]]["bleu"] for r in rows if r.get("averaged")]
        cells.append(f"{statistics.median(avg):.2f}" if avg else "-")
        lines.append("| " + " | ".join(cells) + " |")
    first = results[-1]["test"][splits[0]]
    lines += ["", f"BLEU `{first['bleu_signature']}`, chrF `{first['chrf_signature']}`; "
              "beam 5; the best validation checkpoint; averaged: the mean of the last kept "
              "checkpoints (`train.keep_last`); the median of two seeds is their mean. "
              "Measured on " + "; ".join(sorted({f"{r.get('date', '?')}, {r.get('machine', '?')}"
                                                 for r in results})) + "."]
    text = "\n".join(lines) + "\n"
    (out / "time_to_bleu.md").write_text(text)
    plot(results, out / "validation.png")
    return text


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours = {}
    for r in results:
        colour = colours.setdefault(r["family"], f"C{len(colours)}")
        minutes = [v[0] for v in r["valid"]]
        bleu = [v[2] for v in r["valid"]]
        ax.plot(minutes, bleu, marker="o", ms=3, color=colour, alpha=0.85,
                label=r["family"] if r["family"] not in ax.get_legend_handles_labels()[1]
                else None)
    ax.set_xlabel("minutes of training (one thread, validation included)")
    ax.set_ylabel("validation BLEU (greedy)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("families", nargs="*", help="config stems under configs/multi30k/")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--average", type=int, default=0,
                        help="also score the mean of the last N kept checkpoints (0: no)")
    parser.add_argument("--set", action="append", default=[], help="a config override")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs/bench-bleu"))
    parser.add_argument("--out", type=Path, default=Path("reports/bench-bleu"))
    parser.add_argument("--report", action="store_true", help="only rewrite the table")
    args = parser.parse_args()
    if not args.report:
        if not args.families:
            parser.error("name the families to train (e.g. transformer bahdanau), or --report")
        import torch

        runs = train_pair(args.families, args)
        torch.set_num_threads(2)
        for run in runs:
            result = evaluate(run, args.average)
            with open(args.out / "results.jsonl", "a") as f:
                f.write(json.dumps(result) + "\n")
            print(run.name, {s: v["bleu"] for s, v in result["test"].items()}, flush=True)
    if not (args.out / "results.jsonl").exists():
        sys.exit(f"{args.out / 'results.jsonl'}: no results yet; train a pair first")
    print(report(args.out))


if __name__ == "__main__":
    main()
