"""Luong et al. (2015) with known numbers: dot/general/concat scores on the current
state h_t (eq. 8), the attentional vector (eq. 5) and input feeding, local-m and
local-p positions (eq. 9), the window [p_t - D, p_t + D] and the Gaussian with
sigma = D / 2 (eq. 10), the encoder states attended over, and the initial state."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence

from nmt.core.config import LocalConfig
from nmt.models.attention import LocalWindow
from tests.numpy_ref import LENGTHS, a, build, fill, gru, sigmoid, softmax, source
from tests.test_equations_rnn import close, far

S_PREV = np.array([[0.9, -0.7, 0.3], [-0.5, 0.8, -0.9]])
FEED = np.array([[0.2, 0.4, -0.6], [-0.3, 0.1, 0.5]])


def _score(model, kind: str, h_t: np.ndarray, hs: np.ndarray) -> np.ndarray:
    """Luong eq. 8 for one query against the source states hs (S, D)."""
    if kind == "dot":
        return hs @ h_t
    if kind == "general":
        return hs @ a(model.score.W_a.weight).T @ h_t  # h_t^T W_a h_s
    W, bW = a(model.score.W.weight), a(model.score.W.bias)
    U, v = a(model.score.U.weight), a(model.score.v.weight)[0]
    return np.array([v @ np.tanh(W @ h_t + bW + U @ h) for h in hs])


def _step(model, prev, h_prev=S_PREV, feed=FEED):
    enc = model.encode(source())
    state = model.init_state(enc)
    state["h"] = torch.tensor(h_prev).float()[:, None]
    state["feed"] = torch.tensor(feed).float()
    return enc, model.step_features(torch.tensor(prev), state, enc)


@pytest.mark.parametrize("kind", ["dot", "general", "concat"])
def test_global_scores_use_the_current_state_and_feed_the_attentional_vector(kind):
    """h_t = f(h_{t-1}, [y_{t-1}; h~_{t-1}]); a_t = softmax(score(h_t, h_s));
    h~_t = tanh(W_c [c_t; h_t]) is the output and the next step's feed."""
    model = build("luong", score=kind, bidirectional=False)
    with torch.no_grad():  # sharper scores, so that h_t and h_{t-1} give different weights
        for param in model.score.parameters():
            param.mul_(4)
    prev = [4, 7]
    enc, (feat, new, attn) = _step(model, prev)
    for b, n in enumerate(LENGTHS):
        x = np.concatenate([a(model.tgt_embed.weight[prev[b]]), FEED[b]])
        h_t = gru(model.cell.cells[0], x, S_PREV[b])
        hs = a(enc["states"][b, :n])
        weights = softmax(_score(model, kind, h_t, hs))
        h_tilde = np.tanh(a(model.W_c.weight) @ np.concatenate([weights @ hs, h_t]))
        close(new["h"][b, 0], h_t)
        close(attn[b, 0, 0, :n], weights)
        assert (attn[b, 0, 0, n:] == 0).all()
        close(feat[b], h_tilde)
        close(new["feed"][b], h_tilde)
        # the previous state h_{t-1} would have given other weights
        far(softmax(_score(model, kind, S_PREV[b], hs)), weights)


def test_input_feeding_passes_the_attentional_vector_to_the_next_step():
    model = build("luong", score="general", bidirectional=False)
    enc, (feat, new, _) = _step(model, [4, 7])
    _, new2, _ = model.step_features(torch.tensor([5, 6]), new, enc)
    for b in range(2):
        x = np.concatenate([a(model.tgt_embed.weight[[5, 6][b]]), a(feat[b])])
        close(new2["h"][b, 0], gru(model.cell.cells[0], x, a(new["h"][b, 0])))
    plain = build("luong", score="general", bidirectional=False, input_feeding=False)
    assert plain.cell.cells[0].input_size == 3  # y_{t-1} only
    enc, (_, new, _) = _step(plain, [4, 7])
    close(new["h"][0, 0], gru(plain.cell.cells[0], a(plain.tgt_embed.weight[4]), S_PREV[0]))


@pytest.mark.parametrize("memory", ["states", "projected"])
def test_attention_reads_the_encoder_states_as_they_are_or_projected(memory):
    """The paper scores h_t against h_s itself; `projected` maps a 2H state to H first."""
    model = build("luong", score="general", memory=memory)  # bidirectional: h_s is 2H
    states = model.encoder(source())[0]  # (B, S, 2H)
    enc = model.encode(source())
    if memory == "states":
        assert enc["states"].shape[-1] == 6 and model.W_c.in_features == 6 + 3
        close(enc["states"], a(states))
        assert model.score.W_a.weight.shape == (3, 6)
    else:
        close(enc["states"], a(states) @ a(model.memory.weight).T)
        assert model.W_c.in_features == 3 + 3
    close(enc["keys"], a(enc["states"]) @ a(model.score.W_a.weight).T)


def _lstm_finals(model, src):
    """Final (h, c) of every layer and direction, from the encoder's LSTM run directly."""
    emb = model.encoder.embed(src)
    packed = pack_padded_sequence(emb, torch.tensor(LENGTHS), batch_first=True,
                                  enforce_sorted=False)
    _, (h_n, c_n) = model.encoder.rnn(packed)
    return a(h_n), a(c_n)  # (layers * dirs, B, H)


def test_decoder_starts_from_the_encoders_final_states():
    """Paper: decoder layer l starts at encoder layer l's final (h, c); a bidirectional
    encoder gives its forward direction (indices 0, 2: torch orders layer, direction)."""
    model = build("luong", rnn_type="lstm", enc_layers=2, dec_layers=2)
    assert model.bridge is None
    state = model.init_state(model.encode(source()))
    h_n, c_n = _lstm_finals(model, source())
    close(state["h"].transpose(0, 1), h_n[[0, 2]])
    close(state["c"].transpose(0, 1), c_n[[0, 2]])
    states = a(model.encoder(source())[0])
    for b, n in enumerate(LENGTHS):  # top layer forward final = its output at the last word
        close(state["h"][b, 1], states[b, n - 1, :3])


def test_bridge_option_starts_every_layer_from_tanh_of_the_final_states():
    model = build("luong", rnn_type="lstm", enc_layers=2, dec_layers=2, decoder_init="bridge")
    state = model.init_state(model.encode(source()))
    states = a(model.encoder(source())[0])
    for b, n in enumerate(LENGTHS):
        final = np.concatenate([states[b, n - 1, :3], states[b, 0, 3:]])  # [h->_N; h<-_1]
        h0 = np.tanh(a(model.bridge.weight) @ final + a(model.bridge.bias)).reshape(2, 3)
        close(state["h"][b], h0)
    assert (state["c"] == 0).all()


# ------------------------------------------------------------------------- local attention


def _window(kind: str, D: int, gaussian: str = "multiply") -> LocalWindow:
    return LocalWindow(kind, D, 2, gaussian)


def _mask(*lengths: int, width: int = 9) -> torch.Tensor:
    return torch.arange(width)[None] < torch.tensor(lengths)[:, None]


def test_local_m_centre_is_t_clamped_to_the_last_source_position():
    local = _window("local-m", 2)
    centre = local.centre(torch.zeros(2, 3, 2), torch.tensor([[0, 3, 9], [1, 2, 7]]),
                          _mask(6, 4))
    close(centre, [[0, 3, 5], [1, 2, 3]])
    inside, bias = local(torch.zeros(1, 2, 2), torch.tensor([[3, 0]]), _mask(6))
    assert inside[0, 0].nonzero().flatten().tolist() == [1, 2, 3, 4, 5]  # [t - D, t + D]
    assert inside[0, 1].nonzero().flatten().tolist() == [0, 1, 2]
    assert (bias == 0).all()


def test_local_p_centre_uses_the_true_source_length():
    """p_t = S sigmoid(v_p^T tanh(W_p h_t)), S = 6 and 4 (not the padded width 9)."""
    local = _window("local-p", 2)
    fill(local.W_p.weight, [[1, 0], [0, 1]])
    fill(local.v_p.weight, [[2, -1]])
    q = torch.tensor([[[0.5, -1.0]], [[0.0, 0.0]]])
    centre = local.centre(q, torch.zeros(2, 1), _mask(6, 4))
    by_hand = 6 * sigmoid(2 * math.tanh(0.5) - math.tanh(-1.0))
    close(centre, [[by_hand], [4 * 0.5]])


def test_diagonal_prior_starts_p_t_on_local_m_line_and_keeps_the_learned_shift():
    """model.position_prior diagonal: p_t = S sigmoid(z_t + logit((min(t, S-1) + 1/2) / S)).
    With z_t = 0 that is local-m's t + 1/2 (clamped at the last position); a learned z_t
    moves it the way eq. 9 would; none keeps eq. 9's S / 2."""
    diagonal = LocalWindow("local-p", 2, 2, prior="diagonal")
    fill(diagonal.W_p.weight, [[0, 0], [0, 0]])
    steps = torch.tensor([[0.0, 2.0, 5.0, 9.0]]).expand(2, 4)
    centre = diagonal.centre(torch.zeros(2, 4, 2), steps, _mask(6, 4))
    close(centre, [[0.5, 2.5, 5.5, 5.5], [0.5, 2.5, 3.5, 3.5]])
    fill(diagonal.W_p.weight, [[1, 0], [0, 1]])
    fill(diagonal.v_p.weight, [[2, -1]])
    q = torch.tensor([[[0.5, -1.0]]])
    z = 2 * math.tanh(0.5) - math.tanh(-1.0)
    shifted = diagonal.centre(q, torch.tensor([[2.0]]), _mask(6))
    close(shifted, [[6 * sigmoid(z + math.log(2.5 / 3.5))]])
    paper = LocalWindow("local-p", 2, 2)
    fill(paper.W_p.weight, [[0, 0], [0, 0]])
    close(paper.centre(torch.zeros(1, 4, 2), steps[:1], _mask(6)), [[3.0] * 4])


def test_position_hold_detaches_the_predictor_for_its_steps_in_training_only():
    """local.position_hold N: at trainer steps 1..N no gradient reaches W_p and v_p, and p_t is
    the same as without the hold; from step N + 1, and in eval mode, the predictor learns."""
    local = LocalWindow("local-p", 2, 2, aids=LocalConfig(position_hold=3), prior="diagonal")
    query = torch.tensor([[[0.5, -1.0], [0.2, 0.3]]], requires_grad=True)
    steps = torch.tensor([[0.0, 1.0]])

    def grads(step: int, training: bool = True) -> tuple[float, torch.Tensor]:
        local.train(training)
        local.at_step(step)
        local.zero_grad()
        query.grad = None
        centre = local.centre(query, steps, _mask(6))
        centre.sum().backward(retain_graph=True) if centre.requires_grad else None
        weight = local.v_p.weight.grad
        return (0.0 if weight is None else float(weight.abs().sum())), centre.detach()

    held, held_centre = grads(3)
    assert held == 0.0 and query.grad is None  # nor does any reach h_t through z
    free, free_centre = grads(4)
    assert free > 0 and query.grad is not None
    torch.testing.assert_close(held_centre, free_centre)
    assert grads(2, training=False)[0] > 0  # eval mode: the model as it is
    assert LocalWindow("local-p", 2, 2).holding is False  # no trainer: never held


def _uniform_local_p(D: int, gaussian: str = "multiply") -> LocalWindow:
    """local-p with W_p = 0, so p_t = S / 2."""
    local = _window("local-p", D, gaussian)
    fill(local.W_p.weight, [[0, 0], [0, 0]])
    return local


@pytest.mark.parametrize("gaussian", ["multiply", "renormalise"])
def test_local_p_window_and_gaussian_at_known_distances(gaussian):
    """a_t(s) = align(h_t, h_s) exp(-(s - p_t)^2 / (2 sigma^2)), sigma = D / 2, inside
    [p_t - D, p_t + D]. Equal scores make align uniform over the window (1 / 5 here)."""
    local = _uniform_local_p(2, gaussian)
    values = torch.eye(9)[None].expand(2, 9, 9)  # context = the weights themselves
    context, w, penalty = local.attend(torch.zeros(2, 1, 9), values, torch.zeros(2, 1, 2),
                              torch.zeros(2, 1), _mask(6, 5))
    g1, g2 = math.exp(-1 / 2), math.exp(-4 / 2)  # distance 1 and 2, sigma = 1
    row0 = np.array([0, g2, g1, 1, g1, g2, 0, 0, 0])  # p_t = 3: window 1..5
    row1 = np.array([0] + [math.exp(-(s - 2.5) ** 2 / 2) for s in (1, 2, 3, 4)] + [0] * 4)
    if gaussian == "multiply":  # the paper: not renormalised
        expected = [row0 / 5, row1 / 4]  # p_t = 2.5: window 1..4 (0.5 <= s <= 4.5)
    else:
        expected = [row0 / row0.sum(), row1 / row1.sum()]
    close(w[:, 0], expected)
    close(context[:, 0], expected)
    close(w[0, 0, 2] / w[0, 0, 3], g1)  # value at distance 1 relative to the centre


def test_local_p_model_step_follows_eq_9_and_10():
    """Through the model: p_t from h_t (not h_{t-1}), window, Gaussian, general score."""
    model = build("luong", score="general", attention="local-p", window=1,
                  bidirectional=False)
    fill(model.local.W_p.weight, np.eye(3))
    fill(model.local.v_p.weight, [[0, -3, 3]])
    prev = [4, 7]
    enc, (_, new, attn) = _step(model, prev)
    W_p, v_p = a(model.local.W_p.weight), a(model.local.v_p.weight)[0]
    for b, n in enumerate(LENGTHS):
        h_t = a(new["h"][b, 0])
        p_t = n * sigmoid(v_p @ np.tanh(W_p @ h_t))
        assert p_t != pytest.approx(n * sigmoid(v_p @ np.tanh(W_p @ S_PREV[b])), abs=0.1)
        hs = a(enc["states"][b, :n])
        s = np.arange(n)
        inside = np.abs(s - p_t) <= 1
        align = np.zeros(n)
        align[inside] = softmax(_score(model, "general", h_t, hs)[inside])
        expected = align * np.exp(-(s - p_t) ** 2 / (2 * 0.5 ** 2))
        close(attn[b, 0, 0, :n], expected)
        assert (attn[b, 0, 0, n:] == 0).all()


def test_local_m_model_window_moves_one_position_per_step():
    model = build("luong", score="general", attention="local-m", window=1, bidirectional=False)
    enc = model.encode(source())
    state = model.init_state(enc)
    support = []
    for t in range(7):
        _, state, attn = model.step_features(torch.tensor([4, 4]), state, enc)
        support.append(attn[0, 0, 0].nonzero().flatten().tolist())
    # p_t = t, clamped to S - 1 = 4 (true length 5)
    assert support == [[0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4], [3, 4], [3, 4]]


def _aided(kind: str = "local-p", D: int = 2, **aids) -> LocalWindow:
    return LocalWindow(kind, D, 2, "multiply", LocalConfig(**aids))


def test_window_curriculum_shrinks_to_D_and_never_reaches_eval():
    """local.window_start: the training half-width goes linearly from `start` to D over
    `steps` steps, sigma following it; eval mode (and a model no trainer steps) uses D."""
    local = _aided(window_start=6, window_steps=4)
    fill(local.W_p.weight, [[0, 0], [0, 0]])  # p_t = S / 2 = 4.5 for S = 9
    args = (torch.zeros(1, 1, 2), torch.zeros(1, 1), _mask(9))
    assert local.half_width == 2.0  # before any step: D
    widths = []
    for step in range(1, 7):
        local.at_step(step)
        widths.append(local.half_width)
    assert widths == [5.0, 4.0, 3.0, 2.0, 2.0, 2.0]
    local.at_step(1)  # half-width 5: every position of 0..8 is within 5 of 4.5
    inside, bias = local(*args)
    assert inside.all()
    close(bias[0, 0, 0], -(4.5 ** 2) / (2 * 2.5 ** 2))  # sigma = 5 / 2
    local.eval()  # evaluation: D = 2, sigma = 1
    inside, bias = local(*args)
    assert inside[0, 0].nonzero().flatten().tolist() == [3, 4, 5, 6]
    close(bias[0, 0, 3], -(1.5 ** 2) / 2)


def test_window_curriculum_off_by_default_keeps_D_while_training():
    local = _uniform_local_p(2)
    local.at_step(1)
    inside, _ = local(torch.zeros(1, 1, 2), torch.zeros(1, 1), _mask(9))
    assert local.half_width == 2.0 and inside[0, 0].nonzero().flatten().tolist() == [3, 4, 5, 6]


def test_position_limit_penalises_only_logits_past_the_limit():
    """local.position_limit: in training, attend returns (|z| - limit)^2 for each p_t
    logit z = v_p^T tanh(W_p h_t) beyond +-limit, one term per target position (the loss
    sums them over the real ones); evaluation returns none, nor does a window without."""
    local = _aided(position_limit=1.0)
    fill(local.W_p.weight, [[1, 0], [0, 1]])
    fill(local.v_p.weight, [[4, 0]])  # z = 4 tanh(h_0)
    h0 = [3.0, 0.1, -2.0]  # z = 3.980, 0.399, -3.856: past the limit, inside, past
    query = torch.tensor([[[x, 0.0]] for x in h0]).transpose(0, 1)  # (B=1, T=3, 2)
    args = (torch.zeros(1, 3, 9), torch.randn(1, 9, 3), query, torch.zeros(1, 3), _mask(9))
    z = 4 * np.tanh(np.array(h0))
    _, _, penalty = local.attend(*args)
    close(penalty, [[(abs(z[0]) - 1) ** 2, 0.0, (abs(z[2]) - 1) ** 2]])
    local.eval()
    assert local.attend(*args)[2] is None
    assert _aided().attend(*args)[2] is None


def test_position_guide_pulls_p_t_toward_the_whole_source_scores_only_in_training():
    """local.position_guide: in training, guide * sum_s q_s (s - p_t)^2 / (2 sigma^2) per
    target position, q the softmax of the detached scores over the whole source
    (padding excluded, the window ignored); its gradient moves p_t toward q's mean."""
    local = _aided(position_guide=0.5)
    fill(local.W_p.weight, [[1, 0], [0, 1]])
    fill(local.v_p.weight, [[1, 0]])  # z = tanh(h_0): p_t = 6 sigmoid(z)
    query = torch.tensor([[[0.0, 0.0], [1.0, 0.0]]], requires_grad=True)  # p_t = 3, 4.39
    scores = torch.tensor([[[4.0, 0, 0, 0, 0, 0, 9, 9, 9],  # position 0: outside [1, 5]
                            [0.0, 0, 0, 0, 0, 2, 9, 9, 9]]], requires_grad=True)
    values = torch.randn(1, 9, 3)
    args = (scores, values, query, torch.zeros(1, 2), _mask(6))
    p = 6 * sigmoid(np.array([0.0, math.tanh(1.0)]))
    q = [softmax(np.array(row[:6])) for row in ([4.0, 0, 0, 0, 0, 0], [0.0] * 5 + [2.0])]
    terms = [0.5 * sum(q[t][s] * (s - p[t]) ** 2 / 2 for s in range(6)) for t in range(2)]
    _, _, penalty = local.attend(*args)
    close(penalty, [terms])
    penalty.sum().backward()
    assert scores.grad is None  # the scores are the target, not trained by it
    mean = [sum(s * q[t][s] for s in range(6)) for t in range(2)]
    assert mean[1] < p[1]  # q's mean lies before p_t, so descent lowers z: grad > 0
    assert query.grad[0, 1, 0] > 0
    wide = _aided(window_start=6, window_steps=4, position_guide=0.5)
    wide.load_state_dict(local.state_dict())
    wide.at_step(1)  # a curriculum's wider window (5): the guide uses its sigma, 2.5
    close(wide.attend(*args)[2], [[t / 2.5 ** 2 for t in terms]])
    local.eval()  # evaluation returns nothing; nor does a window without a guide
    assert local.attend(*args)[2] is None
    assert _aided().attend(*args)[2] is None
    assert _aided("local-m", position_guide=0.5).attend(*args)[2] is None
