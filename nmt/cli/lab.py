"""`nmt lab list | run NAME | all`: the essays' worked examples as checked experiments."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.app import app
from nmt.lab.names import ExperimentName, FigureFormat

lab_app = typer.Typer(no_args_is_help=True, help="Run the attention essays' claims as checked "
                      "experiments (numbers, a figure, a verdict).")
app.add_typer(lab_app, name="lab")

FormatOpt = Annotated[FigureFormat, typer.Option("--format", help="figure format")]


@lab_app.command("list")
def lab_list() -> None:
    """List the experiments and the claim each one checks."""
    from nmt.lab.registry import EXPERIMENTS  # start-up: `nmt --help` imports no torch

    for name, entry in EXPERIMENTS.items():
        typer.echo(f"{name:30} {'[--run] ' if entry.needs_run else ''}{entry.claim}")


@lab_app.command("run")
def lab_run(
    name: Annotated[ExperimentName, typer.Argument(help="experiment (see `nmt lab list`)")],
    out: Annotated[Path, typer.Option(help="folder for the figure(s)")] = Path("reports/lab"),
    fmt: FormatOpt = FigureFormat.png,
    run: Annotated[list[Path] | None, typer.Option(
        "--run", "-r", help="trained run directory (repeatable; bottleneck and "
        "attention-is-not-explanation)")] = None,
) -> None:
    """Run one experiment: print its table and verdict, write its figure."""
    from nmt.lab.base import format_table  # start-up: `nmt --help` imports no torch
    from nmt.lab.registry import (  # start-up: `nmt --help` imports no torch
        EXPERIMENTS,
        run_experiment,
    )

    result = run_experiment(name.value, out, fmt.value, run)
    typer.echo(f"{name.value}: {EXPERIMENTS[name.value].claim}\n")
    typer.echo(format_table(result.headers, result.rows) + "\n")
    for note in result.notes:
        typer.echo(f"  {note}")
    typer.echo(f"{result.verdict}: {result.check}")
    for path in result.figures:
        typer.echo(f"wrote {path}")
    if result.passed is False and not EXPERIMENTS[name.value].needs_run:
        raise typer.Exit(1)  # a property of the code failed (a run's verdict is a measurement)


@lab_app.command("all")
def lab_all(
    out: Annotated[Path, typer.Option(help="folder for report.md, report.html, figures")
                   ] = Path("reports/lab"),
    fmt: FormatOpt = FigureFormat.png,
) -> None:
    """Run every experiment and write report.md + a self-contained report.html.

    Exits 1 if a property of the code fails; the trained-run experiments' verdicts are
    measurements of those runs, reported but not an error."""
    from nmt.lab.registry import EXPERIMENTS, run_all  # start-up: `nmt --help` imports no torch

    results, report = run_all(out, fmt.value, log=typer.echo)
    typer.echo(f"wrote {report} and {report.with_suffix('.html')}")
    if any(r.passed is False and not EXPERIMENTS[r.name].needs_run for r in results):
        raise typer.Exit(1)
