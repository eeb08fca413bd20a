"""The one run directory layout, and loading a trained run back.

runs/<name>/
  config.yaml            resolved config
  spm/                   SentencePiece model(s) the run was trained with (written once)
  corpus/                the pinned corpus: what the run reads of its data (nmt.data.pin)
  checkpoints/best.pt    best validation BLEU; checkpoints/last.pt most recent;
                         step<N>.pt the last train.keep_last validations' weights;
                         averaged.pt their mean (nmt average)
  metrics.jsonl          one JSON object per log line / validation
  precision.json         the training precision and, for train.precision auto, its timings
  hyps/<split>.txt       decoded hypotheses
  scores.json            sacreBLEU BLEU/chrF with signatures, BLEU by length
  align/<split>.npz      attention matrices (+ .json index, .links Pharaoh)
  align/steps/           attention of a few validation sentences at each validation
  sampled/               vocab.sampling_alpha: each epoch's segmentation, an encoded store
                         (nmt.data.store), kept until a checkpoint of a later epoch exists
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from nmt.core.errors import NMTError, one_line
from nmt.core.locks import file_lock
from nmt.core.scratch import replace_file, scratch, swap_in


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
    sampled = property(lambda self: self.path / "sampled")

    def checkpoint(self, which: str = "best") -> Path:
        return self.checkpoints / f"{which}.pt"

    def install_vocab(self, vocab_dir: Path) -> None:
        """spm/ becomes exactly `vocab_dir`'s SentencePiece models, in one step: a start
        that died before its first checkpoint may have left another vocabulary's (a joint
        model beside a restart's two), which loading would prefer."""
        with scratch(self.spm) as tmp:
            for model in Path(vocab_dir).glob("*.model"):
                shutil.copy2(model, tmp / model.name)
            swap_in(tmp, self.spm)

    def read_scores(self) -> dict:
        """{split: its scores}; a file that is not that (cut, or valid JSON of another
        shape) is one line naming it."""
        if not self.scores.is_file():
            return {}
        try:
            scores = json.loads(self.scores.read_text())
            if not isinstance(scores, dict) or not all(isinstance(v, dict)
                                                       for v in scores.values()):
                raise ValueError("not a mapping of splits to their scores")
        except ValueError as exc:
            raise NMTError(f"{self.scores}: unreadable ({one_line(exc)}); delete it and run "
                           "nmt evaluate again") from None
        return scores

    def write_scores(self, split: str, entry: dict) -> None:
        """Set one split's entry: under a lock, so two `nmt evaluate` of one run keep both,
        and by rename, so a failed write leaves the previous file."""
        with file_lock(self.path / ".scores.lock"):
            scores = self.read_scores()
            scores[split] = entry
            replace_text(self.scores, json.dumps(scores, indent=2, ensure_ascii=False) + "\n")

    def read_metrics(self) -> list[dict]:
        """The logged records, in order. A line that is not a JSON object (the last one of a
        process killed while writing it) is left out, and named on stderr."""
        if not self.metrics.is_file():
            return []
        records, skipped = [], []
        for number, line in enumerate(self.metrics.read_text().splitlines(), 1):
            try:
                record = json.loads(line) if line.strip() else None
            except ValueError:
                record = "cut"
            if isinstance(record, dict):
                records.append(record)
            elif record is not None:
                skipped.append(str(number))
        if skipped:
            print(f"{self.metrics}: line{'s' * (len(skipped) > 1)} {', '.join(skipped)} not a "
                  "JSON record (cut by a crash?); left out", file=sys.stderr)
        return records


def keep_metrics(run: RunDir, step: int | None) -> None:
    """Start metrics.jsonl over (`step` None: a fresh start, whose file an abandoned start
    may have left), or keep only the records up to `step` (a resume: what came after its
    checkpoint is redone and logged again); in one rename."""
    if not run.metrics.is_file():
        return
    kept = [] if step is None else [r for r in run.read_metrics()
                                     if not isinstance(r.get("step"), int) or r["step"] <= step]
    replace_text(run.metrics, "".join(json.dumps(r) + "\n" for r in kept))


def replace_text(path: Path, text: str) -> None:
    """Write `text` to a scratch file beside `path` (nmt.core.scratch: owned while it lives,
    swept by the next write when its writer was killed), then rename it over `path`:
    readers see the old file or the new one, whole."""
    replace_file(path, lambda handle: handle.write(text.encode("utf-8")))
