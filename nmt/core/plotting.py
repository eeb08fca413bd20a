"""Attention heatmaps, model-comparison grids, result curves and GIFs (matplotlib, Agg).

matplotlib is imported lazily and pyplot is never used: every figure is a standalone
``matplotlib.figure.Figure`` rendered off-screen, so nothing depends on a display or on global
pyplot state. Text uses DejaVu Sans (bundled with matplotlib), which covers German, French and
Czech letters. The output format follows the path suffix (.png, .svg or .pdf).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nmt.core.errors import NMTError
from nmt.core.scratch import replace_file

CMAP = "viridis"
NO_ATTENTION = "no attention\n(fixed context)"
_FORMATS = {".png", ".svg", ".pdf"}
_STYLE = {"font.family": "DejaVu Sans", "svg.fonttype": "path", "axes.titlesize": 10}
_MAX_LABEL = 16  # longer tokens are cut with "…"


def _check_path(path: Path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in _FORMATS:
        raise NMTError(f"{path}: unsupported figure format {path.suffix!r}; use .png or .svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _new_figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure  # start-up: matplotlib only when a figure is drawn

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig: Any, path: Path) -> Path:
    import matplotlib  # start-up: matplotlib only when a figure is drawn

    with matplotlib.rc_context(_STYLE):
        replace_file(path, lambda handle: fig.savefig(handle, dpi=130,
                                                      format=Path(path).suffix[1:]))
    return path


def _label(token: str) -> str:
    return token if len(token) <= _MAX_LABEL else token[: _MAX_LABEL - 1] + "…"


def _fontsize(n_tokens: int) -> float:
    """Tick label size: 9 pt up to 25 tokens, shrinking to 6 pt at 50 and beyond."""
    return float(np.clip(9 - 3 * (n_tokens - 25) / 25, 6, 9))


def _side(n_tokens: int, lo: float, hi: float) -> float:
    """Figure side in inches for n tokens: ~0.25 in per token plus margin, clipped to [lo, hi]."""
    return float(np.clip(1.6 + 0.25 * n_tokens, lo, hi))


def _as_matrix(matrix: Any, shape: tuple[int, int], what: str) -> np.ndarray:
    a = np.asarray(matrix, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"{what}: matrix shape {a.shape} != (target, source) tokens {shape}")
    return a


def _draw_heatmap(ax: Any, a: np.ndarray, src: Sequence[str], tgt: Sequence[str]) -> Any:
    """Draw one (T, S) matrix on ``ax`` on the fixed 0..1 scale; return the image."""
    image = ax.imshow(a, cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(src)))
    ax.set_xticklabels([_label(t) for t in src], rotation=60, ha="right",
                       rotation_mode="anchor", fontsize=_fontsize(len(src)))
    ax.set_yticks(range(len(tgt)))
    ax.set_yticklabels([_label(t) for t in tgt], fontsize=_fontsize(len(tgt)))
    ax.tick_params(length=0)
    return image


def _draw_message(ax: Any, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes,
            fontsize=11, color="0.35")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_heatmap(
    matrix: np.ndarray,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    path: Path,
    title: str = "",
) -> Path:
    """Heatmap of attention A (T, S): source tokens on x, target tokens on y, scale 0..1."""
    path = _check_path(path)
    a = _as_matrix(matrix, (len(tgt_tokens), len(src_tokens)), "plot_heatmap")
    import matplotlib  # start-up: matplotlib only when a figure is drawn

    with matplotlib.rc_context(_STYLE):
        fig = _new_figure(_side(len(src_tokens), 4, 14) + 1.2, _side(len(tgt_tokens), 3, 13))
        ax = fig.add_subplot()
        if a.size:
            image = _draw_heatmap(ax, a, src_tokens, tgt_tokens)
            fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
        else:
            _draw_message(ax, "empty sentence")
        ax.set_title(title)
    return _save(fig, path)


def _per_panel_targets(
    tgt_tokens_per_panel: Sequence[Sequence[str]] | Sequence[str], n_panels: int
) -> list[list[str]]:
    """A flat token list is shared by all panels; a list of lists gives one per panel."""
    if all(isinstance(t, str) for t in tgt_tokens_per_panel):
        return [list(tgt_tokens_per_panel)] * n_panels  # type: ignore[arg-type]
    if len(tgt_tokens_per_panel) != n_panels:
        raise ValueError(f"{len(tgt_tokens_per_panel)} target token lists for {n_panels} panels")
    return [list(t) for t in tgt_tokens_per_panel]


def plot_grid(
    panels: Sequence[tuple[str, np.ndarray | None]],
    src_tokens: Sequence[str],
    tgt_tokens_per_panel: Sequence[Sequence[str]] | Sequence[str],
    path: Path,
    title: str = "",
    ncols: int | None = None,
) -> Path:
    """One sentence, one panel per model (panel title = run name), all on one 0..1 colour scale
    with one shared colour bar. ``tgt_tokens_per_panel`` is one shared target token list or one
    list per panel (free decoding). A ``None`` matrix is drawn as "no attention (fixed context)".
    Default ``ncols``: 3, or 2 for four panels or sentences over 30 source tokens.
    """
    path = _check_path(path)
    if not panels:
        raise ValueError("plot_grid needs at least one panel")
    targets = _per_panel_targets(tgt_tokens_per_panel, len(panels))
    n = len(panels)
    ncols = ncols or (2 if n == 4 or len(src_tokens) > 30 else 3)
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    max_t = max(len(t) for t in targets)
    width = min(ncols * _side(len(src_tokens), 3.2, 9) + 1.0, 28)
    height = min(nrows * _side(max_t, 2.6, 9) + (0.5 if title else 0), 28)
    import matplotlib  # start-up: matplotlib only when a figure is drawn
    from matplotlib.cm import ScalarMappable  # start-up: matplotlib only when a figure is drawn
    from matplotlib.colors import Normalize  # start-up: matplotlib only when a figure is drawn

    with matplotlib.rc_context(_STYLE):
        fig = _new_figure(width, height)
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, (name, matrix), tgt in zip(axes, panels, targets):
            if matrix is None:
                _draw_message(ax, NO_ATTENTION)
            else:
                a = _as_matrix(matrix, (len(tgt), len(src_tokens)), f"panel {name!r}")
                if a.size:
                    _draw_heatmap(ax, a, src_tokens, tgt)
                else:
                    _draw_message(ax, "empty")
            ax.set_title(name)
        for ax in axes[n:]:
            ax.set_axis_off()
        scale = ScalarMappable(norm=Normalize(0.0, 1.0), cmap=CMAP)
        fig.colorbar(scale, ax=list(axes[:n]), shrink=0.8, label="attention weight")
        if title:
            fig.suptitle(title)
    return _save(fig, path)


def plot_lines(
    series: dict[str, tuple[Sequence[float], Sequence[float]]],
    path: Path,
    xlabel: str,
    ylabel: str,
    title: str = "",
    xticks: Sequence[str] | None = None,
) -> Path:
    """Curves, one per named series of (x, y) values (e.g. BLEU vs training hours).

    With ``xticks`` the x axis is categorical: x values are positions 0..len(xticks)-1 and
    ``xticks`` are their labels (e.g. length buckets "1-10", "11-20").
    """
    path = _check_path(path)
    import matplotlib  # start-up: matplotlib only when a figure is drawn

    with matplotlib.rc_context(_STYLE):
        fig = _new_figure(7.0, 4.5)
        ax = fig.add_subplot()
        for name, (xs, ys) in series.items():
            if len(xs) != len(ys):
                raise ValueError(f"series {name!r}: {len(xs)} x values but {len(ys)} y values")
            ax.plot(xs, ys, marker="o", markersize=4, label=name)
        if xticks is not None:
            ax.set_xticks(range(len(xticks)))
            ax.set_xticklabels(list(xticks), rotation=30 if len(xticks) > 6 else 0)
        if series:
            ax.legend(fontsize=8)
        else:
            _draw_message(ax, "no data")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
    return _save(fig, path)


def save_gif(png_paths: Sequence[Path], path: Path, duration_ms: int = 600) -> Path:
    """Animated GIF (looping) from image frames, e.g. one heatmap per epoch. Frames of
    different sizes are padded with white to the largest width and height."""
    try:
        from PIL import Image  # start-up: matplotlib only when a figure is drawn
    except ImportError:  # pragma: no cover - Pillow is a matplotlib dependency
        raise NMTError("saving a GIF needs Pillow; run `pip install pillow`") from None
    if not png_paths:
        raise ValueError("save_gif needs at least one frame")
    frames = []
    for frame_path in png_paths:
        try:
            with Image.open(frame_path) as img:
                frames.append(img.convert("RGBA"))
        except (OSError, ValueError) as exc:
            raise NMTError(f"{frame_path}: cannot read GIF frame ({exc}); re-create the plot")
    size = (max(f.width for f in frames), max(f.height for f in frames))
    canvases = []
    for frame in frames:
        canvas = Image.new("RGB", size, "white")
        canvas.paste(frame, (0, 0), frame)
        canvases.append(canvas)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, lambda handle: canvases[0].save(
        handle, format="GIF", save_all=True, append_images=canvases[1:], duration=duration_ms,
        loop=0))
    return path


def _length_limit(counts: Sequence[np.ndarray], share: float = 0.995) -> int:
    """The words-per-sentence axis: up to the length that `share` of all sentences reach."""
    total = np.sum([np.asarray(c, dtype=np.int64) for c in counts], axis=0)
    if not total.sum():
        return 5
    return max(5, int(np.searchsorted(np.cumsum(total), share * total.sum())))


def _count_axis(axis: Any, bins: int) -> None:
    """Whole counts with thousands separators."""
    from matplotlib.ticker import (  # start-up: matplotlib only when a figure is drawn
        MaxNLocator,
        StrMethodFormatter,
    )

    axis.set_major_locator(MaxNLocator(nbins=bins, integer=True))
    axis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))


def _draw_joint(fig: Any, joint: np.ndarray, limit: int, langs: tuple[str, str]) -> None:
    """Pairs by (source, target) length on a log colour scale, its marginals on the edges."""
    from matplotlib.colors import LogNorm  # start-up: matplotlib only when a figure is drawn

    axes = fig.subplots(2, 2, width_ratios=[4, 1], height_ratios=[1, 4], sharex="col",
                        sharey="row")
    top, corner, main, side = axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1]
    corner.set_axis_off()
    edges = np.arange(limit + 2) - 0.5
    grid = np.ma.masked_equal(joint[: limit + 1, : limit + 1].T, 0)  # (T, S): y = target
    mesh = main.pcolormesh(edges, edges, grid, cmap=CMAP,
                           norm=LogNorm(vmin=1, vmax=max(int(grid.max() or 1), 2)))
    main.plot([0, limit], [0, limit], "--", color="0.5", linewidth=0.8, label="same length")
    main.set(xlabel=f"{langs[0]} (source) words", ylabel=f"{langs[1]} (target) words",
             xlim=(-0.5, limit + 0.5), ylim=(-0.5, limit + 0.5))
    main.legend(loc="upper left", fontsize=8)
    fig.colorbar(mesh, ax=[main, side], location="bottom", shrink=0.6, label="pairs")
    top.bar(np.arange(limit + 1), joint.sum(axis=1)[: limit + 1], width=1.0, color="C0")
    side.barh(np.arange(limit + 1), joint.sum(axis=0)[: limit + 1], height=1.0, color="C1")
    top.set_ylabel("pairs")
    side.set_xlabel("pairs")
    _count_axis(top.yaxis, 3)
    _count_axis(side.xaxis, 3)


def plot_lengths(
    joint: np.ndarray,
    splits: dict[str, tuple[np.ndarray, np.ndarray, int]],
    langs: tuple[str, str],
    joint_split: str,
    path: Path,
    title: str = "",
) -> Path:
    """Sentence lengths in words. Left: `joint` (S, T) counts of pairs by source and target
    length for `joint_split`, log colour scale, with its two marginals. Right: per split
    (name -> source counts, target counts, pairs) both sides' histograms. Axes end where
    99.5% of the sentences do; the last bin of each array holds every longer sentence."""
    path = _check_path(path)
    import matplotlib  # start-up: matplotlib only when a figure is drawn

    limit = min(_length_limit([c for s, t, _ in splits.values() for c in (s, t)]),
                joint.shape[0] - 1)
    edges = np.arange(limit + 2) - 0.5
    with matplotlib.rc_context(_STYLE):
        fig = _new_figure(12.0, max(5.8, 1.9 * len(splits) + 0.8))
        left, right = fig.subfigures(1, 2, width_ratios=[1.15, 1.0])
        _draw_joint(left, joint, limit, langs)
        left.suptitle(f"{joint_split}: source against target length")
        panels = right.subplots(len(splits), 1, sharex=True, squeeze=False)[:, 0]
        for ax, (split, (s_counts, t_counts, pairs)) in zip(panels, splits.items()):
            for counts, lang, side, color in ((s_counts, langs[0], "source", "C0"),
                                              (t_counts, langs[1], "target", "C1")):
                ax.stairs(np.asarray(counts)[: limit + 1], edges, label=f"{lang} ({side})",
                          color=color, linewidth=1.4)
            ax.set_title(f"{split}: {pairs:,} pairs", loc="left")
            ax.set_ylabel("sentences")
            _count_axis(ax.yaxis, 5)
            ax.grid(alpha=0.3)
        panels[0].legend(fontsize=8)
        panels[-1].set_xlabel("words per sentence")
        panels[-1].set_xlim(-0.5, limit + 0.5)
        if title:
            fig.suptitle(f"{title} (axes end at {limit} words, where 99.5% of sentences do)")
    return _save(fig, path)
