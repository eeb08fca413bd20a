"""Reference arithmetic for the equation tests, written in numpy (float64) from the
papers' formulas, so that an expected value never comes from the code under test."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from nmt.core.config import ModelConfig
from nmt.models import build_model

V = 12  # vocabulary of the hand-built models


def a(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a float64 numpy array."""
    return t.detach().double().numpy()


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def gru(cell: nn.GRUCell, x: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Cho et al. (2014) GRU in torch's gate order (r, z, n): h' = (1 - z) n + z h."""
    wi, wh, bi, bh = a(cell.weight_ih), a(cell.weight_hh), a(cell.bias_ih), a(cell.bias_hh)
    gi, gh = wi @ x + bi, wh @ h + bh
    n = len(h)
    r = sigmoid(gi[:n] + gh[:n])
    z = sigmoid(gi[n:2 * n] + gh[n:2 * n])
    cand = np.tanh(gi[2 * n:] + r * gh[2 * n:])
    return (1 - z) * cand + z * h


def maxout(pre: np.ndarray) -> np.ndarray:
    """t_j = max(t~_{2j-1}, t~_{2j}) over consecutive pairs (1-based as in the papers)."""
    return pre.reshape(-1, 2).max(axis=1)


def build(family: str, seed: int = 0, **kw):
    """A tiny eval-mode model (no dropout) of `family`, seeded."""
    torch.manual_seed(seed)
    sizes = dict(emb_size=3, hidden_size=3, dropout=0.0)
    sizes.update(kw)
    return build_model(ModelConfig(family=family, **sizes), V, V, joint=True).eval()


def source() -> torch.Tensor:
    """Two source sentences (true lengths 5 and 3, EOS = 3 last), padded to 6."""
    return torch.tensor([[5, 6, 7, 8, 3, 0], [9, 4, 3, 0, 0, 0]])


LENGTHS = (5, 3)


def fill(param: torch.Tensor, values) -> None:
    """Hand-set a parameter."""
    with torch.no_grad():
        param.copy_(torch.tensor(values, dtype=param.dtype).view_as(param))
