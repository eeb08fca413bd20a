"""Promises of nmt/decoding/search.py's docstrings that no other test pinned: batched beam search
equals sentence-by-sentence search (finished sentences leave the batch), no hypothesis
with an impossible score, what `sample` returns as the score, and `filter_top`'s edges."""

from __future__ import annotations

import math

import pytest
import torch

from nmt.core.tokens import BOS, EOS, PAD
from nmt.decoding.search import beam_search, filter_top, greedy, sample
from tests.conftest import random_batch, tiny_model
from tests.test_equations_search import SRC, Scripted

A, B = 4, 5


@pytest.mark.parametrize("name", ["bahdanau", "transformer"])
def test_batched_beam_search_is_sentence_by_sentence_search(name):
    """nmt.decoding.search:beam_search — "Finished sentences leave the batch (their rows are dropped
    with `reorder`)": dropping rows changes nothing, each sentence's n-best is the one it
    gets alone, whatever the lengths of the others (so they finish at different steps)."""
    model = tiny_model(name, seed=2)
    src, _ = random_batch(seed=9, batch=4, src_len=10)
    batched = beam_search(model, src, beam=3, alpha=1.0, ratio=1.5, offset=3, n_best=3)
    for row, hyps in enumerate(batched):
        length = int((src[row] != PAD).sum())
        alone = beam_search(model, src[row:row + 1, :length], beam=3, alpha=1.0, ratio=1.5,
                            offset=3, n_best=3)[0]
        assert [h.tokens for h in hyps] == [h.tokens for h in alone]
        assert [h.score for h in hyps] == pytest.approx([h.score for h in alone], abs=1e-4)


def test_a_sentence_at_its_length_limit_leaves_the_batch():
    """nmt.decoding.search:beam_search — a sentence ends at its length limit (max_lengths) even with
    fewer than `beam` finished hypotheses, and its rows leave the batch at that step: the
    other sentence decodes alone from the next step on."""
    model = tiny_model("bahdanau", seed=2)
    src = torch.full((2, 10), PAD)
    src[0, :2] = torch.tensor([A, EOS])  # limit int(2 * 0.5) = 1: one step, EOS only
    src[1, :] = torch.tensor([A, B, A, B, A, B, A, B, A, EOS])  # limit 5
    rows, step = [], model.step

    def counting(prev, state, enc):
        rows.append(prev.size(0))
        return step(prev, state, enc)

    model.step = counting
    short, long = beam_search(model, src, beam=3, ratio=0.5, offset=0, n_best=3)
    assert [len(h.tokens) for h in short] == [0]  # only the first beam was alive at step 0
    assert rows[0] == 6 and len(rows) > 1 and set(rows[1:]) == {3}
    assert all(len(h.tokens) <= 4 for h in long)


def test_beam_search_never_finishes_an_impossible_hypothesis():
    """nmt.decoding.search:_finalise — only EOS candidates "with a finite score" finish: a beam wider
    than the number of possible outputs returns the possible ones, never a -inf score."""
    only_one = Scripted({(): {A: 1.0}, (A,): {EOS: 1.0}})  # the one output: A
    hyps = beam_search(only_one, SRC, beam=4, alpha=0.0, n_best=4)[0]
    assert [h.tokens for h in hyps] == [[A]]
    assert hyps[0].score == pytest.approx(0.0)


def test_a_sentence_ends_when_beam_hypotheses_have_ended():
    """nmt.decoding.search:beam_search — "a sentence ends when `beam` hypotheses have ended in EOS",
    even if a longer one would score better; Hypothesis.tokens are "without BOS/EOS"."""
    script = {(): {B: 0.9, EOS: 0.1}, (B,): {A: 0.8, EOS: 0.2}, (B, A): {EOS: 1.0}}
    assert greedy(Scripted(script), SRC) == [[B, A]]
    one = beam_search(Scripted(script), SRC, beam=1, n_best=1)[0]
    assert [h.tokens for h in one] == [[B, A]]
    assert one[0].score == pytest.approx(math.log(0.72) / (8 / 6))  # lp(3): EOS counted
    two = beam_search(Scripted(script), SRC, beam=2, n_best=3)[0]  # [] and [B] end first
    assert [h.tokens for h in two] == [[B], []]
    assert [h.score for h in two] == pytest.approx([math.log(0.18) / (7 / 6), math.log(0.1)])


def test_sample_returns_the_models_own_log_probability_eos_included():
    """nmt.decoding.search:sample — the score is the sum of the model's log-probabilities of the
    drawn tokens and of the final EOS, not of the temperature-scaled distribution."""
    script = {(): {A: 0.6, EOS: 0.4}, (A,): {B: 0.7, EOS: 0.3}, (A, B): {EOS: 0.9, A: 0.1}}
    for temperature in (0.5, 3.0):  # top_k=1: the draw is the arg-max, the score the model's
        [(ids, score)] = sample(Scripted(script), SRC, top_k=1, temperature=temperature,
                                seed=0)
        assert ids == [A, B]
        assert score == pytest.approx(math.log(0.6) + math.log(0.7) + math.log(0.9))


def test_filter_top_always_keeps_the_best_token():
    """nmt.decoding.search:filter_top — "the best always stays", even when top_p is below the
    best token's own probability (down to 0) and with -inf (banned) entries in the row."""
    logits = torch.log(torch.tensor([[0.1, 0.6, 0.3, 0.0]]))
    for top_p in (0.0, 1e-9, 0.5):
        assert torch.isfinite(filter_top(logits, top_p=top_p)).tolist() == [
            [False, True, False, False]]
    assert torch.isfinite(filter_top(logits, top_k=1)).tolist() == [[False, True, False, False]]
    assert torch.isfinite(filter_top(logits, top_k=10)).tolist() == [[True, True, True, False]]
    assert torch.equal(filter_top(logits), logits)  # defaults: nothing cut


def test_sampling_never_draws_pad_or_bos_even_when_the_model_prefers_them():
    """nmt.decoding.search:sample — "PAD and BOS are never drawn (`constrain`)", even from a model
    that puts almost all its mass on them."""
    model = tiny_model("bahdanau")
    with torch.no_grad():
        model.out.bias[PAD] = model.out.bias[BOS] = 20.0
    src, _ = random_batch(batch=4)
    drawn = sample(model, src.repeat(4, 1), seed=3)
    assert all(PAD not in ids and BOS not in ids for ids, _ in drawn)
    assert all(math.isfinite(score) for _, score in drawn)


def test_by_length_hands_every_batch_over_before_awaiting_any_and_keeps_input_order():
    """An engine whose workers decode side by side returns a callable per batch: every
    batch is started before the first is awaited, and each result lands at its source."""
    from nmt.decoding.translate import by_length

    sources = [[5, 6, 7, EOS], [EOS], [5, EOS], [5, 6, EOS], [9, 9, 9, 9, EOS]]
    started, awaited = [], []

    def decode(batch):
        started.append(len(awaited))
        return lambda: awaited.append(1) or [len(s) for s in batch]

    out = by_length(sources, 2, decode, empty=lambda: "empty")
    assert started == [0, 0] and len(awaited) == 2
    assert out == [4, "empty", 2, 3, 5]
    assert by_length(sources, 2, lambda batch: [len(s) for s in batch], lambda: 0) == \
        [4, 0, 2, 3, 5]
