"""Tests for nmt.report.compare (`nmt compare`): hand-made run directories, one report built per module."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from nmt.align.io import save_alignments
from nmt.align.records import AlignmentRecord
from nmt.core.checkpoint import save_checkpoint
from nmt.core.config import save_config
from nmt.core.errors import NMTError
from nmt.models.checks import config_from_dict
from nmt.report.compare import FIXED, FIXED_NOTE, compare_runs, count_parameters, format_cell

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SIG_BLEU = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
SIG_CHRF = "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
SOURCE_LENGTHS = (3, 7, 8, 10)  # sentence 0 is too short for the default grid choice


class Tied(nn.Module):
    """123 x 16 embedding tied to the output projection: 123 * 16 + 123 = 2091 parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(123, 16)
        self.out = nn.Linear(16, 123)
        self.out.weight = self.embed.weight


def records(seed: int) -> list[AlignmentRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for index, s_len in enumerate(SOURCE_LENGTHS):
        src = [f"s{index}_{i}" for i in range(s_len)]
        tgt = [f"t{index}_{j}" for j in range(s_len + 1)]
        w = rng.random((len(tgt), len(src))) ** 4
        w /= w.sum(axis=1, keepdims=True)
        out.append(AlignmentRecord(index=index, src_tokens=src, tgt_tokens=tgt,
                                   weights=w[None, None], src_words=src, tgt_words=tgt,
                                   word_weights=w))
    return out


def split_scores(bleu: float, chrf: float, alignment: dict | None) -> dict:
    entry = {"bleu": bleu, "chrf": chrf, "bleu_signature": SIG_BLEU, "chrf_signature": SIG_CHRF,
             "beam": 5, "sentences": 4, "sentences_per_s": 40.0,
             "by_length": [{"bucket": "1-9", "sentences": 3, "bleu": bleu + 2},
                           {"bucket": "10-19", "sentences": 1, "bleu": bleu - 3}]}
    if alignment is not None:
        entry["alignment"] = {"sentences": 4, "eos_mass": 0.05, **alignment}
    return entry


def make_run(root: Path, name: str, model: dict, seed: int, scores: dict,
             valid_bleu: list[float], minutes: float, module: nn.Module,
             align: bool) -> Path:
    path = root / name
    (path / "checkpoints").mkdir(parents=True)
    cfg = config_from_dict({"name": name, "model": model, "train": {"seed": seed}})
    save_config(cfg, path / "config.yaml")
    (path / "scores.json").write_text(json.dumps(scores))
    lines, n = [], len(valid_bleu)
    for k, bleu in enumerate(valid_bleu, start=1):
        elapsed = minutes * 60 * k / n
        lines.append({"kind": "train", "step": 100 * k, "epoch": 0, "loss": 3.0, "lr": 1e-3,
                      "tokens_per_s": 999.0, "elapsed": elapsed - 1})
        lines.append({"kind": "valid", "step": 100 * k, "epoch": 0, "elapsed": elapsed,
                      "train_tokens_per_s": 1000.0 * seed + k, "valid_loss": 2.0,
                      "valid_ppl": 7.4, "bleu": bleu, "chrf": 40.0})
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    save_checkpoint(path / "checkpoints" / "best.pt",
                    {"model": module.state_dict(), "src_vocab": 123, "tgt_vocab": 123})
    if align:
        save_alignments(path / "align" / "test.npz", records(seed))
    return path


LUONG = {"family": "luong", "score": "general", "attention": "local-p"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    torch.manual_seed(0)
    s1 = make_run(root, "luong_s1", LUONG, 1, {"test": split_scores(
        20.0, 50.0, {"entropy": 1.0, "aer": 0.30, "diagonal_aer": 0.5})}, [10.0, 18.0], 10.0,
        Tied(), align=True)
    s2 = make_run(root, "luong_s2", LUONG, 2, {"test": split_scores(
        22.0, 54.0, {"entropy": 1.2, "aer": 0.20, "diagonal_aer": 0.5})}, [12.0, 19.0], 12.0,
        Tied(), align=True)
    fixed = make_run(root, "fixed", {"family": "fixed_context"}, 1,
                     {"test": split_scores(8.0, 30.0, None),
                      "dev": split_scores(7.0, 29.0, None)},
                     [5.0, 7.5], 4.0, nn.Linear(7, 3), align=False)
    return [s1, s2, fixed]


@pytest.fixture(scope="module")
def report(runs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    md = compare_runs(runs, tmp_path_factory.mktemp("reports") / "cmp")
    print(md.read_text())  # visible with -s
    return md


def table_row(md: Path, first_cell: str) -> list[str]:
    for line in md.read_text().splitlines():
        if line.startswith(f"| {first_cell} |"):
            return [c.strip() for c in line.strip("|").split(" | ")]
    raise AssertionError(f"no table row for {first_cell!r}")


def test_table_groups_seeds_with_mean_and_std(report: Path) -> None:
    row = table_row(report, "luong_s1, luong_s2 (seeds 1, 2)")
    assert row[1:4] == ["luong (general, local-p)", "2", "2,091"]  # tied weights counted once
    assert row[4] == "11.0 ± 1.4"  # minutes: 10 and 12
    assert row[5] == "1,502 ± 707"  # last train_tokens_per_s: 1002 and 2002
    assert row[7] == "18.50 ± 0.71"  # best validation BLEU: 18 and 19
    assert row[8:10] == ["21.00 ± 1.41", "52.00 ± 2.83"]  # test BLEU, chrF
    assert row[10:] == ["0.250 ± 0.071", "0.500 ± 0.000", "1.10 ± 0.14"]
    assert "| luong_s1 |" not in report.read_text()  # no separate row per seed


def test_a_seed_is_grouped_once_and_a_clashing_name_is_labelled_by_its_path(
        runs: list[Path], tmp_path: Path) -> None:
    """nmt.report.compare: a run beside a copy of itself (same name, same seed, the case of
    a published folder) gives two rows labelled by their paths, not a seed group of n = 2
    with a spread of zero; a third seed joins the first row's group."""
    copy = tmp_path / "copies" / "luong_s1"
    shutil.copytree(runs[0], copy)
    s3 = make_run(tmp_path / "more", "luong_s3", LUONG, 3, {"test": split_scores(
        24.0, 56.0, {"entropy": 1.0, "aer": 0.30, "diagonal_aer": 0.5})}, [10.0], 10.0,
        Tied(), align=True)
    md = compare_runs([runs[0], copy, s3], tmp_path / "cmp")
    base = Path(os.path.commonpath([runs[0].resolve(), copy.resolve()]))
    label, copied = (p.resolve().relative_to(base).as_posix() for p in (runs[0], copy))
    assert label.endswith("/luong_s1") and copied.endswith("/copies/luong_s1")
    first = f"{label}, luong_s3 (seeds 1, 3)"
    assert table_row(md, first)[2] == "2" and table_row(md, copied)[2] == "1"
    assert table_row(md, first)[8] == "22.00 ± 2.83"  # test BLEU of seeds 1 and 3


def test_fixed_context_row_and_footnote(report: Path) -> None:
    row = table_row(report, "fixed")
    assert row[1:4] == ["fixed_context", "1", "24"]
    assert row[4] == "4.0" and row[7] == "7.50" and row[8:10] == ["8.00", "30.00"]
    assert row[10:] == [f"— {FIXED}"] * 3
    text = report.read_text()
    assert FIXED_NOTE in text and "one fixed vector" in text
    assert "computation, not an explanation" in text


def test_signatures_shown_once(report: Path) -> None:
    text = report.read_text()
    assert text.count(SIG_BLEU) == 1 and text.count(SIG_CHRF) == 1


def test_pngs_are_valid_images(report: Path) -> None:
    from PIL import Image

    out = report.parent
    names = {p.name for p in out.glob("*.png")}
    # default sentences: first two sources with 6-14 words (indices 1 and 2, not 0 or 3)
    assert names == {"bleu_by_length.png", "valid_bleu_by_time.png",
                     "align_test_1.png", "align_test_2.png"}
    for name in names:
        data = (out / name).read_bytes()
        assert data[:8] == PNG_MAGIC
        with Image.open(out / name) as img:
            img.verify()
        assert f"]({name})" in report.read_text()


def test_html_is_self_contained(report: Path) -> None:
    page = (report.parent / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 4
    assert "<table>" in page and "luong_s1, luong_s2 (seeds 1, 2)" in page
    assert "21.00 ± 1.41" in page
    assert 'src="bleu' not in page  # no file references


def test_missing_split_shows_dash_and_note(runs: list[Path], tmp_path: Path) -> None:
    md = compare_runs([runs[2], runs[0]], tmp_path / "dev", split="dev")
    row = table_row(md, "luong_s1")
    assert row[8:10] == ["—", "—"] and row[7] == "18.00"  # metrics still shown
    assert table_row(md, "fixed")[8] == "7.00"
    text = md.read_text()
    assert "No scores for split `dev` in: luong_s1" in text
    assert "no `" in text and "dev.npz" in text  # its grid source is missing, said so


def test_sentences_override(runs: list[Path], tmp_path: Path) -> None:
    md = compare_runs(runs[:1], tmp_path / "one", sentences=[3])
    assert [p.name for p in md.parent.glob("align_*.png")] == ["align_test_3.png"]
    with pytest.raises(NMTError, match="sentence 99"):
        compare_runs(runs[:1], tmp_path / "bad", sentences=[99])


def test_bad_inputs_name_the_path(runs: list[Path], tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(NMTError, match=str(missing)):
        compare_runs([runs[0], missing], tmp_path / "out")
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    with pytest.raises(NMTError, match=rf"{not_a_run}.*config\.yaml"):
        compare_runs([not_a_run], tmp_path / "out")
    with pytest.raises(NMTError, match="twice"):
        compare_runs([runs[0], runs[0]], tmp_path / "out")


def test_count_parameters_and_cells() -> None:
    assert count_parameters(Tied().state_dict()) == 2091
    assert count_parameters(nn.GRU(4, 5).state_dict()) == sum(
        p.numel() for p in nn.GRU(4, 5).parameters())
    assert format_cell([None, None], 2) == "—"
    assert format_cell([1.0, None, 3.0], 1) == "2.0 ± 1.4 (n=2)"
    assert format_cell([5.0, 5.0], 0, exact=True) == "5"


def test_the_validation_curve_is_drawn_against_minutes(monkeypatch, tmp_path: Path) -> None:
    import nmt.report.compare as compare

    drawn = {}
    monkeypatch.setattr(compare, "plot_lines", lambda series, path, *a, **k: drawn.update(series))
    metrics = [{"kind": "valid", "elapsed": 90.0, "bleu": 3.0}, {"kind": "train", "elapsed": 100.0},
               {"kind": "valid", "elapsed": 600.0, "bleu": 9.5}]
    run = compare.RunSummary("r", tmp_path, None, metrics, None, None)
    compare.plot_valid_curve([run], tmp_path / "curve.png")
    assert drawn == {"r": ([1.5, 10.0], [3.0, 9.5])}
    assert compare.plot_valid_curve([compare.RunSummary("r", tmp_path, None, [], None, None)],
                                    tmp_path / "none.png") is None


def test_a_markdown_table_has_one_rule_cell_per_header():
    from nmt.core.document import render_markdown

    text = render_markdown([("table", ["run", "BLEU"], [["a", "1.0"]])])
    assert text.splitlines()[:3] == ["| run | BLEU |", "|---|---|", "| a | 1.0 |"]
