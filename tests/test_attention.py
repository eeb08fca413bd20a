"""The attention contract: distributions over real positions, zero on padding,
stable softmax, and what the tanh in additive attention buys."""

import torch

from nmt.models.attention import AdditiveScore, LocalWindow, attend, masked_softmax
from tests.conftest import random_batch, tiny_model


def test_masked_softmax_is_a_distribution_with_exact_zeros():
    scores = torch.randn(3, 4, 6) * 10
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]]).bool()
    w = masked_softmax(scores, mask.unsqueeze(1))
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 4))
    assert (w[1, :, 3:] == 0).all() and (w[2, :, 1:] == 0).all()


def test_masked_softmax_is_stable_for_huge_scores():
    scores = torch.tensor([[[1e30, 1e30 - 1e24, -1e30]]])
    w = masked_softmax(scores, torch.ones(1, 1, 3, dtype=torch.bool))
    assert torch.isfinite(w).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(1, 1))


def test_every_family_attends_only_to_real_source_positions(family):
    model = tiny_model(family)
    if not model.has_attention:
        return
    src, tgt = random_batch()
    _, attn, _ = model(src, tgt, need_attn=True)  # (B, L, H, T, S)
    real = (src != 0)[:, None, None, None, :].expand_as(attn)
    assert (attn >= 0).all()
    assert (attn[~real] == 0).all()
    if family == "luong_local_p":  # eq. 10 multiplies by the Gaussian, no renormalising
        assert (attn.sum(-1) < 1).all() and (attn.sum(-1) > 0).all()
    else:
        torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:-1]))


def test_padding_more_or_less_changes_nothing(family):
    model = tiny_model(family)
    src, tgt = random_batch()
    logits, attn, _ = model(src, tgt, need_attn=True)
    pad_src = torch.cat([src, torch.zeros(src.size(0), 5, dtype=torch.long)], 1)
    pad_tgt = torch.cat([tgt, torch.zeros(tgt.size(0), 3, dtype=torch.long)], 1)
    logits2, attn2, _ = model(pad_src, pad_tgt, need_attn=True)
    real = tgt != 0
    torch.testing.assert_close(logits2[:, : tgt.size(1)][real], logits[real], atol=1e-5, rtol=1e-4)
    if attn is not None:
        S, T = src.size(1), tgt.size(1)
        torch.testing.assert_close(attn2[..., :T, :S], attn, atol=1e-5, rtol=1e-4)
        assert (attn2[..., S:] == 0).all()
    # one sentence alone gives what it gave inside the padded batch
    alone, _, _ = model(src[3:4, : int((src[3] != 0).sum())], tgt[3:4, : int(real[3].sum())])
    torch.testing.assert_close(alone[0], logits[3, : int(real[3].sum())], atol=1e-5, rtol=1e-4)


def test_additive_attention_without_tanh_ignores_the_query():
    torch.manual_seed(0)
    keys = torch.randn(2, 7, 16)
    mask = torch.ones(2, 1, 7, dtype=torch.bool)
    queries = [torch.randn(2, 1, 12) for _ in range(3)]
    for use_tanh, same in ((False, True), (True, False)):
        score = AdditiveScore(12, 16, 10, use_tanh=use_tanh)
        projected = score.project_keys(keys)
        weights = [attend(score(q, projected), keys, mask)[1] for q in queries]
        equal = all(torch.allclose(weights[0], w, atol=1e-6) for w in weights[1:])
        assert equal is same


def test_local_window_gives_zero_outside_and_is_centred():
    H, S = 8, 20
    mask = torch.ones(1, S, dtype=torch.bool)
    local = LocalWindow("local-m", 3, H)
    inside, bias = local(torch.randn(1, 2, H), torch.tensor([[5, 30]]), mask)
    assert inside[0, 0].nonzero().flatten().tolist() == list(range(2, 9))
    assert inside[0, 1].nonzero().flatten().tolist() == list(range(16, 20))  # p_t clamped
    assert (bias == 0).all()
    local_p = LocalWindow("local-p", 4, H)
    query, step = torch.randn(1, 3, H), torch.zeros(1, 3, dtype=torch.long)
    inside, bias = local_p(query, step, mask)
    distance = torch.arange(S) - local_p.centre(query, step, mask).unsqueeze(-1)  # (1, 3, S)
    assert torch.equal(inside, distance.abs() <= 4)  # [p_t - D, p_t + D]
    torch.testing.assert_close(bias, -(distance ** 2) / (2 * 2.0 ** 2))  # sigma = D / 2 = 2


def test_missing_pad_mask_changes_outputs():
    """The failure the seeds warn about: attending to padding silently shifts outputs."""
    model = tiny_model("bahdanau")
    src, tgt = random_batch()
    enc = model.encode(src)
    good, _ = model.decode_features(enc, tgt)
    enc["mask"] = torch.ones_like(enc["mask"])
    bad, _ = model.decode_features(enc, tgt)
    assert not torch.allclose(good[3], bad[3], atol=1e-4)
