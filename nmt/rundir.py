"""The one run directory layout, and loading a trained run back.

runs/<name>/
  config.yaml            resolved config
  spm/                   SentencePiece model(s) the run was trained with
  checkpoints/best.pt    best validation BLEU; checkpoints/last.pt most recent;
                         step<N>.pt the last train.keep_last validations' weights;
                         averaged.pt their mean (nmt average)
  metrics.jsonl          one JSON object per log line / validation
  hyps/<split>.txt       decoded hypotheses
  scores.json            sacreBLEU BLEU/chrF with signatures, BLEU by length
  align/<split>.npz      attention matrices (+ .json index, .links Pharaoh)
  align/steps/           attention of a few validation sentences at each validation
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nmt.checkpoint import check_vocab, load_checkpoint
from nmt.config import Config, config_from_dict, migrate, read_yaml
from nmt.data.subwords import Vocab
from nmt.errors import NMTError, one_line
from nmt.models import build_model
from nmt.models.base import Seq2Seq


class RunDir:
    def __init__(self, path: Path | str):
        self.path = Path(path)

    config = property(lambda self: self.path / "config.yaml")
    spm = property(lambda self: self.path / "spm")
    checkpoints = property(lambda self: self.path / "checkpoints")
    metrics = property(lambda self: self.path / "metrics.jsonl")
    scores = property(lambda self: self.path / "scores.json")
    align = property(lambda self: self.path / "align")
    hyps = property(lambda self: self.path / "hyps")

    def checkpoint(self, which: str = "best") -> Path:
        return self.checkpoints / f"{which}.pt"

    def install_vocab(self, vocab_dir: Path) -> None:
        self.spm.mkdir(parents=True, exist_ok=True)
        for model in vocab_dir.glob("*.model"):
            shutil.copy2(model, self.spm / model.name)

    def read_scores(self) -> dict:
        return json.loads(self.scores.read_text()) if self.scores.is_file() else {}

    def write_scores(self, split: str, entry: dict) -> None:
        scores = self.read_scores()
        scores[split] = entry
        self.scores.write_text(json.dumps(scores, indent=2, ensure_ascii=False) + "\n")

    def read_metrics(self) -> list[dict]:
        if not self.metrics.is_file():
            return []
        return [json.loads(line) for line in self.metrics.read_text().splitlines() if line]


def load_config(path: Path | str) -> Config:
    """The resolved config of a run directory; the one check that a folder is a run."""
    run = RunDir(path)
    if not run.path.is_dir():
        raise NMTError(f"{run.path}: run directory not found; pass a folder under runs/")
    if not run.config.is_file():
        raise NMTError(f"{run.path}: not a run directory (no config.yaml); pass a folder "
                       "written by `nmt train`")
    return config_from_dict(migrate(read_yaml(run.config)), str(run.config))


def load_run(path: Path | str, which: str = "best") -> tuple[Config, Vocab, Seq2Seq, dict]:
    """Config, vocabulary and model (eval mode) of a trained run, plus the checkpoint."""
    run = RunDir(path)
    cfg = load_config(run.path)
    ckpt_path = run.checkpoint(which)
    if which == "best" and not ckpt_path.is_file():
        ckpt_path = run.checkpoint("last")
    if which == "averaged" and not ckpt_path.is_file():
        raise NMTError(f"{ckpt_path}: no averaged checkpoint; write it with "
                       f"`nmt average --run {run.path} --last N`")
    payload = load_checkpoint(ckpt_path)
    vocab = Vocab.from_dir(run.spm)
    check_vocab(payload, vocab, ckpt_path, f"{run.spm} has {vocab.src_size}/{vocab.tgt_size}; "
                "they do not belong together")
    model = build_model(cfg.model, vocab.src_size, vocab.tgt_size, vocab.joint, cfg.local)
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, KeyError) as exc:
        raise NMTError(f"{ckpt_path}: weights do not match {run.config} "
                       f"({one_line(exc, 100)})") from None
    model.eval()
    return cfg, vocab, model, payload
