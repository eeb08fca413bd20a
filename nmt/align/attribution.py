"""Gradient attributions as alignment matrices, for every family (fixed_context included).

saliency (Ding et al. 2019, grad x input): for target piece t (teacher-forced) and source
piece s,  a_ts = || (d log p(y_t | y_<t, x) / d e_s) ⊙ e_s ||_2,  with e_s the source
piece's embedding; each row is normalised to a distribution over the source pieces (EOS
column included), a_ts / sum_s' a_ts'. Rows are stored like a single attention map,
(1, 1, T+1, S), row t for the step that predicts piece t (the last row predicts EOS), so
the word reduction, links, npz, plots and reports treat them exactly like attention
(read naively: there is no shifted reading of an attribution).

Batching: one teacher-forced forward pass per chunk of sentences, then one backward pass
per target position t of log p(y_t) summed over the chunk's sentences (they are
independent, so each sentence's gradient is its own); an RNN's backward for position t
only runs through steps 0..t.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from nmt.core.progress import tick
from nmt.core.tokens import BOS, EOS, PAD
from nmt.data.batching import pad
from nmt.models.base import Seq2Seq

SENTENCES_PER_CHUNK = 64
CELLS_PER_CHUNK = 2 ** 18  # sentences x target x source positions per chunk: bounds the
# memory the backward passes keep (an RNN decoder keeps (S, H) per step and sentence)


def saliency_rows(model: Seq2Seq, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
    """grad x input norms (B, T, S) for a padded batch: src (B, S), tgt_in/tgt_out (B, T)."""
    emb = model.embed_source(src).detach().requires_grad_(True)  # (B, S, E)
    logits, _, _ = model(src, tgt_in, src_emb=emb)  # (B, T, V)
    logp = F.log_softmax(logits.float(), -1).gather(2, tgt_out.unsqueeze(-1)).squeeze(-1)
    logp = logp.masked_fill(tgt_out == PAD, 0.0)  # (B, T): padding gives zero gradients
    T, rows = logp.size(1), []
    for t in range(T):
        (grad,) = torch.autograd.grad(logp[:, t].sum(), emb, retain_graph=t + 1 < T)
        rows.append((grad * emb.detach()).norm(dim=-1))  # (B, S)
    return torch.stack(rows, 1).masked_fill((src == PAD)[:, None, :], 0.0)


def normalise_rows(scores: np.ndarray) -> np.ndarray:
    """Each row divided by its sum; all-zero rows stay zero."""
    total = scores.sum(-1, keepdims=True)
    return np.divide(scores, total, out=np.zeros_like(scores), where=total > 0)


def saliency_weights(model: Seq2Seq, src_ids: list, tgt_ids: list,
                     sentences: int = SENTENCES_PER_CHUNK, cells: int = CELLS_PER_CHUNK
                     ) -> list[np.ndarray]:
    """Saliency (1, 1, T+1, S) per pair, rows normalised; src ids end in EOS, tgt ids do
    not. Chunks of length-sorted sentences hold at most `sentences` sentences and `cells`
    sentence x target x source positions (or one sentence)."""
    model.eval()  # no dropout: the attribution of the model as it translates
    device = next(model.parameters()).device
    out: list[np.ndarray] = [None] * len(src_ids)  # type: ignore[list-item]
    order = sorted(range(len(src_ids)), key=lambda i: (len(tgt_ids[i]), len(src_ids[i])))
    for chunk in _chunks(order, [len(t) + 1 for t in tgt_ids], [len(s) for s in src_ids],
                         sentences, cells):
        src = pad([list(src_ids[i]) for i in chunk]).to(device)
        tgt = [list(tgt_ids[i]) for i in chunk]
        with torch.enable_grad():
            scores = saliency_rows(model, src, pad(tgt, prefix=BOS).to(device),
                                   pad(tgt, suffix=EOS).to(device)).cpu().double().numpy()
        for row, i in enumerate(chunk):
            T, S = len(tgt_ids[i]) + 1, len(src_ids[i])
            out[i] = normalise_rows(scores[row, :T, :S])[None, None].astype(np.float32)
        tick(len(chunk))  # sentences done, for a progress bar (nmt.core.progress)
    return out


def _chunks(order: list[int], widths: list[int], lengths: list[int], sentences: int,
            cells: int):
    """Consecutive runs of `order`: count <= sentences and count x widest x longest source
    <= cells (a single sentence always makes a chunk)."""
    chunk: list[int] = []
    width = length = 0
    for i in order:
        w, s = max(width, widths[i]), max(length, lengths[i])
        if chunk and (len(chunk) + 1 > sentences or (len(chunk) + 1) * w * s > cells):
            yield chunk
            chunk, w, s = [], widths[i], lengths[i]
        chunk.append(i)
        width, length = w, s
    if chunk:
        yield chunk
