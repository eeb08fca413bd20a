"""Deployment decoding (docs/deploy.md): `nmt export` to CTranslate2, `--engine ctranslate2`
behind every interface, the guided alignment head through the engine, stale and missing
exports, the recurrent families' refusal and their int8 route on PyTorch."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pytest
import torch

import nmt
from nmt.align.extract import forced_weights
from nmt.core.checkpoint import load_checkpoint, save_checkpoint
from nmt.core.errors import NMTError
from nmt.core.rundir import RunDir
from nmt.decoding import engines
from nmt.decoding.api import Sampling
from nmt.decoding.engines import INT8_FAMILIES, engine_for
from nmt.decoding.export import export, export_dir, stale
from nmt.serve.runs import load_runs
from nmt.training.trainer import Trainer
from tests.test_cli import assert_user_error, run_cli
from tests.test_guided import _guided
from tests.test_train import MODELS, short_pairs, tiny_config

pytest.importorskip("ctranslate2")  # the [deploy] extra; make install brings it


@pytest.fixture(scope="module")
def runs(data_root, tmp_path_factory) -> dict:
    """A tiny Transformer, a guided one read causally (its head can go through the engine),
    a guided one read with full context (it cannot), and a Bahdanau run."""
    folder = tmp_path_factory.mktemp("deploy")
    out = {}
    for name, cfg in (
            ("transformer", tiny_config(data_root, folder, "transformer", MODELS["transformer"],
                                        max_steps=60, threads=1, valid_every=30,
                                        valid_sentences=8)),
            ("guided", _guided(data_root, folder, "guided", MODELS["transformer"], 1.0,
                               max_steps=60)),
            ("full_context", _guided(data_root, folder, "full", MODELS["transformer"], 1.0,
                                     {"full_context": True}, max_steps=20)),
            ("bahdanau", tiny_config(data_root, folder, "bahdanau", MODELS["bahdanau"],
                                     max_steps=40, threads=1))):
        Trainer(cfg, quiet=True).fit()
        out[name] = cfg.run_dir
    return out


def test_an_exported_transformer_decodes_and_scores_as_the_pytorch_one(runs, data_root):
    """Greedy output is the same; the engine's log-probability of a forced target is ours
    (so every weight went where it belongs); beam hypotheses and their GNMT-normalised
    scores agree."""
    import ctranslate2

    texts, refs = short_pairs(data_root, 24)
    ours = nmt.load(runs["transformer"])
    theirs = nmt.load(runs["transformer"], engine="ctranslate2")
    assert theirs.engine.name == "ctranslate2" and "engine='ctranslate2'" in repr(theirs)
    greedy = [t.text for t in theirs.translate(texts, beam=1)]
    assert greedy == [t.text for t in ours.translate(texts, beam=1)]
    # Sampling is drawn again from its seed: on PyTorch (CTranslate2's workers seed once).
    hot = Sampling(top_p=0.9, temperature=1.5, seed=3)
    drawn = [t.text for t in theirs.translate(texts, sampling=hot)]
    assert drawn == [t.text for t in theirs.translate(texts, sampling=hot)]
    assert drawn == [t.text for t in ours.translate(texts, sampling=hot)] != greedy
    translator = ctranslate2.Translator(str(export_dir(runs["transformer"])))
    src = [ours.vocab.src_pieces(ids[:-1]) + ["</s>"] for ids in ours.vocab.encode_src(texts)]
    tgt = [ours.vocab.tgt_pieces(ids) for ids in ours.vocab.encode_tgt(refs)]
    engine = [sum(r.log_probs) for r in translator.score_batch(src, tgt)]
    assert np.allclose(engine, ours.score(texts, refs), atol=1e-3)
    a, b = ours.translate(texts, beam=4, n_best=2), theirs.translate(texts, beam=4, n_best=2)
    same = [(x, y) for x, y in zip(a, b) if [h.text for h in x.hypotheses] ==
            [h.text for h in y.hypotheses]]
    assert len(same) >= 0.9 * len(texts)
    assert all(abs(hx.score - hy.score) < 1e-2 for x, y in same
               for hx, hy in zip(x.hypotheses, y.hypotheses))


def test_the_engine_keeps_each_sentences_own_length_limit(runs, data_root):
    """One batch decodes to its longest sentence's limit on the engine; each sentence is
    still held to its own (ratio * source + offset, EOS included), as our search holds it."""
    texts, _ = short_pairs(data_root, 24)
    ours = nmt.load(runs["transformer"])
    theirs = nmt.load(runs["transformer"], engine="ctranslate2")
    cfg = dataclasses.replace(ours.cfg.decode, max_len_ratio=0.5, max_len_offset=1,
                              batch_size=24)
    src_ids = ours.vocab.encode_src(texts)
    a, _ = ours.engine.nbest(src_ids, cfg, 1)
    b, _ = theirs.engine.nbest(src_ids, cfg, 1)
    assert [h[0][0] for h in a] == [h[0][0] for h in b]
    limits = [int(len(s) * 0.5) + 1 for s in src_ids]
    assert all(len(h[0][0]) <= n - 1 for h, n in zip(b, limits))
    assert len({len(s) for s in src_ids}) > 1 and any(len(h[0][0]) == n - 1
                                                      for h, n in zip(b, limits))


def test_the_exported_alignment_head_gives_the_pytorch_links(runs, data_root):
    """A guided run exports its supervised layer and heads; `--alignments` on the engine
    reads the engine's own attention (no forced pass) and links what PyTorch links."""
    texts, _ = short_pairs(data_root, 24)
    stamp = json.loads((export(runs["guided"]) / "export.json").read_text())
    assert stamp["alignment"] == {"layer": -2, "heads": 1, "full_context": False}
    ours = nmt.load(runs["guided"])
    theirs = nmt.load(runs["guided"], engine="ctranslate2")
    assert theirs.engine.reads_links
    _, maps = theirs.engine.nbest(theirs.vocab.encode_src(texts[:2]), theirs.cfg.decode, 1,
                                  attention=True)
    assert maps is not None and maps[0][0].shape[:2] == (1, 1)
    assert np.allclose(maps[0][0].sum(-1), 1.0, atol=1e-4)  # rows are distributions
    src_ids = ours.vocab.encode_src(texts)
    tgt_ids = ours.vocab.encode_tgt(short_pairs(data_root, 24)[1])
    forced = theirs.engine.forced_maps(src_ids, tgt_ids, batch_size=5)
    for mine, engine in zip(forced_weights(ours.module, src_ids, tgt_ids), forced):
        assert np.allclose(engine[0, 0], mine[-2, :1].mean(0), atol=1e-4)
    a = ours.translate(texts, beam=1, alignments=True)
    b = theirs.translate(texts, beam=1, alignments=True)
    pairs = [(x.links, y.links) for x, y in zip(a, b) if x.text == y.text]
    assert len(pairs) >= 0.9 * len(texts)
    total = sum(len(x) for x, _ in pairs)
    agree = sum(len(set(x) & set(y)) for x, y in pairs)
    assert total and agree >= 0.98 * total, (agree, total)


def test_a_full_context_guided_run_takes_its_links_from_the_forced_pass(runs, data_root):
    texts, _ = short_pairs(data_root, 6)
    theirs = nmt.load(runs["full_context"], engine="ctranslate2")
    assert not theirs.engine.reads_links
    ours = nmt.load(runs["full_context"])
    for x, y in zip(ours.translate(texts, alignments=True), theirs.translate(texts, alignments=True)):
        if x.text == y.text:
            assert x.links == y.links


def test_every_interface_accepts_the_engine(runs, data_root, capsys):
    texts, _ = short_pairs(data_root, 4)
    run = runs["transformer"]
    code, out, _ = run_cli(capsys, "translate", "--run", run, "--engine", "ctranslate2", *texts)
    assert code == 0 and out.splitlines() == [t.text for t in nmt.load(run).translate(texts)]
    code, out, _ = run_cli(capsys, "translate", "--run", run, "--engine", "ctranslate2",
                           "--quantize", "int8", "--format", "jsonl", "--alignments",
                           "--beam", "3", "--n-best", "2", *texts)
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(rows) == 4 and all(len(r["n_best"]) == 2 and "links" in r
                                                for r in rows)
    before = RunDir(run).read_scores()
    code, out, _ = run_cli(capsys, "evaluate", "--run", run, "--engine", "ctranslate2",
                           "--limit", "8")
    assert code == 0 and "ctranslate2" in out
    assert RunDir(run).read_scores() == before  # another engine's figures are printed only
    said = []
    served = load_runs([run, runs["bahdanau"]], engine="ctranslate2", say=said.append)
    assert [s.model.engine.name for s in served] == ["ctranslate2", "pytorch"]
    assert len(said) == 1 and "Transformers only" in said[0]
    assert served[0].model.translate(texts[:1])[0].text == nmt.load(run).translate(texts[:1])[0].text


def test_a_recurrent_run_gets_one_line_naming_what_to_use(runs, capsys):
    assert_user_error(run_cli(capsys, "export", "--run", runs["bahdanau"]),
                      "CTranslate2 runs Transformers only", "--quantize int8")
    assert_user_error(run_cli(capsys, "translate", "--run", runs["bahdanau"], "--engine",
                              "ctranslate2", "ein"), "Transformers only")
    with pytest.raises(NMTError, match="ensemble"):
        nmt.load(runs["transformer"], runs["guided"], engine="ctranslate2")


def test_a_stale_export_is_named_and_made_again(runs, data_root, capsys):
    run = runs["transformer"]
    export(run)
    assert stale(run) is None
    best = RunDir(run).checkpoint("best")
    payload = load_checkpoint(best)
    original = {k: v.clone() for k, v in payload["model"].items()}
    payload["model"] = {k: v + 0.01 if v.is_floating_point() else v for k, v in original.items()}
    save_checkpoint(best, payload)
    try:
        assert "older best checkpoint" in stale(run)
        capsys.readouterr()
        model = nmt.load(run, engine="ctranslate2")
        err = capsys.readouterr().err
        assert "older best checkpoint" in err and len(err.splitlines()) == 1
        assert stale(run) is None
        texts, _ = short_pairs(data_root, 6)
        assert [t.text for t in model.translate(texts)] == \
            [t.text for t in nmt.load(run).translate(texts)]
    finally:
        payload["model"] = original
        save_checkpoint(best, payload)
    (export_dir(run) / "model.bin").unlink()
    assert "no CTranslate2 export" in stale(run)


def test_a_missing_extra_gets_its_install_line(runs, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    assert_user_error(run_cli(capsys, "export", "--run", runs["transformer"]),
                      "pip install 'nmt[deploy]'")
    with pytest.raises(NMTError, match=r"nmt\[deploy\]"):
        nmt.load(runs["transformer"], engine="ctranslate2")


def test_int8_on_pytorch_quantises_the_recurrent_families_at_load_only(runs, data_root):
    texts, _ = short_pairs(data_root, 6)
    plain = nmt.load(runs["bahdanau"])
    model = nmt.load(runs["bahdanau"], quantize="int8")
    quantised = {type(m).__module__ for m in model.module.modules()}
    assert any("quantized" in name for name in quantised)
    assert not any("quantized" in type(m).__module__ for m in plain.module.modules())
    assert len(model.translate(texts)) == len(texts)
    assert all(isinstance(p, torch.nn.Parameter) for p in plain.module.parameters())
    with pytest.raises(NMTError, match="not measured in int8"):
        engines.PyTorchEngine(plain.module, "a_new_family", "int8")
    with pytest.raises(NMTError, match="quantize"):
        nmt.load(runs["bahdanau"], quantize="int4")


def test_a_server_asked_for_int8_decodes_each_family_where_it_can():
    assert engine_for("transformer", "ctranslate2", "int8") == ("ctranslate2", "int8", "")
    engine, quantize, why = engine_for("bahdanau", "ctranslate2", "int8")
    assert (engine, quantize) == ("pytorch", "int8" if "bahdanau" in INT8_FAMILIES else None)
    assert "Transformers only" in why
    assert engine_for("a_new_family", "pytorch", "int8")[1] is None
    assert set(INT8_FAMILIES) == {"bahdanau", "luong", "fixed_context", "transformer"}
