"""The one run directory layout, and loading a trained run back.

runs/<name>/
  config.yaml            resolved config
  spm/                   SentencePiece model(s) the run was trained with
  checkpoints/best.pt    best validation BLEU; checkpoints/last.pt most recent;
                         step<N>.pt the last train.keep_last validations' weights;
                         averaged.pt their mean (nmt average)
  metrics.jsonl          one JSON object per log line / validation
  precision.json         the training precision and, for train.precision auto, its timings
  hyps/<split>.txt       decoded hypotheses
  scores.json            sacreBLEU BLEU/chrF with signatures, BLEU by length
  align/<split>.npz      attention matrices (+ .json index, .links Pharaoh)
  align/steps/           attention of a few validation sentences at each validation
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

from nmt.core.errors import NMTError
from nmt.core.locks import file_lock


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
    precision = property(lambda self: self.path / "precision.json")

    def checkpoint(self, which: str = "best") -> Path:
        return self.checkpoints / f"{which}.pt"

    def install_vocab(self, vocab_dir: Path) -> None:
        self.spm.mkdir(parents=True, exist_ok=True)
        for model in vocab_dir.glob("*.model"):
            shutil.copy2(model, self.spm / model.name)

    def read_scores(self) -> dict:
        if not self.scores.is_file():
            return {}
        try:
            return json.loads(self.scores.read_text())
        except ValueError as exc:
            raise NMTError(f"{self.scores}: unreadable ({exc}); delete it and run nmt evaluate "
                           "again") from None

    def write_scores(self, split: str, entry: dict) -> None:
        """Set one split's entry: under a lock, so two `nmt evaluate` of one run keep both,
        and by rename, so a failed write leaves the previous file."""
        with file_lock(self.path / ".scores.lock"):
            scores = self.read_scores()
            scores[split] = entry
            replace_text(self.scores, json.dumps(scores, indent=2, ensure_ascii=False) + "\n")

    def read_metrics(self) -> list[dict]:
        if not self.metrics.is_file():
            return []
        return [json.loads(line) for line in self.metrics.read_text().splitlines() if line]


def replace_text(path: Path, text: str) -> None:
    """Write `text` to a new, uniquely named file beside `path`, then rename it over `path`:
    readers see the old file or the new one, whole."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
