"""Greedy and beam search share one step contract and agree where they must."""

import torch

from nmt.decoding.search import beam_search, filter_top, greedy, max_lengths
from tests.conftest import random_batch, tiny_model


def test_beam_one_equals_greedy(family):
    model = tiny_model(family, seed=3)
    src, _ = random_batch(seed=5, batch=5, src_len=11)
    g = greedy(model, src, ratio=1.5, offset=4)
    b = beam_search(model, src, beam=1, alpha=0.0, ratio=1.5, offset=4)
    assert [h[0].tokens for h in b] == g


def test_beam_returns_sorted_nbest_within_length_limit(family):
    model = tiny_model(family, seed=4)
    src, _ = random_batch(seed=6, batch=3, src_len=8)
    limits = max_lengths(src, 1.5, 3).tolist()
    result = beam_search(model, src, beam=4, alpha=1.0, ratio=1.5, offset=3, n_best=3)
    for hyps, limit in zip(result, limits):
        assert 1 <= len(hyps) <= 3
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert all(len(h.tokens) < limit for h in hyps)
        assert all(0 not in h.tokens and 2 not in h.tokens and 3 not in h.tokens for h in hyps)


def test_beam_search_finds_at_least_the_greedy_score():
    """Unnormalised (alpha = 0) beam search never scores below greedy."""
    model = tiny_model("bahdanau", seed=7)
    src, _ = random_batch(seed=8, batch=4, src_len=10)
    g = greedy(model, src, 1.5, 4)
    b = beam_search(model, src, beam=6, alpha=0.0, ratio=1.5, offset=4)
    enc = model.encode(src)
    for row, tokens in enumerate(g):
        greedy_score = _score(model, enc, row, tokens)
        assert b[row][0].score >= greedy_score - 1e-4


def _score(model, enc, row, tokens):
    enc1 = {k: v[row:row + 1] for k, v in enc.items()}
    state, prev, total = model.init_state(enc1), torch.tensor([2]), 0.0
    for tok in tokens + [3]:
        log_probs, state, _ = model.step(prev, state, enc1)
        total += float(log_probs[0, tok])
        prev = torch.tensor([tok])
    return total


def test_top_k_counts_the_vocabulary_of_each_row_whatever_the_batch():
    """filter_top: top-k keeps k tokens of each row's vocabulary (all of them when k is
    larger), for one sentence as for many; the rest are -inf."""
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isfinite(filter_top(logits, top_k=3)).tolist() == [[True, True, True, False]]
    assert torch.isfinite(filter_top(logits, top_k=9)).all()
    many = logits.repeat(3, 1)
    assert torch.isfinite(filter_top(many, top_k=2)).sum(-1).tolist() == [2, 2, 2]
