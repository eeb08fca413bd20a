"""The typer application and the option types shared by its commands."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from nmt.align.names import METHOD_NAMES
from nmt.core.engine import ENGINES, QUANTIZE
from nmt.data.symmetrize import SYMMETRIZATIONS

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train the classic attention lineage of NMT and see it align.")
data_app = typer.Typer(no_args_is_help=True, help="Fetch, import, generate and prepare corpora.")
app.add_typer(data_app, name="data")
STATE = {"debug": False}

ConfigOpt = Annotated[Path, typer.Option("--config", "-c", help="YAML config file")]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="override a config key, e.g. --set model.hidden_size=128 (repeatable)")]
RunOpt = Annotated[Path, typer.Option("--run", "-r", help="run directory, e.g. runs/bahdanau")]


# Option choices built from the registries' names (nmt.align.names, nmt.data.symmetrize)
Method = Enum("Method", {name: name for name in METHOD_NAMES}, type=str)
Symmetrization = Enum("Symmetrization", {name: name for name in SYMMETRIZATIONS}, type=str)


class Checkpoint(str, Enum):
    """Which of a run's checkpoints to load (averaged: written by `nmt average`)."""

    best = "best"
    last = "last"
    averaged = "averaged"


# Engines and int8 settings by name (nmt.core.engine), as the registries' choices above
Engine = Enum("Engine", {name: name for name in ENGINES}, type=str)
Quantize = Enum("Quantize", {name: name for name in QUANTIZE}, type=str)


EngineOpt = Annotated[Engine, typer.Option(
    help="decoding engine: pytorch, or ctranslate2 for a Transformer (exported into the run "
         "when missing or stale; docs/deploy.md)")]
QuantizeOpt = Annotated[Quantize | None, typer.Option(
    help="decode in int8: int8 (PyTorch's dynamic int8, or CTranslate2's), int8_float32 "
         "(CTranslate2)")]


@app.callback()
def main_options(debug: Annotated[bool, typer.Option(help="show tracebacks")] = False) -> None:
    STATE["debug"] = debug
