"""What every lab experiment returns, and the figure helpers they share.

An experiment is a function `(out_dir, fmt, run=None) -> Result`: it measures a
few numbers (a small table), draws its figure(s) into `out_dir` and checks the
property it demonstrates (`passed`, with the measured margin in `check`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nmt.core.scratch import replace_file

Cell = float | int | str
_STYLE = {"font.family": "DejaVu Sans", "svg.fonttype": "path", "axes.titlesize": 10,
          "axes.labelsize": 9, "legend.fontsize": 8, "xtick.labelsize": 8, "ytick.labelsize": 8}


@dataclass
class Result:
    """Outcome of one experiment.

    `passed` is True/False for the property check and None when the experiment
    was skipped (e.g. it needs `--run`); `values` holds the named measurements the
    check and the tests read.
    """

    name: str
    headers: list[str]
    rows: list[list[Cell]]
    figures: list[Path]
    passed: bool | None
    check: str
    values: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "FAIL", None: "SKIPPED"}[self.passed]


def skipped(name: str, reason: str) -> Result:
    """A Result for an experiment that could not run here (no figure, no table)."""
    return Result(name, [], [], [], None, reason)


def fmt_cell(value: Cell) -> str:
    """Numbers to at most 4 significant digits (integers and tiny/huge floats kept readable)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:.4g}"
    return f"{value:.2e}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    """A plain-text table with aligned columns (for the terminal)."""
    cells = [list(headers)] + [[fmt_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def new_figure(cols: int, width: float = 4.2, height: float = 3.4, rows: int = 1) -> tuple[Any, Any]:
    """A standalone matplotlib Figure (no pyplot state) with a flat list of axes."""
    from matplotlib.figure import Figure  # start-up: matplotlib only when a figure is drawn

    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    return fig, axes


def draw(plot: Callable[[], Any], out_dir: Path, stem: str, fmt: str) -> Path:
    """Build a figure with `plot()` under the lab's style and write `out_dir/stem.fmt`.

    PNG at 130 dpi or SVG (text as paths, so it renders the same everywhere).
    """
    import matplotlib  # start-up: matplotlib only when a figure is drawn

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}.{fmt}"
    with matplotlib.rc_context(_STYLE):
        figure = plot()
        replace_file(path, lambda handle: figure.savefig(handle, dpi=130, format=fmt))
    return path
