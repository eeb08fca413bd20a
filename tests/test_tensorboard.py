"""train.tensorboard: the events mirror metrics.jsonl and carry the fixed validation
sentences' attention as images; a missing package fails at start with one line."""

from __future__ import annotations

import sys

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmt.core.errors import NMTError
from nmt.training.trainer import Trainer
from tests.test_train import MODELS, tiny_config


def _events(run_dir) -> EventAccumulator:
    return EventAccumulator(str(run_dir / "tensorboard"),
                            size_guidance={"scalars": 0, "images": 0}).Reload()


def _series(acc: EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(e.step, pytest.approx(e.value, rel=1e-5, abs=1e-6)) for e in acc.Scalars(tag)]


def test_events_mirror_metrics_and_show_attention(data_root, tmp_path):
    cfg = tiny_config(data_root, tmp_path, "board", MODELS["bahdanau"], max_steps=4,
                      valid_every=2, log_every=1, align_sentences=2, tensorboard=True)
    trainer = Trainer(cfg, quiet=True)
    trainer.fit()
    assert trainer.board.writer is None  # closed at the end of fit
    metrics = trainer.run.read_metrics()
    train = [r for r in metrics if r["kind"] == "train"]
    valid = [r for r in metrics if r["kind"] == "valid"]
    assert [r["step"] for r in train] == [1, 2, 3, 4] and [r["step"] for r in valid] == [2, 4]
    acc = _events(cfg.run_dir)
    for tag, key in [("train/loss", "loss"), ("train/lr", "lr"),
                     ("train/tokens_per_s", "tokens_per_s")]:
        assert [(r["step"], r[key]) for r in train] == _series(acc, tag), tag
    for tag, key in [("valid/loss", "valid_loss"), ("valid/bleu", "bleu"), ("valid/chrf", "chrf")]:
        assert [(r["step"], r[key]) for r in valid] == _series(acc, tag), tag
    images = sorted(t for t in acc.Tags()["images"] if t.startswith("attention/"))
    assert images == ["attention/sentence0", "attention/sentence1"]
    shots = acc.Images("attention/sentence0")
    assert [s.step for s in shots] == [2, 4]
    assert shots[0].encoded_image_string[:8] == b"\x89PNG\r\n\x1a\n"
    assert shots[0].width > 100 and shots[0].height > 100


def test_a_family_without_attention_gets_scalars_only(data_root, tmp_path):
    cfg = tiny_config(data_root, tmp_path, "board_fixed", MODELS["fixed_context"], max_steps=2,
                      valid_every=2, log_every=1, align_sentences=2, tensorboard=True)
    Trainer(cfg, quiet=True).fit()
    acc = _events(cfg.run_dir)
    assert [s for s, _ in _series(acc, "valid/bleu")] == [2]
    assert acc.Tags()["images"] == []


def test_missing_package_fails_at_start_in_one_line(data_root, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    cfg = tiny_config(data_root, tmp_path, "board_missing", MODELS["bahdanau"], max_steps=2,
                      tensorboard=True)
    with pytest.raises(NMTError) as err:
        Trainer(cfg, quiet=True)
    message = str(err.value)
    assert "\n" not in message and "pip install -e '.[tensorboard]'" in message
    assert not cfg.run_dir.exists()  # nothing written, nothing trained
