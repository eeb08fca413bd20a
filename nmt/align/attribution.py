"""Gradient attributions as alignment matrices, for every family (fixed_context included).

saliency (Ding et al. 2019, grad x input): for target piece t (teacher-forced) and source
piece s,  a_ts = || (d log p(y_t | y_<t, x) / d e_s) ⊙ e_s ||_2,  with e_s the source
piece's embedding; each row is normalised to a distribution over the source pieces (EOS
column included), a_ts / sum_s' a_ts'. Rows are stored like a single attention map,
(1, 1, T+1, S), row t for the step that predicts piece t (the last row predicts EOS), so
the word reduction, links, npz, plots and reports treat them exactly like attention
(read naively: there is no shifted reading of an attribution).

Batching: every sentence of a chunk is repeated once per target position, r = t * B + b,
and replica r back-propagates only log p(y_t) of sentence b: one forward and one backward
per chunk give every row of every sentence.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from nmt.data.batching import pad
from nmt.models.base import Seq2Seq
from nmt.progress import tick
from nmt.tokens import BOS, EOS, PAD

METHODS = ("attention", "saliency")
ROWS_PER_CHUNK = 512  # at most this many replicas (sentences x target positions) per pass
CELLS_PER_CHUNK = 2 ** 19  # and replicas x target x source steps: bounds the memory kept for
# the backward pass (RNN decoders keep a (rows, S, H) tensor per step: ~1 GB at H = 256)


def saliency_rows(model: Seq2Seq, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
    """grad x input norms (B, T, S) for a padded batch: src (B, S), tgt_in/tgt_out (B, T)."""
    B, T = tgt_in.shape
    emb = model.embed_source(src).detach()  # (B, S, E)
    reps = emb.repeat(T, 1, 1).requires_grad_(True)  # (T*B, S, E), replica t*B + b
    select = torch.zeros(T, B, T, dtype=torch.bool, device=src.device)
    select[torch.arange(T), :, torch.arange(T)] = True  # replica (t, b) scores position t
    logits, _ = model(src.repeat(T, 1), tgt_in.repeat(T, 1), select=select.view(T * B, T),
                      src_emb=reps)  # (T*B, V)
    gold = tgt_out.t().reshape(-1)  # (T*B,) piece t of sentence b
    picked = F.log_softmax(logits.float(), -1).gather(1, gold[:, None]).squeeze(1)
    (grad,) = torch.autograd.grad(picked.masked_fill(gold == PAD, 0.0).sum(), reps)
    scores = (grad * reps.detach()).norm(dim=-1).view(T, B, -1).transpose(0, 1)  # (B, T, S)
    return scores.masked_fill((src == PAD)[:, None, :], 0.0)


def normalise_rows(scores: np.ndarray) -> np.ndarray:
    """Each row divided by its sum; all-zero rows stay zero."""
    total = scores.sum(-1, keepdims=True)
    return np.divide(scores, total, out=np.zeros_like(scores), where=total > 0)


def saliency_weights(model: Seq2Seq, src_ids: list, tgt_ids: list,
                     rows: int = ROWS_PER_CHUNK, cells: int = CELLS_PER_CHUNK
                     ) -> list[np.ndarray]:
    """Saliency (1, 1, T+1, S) per pair, rows normalised; src ids end in EOS, tgt ids do
    not. Chunks of length-sorted sentences hold at most `rows` replicas and `cells`
    replica x target x source positions (or one sentence)."""
    model.eval()  # no dropout: the attribution of the model as it translates
    device = next(model.parameters()).device
    out: list[np.ndarray] = [None] * len(src_ids)  # type: ignore[list-item]
    order = sorted(range(len(src_ids)), key=lambda i: (len(tgt_ids[i]), len(src_ids[i])))
    for chunk in _chunks(order, [len(t) + 1 for t in tgt_ids], [len(s) for s in src_ids],
                         rows, cells):
        src = pad([list(src_ids[i]) for i in chunk]).to(device)
        tgt = [list(tgt_ids[i]) for i in chunk]
        with torch.enable_grad():
            scores = saliency_rows(model, src, pad(tgt, prefix=BOS).to(device),
                                   pad(tgt, suffix=EOS).to(device)).cpu().double().numpy()
        for row, i in enumerate(chunk):
            T, S = len(tgt_ids[i]) + 1, len(src_ids[i])
            out[i] = normalise_rows(scores[row, :T, :S])[None, None].astype(np.float32)
        tick(len(chunk))  # sentences done, for a progress bar (nmt.progress)
    return out


def _chunks(order: list[int], widths: list[int], lengths: list[int], rows: int, cells: int):
    """Consecutive runs of `order`: count x widest <= rows and count x widest^2 x longest
    source <= cells (a single sentence always makes a chunk)."""
    chunk: list[int] = []
    width = length = 0
    for i in order:
        w, s = max(width, widths[i]), max(length, lengths[i])
        n = len(chunk) + 1
        if chunk and (n * w > rows or n * w * w * s > cells):
            yield chunk
            chunk, w, s = [], widths[i], lengths[i]
        chunk.append(i)
        width, length = w, s
    if chunk:
        yield chunk
