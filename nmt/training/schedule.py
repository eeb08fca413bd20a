"""Learning-rate schedules: warmup, then flat, inverse square root, plateau or a
linear decay to zero at the end of the run's budget.

`linear` is budgeted training (Li, Yumer and Ramanan, ICLR 2020): a run with a fixed
budget (train.max_steps or train.max_minutes) decays the rate linearly to zero by the
end of that budget, so it ends at rest instead of mid-stride. Under max_minutes the
budget is wall-clock time, so a faster machine takes more (and smaller) steps.
"""

from __future__ import annotations

import math

from nmt.core.config import TrainConfig


def budget_used(cfg: TrainConfig, step: int, seconds: float) -> float:
    """The fraction (0 to 1) of the run's budget spent after `step` steps and `seconds`
    seconds: the larger of the step and the time fractions, 0 without a budget."""
    used = 0.0
    if cfg.max_steps:
        used = max(used, step / cfg.max_steps)
    if cfg.max_minutes:
        used = max(used, seconds / (cfg.max_minutes * 60))
    return min(used, 1.0)


class Schedule:
    """lr(step) = peak * warmup/decay factor * plateau scale.

    inverse_sqrt: min(step / warmup, sqrt(warmup / step)) (Vaswani et al. 2017, eq. 3
    up to the constant); constant and plateau: linear warmup, then flat, with plateau
    multiplying by `plateau_factor` after `plateau_patience` validations without gain;
    linear: linear warmup, then peak * (1 - budget used), reaching zero at the end.
    """

    def __init__(self, cfg: TrainConfig):
        self.cfg, self.scale, self.bad, self.best = cfg, 1.0, 0, -math.inf

    def lr(self, step: int, used: float = 0.0) -> float:
        """The rate for `step` (1-based); `used` is budget_used() for the linear schedule."""
        warm = max(self.cfg.warmup, 1)
        factor = min(step / warm, 1.0)
        if self.cfg.schedule == "inverse_sqrt" and step > warm:
            factor = math.sqrt(warm / step)
        if self.cfg.schedule == "linear":
            factor = min(factor, 1.0 - used)
        return self.cfg.lr * max(factor, 1e-3) * self.scale

    def observe(self, metric: float) -> None:
        if self.cfg.schedule != "plateau":
            return
        if metric > self.best:
            self.best, self.bad = metric, 0
        else:
            self.bad += 1
            if self.bad >= self.cfg.plateau_patience:
                self.scale, self.bad = self.scale * self.cfg.plateau_factor, 0

    def state_dict(self) -> dict:
        return {"scale": self.scale, "bad": self.bad, "best": self.best}

    def load_state_dict(self, state: dict) -> None:
        self.scale, self.bad, self.best = state["scale"], state["bad"], state["best"]
