"""The one optimiser builder, for training and `--adapt` alike."""

from __future__ import annotations

import torch

from nmt.models.base import Seq2Seq


def build_optimizer(model: Seq2Seq, lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam with Vaswani et al.'s (2017) betas (0.9, 0.98) and eps 1e-9 over the model's own
    parameter groups (`Seq2Seq.param_groups`); `set_lr` applies each group's scale.

    torch's fused implementation (one kernel for the whole update) where every parameter
    lives on a device it supports, the CPU and CUDA: the same update as the default
    per-tensor one, faster (docs/experiments/2026-12-02-faster-step.md)."""
    groups = [{"scale": 1.0, **group} for group in model.param_groups()]
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point()
                for p in model.parameters())
    optim = torch.optim.Adam(groups, lr=lr, betas=(0.9, 0.98), eps=1e-9,
                             weight_decay=weight_decay, fused=fused or None)
    set_lr(optim, lr)
    return optim


def set_lr(optim: torch.optim.Optimizer, lr: float) -> None:
    """The rate of every group: `lr` times the group's scale."""
    for group in optim.param_groups:
        group["lr"] = lr * group.get("scale", 1.0)
