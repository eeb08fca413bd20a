"""Gradient attributions: hand-built models whose answer is known, and every family's
saliency batched exactly as one sentence at a time."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from nmt.align.attribution import _chunks, saliency_weights
from nmt.align.words import links_from_matrix, word_matrix
from nmt.core.tokens import PAD
from nmt.models.base import Seq2Seq
from tests.conftest import VOCAB, random_batch, tiny_model


class ReadsOneWord(Seq2Seq):
    """Target position t sees only source position `reads(t)` (and the target prefix)."""

    def __init__(self, reads):
        super().__init__(VOCAB, VOCAB, 8, tie=False)
        torch.manual_seed(0)
        self.src_emb, self.tgt_emb, self.reads = nn.Embedding(VOCAB, 8), nn.Embedding(VOCAB, 8), reads

    def embed_source(self, src):
        return self.src_emb(src)

    def encode(self, src, src_emb=None):
        return {"mask": src != PAD, "emb": self.embed_source(src) if src_emb is None else src_emb}

    def decode_features(self, enc, tgt_in, need_attn=False):
        picked = torch.stack([enc["emb"][:, self.reads(t)] for t in range(tgt_in.size(1))], 1)
        return torch.tanh(picked + self.tgt_emb(tgt_in)), None  # (B, T, 8)


SOURCES = [[5, 6, 7, 8, 9, 3], [10, 11, 12, 3], [13, 14, 15, 16, 17, 18, 19, 3]]
TARGETS = [[20, 21, 22], [23, 24], [25, 26, 27, 28, 29]]


def test_a_model_that_reads_only_source_word_2_puts_all_its_mass_on_word_2():
    weights = saliency_weights(ReadsOneWord(lambda t: 2), SOURCES, TARGETS)
    for w, src, tgt in zip(weights, SOURCES, TARGETS):
        assert w.shape == (1, 1, len(tgt) + 1, len(src))  # rows: pieces + EOS; cols + EOS
        expected = np.zeros((len(tgt) + 1, len(src)))
        expected[:, 2] = 1.0
        np.testing.assert_allclose(w[0, 0], expected, atol=1e-6)
        pieces = [f"\u2581w{k}" for k in range(len(src) - 1)]
        words = word_matrix(w, pieces, [f"\u2581t{k}" for k in range(len(tgt))])
        assert links_from_matrix(words) == {(2, j) for j in range(len(tgt))}


def test_rows_follow_their_own_target_position():
    # position t reads source t (the last source piece is EOS): a diagonal, so a mix-up
    # of replicas and positions shows.
    model = ReadsOneWord(lambda t: t)
    sources = [[5, 6, 7, 8, 9, 3], [10, 11, 12, 13, 3]]
    targets = [[20, 21, 22, 23], [24, 25, 26, 27]]
    for w in saliency_weights(model, sources, targets, sentences=1):  # one sentence per chunk
        np.testing.assert_allclose(w[0, 0], np.eye(5, w.shape[-1]), atol=1e-6)


def test_every_family_is_batched_exactly_as_sentence_by_sentence(family):
    model = tiny_model(family)
    src, tgt_in = random_batch(batch=4)
    src_ids = [[int(x) for x in row if x != PAD] for row in src]
    tgt_ids = [[int(x) for x in row[1:] if x != PAD] for row in tgt_in]
    batched = saliency_weights(model, src_ids, tgt_ids)
    alone = [saliency_weights(model, [s], [t])[0] for s, t in zip(src_ids, tgt_ids)]
    for b, a, s, t in zip(batched, alone, src_ids, tgt_ids):
        assert b.shape == (1, 1, len(t) + 1, len(s))
        np.testing.assert_allclose(b, a, atol=2e-5)
        np.testing.assert_allclose(b.sum(-1), 1.0, atol=1e-5)
        assert (b >= 0).all() and (b[..., :-1] > 0).any()
    assert not model.training


@pytest.mark.parametrize("name", ["bahdanau", "transformer", "fixed_context"])
def test_given_source_embeddings_reproduce_the_lookup(name):
    model = tiny_model(name)
    src, tgt_in = random_batch()
    with torch.no_grad():
        looked_up, _, _ = model(src, tgt_in)
        given, _, _ = model(src, tgt_in, src_emb=model.embed_source(src))
    torch.testing.assert_close(given, looked_up)


def test_chunks_keep_each_batch_within_its_sentence_and_cell_budgets():
    """_chunks: consecutive runs of the order whose count <= sentences and count x widest
    x longest <= cells; a sentence alone makes a chunk even when it is larger."""
    widths, lengths = [2, 2, 2, 3, 1, 9], [3, 3, 3, 3, 1, 9]
    chunks = list(_chunks(list(range(6)), widths, lengths, sentences=10, cells=12))
    assert chunks == [[0, 1], [2], [3], [4], [5]]  # [2, 3]: 2 x 3 x 3 = 18 > 12
    for chunk in chunks:
        cells = len(chunk) * max(widths[i] for i in chunk) * max(lengths[i] for i in chunk)
        assert cells <= 12 or len(chunk) == 1
    assert list(_chunks([0, 1, 2], [1] * 3, [1] * 3, sentences=2, cells=100)) == [[0, 1], [2]]
