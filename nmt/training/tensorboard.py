"""TensorBoard events beside metrics.jsonl (`train.tensorboard: true`, the extra [tensorboard]).

The run directory stays the source of truth: this only mirrors what the trainer logs
(train/loss, train/lr, train/tokens_per_s at each log line; valid/loss, valid/bleu,
valid/chrf at each validation) plus, at each validation, the attention of the fixed
validation sentences that align/steps/ keeps, one image per sentence
(attention/sentence<i>), so TensorBoard's image slider shows the alignments forming.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nmt.align.io import load_alignments
from nmt.core.errors import NMTError
from nmt.core.plotting import _STYLE, _draw_heatmap, _side


def _writer_class():
    try:
        from torch.utils.tensorboard import (
            SummaryWriter,  # optional extra: pip install -e '.[tensorboard]'
        )
    except ImportError:
        raise NMTError("train.tensorboard: true needs the tensorboard package: "
                       "pip install -e '.[tensorboard]' (or set train.tensorboard: false)") from None
    return SummaryWriter


class Board:
    """Writes events to `directory`; does nothing when it is None (tensorboard off, or a
    rank other than 0). The writer opens at the first event, so a failed start leaves the
    run directory as it was, with `purge_step` at that event's step: events an earlier,
    crashed session wrote past the checkpoint a resumed run restarts from are dropped."""

    def __init__(self, directory: Path | None):
        self.directory, self.writer = directory, None
        if directory is not None:
            _writer_class()  # a missing package fails now, before any training

    def _open(self, step: int):
        if self.writer is None:
            self.writer = _writer_class()(str(self.directory), purge_step=step)
        return self.writer

    def scalars(self, step: int, values: dict) -> None:
        if self.directory is None:
            return
        writer = self._open(step)
        for tag, value in values.items():
            writer.add_scalar(tag, value, step)
        writer.flush()

    def attention(self, step: int, path: Path | None) -> None:
        """The records of align/steps/step<N>.npz (None: a family without attention)."""
        if self.directory is None or path is None:
            return

        writer = self._open(step)
        for i, rec in enumerate(load_alignments(path)):
            if rec.word_weights.size:
                writer.add_image(f"attention/sentence{i}", heatmap_image(rec), step,
                                 dataformats="HWC")
        writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def __enter__(self) -> Board:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def heatmap_image(rec) -> np.ndarray:
    """A record's word-level attention as nmt.core.plotting draws it, rendered off-screen to an
    (H, W, 3) uint8 array (no pyplot, which SummaryWriter.add_figure would import)."""
    import matplotlib  # start-up: matplotlib only when a figure is drawn
    from matplotlib.backends.backend_agg import (
        FigureCanvasAgg,  # start-up: matplotlib only when a figure is drawn
    )
    from matplotlib.figure import Figure  # start-up: matplotlib only when a figure is drawn


    with matplotlib.rc_context(_STYLE):
        fig = Figure(figsize=(_side(len(rec.src_words), 4, 14) + 1.2,
                              _side(len(rec.tgt_words), 3, 13)), layout="constrained")
        ax = fig.add_subplot()
        image = _draw_heatmap(ax, rec.word_weights, rec.src_words, rec.tgt_words)
        fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()
