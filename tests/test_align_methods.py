"""`nmt align` beyond one direction's attention, after tiny CPU trainings on the synthetic
corpus: a reverse run and symmetrised rows, saliency for every family (fixed_context too),
adapting a copy (the checkpoint stays byte-identical), free mode on the search's own ids,
the family's default reading and the per-layer table's links."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pytest

import nmt
from nmt.align.extract import collect, default_shifted
from nmt.align.io import load_alignments
from nmt.align.records import AlignmentRecord
from nmt.align.words import word_matrix
from nmt.core.config import ModelConfig
from nmt.core.errors import NMTError
from nmt.data.corpora import ensure_synth, load_split
from nmt.data.links import GoldAlignment
from nmt.data.symmetrize import (
    DEFAULT_AGREEMENT,
    HEURISTICS,
    SYMMETRIZATIONS,
    agreement,
    symmetrize,
)
from nmt.models import build_model
from nmt.models.runs import load_run
from nmt.report.align import AlignOptions, layer_table
from nmt.training.trainer import Trainer
from tests.test_align import cli, short_pairs_with_gold
from tests.test_train import MODELS, tiny_config


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    """A small synthetic corpus of this module's own: SentencePiece and encoding are quick."""
    root = tmp_path_factory.mktemp("data")
    ensure_synth(root, sizes={"train": 2000, "val": 100, "test": 300})
    return root


@pytest.fixture(scope="module")
def runs(data_root, tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    out = {}
    for name, family, pair, steps in (("fwd", "bahdanau", "src-tgt", 40),
                                      ("rev", "bahdanau", "tgt-src", 40),
                                      ("fixed", "fixed_context", "src-tgt", 20)):
        model = {**MODELS[family], "emb_size": 32, "hidden_size": 32}
        cfg = tiny_config(data_root, folder, name, model, max_steps=steps)
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, pair=pair))
        Trainer(cfg, quiet=True).fit()
        out[name] = cfg.run_dir
    return out


def align(capsys, tmp_path, *args: str) -> tuple[int, str, str, Path]:
    """`nmt align ARGS` into tmp_path/align (no figures unless ARGS ask for them)."""
    out = tmp_path / "align"
    code, stdout, err = cli(["align", "--plot", "0", *args, "--out", str(out)], capsys)
    return code, stdout, err, out


def test_the_synthetic_reverse_direction_is_the_same_corpus_with_flipped_gold(data_root):
    src, tgt = load_split(data_root, "synth", "src-tgt", "val")
    rev_src, rev_tgt = load_split(data_root, "synth", "tgt-src", "val")
    assert (rev_src, rev_tgt) == (tgt, src)
    gold = (data_root / "synth" / "src-tgt" / "val.gold").read_text().splitlines()
    flipped = (data_root / "synth" / "tgt-src" / "val.gold").read_text().splitlines()
    assert len(flipped) == len(gold)
    for line, back in zip(gold[:50], flipped[:50]):
        assert {tuple(x.split("-")[::-1]) for x in line.split()} == {
            tuple(x.split("-")) for x in back.split()}


def test_reverse_run_and_every_symmetrisation(runs, data_root, tmp_path, capsys):
    pairs, gold = short_pairs_with_gold(data_root, tmp_path, n=12)
    heuristics = [arg for h in SYMMETRIZATIONS for arg in ("--symmetrize", h)]
    start = time.perf_counter()
    code, stdout, err, out = align(capsys, tmp_path, "--run", str(runs["fwd"]), "--reverse",
                                   str(runs["rev"]), *heuristics, "--pairs", str(pairs),
                                   "--gold", str(gold))
    wall = time.perf_counter() - start
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    # each direction's row: the seconds its extraction took; a symmetrised row: both
    assert 0 < summary["fwd"]["seconds"] and 0 < summary["rev"]["seconds"]
    assert summary["fwd"]["seconds"] + summary["rev"]["seconds"] < wall
    for h in SYMMETRIZATIONS:
        assert summary[f"fwd+rev.{h}"]["seconds"] == pytest.approx(
            summary["fwd"]["seconds"] + summary["rev"]["seconds"])
    assert set(summary) == {"fwd", "rev"} | {f"fwd+rev.{h}" for h in SYMMETRIZATIONS}
    fwd, rev = load_alignments(out / "fwd.npz"), load_alignments(out / "rev.npz")
    assert [r.src_words for r in rev] == [r.src_words for r in fwd]  # flipped to forward
    rows = {h: load_alignments(out / f"fwd+rev.{h}.npz") for h in HEURISTICS}
    for k, (f, r) in enumerate(zip(fwd, rev)):
        S, T = len(f.src_words), len(f.tgt_words)
        for h in HEURISTICS:
            sym = rows[h][k]
            assert set(sym.links) == symmetrize(f.links, r.links, S, T, h)
            assert sym.meta["symmetrize"] == h and sym.meta["method"] == "attention"
            assert set(np.unique(sym.word_weights)) <= {0.0, 1.0}
            assert {(i, j) for j, i in zip(*np.nonzero(sym.word_weights))} == set(sym.links)
        agreed = load_alignments(out / "fwd+rev.agreement.npz")[k]
        mean, links = agreement(f.word_weights, r.word_weights)  # r: flipped, forward order
        assert set(agreed.links) == links and agreed.meta["threshold"] == DEFAULT_AGREEMENT
        assert np.allclose(agreed.word_weights, mean)
        assert set(rows["intersection"][k].links) <= set(rows["grow-diag-final-and"][k].links)
        assert set(rows["grow-diag-final"][k].links) <= set(rows["union"][k].links)
    for name, row in summary.items():
        assert 0 <= row["aer"] <= 1 and row["sentences"] == 12, name
    assert "fwd+rev.grow-diag-final-and" in stdout
    assert (out / "fwd+rev.union.links").read_text().count("\n") == 12


def test_the_reverse_run_must_be_the_other_direction(runs, tmp_path, capsys):
    code, _, err, _ = align(capsys, tmp_path, "--run", str(runs["fwd"]), "--reverse",
                            str(runs["fixed"]), "--split", "test", "--limit", "3")
    assert code == 2 and "its pair is src-tgt" in err and "must be tgt-src" in err


@pytest.mark.parametrize("args, message", [
    (["--symmetrize", "union"], "--symmetrize needs --reverse"),
    (["--mode", "free", "--adapt", "2"], "use --mode forced"),
    (["--mode", "free", "--gold", "x.gold"], "--mode free"),
    (["--adapt-guides", "intersection"], "give --adapt N too"),
])
def test_options_that_cannot_mean_anything_are_refused(runs, tmp_path, capsys, args, message):
    code, _, err, _ = align(capsys, tmp_path, "--run", str(runs["fwd"]), "--src", "a b", *args)
    assert code == 2 and message in err, err


def test_the_sentences_come_from_one_place_and_free_mode_from_no_given_target(
        runs, tmp_path, capsys):
    (tmp_path / "p.txt").write_text("a b ||| c d\n")
    for args, message in ((["--src", "a b", "--pairs", str(tmp_path / "p.txt")],
                           "--pairs and --src each name the sentences to align: give one"),
                          (["--split", "val", "--src", "a b"], "--src and --split each"),
                          (["--pairs", str(tmp_path / "p.txt"), "--mode", "free"],
                           "--mode free aligns the model's own translation")):
        code, _, err, _ = align(capsys, tmp_path, "--run", str(runs["fwd"]), *args)
        assert code == 2 and message in err, err


def test_runs_of_the_other_pair_are_refused_beside_each_other(runs, tmp_path, capsys):
    """--run beside --run, an ensemble, the explorer and the report all show the runs on one
    pair's sentences: a run trained the other way is named, not read on the wrong side."""
    from nmt.explore.sources import find_sources
    from nmt.report.compare import compare_runs

    fwd, rev = str(runs["fwd"]), str(runs["rev"])
    code, _, err, _ = align(capsys, tmp_path, "--run", fwd, "--run", rev, "--split", "test")
    assert code == 2 and f"{rev}: trained on pair tgt-src but {fwd} on src-tgt" in err, err
    for call in (lambda: nmt.load(fwd, rev), lambda: find_sources([runs["fwd"], runs["rev"]]),
                 lambda: compare_runs([runs["fwd"], runs["rev"]], tmp_path / "report")):
        with pytest.raises(NMTError, match=f"^{rev}: trained on pair tgt-src but {fwd} on src-tgt"):
            call()


def test_a_report_or_the_explorer_also_needs_one_corpus():
    from nmt.core.config import build_config
    from nmt.models.runs import check_one_pair

    a, b = (build_config({"data": {"corpus": c, "pair": "de-en"}}) for c in ("m30k", "mine"))
    check_one_pair([("A", a), ("B", b)], "why")  # aligning: sentences of any corpus
    with pytest.raises(NMTError, match="^B: trained on corpus mine but A on m30k; why$"):
        check_one_pair([("A", a), ("B", b)], "why", corpus=True)


def test_saliency_aligns_the_fixed_context_family(runs, data_root, tmp_path, capsys):
    pairs, gold = short_pairs_with_gold(data_root, tmp_path, n=8)
    code, stdout, err, out = align(capsys, tmp_path, "--run", str(runs["fixed"]), "--run",
                                   str(runs["fwd"]), "--method", "attention", "--method",
                                   "saliency", "--pairs", str(pairs), "--gold", str(gold),
                                   "--plot", "1")
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert "no attention" in summary["fixed"]["note"]
    for name in ("fixed.saliency", "fwd.saliency", "fwd"):
        assert 0 <= summary[name]["aer"] <= 1 and summary[name]["method"] in name + "attention"
    for rec in load_alignments(out / "fixed.saliency.npz"):
        assert rec.weights.shape[:2] == (1, 1) and rec.meta["method"] == "saliency"
        np.testing.assert_allclose(rec.weights.sum(-1), 1.0, atol=1e-5)
    assert (out / "grid_sentence0.png").is_file()


def digest(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file()}


def test_adapt_trains_a_copy_and_leaves_the_runs_byte_identical(runs, data_root, tmp_path,
                                                                capsys):
    pairs, _ = short_pairs_with_gold(data_root, tmp_path, n=6)
    before = {name: digest(runs[name]) for name in ("fwd", "rev")}
    common = ["--run", str(runs["fwd"]), "--pairs", str(pairs)]
    code, _, err, plain = align(capsys, tmp_path / "plain", *common)
    assert code == 0, err
    code, stdout, err, out = align(capsys, tmp_path, *common, "--reverse", str(runs["rev"]),
                                   "--adapt", "3", "--adapt-lr", "0.01",
                                   "--adapt-guides", "intersection")
    assert code == 0, err
    assert err.count("not a guided run") == 2  # one line per run, unguided: nothing to join
    assert {name: digest(runs[name]) for name in ("fwd", "rev")} == before
    summary = json.loads((out / "summary.json").read_text())
    for name in ("fwd", "rev", "fwd+rev.agreement"):
        assert summary[name]["adapt"]["steps"] == 3 and summary[name]["adapt"]["seconds"] > 0
    assert "adapted 3 steps in" in stdout
    adapted, original = load_alignments(out / "fwd.npz"), load_alignments(plain / "fwd.npz")
    assert adapted[0].meta["adapt_steps"] == 3
    assert any(not np.allclose(a.weights, o.weights, atol=1e-4)
               for a, o in zip(adapted, original))


def test_free_mode_aligns_the_searchs_own_ids(runs, tmp_path, capsys, monkeypatch):
    import nmt.report.align

    _, vocab, _, _ = load_run(runs["fwd"])
    ids = list(range(4, 10))  # a segmentation that re-encoding its text would not give back
    assert vocab.encode_tgt([vocab.decode_tgt(ids)])[0] != ids
    monkeypatch.setattr(nmt.report.align, "nbest_ids",
                        lambda model, src_ids, cfg, *a: [[(ids, 0.0)] for _ in src_ids])
    code, _, err, out = align(capsys, tmp_path, "--run", str(runs["fwd"]), "--src", "a b",
                              "--mode", "free")
    assert code == 0, err
    record = load_alignments(out / "fwd.npz")[0]
    assert record.tgt_tokens[:-1] == vocab.tgt_pieces(ids)


def test_the_transformer_reads_naive_by_default_and_shifted_when_asked(runs):
    _, vocab, bahdanau, _ = load_run(runs["fwd"])
    cfg = ModelConfig(family="transformer", emb_size=16, heads=1, ff_size=16, enc_layers=1,
                      dec_layers=1, dropout=0.0)
    model = build_model(cfg, vocab.src_size, vocab.tgt_size, vocab.joint).eval()
    src, tgt = vocab.encode_src(["a b c"]), vocab.encode_tgt(["x y"])
    record = collect(model, vocab, src, tgt)[0]
    src_p, tgt_p = record.src_tokens[:-1], record.tgt_tokens[:-1]
    shifted = word_matrix(record.weights, src_p, tgt_p, shifted=True)
    naive = word_matrix(record.weights, src_p, tgt_p, shifted=False)
    assert not np.allclose(shifted, naive)
    np.testing.assert_allclose(record.word_weights, naive, atol=1e-6)
    asked = collect(model, vocab, src, tgt, shifted=True)[0]  # any shape: 1 layer, 1 head
    np.testing.assert_allclose(asked.word_weights, shifted, atol=1e-6)
    assert default_shifted(bahdanau, "attention", None) is False
    assert default_shifted(model, "saliency", None) is False
    with pytest.raises(NMTError, match="attention only"):
        default_shifted(model, "saliency", True)


def test_the_per_layer_table_uses_the_links_asked_for():
    # 2 layers, 1 head; source ▁a ▁b (+EOS), target ▁x ▁y (+EOS row). Layer 0, naive
    # reading: row x = [0.9, 0.1], row y = [0.45, 0.55] -> argmax links 0-0, 1-1; with
    # --links threshold 0.6 only 0-0 survives.
    rows = np.array([[0.9, 0.1, 0.0], [0.45, 0.55, 0.0], [0.0, 0.0, 1.0]])
    weights = np.stack([rows, rows])[:, None]  # (L=2, H=1, 3, 3)
    record = AlignmentRecord(0, ["▁a", "▁b", "</s>"], ["▁x", "▁y", "</s>"], weights,
                             ["a", "b"], ["x", "y"], rows[:2, :2])
    gold = [GoldAlignment(frozenset({(0, 0), (1, 1)}), frozenset({(0, 0), (1, 1)}))]
    argmax = layer_table([record], gold, AlignOptions(runs=[]))
    threshold = layer_table([record], gold, AlignOptions(runs=[], links="threshold",
                                                         threshold=0.6))
    naive0 = {(r["layer"], r["reading"]): r["aer"] for r in argmax}[(0, "naive")]
    naive0_t = {(r["layer"], r["reading"]): r["aer"] for r in threshold}[(0, "naive")]
    assert naive0 == pytest.approx(0.0)
    assert naive0_t == pytest.approx(1 - 2 / 3)  # A = {0-0}: 1 - (1 + 1) / (1 + 2)


def test_mean_records_pools_word_maps_and_takes_links_the_right_way():
    from nmt.align.bidirectional import mean_records, word_record

    a = word_record(0, ["x", "y"], ["p", "q"], np.array([[0.9, 0.1], [0.6, 0.4]]), set(), {})
    b = word_record(0, ["x", "y"], ["p", "q"], np.array([[0.5, 0.5], [0.0, 1.0]]), set(), {})
    (pooled,) = mean_records([[a], [b]], {"method": "attention"})
    np.testing.assert_allclose(pooled.word_weights, [[0.7, 0.3], [0.3, 0.7]])
    assert set(pooled.links) == {(0, 0), (1, 1)}  # argmax per target word (row)
    assert pooled.meta["ensemble"] == 2 and pooled.meta["direction"] == "forward"
    # flipped reverse records: columns are the distributions, links are argmax per source
    # word. The mean is [[0.6, 0.7], [0.4, 0.3]]: both columns peak on target p, so x-p and
    # y-p; an argmax per row would give p-y and q-x instead.
    c = word_record(0, ["x", "y"], ["p", "q"], np.array([[0.8, 0.6], [0.2, 0.4]]), set(), {})
    d = word_record(0, ["x", "y"], ["p", "q"], np.array([[0.4, 0.8], [0.6, 0.2]]), set(), {})
    (back,) = mean_records([[c], [d]], {}, flipped=True)
    np.testing.assert_allclose(back.word_weights, [[0.6, 0.7], [0.4, 0.3]])
    assert set(back.links) == {(0, 0), (1, 0)}
    e = word_record(0, ["x", "y", "z"], ["p", "q"], np.full((2, 3), 1 / 3), set(), {})
    with pytest.raises(NMTError, match="different words"):
        mean_records([[a], [e]], {})


def test_ensemble_rows_pool_the_runs_of_each_direction(runs, data_root, tmp_path, capsys):
    pairs, gold = short_pairs_with_gold(data_root, tmp_path, n=8)
    code, _, err, _ = align(capsys, tmp_path / "one", "--run", str(runs["fwd"]), "--ensemble",
                            "--pairs", str(pairs))
    assert code == 2 and "at least two --run" in err
    # the same run twice: the pooled map is that run's map, so the ensemble rows must equal
    # the single pair's rows exactly (wiring, names and symmetrisation of pooled maps)
    both = ["--run", str(runs["fwd"]), "--run", str(runs["fwd"]), "--reverse", str(runs["rev"]),
            "--reverse", str(runs["rev"])]
    code, stdout, err, out = align(capsys, tmp_path, *both, "--ensemble", "--pairs", str(pairs),
                                   "--gold", str(gold))
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert {"ensemble", "ensemble-reverse", "ensemble.agreement"} <= set(summary)
    single = [k for k in summary if k.endswith(".agreement") and not k.startswith("ensemble")]
    assert summary["ensemble.agreement"]["aer"] == pytest.approx(summary[single[0]]["aer"])
    fwd = load_alignments(next(out.glob("*fwd.npz")))
    pooled = load_alignments(out / "ensemble.npz")
    for f, p in zip(fwd, pooled):
        np.testing.assert_allclose(p.word_weights, f.word_weights, atol=1e-6)
        assert set(p.links) == set(f.links)
    assert "ensemble.agreement" in stdout
