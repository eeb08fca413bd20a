"""Pictures of `nmt align`'s records: a heatmap per row and sentence with one grid per
sentence, and one validation sentence's attention over training (grid and GIF)."""

from __future__ import annotations

from pathlib import Path

from nmt.align.io import load_alignments
from nmt.core.errors import NMTError
from nmt.core.plotting import plot_grid, plot_heatmap, save_gif


def plot_sentences(out: Path, names: list[str], all_records: list, picks: list[int],
                   fmt: str) -> list[Path]:
    """A heatmap per row and sentence, and one grid per sentence with a panel per row."""

    paths = []
    first = next(recs for recs in all_records if recs is not None)
    for k in picks:
        panels, targets = [], []
        for name, recs in zip(names, all_records):
            rec = recs[k] if recs is not None else None
            panels.append((name, rec.word_weights if rec is not None else None))
            targets.append(rec.tgt_words if rec is not None else first[k].tgt_words)
            if rec is not None:
                paths.append(plot_heatmap(rec.word_weights, rec.src_words, rec.tgt_words,
                                          out / name / f"sentence{k}.{fmt}", f"{name}: #{k}"))
        paths.append(plot_grid(panels, first[k].src_words, targets,
                               out / f"grid_sentence{k}.{fmt}", f"sentence #{k}"))
    return paths


def over_training_grid(run: Path, sentence: int, out: Path, fmt: str) -> Path:
    """One validation sentence's attention at every validation step, as a grid (+ GIF)."""

    steps = sorted((run / "align" / "steps").glob("step*.npz"))
    if not steps:
        raise NMTError(f"{run}/align/steps: no attention snapshots; the run has no attention "
                       "or train.align_sentences was 0")
    panels, frames, base = [], [], None
    out.mkdir(parents=True, exist_ok=True)
    for path in steps:
        records = load_alignments(path)
        if sentence >= len(records):
            raise NMTError(f"--sentence {sentence}: snapshots hold {len(records)} sentences")
        rec = records[sentence]
        base = base or rec
        step = int(path.stem[4:])
        panels.append((f"step {step}", rec.word_weights))
        frames.append(plot_heatmap(rec.word_weights, rec.src_words, rec.tgt_words,
                                   out / f"frame_{step:08d}.png", f"step {step}"))
    grid = plot_grid(panels, base.src_words, base.tgt_words,
                     out / f"over_training_sentence{sentence}.{fmt}", f"{run.name}: #{sentence}")
    save_gif(frames, out / f"over_training_sentence{sentence}.gif")
    return grid
