"""Learning-rate schedules, the budgeted linear decay above all: it must reach zero
(the floor) exactly at the end of the run's budget, in steps or in minutes."""

from __future__ import annotations

import pytest

from nmt.core.config import TrainConfig
from nmt.core.errors import NMTError
from nmt.models.checks import config_from_dict
from nmt.training.schedule import Schedule, budget_used
from tests.test_train import MODELS, tiny_config


def test_budget_used_takes_the_larger_of_steps_and_minutes():
    both = TrainConfig(max_steps=1000, max_minutes=2.0)
    assert budget_used(both, 250, 30.0) == pytest.approx(0.25)  # steps ahead of time
    assert budget_used(both, 100, 60.0) == pytest.approx(0.5)  # time ahead of steps
    assert budget_used(both, 5000, 500.0) == 1.0  # never past the end
    assert budget_used(TrainConfig(), 10**6, 10**6) == 0.0  # no budget, nothing used


def test_linear_warms_up_then_falls_to_the_floor_at_the_end_of_the_budget():
    cfg = TrainConfig(schedule="linear", lr=0.01, warmup=10, max_steps=100)
    sched = Schedule(cfg)
    assert sched.lr(5, 0.05) == pytest.approx(0.005)  # warmup: 5 / 10 of the peak
    assert sched.lr(10, 0.10) == pytest.approx(0.009)  # decay already under way at 10%
    assert sched.lr(50, 0.5) == pytest.approx(0.005)
    assert sched.lr(100, 1.0) == pytest.approx(0.01 * 1e-3)  # the floor, not a dead optimiser
    rates = [sched.lr(step, step / 100) for step in range(10, 101)]
    assert all(a > b for a, b in zip(rates, rates[1:]))


def test_inverse_sqrt_is_vaswanis_eq_3_with_its_peak_at_train_lr():
    """docs/faithfulness.md, "learning rate": lrate = d^-0.5 min(step^-0.5, step warmup^-1.5)
    (Vaswani et al. 2017, eq. 3), scaled so that its peak, at step = warmup, is train.lr."""
    lr, warm = 0.002, 400
    sched = Schedule(TrainConfig(schedule="inverse_sqrt", lr=lr, warmup=warm))
    for step in (1, 7, 399, 400, 401, 1000, 4000, 90_000):
        paper = min(step ** -0.5, step * warm ** -1.5)
        assert sched.lr(step) == pytest.approx(lr * paper / warm ** -0.5, rel=1e-12), step


def test_the_other_schedules_ignore_the_budget():
    for name in ("constant", "inverse_sqrt", "plateau"):
        sched = Schedule(TrainConfig(schedule=name, lr=0.01, warmup=10, max_steps=100))
        assert sched.lr(40, 0.0) == sched.lr(40, 0.9), name


def test_linear_without_a_budget_is_refused_naming_the_keys():
    raw = {"model": {"family": "bahdanau"}, "train": {"schedule": "linear"}}
    with pytest.raises(NMTError, match="'train.schedule' linear.*'train.max_steps'"):
        config_from_dict(raw, where="cfg.yaml")


def test_a_linear_run_logs_rates_that_fall_to_nearly_zero(data_root, tmp_path):
    from nmt.training.trainer import Trainer

    cfg = tiny_config(data_root, tmp_path, "lin", MODELS["bahdanau"], schedule="linear",
                      max_steps=60, warmup=10, log_every=10, lr=0.01)
    trainer = Trainer(cfg, quiet=True)
    trainer.fit()
    rates = [r["lr"] for r in trainer.run.read_metrics() if r["kind"] == "train"]
    assert len(rates) == 6 and rates[0] == pytest.approx(0.01 * (1 - 10 / 60))
    assert all(a > b for a, b in zip(rates, rates[1:])) and rates[-1] < 1e-4


def test_every_rank_steps_with_rank_0s_budget_fraction(data_root, tmp_path, monkeypatch):
    """Under max_minutes each rank's clock differs a little; the rate must come from the
    fraction rank 0 broadcasts with its stop decision, or DDP replicas drift apart.
    Here "rank 0" reports half the budget spent while this process's own count says
    0, 1/3 and 2/3 of its 3 steps: the rate applied must be the broadcast one."""
    import nmt.training.trainer as train_module
    from nmt.training.trainer import Trainer

    real = train_module.dist.broadcast

    def rank0(value):
        if isinstance(value, tuple) and len(value) == 2:  # (stop reason, budget used)
            return value[0], 0.5
        return real(value)

    monkeypatch.setattr(train_module.dist, "broadcast", rank0)
    cfg = tiny_config(data_root, tmp_path, "ranks", MODELS["bahdanau"], schedule="linear",
                      max_steps=3, max_minutes=60.0, warmup=1, lr=0.01)
    trainer = Trainer(cfg, quiet=True)
    applied = []
    step = trainer.train_step

    def recording(batch, used=0.0, real=True):
        loss = step(batch, used, real)
        applied.append(trainer.optim.param_groups[0]["lr"])
        return loss

    trainer.train_step = recording
    trainer.fit()
    # this process alone would have used 0, 1/3, 2/3 of its 3 steps: 0.01, 0.0067, 0.0033
    assert applied == [pytest.approx(0.005)] * 3


def test_plateau_cuts_the_rate_after_patience_validations_without_gain():
    """nmt.training.schedule:Schedule — `plateau`: the rate (warmup included) is multiplied by
    train.plateau_factor once train.plateau_patience validations in a row bring no gain
    (a tie is no gain), and a gain starts the count again; the other schedules ignore
    validations; the state round-trips through state_dict (resume)."""
    cfg = TrainConfig(schedule="plateau", lr=0.01, warmup=10, plateau_factor=0.5,
                      plateau_patience=2)
    sched = Schedule(cfg)
    for bleu, rate in ((10.0, 0.01), (9.0, 0.01), (12.0, 0.01), (11.0, 0.01),
                       (11.5, 0.005), (12.0, 0.005), (1.0, 0.0025), (13.0, 0.0025)):
        sched.observe(bleu)
        assert sched.lr(20) == pytest.approx(rate), bleu
    assert sched.lr(5) == pytest.approx(0.0025 * 5 / 10)  # the warmup scales the cut rate
    again = Schedule(cfg)
    again.load_state_dict(sched.state_dict())
    again.observe(13.0)
    again.observe(13.0)  # the restored count: two ties after the best of 13 cut again
    assert again.lr(20) == pytest.approx(0.00125)
    for name in ("constant", "inverse_sqrt", "linear"):
        other = Schedule(TrainConfig(schedule=name, lr=0.01, warmup=10, max_steps=100))
        before = other.lr(20, 0.2)
        for bleu in (10.0, 1.0, 1.0, 1.0):
            other.observe(bleu)
        assert other.lr(20, 0.2) == before, name
