"""One attention read on hand-sized numbers: scores -> softmax -> weighted sum.

Experiments: softmax-toy, argmax-vs-softmax, stability, gradient-check,
identical-sources. The read itself is the project's `attend` / `masked_softmax`
(nmt.models.attention); argmax and the naive exp are written out in plain torch
because they are the deliberately bare foils.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from nmt.lab.base import Result, draw, new_figure
from nmt.models.attention import attend

QUERY = [1.0, 0.0]
CANDIDATES = [[1.0, 0.1], [0.5, 0.5], [0.0, 1.0], [-0.8, 0.2]]  # key = value
ESSAY_WEIGHTS = [0.451, 0.273, 0.165, 0.111]  # printed by one essay for this example


def read(query: Tensor, candidates: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Dot-product scores e_j = q . k_j, weights a = softmax(e), output c = sum_j a_j v_j.

    query (D,), candidates (S, D) -> scores (S,), weights (S,), output (D,).
    """
    scores = candidates @ query
    mask = torch.ones(1, 1, len(candidates), dtype=torch.bool)
    out, weights = attend(scores.view(1, 1, -1), candidates.unsqueeze(0), mask)
    return scores, weights.view(-1), out.view(-1)


def toy(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """The 4-candidate example: the weights that follow from its code, beside the essay's."""
    q, cands = torch.tensor(QUERY, dtype=torch.float64), torch.tensor(CANDIDATES, dtype=torch.float64)
    scores, weights, out = read(q, cands)
    essay = torch.tensor(ESSAY_WEIGHTS, dtype=torch.float64)
    # Scores the printed weights imply (log-ratios to the first, whose score is 1).
    implied = 1.0 + torch.log(essay / essay[0])
    rows = [[f"[{c[0]:g}, {c[1]:g}]", float(s), float(w), float(e), float(i)]
            for c, s, w, e, i in zip(CANDIDATES, scores, weights, essay, implied)]
    err_ours = float((weights - torch.tensor([0.467, 0.283, 0.172, 0.077])).abs().max())
    err_essay = float((weights - essay).abs().max())
    passed = err_ours < 1e-3 and err_essay > 1e-2
    check = (f"softmax of the scores gives {weights.numpy().round(3).tolist()} "
             f"(max |diff| to [0.467, 0.283, 0.172, 0.077] = {err_ours:.1e}); the essay's "
             f"printed weights are off by up to {err_essay:.3f}: they imply a 4th score of "
             f"{implied[3]:.2f} instead of {scores[3]:.2f}")
    notes = [f"output c = sum_j a_j v_j = [{out[0]:.3f}, {out[1]:.3f}], inside the hull "
             "of the candidates (a convex combination)"]

    def plot():
        fig, (ax, ax2) = new_figure(2)
        x = torch.arange(4).numpy()
        ax.bar(x - 0.2, weights.numpy(), 0.4, label="softmax of the scores (this code)")
        ax.bar(x + 0.2, essay.numpy(), 0.4, label="printed in the essay", color="tab:gray")
        ax.set_xticks(x.tolist(), [f"k{j + 1} {CANDIDATES[j]}" for j in range(4)], fontsize=7)
        ax.set_ylabel("weight")
        ax.set_title("weights for query [1, 0]")
        ax.legend()
        c = cands.numpy()
        ax2.fill(c[[0, 1, 2, 3], 0], c[[0, 1, 2, 3], 1], alpha=0.15, label="hull of the values")
        ax2.scatter(c[:, 0], c[:, 1], s=400 * weights.numpy() + 10, label="candidates (size = weight)")
        ax2.annotate("", xy=QUERY, xytext=(0, 0), arrowprops={"arrowstyle": "->"})
        ax2.text(0.5, -0.1, "query [1, 0]", ha="center", fontsize=8)
        ax2.scatter([out[0]], [out[1]], marker="*", s=150, color="tab:red", label="output c")
        ax2.set_xlim(-1.0, 1.2)
        ax2.set_ylim(-0.6, 1.15)
        ax2.set_aspect("equal")
        ax2.set_title("output = weighted sum of the values")
        ax2.legend(loc="lower left", fontsize=7)
        return fig

    figure = draw(plot, out_dir, "softmax_toy", fmt)
    return Result("softmax-toy", ["candidate", "score q.k", "weight (code)", "weight (essay)",
                                  "score the essay implies"], rows, [figure], passed, check,
                  {"max_err_correct": err_ours, "max_err_essay": err_essay}, notes)


def _line_read(t: Tensor, hard: bool) -> Tensor:
    """Output of the read for query q(t) = [1, 0] + t [-1, 1]: softmax (project) or argmax."""
    cands = torch.tensor(CANDIDATES, dtype=torch.float64)
    q = torch.tensor(QUERY, dtype=torch.float64) + t * torch.tensor([-1.0, 1.0], dtype=torch.float64)
    if not hard:
        return read(q, cands)[2]
    onehot = torch.nn.functional.one_hot((cands @ q).argmax(), len(cands)).to(cands.dtype)
    return onehot @ cands  # the one-hot weights carry no gradient back to q


def _sweep(ts: Tensor, hard: bool, h: float = 1e-5) -> dict[str, Tensor]:
    """First output coordinate, its autograd derivative and its central difference along t."""
    out, auto, fd = [], [], []
    for t in ts:
        t = t.clone().requires_grad_(True)
        y = _line_read(t, hard)[0]
        grad = torch.autograd.grad(y, t, allow_unused=True)[0] if y.requires_grad else None
        out.append(float(y.detach()))
        auto.append(0.0 if grad is None else float(grad))
        t0 = t.detach()
        fd.append(float(_line_read(t0 + h, hard)[0] - _line_read(t0 - h, hard)[0]) / (2 * h))
    return {key: torch.tensor(vals, dtype=torch.float64)
            for key, vals in (("out", out), ("auto", auto), ("fd", fd))}


def _switch_points(ts: Tensor, out: Tensor) -> list[float]:
    """Where the argmax read jumps: bisect each grid interval whose output changes."""
    points = []
    for i in torch.nonzero(out[1:] != out[:-1]).flatten().tolist():
        lo, hi = ts[i].clone(), ts[i + 1].clone()
        for _ in range(60):
            mid = (lo + hi) / 2
            same = _line_read(mid, hard=True)[0] == _line_read(lo, hard=True)[0]
            lo, hi = (mid, hi) if same else (lo, mid)
        points.append(float((lo + hi) / 2))
    return points


def argmax_vs_softmax(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """Move the query along a line: the argmax read is piecewise constant with zero
    gradient almost everywhere; the softmax read is smooth and autograd matches
    finite differences."""
    ts = torch.linspace(-1.0, 2.0, 601, dtype=torch.float64)
    sweeps = {"softmax": _sweep(ts, hard=False), "argmax": _sweep(ts, hard=True)}
    xs = ts.numpy()
    switches = _switch_points(ts, sweeps["argmax"]["out"])
    at_switch = {name: _sweep(torch.tensor(switches, dtype=torch.float64), name == "argmax")
                 for name in sweeps}
    rows = []
    for name, sw in sweeps.items():
        rows.append([name, len(set(sw["out"].round(decimals=12).tolist())),
                     float((sw["fd"] == 0).double().mean()), float(sw["auto"].abs().max()),
                     float((sw["fd"] - sw["auto"]).abs().max()),
                     float(at_switch[name]["fd"].abs().max()) if switches else 0.0])
    soft_err, hard_auto, pieces = rows[0][4], rows[1][3], rows[1][1]
    passed = (soft_err < 1e-8 and hard_auto == 0 and rows[1][2] > 0.99 and rows[0][2] == 0
              and len(switches) == pieces - 1 and rows[1][5] > 1e3)
    where = ", ".join(f"{t:.4f}" for t in switches)
    check = (f"softmax: finite differences match autograd to {soft_err:.1e} at all {len(ts)} "
             f"points; argmax: {pieces} constant pieces, autograd derivative exactly 0 "
             f"everywhere, finite difference 0 at {rows[1][2]:.1%} of the grid points and "
             f"{rows[1][5]:.1e} at the switch t = {where}")

    def plot():
        fig, (ax, ax2) = new_figure(2)
        for name, sw in sweeps.items():
            ax.plot(xs, sw["out"].numpy(), label=f"{name} read")
        ax.set_xlabel("t  (query = [1, 0] + t [-1, 1])")
        ax.set_ylabel("output, first coordinate")
        ax.legend()
        ax2.plot(xs, sweeps["softmax"]["auto"].numpy(), label="softmax: autograd")
        ax2.plot(xs[::15], sweeps["softmax"]["fd"][::15].numpy(), "o", ms=3,
                 label="softmax: finite differences")
        ax2.plot(xs, sweeps["argmax"]["auto"].numpy(), label="argmax: autograd (always 0)")
        ax2.set_xlabel("t")
        ax2.set_ylabel("d output / dt")
        for t in switches:
            ax2.axvline(t, color="tab:red", lw=0.8, ls="--")
        ax2.set_title("argmax: 0, or undefined at the switch (dashed)")
        ax2.legend()
        return fig

    figure = draw(plot, out_dir, "argmax_vs_softmax", fmt)
    return Result("argmax-vs-softmax", ["read", "distinct outputs on 601 points",
                                        "share of points with FD = 0", "max |autograd d/dt|",
                                        "max |FD - autograd|", "|FD| at the switch"],
                  rows, [figure], passed, check,
                  {"soft_fd_error": soft_err, "hard_autograd_max": hard_auto,
                   "hard_pieces": pieces, "hard_fd_at_switch": rows[1][5]})


def _read_gradient(scores: Tensor, values: Tensor, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Weights a, context c and d(g^T c)/de by autograd through the project's `attend`.

    scores (S,), values (S, D), g (D,).
    """
    e = scores.clone().requires_grad_(True)
    mask = torch.ones(1, 1, len(e), dtype=torch.bool)
    c, a = attend(e.view(1, 1, -1), values.unsqueeze(0), mask)
    (grad,) = torch.autograd.grad((c.view(-1) * g).sum(), e)
    return a.view(-1).detach(), c.view(-1).detach(), grad


def gradient_check(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """d(g^T c)/de_j = a_j (h_j - c)^T g three ways: closed form, autograd, central
    finite differences (float64)."""
    gen = torch.Generator().manual_seed(11)
    e = torch.randn(5, generator=gen, dtype=torch.float64)
    h = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    g = torch.randn(3, generator=gen, dtype=torch.float64)
    a, c, auto = _read_gradient(e, h, g)
    closed = a * ((h - c) @ g)
    step, fd = 1e-6, torch.zeros_like(e)
    for j in range(len(e)):
        bump = torch.zeros_like(e)
        bump[j] = step
        fd[j] = (_read_gradient(e + bump, h, g)[1] - _read_gradient(e - bump, h, g)[1]) @ g / (2 * step)
    rows = [[j, float(a[j]), float(closed[j]), float(auto[j]), float(fd[j])] for j in range(len(e))]
    diffs = {"autograd - closed": float((auto - closed).abs().max()),
             "finite diff - closed": float((fd - closed).abs().max()),
             "finite diff - autograd": float((fd - auto).abs().max())}
    worst = max(diffs.values())
    passed = worst < 1e-8
    check = ("the three agree to " + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items())
             + f"; the gradients sum to {float(closed.sum()):.1e} (softmax ignores a shared shift)")

    def plot():
        fig, (ax, ax2) = new_figure(2)
        x = torch.arange(len(e)).numpy()
        for k, (label, vals) in enumerate((("closed form", closed), ("autograd", auto),
                                           ("finite differences", fd))):
            ax.bar(x + (k - 1) * 0.27, vals.numpy(), 0.27, label=label)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xlabel("source position j")
        ax.set_ylabel("d(g^T c) / d e_j")
        ax.legend()
        ax2.bar(list(diffs), [max(v, 1e-18) for v in diffs.values()], color="tab:gray")
        ax2.axhline(1e-8, color="tab:red", ls="--", label="tolerance 1e-8")
        ax2.set_yscale("log")
        ax2.set_ylabel("max |difference|")
        ax2.tick_params(axis="x", labelsize=7)
        ax2.legend()
        return fig

    figure = draw(plot, out_dir, "gradient_check", fmt)
    return Result("gradient-check", ["j", "a_j", "closed form", "autograd", "finite diff"],
                  rows, [figure], passed, check, {"max_diff": worst, **diffs})


def identical_sources(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """When every source vector is the same, every weighting reads the same context."""
    gen = torch.Generator().manual_seed(7)
    h = torch.tensor([0.3, -1.2, 0.8], dtype=torch.float64)
    values = h.expand(5, 3).clone()
    g = torch.randn(3, generator=gen, dtype=torch.float64)
    rows, weights, worst_c, worst_g = [], [], 0.0, 0.0
    for temp in (0.01, 0.3, 1.0, 3.0, 30.0, 300.0):
        scores = temp * torch.randn(5, generator=gen, dtype=torch.float64)
        a, c, grad = _read_gradient(scores, values, g)
        entropy = float(-(a * a.clamp_min(1e-300).log()).sum())
        err, gnorm = float((c - h).abs().max()), float(grad.abs().max())
        worst_c, worst_g = max(worst_c, err), max(worst_g, gnorm)
        rows.append([temp, float(a.max()), entropy, err, gnorm])
        weights.append(a)
    spread = rows[-1][1] - rows[0][1]
    passed = worst_c < 1e-12 and worst_g < 1e-12 and spread > 0.5
    check = (f"largest weight ranges from {rows[0][1]:.2f} to {rows[-1][1]:.2f}, yet every "
             f"context equals the shared vector to {worst_c:.1e} and the scores get no gradient "
             f"(max |d(g^T c)/de| = {worst_g:.1e})")

    def plot():
        fig, (ax,) = new_figure(1, width=6.0)
        bottom = torch.zeros(len(weights), dtype=torch.float64)
        for j in range(5):
            col = torch.stack([w[j] for w in weights])
            ax.bar([f"x{r[0]:g}" for r in rows], col.numpy(), bottom=bottom.numpy(), label=f"source {j + 1}")
            bottom += col
        ax.set_xlabel("score scale (random scores times this)")
        ax.set_ylabel("weights (stacked)")
        ax.set_title(f"six weightings, one context: c = {h.tolist()} each time")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return fig

    figure = draw(plot, out_dir, "identical_sources", fmt)
    return Result("identical-sources", ["score scale", "largest weight", "entropy (nats)",
                                        "max |c - h|", "max |d(g^T c)/de|"], rows, [figure],
                  passed, check, {"max_context_error": worst_c, "max_score_grad": worst_g,
                                  "weight_spread": spread})
