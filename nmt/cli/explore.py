"""`nmt explore` (registered on the main app)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.app import app


@app.command()
def explore(
    runs: Annotated[list[Path] | None, typer.Argument(
        help="run directories (their align/<split>.npz), npz files or `nmt align` folders")] = None,
    out: Annotated[Path, typer.Option(help="HTML file to write")] = Path("reports/explore.html"),
    split: Annotated[str | None, typer.Option(help="split of the runs (default: test)")] = None,
    align_dir: Annotated[list[Path] | None, typer.Option(
        help="`nmt align --out` folder: every .npz in it is a panel (repeatable)")] = None,
    gold: Annotated[Path | None, typer.Option(
        help="gold alignments (default: the corpus's <split>.gold)")] = None,
    one_based: Annotated[bool, typer.Option(help="--gold indices start at 1")] = False,
) -> None:
    """One self-contained HTML page to explore alignments, a panel per run and method."""
    from nmt.explore import build_explorer  # start-up: `nmt --help` imports no torch

    page = build_explorer(list(runs or []), out, split, list(align_dir or []), gold, one_based)
    for note in page.notes:
        typer.echo(note)
    gold_note = f", gold {page.gold}" if page.gold else ""
    typer.echo(f"wrote {page.path} ({page.bytes / 1e6:.2f} MB: {page.sentences} sentences x "
               f"{len(page.panels)} panels{gold_note})")
