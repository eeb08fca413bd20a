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

from nmt.core.config import LocalConfig


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
    a log-bias before the window's softmax, so the weights sum to one. `prior`: "none" is
    the paper; "diagonal" adds logit((min(t, S - 1) + 1/2) / S) to z_t = v_p^T tanh(W_p h_t),
    so p_t starts where local-m puts it (t + 1/2) and the predictor learns how far to move
    from there (docs/faithfulness.md; docs/experiments/2026-12-05-local-p-start.md).

    `aids` (config section `local`; none is in the paper, all off by default, none
    changes evaluation; docs/faithfulness.md):
    - window_start, window_steps: a curriculum. `at_step` sets the training half-width
      (and sigma = half-width / 2) to window_start shrinking linearly to D over the first
      window_steps steps; in eval mode, and in a model no trainer steps (a loaded run,
      --adapt), the half-width is D.
    - position_limit: (|z| - limit)^2 for each logit z = v_p^T tanh(W_p h_t) beyond
      +-limit, which keeps p_t out of the sigmoid's flat tails.
    - position_guide: guide * sum_s q_s (s - p_t)^2 / (2 sigma^2), the training Gaussian's
      sigma, q the softmax of the (detached) scores over the whole source, not only the
      window: the cross-entropy from q to the Gaussian. Its gradient pulls p_t toward the
      position the model's own scores prefer, as if its window saw the whole sentence.
    - position_hold: in the first position_hold training steps (`at_step`) z is detached, so
      p_t stays where the predictor starts (with prior "diagonal": local-m's line) while the
      scores learn to align; the early loss would otherwise drive p_t to an edge of the
      source, where the sigmoid is flat (docs/experiments/2026-12-05-local-p-start.md).
    The last two are returned by `attend` per target position, in training only, for the
    training loss to add (nothing is kept between the forward pass and the loss).
    """

    def __init__(self, kind: str, window: int, query_size: int, gaussian: str = "multiply",
                 aids: LocalConfig = LocalConfig(), prior: str = "none"):
        super().__init__()
        self.kind, self.window, self.gaussian, self.aids = kind, window, gaussian, aids
        self.prior = prior
        self.half_width = float(window)  # the training half-width (at_step)
        self.holding = False  # position_hold: z detached in training (at_step)
        if kind == "local-p":
            self.W_p = nn.Linear(query_size, query_size, bias=False)
            self.v_p = nn.Linear(query_size, 1, bias=False)

    def at_step(self, step: int) -> None:
        """The training half-width for optimiser step `step` (1-based)."""
        self.holding = step <= self.aids.position_hold
        start, steps = self.aids.window_start, self.aids.window_steps
        if start:
            self.half_width = start + (self.window - start) * min(step / steps, 1.0)

    def _position(self, query: Tensor, step: Tensor, mask: Tensor
                  ) -> tuple[Tensor, Tensor | None]:
        """p_t (B, T) and, for local-p, its logit z (B, T), in float32 whatever the
        step's precision: bf16's 8-bit mantissa resolves a position near 40 to a quarter
        of a word, and the window and its Gaussian are read off p_t
        (docs/experiments/2026-12-03-precision.md)."""
        length = mask.sum(-1, keepdim=True).float()  # S: (B, 1)
        if self.kind == "local-m":
            return torch.minimum(step.float(), length - 1), None
        with torch.autocast(query.device.type, enabled=False):
            hidden = torch.tanh(self.W_p(query.float()))
            logit = self.v_p(hidden).squeeze(-1)  # z: (B, T)
            if self.holding and self.training:
                logit = logit.detach()
            shift = 0.0
            if self.prior == "diagonal":  # the share (t + 1/2) / S of local-m's p_t, as a logit
                share = (torch.minimum(step.float(), length - 1) + 0.5) / length
                shift = torch.log(share) - torch.log1p(-share)
        return length * torch.sigmoid(logit + shift), logit

    def centre(self, query: Tensor, step: Tensor, mask: Tensor) -> Tensor:
        """p_t (B, T) for query (B, T, H), step (B, T) target positions, mask (B, S)."""
        return self._position(query, step, mask)[0]

    def _window(self, centre: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        positions = torch.arange(mask.size(1), device=centre.device, dtype=centre.dtype)
        distance = positions.view(1, 1, -1) - centre.unsqueeze(-1)  # (B, T, S)
        half_width = self.half_width if self.training else float(self.window)
        inside = (distance.abs() <= half_width) & mask.unsqueeze(1)
        if self.kind == "local-m":
            return inside, torch.zeros_like(distance)
        sigma = half_width / 2.0
        return inside, -(distance ** 2) / (2 * sigma ** 2)

    def forward(self, query: Tensor, step: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """The window mask (B, T, S) and the log-Gaussian -(s - p_t)^2 / (2 sigma^2)
        (B, T, S) (zero for local-m)."""
        return self._window(self.centre(query, step, mask), mask)

    def _penalty(self, scores: Tensor, logit: Tensor | None, log_gauss: Tensor,
                 mask: Tensor) -> Tensor | None:
        """The training aids' loss terms (B, T): position_limit's and position_guide's."""
        terms = []
        if logit is not None and self.aids.position_limit:
            terms.append(torch.relu(logit.abs() - self.aids.position_limit).pow(2))
        if logit is not None and self.aids.position_guide:
            whole = masked_softmax(scores.detach(), mask.unsqueeze(1).expand_as(scores))
            terms.append(-self.aids.position_guide * (whole * log_gauss).sum(-1))
        return sum(terms) if terms else None

    def attend(self, scores: Tensor, values: Tensor, query: Tensor, step: Tensor, mask: Tensor
               ) -> tuple[Tensor, Tensor, Tensor | None]:
        """scores (B, T, S), values (B, S, D) -> context (B, T, D), weights a_t (B, T, S),
        and in training the aids' loss terms (B, T) (None when off or in eval mode)."""
        centre, logit = self._position(query, step, mask)
        inside, log_gauss = self._window(centre, mask)
        penalty = self._penalty(scores, logit, log_gauss, mask) if self.training else None
        if self.kind == "local-m" or self.gaussian == "renormalise":
            return (*attend(scores + log_gauss, values, inside), penalty)
        weights = masked_softmax(scores, inside) * torch.exp(log_gauss)  # eq. 10
        if _OVERRIDES:
            weights = _OVERRIDES[-1](weights, inside)
        return torch.bmm(weights, values), weights, penalty


def scaled_dot_product(q: Tensor, k: Tensor, v: Tensor, mask: Tensor,
                       need_weights: bool) -> tuple[Tensor, Tensor | None]:
    """Vaswani et al. (2017) eq. 1: softmax(Q K^T / sqrt(d_k)) V over heads.

    q (B, h, T, d), k and v (B, h, S, d), mask broadcastable to (B, h, T, S).
    With `need_weights` the shared masked softmax gives the weights; without,
    torch's fused kernel computes the same thing faster.
    """
    if not need_weights:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out, None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = masked_softmax(scores, mask.expand(scores.shape))
    if _OVERRIDES:
        weights = _OVERRIDES[-1](weights, mask.expand(scores.shape))
    return weights @ v, weights


def supervised(attn, layer: int, heads: int | None):
    """The supervised map (..., T, S) of attention (..., L, H, T, S), a tensor or a numpy
    array: the mean of the first `heads` heads (all: None) of decoder layer `layer`
    (one-map families: their map). Guided training's loss and every reader of a guided run
    (nmt.align.words.reading) take it from here."""
    if attn.shape[-4] == 1 and attn.shape[-3] == 1:
        return attn[..., 0, 0, :, :]
    return attn[..., layer, :heads, :, :].mean(-3)
