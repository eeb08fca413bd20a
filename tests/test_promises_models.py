"""Promises of nmt/models' docstrings that no other test pinned: the step contract's
shapes and mask for every family, `forward`'s `select`, masked_softmax on a row with
nothing allowed, the weight-override stack, the sinusoid table's growth, the ensemble of
a model with itself, and the registry's and constructors' refusals."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from nmt.core.config import LocalConfig, ModelConfig
from nmt.core.errors import NMTError
from nmt.core.tokens import PAD
from nmt.models import build_model
from nmt.models.attention import DotScore, LocalWindow, attend, masked_softmax, override_weights
from nmt.models.base import ROWS
from nmt.models.ensemble import Ensemble
from tests.conftest import FAMILIES, VOCAB, random_batch, tiny_model


def test_step_contract_shapes_and_mask(family):
    """nmt.models.base (module docstring) — `encode` gives `mask` (B, S) bool, True = real
    source position; `step` -> log_probs (B, V) (a distribution), attention (B, L, H, S);
    `decode_features` -> features (B, T, D), attention (B, L, H, T, S)."""
    model = tiny_model(family)
    src, tgt = random_batch()
    enc = model.encode(src)
    assert enc["mask"].dtype == torch.bool and torch.equal(enc["mask"], src != PAD)
    state = model.init_state(enc)
    log_probs, _, attn = model.step(tgt[:, 0], state, enc)
    assert log_probs.shape == (4, VOCAB)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(4))
    features, full = model.decode_features(enc, tgt, need_attn=True)
    assert features.shape[:2] == tgt.shape and features.dim() == 3
    if not model.has_attention:
        assert attn is None and full is None
        return
    L, H = attn.shape[1:3]
    assert attn.shape == (4, L, H, src.size(1))
    assert full.shape == (4, L, H, tgt.size(1), src.size(1))
    if family != "transformer":
        assert (L, H) == (1, 1)  # "1 and 1 for the RNN families"


@pytest.mark.parametrize("name", ["bahdanau", "luong_local_p", "transformer"])
def test_forward_with_select_gives_the_selected_positions_only(name):
    """nmt.models.base:Seq2Seq.forward — logits (B, T, V) by default; with `select`
    (B, T) bool, logits (N, V) of exactly those positions, the same numbers."""
    model = tiny_model(name)
    src, tgt = random_batch()
    logits, _, aux = model(src, tgt)
    assert logits.shape == (*tgt.shape, VOCAB) and aux is None  # the papers' models
    select = tgt != PAD
    select[0, 1] = False
    picked, _, _ = model(src, tgt, select=select)
    assert picked.shape == (int(select.sum()), VOCAB)
    torch.testing.assert_close(picked, logits[select], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["fixed_context", "bahdanau", "luong_local_p"])
def test_rnn_teacher_forcing_embeds_the_target_once_and_reads_out_the_selected_rows(name):
    """nmt.models.base:RNNSeq2Seq — teacher forcing embeds the whole target once, so the
    step loop neither looks up nor drops out; nmt.models.rnn:_RNNModel.logits — the
    readout (Cho, Bahdanau) runs after the loop, over the selected positions only (and the
    zero rows that round their count up to a multiple of ROWS)."""
    model = tiny_model(name).train()
    src, tgt = random_batch()
    calls = {"embed": [], "readout": []}
    model.tgt_embed.register_forward_hook(
        lambda m, args, out: calls["embed"].append(tuple(args[0].shape)))
    if model.readout is not None:
        model.readout.register_forward_hook(
            lambda m, args, out: calls["readout"].append(args[0].shape[0]))
    select = tgt != PAD
    select[0, 1] = False
    model(src, tgt, select=select)
    # the encoder shares the tied joint embedding: its one call is the source's
    assert [shape for shape in calls["embed"] if shape != tuple(src.shape)] == [tuple(tgt.shape)]
    if model.readout is not None:
        n = int(select.sum())
        assert calls["readout"] == [-(-n // ROWS) * ROWS] and n % ROWS  # real rows + zero rows


def test_forward_sums_the_auxiliary_loss_over_the_chosen_positions():
    """nmt.models.base:Seq2Seq.forward — the auxiliary loss is "summed over the real target
    positions" (tgt_in != PAD), or over `select` when given."""
    torch.manual_seed(0)
    cfg = ModelConfig(emb_size=32, hidden_size=32, dropout=0.0, family="luong",
                      score="general", attention="local-p", window=2)
    model = build_model(cfg, VOCAB, VOCAB, joint=True, local=LocalConfig(position_limit=0.1))
    with torch.no_grad():
        model.local.v_p.weight.fill_(3.0)  # logits far past the limit: every term > 0
    model.train()
    src, tgt = random_batch()
    enc = model.encode(src)
    _, _, terms = model.decode_with_aux(enc, tgt)  # (B, T)
    _, _, aux = model(src, tgt)
    real = tgt != PAD
    torch.testing.assert_close(aux, terms[real].sum())
    select = real.clone()
    select[:, 0] = False
    torch.testing.assert_close(model(src, tgt, select=select)[2], terms[select].sum())


def test_masked_softmax_row_with_nothing_allowed_is_zeros_not_nan():
    """nmt.models.attention:masked_softmax — "A row with no allowed position gives all
    zeros rather than NaN"; and attend's context of such a row is zero."""
    scores = torch.randn(2, 1, 4)
    mask = torch.tensor([[True, True, False, False], [False] * 4])[:, None, :]
    w = masked_softmax(scores, mask)
    assert torch.isfinite(w).all() and (w[1] == 0).all()
    torch.testing.assert_close(w[0].sum(), torch.tensor(1.0))
    context, _ = attend(scores, torch.randn(2, 4, 3), mask)
    assert torch.isfinite(context).all() and (context[1] == 0).all()


def test_override_weights_stack_innermost_wins_and_is_popped_on_error():
    """nmt.models.attention:override_weights — a stack (the innermost block's function
    applies), `mask` has the weights' shape, and the override is gone after its block even
    when the block raises; local-p's multiplied weights are overridden too."""
    scores, values = torch.randn(1, 2, 3), torch.randn(1, 3, 4)
    mask = torch.ones(1, 1, 3, dtype=torch.bool)
    seen = []

    def zero(w, m):
        seen.append(m.shape)
        return torch.zeros_like(w)

    with override_weights(lambda w, m: w * 0 + 1):
        with override_weights(zero):
            assert (attend(scores, values, mask)[1] == 0).all()
        assert (attend(scores, values, mask)[1] == 1).all()
    assert seen == [torch.Size([1, 2, 3])]
    with pytest.raises(RuntimeError), override_weights(zero):
        raise RuntimeError("inside the block")
    plain = attend(scores, values, mask)[1]
    torch.testing.assert_close(plain.sum(-1), torch.ones(1, 2))
    local = LocalWindow("local-p", 2, 8)
    query, step = torch.randn(1, 2, 8), torch.zeros(1, 2, dtype=torch.long)
    with override_weights(zero):
        _, weights, _ = local.attend(torch.randn(1, 2, 5), torch.randn(1, 5, 3), query, step,
                                     torch.ones(1, 5, dtype=torch.bool))
    assert (weights == 0).all()


def test_the_sinusoid_table_doubles_and_keeps_its_rows():
    """nmt.models.transformer:Transformer.initial_positions / _grow_positions — "the
    sinusoid table doubles on demand": past 1024 positions it becomes 2048 rows (or the
    length asked, if larger), the first rows unchanged."""
    model = tiny_model("transformer")
    first = model.pe.clone()
    assert first.size(0) == 1024
    model._grow_positions(1025)
    assert model.pe.size(0) == 2048
    torch.testing.assert_close(model.pe[:1024], first)
    model._grow_positions(5000)
    assert model.pe.size(0) == 5000
    model._grow_positions(10)
    assert model.pe.size(0) == 5000  # never shrinks


@pytest.mark.parametrize("name", ["bahdanau", "transformer"])
def test_an_ensemble_of_a_model_with_itself_is_the_model(name):
    """nmt.models.ensemble:Ensemble — "an ensemble of a run with itself is the run": step's
    renormalised mean and forward's log-probabilities equal the member's; forward's
    attention is the members' mean over layers and heads (B, 1, 1, T, S)."""
    model = tiny_model(name)
    both = Ensemble([model, model]).eval()
    src, tgt = random_batch()
    enc, enc2 = model.encode(src), both.encode(src)
    lp, _, _ = model.step(tgt[:, 0], model.init_state(enc), enc)
    lp2, _, attn = both.step(tgt[:, 0], both.init_state(enc2), enc2)
    torch.testing.assert_close(lp2, lp, atol=1e-5, rtol=1e-5)
    assert attn is None
    logits, member_attn, _ = model(src, tgt, need_attn=True)
    log_probs, mean_attn, aux = both(src, tgt, need_attn=True)
    torch.testing.assert_close(log_probs, F.log_softmax(logits, -1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mean_attn, member_attn.mean((1, 2), keepdim=True))
    assert aux is None
    with pytest.raises(NMTError, match="saliency"):
        both.embed_source(src)


def test_an_ensemble_has_attention_only_when_every_member_has():
    """nmt.models.ensemble:Ensemble — attention (and has_attention) only when all have it."""
    mixed = Ensemble([tiny_model("bahdanau"), tiny_model("fixed_context")])
    assert mixed.has_attention is False
    src, tgt = random_batch()
    assert mixed(src, tgt, need_attn=True)[1] is None


def test_registry_and_constructors_refuse_what_cannot_work():
    """nmt.models:build_model — unknown family and luong's tied embeddings with
    emb_size != hidden_size are one-line NMTErrors; DotScore needs equal sizes; Luong's
    decoder_init copy needs enc_layers == dec_layers."""
    with pytest.raises(NMTError, match="unknown model.family 'rnn'"):
        build_model(_bad_family(), VOCAB, VOCAB, joint=True)
    tied = ModelConfig(family="luong", emb_size=16, hidden_size=32, tie_embeddings=True)
    with pytest.raises(NMTError, match="emb_size == model.hidden_size"):
        build_model(tied, VOCAB, VOCAB, joint=True)
    with pytest.raises(ValueError, match="equal sizes"):
        DotScore(8, 16)
    layers = ModelConfig(family="luong", emb_size=16, hidden_size=16, enc_layers=2,
                         dec_layers=1, decoder_init="copy")
    with pytest.raises(ValueError, match="enc_layers == dec_layers"):
        build_model(layers, VOCAB, VOCAB, joint=True)


def _bad_family():
    """A config whose family is not in MODELS (bypassing the config's own check)."""
    cfg = ModelConfig()
    object.__setattr__(cfg, "family", "rnn")
    return cfg


def test_every_family_builds_with_dropout_and_no_warning(family):
    """nmt.models.rnn:Encoder — torch's RNN applies its `dropout` only between layers and
    warns when given one with a single layer; the encoder passes it only to a multi-layer
    RNN, so building any family (one layer or more) with dropout warns about nothing."""
    for layers in ({}, {"enc_layers": 1, "dec_layers": 1}):
        cfg = ModelConfig(emb_size=32, hidden_size=32, **{**FAMILIES[family], **layers},
                          dropout=0.3)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            build_model(cfg, VOCAB, VOCAB, joint=True)


def test_a_runs_checkpoint_best_falls_back_to_last_and_only_averaged_must_exist(tmp_path):
    """nmt.models.runs:checkpoint_path — "best" falls back to "last" (a run that never
    validated); "averaged" must have been written by `nmt average`; "last" is its path."""
    from nmt.models.runs import checkpoint_path

    (tmp_path / "checkpoints").mkdir()
    assert checkpoint_path(tmp_path, "last") == tmp_path / "checkpoints" / "last.pt"
    assert checkpoint_path(tmp_path, "best") == tmp_path / "checkpoints" / "last.pt"
    (tmp_path / "checkpoints" / "best.pt").write_bytes(b"")
    assert checkpoint_path(tmp_path, "best") == tmp_path / "checkpoints" / "best.pt"
    with pytest.raises(NMTError, match=r"averaged.pt: no averaged checkpoint.*nmt average"):
        checkpoint_path(tmp_path, "averaged")
