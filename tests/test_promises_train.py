"""Promises of nmt/training/trainer.py's docstrings that no other test pinned: what the loss sums
(label-smoothed cross-entropy over real target tokens only), which budget ends a run
(0 = no limit, earlier sessions' time counted), and the final validation."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from nmt.data.batching import collate
from nmt.training.loss import loss_fn
from nmt.training.trainer import Trainer
from tests.conftest import tiny_model

PAIRS = [([5, 6, 7, 8, 9, 3], [10, 11, 12, 13]), ([14, 15, 3], [16]), ([17, 18, 19, 3], [20, 21])]


def _batch(pairs):
    return collate([np.array(s) for s, _ in pairs], [np.array(t) for _, t in pairs])


@pytest.mark.parametrize("name", ["bahdanau", "transformer"])
def test_loss_is_label_smoothed_cross_entropy_summed_over_real_tokens(name):
    """nmt.training.trainer:loss_fn — "Label-smoothed cross-entropy summed over real target tokens
    (padding excluded)": a padded batch's loss is the sum of its sentences' losses alone,
    each (1 - e) * -log p(y) + e * mean_v -log p(v) per token, EOS included."""
    model = tiny_model(name)
    smoothing = 0.1
    batch = _batch(PAIRS)
    together = loss_fn(model, batch, smoothing).item()
    alone = [loss_fn(model, _batch([pair]), smoothing).item() for pair in PAIRS]
    assert together == pytest.approx(sum(alone), rel=1e-5)
    one = _batch(PAIRS[:1])
    log_p = torch.log_softmax(model(one.src, one.tgt_in)[0][0], -1)  # (T, V)
    y = one.tgt_out[0]
    assert y.tolist() == [10, 11, 12, 13, 3]  # the target and its EOS, 5 tokens
    by_hand = ((1 - smoothing) * -log_p[torch.arange(5), y] + smoothing * -log_p.mean(-1)).sum()
    assert alone[0] == pytest.approx(by_hand.item(), rel=1e-5)


def _fake(step=0, epoch=0, stale=0, base=0.0, **train):
    limits = {"max_steps": 0, "max_minutes": 0, "max_epochs": 0, "patience": 0, **train}
    fake = SimpleNamespace(cfg=SimpleNamespace(train=SimpleNamespace(**limits)),
                           progress=SimpleNamespace(step=step, epoch=epoch, stale=stale),
                           base=base, started=time.time())
    fake.elapsed = lambda: Trainer.elapsed(fake)
    return fake


def test_each_budget_ends_the_run_and_zero_means_no_limit():
    """nmt.training.trainer:Trainer.out_of_budget — whichever of train.max_steps, max_minutes,
    max_epochs or patience (validations without BLEU gain) is reached first ends the run;
    0 turns a limit off. Trainer.elapsed — earlier sessions (before --resume) count."""
    out = Trainer.out_of_budget
    assert out(_fake(step=10**6, epoch=10**3, stale=10**3, base=10**6)) is None  # no limits
    assert out(_fake(step=99, max_steps=100)) is None
    assert out(_fake(step=100, max_steps=100)) == "reached train.max_steps=100"
    assert out(_fake(epoch=2, max_epochs=2)) == "reached train.max_epochs=2"
    assert out(_fake(epoch=1, max_epochs=2)) is None
    assert out(_fake(base=0.0, max_minutes=1)) is None
    assert out(_fake(base=60.0, max_minutes=1)) == "reached train.max_minutes=1"  # resumed
    assert out(_fake(base=59.0, max_minutes=1)) is None  # minutes, not seconds
    assert out(_fake(stale=2, patience=3)) is None
    assert "early stop" in out(_fake(stale=3, patience=3))


def test_the_run_ends_with_one_validation_at_its_last_step():
    """nmt.training.trainer:Trainer._finish — a run that ends on its budget validates (and saves) at
    its last step unless it has just validated there; a signal does not validate."""
    calls = []
    for history, step, reason, validates in (([], 5, "reached", True),
                                             ([{"step": 3}], 5, "reached", True),
                                             ([{"step": 5}], 5, "reached", False),
                                             ([], 5, "signal", False)):
        fake = SimpleNamespace(progress=SimpleNamespace(history=history, step=step),
                               _validate_and_save=lambda: calls.append(1))
        before = len(calls)
        assert Trainer._finish(fake, reason) == reason
        assert (len(calls) - before == 1) is validates


def test_logged_loss_throughput_and_patience_in_a_real_run(data_root, tmp_path, monkeypatch):
    """nmt.training.trainer:Trainer._loop and _validate_and_save — each `train` record's loss is the
    token-weighted mean of the step losses since the last record, and its tokens_per_s
    those steps' target tokens over their seconds; each `valid` record's
    train_tokens_per_s is all target tokens over the seconds spent in training steps; a
    validation without BLEU gain counts towards train.patience, a gain resets it, and
    `patience` validations without gain end the run (early stopping)."""
    from tests.test_train import MODELS, tiny_config

    bleus = iter([5.0, 4.0, 6.0, 6.0, 5.0, 9.0, 9.0])  # a tie is no gain
    steps = []
    real_step = Trainer.train_step

    def step(self, batch, used=0.0, real=True):
        tick = time.perf_counter()
        loss = real_step(self, batch, used, real)
        steps.append((loss, batch.n_tokens, time.perf_counter() - tick))
        return loss

    def validate(self):
        return {"valid_loss": 1.0, "valid_ppl": float(np.e), "bleu": next(bleus), "chrf": 0.0}

    monkeypatch.setattr(Trainer, "train_step", step)
    monkeypatch.setattr(Trainer, "validate", validate)
    cfg = tiny_config(data_root, tmp_path, "patience", {**MODELS["bahdanau"], "emb_size": 16,
                      "hidden_size": 16}, max_steps=100, log_every=3, valid_every=2, patience=2)
    trainer = Trainer(cfg, quiet=True)
    trainer.fit()
    p = trainer.progress
    assert p.step == 10  # 5, 4 (1), 6 (0), 6 (1), 5 (2): stopped after the fifth validation
    assert p.stale == 2 and p.best_bleu == 6.0
    records = trainer.run.read_metrics()
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == [3, 6, 9]
    for r in train:
        window = steps[r["step"] - 3:r["step"]]
        tokens = sum(n for _, n, _ in window)
        assert r["loss"] == pytest.approx(sum(loss * n for loss, n, _ in window) / tokens,
                                          rel=1e-9)
        # the loop's clock runs around `step`'s: its window lasts at least the steps' own
        # seconds, and more only by its bookkeeping (far under half a second)
        inner = sum(t for _, _, t in window)
        assert inner * (1 - 1e-9) <= tokens / r["tokens_per_s"] < inner + 0.5
    valid = [r for r in records if r["kind"] == "valid"]
    assert [r["step"] for r in valid] == [2, 4, 6, 8, 10]
    assert p.tokens == sum(n for _, n, _ in steps)
    assert valid[-1]["train_tokens_per_s"] == pytest.approx(p.tokens / p.train_seconds)


def test_each_epoch_has_its_own_batch_order_and_the_same_one_again(data_root, tmp_path):
    """nmt.training.trainer:Trainer.epoch_batches — shuffled with seed train.seed + epoch: no two
    epochs of a run share an order (small seeds included), and an epoch asked for again
    (a resumed run) gets the same one."""
    from tests.test_train import MODELS, tiny_config

    for seed in (0, 1, 2):
        cfg = tiny_config(data_root, tmp_path, f"order{seed}", MODELS["bahdanau"], seed=seed)
        trainer = Trainer(cfg, quiet=True)
        orders = [trainer.epoch_batches(epoch) for epoch in range(6)]
        assert len({tuple(map(tuple, order)) for order in orders}) == 6, seed
        assert trainer.epoch_batches(3) == orders[3]
        assert sorted(i for batch in orders[0] for i in batch) == sorted(
            i for batch in orders[5] for i in batch)  # every pair once per epoch


def test_validation_loss_is_the_plain_cross_entropy_per_target_token(data_root, tmp_path):
    """nmt.training.trainer:Trainer.validate — "Validation loss/perplexity on the chosen sentences":
    the cross-entropy per real target token without the training's label smoothing, and
    its exponential."""
    from tests.test_train import MODELS, tiny_config

    cfg = tiny_config(data_root, tmp_path, "valid", MODELS["bahdanau"], label_smoothing=0.1)
    trainer = Trainer(cfg, quiet=True)
    record = trainer.validate()
    d, model = trainer.data, trainer.model.eval()
    with torch.no_grad():
        batch = collate(d.valid_src, d.valid_tgt)
        total = loss_fn(model, batch, 0.0).item()
    assert record["valid_loss"] == pytest.approx(total / batch.n_tokens, rel=1e-5)
    assert record["valid_ppl"] == pytest.approx(np.exp(record["valid_loss"]), rel=1e-9)


def test_validation_bleu_is_greedy_whatever_decode_beam_says(data_root, tmp_path, monkeypatch):
    """nmt.training.trainer:Trainer.validate — "greedy BLEU and chrF": with decode.beam 3 validation
    still searches greedily (beam search is never called) and scores what greedy search
    translates."""
    import nmt.decoding.translate
    from nmt.core.config import config_to_dict
    from nmt.decoding.evaluate import bleu_chrf
    from nmt.models.checks import config_from_dict
    from tests.test_train import MODELS, tiny_config

    cfg = tiny_config(data_root, tmp_path, "greedy", MODELS["bahdanau"])
    cfg = config_from_dict({**config_to_dict(cfg), "decode": {"beam": 3}})
    trainer = Trainer(cfg, quiet=True)

    def no_beam(*args, **kwargs):
        raise AssertionError("validation ran beam search")

    greedy = nmt.decoding.translate.translate_ids(trainer.model.eval(), trainer.data.vocab,
                                         trainer.data.valid_src, cfg.decode, beam=1)
    monkeypatch.setattr(nmt.decoding.translate, "beam_search", no_beam)
    record = trainer.validate()
    assert record["bleu"] == bleu_chrf(greedy, trainer.data.valid_refs)["bleu"]


def test_the_display_gets_the_epochs_done_as_a_real_number(data_root, tmp_path, monkeypatch):
    """nmt.core.progress:training_budget — "`position` is epochs done as a real number (epoch +
    batch / batches)": what the training loop passes the display after each step, which
    the max_epochs ETA is computed from."""
    from nmt.core.progress import TrainDisplay
    from tests.test_train import MODELS, tiny_config

    positions = []
    monkeypatch.setattr(TrainDisplay, "update",
                        lambda self, **kw: positions.append((kw["epoch"], kw["position"])))
    cfg = tiny_config(data_root, tmp_path, "position", MODELS["bahdanau"], max_steps=6)
    trainer = Trainer(cfg, quiet=True)
    n = len(trainer.epoch_batches(0))
    assert n > 6
    trainer.fit()
    assert positions == [(0, pytest.approx(k / n)) for k in range(1, 7)]


def test_max_epochs_ends_a_real_run_after_that_many_passes(tmp_path):
    """nmt.training.trainer:Trainer._loop and out_of_budget — "max_epochs" counted by the loop: a run
    with train.max_epochs 2 (and no other limit that it reaches) takes every batch of
    epoch 0, then of epoch 1, and stops there, at epoch 2."""
    from nmt.data.corpora import ensure_synth
    from tests.test_train import MODELS, tiny_config

    root = tmp_path / "data"
    ensure_synth(root, sizes={"train": 400, "val": 10, "test": 10})
    model = {**MODELS["bahdanau"], "emb_size": 16, "hidden_size": 16}
    cfg = tiny_config(root, tmp_path / "runs", "epochs", model, max_epochs=2, batch_tokens=60,
                      max_steps=1000, valid_sentences=10)  # max_steps: a guard only
    trainer = Trainer(cfg, quiet=True)
    batches = [len(trainer.epoch_batches(epoch)) for epoch in (0, 1)]
    assert 1 < batches[0] < 100
    p = trainer.fit()
    assert (p.epoch, p.step) == (2, sum(batches))


def test_release_free_memory_hands_freed_heap_pages_back():
    """nmt.core.memory:release_free_memory — "Hand the allocator's free pages back to the
    system": 200 MB of small tensors (heap blocks, not their own mappings) freed with a
    live tensor after them stay resident until trimmed; trimmed, RSS falls by most of it.
    The trainer trims at every log line and after every validation."""
    import sys

    from nmt.core.memory import release_free_memory, rss_mib

    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's malloc_trim: Linux")
    blocks = [torch.empty(12_000) for _ in range(4_000)]  # 48 KB each, under mmap's 128 KB
    for b in blocks:
        b.fill_(1.0)
    keep = torch.ones(10)  # the heap's top stays in use: plain free() cannot shrink it
    del blocks
    freed = rss_mib()  # free() alone keeps the pages: 180 MB still resident here
    assert release_free_memory() is True
    after = rss_mib()
    assert freed - after > 100, (freed, after)
    assert keep.sum() == 10
    import inspect

    from nmt.training import trainer

    assert inspect.getsource(trainer).count("release_free_memory()") >= 2
