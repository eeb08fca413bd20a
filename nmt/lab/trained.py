"""Experiments on trained runs (`--run`, repeatable): bottleneck, attention-is-not-explanation.

Without `--run` they use `make demo`'s runs (runs/demo/...) when present and are
skipped otherwise. The intervention goes through `override_weights`
(nmt.models.attention): the model's own decoder runs, only the attention weights
are swapped before the weighted sum.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from nmt.core.errors import NMTError
from nmt.core.rundir import RunDir
from nmt.core.tokens import BOS, EOS, PAD
from nmt.data.batching import pad
from nmt.data.pin import scoring_split
from nmt.decoding.search import greedy
from nmt.lab.base import Result, draw, new_figure, skipped
from nmt.models import MODELS
from nmt.models.attention import override_weights
from nmt.models.base import Seq2Seq
from nmt.models.runs import load_config, load_run

DEMO_BOTTLENECK = (Path("runs/demo/fixed_context"), Path("runs/demo/bahdanau"),
                   Path("runs/demo/transformer"))
DEMO_ATTENTION = (Path("runs/demo/bahdanau"), Path("runs/demo/transformer"))
SENTENCES = 100  # test sentences per run for the intervention
MIN_SENTENCES = 20  # a length bucket is compared only with this many sentences in every run


def _by_length(path: Path) -> tuple[str, bool, list[dict]]:
    """(label, has attention, BLEU-by-length buckets) from a run's scores.json."""

    cfg = load_config(path)
    entry = RunDir(path).read_scores().get(cfg.data.test, {})
    if not entry.get("by_length"):
        raise NMTError(f"{path}: scores.json has no BLEU by length for split "
                       f"'{cfg.data.test}'; run `nmt evaluate --run {path}` first")
    return path.name, MODELS[cfg.model.family].has_attention, entry["by_length"]


def _drop(buckets: list[dict], first: str, last: str) -> float:
    """Relative BLEU loss between two buckets: 1 - BLEU_last / BLEU_first."""
    score = {b["bucket"]: b["bleu"] for b in buckets}
    return 1.0 - score[last] / score[first] if score[first] > 0 else 0.0


def bottleneck(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """BLEU by source length, fixed context vector beside attention models."""
    paths = list(run) if run else [p for p in DEMO_BOTTLENECK if p.is_dir()]
    if not run and len(paths) < 2:
        return skipped("bottleneck", "needs trained runs, a fixed_context one and one with "
                       "attention: `nmt lab run bottleneck --run A --run B` (or `make demo`'s "
                       "runs/demo/*); skipped")
    series = [_by_length(Path(p)) for p in paths]
    buckets = [b["bucket"] for b in series[0][2]]
    counts = [{x["bucket"]: x["sentences"] for x in s[2]} for s in series]
    common = [b for b in buckets if all(c.get(b, 0) >= MIN_SENTENCES for c in counts)]
    if len(common) < 2:
        raise NMTError(f"bottleneck: fewer than two length buckets with {MIN_SENTENCES}+ "
                       "sentences in every run; evaluate a larger test split")
    rows = []
    for bucket in buckets:
        row: list = [bucket]
        for _, _, bs in series:
            hit = next((b for b in bs if b["bucket"] == bucket), None)
            row += [hit["bleu"], hit["sentences"]] if hit else ["-", 0]
        rows.append(row)
    last = common[-1]
    drops = {name: _drop(bs, common[0], last) for name, _, bs in series}
    fixed = [n for n, att, _ in series if not att]
    attn = [n for n, att, _ in series if att]
    passed = (all(drops[f] > drops[a] for f in fixed for a in attn)
              if fixed and attn else None)
    check = (f"relative BLEU loss from {common[0]} to {last} words: "
             + ", ".join(f"{n} {drops[n]:.0%}" for n in drops)
             + ("" if passed is not None else " (needs one run without attention and one with)"))
    figure = draw(lambda: _plot_bottleneck(series), out_dir, "bottleneck", fmt)
    headers = ["source words"] + [h for n, _, _ in series for h in (f"{n} BLEU", "sentences")]
    return Result("bottleneck", headers, rows, [figure], passed, check,
                  {f"drop_{n}": d for n, d in drops.items()},
                  ["runs: " + ", ".join(str(p) for p in paths),
                   "BLEU per bucket comes from each run's scores.json (`nmt evaluate`)"])


def _plot_bottleneck(series):
    fig, (ax,) = new_figure(1, width=6.0)
    for name, att, buckets in series:
        ax.plot([b["bucket"] for b in buckets], [b["bleu"] for b in buckets], "o-" if att else "s--",
                label=f"{name} ({'attention' if att else 'fixed context'})")
    ax.set_xlabel("source length (words)")
    ax.set_ylabel("BLEU")
    ax.set_title("BLEU by source length")
    ax.legend()
    return fig


# ------------------------------------------------------------------- interventions

Override = Callable[[Tensor, Tensor], Tensor]


def permuted(seed: int) -> Override:
    """Shuffle each row's weights among its allowed positions (masked ones stay 0)."""
    gen = torch.Generator().manual_seed(seed)

    def fn(w: Tensor, mask: Tensor) -> Tensor:
        pos = torch.arange(w.size(-1), dtype=w.dtype).expand_as(w)
        inf = torch.full_like(w, float("inf"))
        order = torch.where(mask, pos, inf).argsort(-1)  # allowed positions first, in order
        shuffled = torch.where(mask, torch.rand(w.shape, generator=gen).to(w), inf).argsort(-1)
        return torch.zeros_like(w).scatter(-1, order, w.gather(-1, shuffled))

    return fn


def uniform(w: Tensor, mask: Tensor) -> Tensor:
    """1 / |allowed| on every allowed position."""
    m = mask.to(w.dtype)
    return m / m.sum(-1, keepdim=True).clamp_min(1)


def other_head(w: Tensor, mask: Tensor) -> Tensor:
    """Each head reads with the weights of the next head (w: (B, h, T, S))."""
    return w.roll(1, dims=1)


def previous_layer() -> Override:
    """Layer l reads with layer l-1's weights (layer 0 keeps its own); calls come in
    layer order within one teacher-forced pass."""
    seen: list[Tensor] = []

    def fn(w: Tensor, mask: Tensor) -> Tensor:
        seen.append(w)
        return seen[-2] if len(seen) > 1 else w

    return fn


def js_divergence(lp: Tensor, lq: Tensor) -> Tensor:
    """Jensen-Shannon divergence (nats, in [0, ln 2]) between rows of log-probabilities;
    rounding that would put equal rows a hair below 0 is clamped to 0."""
    p, q = lp.exp(), lq.exp()
    m = 0.5 * (p + q)
    log_m = m.clamp_min(1e-30).log()
    return (0.5 * (torch.xlogy(p, p) - p * log_m).sum(-1)
            + 0.5 * (torch.xlogy(q, q) - q * log_m).sum(-1)).clamp_min(0.0)


def _identity(w: Tensor, mask: Tensor) -> Tensor:
    return w


@torch.no_grad()
def intervene(model: Seq2Seq, src: Tensor, hyps: list[list[int]]) -> dict[str, tuple[float, float]]:
    """Teacher-force the model's own translations `hyps` with its attention weights replaced.

    Returns, per intervention, the mean JS divergence of the next-token distributions
    from the unmodified model's and the share of positions whose argmax token changes.
    The control ("same weights") goes through the hook but returns the weights unchanged.
    """

    tgt_in, tgt_out = pad(hyps, prefix=BOS), pad(hyps, suffix=EOS)
    real = tgt_out != PAD

    def log_probs() -> tuple[Tensor, Tensor | None]:
        logits, attn, _ = model(src, tgt_in, need_attn=True)  # attn (B, L, H, T, S)
        return torch.log_softmax(logits.float(), -1)[real], attn

    base, attn = log_probs()
    makers: dict[str, Callable[[], Override]] = {
        "same weights (control)": lambda: _identity, "random permutation": lambda: permuted(0),
        "uniform": lambda: uniform}
    if attn is not None and attn.size(2) > 1:
        makers["next head's weights"] = lambda: other_head
    if attn is not None and attn.size(1) > 1:
        makers["previous layer's weights"] = previous_layer
    out = {}
    for name, make in makers.items():
        with override_weights(make()):
            lp, _ = log_probs()
        flips = (lp.argmax(-1) != base.argmax(-1)).float().mean()
        out[name] = (float(js_divergence(base, lp).mean()), float(flips))
    return out


def _intervene_run(path: Path) -> dict[str, tuple[float, float]]:
    """Greedy-translate SENTENCES test sentences of a run, then intervene on them."""

    cfg, vocab, model, _ = load_run(path)
    if not model.has_attention:
        raise NMTError(f"{path}: family '{cfg.model.family}' has no attention to replace; "
                       "pass an attention run")
    sources = scoring_split(cfg, path, cfg.data.test, say=lambda text: None)[0]
    src = pad([ids[:200] for ids in vocab.encode_src(sources[:SENTENCES])])
    return intervene(model, src, greedy(model, src))


def not_explanation(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """Swap a trained model's attention weights at decode time and measure how far the
    next-token distribution moves."""
    paths = list(run) if run else [p for p in DEMO_ATTENTION if p.is_dir()]
    if not paths:
        return skipped("attention-is-not-explanation", "needs a trained run with attention: "
                       "`nmt lab run attention-is-not-explanation --run RUN` (or `make demo`'s "
                       "runs/demo/*); skipped")
    results = {Path(p).name: _intervene_run(Path(p)) for p in paths}
    rows = [[name, what, js, flips] for name, res in results.items()
            for what, (js, flips) in res.items()]
    control = max(r[2] for r in rows if r[1].startswith("same"))
    moved = [r for r in rows if not r[1].startswith("same")]
    passed = control < 1e-6
    check = (f"the control through the hook moves nothing (JS {control:.1e}); the swaps move "
             "the next-token distribution by JS " + ", ".join(
                 f"{r[0]}/{r[1]} {r[2]:.3f} ({r[3]:.0%} argmax changed)" for r in moved))
    figure = draw(lambda: _plot_interventions(results), out_dir, "attention_is_not_explanation",
                  fmt)
    return Result("attention-is-not-explanation", ["run", "attention replaced by",
                                                   "mean JS (nats, max ln 2)",
                                                   "argmax token changed"],
                  rows, [figure], passed, check, {"control_js": control},
                  [f"{SENTENCES} test sentences per run, teacher-forced on the model's own "
                   "greedy translation; all attention layers (the Transformer: cross-attention) "
                   "replaced at once"])


def _plot_interventions(results):
    fig, axes = new_figure(2)
    names = list(results)
    whats = [w for w in dict.fromkeys(w for res in results.values() for w in res)
             if not w.startswith("same")]
    width = 0.8 / max(len(names), 1)
    for ax, col, label in ((axes[0], 0, "mean JS divergence (nats)"),
                           (axes[1], 1, "share of argmax tokens changed")):
        for k, name in enumerate(names):
            xs = [i + (k - (len(names) - 1) / 2) * width for i, w in enumerate(whats)
                  if w in results[name]]
            ax.bar(xs, [results[name][w][col] for w in whats if w in results[name]], width,
                   label=name)
        ax.set_xticks(range(len(whats)), [w.replace(" ", "\n", 1) for w in whats], fontsize=7)
        ax.set_ylabel(label)
        ax.legend()
    axes[0].set_title("how far the output moves when the weights are swapped")
    return fig
