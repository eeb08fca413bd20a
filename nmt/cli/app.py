"""The typer application and the option types shared by its commands."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train the classic attention lineage of NMT and see it align.")
data_app = typer.Typer(no_args_is_help=True, help="Fetch, import, generate and prepare corpora.")
app.add_typer(data_app, name="data")
STATE = {"debug": False}

ConfigOpt = Annotated[Path, typer.Option("--config", "-c", help="YAML config file")]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="override a config key, e.g. --set model.hidden_size=128 (repeatable)")]
RunOpt = Annotated[Path, typer.Option("--run", "-r", help="run directory, e.g. runs/bahdanau")]


class Method(str, Enum):
    """How alignments are read from a model: its attention, or gradient saliency."""

    attention = "attention"
    saliency = "saliency"


class Checkpoint(str, Enum):
    """Which of a run's checkpoints to load (averaged: written by `nmt average`)."""

    best = "best"
    last = "last"
    averaged = "averaged"


@app.callback()
def main_options(debug: Annotated[bool, typer.Option(help="show tracebacks")] = False) -> None:
    STATE["debug"] = debug
