"""One attention interface: a scorer gives scores (B, T, S); `attend` masks,
normalises and takes the weighted sum, returning (context, weights).

Masks are boolean with one meaning everywhere: True marks a real source
position that may receive weight; False (padding, outside a local window, a
future position) receives exactly zero.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last axis where `mask` is True; exactly 0 elsewhere.

    `torch.softmax` subtracts the row maximum, so large scores do not overflow.
    A row with no allowed position gives all zeros rather than NaN.
    """
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights.masked_fill(~mask, 0.0)


def attend(scores: Tensor, values: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """scores (B, T, S), values (B, S, D), mask broadcastable to (B, T, S).

    Returns context (B, T, D) = sum_j a_tj v_j and weights a (B, T, S).
    """
    weights = masked_softmax(scores, mask)
    if _OVERRIDES:
        weights = _OVERRIDES[-1](weights, mask.expand(weights.shape))
    return torch.bmm(weights, values), weights


# Weight overrides for interventions (`nmt lab attention-is-not-explanation`): a stack of
# functions (weights, mask) -> weights; empty in training and decoding, so it costs one check.
_OVERRIDES: list[Callable[[Tensor, Tensor], Tensor]] = []


@contextlib.contextmanager
def override_weights(fn: Callable[[Tensor, Tensor], Tensor]) -> Iterator[None]:
    """Within the block, replace attention weights a by fn(a, mask) before the weighted sum.

    Applies wherever weights are materialised: `attend` (the RNN families) and the
    explicit path of `scaled_dot_product` (need_weights=True: the Transformer's
    cross-attention in `step` and in `decode_features(need_attn=True)`). The fused path
    is untouched. `mask` has the weights' shape, True = may attend. Not thread-safe.
    """
    _OVERRIDES.append(fn)
    try:
        yield
    finally:
        _OVERRIDES.pop()


class DotScore(nn.Module):
    """Luong et al. (2015) eq. 8, dot: score(h_t, h_s) = h_t^T h_s."""

    def __init__(self, query_size: int, key_size: int, hidden: int = 0):
        super().__init__()
        if query_size != key_size:
            raise ValueError(f"dot score needs equal sizes, got {query_size} and {key_size}")

    def project_keys(self, keys: Tensor) -> Tensor:
        return keys

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        # query (B, T, Dq), keys (B, S, Dq) -> (B, T, S)
        return torch.bmm(query, keys.transpose(1, 2))


class GeneralScore(DotScore):
    """Luong et al. (2015) eq. 8, general: score(h_t, h_s) = h_t^T W_a h_s."""

    def __init__(self, query_size: int, key_size: int, hidden: int = 0):
        nn.Module.__init__(self)
        self.W_a = nn.Linear(key_size, query_size, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.W_a(keys)  # computed once per sentence, kept in the encoder output


class AdditiveScore(nn.Module):
    """Bahdanau et al. (2015) eq. 6 / Luong concat: v^T tanh(W q + U k + b).

    `use_tanh=False` exists to show what the nonlinearity buys: without it the
    score is v^T W q + v^T U k, and the first term is the same for every source
    position, so the softmax cancels it and the weights ignore the query.
    """

    def __init__(self, query_size: int, key_size: int, hidden: int, use_tanh: bool = True):
        super().__init__()
        self.W = nn.Linear(query_size, hidden, bias=True)
        self.U = nn.Linear(key_size, hidden, bias=False)
        self.v = nn.Linear(hidden, 1, bias=False)
        self.use_tanh = use_tanh

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.U(keys)  # (B, S, A)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        # query (B, T, Dq), projected keys (B, S, A) -> (B, T, S)
        hidden = self.W(query).unsqueeze(2) + keys.unsqueeze(1)  # (B, T, S, A)
        if self.use_tanh:
            hidden = torch.tanh(hidden)
        return self.v(hidden).squeeze(-1)


SCORERS: dict[str, type[nn.Module]] = {
    "dot": DotScore,
    "general": GeneralScore,
    "concat": AdditiveScore,
    "additive": AdditiveScore,
}


class LocalWindow(nn.Module):
    """Luong et al. (2015) local attention: a window [p_t - D, p_t + D].

    local-m: p_t = t (clamped to the last source position, so a target longer than
    its source keeps a window). local-p: p_t = S * sigmoid(v_p^T tanh(W_p h_t))
    (eq. 9) with S the true source length, and the window's weights are multiplied
    by exp(-(s - p_t)^2 / (2 sigma^2)), sigma = D / 2 (eq. 10). `gaussian`:
    "multiply" is the paper (not renormalised); "renormalise" adds the Gaussian as
    a log-bias before the window's softmax, so the weights sum to one.

    `start`, `steps`: a curriculum (not in the paper). The trainer calls `at_step`, which
    sets the training half-width (and sigma = half-width / 2) to `start` shrinking
    linearly to `window` over the first `steps` steps; in eval mode, and in a model no
    trainer steps (a loaded run, --adapt), the half-width is `window`.

    `renormalise_steps` (not in the paper): in training, use "renormalise" for the first
    that many optimiser steps (`at_step`), then `gaussian`; evaluation always uses `gaussian`.

    `limit` (not in the paper): in training, record (|z| - limit)^2 for each logit
    z = v_p^T tanh(W_p h_t) beyond +-limit; the training loss adds their sum over the real
    target positions (`take_penalty`), which keeps p_t out of the sigmoid's flat tails.

    `guide` (not in the paper): in training, record what take_penalty turns into
    guide * sum_s q_s (s - p_t)^2 / (2 sigma^2) per step, the training Gaussian's sigma (so
    weak while a curriculum widens the window), q the softmax of the (detached) scores over
    the whole source, not only the window: the cross-entropy from q to the Gaussian. Its
    gradient pulls p_t toward the position the model's own scores prefer, as if its window
    saw the whole sentence.
    """

    def __init__(self, kind: str, window: int, query_size: int, gaussian: str = "multiply",
                 start: int = 0, steps: int = 0, limit: float = 0.0,
                 renormalise_steps: int = 0, guide: float = 0.0):
        super().__init__()
        self.kind, self.window, self.gaussian = kind, window, gaussian
        self.start, self.steps, self.limit = start, steps, limit
        self.renormalise_steps, self.guide = renormalise_steps, guide
        self.renormalising = False  # set by at_step while step <= renormalise_steps
        self.half_width = float(window)  # the training half-width (at_step)
        self.excess: list[Tensor] = []  # (|z| - limit)^2, (B, T) per call, since take_penalty
        self.guided: list[tuple[Tensor, Tensor]] = []  # (scores, log-Gaussian) per call
        self.guide_mask: Tensor | None = None  # the source mask (B, S) of the recorded calls
        if kind == "local-p":
            self.W_p = nn.Linear(query_size, query_size, bias=False)
            self.v_p = nn.Linear(query_size, 1, bias=False)

    def at_step(self, step: int) -> None:
        """The training half-width and Gaussian for optimiser step `step` (1-based)."""
        self.renormalising = step <= self.renormalise_steps
        if not self.start:
            return
        done = min(step / self.steps, 1.0)
        self.half_width = self.start + (self.window - self.start) * done

    def centre(self, query: Tensor, step: Tensor, mask: Tensor) -> Tensor:
        """p_t (B, T) for query (B, T, H), step (B, T) target positions, mask (B, S)."""
        length = mask.sum(-1, keepdim=True).to(query.dtype)  # S: (B, 1)
        if self.kind == "local-m":
            return torch.minimum(step.to(query.dtype), length - 1)
        logit = self.v_p(torch.tanh(self.W_p(query))).squeeze(-1)  # z: (B, T)
        if self.limit and self.training:
            self.excess.append(torch.relu(logit.abs() - self.limit).pow(2))
        return length * torch.sigmoid(logit)

    def take_penalty(self, real: Tensor) -> Tensor | None:
        """Sum of the terms recorded since the last call (the limit's, the guide's) over the
        positions where `real` (B, T) is True (None if nothing was recorded); forgets them."""
        parts = []
        if self.excess:
            parts.append(torch.cat(self.excess, dim=1)[real].sum())
        if self.guided:  # one batched softmax for the whole pass, not one per step
            scores, log_gauss = (torch.cat(x, dim=1) for x in zip(*self.guided))
            whole = masked_softmax(scores, self.guide_mask.unsqueeze(1).expand_as(scores))
            parts.append(-self.guide * (whole * log_gauss).sum(-1)[real].sum())
        self.excess, self.guided = [], []
        return sum(parts) if parts else None

    def forward(self, query: Tensor, step: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """The window mask (B, T, S) and the log-Gaussian -(s - p_t)^2 / (2 sigma^2)
        (B, T, S) (zero for local-m)."""
        centre = self.centre(query, step, mask)
        positions = torch.arange(mask.size(1), device=query.device, dtype=query.dtype)
        distance = positions.view(1, 1, -1) - centre.unsqueeze(-1)  # (B, T, S)
        half_width = self.half_width if self.training else float(self.window)
        inside = (distance.abs() <= half_width) & mask.unsqueeze(1)
        if self.kind == "local-m":
            return inside, torch.zeros_like(distance)
        sigma = half_width / 2.0
        return inside, -(distance ** 2) / (2 * sigma ** 2)

    def attend(self, scores: Tensor, values: Tensor, query: Tensor, step: Tensor, mask: Tensor
               ) -> tuple[Tensor, Tensor]:
        """scores (B, T, S), values (B, S, D) -> context (B, T, D), weights a_t (B, T, S)."""
        inside, log_gauss = self(query, step, mask)
        if self.guide and self.training and self.kind == "local-p":
            self.guided.append((scores.detach(), log_gauss))  # take_penalty turns them into q
            self.guide_mask = mask
        renormalise = self.gaussian == "renormalise" or (self.training and self.renormalising)
        if self.kind == "local-m" or renormalise:
            return attend(scores + log_gauss, values, inside)
        weights = masked_softmax(scores, inside) * torch.exp(log_gauss)  # eq. 10
        if _OVERRIDES:
            weights = _OVERRIDES[-1](weights, inside)
        return torch.bmm(weights, values), weights


def scaled_dot_product(q: Tensor, k: Tensor, v: Tensor, mask: Tensor,
                       need_weights: bool, dropout: float = 0.0) -> tuple[Tensor, Tensor | None]:
    """Vaswani et al. (2017) eq. 1: softmax(Q K^T / sqrt(d_k)) V over heads.

    q (B, h, T, d), k and v (B, h, S, d), mask broadcastable to (B, h, T, S).
    With `need_weights` the shared masked softmax gives the weights; without,
    torch's fused kernel computes the same thing faster.
    """
    if not need_weights:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        return out, None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = masked_softmax(scores, mask.expand(scores.shape))
    if _OVERRIDES:
        weights = _OVERRIDES[-1](weights, mask.expand(scores.shape))
    probs = F.dropout(weights, dropout) if dropout else weights
    return probs @ v, weights
