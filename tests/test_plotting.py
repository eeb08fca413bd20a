"""Tests for nmt.core.plotting: files are real images, non-ASCII text renders, shapes are checked."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from nmt.core.errors import NMTError
from nmt.core.plotting import plot_grid, plot_heatmap, plot_lines, save_gif

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def stochastic(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    a = np.random.default_rng(seed).random((rows, cols)) ** 4
    return a / a.sum(axis=1, keepdims=True)


def assert_png(path: Path, min_bytes: int = 5_000) -> tuple[int, int]:
    """Valid, non-trivial PNG that is not a blank canvas; returns (width, height)."""
    from PIL import Image

    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > min_bytes
    with Image.open(path) as img:
        pixels = np.asarray(img.convert("L"))
    assert pixels.std() > 10  # something was drawn
    return pixels.shape[1], pixels.shape[0]


def no_glyph_warnings(caught: list[warnings.WarningMessage]) -> None:
    missing = [str(w.message) for w in caught if "missing from" in str(w.message)]
    assert not missing, missing


def test_heatmap_png_and_svg(tmp_path: Path) -> None:
    src = ["▁Das", "▁Mäd", "chen", "▁ist", "▁größer", "</s>"]
    tgt = ["▁The", "▁girl", "▁is", "▁taller", "</s>"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        png = plot_heatmap(stochastic(5, 6), src, tgt, tmp_path / "h.png", title="Bahdanau")
        svg = plot_heatmap(stochastic(5, 6), src, tgt, tmp_path / "sub" / "h.svg")
    no_glyph_warnings(caught)
    assert png == tmp_path / "h.png"
    assert_png(png)
    text = svg.read_text(encoding="utf-8")
    assert text.startswith("<?xml") and "<svg" in text and len(text) > 5_000


def test_heatmap_size_grows_with_tokens_and_is_capped(tmp_path: Path) -> None:
    small = plot_heatmap(stochastic(4, 4), list("abcd"), list("wxyz"), tmp_path / "s.png")
    small = assert_png(small)
    toks = [f"tok{k}" for k in range(50)]
    big = assert_png(plot_heatmap(stochastic(50, 50), toks, toks, tmp_path / "b.png"))
    toks = [f"t{k}" for k in range(100)]
    huge = assert_png(plot_heatmap(stochastic(100, 100), toks, toks, tmp_path / "x.png"))
    assert big[0] > small[0] and big[1] > small[1]
    assert huge[0] <= 16 * 130 and huge[1] <= 14 * 130  # capped (inches * dpi, with margin)


def test_heatmap_rejects_bad_shape_and_format(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shape"):
        plot_heatmap(stochastic(2, 3), ["a", "b"], ["x", "y"], tmp_path / "h.png")
    with pytest.raises(NMTError, match=r"h\.jpgx"):
        plot_heatmap(stochastic(2, 2), ["a", "b"], ["x", "y"], tmp_path / "h.jpgx")


def test_grid_with_german_czech_tokens_and_none_panel(tmp_path: Path) -> None:
    src = ["▁Das", "▁Mädchen", "▁ist", "▁größer", "▁als", "▁žluťoučký", "▁œuvre", "</s>"]
    tgt_a = ["▁The", "▁girl", "▁is", "▁taller", "</s>"]
    tgt_b = ["▁The", "▁girl", "▁is", "▁bigger", "▁than", "</s>"]
    panels = [
        ("rnn-search-50", stochastic(5, 8, 1)),
        ("luong-general", stochastic(6, 8, 2)),
        ("rnn-encdec", None),
        ("transformer L6 head avg", stochastic(5, 8, 3)),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = plot_grid(panels, src, [tgt_a, tgt_b, tgt_a, tgt_a], tmp_path / "grid.png",
                        title="Mädchen größer — sentence 12")
    no_glyph_warnings(caught)
    assert_png(out, min_bytes=20_000)


def test_grid_shared_targets_svg_and_errors(tmp_path: Path) -> None:
    src, tgt = ["a", "b", "c"], ["x", "y"]
    out = plot_grid([("m1", stochastic(2, 3)), ("m2", None)], src, tgt, tmp_path / "g.svg")
    assert "<svg" in out.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="panel 'm2'"):
        plot_grid([("m1", stochastic(2, 3)), ("m2", stochastic(3, 3))], src, tgt,
                  tmp_path / "g.png")
    with pytest.raises(ValueError, match="2 target token lists for 3 panels"):
        plot_grid([("a", None)] * 3, src, [tgt, tgt], tmp_path / "g.png")


def test_plot_lines_numeric_and_categorical(tmp_path: Path) -> None:
    curves = {"rnn-search": ([0.5, 1.0, 2.0], [10.0, 15.5, 18.0]),
              "transformer": ([1, 2], [20, 26])}
    assert_png(plot_lines(curves, tmp_path / "time.png", "hours", "BLEU", title="BLEU vs time"))
    buckets = ["1-10", "11-20", "21-30", "31-40", "41-50", "51+"]
    by_len = {"rnn-encdec": (list(range(6)), [20, 17, 12, 8, 5, 3]),
              "rnn-search": (list(range(6)), [22, 21, 20, 19, 18, 17])}
    assert_png(plot_lines(by_len, tmp_path / "len.png", "source length", "BLEU", xticks=buckets))
    with pytest.raises(ValueError, match="'bad'"):
        plot_lines({"bad": ([1, 2], [1])}, tmp_path / "bad.png", "x", "y")


def test_save_gif_pads_frames(tmp_path: Path) -> None:
    from PIL import Image

    frames = [
        plot_heatmap(stochastic(3, 3, k), list("abc"), list("xyz"), tmp_path / f"f{k}.png")
        for k in range(2)
    ]
    frames.append(plot_heatmap(stochastic(6, 3), list("abc"), list("uvwxyz"), tmp_path / "f2.png"))
    gif = save_gif(frames, tmp_path / "anim.gif", duration_ms=300)
    assert gif.read_bytes()[:6] == b"GIF89a"
    sizes = []
    for frame in frames:
        with Image.open(frame) as img:
            sizes.append(img.size)
    assert sizes[2][1] > sizes[0][1]  # the 6-row frame is taller, so padding is exercised
    with Image.open(gif) as img:
        assert img.n_frames == 3
        assert img.size == (max(w for w, _ in sizes), max(h for _, h in sizes))
    with pytest.raises(NMTError, match="nope.png"):
        save_gif([tmp_path / "nope.png"], tmp_path / "x.gif")


def test_the_length_plots_marginals_are_on_the_top_and_the_side_and_the_corner_is_empty():
    """nmt.core.plotting:_draw_joint — source lengths on the top panel (bars), target lengths
    on the side panel (horizontal bars), the corner between them switched off."""
    from matplotlib.figure import Figure

    from nmt.core.plotting import _draw_joint

    joint = np.zeros((6, 6), dtype=np.int64)
    joint[2, 3], joint[4, 4] = 5, 2  # (source, target) lengths
    fig = Figure()
    _draw_joint(fig, joint, 5, ("de", "en"))
    top, corner, main, side = fig.axes[:4]
    assert not corner.axison and top.axison and side.axison
    assert [p.get_height() for p in top.patches][2:5] == [5, 0, 2]  # by source length
    assert [p.get_width() for p in side.patches][3:5] == [5, 2]  # by target length


def test_the_length_plots_split_panels_share_one_word_axis_labelled_at_the_bottom(
        tmp_path, monkeypatch):
    """nmt.core.plotting.plot_lengths — one histogram panel per split, top to bottom in the
    order given, their shared word axis labelled once under the last and ending where 99.5%
    of the sentences do."""
    import nmt.core.plotting as plotting

    drawn = []
    monkeypatch.setattr(plotting, "_save", lambda fig, path: drawn.append(fig) or path)
    counts = np.zeros(12, dtype=np.int64)
    counts[3:6] = 100
    joint = np.zeros((12, 12), dtype=np.int64)
    joint[4, 4] = 300
    splits = {"train": (counts, counts, 300), "val": (counts, counts, 300),
              "test": (counts, counts, 300)}
    plotting.plot_lengths(joint, splits, ("de", "en"), "train", tmp_path / "lengths.png")
    panels = [ax for ax in drawn[0].subfigs[1].axes]
    assert [ax.get_title(loc="left").split(":")[0] for ax in panels] == ["train", "val", "test"]
    assert [ax.get_xlabel() for ax in panels] == ["", "", "words per sentence"]
    assert panels[-1].get_xlim() == (-0.5, 5.5)  # cut where the sentences end (5 words)
