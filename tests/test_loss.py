"""nmt.training.loss.smoothed_cross_entropy: torch's label-smoothed cross-entropy (sum), its value
and its gradient p - q, computed in one pass."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nmt.training.loss import smoothed_cross_entropy


def _data(n: int = 7, v: int = 11, dtype=torch.float64, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    logits = (3 * torch.randn(n, v, generator=gen, dtype=dtype)).requires_grad_()
    target = torch.randint(v, (n,), generator=gen)
    return logits, target


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.35])
def test_value_and_gradient_equal_torchs_label_smoothed_cross_entropy(eps):
    logits, target = _data()
    ours = smoothed_cross_entropy(logits, target, eps)
    (grad,) = torch.autograd.grad(ours, logits)
    theirs = F.cross_entropy(logits, target, label_smoothing=eps, reduction="sum")
    (right,) = torch.autograd.grad(theirs, logits)
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(grad, right)
    # p - q by hand: q = (1 - eps) onehot + eps / V
    q = torch.full_like(grad, eps / logits.size(1))
    q[torch.arange(len(target)), target] += 1 - eps
    torch.testing.assert_close(grad, logits.detach().softmax(-1) - q)


def test_gradient_passes_gradcheck_and_scales_with_the_upstream_gradient():
    logits, target = _data(n=3, v=5)
    assert torch.autograd.gradcheck(lambda x: smoothed_cross_entropy(x, target, 0.2), (logits,))
    (once,) = torch.autograd.grad(smoothed_cross_entropy(logits, target, 0.2), logits)
    (thrice,) = torch.autograd.grad(3 * smoothed_cross_entropy(logits, target, 0.2), logits)
    torch.testing.assert_close(thrice, 3 * once)


def test_backward_leaves_what_it_saved_intact():
    """A second backward through the same graph (retain_graph) gives the same gradient:
    the backward pass writes p - q into a new tensor, not into the saved log-probabilities."""
    logits, target = _data()
    loss = smoothed_cross_entropy(logits, target, 0.1)
    (first,) = torch.autograd.grad(loss, logits, retain_graph=True)
    (second,) = torch.autograd.grad(loss, logits)
    torch.testing.assert_close(first, second)


def test_half_precision_logits_are_scored_in_float32():
    logits, target = _data(dtype=torch.float32)
    low = logits.detach().bfloat16().requires_grad_()
    loss = smoothed_cross_entropy(low, target, 0.1)
    assert loss.dtype == torch.float32
    loss.backward()
    assert low.grad.dtype == torch.bfloat16
    right = F.cross_entropy(low.detach().float(), target, label_smoothing=0.1, reduction="sum")
    torch.testing.assert_close(loss, right)
