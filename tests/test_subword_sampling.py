"""vocab.sampling_alpha (subword regularisation, Kudo 2018): training pairs are segmented
anew each epoch, reproducibly; validation keeps the best segmentation; alpha 0 is as before."""

from __future__ import annotations

import numpy as np
import pytest

import nmt.data.pin as pin_module
import nmt.data.store as store_module
import nmt.training.batches as batches_module
from nmt.core.config import config_to_dict
from nmt.core.errors import NMTError
from nmt.core.tokens import EOS
from nmt.data.batching import filter_long
from nmt.data.corpora import load_split
from nmt.data.store import Ragged, encode_split
from nmt.data.subwords import prepare_vocab
from nmt.models.checks import config_from_dict
from nmt.training.batches import sampled_examples
from nmt.training.trainer import Trainer
from tests.test_train import MODELS, tiny_config


def _config(data_root, tmp_path, name, concat=1, train=None, **vocab):
    cfg = tiny_config(data_root, tmp_path, name, MODELS["bahdanau"], max_steps=2, **(train or {}))
    raw = config_to_dict(cfg)
    raw["vocab"].update(vocab)
    raw["data"]["concat"] = concat
    return config_from_dict(raw)


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def _text(vocab, ids) -> str:
    return vocab.tgt.decode([int(i) for i in ids if i > EOS])  # joint: one model


def test_training_is_sampled_validation_keeps_the_best(data_root, tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "CHUNK_LINES", 37)  # many chunks, each seeded alone
    cfg = _config(data_root, tmp_path, "sampled", sampling_alpha=0.1)
    trainer = Trainer(cfg, quiet=True)
    d = trainer.data  # the best segmentation is the cached store's (the precision probe
    best_src, best_tgt = encode_split(cfg, prepare_vocab(cfg), cfg.data.train)  # may have
    keep = d.sample_keep.tolist()  # sampled epoch 0 already)
    valid = list(d.valid_src)
    batches = trainer.epoch_batches(0)
    src, tgt = d.train_src, d.train_tgt
    assert len(src) == len(keep) and list(d.train_idx) == list(range(len(keep)))
    changed = sum(not np.array_equal(s, best_src[k]) for s, k in zip(src, keep))
    assert changed > len(keep) // 4, changed  # many pairs split otherwise...
    assert isinstance(src, Ragged) and src.folder.parent == trainer.run.sampled  # a store
    for s, t, k in zip(src, tgt, keep):  # ...into the same text
        assert _text(d.vocab, s) == _text(d.vocab, best_src[k]) and s[-1] == EOS
        assert _text(d.vocab, t) == _text(d.vocab, best_tgt[k])
    # the batches are those of the sampled lengths: each stays under the token budget
    assert sorted(i for b in batches for i in b) == list(range(len(keep)))
    for b in batches:
        longest = max(max(len(src[i]), len(tgt[i]) + 1) for i in b)
        assert len(b) == 1 or longest * len(b) <= cfg.train.batch_tokens
    # validation keeps the best segmentation, the cached one
    v_src, _ = encode_split(cfg, prepare_vocab(cfg), cfg.data.valid)
    assert _same(d.valid_src, valid) and _same(valid, v_src[:len(valid)])
    lines, _ = load_split(data_root, "synth", cfg.data.pair, cfg.data.valid)
    assert _same(valid[:50], [np.asarray(x) for x in d.vocab.encode_src(lines[:50])])


def test_an_epochs_draw_is_kept_in_the_run_and_read_again_on_resume(data_root, tmp_path,
                                                                    monkeypatch):
    """sampled_examples: each epoch's segmentation is written once into the run's
    sampled/ store and read back while that epoch lasts, so a resumed run continues on the
    same draw (SentencePiece's sampler cannot be seeded across processes); the next
    epoch's draw replaces it."""
    cfg = _config(data_root, tmp_path, "sampled_a", sampling_alpha=0.1, sampling_nbest=-1)
    trainer = Trainer(cfg, quiet=True)
    assert trainer.fit().step == 2  # inside epoch 0
    folder = trainer.run.sampled
    batches = trainer.epoch_batches(0)
    first = [list(trainer.data.train_src), list(trainer.data.train_tgt)]

    def fail(*args):
        raise AssertionError("drawn again instead of reading the epoch's store")

    monkeypatch.setattr(pin_module, "sampled_chunks", fail)
    raw = config_to_dict(cfg)
    raw["train"]["max_steps"] = 4
    resumed = Trainer(config_from_dict(raw), resume=True, quiet=True)
    assert resumed.epoch_batches(0) == batches
    assert _same(list(resumed.data.train_src), first[0])
    assert _same(list(resumed.data.train_tgt), first[1])
    assert resumed.fit().step == 4
    monkeypatch.undo()
    other = sampled_examples(cfg, resumed.data, 1, folder)
    assert not _same(first[0], list(other[0]))
    names = sorted(p.name.split(".")[0] for p in folder.glob("seed*"))  # epoch 0's stays
    assert names == [f"seed{cfg.train.seed}", f"seed{cfg.train.seed + 1}"]  # until a
    batches_module.prune_sampled(cfg, folder, 1)  # checkpoint of epoch 1 is saved (defect 3)
    assert [p.name.split(".")[0] for p in folder.glob("seed*")] == [f"seed{cfg.train.seed + 1}"]


def test_joined_examples_keep_their_pairs(data_root, tmp_path):
    """data.concat: the sampled examples join the same runs of pairs as the best ones."""
    cfg = _config(data_root, tmp_path, "sampled_concat", concat=3, sampling_alpha=0.1)
    d = Trainer(cfg, quiet=True).data
    best = list(d.train_src), list(d.train_tgt)
    src, tgt = sampled_examples(cfg, d, 0, tmp_path / "sampled")
    assert len(src) == len(best[0]) < d.kept
    for i in range(0, len(src), 7):
        assert _text(d.vocab, src[i]) == _text(d.vocab, best[0][i])
        assert _text(d.vocab, tgt[i]) == _text(d.vocab, best[1][i])


def test_alpha_zero_trains_on_the_cached_best_segmentation(data_root, tmp_path):
    cfg = _config(data_root, tmp_path, "not_sampled")
    assert cfg.vocab.sampling_alpha == 0.0 and cfg.vocab.sampling_nbest == -1
    trainer = Trainer(cfg, quiet=True)
    d = trainer.data
    src, tgt = encode_split(cfg, prepare_vocab(cfg), cfg.data.train)
    keep = filter_long(src, tgt, cfg.data.max_len)
    assert d.sample_keep is None and np.array_equal(d.train_idx, keep)
    before = d.train_src, d.train_tgt
    assert trainer.epoch_batches(0) == trainer.epoch_batches(0)
    assert d.train_src is before[0] and d.train_tgt is before[1]  # untouched, not re-encoded
    assert _same(d.train_src, src) and _same(d.train_tgt, tgt)


def test_a_sampled_run_trains(data_root, tmp_path):
    cfg = _config(data_root, tmp_path, "sampled_fit", train={"log_every": 1},
                  sampling_alpha=0.2, sampling_nbest=8)
    trainer = Trainer(cfg, quiet=True)
    progress = trainer.fit()
    assert progress.step == 2
    losses = [r["loss"] for r in trainer.run.read_metrics() if r["kind"] == "train"]
    assert len(losses) == 2 and all(np.isfinite(losses))


@pytest.mark.parametrize("key, value", [("sampling_alpha", 1.5), ("sampling_alpha", -0.1),
                                        ("sampling_nbest", 0), ("sampling_nbest", -2)])
def test_sampling_options_are_checked(data_root, tmp_path, key, value):
    with pytest.raises(NMTError, match=f"vocab.{key}"):
        _config(data_root, tmp_path, "bad", **{key: value})
