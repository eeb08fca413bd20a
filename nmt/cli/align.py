"""`nmt align` and `nmt compare`: declare options, call one function."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.app import Checkpoint, Method, Symmetrization, app
from nmt.data.symmetrize import DEFAULT_AGREEMENT, HEURISTICS


class Mode(str, Enum):
    forced = "forced"
    free = "free"


class Reading(str, Enum):
    auto = "auto"
    naive = "naive"
    shifted = "shifted"


class Links(str, Enum):
    argmax = "argmax"
    threshold = "threshold"


Heuristic = Enum("Heuristic", {name: name for name in HEURISTICS}, type=str)


class Format(str, Enum):
    png = "png"
    svg = "svg"


@app.command()
def align(
    run: Annotated[list[Path], typer.Option("--run", "-r", help="run directory (repeat for side by side)")],
    split: Annotated[str | None, typer.Option(help="split of the run's corpus (default: test)")] = None,
    pairs: Annotated[Path | None, typer.Option(help="file of 'source ||| target' lines")] = None,
    src: Annotated[list[str] | None, typer.Option(help="source sentence (repeatable)")] = None,
    tgt: Annotated[list[str] | None, typer.Option(help="target for --src (forced mode)")] = None,
    mode: Annotated[Mode, typer.Option(help="forced (on the given target) or free (on the model's translation)")] = Mode.forced,
    gold: Annotated[Path | None, typer.Option(help="gold alignments (Pharaoh i-j / talp i-j, ipj)")] = None,
    one_based: Annotated[bool, typer.Option(help="gold indices start at 1")] = False,
    limit: Annotated[int, typer.Option(min=0, help="only the first N sentences (0 = all)")] = 0,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("reports/align"),
    plot: Annotated[int, typer.Option(min=0, help="plot the first N sentences")] = 3,
    fmt: Annotated[Format, typer.Option("--format", help="figure format")] = Format.png,
    layer: Annotated[int | None, typer.Option(help="transformer layer for word links (default: the mean of all layers and heads)")] = None,
    reading: Annotated[Reading, typer.Option(help="transformer reading (Chen et al. 2020)")] = Reading.auto,
    links: Annotated[Links, typer.Option(help="hard links: argmax per target word, or threshold")] = Links.argmax,
    threshold: Annotated[float, typer.Option(min=0.0, max=1.0, help="with --links threshold: every word pair with weight >= this")] = 0.5,
    method: Annotated[list[Method] | None, typer.Option(help="attention (default) or saliency: grad x input attribution, every family (repeatable)")] = None,
    reverse: Annotated[list[Path] | None, typer.Option(help="a run trained the other way on the same corpus, one per --run: adds its flipped and the symmetrised rows")] = None,
    symmetrize: Annotated[list[Symmetrization] | None, typer.Option(help="symmetrisation with --reverse (repeatable; default agreement: geometric mean of the two maps >= --agreement-threshold)")] = None,
    agreement_threshold: Annotated[float | None, typer.Option(min=1e-6, max=1.0, help="link threshold of --symmetrize agreement [default: nmt.data.symmetrize.DEFAULT_AGREEMENT, chosen on validation gold]")] = None,
    adapt: Annotated[int, typer.Option(min=0, help="fine-tune a copy of each model on the pairs for N steps before aligning (the run is not changed)")] = 0,
    adapt_lr: Annotated[float | None, typer.Option(min=1e-9, help="constant Adam learning rate for --adapt [default: 1e-3, nmt.training.adapt.DEFAULT_LR]")] = None,
    adapt_guides: Annotated[Heuristic | None, typer.Option(help="with --adapt of a guided run: join eflomal's two directions of the pairs so for its teacher links [default: the run's guided.symmetrize]")] = None,
    ensemble: Annotated[bool, typer.Option("--ensemble", help="add rows of the mean map of all --run (and of all --reverse, symmetrised): an ensemble of runs")] = False,
    statistical: Annotated[bool, typer.Option("--statistical", help="add a statistical aligner's row: eflomal trained on the run's corpus plus the pairs (pip install -e '.[align]')")] = False,
    over_training: Annotated[bool, typer.Option("--over-training", help="draw one validation sentence across training steps")] = False,
    sentence: Annotated[int, typer.Option(min=0, help="sentence for --over-training")] = 0,
    checkpoint: Annotated[Checkpoint, typer.Option(help="which checkpoint: best, last, or averaged (nmt average)")] = Checkpoint.best,
) -> None:
    """Export attention matrices, hard links and plots; AER against gold alignments."""
    from nmt.align.extract import DEFAULT_METHOD  # start-up: torch
    from nmt.report.align import AlignOptions, align_runs
    from nmt.report.align_plots import over_training_grid  # start-up: matplotlib

    if over_training:
        for r in run:
            typer.echo(f"wrote {over_training_grid(r, sentence, out / r.name, fmt.value)}")
        return
    opts = AlignOptions(
        runs=list(run), out=out, split=split, pairs=pairs, src=list(src or []),
        tgt=list(tgt or []), mode=mode.value, gold=gold, one_based=one_based, limit=limit,
        plot=plot, fmt=fmt.value, layer=layer, reading=reading.value, links=links.value,
        threshold=threshold, methods=[m.value for m in method or []] or [DEFAULT_METHOD],
        reverse=list(reverse or []), symmetrize=[h.value for h in symmetrize or []],
        adapt=adapt, adapt_guides=adapt_guides.value if adapt_guides else None,
        statistical=statistical, ensemble=ensemble, checkpoint=checkpoint.value,
        **({"adapt_lr": adapt_lr} if adapt_lr is not None else {}),
        agreement=DEFAULT_AGREEMENT if agreement_threshold is None else agreement_threshold)
    for name, row in align_runs(opts).items():
        typer.echo(f"{name:<24} {summary_line(row)}")
    typer.echo(f"wrote {out}")


def summary_line(row: dict) -> str:
    """One line per run: entropy, EOS mass and, with gold, AER beside the diagonal's."""
    if "note" in row:
        return row["note"]
    aer = (f" AER {row['aer']:.3f} (P {row['precision']:.3f} R {row['recall']:.3f}; "
           f"diagonal {row['diagonal_aer']:.3f})" if "aer" in row else "")
    adapt = row.get("adapt", {})
    teacher = (f" (+ {adapt['teacher_seconds']:.1f} s of eflomal's guides)"
               if adapt.get("teacher_seconds") else "")
    adapted = (f"; adapted {adapt['steps']} steps in {adapt['seconds']:.1f} s{teacher}"
               if adapt else "")
    return f"entropy {row['entropy']:.3f} nats, EOS mass {row['eos_mass']:.3f}{aer}{adapted}"


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="run directories")],
    out: Annotated[Path, typer.Option(help="report folder")] = Path("reports/compare"),
    split: Annotated[str | None, typer.Option(help="split to report (default: test)")] = None,
    sentence: Annotated[list[int] | None, typer.Option(help="sentence index for the alignment grid (repeatable)")] = None,
    statistical: Annotated[bool, typer.Option("--statistical", help="add eflomal's row and grid panel, trained on the corpus plus the split (pip install -e '.[align]')")] = False,
) -> None:
    """One Markdown + HTML report putting runs side by side."""
    from nmt.report.compare import compare_runs  # start-up: `nmt --help` imports no torch

    path = compare_runs(list(runs), out, split, sentence, statistical)
    typer.echo(f"wrote {path} and {path.with_suffix('.html')}")
