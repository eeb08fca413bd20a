"""Equations of the RNN encoder-decoders with known numbers: the additive score,
Bahdanau's step on s_{t-1}, the initial states, the fixed context and the maxout
readout (Cho et al. 2014; Bahdanau et al. 2015). Expected values are computed in
numpy (tests/numpy_ref.py) or by hand, never with the code under test."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nmt.core.errors import NMTError
from nmt.models.attention import AdditiveScore, attend
from nmt.models.checks import config_from_dict
from tests.numpy_ref import LENGTHS, a, build, fill, gru, maxout, softmax, source


def close(x, y, tol: float = 1e-5) -> None:
    np.testing.assert_allclose(a(x) if isinstance(x, torch.Tensor) else x, y, atol=tol, rtol=0)


def far(x, y, by: float = 1e-3) -> None:
    """The test is discriminative: the wrong reading differs by more than `by`."""
    assert np.abs(np.asarray(x) - np.asarray(y)).max() > by


def test_additive_score_known_numbers():
    """e_j = v^T tanh(W q + b + U k_j) (Bahdanau eq. 6), hand-set weights."""
    score = AdditiveScore(2, 2, 2)
    fill(score.W.weight, [[1, 0], [0, 2]])
    fill(score.W.bias, [0.5, -0.5])
    fill(score.U.weight, [[1, -1], [0, 1]])
    fill(score.v.weight, [[1, -2]])
    # two queries (B=1, T=2): W q + b = (1.5, -2.5) and (0.5, -0.5)
    q = torch.tensor([[[1.0, -1.0], [0.0, 0.0]]])
    keys = torch.tensor([[[0.0, 0.0], [1.0, 2.0], [-1.0, 0.5]]])  # U k = (0,0), (-1,2), (-1.5,.5)
    e = score(q, score.project_keys(keys))[0]  # (T, S)
    by_hand = [math.tanh(1.5) - 2 * math.tanh(-2.5),
               math.tanh(0.5) - 2 * math.tanh(-0.5),
               math.tanh(0.0) - 2 * math.tanh(-2.0)]
    close(e[0], by_hand)
    close(e[1], [math.tanh(0.5) - 2 * math.tanh(-0.5), math.tanh(-0.5) - 2 * math.tanh(1.5),
                 math.tanh(-1.0) - 2 * math.tanh(0.0)])
    e = e[0]
    _, w = attend(e.view(1, 1, 3), keys, torch.tensor([[[True, True, False]]]))
    close(w[0, 0], list(softmax(np.array(by_hand[:2]))) + [0.0])


def _bahdanau_expected(model, enc, s_prev, prev):
    """One Bahdanau step per sentence in numpy: attention, GRU update, maxout readout."""
    W, bW = a(model.score.W.weight), a(model.score.W.bias)
    U, v = a(model.score.U.weight), a(model.score.v.weight)[0]
    out = []
    for b, n in enumerate(LENGTHS):
        h = a(enc["states"][b, :n])  # (S, 2H)
        weights = softmax(np.array([v @ np.tanh(W @ s_prev[b] + bW + U @ hj) for hj in h]))
        c = weights @ h
        y = a(model.tgt_embed.weight[prev[b]])
        s_t = gru(model.cell.cells[0], np.concatenate([y, c]), s_prev[b])
        pre = a(model.readout.weight) @ np.concatenate([s_t, y, c]) + a(model.readout.bias)
        out.append((weights, s_t, maxout(pre)))
    return out


def test_bahdanau_step_attends_with_the_previous_state():
    """e_tj on s_{t-1}; c_t enters the GRU with y_{t-1}; readout of (s_t, y_{t-1}, c_t)."""
    model = build("bahdanau", emb_size=2, hidden_size=3)
    enc = model.encode(source())
    s_prev = np.array([[0.9, -0.7, 0.3], [-0.5, 0.8, -0.9]])
    prev = torch.tensor([4, 7])
    feat, new, attn = model.step_features(prev, {"h": torch.tensor(s_prev).float()[:, None]},
                                          enc)
    assert attn.shape == (2, 1, 1, 6)
    for b, (weights, s_t, readout) in enumerate(_bahdanau_expected(model, enc, s_prev, prev)):
        n = LENGTHS[b]
        close(attn[b, 0, 0, :n], weights)
        assert (attn[b, 0, 0, n:] == 0).all()
        close(new["h"][b, 0], s_t)
        close(model.read(feat)[b], readout)  # the readout runs in `logits`
    # attending with the new state s_t instead would give other weights
    wrong = _bahdanau_expected(model, enc, a(new["h"][:, 0]), prev)
    far(wrong[0][0], a(attn[0, 0, 0, :5]))


def test_bahdanau_initial_state_reads_the_first_backward_state():
    """s_0 = tanh(W_s h<-_1) (Bahdanau A.2.2): the backward state at the first word."""
    model = build("bahdanau", emb_size=2, hidden_size=3)
    enc = model.encode(source())
    s0 = model.init_state(enc)["h"]  # (B, 1, H)
    for b in range(2):
        back_first = a(enc["states"][b, 0, 3:])
        close(s0[b, 0], np.tanh(a(model.bridge.weight) @ back_first + a(model.bridge.bias)))


def test_bahdanau_unidirectional_encoder_starts_from_its_final_state():
    model = build("bahdanau", emb_size=2, hidden_size=3, bidirectional=False)
    enc = model.encode(source())
    s0 = model.init_state(enc)["h"]
    for b, n in enumerate(LENGTHS):
        last = a(enc["states"][b, n - 1])
        close(s0[b, 0], np.tanh(a(model.bridge.weight) @ last + a(model.bridge.bias)))


def test_fixed_context_vector_and_its_use_at_every_step():
    """Cho et al. (2014): c = tanh(V h_N); s_0 = tanh(W c); s_t = f(s_{t-1}, y_{t-1}, c);
    readout from (s_t, y_{t-1}, c)."""
    model = build("fixed_context", emb_size=2, hidden_size=3, bidirectional=False)
    enc = model.encode(source())
    states = model.encoder(source())[0]
    s0 = model.init_state(enc)
    prev = torch.tensor([5, 6])
    feat, new, attn = model.step_features(prev, s0, enc)
    assert attn is None
    for b, n in enumerate(LENGTHS):
        c = np.tanh(a(model.context.weight) @ a(states[b, n - 1]) + a(model.context.bias))
        close(enc["context"][b], c)
        h0 = np.tanh(a(model.bridge.weight) @ c + a(model.bridge.bias))
        close(s0["h"][b, 0], h0)
        y = a(model.tgt_embed.weight[prev[b]])
        s1 = gru(model.cell.cells[0], np.concatenate([y, c]), h0)
        close(new["h"][b, 0], s1)
        pre = a(model.readout.weight) @ np.concatenate([s1, y, c]) + a(model.readout.bias)
        close(model.read(feat)[b], maxout(pre))


@pytest.mark.parametrize("readout", ["maxout", "tanh"])
def test_readout_maxout_over_pairs_or_tanh(readout):
    """t_j = max(t~_{2j-1}, t~_{2j}) (paper) or tanh(t~) (option), t~ = W_o x + b_o."""
    model = build("bahdanau", emb_size=2, hidden_size=1, bidirectional=False, readout=readout)
    width = model.readout.in_features  # s_t (1) + y (2) + c (1) = 4
    assert width == 4
    if readout == "maxout":
        assert model.readout.out_features == 4  # two candidates per unit, E = 2 units
        fill(model.readout.weight, [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
        fill(model.readout.bias, [0.0, 0.5, 0.0, -3.0])
        x = torch.tensor([[2.0, 1.0, -1.0, 1.0]])  # t~ = (2, 1.5, -1, -2)
        close(model.read(x), [[2.0, -1.0]])
    else:
        assert model.readout.out_features == 2
        fill(model.readout.weight, [[1, 0, 0, 0], [0, 0, 0, 1]])
        fill(model.readout.bias, [0.0, 0.5])
        x = torch.tensor([[2.0, 1.0, -1.0, 1.0]])  # t~ = (2, 1.5)
        close(model.read(x), [[math.tanh(2.0), math.tanh(1.5)]])


def _config(**model):
    return config_from_dict({"model": model})


def _aided(local: dict, **model):
    return config_from_dict({"model": model, "local": local})


def test_departure_options_default_to_the_papers_and_are_validated():
    cfg = config_from_dict({"model": {"family": "bahdanau"}})
    m, aids = cfg.model, cfg.local
    assert (m.readout, m.memory, m.decoder_init, m.gaussian, m.position_prior) == (
        "maxout", "states", "copy", "multiply", "none")
    assert (aids.window_start, aids.window_steps, aids.position_limit,
            aids.position_guide, aids.position_hold) == (0, 0, 0.0, 0.0, 0)
    local_p = {"family": "luong", "attention": "local-p", "window": 10}
    with pytest.raises(NMTError, match="local.window_start.*larger than 'model.window'"):
        _aided({"window_start": 10, "window_steps": 100}, **local_p)
    with pytest.raises(NMTError, match="local.window_steps"):
        _aided({"window_start": 30}, **local_p)
    with pytest.raises(NMTError, match="local.window_start.*has none"):
        _aided({"window_start": 30, "window_steps": 100}, family="luong", attention="global")
    _aided({"window_start": 30, "window_steps": 100}, **local_p)
    _aided({"window_start": 30, "window_steps": 100}, **{**local_p, "attention": "local-m"})
    for key in ("position_limit", "position_guide", "position_hold"):
        with pytest.raises(NMTError, match=f"local.{key}.*attention' is local-m"):
            _aided({key: 3}, family="luong", attention="local-m")
        with pytest.raises(NMTError, match=f"local.{key}.*attention' is none"):
            _aided({key: 3}, family="transformer")
        with pytest.raises(NMTError, match=f"local.{key}"):
            _aided({key: -1}, **local_p)
        _aided({key: 3}, **local_p)
    for attention in ("global", "local-m"):
        with pytest.raises(NMTError, match=f"model.position_prior.*is {attention}"):
            _config(family="luong", attention=attention, position_prior="diagonal")
    _config(family="luong", attention="local-p", position_prior="diagonal")
    with pytest.raises(NMTError, match="'model.window_start' is now 'local.window_start'"):
        _config(family="luong", attention="local-p", window_start=30)
    for gone in ("position_lr", "renormalise_steps"):
        with pytest.raises(NMTError, match=f"'model.{gone}' was removed"):
            _config(family="luong", attention="local-p", **{gone: 1})
    with pytest.raises(NMTError, match="model.readout.*maxout, tanh"):
        _config(family="bahdanau", readout="relu")
    with pytest.raises(NMTError, match="model.gaussian.*multiply, renormalise"):
        _config(family="luong", gaussian="log")
    with pytest.raises(NMTError, match="bidirectional: false.*memory: projected"):
        _config(family="luong", score="dot")  # bidirectional by default
    _config(family="luong", score="dot", bidirectional=False)
    _config(family="luong", score="dot", memory="projected")
    with pytest.raises(NMTError, match="enc_layers.*dec_layers"):
        _config(family="luong", enc_layers=2, dec_layers=1)
    _config(family="luong", enc_layers=2, dec_layers=1, decoder_init="bridge")
    with pytest.raises(ValueError, match="enc_layers == dec_layers"):
        build("luong", enc_layers=2, dec_layers=1)  # built without the config's validation
    assert build("luong", enc_layers=2, dec_layers=1, decoder_init="bridge").bridge is not None


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_a_stacked_decoder_drops_out_between_its_layers_not_after_the_top(rnn_type):
    """StackedCell (nmt/models/rnn.py): in training, dropout falls on the input of layers
    2..L (the connections between layers, not the recurrent ones); the top layer's output is
    its state h as it is, so the readout sees the state the next step starts from."""
    from nmt.models.rnn import StackedCell

    cfg = config_from_dict({"model": {"family": "bahdanau", "rnn_type": rnn_type,
                                      "hidden_size": 8, "dec_layers": 3, "dropout": 0.5}}).model
    stack = StackedCell(5, cfg).train()
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    state = stack.initial(torch.randn(4, 3, 8))
    out, new = stack(x, state)
    assert torch.equal(out, new["h"][:, -1])  # the top: not dropped
    stack.eval()
    quiet, _ = stack(x, state)
    assert not torch.allclose(quiet, out)  # ... while the layers under it were
