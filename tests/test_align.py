"""`nmt align` / `nmt compare` after tiny CPU trainings on the synthetic corpus:
attention aligns well below a diagonal baseline, exports round-trip, plots are images,
and the report explains why the fixed-context family has no alignments."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from nmt.align.extract import forced_weights
from nmt.align.io import load_alignments
from nmt.align.metrics import alignment_error_rate, attention_entropy, diagonal_links
from nmt.align.words import word_matrix
from nmt.core.checkpoint import save_checkpoint
from nmt.data.links import parse_pharaoh, read_gold
from nmt.decoding.evaluate import evaluate_run
from nmt.models import build_model
from nmt.models.runs import load_run
from nmt.training.trainer import Trainer
from tests.test_train import MODELS, tiny_config


@pytest.fixture(scope="module")
def runs(data_root, tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    out = {}
    for name, steps in (("bahdanau", 500), ("transformer", 260), ("fixed_context", 60)):
        # one thread: the same weights whatever OMP_NUM_THREADS (sums change with threads)
        cfg = tiny_config(data_root, folder, name, MODELS[name], max_steps=steps, threads=1)
        Trainer(cfg, quiet=True).fit()
        evaluate_run(cfg.run_dir, "test", beam=1, limit=40)
        out[name] = cfg.run_dir
    return out


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    from nmt.cli import main

    old = sys.argv
    sys.argv = ["nmt", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out, out.err


def short_pairs_with_gold(root: Path, tmp_path: Path, n: int = 30) -> tuple[Path, Path]:
    """`source ||| target` and gold files for test pairs the size the tiny runs trained on."""
    folder = root / "synth" / "src-tgt"
    rows = zip(*((folder / f"test.{ext}").read_text().splitlines() for ext in ("src", "tgt",
                                                                             "gold")))
    rows = [r for r in rows if len(r[0].split()) <= 10][:n]
    pairs, gold = tmp_path / "pairs.txt", tmp_path / "pairs.gold"
    pairs.write_text("".join(f"{s} ||| {t}\n" for s, t, _ in rows))
    gold.write_text("".join(g + "\n" for _, _, g in rows))
    return pairs, gold


def untrained_copy(run: Path, dest: Path) -> Path:
    """The run with freshly initialised weights: what training must improve on."""
    shutil.copytree(run, dest)
    cfg, vocab, _, payload = load_run(run)
    torch.manual_seed(0)
    fresh = build_model(cfg.model, vocab.src_size, vocab.tgt_size, vocab.joint)
    save_checkpoint(dest / "checkpoints" / "best.pt", {**payload, "model": fresh.state_dict()})
    return dest


def test_training_makes_the_attention_align(runs, data_root, tmp_path, capsys):
    out = tmp_path / "align"
    pairs, gold = short_pairs_with_gold(data_root, tmp_path)
    untrained = untrained_copy(runs["bahdanau"], tmp_path / "untrained")
    code, stdout, err = cli(["align", "--run", str(runs["bahdanau"]), "--run", str(untrained),
                             "--run", str(runs["transformer"]), "--run",
                             str(runs["fixed_context"]), "--pairs", str(pairs), "--gold",
                             str(gold), "--plot", "2", "--out", str(out)], capsys)
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    # Measured with one thread, seeds 1234 and 1: AER 0.564 after 500 steps (0.53-0.58
    # from 300 to 1,000 steps) against 0.864 untrained (near-uniform weights: the argmax
    # lands on the word with the most pieces) and 0.628 for the diagonal. The tiny model
    # only starts to beat the diagonal, so that is not asserted; it leaves its untrained
    # self far behind whatever the seed or thread count.
    assert summary["bahdanau"]["aer"] < summary["untrained"]["aer"] - 0.15, summary
    for name in ("bahdanau", "transformer"):  # the summary says what the exported records say
        records = load_alignments(out / f"{name}.npz")
        links = [set(map(tuple, r.links)) for r in records]
        assert summary[name]["aer"] == pytest.approx(
            alignment_error_rate(links, read_gold(gold))["aer"])
        assert summary[name]["entropy"] == pytest.approx(
            np.mean([attention_entropy(r.word_weights) for r in records]))
        assert summary[name]["eos_mass"] < 0.5
    # the exported map of a 2-layer Transformer is the naive reading of its layers'
    # average: the same as reading one layer of the layer-averaged weights
    for r in load_alignments(out / "transformer.npz"):
        np.testing.assert_allclose(r.word_weights, word_matrix(
            r.weights.mean(0, keepdims=True), r.src_tokens[:-1], r.tgt_tokens[:-1], False, 0),
            rtol=1e-5, atol=1e-6)
    assert any(not np.allclose(r.word_weights, word_matrix(
        r.weights, r.src_tokens[:-1], r.tgt_tokens[:-1], False, 0), atol=1e-3)
        for r in load_alignments(out / "transformer.npz"))
    # A tiny 2-layer Transformer's cross-attention aligns poorly (about the diagonal's
    # AER here); the per-layer, per-reading table is what lets a user find its best layer.
    assert len(summary["transformer"]["aer_by_layer"]) == 4
    assert {r["reading"] for r in summary["transformer"]["aer_by_layer"]} == {"naive", "shifted"}
    assert "no attention" in summary["fixed_context"]["note"]
    for png in [out / "grid_sentence0.png", out / "bahdanau" / "sentence1.png"]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_exported_matrices_are_the_models_weights(runs, tmp_path, capsys):
    out = tmp_path / "align"
    code, _, err = cli(["align", "--run", str(runs["bahdanau"]), "--split", "test", "--limit",
                        "5", "--plot", "0", "--out", str(out)], capsys)
    assert code == 0, err
    records = load_alignments(out / "bahdanau.npz")
    cfg, vocab, model, _ = load_run(runs["bahdanau"])
    folder = Path(cfg.data.root) / "synth" / cfg.data.pair
    src = (folder / "test.src").read_text().splitlines()[:5]
    tgt = (folder / "test.tgt").read_text().splitlines()[:5]
    direct = forced_weights(model, vocab.encode_src(src), vocab.encode_tgt(tgt))
    for record, weights in zip(records, direct):
        np.testing.assert_allclose(record.weights, weights, atol=1e-6)
        np.testing.assert_allclose(record.weights.sum(-1), 1.0, atol=1e-5)  # subword rows
        np.testing.assert_allclose(record.word_weights.sum(-1), 1.0, atol=1e-5)
        assert record.src_words == src[record.index].split()
        assert record.tgt_words == tgt[record.index].split()
    links = (out / "bahdanau.links").read_text().splitlines()
    assert len(links) == 5 and all("-" in line for line in links)


def test_evaluate_stores_alignments_and_aer(runs, data_root):
    scores = json.loads((runs["bahdanau"] / "scores.json").read_text())["test"]
    stats = scores["alignment"]  # the synthetic corpus has gold: AER comes for free
    assert stats["sentences"] == 40
    folder = data_root / "synth" / "src-tgt"  # recomputed from the written links and the gold
    gold = read_gold(folder / "test.gold")[:40]
    written = (runs["bahdanau"] / "align" / "test.links").read_text().splitlines()
    assert stats["aer"] == pytest.approx(
        alignment_error_rate([parse_pharaoh(line) for line in written], gold)["aer"])
    pairs = zip(*((folder / f"test.{ext}").read_text().splitlines()[:40] for ext in ("src", "tgt")))
    diagonal = [diagonal_links(len(s.split()), len(t.split())) for s, t in pairs]
    assert stats["diagonal_aer"] == pytest.approx(alignment_error_rate(diagonal, gold)["aer"])
    assert len(load_alignments(runs["bahdanau"] / "align" / "test.npz")) == 40
    links = (runs["bahdanau"] / "align" / "test.links").read_text().splitlines()
    assert len(links) == 40
    assert "alignment" not in json.loads((runs["fixed_context"] / "scores.json").read_text())["test"]


def test_over_training_grid(runs, tmp_path, capsys):
    run = runs["transformer"]
    code, stdout, err = cli(["align", "--run", str(run), "--over-training", "--out",
                             str(tmp_path)], capsys)
    # tiny_config dumps no snapshots (align_sentences: 0): a clear error, not a crash
    assert code == 2 and "align_sentences" in err


def test_compare_report_explains_fixed_context(runs, tmp_path, capsys):
    out = tmp_path / "report"
    code, _, err = cli(["compare", str(runs["bahdanau"]), str(runs["transformer"]),
                        str(runs["fixed_context"]), "--out", str(out)], capsys)
    assert code == 0, err
    report = (out / "report.md").read_text()
    assert "bahdanau" in report and "transformer" in report and "fixed_context" in report
    assert "no attention" in report.lower() or "one fixed vector" in report.lower()
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html


def test_threshold_links_keep_only_confident_cells(runs, tmp_path, capsys):
    counts = {}
    for method, extra in (("argmax", []), ("threshold", ["--threshold", "0.6"])):
        out = tmp_path / method
        code, _, err = cli(["align", "--run", str(runs["bahdanau"]), "--split", "test",
                            "--limit", "10", "--plot", "0", "--links", method, *extra,
                            "--out", str(out)], capsys)
        assert code == 0, err
        records = load_alignments(out / "bahdanau.npz")
        for r in records:
            strong = {(i, j) for j, i in zip(*np.nonzero(r.word_weights >= 0.6))}
            if method == "threshold":
                assert set(map(tuple, r.links)) == strong
        counts[method] = sum(len(r.links) for r in records)
    assert counts["threshold"] < counts["argmax"]


def test_over_training_grid_draws_one_sentence_at_every_snapshot_in_step_order(tmp_path,
                                                                                monkeypatch):
    """nmt.report.align_plots.over_training_grid: one panel per snapshot, titled by the step
    its file names, in step order, holding the chosen sentence's weights; a frame per step
    and a GIF beside the grid; a sentence past the snapshots is a one-line error."""
    from PIL import Image

    from nmt.align.io import save_alignments
    from nmt.align.records import AlignmentRecord
    from nmt.core.errors import NMTError
    from nmt.report import align_plots

    steps = tmp_path / "run" / "align" / "steps"
    steps.mkdir(parents=True)
    for step in (2000, 100):
        records = []
        for index in range(2):
            w = np.full((2, 3), (index + 1) * step / 10_000, dtype=np.float32)
            records.append(AlignmentRecord(index, ["a", "b", "</s>"], ["x", "</s>"],
                                           w[None, None], ["a", "b", "</s>"], ["x", "</s>"], w))
        save_alignments(steps / f"step{step:08d}.npz", records)
    drawn = []
    real = align_plots.plot_grid
    monkeypatch.setattr(align_plots, "plot_grid",
                        lambda panels, *rest: drawn.append(panels) or real(panels, *rest))
    out = tmp_path / "out"
    grid = align_plots.over_training_grid(tmp_path / "run", 1, out, "png")
    assert grid == out / "over_training_sentence1.png" and grid.read_bytes()[:4] == b"\x89PNG"
    [panels] = drawn
    assert [title for title, _ in panels] == ["step 100", "step 2000"]
    assert [float(w[0, 0]) for _, w in panels] == pytest.approx([0.02, 0.4])  # sentence 1
    assert (out / "frame_00000100.png").is_file() and (out / "frame_00002000.png").is_file()
    with Image.open(out / "over_training_sentence1.gif") as gif:
        assert gif.format == "GIF" and gif.n_frames == 2
    with pytest.raises(NMTError, match=r"^--sentence 2: snapshots hold 2 sentences$"):
        align_plots.over_training_grid(tmp_path / "run", 2, out, "png")
