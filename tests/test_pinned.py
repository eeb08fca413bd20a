"""What the docs promise for ensembles, sampling and alignment, pinned by its number or its
computation: a one-line change to any of them fails here (docs/api.md, docs/alignment.md,
docs/configuration.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nmt.align.extract import DEFAULT_METHOD, default_shifted
from nmt.align.names import ATTENTION
from nmt.align.words import links_from_matrix, reading
from nmt.core.config import DecodeConfig, GuidedConfig
from nmt.core.tokens import BOS, EOS, PAD
from nmt.data.symmetrize import DEFAULT_AGREEMENT, DEFAULT_HEURISTIC, agreement
from nmt.decoding.search import length_penalty, max_lengths, sample
from nmt.models.base import Seq2Seq
from nmt.models.ensemble import Ensemble
from nmt.training.adapt import DEFAULT_LR
from tests.conftest import random_batch, tiny_model

# ---------------------------------------------------------------------------- ensembles


def test_an_ensemble_step_is_the_renormalised_mean_of_each_members_own_step():
    """Three different members, two steps: each step is log_softmax of the mean of the
    members' log-probabilities, each member advanced on its own state (not the mean of
    probabilities, not one member, not unnormalised)."""
    members = [tiny_model("bahdanau", 0), tiny_model("transformer", 1),
               tiny_model("luong_general", 2)]
    ensemble = Ensemble(members).eval()
    src, tgt = random_batch()
    enc = ensemble.encode(src)
    state = ensemble.init_state(enc)
    own = [(m.encode(src),) for m in members]
    own = [(e, m.init_state(e)) for (e,), m in zip(own, members)]
    for t in range(2):
        prev = tgt[:, t]
        got, state, attn = ensemble.step(prev, state, enc)
        parts = []
        for k, (m, (e, s)) in enumerate(zip(members, own)):
            lp, s, _ = m.step(prev, s, e)
            own[k] = (e, s)
            parts.append(lp)
        stacked = torch.stack(parts)
        torch.testing.assert_close(got, torch.log_softmax(stacked.mean(0), -1))
        assert attn is None
        assert not torch.allclose(got, stacked.exp().mean(0).log(), atol=1e-4)
        assert not torch.allclose(got, stacked.mean(0), atol=1e-4)
        assert all(not torch.allclose(got, p, atol=1e-3) for p in parts)
        torch.testing.assert_close(got.exp().sum(-1), torch.ones(src.size(0)))


def test_an_ensemble_forward_is_the_mean_of_log_probabilities_and_of_mean_maps():
    members = [tiny_model("bahdanau", 0), tiny_model("transformer", 1)]
    ensemble = Ensemble(members).eval()
    src, tgt = random_batch()
    log_probs, attn, _ = ensemble(src, tgt, need_attn=True)
    outs = [m(src, tgt, need_attn=True) for m in members]
    torch.testing.assert_close(
        log_probs, torch.stack([F.log_softmax(o[0], -1) for o in outs]).mean(0))
    torch.testing.assert_close(
        attn, torch.stack([o[1].mean((1, 2), keepdim=True) for o in outs]).mean(0))


# ---------------------------------------------------------------------------- sampling


class Fixed(Seq2Seq):
    """A decoder whose every step gives the same distribution over six tokens."""

    def __init__(self, probs: list[float]):
        nn.Module.__init__(self)
        self.has_attention = False
        self.anchor = nn.Parameter(torch.zeros(1))
        self.log_probs = torch.log(torch.tensor(probs))

    def encode(self, src, src_emb=None):
        return {"mask": src != PAD}

    def init_state(self, enc):
        return {"h": enc["mask"].float()}

    def step(self, prev, state, enc):
        return self.log_probs.expand(prev.size(0), -1).clone(), state, None


def test_sampling_draws_from_the_temperature_softened_top_set():
    """Token frequencies of the first draw: softmax(log p / T) over the top-k set, PAD and
    BOS never; the score is the model's own log-probability (temperature 1)."""
    probs = [0.05, 0.05, 0.1, 0.1, 0.5, 0.2]  # PAD, UNK, BOS, EOS, a, b
    model = Fixed(probs)
    src = torch.full((20000, 4), 5)
    src[:, 0], src[:, 1] = 5 + torch.arange(20000) % 200, 5 + torch.arange(20000) // 200
    src[:, -1] = EOS  # 20,000 distinct sentences: each draws from its own stream
    for temperature, top_k in ((2.0, 0), (0.5, 0), (1.0, 3)):
        drawn = sample(model, src, ratio=0.0, offset=2, top_k=top_k, temperature=temperature,
                       seed=0)
        first = np.array([ids[0] if ids else EOS for ids, _ in drawn])
        allowed = [i for i in range(6) if i not in (PAD, BOS)]
        if top_k:
            allowed = [i for i in allowed if i in np.argsort(probs)[::-1][:top_k]]
        weights = np.array([probs[i] ** (1 / temperature) if i in allowed else 0.0
                            for i in range(6)])
        expected = weights / weights.sum()
        seen = np.bincount(first, minlength=6) / len(first)
        assert np.abs(seen - expected).max() < 0.015, (temperature, top_k, seen, expected)
    for ids, score in drawn[:50]:
        own = sum(math.log(probs[i]) for i in ids) + math.log(probs[EOS])
        assert score == pytest.approx(own, abs=1e-5)


# ---------------------------------------------------------------------------- decoding defaults


def test_decoding_defaults_and_the_length_limit_are_what_the_docs_say():
    d = DecodeConfig()
    assert (d.beam, d.length_penalty, d.max_len_ratio, d.max_len_offset, d.batch_size,
            d.n_best) == (5, 1.0, 1.5, 10, 64, 1)
    src = torch.tensor([[5, 6, 7, EOS, PAD], [5, EOS, PAD, PAD, PAD]])
    assert max_lengths(src, 1.5, 10).tolist() == [16, 13]  # floor(1.5 * 4) + 10, 3 + 10
    assert length_penalty(7, 1.0) == pytest.approx(2.0)  # ((5 + 7) / 6) ** 1
    assert length_penalty(7, 0.6) == pytest.approx(2.0 ** 0.6)


# ---------------------------------------------------------------------------- alignment defaults


def test_alignment_defaults_are_the_documented_ones():
    assert DEFAULT_METHOD == ATTENTION
    assert DEFAULT_AGREEMENT == 0.2 and DEFAULT_HEURISTIC == "grow-diag-final-and"
    assert DEFAULT_LR == 1e-3
    g = GuidedConfig()
    assert (g.weight, g.teacher, g.layer, g.heads, g.null_word, g.full_context) == \
        (0.0, "eflomal", -2, 1, False, False)
    assert not default_shifted(tiny_model("transformer"), ATTENTION, None)  # naive reading


def test_agreement_links_at_the_geometric_mean_threshold_by_default():
    forward = np.full((2, 2), 0.5)  # rows: target words, columns: source words
    backward = np.array([[0.08405, 0.5], [0.91595, 0.07605]])
    mean, links = agreement(forward, backward)  # geometric means 0.205, 0.5, 0.677, 0.195
    np.testing.assert_allclose(mean, np.sqrt(forward * backward))
    assert links == {(0, 0), (1, 0), (0, 1)}  # (source, target); 0.195 stays out
    assert agreement(forward, backward, 0.5)[1] == {(1, 0), (0, 1)}


def test_the_default_transformer_reading_is_the_mean_of_every_layer_and_head():
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(4), size=(2, 3, 5))  # (L, H, T+1, S)
    np.testing.assert_allclose(reading(weights), weights.mean((0, 1))[:-1])
    np.testing.assert_allclose(reading(weights, layer=-2, heads=1), weights[0, 0, :-1])
    np.testing.assert_allclose(reading(weights, shifted=True), weights.mean((0, 1))[1:])
    matrix = np.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]])
    assert links_from_matrix(matrix) == {(1, 0), (0, 1)}  # argmax per target word
