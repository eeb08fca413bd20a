"""Bootstrapped guidance (issue 62, nmt.training.bootstrap; Zenkel et al. 2020): a pair of
runs, one per direction, teaches the next run with its own symmetrised alignments
(`guided.teacher: runs`), and `train.init_from` starts a run from another's weights."""

from __future__ import annotations

import pytest
import torch

from nmt.align.extract import collect
from nmt.align.guided import reading_of
from nmt.core.config import config_to_dict
from nmt.core.errors import NMTError
from nmt.data.symmetrize import flip_links, symmetrize
from nmt.decoding.api import load
from nmt.models.checks import config_from_dict
from nmt.training.bootstrap import model_links
from nmt.training.guided import links_folder, teacher_links
from nmt.training.trainer import Trainer
from tests.test_train import MODELS, tiny_config


def _config(data_root, runs, name: str, pair: str = "src-tgt", guided: dict | None = None,
            train: dict | None = None):
    cfg = tiny_config(data_root, runs, name, MODELS["transformer"], max_steps=12, threads=1,
                      valid_sentences=10)
    raw = config_to_dict(cfg)
    raw["data"]["pair"] = pair
    raw["guided"] = {"weight": 1.0, "teacher": "gold", "null_word": True, **(guided or {})}
    raw["train"].update(train or {})
    return config_from_dict(raw)


@pytest.fixture(scope="module")
def pair_of_runs(data_root, tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    out = []
    for name, pair in (("fwd", "src-tgt"), ("rev", "tgt-src")):
        cfg = _config(data_root, runs, name, pair)
        Trainer(cfg, quiet=True).fit()
        out.append(cfg.run_dir)
    return runs, out


def test_the_runs_links_are_their_two_directions_symmetrised(data_root, pair_of_runs):
    runs, (fwd, rev) = pair_of_runs
    cfg = _config(data_root, runs, "next", guided={
        "teacher": "runs", "teacher_run": str(fwd), "teacher_reverse": str(rev),
        "teacher_pairs": 5, "symmetrize": "grow-diag-final-and"})
    folder = data_root / "synth" / "src-tgt"
    src = (folder / "train.src").read_text().splitlines()[:8]
    tgt = (folder / "train.tgt").read_text().splitlines()[:8]
    got = model_links(cfg, {"train": (src, tgt)})["train"]

    def links(run, a, b):
        model = load(run)
        records = collect(model.module, model.vocab, model.vocab.encode_src(a),
                          model.vocab.encode_tgt(b), **reading_of(model.cfg))
        return [set(r.links) for r in records]

    ahead, back = links(fwd, src, tgt), links(rev, tgt, src)
    want = [symmetrize(a, flip_links(b), len(s.split()), len(t.split()), "grow-diag-final-and")
            for a, b, s, t in zip(ahead, back, src, tgt)]
    assert got[:5] == want[:5] and any(got[:5])
    assert got[5:] == [set()] * 3  # beyond guided.teacher_pairs: no links, trained unguided


def test_a_run_taught_by_runs_trains_from_their_weights(data_root, pair_of_runs):
    runs, (fwd, rev) = pair_of_runs
    guided = {"teacher": "runs", "teacher_run": str(fwd), "teacher_reverse": str(rev),
              "teacher_pairs": 40}
    cfg = _config(data_root, runs, "boot", guided=guided, train={"init_from": str(fwd),
                                                                  "max_steps": 2})
    trainer = Trainer(cfg, quiet=True)
    start = load(fwd).module.state_dict()
    assert all(torch.equal(v, start[k]) for k, v in trainer.model.state_dict().items())
    trainer.fit()
    assert links_folder(cfg).name.startswith("src-tgt.runs-")
    assert any(teacher_links(cfg, "train")[:40])
    other = config_from_dict({**config_to_dict(cfg), "guided": {**guided, "teacher_pairs": 41}})
    assert links_folder(other) != links_folder(cfg)  # the key holds the settings


def test_teacher_runs_and_init_from_are_refused_in_one_line(data_root, pair_of_runs, tmp_path):
    runs, (fwd, rev) = pair_of_runs
    wrong = _config(data_root, runs, "w", guided={"teacher": "runs", "teacher_run": str(rev),
                                                  "teacher_reverse": str(fwd)})
    with pytest.raises(NMTError, match="it must be synth src-tgt"):
        Trainer(wrong, quiet=True)
    import shutil

    unvalidated = shutil.copytree(fwd, tmp_path / "unvalidated")
    (unvalidated / "checkpoints" / "best.pt").unlink()
    early = _config(data_root, runs, "e", guided={"teacher": "runs", "teacher_run": str(
        unvalidated), "teacher_reverse": str(rev)})
    with pytest.raises(NMTError, match="no best checkpoint yet"):
        links_folder(early)
    with pytest.raises(NMTError, match="set guided.teacher_run"):
        Trainer(_config(data_root, runs, "u", guided={"teacher": "runs"}), quiet=True)
    other = tiny_config(data_root, tmp_path, "v", MODELS["transformer"], max_steps=1,
                        threads=1)
    raw = config_to_dict(other)
    raw["vocab"]["size"] = 500
    raw["train"]["init_from"] = str(fwd)
    with pytest.raises(NMTError, match="train.init_from needs a run of this vocabulary"):
        Trainer(config_from_dict(raw), quiet=True)
