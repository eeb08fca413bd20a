"""The statistical aligner beside the models (eflomal, the `align` extra): tokenisation in the
gold's convention, a one-line error without the extra, and, with it, eflomal recovering a
known alignment and appearing as one more row in `nmt align` and `nmt compare`."""

from __future__ import annotations

import json
import random
import sys

import numpy as np
import pytest

from nmt.align.io import load_alignments
from nmt.align.metrics import alignment_error_rate
from nmt.align.statistical import (
    INSTALL_HINT,
    gold_style_tokens,
    require_eflomal,
    statistical_links,
    statistical_records,
)
from nmt.core.errors import NMTError
from nmt.data.corpora import ensure_synth
from nmt.data.links import GoldAlignment
from tests.test_align import cli
from tests.test_train import MODELS, tiny_config


def test_gold_style_tokens_follow_the_hansards_convention():
    assert gold_style_tokens("L'homme du village s'assoit aux portes des maisons.", "fr") == [
        "le", "homme", "de", "le", "village", "se", "assoit", "à", "les", "portes", "de", "les",
        "maisons", "."]
    assert gold_style_tokens("Qu'il vienne jusqu'à lundi, dit-il.", "fr") == [
        "que", "il", "vienne", "jusque", "à", "lundi", ",", "dit", "-", "il", "."]
    assert gold_style_tokens("The dog's well-known trick (isn't it?)", "en") == [
        "the", "dog", "'s", "well", "-", "known", "trick", "(", "is", "n't", "it", "?", ")"]
    assert gold_style_tokens("koyosi ga reyen o wumo .", "tgt") == "koyosi ga reyen o wumo .".split()


def test_without_the_extra_the_error_says_how_to_install(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "eflomal", None)  # `import eflomal` raises ImportError
    with pytest.raises(NMTError, match=r"pip install -e '\.\[align\]'"):
        require_eflomal()
    with pytest.raises(NMTError, match="eflomal"):
        statistical_links(["a b"], ["x y"], (["a b"], ["x y"]))
    code, _, err = cli(["align", "--run", str(tmp_path / "no_run"), "--statistical"], capsys)
    assert code == 2 and err.strip() == f"nmt: error: {INSTALL_HINT}"


def toy_corpus(n: int, seed: int = 0):
    """A word-for-word language with its word order reversed: source word k <-> target word
    T-1-k, so the gold is known exactly."""
    rng = random.Random(seed)
    vocab = [f"w{k}" for k in range(24)]
    src, tgt, gold = [], [], []
    for _ in range(n):
        words = rng.sample(vocab, rng.randint(3, 7))
        src.append(" ".join(words))
        tgt.append(" ".join(f"T{w[1:]}" for w in reversed(words)))
        links = frozenset((k, len(words) - 1 - k) for k in range(len(words)))
        gold.append(GoldAlignment(links, links))
    return src, tgt, gold


@pytest.fixture
def fast_eflomal(monkeypatch):
    pytest.importorskip("eflomal", reason="the align extra (eflomal) is not installed")
    import nmt.align.statistical as statistical

    monkeypatch.setattr(statistical, "ITERATIONS", 0.1)  # tiny corpora: few iterations do
    monkeypatch.setattr(statistical, "SAMPLERS", 1)


def test_eflomal_recovers_a_known_alignment(fast_eflomal, monkeypatch):
    import time

    import nmt.align.statistical as statistical

    monkeypatch.setattr(statistical, "_FITS", {})  # a fit of this call, timed by it
    src, tgt, gold = toy_corpus(230)
    train, (src, tgt, gold) = (src[:200], tgt[:200]), (src[200:], tgt[200:], gold[200:])
    start = time.perf_counter()
    fwd, rev, info = statistical_links(src, tgt, train, threads=1)
    wall = time.perf_counter() - start
    assert info["train_pairs"] == 200 and 0 < info["seconds"] <= wall
    records = statistical_records(src, tgt, fwd, rev, "grow-diag-final-and", {})
    assert alignment_error_rate([set(r.links) for r in records], gold)["aer"] <= 0.05
    rec = records[0]
    assert rec.meta["method"] == "eflomal" and rec.meta["symmetrize"] == "grow-diag-final-and"
    expect = np.zeros((len(rec.tgt_words), len(rec.src_words)))
    for i, j in rec.links:
        expect[j, i] = 1
    np.testing.assert_array_equal(rec.word_weights, expect)  # a 0/1 link matrix
    inter = statistical_records(src, tgt, fwd, rev, "intersection", {})
    assert all(set(a.links) <= set(b.links) for a, b in zip(inter, records))


def test_one_fit_serves_the_same_text_either_way_round(monkeypatch):
    """statistical_links fits eflomal once for the same words: asked again, or with source
    and target swapped (the reverse run's guides), it returns that fit's links of the given
    pairs (flipped for the swap) and the fit's own seconds; other text fits anew."""
    import nmt.align.statistical as statistical

    calls = []

    def fake(src, tgt, threads=None, work=None):  # every word to one position, then one more
        calls.append(len(src))
        fwd = [{(k, k) for k in range(min(len(s), len(t)))} for s, t in zip(src, tgt)]
        rev = [f | {(0, len(t) - 1)} for f, t in zip(fwd, tgt)]
        return fwd, rev

    monkeypatch.setattr(statistical, "eflomal_links", fake)
    monkeypatch.setattr(statistical, "_FITS", {})
    train = (["a b c", "d e"], ["x y z", "u v"])
    fwd, rev, info = statistical_links(["a b", "c d e"], ["x y", "z u v"], train)
    assert calls == [4] and fwd == [{(0, 0), (1, 1)}, {(0, 0), (1, 1), (2, 2)}]
    again = statistical_links(["a b", "c d e"], ["x y", "z u v"], train)
    assert calls == [4] and again[:2] == (fwd, rev) and again[2]["seconds"] == info["seconds"]
    back_fwd, back_rev, back = statistical_links(["x y", "z u v"], ["a b", "c d e"],
                                                 train[::-1])
    assert calls == [4] and back["seconds"] == info["seconds"]
    assert back_fwd == [{(j, i) for i, j in links} for links in rev]
    assert back_rev == [{(j, i) for i, j in links} for links in fwd]
    statistical_links(["a b"], ["x z"], train)
    assert calls == [4, 3]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A barely trained Bahdanau run on a 300-pair synthetic corpus: the statistical row
    needs only its corpus; the run's own rows sit beside it."""
    from nmt.decoding.evaluate import evaluate_run
    from nmt.training.trainer import Trainer

    root = tmp_path_factory.mktemp("data")
    ensure_synth(root, sizes={"train": 300, "val": 20, "test": 30})
    cfg = tiny_config(root, tmp_path_factory.mktemp("runs"), "bahdanau", MODELS["bahdanau"],
                      max_steps=5)
    Trainer(cfg, quiet=True).fit()
    evaluate_run(cfg.run_dir, "test", beam=1, limit=30)
    return cfg.run_dir


def test_align_statistical_adds_an_eflomal_row(fast_eflomal, small_run, tmp_path, capsys):
    out = tmp_path / "align"
    code, stdout, err = cli(["align", "--run", str(small_run), "--split", "test", "--limit",
                             "12", "--statistical", "--plot", "1", "--out", str(out)], capsys)
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    row = summary["eflomal"]
    assert row["method"] == "eflomal" and row["train_pairs"] == 300 and row["sentences"] == 12
    assert row["aer"] < row["diagonal_aer"], row  # this reordering language defeats a diagonal
    assert "eflomal" in stdout and (out / "eflomal.links").is_file()
    records = load_alignments(out / "eflomal.npz")
    assert [r.index for r in records] == list(range(12))
    assert records[0].meta["method"] == "eflomal"
    assert (out / "eflomal" / "sentence0.png").is_file() and (out / "grid_sentence0.png").is_file()


def test_compare_statistical_adds_a_row_and_a_grid_panel(fast_eflomal, small_run, tmp_path,
                                                         capsys):
    out = tmp_path / "report"
    code, _, err = cli(["compare", str(small_run), "--statistical", "--out", str(out),
                        "--sentence", "0"], capsys)
    assert code == 0, err
    text = (out / "report.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| eflomal"))
    aer, diagonal = (float(c) for c in row.strip("|").split("|")[-3:-1])
    assert 0 <= aer < diagonal
    assert "statistical word aligner" in text and (out / "align_test_0.png").is_file()


def test_align_statistical_gives_one_row_per_link_heuristic(fast_eflomal, small_run, tmp_path,
                                                            capsys):
    """docs/alignment.md: eflomal's directions are joined with each --symmetrize heuristic
    given, one row each (`eflomal.<heuristic>`); `agreement` joins two maps, which eflomal
    does not give, so it adds no statistical row."""
    out = tmp_path / "align"
    code, _, err = cli(["align", "--run", str(small_run), "--split", "test", "--limit", "12",
                        "--statistical", "--symmetrize", "intersection", "--symmetrize", "union",
                        "--symmetrize", "agreement", "--out", str(out)], capsys)
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    rows = {name: row for name, row in summary.items() if row.get("method") == "eflomal"}
    assert set(rows) == {"eflomal.intersection", "eflomal.union"}, sorted(summary)
    assert [rows[f"eflomal.{h}"]["symmetrize"] for h in ("intersection", "union")] == [
        "intersection", "union"]
    inter = load_alignments(out / "eflomal.intersection.npz")
    union = load_alignments(out / "eflomal.union.npz")
    assert {r.meta["symmetrize"] for r in inter} == {"intersection"}
    assert {r.meta["symmetrize"] for r in union} == {"union"}
    assert all(set(a.links) <= set(b.links) for a, b in zip(inter, union))


def test_compare_grids_end_with_the_gold_and_name_the_teacher(fast_eflomal, small_run,
                                                              tmp_path, capsys, monkeypatch):
    """docs/alignment.md, `nmt compare`: where the split has gold links, each grid's last
    panel is the gold (sure 1, possible 0.5) of the same words; with --statistical beside a
    run taught by eflomal, eflomal's panel says it is that run's teacher."""
    import shutil

    import yaml

    import nmt.report.compare as compare
    from nmt.data.links import read_gold

    drawn = []

    def plot_grid(panels, src_words, tgt_words, path, **kwargs):  # keep the panels
        drawn.append(panels)
        path.write_bytes(b"")
        return path

    monkeypatch.setattr(compare, "plot_grid", plot_grid)
    taught = tmp_path / "taught"
    shutil.copytree(small_run, taught)
    raw = yaml.safe_load((taught / "config.yaml").read_text())
    raw["name"], raw["guided"] = "taught", {**raw.get("guided", {}), "weight": 1.0}
    (taught / "config.yaml").write_text(yaml.safe_dump(raw))
    code, _, err = cli(["compare", str(small_run), str(taught), "--statistical", "--out",
                        str(tmp_path / "report"), "--sentence", "3"], capsys)
    assert code == 0, err
    titles = [title for title, _ in drawn[0]]
    assert titles == [small_run.name, "taught", "eflomal (teacher of taught)",
                      compare.GOLD_PANEL]
    gold = read_gold(small_run / "corpus" / "test.gold")[3] if (
        small_run / "corpus" / "test.gold").is_file() else None
    matrix = drawn[0][-1][1]
    assert gold is not None and {(i, j) for j, i in zip(*matrix.nonzero())} == set(gold.possible)
    assert all(matrix[j, i] == 1.0 for i, j in gold.sure)
    assert compare.gold_matrix(gold, (1, 1)) is None or gold.possible <= {(0, 0)}
