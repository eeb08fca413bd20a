"""Length limits: long outputs and sources, and limits too small to decode anything."""

from __future__ import annotations

import torch

from nmt.core.tokens import EOS
from nmt.decoding.search import beam_search, greedy, max_lengths
from tests.conftest import random_batch, tiny_model


def _never_ending(name: str):
    """A tiny model that never chooses EOS, so search runs to the length limit."""
    model = tiny_model(name)
    with torch.no_grad():
        model.out.bias[EOS] = -1e4
    return model


def test_transformer_decodes_past_1024_target_positions():
    model = _never_ending("transformer")
    src = torch.randint(4, 40, (1, 700), generator=torch.Generator().manual_seed(0))
    src[0, -1] = EOS
    out = greedy(model, src, ratio=1.5, offset=10)  # limit 1,060 steps
    assert len(out[0]) == 1059  # the last step may only emit EOS


def test_transformer_encodes_and_teacher_forces_long_sequences():
    model = tiny_model("transformer")
    src = torch.randint(4, 40, (1, 1500), generator=torch.Generator().manual_seed(1))
    src[0, -1] = EOS
    tgt_in = torch.randint(4, 40, (1, 1300), generator=torch.Generator().manual_seed(2))
    logits, attn, _ = model(src, tgt_in, need_attn=True)  # the forced-alignment path
    assert logits.shape == (1, 1300, 40) and attn.shape[-2:] == (1300, 1500)
    assert torch.isfinite(logits).all()
    # positions beyond the first table are the same sinusoids, not a wrap-around
    from nmt.models.transformer import sinusoids

    torch.testing.assert_close(model.pe[1100:1300], sinusoids(1300, 32)[1100:1300])


def test_a_zero_length_limit_still_takes_one_step(family):
    model = tiny_model(family)
    src, _ = random_batch(batch=3, src_len=6)
    assert max_lengths(src, 0.1, 0).tolist() == [1, 1, 1]  # never zero
    assert greedy(model, src, ratio=0.1, offset=0) == [[], [], []]  # only EOS fits
    hyps = beam_search(model, src, beam=3, ratio=0.1, offset=0, n_best=2)
    assert [[h.tokens for h in sentence] for sentence in hyps] == [[[]], [[]], [[]]]
    assert all(torch.isfinite(torch.tensor(h.score)) for sentence in hyps for h in sentence)
