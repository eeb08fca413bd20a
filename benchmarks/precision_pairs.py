"""bf16 against fp32, recipe by recipe (docs/experiments/2026-12-03-precision.md): each
config trained twice from the same seed for the same number of steps, once per precision,
the two side by side with one thread each; then the last validation BLEU of each and, on a
corpus with gold alignments (the synthetic one), AER of 200 test sentences.

    python benchmarks/precision_pairs.py configs/synth/*.yaml --steps 1000
    python benchmarks/precision_pairs.py configs/hansards/*.yaml --steps 300 --seeds 1

The runs go to runs/precision/<folder>/<family>_<precision>_s<seed>; the table to
reports/precision/<folder>.md. A run already trained to its steps is read, not trained again.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from nmt.core.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
NMT = [sys.executable, "-m", "nmt"]
PRECISIONS = ("fp32", "bf16")


def last_valid(run: Path) -> dict | None:
    valid = [r for r in RunDir(run).read_metrics() if r.get("kind") == "valid"]
    return valid[-1] if valid else None


def trained(run: Path, steps: int) -> bool:
    return (last_valid(run) or {}).get("step") == steps


def train_pair(config: Path, seed: int, steps: int, runs_dir: Path, logs: Path) -> list[Path]:
    """Both precisions of one config and seed, side by side, one thread each."""
    runs, procs = [], []
    for precision in PRECISIONS:
        name = f"{config.stem}_{precision}_s{seed}"
        runs.append(runs_dir / name)
        if trained(runs_dir / name, steps):
            continue
        sets = [f"runs_dir={runs_dir}", f"name={name}", f"train.precision={precision}",
                f"train.seed={seed}", "train.threads=1", f"train.max_steps={steps}",
                "train.max_minutes=0", f"train.valid_every={steps}"]
        cmd = [*NMT, "train", "--config", str(config), "--no-evaluate"]
        for s in sets:
            cmd += ["--set", s]
        log = open(logs / f"{name}.log", "w")
        procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)))
    for name, proc in procs:
        if proc.wait():
            sys.exit(f"training {name} failed: see {logs / (name + '.log')}")
    return runs


def aer(run: Path, out: Path) -> float | None:
    """AER of 200 test sentences against the corpus's gold; None for a family without
    attention (fixed_context) or a corpus without gold."""
    from nmt.models import MODELS
    from nmt.models.checks import load_config

    if not MODELS[load_config(run / "config.yaml").model.family].has_attention:
        return None
    done = subprocess.run([*NMT, "align", "--run", str(run), "--split", "test", "--limit", "200",
                           "--out", str(out)], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"nmt align --run {run} failed: {done.stderr.strip().splitlines()[-1:]}")
    summary = json.loads((out / "summary.json").read_text())
    value = next(iter(summary.values())).get("aer")
    return None if value is None else round(value, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--no-aer", action="store_true", help="skip the alignments")
    args = parser.parse_args()
    folder = args.configs[0].parent.name
    runs_dir = ROOT / "runs" / "precision" / folder
    out = ROOT / "reports" / "precision"
    logs = out / "logs" / folder
    logs.mkdir(parents=True, exist_ok=True)
    rows = []
    for config in args.configs:
        for seed in args.seeds:
            print(f"precision pairs: {config} seed {seed}", file=sys.stderr, flush=True)
            pair = train_pair(config, seed, args.steps, runs_dir, logs)
            row = {"config": str(config), "seed": seed, "steps": args.steps}
            for precision, run in zip(PRECISIONS, pair):
                valid = last_valid(run)
                row[precision] = {"valid_bleu": valid["bleu"], "valid_loss":
                                  round(valid["valid_loss"], 3)}
                if config.parent.name in ("synth", "demo") and not args.no_aer:
                    row[precision]["aer"] = aer(run, out / "align" / run.name)
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out / f"{folder}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = [f"bf16 against fp32 at {args.steps} steps ({folder}; seeds "
             f"{', '.join(map(str, args.seeds))}; one thread each, side by side): last "
             "validation BLEU (greedy) / validation loss" + (" / AER of 200 test sentences"
                                                            if folder in ("synth", "demo")
                                                            else ""), "",
             "| config | seed | fp32 | bf16 | bf16 − fp32 BLEU |", "|---|---|---|---|---|"]
    for r in rows:
        cells = [" / ".join("—" if v is None else str(v) for v in r[p].values())
                 for p in PRECISIONS]
        lines.append(f"| {Path(r['config']).stem} | {r['seed']} | {cells[0]} | {cells[1]} | "
                     f"{r['bf16']['valid_bleu'] - r['fp32']['valid_bleu']:+.2f} |")
    text = "\n".join(lines) + "\n"
    (out / f"{folder}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
