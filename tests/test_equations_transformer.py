"""Vaswani et al. (2017) with known numbers: scaled dot-product attention in both code
paths (eq. 1), multi-head splitting, sinusoidal positions (section 3.5), the scaled
embedding and the post-norm residual."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nmt.models.attention import scaled_dot_product
from nmt.models.transformer import MultiHeadAttention, Sublayer, sinusoids
from tests.numpy_ref import a, build, softmax
from tests.test_equations_rnn import close, far

Q = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, -1.0]])  # (T=2, d_k=4)
K = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0], [2.0, 0.0, 1.0, 0.0]])  # (S=3, 4)
VAL = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (S, 2)
MASK = np.array([[True, True, True], [True, False, True]])  # query 2 may not see key 2


def _expected(scale: float) -> tuple[np.ndarray, np.ndarray]:
    scores = Q @ K.T / scale
    weights = np.zeros((2, 3))
    for t in range(2):
        weights[t, MASK[t]] = softmax(scores[t, MASK[t]])
    return weights @ VAL, weights


@pytest.mark.parametrize("need_weights", [True, False])
def test_scaled_dot_product_both_paths_against_a_hand_computation(need_weights):
    """softmax(Q K^T / sqrt(d_k)) V, d_k = 4; the fused path (no weights) and the explicit
    one agree with numpy, and dropping the 1/sqrt(d_k) would not."""
    q, k, v = (torch.tensor(x, dtype=torch.float32)[None, None] for x in (Q, K, VAL))
    mask = torch.tensor(MASK)[None, None]
    out, weights = scaled_dot_product(q, k, v, mask, need_weights)
    right, right_w = _expected(math.sqrt(4))
    # by hand, query 1: scores (1, 1, 3) / 2 -> softmax(0.5, 0.5, 1.5)
    e = [math.exp(0.5), math.exp(0.5), math.exp(1.5)]
    close(right_w[0], [x / sum(e) for x in e])
    close(out[0, 0], right)
    if need_weights:
        close(weights[0, 0], right_w)
    else:
        assert weights is None
    far(_expected(1.0)[0], right, by=0.05)  # the test would see a missing scale


def test_multi_head_attention_splits_the_model_dimension_into_heads():
    """head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V) with d_k = D / h = 2 per head,
    concatenated and projected by W^O (identity projections here)."""
    mha = MultiHeadAttention(4, 2).eval()
    with torch.no_grad():
        for lin in (mha.q, mha.o):
            lin.weight.copy_(torch.eye(4))
            lin.bias.zero_()
        mha.kv.weight.copy_(torch.cat([torch.eye(4), torch.eye(4)]))
        mha.kv.bias.zero_()
    x = torch.tensor(Q, dtype=torch.float32)[None]  # queries (1, 2, 4)
    memory = torch.tensor(K, dtype=torch.float32)[None]  # keys = values (1, 3, 4)
    k, v = mha.keys_values(memory)
    mask = torch.ones(1, 1, 1, 3, dtype=torch.bool)
    out, weights = mha(x, k, v, mask, need_weights=True)
    expected = np.zeros((2, 4))
    for head in range(2):
        cols = slice(2 * head, 2 * head + 2)
        for t in range(2):
            w = softmax(Q[t, cols] @ K[:, cols].T / math.sqrt(2))
            close(weights[0, head, t], w)
            expected[t, cols] = w @ K[:, cols]
    close(out[0], expected)


@pytest.mark.parametrize(("pos", "col", "value"), [
    (1, 0, math.sin(1.0)), (1, 1, math.cos(1.0)),  # i = 0: 10000^0 = 1
    (10, 2, math.sin(1.0)), (10, 3, math.cos(1.0)),  # i = 1: 10000^(2/8) = 10
    (100, 4, math.sin(1.0)), (100, 5, math.cos(1.0)),  # i = 2: 10000^(4/8) = 100
    (3, 6, math.sin(3 / 1000)), (0, 7, 1.0), (0, 6, 0.0),
])
def test_sinusoidal_positions_at_known_points(pos, col, value):
    """PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(pos / 10000^(2i/D)), D = 8."""
    assert float(sinusoids(128, 8)[pos, col]) == pytest.approx(value, abs=1e-5)


def test_embedding_is_scaled_by_sqrt_d_and_adds_the_position_of_the_step():
    model = build("transformer", emb_size=8, heads=2, ff_size=16, enc_layers=1, dec_layers=1)
    ids = torch.tensor([[5, 6]])
    x = model._embed(model.tgt_embed, ids, 3)  # positions 3 and 4
    emb = a(model.tgt_embed.weight[ids[0]])
    pe = np.array([[f(p / 10000 ** (2 * (c // 2) / 8)) for c, f in
                    zip(range(8), [math.sin, math.cos] * 4)] for p in (3, 4)])
    close(x[0], emb * math.sqrt(8) + pe)


def test_post_norm_residual():
    """LayerNorm(x + Sublayer(x)) with the default gain 1 and bias 0."""
    sub = Sublayer(4, 0.0)
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    y = torch.tensor([[1.0, 0.0, -1.0, 2.0]])
    z = np.array([2.0, 2.0, 2.0, 6.0])  # x + y
    close(sub(x, y)[0], (z - z.mean()) / np.sqrt(z.var() + 1e-5))


def _distinct_norms(model) -> None:
    """Give every LayerNorm its own gain and bias, so swapping two of them shows."""
    torch.manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


def test_layers_chain_their_sublayers_each_with_its_own_norm():
    """Encoder: x -> LN_1(x + SelfAttn(x)) -> LN_2(. + FFN(.)); decoder: masked self-attention,
    cross-attention, FFN, each followed by its own residual LayerNorm (3.1)."""
    model = build("transformer", emb_size=8, heads=2, ff_size=16, enc_layers=1, dec_layers=1)
    _distinct_norms(model)

    def ln(sub, z):
        return torch.nn.functional.layer_norm(z, (8,), sub.norm.weight, sub.norm.bias)

    x, memory = torch.randn(1, 3, 8), torch.randn(1, 4, 8)
    enc = model.enc_layers[0]
    full = torch.ones(1, 1, 1, 3, dtype=torch.bool)
    k, v = enc.attn.keys_values(x)
    y = ln(enc.sub1, x + enc.attn(x, k, v, full, True)[0])
    close(enc(x, full), a(ln(enc.sub2, y + enc.ff(y))))
    dec = model.dec_layers[0]
    causal = torch.ones(3, 3, dtype=torch.bool).tril()[None, None]
    cross = torch.ones(1, 1, 1, 4, dtype=torch.bool)
    k, v = dec.self_attn.keys_values(x)
    ck, cv = dec.cross.keys_values(memory)
    y1 = ln(dec.subs[0], x + dec.self_attn(x, k, v, causal, True)[0])
    y2 = ln(dec.subs[1], y1 + dec.cross(y1, ck, cv, cross, True)[0])
    out, _ = dec(x, k, v, causal, ck, cv, cross, True)
    close(out, a(ln(dec.subs[2], y2 + dec.ff(y2))))


def test_dropout_only_on_the_embedding_sums_and_the_sublayer_outputs(monkeypatch):
    """Section 5.4: dropout on each sub-layer's output before the residual and norm, and on
    the sums of embeddings and positions; none on the attention weights (the fused kernel
    is called without dropout) nor inside the feed-forward network. One training forward
    pass drops out 2 + 2 * encoder layers + 3 * decoder layers tensors, each of them the
    model's size, and the feed-forward network's modules keep their checkpoint names."""
    import nmt.models.attention as attention

    model = build("transformer", emb_size=8, heads=2, ff_size=16, enc_layers=2,
                  dec_layers=3, dropout=0.3).train()
    dropped = []
    real_dropout = torch.nn.functional.dropout

    def counting_dropout(x, p=0.5, training=True, inplace=False):
        dropped.append((tuple(x.shape), p))
        return real_dropout(x, p, training, inplace)

    def no_attention_dropout(q, k, v, attn_mask=None, dropout_p=0.0, **kw):
        assert dropout_p == 0.0
        return real_sdpa(q, k, v, attn_mask=attn_mask, **kw)

    real_sdpa = attention.F.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "dropout", counting_dropout)
    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", no_attention_dropout)
    src = torch.tensor([[5, 6, 7, 3], [8, 3, 0, 0]])
    tgt = torch.tensor([[2, 5, 6], [2, 7, 0]])
    model(src, tgt)
    assert len(dropped) == 2 + 2 * 2 + 3 * 3
    assert all(shape[-1] == 8 and p == 0.3 for shape, p in dropped)
    names = {k for k in model.state_dict() if ".ff." in k}
    assert {k.split(".ff.")[1] for k in names} == {"0.weight", "0.bias", "3.weight", "3.bias"}
