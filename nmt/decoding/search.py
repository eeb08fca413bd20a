"""Greedy and batched beam search over the one decoder step contract.

Search only calls `encode`, `init_state`, `step` and `reorder`; it never asks
which family it drives.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from torch import Tensor

from nmt.core.engine import MAX_STEPS
from nmt.core.tokens import BOS, EOS, PAD
from nmt.models.base import Seq2Seq


@dataclass
class Hypothesis:
    tokens: list[int]  # target ids without BOS/EOS
    score: float  # length-normalised log-probability


def max_length(source_len: int, ratio: float, offset: int) -> int:
    """Output limit in steps (EOS included) of a source of `source_len` pieces (EOS
    included): floor(ratio * source_len) + offset, at least 1 (a step that may only emit
    EOS) and at most MAX_STEPS, whatever the ratio (docs/deploy.md, "Decode"). Both engines
    take their limits from here, in Python floats."""
    scaled = source_len * ratio
    steps = int(scaled) + offset if scaled < MAX_STEPS else MAX_STEPS  # inf, nan: the cap
    return min(max(steps, 1), MAX_STEPS)


def max_lengths(src: Tensor, ratio: float, offset: int) -> Tensor:
    """Per-sentence output limit in steps (EOS included), `max_length` of each row, (B,)."""
    lengths = (src != PAD).sum(1).tolist()
    return torch.tensor([max_length(n, ratio, offset) for n in lengths], device=src.device)


def constrain(log_probs: Tensor, at_limit: Tensor) -> Tensor:
    """Never emit PAD or BOS; rows at their length limit may only emit EOS."""
    banned = torch.zeros_like(log_probs, dtype=torch.bool)
    banned[:, [PAD, BOS]] = True
    vocab = torch.arange(log_probs.size(1), device=log_probs.device)
    only_eos = at_limit.unsqueeze(1) & (vocab != EOS)
    return log_probs.masked_fill(banned | only_eos, float("-inf"))


def _one_token_at_a_time(model: Seq2Seq, src: Tensor, ratio: float, offset: int,
                         choose) -> list[tuple[list[int], float]]:
    """The left-to-right loop greedy search and sampling share: `choose(log_probs)` (B, V)
    -> tokens (B,) at each step (PAD and BOS banned, only EOS at the length limit), until
    EOS or the limit. Returns (ids, the sum of the model's log-probabilities of them and
    of the final EOS)."""
    enc = model.encode(src)
    state = model.init_state(enc)
    limit = max_lengths(src, ratio, offset)
    prev = torch.full((src.size(0),), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    total = torch.zeros(src.size(0), device=src.device)
    out = []
    for t in range(int(limit.max())):
        log_probs, state, _ = model.step(prev, state, enc)
        log_probs = constrain(log_probs, t + 1 >= limit)
        token = choose(log_probs)
        total += log_probs.gather(1, token[:, None]).squeeze(1).masked_fill(done, 0.0)
        prev = token.masked_fill(done, PAD)
        out.append(prev)
        done |= (prev == EOS) | (t + 1 >= limit)
        if done.all():
            break
    rows = torch.stack(out, 1).tolist()
    ids = [[i for i in row[:row.index(EOS)] if i != PAD] if EOS in row else
           [i for i in row if i != PAD] for row in rows]
    return list(zip(ids, total.tolist()))


@torch.no_grad()
def greedy(model: Seq2Seq, src: Tensor, ratio: float = 1.5, offset: int = 10) -> list[list[int]]:
    """Pick the arg-max token at each step until EOS or the length limit."""
    return [ids for ids, _ in _one_token_at_a_time(model, src, ratio, offset,
                                                   lambda log_probs: log_probs.argmax(-1))]


@torch.no_grad()
def sample(model: Seq2Seq, src: Tensor, ratio: float = 1.5, offset: int = 10, top_k: int = 0,
           top_p: float = 1.0, temperature: float = 1.0,
           seed: int = 0) -> list[tuple[list[int], float]]:
    """Draw each token from softmax(log p / temperature) cut to the `top_k` most likely
    tokens (0 = all) or to the smallest set whose probability reaches `top_p` (nucleus
    sampling, Holtzman et al. 2020), until EOS or the length limit; PAD and BOS are never
    drawn (`constrain`). Returns (ids, the sum of the model's own log-probabilities, not
    the temperature's, of them and of the final EOS). A temperature near 0 draws the
    arg-max: greedy search. Each sentence draws from its own stream, seeded by `seed` and
    its source ids (`row_seed`): its sample does not depend on the batch it is in."""
    streams = [torch.Generator(device=src.device).manual_seed(row_seed(seed, row))
               for row in src.tolist()]

    def draw(log_probs: Tensor) -> Tensor:
        probs = filter_top(log_probs / max(temperature, 1e-8), top_k, top_p).softmax(-1)
        cdf = probs.cumsum(-1)
        u = torch.cat([torch.rand(1, generator=g, device=src.device) for g in streams])
        # inverse CDF at (1 - u) of the total, in (0, total]: the first token whose
        # cumulative probability reaches it has probability > 0
        wanted = ((1.0 - u) * cdf[:, -1]).unsqueeze(1)
        return torch.searchsorted(cdf, wanted).squeeze(1).clamp_max(cdf.size(1) - 1)

    return _one_token_at_a_time(model, src, ratio, offset, draw)


def row_seed(seed: int, row: list[int]) -> int:
    """A sentence's own seed: a 63-bit hash of `seed` and its source ids, padding dropped."""
    ids = ",".join(str(i) for i in row if i != PAD)
    digest = hashlib.blake2b(f"{seed}:{ids}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def filter_top(logits: Tensor, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """`logits` (B, V) with every token outside the top k (k > 0), or outside the
    smallest most-likely set of probability >= top_p, set to -inf; the best always stays."""
    if top_k > 0:
        kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        before = sorted_logits.softmax(-1).cumsum(-1) - sorted_logits.softmax(-1)
        drop = before >= top_p  # the mass of the better tokens already reaches top_p
        drop[:, 0] = False  # the best stays, even for top_p <= 0
        logits = logits.masked_fill(drop.scatter(1, order, drop), float("-inf"))
    return logits


def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT (Wu et al., 2016): lp(Y) = ((5 + |Y|) / 6) ** alpha."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model: Seq2Seq, src: Tensor, beam: int = 5, alpha: float = 1.0,
                ratio: float = 1.5, offset: int = 10, n_best: int = 1) -> list[list[Hypothesis]]:
    """Batched beam search; a sentence ends when `beam` hypotheses have ended in EOS.

    Finished sentences leave the batch (their rows are dropped with `reorder`).
    """
    B, K, dev = src.size(0), beam, src.device
    limit = max_lengths(src, ratio, offset).repeat_interleave(K)  # (B*K,)
    enc = model.reorder(model.encode(src), torch.arange(B, device=dev).repeat_interleave(K))
    state = model.init_state(enc)
    scores = torch.zeros(B, K, device=dev)
    scores[:, 1:] = float("-inf")  # all beams start identical: keep one alive
    history = torch.full((B * K, 0), BOS, dtype=torch.long, device=dev)
    prev = torch.full((B * K,), BOS, dtype=torch.long, device=dev)
    active = list(range(B))  # original sentence index of each batch row group
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    for t in range(int(limit.max())):
        log_probs, state, _ = model.step(prev, state, enc)
        V = log_probs.size(-1)
        log_probs = constrain(log_probs, t + 1 >= limit)
        cand = (scores.view(-1, 1) + log_probs).view(len(active), K * V)
        top, idx = cand.topk(2 * K, dim=1)  # (b, 2K): at most K of them are EOS
        beam_of, token = idx // V, idx % V
        is_eos = token == EOS
        _finalise(finished, active, history, top, beam_of, is_eos, K, alpha)
        keep = torch.sort(is_eos.int(), dim=1, stable=True).indices[:, :K]  # first K non-EOS
        scores = top.gather(1, keep)
        rows = (beam_of.gather(1, keep)
                + torch.arange(len(active), device=dev).unsqueeze(1) * K).view(-1)
        prev = token.gather(1, keep).view(-1)
        history = torch.cat([history[rows], prev.unsqueeze(1)], 1)
        open_ = (t + 1 < limit.view(len(active), K)[:, 0]).tolist()
        still = [i for i, b in enumerate(active) if len(finished[b]) < K and open_[i]]
        if not still:
            break
        if len(still) < len(active):
            rows = rows.view(len(active), K)[torch.tensor(still, device=dev)].view(-1)
            keep_rows = (torch.tensor(still, device=dev).repeat_interleave(K) * K
                         + torch.arange(K, device=dev).repeat(len(still)))
            history, prev = history[keep_rows], prev[keep_rows]
            scores = scores[torch.tensor(still, device=dev)]
            active = [active[i] for i in still]
            limit = limit[keep_rows]
            enc = model.reorder(enc, rows)
        else:
            limit = limit[rows]
        state = model.reorder(state, rows)
    return [sorted(hyps, key=lambda h: -h.score)[:n_best] for hyps in finished]


def _finalise(finished: list[list[Hypothesis]], active: list[int], history: Tensor, top: Tensor,
              beam_of: Tensor, is_eos: Tensor, K: int, alpha: float) -> None:
    """Move EOS candidates ranked in the top K (with a finite score) to `finished`."""
    rank_ok = torch.arange(top.size(1), device=top.device) < K
    hits = (is_eos & rank_ok & torch.isfinite(top)).nonzero().tolist()
    for row, col in hits:
        sentence = active[row]
        if len(finished[sentence]) >= K:
            continue
        tokens = history[row * K + beam_of[row, col]].tolist()
        score = float(top[row, col]) / length_penalty(len(tokens) + 1, alpha)
        finished[sentence].append(Hypothesis(tokens, score))
