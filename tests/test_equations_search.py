"""Search with scripted log-probabilities: the GNMT length penalty (Wu et al. 2016,
eq. 14), a beam search whose best hypothesis changes when the penalty is removed,
n-best lists without duplicates, the output length limit and the banned tokens."""

from __future__ import annotations

import math

import pytest
import torch

from nmt.core.tokens import EOS, PAD
from nmt.decoding.search import beam_search, constrain, greedy, length_penalty, max_lengths
from nmt.models.base import reorder

A, B = 4, 5  # two word ids
VOCAB = 8


class Scripted:
    """A stand-in Seq2Seq whose next-token distribution depends only on the prefix.

    `script` maps a prefix (tuple of ids, BOS excluded) to {token: probability};
    tokens not listed get probability 0. The state is the prefix itself, so
    `reorder` by beam index is exercised as with a real model.
    """

    reorder = staticmethod(reorder)

    def __init__(self, script: dict[tuple[int, ...], dict[int, float]]):
        self.script = script

    def encode(self, src):
        return {"mask": src != PAD}

    def init_state(self, enc):
        self.first = True
        return {"prefix": torch.zeros(enc["mask"].size(0), 0, dtype=torch.long)}

    def step(self, prev, state, enc):
        prefix = state["prefix"]
        if not self.first:  # the first step's input is BOS, outside the prefix
            prefix = torch.cat([prefix, prev.unsqueeze(1)], 1)
        self.first = False
        rows = []
        for row in prefix.tolist():
            probs = self.script.get(tuple(row), {EOS: 1.0})
            rows.append([math.log(probs[v]) if probs.get(v) else -math.inf
                         for v in range(VOCAB)])
        return torch.tensor(rows), {"prefix": prefix}, None


SRC = torch.tensor([[4, 5, 6, 3]])  # limit 1.5 * 4 + offset

# short: EOS at once, log 0.5; long: a a a a EOS, log 0.5 + log 0.8 (lower unnormalised)
LONG_OR_SHORT = {(): {EOS: 0.5, A: 0.5}, (A,): {A: 1.0}, (A, A): {A: 1.0},
                 (A, A, A): {A: 1.0}, (A, A, A, A): {EOS: 0.8, A: 0.2}}


def test_length_penalty_values():
    """lp(Y) = ((5 + |Y|) / 6) ** alpha."""
    assert length_penalty(1, 1.0) == pytest.approx(1.0)
    assert length_penalty(3, 1.0) == pytest.approx(8 / 6)
    assert length_penalty(7, 0.6) == pytest.approx(2 ** 0.6)
    assert length_penalty(9, 0.0) == pytest.approx(1.0)
    torch.testing.assert_close(length_penalty(torch.tensor([1.0, 13.0]), 2.0),
                               torch.tensor([1.0, 9.0]))


def test_beam_best_hypothesis_changes_with_the_length_penalty():
    model = Scripted(LONG_OR_SHORT)
    short, long = math.log(0.5), math.log(0.5) + math.log(0.8)
    plain = beam_search(model, SRC, beam=2, alpha=0.0, n_best=2)[0]
    assert [h.tokens for h in plain] == [[], [A] * 4]
    assert [h.score for h in plain] == pytest.approx([short, long])
    normed = beam_search(model, SRC, beam=2, alpha=1.0, n_best=2)[0]
    assert [h.tokens for h in normed] == [[A] * 4, []]  # |Y| counts EOS: 5 and 1
    assert [h.score for h in normed] == pytest.approx([long / (10 / 6), short / 1.0])


def test_nbest_has_no_duplicates_and_is_sorted():
    script = {(): {EOS: 0.5, A: 0.3, B: 0.2}, (A,): {EOS: 1.0}, (B,): {EOS: 0.6, A: 0.4}}
    hyps = beam_search(Scripted(script), SRC, beam=3, alpha=0.0, n_best=3)[0]
    assert [h.tokens for h in hyps] == [[], [A], [B]]
    assert [h.score for h in hyps] == pytest.approx(
        [math.log(0.5), math.log(0.3), math.log(0.2) + math.log(0.6)])


def test_a_sentence_keeps_at_most_beam_finished_hypotheses():
    """Two hypotheses end at the same step when one place is left: only the better one."""
    script = {(): {EOS: 0.4, A: 0.35, B: 0.25}, (A,): {EOS: 1.0}, (B,): {EOS: 1.0}}
    hyps = beam_search(Scripted(script), SRC, beam=2, alpha=0.0, n_best=5)[0]
    assert [h.tokens for h in hyps] == [[], [A]]


def test_greedy_follows_the_arg_max_and_stops_at_eos():
    script = {(): {A: 0.6, EOS: 0.4}, (A,): {B: 0.7, EOS: 0.3}, (A, B): {EOS: 0.9, A: 0.1}}
    assert greedy(Scripted(script), SRC) == [[A, B]]


def test_length_limit_is_ratio_times_true_length_plus_offset():
    src = torch.tensor([[4, 5, 6, 3, 0, 0], [4, 5, 6, 7, 8, 3]])  # true lengths 4 and 6
    assert max_lengths(src, 1.5, 2).tolist() == [8, 11]
    endless = Scripted({(A,) * n: {A: 0.999, EOS: 0.001} for n in range(20)})
    out = greedy(endless, src, ratio=1.0, offset=1)  # limits 5 and 7 steps, EOS included
    assert out == [[A] * 4, [A] * 6]
    hyps = beam_search(endless, src, beam=1, alpha=0.0, ratio=1.0, offset=1)
    assert [h[0].tokens for h in hyps] == [[A] * 4, [A] * 6]
    hyps = beam_search(endless, src, beam=3, alpha=0.0, ratio=1.0, offset=1, n_best=3)
    assert [len(h.tokens) for h in hyps[0]] == [0, 1, 2]


def test_constrain_bans_pad_and_bos_and_forces_eos_at_the_limit():
    log_probs = torch.zeros(2, 6)
    out = constrain(log_probs, torch.tensor([False, True]))
    assert out[0].isinf().tolist() == [True, False, True, False, False, False]
    assert out[1].isinf().tolist() == [True, True, True, False, True, True]
