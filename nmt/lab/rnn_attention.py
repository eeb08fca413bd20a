"""What the tanh in Bahdanau's additive score buys (experiment: tanh).

The score is the project's `AdditiveScore` (nmt.models.attention), once with
`use_tanh=True` (the score Bahdanau and Luong-concat models train with) and once
with `use_tanh=False`: v^T (W s + b) + v^T U h_j, where the state's term is the
same for every source position j and the softmax cancels it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from nmt.lab.base import Result, draw, new_figure
from nmt.models.attention import AdditiveScore, attend

WORDS = ("I", "like", "cats")
SOURCES = [[2.0, 0.0], [0.5, 1.0], [-1.0, 2.0]]  # hand-set 2-D h_j, not learned
W_STATE, V = [[2.0], [-1.0]], [[1.0, 1.0]]  # W (A=2, 1), v (1, A=2); U = identity, b = 0


def hand_set_score(use_tanh: bool) -> AdditiveScore:
    """AdditiveScore(query 1, key 2, hidden 2) with the hand-set weights above, float64."""
    score = AdditiveScore(1, 2, 2, use_tanh=use_tanh).double()
    with torch.no_grad():
        score.W.weight.copy_(torch.tensor(W_STATE))
        score.W.bias.zero_()
        score.U.weight.copy_(torch.eye(2))
        score.v.weight.copy_(torch.tensor(V))
    return score


@torch.no_grad()
def read_at(states: Tensor, use_tanh: bool) -> tuple[Tensor, Tensor]:
    """Weights (N, 3) and contexts (N, 2) for a batch of scalar states s (N,)."""
    score = hand_set_score(use_tanh)
    h = torch.tensor(SOURCES, dtype=torch.float64).expand(len(states), 3, 2)  # (B, S, D)
    e = score(states.view(-1, 1, 1), score.project_keys(h))  # (B, 1, S)
    context, weights = attend(e, h, torch.ones(1, 1, 3, dtype=torch.bool))
    return weights[:, 0], context[:, 0]


def tanh(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """Sweep the decoder state s over [-3, 3]: weights with and without the tanh."""
    sweep = torch.linspace(-3.0, 3.0, 121, dtype=torch.float64)
    curves = {t: read_at(sweep, t)[0] for t in (False, True)}
    two = torch.tensor([-1.0, 1.0], dtype=torch.float64)
    rows = []
    for use_tanh in (False, True):
        w, c = read_at(two, use_tanh)
        for s, wi, ci in zip(two.tolist(), w, c):
            rows.append(["with tanh" if use_tanh else "without tanh", s,
                         *[float(x) for x in wi], float(ci[0]), float(ci[1])])
    spread = {t: float((w.amax(0) - w.amin(0)).max()) for t, w in curves.items()}
    passed = spread[False] < 1e-12 and spread[True] > 0.1
    check = (f"without tanh the weights are identical for every state (max change over "
             f"s in [-3, 3]: {spread[False]:.1e}); with tanh a word's weight ranges over up to "
             f"{spread[True]:.2f} as s moves")
    notes = ["without tanh the state adds v^T (W s + b) = s to every source score alike, "
             "and softmax(e + const) = softmax(e)",
             "the state axis is a constructed scalar, not a decoder step of a trained model"]
    figure = draw(lambda: _plot(sweep, curves), out_dir, "tanh", fmt)
    headers = ["score", "state s", *[f"weight '{w}'" for w in WORDS], "c[0]", "c[1]"]
    return Result("tanh", headers, rows, [figure], passed, check,
                  {"spread_without_tanh": spread[False], "spread_with_tanh": spread[True]}, notes)


def _plot(sweep: Tensor, curves: dict[bool, Tensor]):
    fig, axes = new_figure(2)
    for ax, use_tanh in zip(axes, (False, True)):
        for j, word in enumerate(WORDS):
            ax.plot(sweep.numpy(), curves[use_tanh][:, j].numpy(), label=f"'{word}'  h = {SOURCES[j]}")
        ax.set_ylim(0, 1)
        ax.set_xlabel("decoder state s")
        ax.set_ylabel("attention weight")
        ax.set_title("v^T tanh(W s + U h_j)" if use_tanh else "v^T (W s + U h_j): no tanh")
        for s in (-1.0, 1.0):
            ax.axvline(s, color="gray", lw=0.6, ls=":")
        ax.legend(loc="upper right")
    return fig
