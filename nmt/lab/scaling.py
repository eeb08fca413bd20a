"""Scores that are too large: saturation without 1/sqrt(d_k), overflow without the max shift.

Experiments: saturation, stability. Weights come from the project's
`masked_softmax` and `scaled_dot_product` (both its explicit and fused paths);
the naive exp(x) / sum exp(x) is written out in plain torch as the foil.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import Tensor

from nmt.lab.base import Result, draw, new_figure
from nmt.lab.softmax import CANDIDATES, QUERY, read
from nmt.models.attention import masked_softmax, scaled_dot_product

DIMS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
KEYS, SAMPLES = 16, 400


def _entropy(w: Tensor) -> Tensor:
    """Mean entropy (nats) of the distributions on the last axis."""
    return -(w * w.clamp_min(1e-30).log()).sum(-1).mean()


def _softmax_grad_norm(logits: Tensor, g: Tensor) -> float:
    """Mean || d(g . softmax(z)) / dz || at z = logits: the gradient softmax lets through."""
    z = logits.detach().requires_grad_(True)
    w = masked_softmax(z, torch.ones_like(z, dtype=torch.bool))
    (grad,) = torch.autograd.grad((w * g).sum(), z)
    return float(grad.norm(dim=-1).mean())


def _measure(d: int, gen: torch.Generator) -> list[float]:
    """One row of the sweep: q, k, v ~ N(0, I_d), KEYS keys per query, SAMPLES queries."""
    q = torch.randn(SAMPLES, 1, 1, d, generator=gen)  # (B, h, T, d)
    k = torch.randn(SAMPLES, 1, KEYS, d, generator=gen)  # (B, h, S, d)
    v = torch.randn(SAMPLES, 1, KEYS, d, generator=gen)
    mask = torch.ones(SAMPLES, 1, 1, KEYS, dtype=torch.bool)
    dots = (q @ k.transpose(-2, -1)).squeeze(2)  # (B, 1, S) raw q.k
    explicit, w_scaled = scaled_dot_product(q, k, v, mask, need_weights=True)
    fused, _ = scaled_dot_product(q, k, v, mask, need_weights=False)
    # Unscaled: the same function fed q * sqrt(d), so its 1/sqrt(d) cancels.
    _, w_raw = scaled_dot_product(q * math.sqrt(d), k, v, mask, need_weights=True)
    g = torch.randn(SAMPLES, 1, KEYS, generator=gen)
    return [d, float(dots.var()), float(_entropy(w_raw)), float(_entropy(w_scaled)),
            float(w_raw.amax(-1).mean()), float(w_scaled.amax(-1).mean()),
            _softmax_grad_norm(dots, g), _softmax_grad_norm(dots / math.sqrt(d), g),
            float((fused - explicit).abs().max())]


def saturation(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """var(q.k) grows like d; unscaled softmax saturates (low entropy, one-hot, no gradient)."""
    big = torch.tensor(CANDIDATES, dtype=torch.float64)
    big[0] *= 10
    ten_x = read(torch.tensor(QUERY, dtype=torch.float64), big)[1]
    gen = torch.Generator().manual_seed(3)
    rows = [_measure(d, gen) for d in DIMS]
    at = {r[0]: r for r in rows}
    ratio = [r[1] / r[0] for r in rows]
    passed = (float(ten_x[0]) > 0.999 and at[512][2] < 0.25 * at[512][3]
              and all(0.8 < x < 1.2 for x in ratio) and at[1024][6] < 0.2 * at[1024][7]
              and max(r[8] for r in rows) < 1e-5)
    check = (f"first candidate x10 takes weight {float(ten_x[0]):.5f}; var(q.k)/d stays in "
             f"[{min(ratio):.2f}, {max(ratio):.2f}]; at d = 512 the entropy is {at[512][2]:.3f} "
             f"nats unscaled vs {at[512][3]:.3f} scaled (ln {KEYS} = {math.log(KEYS):.3f}); at "
             f"d = 1024 the gradient through softmax is {at[1024][6]:.4f} vs {at[1024][7]:.4f}; "
             f"fused and explicit paths agree to {max(r[8] for r in rows):.1e}")
    figure = draw(lambda: _plot_saturation(rows), out_dir, "saturation", fmt)
    headers = ["d", "var(q.k)", "entropy raw", "entropy scaled", "max w raw", "max w scaled",
               "grad raw", "grad scaled", "|fused - explicit|"]
    return Result("saturation", headers, rows, [figure], passed, check,
                  {"ten_x_weight": float(ten_x[0]), "entropy_raw_512": at[512][2],
                   "entropy_scaled_512": at[512][3], "grad_raw_1024": at[1024][6],
                   "grad_scaled_1024": at[1024][7]},
                  [f"x10 candidate: weights {ten_x.numpy().round(4).tolist()}",
                   f"{SAMPLES} random queries, {KEYS} keys each; 'raw' = softmax(q.k), "
                   "'scaled' = softmax(q.k / sqrt(d)); grad = mean ||d(g . a)/dz|| for g ~ N(0, I)"])


def _plot_saturation(rows: list[list[float]]):
    fig, axes = new_figure(2, rows=2, height=3.0)
    d = [r[0] for r in rows]
    panels = [("var(q . k)", [(1, "measured")], "d (slope 1)"),
              ("mean entropy (nats)", [(2, "softmax(q.k)"), (3, "softmax(q.k / sqrt d)")], None),
              ("mean largest weight", [(4, "softmax(q.k)"), (5, "softmax(q.k / sqrt d)")], None),
              ("gradient through softmax", [(6, "softmax(q.k)"), (7, "softmax(q.k / sqrt d)")],
               None)]
    for ax, (title, series, ref) in zip(axes, panels):
        for col, label in series:
            ax.plot(d, [r[col] for r in rows], "o-", ms=3, label=label)
        if ref:
            ax.plot(d, d, "--", color="gray", label=ref)
            ax.set_yscale("log")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.set_title(title)
        ax.legend()
    axes[1].axhline(math.log(KEYS), color="gray", ls=":", lw=0.8, label=f"uniform: ln {KEYS}")
    axes[1].legend()
    return fig


def naive_softmax(x: Tensor) -> Tensor:
    """exp(x) / sum exp(x) without subtracting the maximum: overflows past ~88 (float32)."""
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)


def stability(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """softmax(x + c) = softmax(x); the naive form overflows at scores ~ 1000, the
    max-subtracted one (masked_softmax) does not."""
    rows, curves = [], {"naive float32": [], "naive float64": [], "masked_softmax float32": []}
    levels = (1.0, 10.0, 50.0, 88.0, 89.0, 100.0, 500.0, 709.0, 710.0, 1000.0)
    for s in levels:
        x = torch.tensor([s, s - 1, s - 2])
        ws = [naive_softmax(x)[0], naive_softmax(x.double())[0],
              masked_softmax(x, torch.ones(3, dtype=torch.bool))[0]]
        rows.append([s] + [float(w) for w in ws])
        for key, w in zip(curves, ws):
            curves[key].append(float(w))
    reference = torch.softmax(torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64), -1)
    at_1000 = masked_softmax(torch.tensor([1000.0, 999.0, 998.0]), torch.ones(3, dtype=torch.bool))
    naive_1000 = naive_softmax(torch.tensor([1000.0, 999.0, 998.0]))
    ok_err = float((at_1000.double() - reference).abs().max())
    x = torch.randn(8, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    base = masked_softmax(x, torch.ones(8, dtype=torch.bool))
    shifts = (-1000.0, -100.0, -1.0, 1.0, 100.0, 1000.0)
    shift_err = {dt: [float((masked_softmax((x + c).to(dt), torch.ones(8, dtype=torch.bool))
                            - base).abs().max()) for c in shifts]
                 for dt in (torch.float64, torch.float32)}
    passed = (not bool(torch.isfinite(naive_1000).all()) and bool(torch.isfinite(at_1000).all())
              and ok_err < 1e-6 and max(shift_err[torch.float64]) < 1e-12)
    check = (f"at scores [1000, 999, 998] the naive form gives {naive_1000.tolist()}, "
             f"masked_softmax gives {[round(v, 4) for v in at_1000.tolist()]} (= softmax([2, 1, 0]) to "
             f"{ok_err:.1e}); shifting by c in +-1..1000 changes float64 weights by at most "
             f"{max(shift_err[torch.float64]):.1e}")
    notes = ["float32 shifts: " + ", ".join(f"c={c:g}: {e:.1e}" for c, e in
                                           zip(shifts, shift_err[torch.float32]))
             + " (rounding of x + c, not of softmax)"]
    figure = draw(lambda: _plot_stability(levels, curves, shifts, shift_err), out_dir,
                  "stability", fmt)
    return Result("stability", ["top score s", "naive float32", "naive float64",
                                "masked_softmax float32"], rows, [figure], passed, check,
                  {"masked_1000_error": ok_err, "naive_1000_finite": float(torch.isfinite(
                      naive_1000).all()), "shift_error_float64": max(shift_err[torch.float64])},
                  notes)


def _plot_stability(levels, curves, shifts, shift_err):
    fig, (ax, ax2) = new_figure(2)
    for lane, ys in enumerate(curves.values()):
        ok = [x for x, y in zip(levels, ys) if math.isfinite(y)]
        bad = [x for x, y in zip(levels, ys) if not math.isfinite(y)]
        ax.plot(ok, [lane] * len(ok), "o", color="tab:green", label="finite" if lane == 0 else None)
        ax.plot(bad, [lane] * len(bad), "x", color="tab:red", ms=8,
                label="NaN (exp overflowed)" if bad and lane == 0 else None)
    ax.set_yticks(range(len(curves)), list(curves))
    ax.set_ylim(-0.6, len(curves) + 0.2)
    ax.set_xscale("log")
    ax.set_xlabel("top score s (scores s, s-1, s-2)")
    ax.set_title("exp overflows past 88.7 (float32), 709.8 (float64)")
    ax.legend(loc="upper left", ncols=2)
    for dt, errs in shift_err.items():
        ax2.plot([str(int(c)) for c in shifts], [max(e, 1e-18) for e in errs], "o-",
                 label=str(dt).replace("torch.", ""))
    ax2.set_yscale("log")
    ax2.set_xlabel("shift c")
    ax2.set_ylabel("max |softmax(x + c) - softmax(x)|")
    ax2.set_title("shift invariance of masked_softmax")
    ax2.legend()
    return fig
