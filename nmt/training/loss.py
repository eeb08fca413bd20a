"""The training objective: `loss_fn` (cross-entropy, the model's auxiliary loss, guided
alignment), and its cross-entropy, label-smoothed, in one pass over the logits.

`smoothed_cross_entropy(logits, target, eps)` equals
`F.cross_entropy(logits, target, label_smoothing=eps, reduction="sum")`: the target
distribution is `q = (1 - eps) * onehot(y) + eps / V` (Szegedy et al. 2016, as torch
defines it) and the loss `-sum_i sum_c q_ic log p_ic`. Its gradient with respect to the
logits is `p - q`, which the backward pass writes straight into one (N, V) tensor.
torch's own composition takes the smoothing term's gradient and the NLL's gradient as
two (N, V) tensors, zero-fills one, adds them and then runs log-softmax's backward, which
over an 8k vocabulary is a measurable share of a training step on the CPU
(docs/experiments/2026-12-02-faster-step.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.core.config import GuidedConfig
from nmt.core.tokens import PAD
from nmt.models.base import Seq2Seq
from nmt.training.guided import alignment_loss


class _SmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, eps: float) -> Tensor:
        logp = torch.log_softmax(logits, dim=-1)  # (N, V)
        nll = logp.gather(1, target.unsqueeze(1)).sum()
        loss = -(1.0 - eps) * nll
        if eps:
            loss = loss - (eps / logits.size(-1)) * logp.sum()
        ctx.save_for_backward(logp, target)
        ctx.eps = eps
        return loss

    @staticmethod
    def backward(ctx, grad_loss: Tensor):
        logp, target = ctx.saved_tensors
        eps = ctx.eps
        grad = logp.exp()  # p, a new tensor: the saved log-probabilities stay as they are
        if eps:
            grad.sub_(eps / logp.size(-1))
        grad.scatter_add_(1, target.unsqueeze(1),
                          grad.new_full((target.numel(), 1), -(1.0 - eps)))
        return grad.mul_(grad_loss), None, None


def smoothed_cross_entropy(logits: Tensor, target: Tensor, eps: float = 0.0) -> Tensor:
    """Summed label-smoothed cross-entropy of `logits` (N, V) against `target` (N,), in
    float32 (or float64) whatever the logits' dtype (bf16 under autocast); `eps` in [0, 1)."""
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    return _SmoothedCrossEntropy.apply(logits, target, float(eps))


def loss_fn(model: Seq2Seq, batch, smoothing: float, guided: GuidedConfig | None = None
            ) -> torch.Tensor:
    """Label-smoothed cross-entropy summed over real target tokens (padding excluded
    before the output layer, so no time is spent on it), plus the auxiliary loss the
    model's forward pass returns, if any (the `local` section's aids), plus, with
    `guided` and a batch that carries teacher targets, guided.weight times the alignment
    loss of the supervised attention (nmt.align.guided.alignment_loss)."""
    real = batch.tgt_out != PAD
    supervise = guided is not None and guided.weight > 0 and batch.guide is not None
    logits, attn, extra = model(batch.src, batch.tgt_in, need_attn=supervise, select=real,
                                full_context=supervise and guided.full_context)  # (N, V)
    loss = smoothed_cross_entropy(logits, batch.tgt_out[real], smoothing)
    if supervise:
        loss = loss + guided.weight * alignment_loss(attn, batch.guide, guided.layer,
                                                     guided.heads)
    return loss if extra is None else loss + extra
