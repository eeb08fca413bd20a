"""Model contracts: causality, incremental decoding equals full recomputation,
reordering by beam index, and the fixed-context bottleneck."""

import torch
import torch.nn.functional as F

from nmt.models.base import reorder
from tests.conftest import random_batch, tiny_model


def test_future_target_tokens_do_not_change_earlier_logits(family):
    model = tiny_model(family)
    src, tgt = random_batch(batch=2, tgt_len=8)
    tgt[:, 1:] = torch.randint(4, 40, (2, 7))
    logits, _, _ = model(src, tgt)
    changed = tgt.clone()
    changed[:, 5:] = torch.randint(4, 40, (2, 3))
    logits2, _, _ = model(src, changed)
    torch.testing.assert_close(logits2[:, :5], logits[:, :5])
    assert not torch.allclose(logits2[:, 5:], logits[:, 5:])


def test_step_by_step_decoding_equals_teacher_forcing(family):
    """Cached incremental decoding (state/kv cache) gives the full-sequence result."""
    model = tiny_model(family)
    src, tgt = random_batch()
    logits, attn, _ = model(src, tgt, need_attn=True)
    enc = model.encode(src)
    state = model.init_state(enc)
    for t in range(tgt.size(1)):
        log_probs, state, step_attn = model.step(tgt[:, t], state, enc)
        real = tgt[:, t] != 0
        torch.testing.assert_close(log_probs[real], F.log_softmax(logits[real, t], -1),
                                   atol=1e-5, rtol=1e-4)
        if attn is not None:
            torch.testing.assert_close(step_attn[real], attn[real, :, :, t], atol=1e-5, rtol=1e-4)


def test_reorder_selects_beams_in_encoder_output_and_state(family):
    model = tiny_model(family)
    src, tgt = random_batch()
    enc = model.encode(src)
    state = model.init_state(enc)
    for t in range(3):
        _, state, _ = model.step(tgt[:, t], state, enc)
    index = torch.tensor([2, 2, 0, 1])
    enc2, state2 = reorder(enc, index), reorder(state, index)
    out, _, _ = model.step(tgt[index, 3], state2, enc2)
    ref, _, _ = model.step(tgt[:, 3], state, enc)
    torch.testing.assert_close(out, ref[index])


def test_fixed_context_sees_the_source_only_through_one_vector():
    model = tiny_model("fixed_context")
    src, tgt = random_batch()
    enc = model.encode(src)
    assert model.has_attention is False
    assert set(enc) == {"mask", "context"} and enc["context"].shape == (4, 32)


def test_transformer_fused_and_explicit_attention_agree():
    model = tiny_model("transformer")
    src, tgt = random_batch()
    enc = model.encode(src)
    fast, none = model.decode_features(enc, tgt, need_attn=False)
    slow, attn = model.decode_features(enc, tgt, need_attn=True)
    assert none is None and attn.shape == (4, 2, 4, tgt.size(1), src.size(1))
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-4)


def test_tied_embeddings_share_one_tensor():
    model = tiny_model("transformer")
    assert model.out.weight is model.tgt_embed.weight
    assert model.src_embed is model.tgt_embed


def test_the_selected_positions_logits_are_the_full_passes_at_those_positions(family):
    """Seq2Seq.forward(select=mask): the output layer runs on the selected positions only,
    padded to a multiple of ROWS rows (few shapes) and cut back: row i is position i's
    logits, whatever the count; the training loss reads these."""
    model = tiny_model(family)
    src, tgt_in = random_batch()
    full, _, _ = model(src, tgt_in)
    first = torch.zeros_like(tgt_in, dtype=torch.bool)
    first[:, 0] = True  # one position a sentence: 4 rows
    for mask in (tgt_in != 0, first):
        chosen, _, _ = model(src, tgt_in, select=mask)
        assert chosen.shape == (int(mask.sum()), full.size(-1))
        assert torch.allclose(chosen, full[mask], atol=1e-5)
