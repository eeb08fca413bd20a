"""`nmt publish`: a run as a Hugging Face model folder, pushed to the Hub on request."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.app import Checkpoint, RunOpt, app
from nmt.cli.core import CheckpointOpt


@app.command()
def publish(
    run: RunOpt,
    out: Annotated[Path, typer.Option(help="the model folder to write (new, or a published "
                                           "model to replace)")],
    checkpoint: CheckpointOpt = Checkpoint.best,
    ctranslate2: Annotated[bool, typer.Option(
        "--ctranslate2", help="include the CTranslate2 export (a Transformer)")] = False,
    license_: Annotated[str, typer.Option("--license", help="the card's license id")] = "other",
    push: Annotated[str | None, typer.Option(
        help="upload the folder to the Hub as ORG/NAME (token: HF_TOKEN or `hf auth login`)")
                    ] = None,
    private: Annotated[bool, typer.Option("--private", help="--push a private repository")
                       ] = False,
) -> None:
    """Write a self-contained model folder: safetensors weights, SentencePiece, config,
    scores and a model card; a Transformer loads in transformers too (docs/deploy.md)."""
    from nmt.decoding.publish import publish as publishing  # start-up: no torch for --help
    from nmt.decoding.publish import push as pushing

    path = publishing(run, out, checkpoint.value, ctranslate2, license_)
    files = sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        typer.echo(f"{file.stat().st_size:>12,}  {file.relative_to(path)}")
    typer.echo(f"wrote {path}; load it with nmt.load({str(path)!r}) or nmt translate --run {path}")
    if push:
        typer.echo(f"pushed to {pushing(path, push, private)}; load it with --run hf:{push}")
