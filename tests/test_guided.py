"""Guided alignment (nmt.align.guided, config section `guided`): the teacher's links as
piece targets, the loss, training with it, and how a guided run is read."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
import torch

import nmt
from nmt.core.config import config_to_dict
from nmt.core.errors import NMTError
from nmt.models.attention import supervised
from nmt.models.checks import config_from_dict
from nmt.training.guided import alignment_loss, links_folder, piece_targets
from nmt.training.trainer import Trainer
from tests.test_cli import assert_user_error, run_cli
from tests.test_train import MODELS, short_pairs, tiny_config


def test_word_links_map_onto_pieces_and_rows_are_normalised():
    """Source words: "▁a" | "▁bc" = "▁b" + "c"; target words: "▁x" + "y" | "▁z".
    Links (source, target): (1, 0) and (0, 1), (1, 1): target word 0 ("▁x", "y") reads
    source word 1's two pieces; target word 1 reads all three; EOS row and column: 0."""
    g = piece_targets(["▁a", "▁b", "c"], ["▁x", "y", "▁z"], {(1, 0), (0, 1), (1, 1)})
    expected = np.array([[0, .5, .5, 0], [0, .5, .5, 0], [1 / 3, 1 / 3, 1 / 3, 0],
                         [0, 0, 0, 0]])
    np.testing.assert_allclose(g, expected, atol=1e-6)
    unlinked = piece_targets(["▁a", "▁b"], ["▁x", "▁z"], {(1, 1)})
    assert unlinked[0].sum() == 0 and unlinked[1].tolist() == [0, 1, 0]
    assert piece_targets(["▁a"], ["▁x"], {(3, 0)}) is None  # the teacher saw other words


def test_a_pair_whose_links_name_other_words_is_unguided_and_counted():
    """nmt.align.guided:guide_targets — a pair whose links name a word it does not have
    gets None (no guidance), and the count says how many."""
    from nmt.core.tokens import EOS
    from nmt.training.guided import guide_targets

    class Vocab:
        def src_pieces(self, ids):
            return ["▁a", "▁b", "c"][:len(ids)]

        def tgt_pieces(self, ids):
            return ["▁x", "▁y"][:len(ids)]

    src, tgt = [[5, 6, EOS], [5, 6, 7, EOS], [5, EOS]], [[8, 9], [8], [8, 9]]
    out, misfit = guide_targets(Vocab(), src, tgt, [{(0, 0)}, {(1, 0)}, {(0, 1), (1, 1)}])
    assert misfit == 1 and out[2] is None  # the third pair has one source word, not two
    assert out[0].shape == (3, 3) and out[1][0].tolist() == [0, 0.5, 0.5, 0]


@pytest.mark.parametrize("block", [1 << 24, 7, 1])
def test_a_links_file_is_read_line_by_line_as_parsing_it_whole_would(tmp_path, monkeypatch,
                                                                      block):
    """nmt.data.links:PharaohFile — a line is parsed when read, from its offset; blank lines
    are pairs without links, a last line may lack its newline, and a malformed line is
    named by file and line; the same whatever size of blocks the file is scanned in."""
    import nmt.data.links
    from nmt.data.links import PharaohFile, parse_pharaoh

    monkeypatch.setattr(nmt.data.links, "SCAN_BLOCK", block)

    text = "0-0 1-2\n\n3-1 2-2 0-0\n" + "".join(f"{k}-{k}\n" for k in range(300)) + "5-4"
    path = tmp_path / "train.links"
    path.write_text(text)
    links = PharaohFile(path)
    whole = [parse_pharaoh(line) for line in text.splitlines()]
    assert len(links) == len(whole) == 304 and list(links) == whole
    assert links[1] == set() and links[-1] == {(5, 4)} and links[2:4] == whole[2:4]
    with pytest.raises(IndexError):
        links[304]
    path.write_text(text + "\n")  # the same lines, the last one with its newline
    assert len(PharaohFile(path)) == 304 and list(PharaohFile(path)) == whole
    path.write_text("0-0\n1-x\n")
    with pytest.raises(NMTError, match=r"train\.links:2: malformed Pharaoh link '1-x'"):
        PharaohFile(path)[1]


def test_null_teaches_unlinked_words_and_eos_to_attend_to_the_source_eos():
    """guided.null_word: target word 0 has no link and the EOS row none either: both put their
    mass on the source EOS column; a linked row is unchanged; a pair without any link
    stays unguided (no teacher, not "everything is NULL")."""
    g = piece_targets(["▁a", "▁b"], ["▁x", "y", "▁z"], {(1, 1)}, null=True)
    np.testing.assert_allclose(g, [[0, 0, 1], [0, 0, 1], [0, 1, 0], [0, 0, 1]])
    assert piece_targets(["▁a", "▁b"], ["▁x"], set(), null=True).sum() == 0


def test_a_null_reading_takes_the_source_eos_as_no_link():
    """Pieces = words; raw (1, 1, T+1=3, S+1=4) maps, the last column the source EOS. Row
    0 puts most mass on EOS: no link with null; without null EOS is dropped and the row's
    argmax among words links it; row 1 links word 2 (the last real word) both ways.
    Threshold alike. A source of EOS alone has no word to link."""
    from nmt.align.extract import make_record
    from nmt.core.tokens import EOS

    class Vocab:
        def src_pieces(self, ids):
            return ["▁a", "▁b", "▁c"][:len(ids)]

        def tgt_pieces(self, ids):
            return ["▁x", "▁y"][:len(ids)]

    w = np.array([[[[0.3, 0.1, 0.0, 0.6], [0.1, 0.1, 0.7, 0.1], [0.0, 0.0, 0.0, 1.0]]]])
    src, tgt = [5, 6, 7, EOS], [8, 9]
    assert make_record(0, Vocab(), src, tgt, w).links == [(0, 0), (2, 1)]
    assert make_record(0, Vocab(), src, tgt, w, null=True).links == [(2, 1)]
    held = make_record(0, Vocab(), src, tgt, w, null=True, links="threshold", threshold=0.3)
    assert held.links == [(0, 0), (2, 1)]
    np.testing.assert_allclose(held.word_weights[0], [0.75, 0.25, 0.0])  # no EOS column
    alone = make_record(0, Vocab(), [EOS], tgt, np.ones((1, 1, 3, 1)), null=True)
    assert alone.links == [] and alone.word_weights.shape == (2, 0)


def test_the_loss_is_the_cross_entropy_to_the_supervised_heads_by_hand():
    """attn (B=1, L=2, H=2, T=2, S=2); supervised layer -2 (the first), its first head:
    a = [[0.8, 0.2], [0.4, 0.6]]; targets g = [[1, 0], [0.5, 0.5]]:
    loss = -(log 0.8 + 0.5 log 0.4 + 0.5 log 0.6). The other heads do not count."""
    attn = torch.zeros(1, 2, 2, 2, 2)
    attn[0, 0, 0] = torch.tensor([[0.8, 0.2], [0.4, 0.6]])
    attn[0, 0, 1] = torch.tensor([[0.1, 0.9], [0.9, 0.1]])
    attn[0, 1] = 0.5
    guide = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])
    by_hand = -(math.log(0.8) + 0.5 * math.log(0.4) + 0.5 * math.log(0.6))
    assert alignment_loss(attn, guide, -2, 1).item() == pytest.approx(by_hand, rel=1e-6)
    both = -(math.log(0.45) + 0.5 * math.log(0.65) + 0.5 * math.log(0.35))
    assert alignment_loss(attn, guide, 0, 2).item() == pytest.approx(both, rel=1e-6)
    assert torch.equal(supervised(attn[:, :1, :1], -2, 1), attn[:, 0, 0])  # one-map families


def test_positions_without_links_add_nothing():
    attn = torch.rand(2, 1, 1, 3, 4).softmax(-1)
    guide = torch.zeros(2, 3, 4)
    guide[0, 1, 2] = 1.0
    loss = alignment_loss(attn, guide, -2, 1)
    assert loss.item() == pytest.approx(-math.log(attn[0, 0, 0, 1, 2].item()), rel=1e-6)
    changed = attn.clone()
    changed[1] = torch.rand(1, 1, 3, 4).softmax(-1)  # a sentence without links
    changed[0, 0, 0, 0] = torch.tensor([0.7, 0.1, 0.1, 0.1])  # an unlinked row
    assert alignment_loss(changed, guide, -2, 1).item() == pytest.approx(loss.item())


def _guided(data_root, tmp_path, name: str, model: dict, weight: float, guided: dict = {},
            **train):
    train = {"threads": 1, "valid_sentences": 20, **train}
    cfg = tiny_config(data_root, tmp_path, name, model, **train)
    return config_from_dict({**config_to_dict(cfg),
                             "guided": {"weight": weight, "teacher": "gold", **guided}})


def test_weight_zero_trains_exactly_like_an_unguided_run_and_a_weight_changes_it(
        data_root, tmp_path):
    model = MODELS["bahdanau"]
    plain = Trainer(tiny_config(data_root, tmp_path, "plain", model, max_steps=6, threads=1,
                                valid_sentences=20), quiet=True)
    plain.fit()
    zero = Trainer(_guided(data_root, tmp_path, "zero", model, 0.0, max_steps=6), quiet=True)
    zero.fit()
    guided = Trainer(_guided(data_root, tmp_path, "guided", model, 1.0, max_steps=6), quiet=True)
    guided.fit()
    a, b, c = (t.model.state_dict() for t in (plain, zero, guided))
    assert all(torch.equal(a[k], b[k]) for k in a)
    data = [next(r for r in t.run.read_metrics() if r["kind"] == "data") for t in (plain, guided)]
    assert "unguided" not in data[0] and data[1]["unguided"] == 0  # gold fits every pair
    d = guided.data  # the targets are computed when a batch reads them, as by hand
    from nmt.training.guided import PieceTargets, teacher_links
    links = teacher_links(guided.cfg, guided.cfg.data.train)
    assert isinstance(d.train_guides, PieceTargets) and len(d.train_guides) == len(links)
    for i in range(0, len(links), 37):
        want = piece_targets(d.vocab.src_pieces(d.train_src[i][:-1].tolist()),
                             d.vocab.tgt_pieces(d.train_tgt[i].tolist()), links[i])
        assert np.array_equal(d.train_guides[i], want)
    assert any(not torch.equal(a[k], c[k]) for k in a)
    valid = [r for r in guided.run.read_metrics() if r["kind"] == "valid"]
    assert valid and all(0.0 <= r["valid_aer"] <= 1.0 for r in valid)  # beside BLEU
    assert all("valid_aer" not in r for r in plain.run.read_metrics())


def test_guidance_teaches_the_supervised_head_to_follow_the_teacher(data_root, tmp_path):
    """A tiny Transformer guided by the synthetic gold: after the same steps, its supervised
    head's cross-entropy to the gold on the validation pairs is far below an unguided
    twin's, and so is its AER."""
    from nmt.align.extract import collect
    from nmt.data.batching import collate, pad_guides
    from nmt.training.guided import guide_targets, teacher_aer, teacher_links

    trainers = {}
    for weight in (0.0, 1.0):
        cfg = _guided(data_root, tmp_path, f"tr{weight}", MODELS["transformer"], weight,
                      max_steps=80, valid_every=1000, valid_sentences=0)
        trainers[weight] = Trainer(cfg, quiet=True)
        trainers[weight].fit()
    d = trainers[1.0].data
    everything = teacher_links(trainers[1.0].cfg, "val")
    short = [k for k in range(len(d.valid_src)) if len(d.valid_tgt[k]) <= 12][:40]  # max_len
    src, tgt = [d.valid_src[k] for k in short], [d.valid_tgt[k] for k in short]
    links = [everything[k] for k in short]
    guides, _ = guide_targets(d.vocab, src, tgt, links)
    batch = collate(src, tgt, guides)
    ce, aer = {}, {}
    for weight, trainer in trainers.items():
        with torch.no_grad():
            _, attn, _ = trainer.model.eval()(batch.src, batch.tgt_in, need_attn=True)
        ce[weight] = alignment_loss(attn, batch.guide, -2, 1).item() / (batch.guide > 0).any(-1).sum().item()
        records = collect(trainer.model, d.vocab, src, tgt, layer=-2, heads=1, shifted=False)
        aer[weight] = teacher_aer(records, links)
    assert ce[1.0] < 0.7 * ce[0.0], (ce, aer)
    assert aer[1.0] < aer[0.0], aer
    assert pad_guides([None], 2, 3).abs().sum() == 0


@pytest.fixture(scope="module")
def guided_run(data_root, tmp_path_factory):
    cfg = _guided(data_root, tmp_path_factory.mktemp("guided"), "gt", MODELS["transformer"],
                  0.5, {"null_word": True, "full_context": True}, max_steps=20)
    Trainer(cfg, quiet=True).fit()
    return cfg


def test_a_guided_run_is_read_at_its_supervised_head(guided_run, data_root, tmp_path, capsys):
    """nmt align, translate --alignments and nmt.load(...).align read the supervised layer
    and heads of a guided run by default (with its NULL word and full context); --layer
    still chooses another reading."""
    from nmt.align.extract import collect

    model = nmt.load(guided_run.run_dir)
    texts, refs = short_pairs(data_root, 5)
    records = model.align(texts, refs)
    by_hand = collect(model.module, model.vocab, model.vocab.encode_src(texts),
                      model.vocab.encode_tgt(refs), layer=-2, heads=1, shifted=False,
                      null=True, full_context=True)
    assert [r.links for r in records] == [r.links for r in by_hand]
    causal = collect(model.module, model.vocab, model.vocab.encode_src(texts),
                     model.vocab.encode_tgt(refs), layer=-2, heads=1, shifted=False)
    assert any(not np.allclose(a.weights, b.weights) for a, b in zip(records, causal))
    mean = collect(model.module, model.vocab, model.vocab.encode_src(texts),
                   model.vocab.encode_tgt(refs))  # the unguided default: every layer and head
    assert any(not np.allclose(a.word_weights, b.word_weights) for a, b in zip(records, mean))
    args = ["align", "--run", guided_run.run_dir, "--mode", "free", "--plot", "0",
            "--out", tmp_path / "free"]
    for text in texts:
        args += ["--src", text]
    assert run_cli(capsys, *args)[0] == 0
    written = (tmp_path / "free" / "gt.links").read_text().splitlines()
    code, out, _ = run_cli(capsys, "translate", "--run", guided_run.run_dir, "--alignments",
                           *texts)
    assert code == 0 and [line.split("\t")[1] for line in out.splitlines()] == written


def test_teachers_and_their_errors(data_root, tmp_path, capsys, monkeypatch):
    cfg = _guided(data_root, tmp_path, "t", MODELS["bahdanau"], 1.0)
    raw = config_to_dict(cfg)
    eflomal = config_from_dict({**raw, "guided": {"weight": 1.0, "teacher": "eflomal"}})
    other = config_from_dict({**raw, "guided": {"weight": 1.0, "symmetrize": "union"}})
    assert links_folder(eflomal) != links_folder(other)  # the key holds the settings
    import builtins

    real_import = builtins.__import__

    def no_eflomal(name, *args, **kwargs):
        if name == "eflomal":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_eflomal)
    with pytest.raises(NMTError, match=r"pip install -e '\.\[align\]'"):
        Trainer(eflomal, quiet=True)
    monkeypatch.undo()
    with pytest.raises(NMTError, match="fixed_context does not have"):
        config_from_dict({**raw, "model": {**raw["model"], "family": "fixed_context"}})
    with pytest.raises(NMTError, match="data.concat: 1"):
        config_from_dict({**raw, "data": {**raw["data"], "concat": 2}})
    transformer = {**raw, "model": {**raw["model"], **MODELS["transformer"]}}
    with pytest.raises(NMTError, match="guided.layer.*2 decoder layers"):
        config_from_dict({**transformer, "guided": {"weight": 1.0, "layer": 2}})
    with pytest.raises(NMTError, match="guided.heads"):
        config_from_dict({**transformer, "guided": {"weight": 1.0, "heads": 5}})
    every = config_from_dict({**transformer, "guided": {"weight": 1.0, "heads": 4}})
    assert (every.guided.heads, every.model.heads) == (4, 4)  # all of them may be taught
    (tmp_path / "g.yaml").write_text(json.dumps({**raw, "name": "g", "guided": {
        "weight": 1.0, "teacher": "gold"}, "data": {**raw["data"], "pair": "tgt-src",
                                                    "corpus": "synth"}}))
    code, out, _ = run_cli(capsys, "data", "links", "--config", tmp_path / "g.yaml")
    assert code == 0 and "gold links" in out
    missing = {**raw, "name": "m", "data": {**raw["data"], "valid": "nope"}}
    (tmp_path / "m.yaml").write_text(json.dumps(missing))
    assert_user_error(run_cli(capsys, "data", "links", "--config", tmp_path / "m.yaml"))


def test_adapting_a_guided_run_keeps_its_guidance(guided_run, data_root):
    """--adapt of a guided run trains on the teacher's links of the pairs being aligned
    (eflomal on the corpus + the pairs): the adapted supervised head follows them more
    closely than an unguided adaptation's, a weight of 0 adapts as unguided, and
    `nmt align --adapt` records that it was guided."""
    pytest.importorskip("eflomal")
    from nmt.data.batching import collate
    from nmt.report.align import AlignOptions, extract_run
    from nmt.training.adapt import adapt_copy
    from nmt.training.guided import pair_guides

    model = nmt.load(guided_run.run_dir)
    cfg, vocab = model.cfg, model.vocab
    texts, refs = short_pairs(data_root, 16)
    src_ids, tgt_ids = vocab.encode_src(texts), vocab.encode_tgt(refs)
    guides, fit_seconds = pair_guides(cfg, vocab, texts, refs, src_ids, tgt_ids,
                                      from_corpus=True)
    assert sum(g is not None and g.sum() > 0 for g in guides) >= 12  # eflomal linked them
    assert fit_seconds > 0
    batch = collate(src_ids, tgt_ids, guides)
    adapted = {}
    for name, weight, given in (("guided", cfg.guided.weight, guides), ("plain", 0.0, None),
                                ("zero", 0.0, guides)):
        guided = config_from_dict({**config_to_dict(cfg), "guided": {
            **config_to_dict(cfg)["guided"], "weight": weight}}).guided
        adapted[name], _ = adapt_copy(model.module, src_ids, tgt_ids, 8, 3e-3, cfg.train,
                                      guided=guided, guides=given)
    zero, plain = adapted["zero"].state_dict(), adapted["plain"].state_dict()
    assert all(torch.equal(zero[k], plain[k]) for k in zero)
    ce = {}
    for name in ("guided", "plain"):
        with torch.no_grad():
            _, attn, _ = adapted[name](batch.src, batch.tgt_in, need_attn=True)
        ce[name] = alignment_loss(attn, batch.guide, cfg.guided.layer, cfg.guided.heads).item()
    assert ce["guided"] < ce["plain"], ce
    opts = AlignOptions(runs=[guided_run.run_dir], src=texts, tgt=refs, adapt=2, plot=0)
    out = extract_run(guided_run.run_dir, texts, refs, opts)
    assert out.records["attention"][0].meta["adapt_guided"] == "eflomal"
    assert out.records["attention"][0].meta["adapt_guides"] == cfg.guided.symmetrize
    assert out.adaptation is not None and out.adaptation.steps == 2
    assert out.adaptation.teacher_seconds > 0  # eflomal's fit counted, reused or not


def test_adapt_guides_join_eflomals_two_directions_as_asked(guided_run, data_root):
    """`nmt align --adapt-guides H`: a guided run adapts on eflomal's links joined by H
    (default: its guided.symmetrize). Intersection's linked pieces are among
    grow-diag-final-and's, which are among union's (the NULL word's source EOS aside: rows
    linked by none of the links point there)."""
    pytest.importorskip("eflomal")
    from nmt.training.guided import pair_guides

    model = nmt.load(guided_run.run_dir)
    cfg, vocab = model.cfg, model.vocab
    texts, refs = short_pairs(data_root, 16)
    src_ids, tgt_ids = vocab.encode_src(texts), vocab.encode_tgt(refs)
    got = {h: pair_guides(cfg, vocab, texts, refs, src_ids, tgt_ids, True, heuristic=h)[0]
           for h in (None, "intersection", "grow-diag-final-and", "union")}

    def linked(h: str | None) -> set:
        return {(k, t, s) for k, g in enumerate(got[h]) if g is not None
                for t, s in zip(*np.nonzero(g[:, :-1]))}  # the last column: the source EOS

    assert all(np.array_equal(a, b) for a, b in zip(got[None], got[cfg.guided.symmetrize]))
    assert linked("intersection") <= linked("grow-diag-final-and") <= linked("union")
    assert linked("intersection") < linked("union")  # the two directions differ somewhere


def test_full_context_attention_sees_the_whole_target_and_trains_the_loss(data_root, tmp_path):
    """guided.full_context (Garg et al. 2019): the Transformer's decoder run without its
    causal mask. Rows are distributions over real source positions (padding 0); the first
    layer's last real row has seen the same prefix either way, so it equals the causal
    one, while an earlier row (which now sees later pieces) differs; padded target keys
    are not seen (a padded copy gives the same rows). The training loss takes the
    supervised map from that pass, the RNN families refuse the key in one line."""
    from nmt.models import build_model

    cfg = _guided(data_root, tmp_path, "full", MODELS["transformer"], 1.0, max_steps=3)
    model = build_model(cfg.model, 40, 40, True).eval()
    src = torch.tensor([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])
    tgt = torch.tensor([[2, 11, 12, 13], [2, 14, 15, 16]])
    enc = model.encode(src)
    full = model.full_context_attention(enc, tgt)
    causal = model.decode_features(enc, tgt, True)[1]
    assert full.shape == causal.shape == (2, 2, 4, 4, 5)
    torch.testing.assert_close(full.sum(-1), torch.ones(2, 2, 4, 4))
    assert (full[0, ..., 4] == 0).all() and (full[1, ..., 3:] == 0).all()
    torch.testing.assert_close(full[:, 0, :, -1], causal[:, 0, :, -1])
    assert not torch.allclose(full[:, 0, :, 0], causal[:, 0, :, 0])
    padded = torch.cat([tgt, torch.zeros(2, 2, dtype=torch.long)], 1)
    torch.testing.assert_close(model.full_context_attention(enc, padded)[:, :, :, :4], full)
    _, attn, _ = model(src, tgt, need_attn=True, full_context=True)
    torch.testing.assert_close(attn, full)

    cfg = config_from_dict({**config_to_dict(cfg), "guided": {
        **config_to_dict(cfg)["guided"], "full_context": True}})
    trainer = Trainer(cfg, quiet=True)
    trainer.fit()
    assert trainer.run.read_metrics()[-1]["step"] == 3
    from nmt.align.guided import reading_of
    assert reading_of(cfg)["full_context"] is True
    with pytest.raises(NMTError, match="'guided.full_context' reads a decoder without"):
        config_from_dict({**config_to_dict(cfg), "model": MODELS["bahdanau"]})


def test_the_null_word_key_reads_from_yaml(tmp_path):
    """The key is spelt so that YAML does not read it as its own null (`null: true` would
    be the key None)."""
    from nmt.models.checks import load_config

    path = tmp_path / "c.yaml"
    path.write_text("model: {family: transformer, dec_layers: 2}\n"
                    "guided: {weight: 1, null_word: true, full_context: true}\n")
    cfg = load_config(path)
    assert cfg.guided.null_word is True and cfg.guided.full_context is True


def test_adapt_copy_reports_its_first_and_last_step_and_refuses_no_step_or_rate():
    """nmt.training.adapt: Adaptation's losses are those of the first and the last of the
    steps `adapting` takes (one step: the same), its seconds the call's own; no steps, or a
    rate <= 0, is refused."""
    from nmt.core.config import TrainConfig
    from nmt.training.adapt import adapt_copy, adapting
    from tests.conftest import tiny_model

    model = tiny_model("bahdanau")
    g = torch.Generator().manual_seed(5)
    src = [torch.randint(4, 20, (n,), generator=g).tolist() + [3] for n in (3, 5, 4, 6)]
    tgt = [torch.randint(4, 20, (n,), generator=g).tolist() for n in (4, 2, 5, 3)]
    train = TrainConfig(batch_tokens=12)
    losses = [loss for _, (_, loss) in zip(range(3), adapting(model, src, tgt, 1e-2, train))]
    assert len(set(losses)) == 3
    start = time.perf_counter()
    _, three = adapt_copy(model, src, tgt, 3, 1e-2, train)
    assert 0 < three.seconds <= time.perf_counter() - start  # the call's own seconds
    assert (three.steps, three.loss_first, three.loss_last) == (3, losses[0], losses[-1])
    _, one = adapt_copy(model, src, tgt, 1, 1e-2, train)
    assert one.loss_first == one.loss_last == losses[0]
    for steps, lr in ((0, 1e-2), (3, 0.0)):
        with pytest.raises(NMTError, match="need at least 1 step and lr > 0"):
            adapt_copy(model, src, tgt, steps, lr, train)
    with pytest.raises(NMTError, match="need lr > 0"):
        next(adapting(model, src, tgt, 0.0, train))


def test_data_links_computes_eflomals_links_once_and_then_reads_them(data_root, tmp_path,
                                                                     capsys):
    """`nmt data links` of an eflomal teacher: the first call fits and caches the training
    and validation pairs' links, the second reads the cache (the same counts)."""
    pytest.importorskip("eflomal")
    from pathlib import Path

    from nmt.core.config import config_to_dict
    from tests.test_cli import run_cli
    from tests.test_run_owns_data import _config, _import, _raw

    root = tmp_path / "data"
    _import(root, _raw(data_root, tmp_path / "raw", 0))
    raw = config_to_dict(_config(root, tmp_path / "runs", "l"))
    raw["guided"] = {"weight": 1.0}
    (tmp_path / "l.yaml").write_text(json.dumps(raw))
    first = run_cli(capsys, "data", "links", "--config", tmp_path / "l.yaml")
    lines = first[1].splitlines()
    assert first[0] == 0 and lines[2].startswith("wrote "), first
    cached = Path(lines[2][len("wrote "):]) / "train.links"
    written = cached.stat().st_mtime_ns
    again = run_cli(capsys, "data", "links", "--config", tmp_path / "l.yaml")
    assert again == first and cached.stat().st_mtime_ns == written  # read, not fitted again
    assert lines[0].startswith("train: 1500 pairs, ") and lines[1].startswith("val: 60 pairs, ")
