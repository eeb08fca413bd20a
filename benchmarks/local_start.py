"""Where local attention starts: p_t, its window's cover of a global model's attention, and
the gradient reaching the position predictor over a recipe's first steps, per seed.

Luong et al.'s (2015) local-p predicts p_t = S * sigmoid(v_p^T tanh(W_p h_t)) and reads only
[p_t - D, p_t + D]. This trains a local config for --steps steps exactly as `nmt train` does
(the same batches, precision and seed, one thread) and every --every steps measures, on the
first --sentences validation pairs, teacher-forced in eval mode:

- position: mean p_t / S;
- spread: the range of p_t over a sentence's target positions, over S (the diagonal's is
  about (T - 1) / T; a window that does not move with t has 0);
- diagonal: mean |p_t - (t + 1/2) S / T|, pieces from the line where the source position
  scales with the target position;
- cover: the share of a reference global model's attention (--reference, a trained run on
  the same corpus and vocabulary) that falls inside the window, mean over target positions;
- saturated: the share of steps with p_t / S below 0.02 or above 0.98;
- grad: the mean norm of the loss's gradient reaching v_p and W_p over the last --every
  steps (before clipping), and the training loss over them.

The reference's own cover by local-m's window (p_t = t) and by the diagonal's window is
printed once, as the yardsticks. Results: OUT/local_start.jsonl and OUT/local_start.png.
The findings: docs/experiments/2026-12-05-local-p-start.md.

Usage: python benchmarks/local_start.py CONFIG --reference RUN [--seeds 1 2 3]
       [--steps 100] [--every 10] [--sentences 200] [--set KEY=VALUE ...] [--out DIR]
       python benchmarks/local_start.py --replot JSONL [JSONL ...] --out DIR [--label L ...]
       (one figure from earlier results, each file's runs labelled L)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from nmt.core.tokens import PAD
from nmt.data.batching import collate
from nmt.models.attention import LocalWindow, supervised


def _batches(src: list, tgt: list, size: int = 50) -> list:
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    return [collate([src[i] for i in order[k:k + size]], [tgt[i] for i in order[k:k + size]])
            for k in range(0, len(order), size)]


def recorded_centres(model, batch) -> torch.Tensor:
    """p_t (B, T) of every decoder step, teacher-forced, in eval mode."""
    seen: list[torch.Tensor] = []
    original = LocalWindow._position

    def recording(self, query, step, mask):
        out = original(self, query, step, mask)
        seen.append(out[0].detach().float())
        return out

    LocalWindow._position = recording
    try:
        with torch.no_grad():
            model.eval()
            model(batch.src, batch.tgt_in)
    finally:
        LocalWindow._position = original
    return torch.cat(seen, dim=1) if len(seen) > 1 else seen[0]


def reference_maps(run: str, batches: list) -> list[torch.Tensor]:
    """The reference global model's attention (B, T, S) on each batch, teacher-forced."""
    from nmt.models.runs import load_run

    _, _, model, _ = load_run(run)
    model.eval()
    maps = []
    with torch.no_grad():
        for b in batches:
            _, attn, _ = model(b.src, b.tgt_in, need_attn=True)
            maps.append(supervised(attn, 0, None).float())
    return maps


def _geometry(batch):
    """Real target positions (B, T), source lengths S (B, 1), target lengths T (B, 1), t."""
    real = batch.tgt_in != PAD
    s_len = (batch.src != PAD).sum(1, keepdim=True).float()
    t_len = real.sum(1, keepdim=True).float()
    t = torch.arange(real.size(1)).float().unsqueeze(0).expand_as(real)
    return real, s_len, t_len, t


def cover(ref: torch.Tensor, centre: torch.Tensor, window: int) -> torch.Tensor:
    """Share of ref (B, T, S) inside |s - centre| <= window, per position (B, T)."""
    s = torch.arange(ref.size(-1)).float().view(1, 1, -1)
    return (ref * ((s - centre.unsqueeze(-1)).abs() <= window)).sum(-1)


def measure(model, batches: list, refs: list, window: int) -> dict:
    sums = {"position": 0.0, "diagonal": 0.0, "cover": 0.0, "saturated": 0.0}
    spreads, n = [], 0
    for b, ref in zip(batches, refs):
        p = recorded_centres(model, b)
        real, s_len, t_len, t = _geometry(b)
        share = p / s_len
        diag = (t + 0.5) * s_len / t_len
        sums["position"] += float(share[real].sum())
        sums["diagonal"] += float((p - diag).abs()[real].sum())
        sums["cover"] += float(cover(ref, p, window)[real].sum())
        sums["saturated"] += float(((share < 0.02) | (share > 0.98))[real].sum())
        n += int(real.sum())
        big, small = share.masked_fill(~real, -1).amax(1), share.masked_fill(~real, 2).amin(1)
        spreads.extend((big - small).tolist())
    return {**{k: v / n for k, v in sums.items()}, "spread": float(np.mean(spreads))}


def yardsticks(batches: list, refs: list, window: int) -> dict:
    """The reference's cover by local-m's window (p_t = t, clamped) and the diagonal's."""
    out = {"local-m": 0.0, "diagonal": 0.0}
    n = 0
    for b, ref in zip(batches, refs):
        real, s_len, t_len, t = _geometry(b)
        out["local-m"] += float(cover(ref, torch.minimum(t, s_len - 1), window)[real].sum())
        out["diagonal"] += float(cover(ref, (t + 0.5) * s_len / t_len, window)[real].sum())
        n += int(real.sum())
    return {k: v / n for k, v in out.items()}


def trace(config: str, seed: int, args, batches: list, refs: list) -> list[dict]:
    """Train seed `seed` for args.steps steps; a row every args.every steps (and step 0)."""
    from nmt.models.checks import load_config
    from nmt.training.trainer import Trainer

    stem = Path(config).stem
    cfg = load_config(config, [*args.set, f"train.seed={seed}", "train.threads=1",
                               f"train.max_steps={args.steps}", "train.max_minutes=0",
                               f"name={stem}_s{seed}",
                               f"runs_dir={args.out / 'runs'}"])
    trainer = Trainer(cfg, quiet=True)
    model = trainer.model
    local = next(m for m in model.modules() if isinstance(m, LocalWindow))
    grads = {"v_p": [], "W_p": []}
    for name in grads:
        if hasattr(local, name):
            getattr(local, name).weight.register_hook(
                lambda g, name=name: grads[name].append(float(g.float().norm())))
    losses, rows = [], []
    window = cfg.model.window

    def row(step: int) -> None:
        r = {"config": stem, "seed": seed, "step": step, **measure(model, batches, refs, window),
             "loss": float(np.mean(losses)) if losses else None}
        for name, values in grads.items():
            r[f"grad_{name}"] = float(np.mean(values)) if values else None
            values.clear()
        losses.clear()
        rows.append(r)
        print(json.dumps(r), flush=True)

    row(0)
    original = trainer.train_step

    def stepping(batch, used=0.0, real=True):  # Trainer.train_step's signature
        loss = original(batch, used, real)
        if loss is not None:
            losses.append(loss)
        if (trainer.progress.step + 1) % args.every == 0:
            row(trainer.progress.step + 1)
        return loss

    trainer.train_step = stepping
    trainer.fit()
    return rows


def replot(files: list[Path], labels: list[str], out: Path) -> None:
    rows = []
    for n, path in enumerate(files):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if "step" in r:
                rows.append({**r, "config": labels[n] if n < len(labels) else r["config"]})
    out.mkdir(parents=True, exist_ok=True)
    plot(rows, out / "local_start.png")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("cover", "reference attention inside the window"),
            ("diagonal", "|p_t - diagonal| (pieces)"), ("spread", "range of p_t / S"),
            ("grad_v_p", "gradient norm reaching v_p")]
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3.4))
    runs = sorted({(r["config"], r["seed"]) for r in rows})
    for ax, (key, title) in zip(axes, keys):
        for config, seed in runs:
            xs = [(r["step"], r[key]) for r in rows
                  if (r["config"], r["seed"]) == (config, seed) and r[key] is not None]
            if xs:
                ax.plot(*zip(*xs), marker=".", label=f"{config} seed {seed}")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("training step")
        if key.startswith("grad"):
            ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*")
    parser.add_argument("--reference", help="a trained global run")
    parser.add_argument("--replot", type=Path, nargs="*", default=[])
    parser.add_argument("--label", action="append", default=[])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--out", type=Path, default=Path("reports/local-start"))
    args = parser.parse_args()
    if args.replot:
        return replot(args.replot, args.label, args.out)
    if not (args.configs and args.reference):
        parser.error("give CONFIG and --reference RUN, or --replot")
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    from nmt.models.runs import load_run

    _, vocab, _, _ = load_run(args.reference)
    from nmt.data.corpora import load_split
    cfg = load_run(args.reference)[0]
    src, tgt = load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair, cfg.data.valid)
    n = args.sentences
    batches = _batches(vocab.encode_src(src[:n]), vocab.encode_tgt(tgt[:n]))
    refs = reference_maps(args.reference, batches)
    sticks = {"yardstick": True, **{f"D={cfg_w}": yardsticks(batches, refs, cfg_w)
                                    for cfg_w in (5, 10)}}
    print(json.dumps(sticks), flush=True)
    rows = [sticks]
    for config in args.configs:
        for seed in args.seeds:
            rows.extend(trace(config, seed, args, batches, refs))
    with open(args.out / "local_start.jsonl", "a") as out:
        for r in rows:
            out.write(json.dumps(r) + "\n")
    plot([r for r in rows if "step" in r], args.out / "local_start.png")


if __name__ == "__main__":
    main()
