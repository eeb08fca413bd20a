"""Transformer (Vaswani et al., 2017) with cached incremental decoding.

Shapes: B batch, S source, T target, D model size, h heads, d = D / h.
Padding masks in every attention, a causal mask in decoder self-attention.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
from torch import Tensor, nn

from nmt.core.config import LocalConfig, ModelConfig
from nmt.core.tokens import PAD
from nmt.models.attention import scaled_dot_product
from nmt.models.base import Seq2Seq, State


def sinusoids(length: int, dim: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(...) (section 3.5)."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.o = nn.Linear(dim, dim)

    def split(self, x: Tensor) -> Tensor:
        B, L, D = x.shape  # -> (B, h, L, d)
        return x.view(B, L, self.heads, D // self.heads).transpose(1, 2)

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        k, v = self.kv(memory).chunk(2, dim=-1)
        return self.split(k), self.split(v)

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor, need_weights: bool
                ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D); k, v (B, h, S, d); mask (B, 1, T or 1, S) True = may attend."""
        out, weights = scaled_dot_product(self.split(self.q(x)), k, v, mask, need_weights)
        B, _, T, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(B, T, -1)), weights


class FeedForward(nn.Sequential):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (eq. 2). No dropout inside: the paper drops
    out only sub-layer outputs and the embedding sums (section 5.4). Modules keep their
    former names (0, 1, 3: a dropout was 2), so earlier checkpoints load unchanged."""

    def __init__(self, dim: int, hidden: int):
        super().__init__(OrderedDict([("0", nn.Linear(dim, hidden)), ("1", nn.ReLU()),
                                      ("3", nn.Linear(hidden, dim))]))


class Sublayer(nn.Module):
    """Residual + layer norm around a sublayer: LayerNorm(x + Dropout(f(x))) (post-norm)."""

    def __init__(self, dim: int, dropout: float):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return self.norm(x + self.drop(y))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn = MultiHeadAttention(cfg.emb_size, cfg.heads)
        self.ff = FeedForward(cfg.emb_size, cfg.ff_size)
        self.sub1, self.sub2 = Sublayer(cfg.emb_size, cfg.dropout), Sublayer(cfg.emb_size, cfg.dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        k, v = self.attn.keys_values(x)
        x = self.sub1(x, self.attn(x, k, v, mask, False)[0])
        return self.sub2(x, self.ff(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.emb_size, cfg.heads)
        self.cross = MultiHeadAttention(cfg.emb_size, cfg.heads)
        self.ff = FeedForward(cfg.emb_size, cfg.ff_size)
        self.subs = nn.ModuleList(Sublayer(cfg.emb_size, cfg.dropout) for _ in range(3))

    def forward(self, x: Tensor, self_k: Tensor, self_v: Tensor, self_mask: Tensor,
                cross_k: Tensor, cross_v: Tensor, cross_mask: Tensor, need_weights: bool
                ) -> tuple[Tensor, Tensor | None]:
        x = self.subs[0](x, self.self_attn(x, self_k, self_v, self_mask, False)[0])
        y, weights = self.cross(x, cross_k, cross_v, cross_mask, need_weights)
        x = self.subs[1](x, y)
        return self.subs[2](x, self.ff(x)), weights


class Transformer(Seq2Seq):
    """Encoder-decoder Transformer; `step` reuses cached self-attention keys/values
    and cross-attention keys/values computed once in `encode`."""

    initial_positions = 1024  # the sinusoid table doubles on demand: no length limit
    # Read naively (the cross-attention of the step that predicts the word). Chen et al.
    # (2020) read large models shifted; naive won here when measured:
    # docs/experiments/2026-11-30-choosing-the-defaults.md ("Transformer reading").
    alignment_reading = "naive"

    def __init__(self, src_vocab: int, tgt_vocab: int, cfg: ModelConfig, joint: bool,
                 local: LocalConfig = LocalConfig()):
        super().__init__(src_vocab, tgt_vocab, cfg.emb_size, cfg.tie_embeddings)
        D = cfg.emb_size
        self.cfg, self.scale = cfg, math.sqrt(D)
        self.tgt_embed = nn.Embedding(tgt_vocab, D, padding_idx=PAD)
        self.src_embed = (self.tgt_embed if joint and cfg.tie_embeddings
                          else nn.Embedding(src_vocab, D, padding_idx=PAD))
        for emb in (self.src_embed, self.tgt_embed):
            nn.init.normal_(emb.weight, std=D ** -0.5)
        self.register_buffer("pe", sinusoids(self.initial_positions, D), persistent=False)
        self.enc_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.enc_layers))
        self.dec_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.dec_layers))
        self.drop = nn.Dropout(cfg.dropout)
        self.tie_weights(self.tgt_embed)

    def _embed(self, emb: nn.Embedding, ids: Tensor, offset: Tensor | int = 0,
               end: int | None = None, vectors: Tensor | None = None) -> Tensor:
        """Scaled embeddings (`vectors` instead of emb(ids) when given) plus positions
        offset..; `end` bounds the last position + 1."""
        self._grow_positions(end or ids.size(1))
        positions = torch.arange(ids.size(1), device=ids.device) + offset  # (T,) or (B, T)
        vectors = emb(ids) if vectors is None else vectors
        return self.drop(vectors * self.scale + self.pe[positions])

    def _grow_positions(self, length: int) -> None:
        """Extend the (deterministic) sinusoid table to at least `length` rows."""
        if length > self.pe.size(0):
            size = max(length, 2 * self.pe.size(0))
            self.pe = sinusoids(size, self.pe.size(1)).to(self.pe.device)

    def embed_source(self, src: Tensor) -> Tensor:
        return self.src_embed(src)  # (B, S, D), unscaled

    def encode(self, src: Tensor, src_emb: Tensor | None = None) -> State:
        mask = src != PAD  # (B, S)
        x = self._embed(self.src_embed, src, vectors=src_emb)
        attn_mask = mask[:, None, None, :]  # (B, 1, 1, S)
        for layer in self.enc_layers:
            x = layer(x, attn_mask)
        enc = {"mask": mask}
        for i, layer in enumerate(self.dec_layers):
            enc[f"k{i}"], enc[f"v{i}"] = layer.cross.keys_values(x)  # (B, h, S, d)
        return enc

    def decode_features(self, enc: State, tgt_in: Tensor, need_attn: bool = False,
                        causal: bool = True):
        T = tgt_in.size(1)
        # Causal mask (1, 1, T, T). Padding sits only at the end of tgt_in, after every
        # real position, so the causal mask already keeps it from real queries. Without
        # `causal` (full_context_attention) every real target position may be attended.
        if causal:
            self_mask = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).tril()[None, None]
        else:
            self_mask = (tgt_in != PAD)[:, None, None, :]
        cross_mask = enc["mask"][:, None, None, :]
        x, attns = self._embed(self.tgt_embed, tgt_in), []
        for i, layer in enumerate(self.dec_layers):
            k, v = layer.self_attn.keys_values(x)
            x, w = layer(x, k, v, self_mask, enc[f"k{i}"], enc[f"v{i}"], cross_mask, need_attn)
            attns.append(w)
        return x, (torch.stack(attns, 1) if need_attn else None)  # (B, L, h, T, S)

    def full_context_attention(self, enc: State, tgt_in: Tensor) -> Tensor:
        """Garg et al. (2019)'s full target context: the decoder run without its causal
        mask, so row t's cross-attention has seen target piece t (and the rest)."""
        return self.decode_features(enc, tgt_in, True, causal=False)[1]

    def init_state(self, enc: State) -> State:
        B = enc["mask"].size(0)
        state = {"pos": torch.zeros(B, 1, dtype=torch.long, device=enc["mask"].device)}
        heads, d = self.cfg.heads, self.cfg.emb_size // self.cfg.heads
        for i in range(len(self.dec_layers)):
            state[f"k{i}"] = enc[f"k{i}"].new_zeros(B, heads, 0, d)
            state[f"v{i}"] = enc[f"v{i}"].new_zeros(B, heads, 0, d)
        return state

    def step_features(self, prev: Tensor, state: State, enc: State):
        t = state["k0"].size(2)  # steps so far, the same for every row
        x = self._embed(self.tgt_embed, prev.unsqueeze(1), state["pos"], end=t + 1)  # (B, 1, D)
        new = {"pos": state["pos"] + 1}
        cross_mask, attns = enc["mask"][:, None, None, :], []
        for i, layer in enumerate(self.dec_layers):
            k, v = layer.self_attn.keys_values(x)
            new[f"k{i}"] = torch.cat([state[f"k{i}"], k], dim=2)  # (B, h, t+1, d)
            new[f"v{i}"] = torch.cat([state[f"v{i}"], v], dim=2)
            self_mask = torch.ones(1, 1, 1, new[f"k{i}"].size(2), dtype=torch.bool,
                                   device=x.device)
            x, w = layer(x, new[f"k{i}"], new[f"v{i}"], self_mask, enc[f"k{i}"], enc[f"v{i}"],
                         cross_mask, True)
            attns.append(w[:, :, 0])  # (B, h, S)
        return x.squeeze(1), new, torch.stack(attns, 1)  # attention (B, L, h, S)
