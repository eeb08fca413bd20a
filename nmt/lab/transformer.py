"""The Transformer's order and memory: permutation, positions, kv-cache.

Everything runs the project's own modules (nmt.models.transformer): an
`EncoderLayer`, the `sinusoids` table the model adds to its embeddings, and a
small randomly initialised `Transformer` whose cached `step` is compared with
its teacher-forced `decode_features`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
from torch import Tensor

from nmt.core.config import ModelConfig
from nmt.core.tokens import BOS, EOS
from nmt.lab.base import Result, draw, new_figure
from nmt.models.transformer import EncoderLayer, Transformer, sinusoids

TINY = ModelConfig(family="transformer", emb_size=16, heads=2, ff_size=32, dropout=0.0)
SMALL = ModelConfig(family="transformer", emb_size=128, heads=4, ff_size=256, enc_layers=2,
                    dec_layers=2, dropout=0.0)
VOCAB = 60
LENGTHS = (16, 32, 64, 128, 256)  # kv-cache: tokens generated per timing


def small_transformer(seed: int = 0) -> Transformer:
    """A randomly initialised 2+2-layer Transformer in eval mode (no dropout)."""
    torch.manual_seed(seed)
    return Transformer(VOCAB, VOCAB, SMALL, joint=False).eval()


@torch.no_grad()
def _equivariance_error(layer: EncoderLayer, x: Tensor, perm: Tensor, positions: bool,
                        causal: bool) -> tuple[float, Tensor, Tensor]:
    """max |F(P x) - P F(x)| for one encoder layer; x (1, T, D), perm (T,)."""
    T, D = x.shape[1], x.shape[2]
    pe = sinusoids(T, D).to(x.dtype) if positions else torch.zeros(T, D, dtype=x.dtype)
    mask = torch.ones(1, 1, T, T, dtype=torch.bool)
    if causal:
        mask = mask.tril()
    out = layer(x + pe, mask)  # (1, T, D)
    out_perm = layer(x[:, perm] + pe, mask)
    return float((out_perm - out[:, perm]).abs().max()), out[0], out_perm[0]


def permutation(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """Self-attention without positions and mask is permutation-equivariant; positions
    or a causal mask break it ("I love you" vs "you love I": same bag, other order)."""
    torch.manual_seed(0)
    layer = EncoderLayer(TINY).double().eval()
    gen = torch.Generator().manual_seed(1)
    words = torch.randn(1, 3, TINY.emb_size, generator=gen, dtype=torch.float64)  # I love you
    reverse = torch.tensor([2, 1, 0])
    seqs = torch.randn(10, 1, 6, TINY.emb_size, generator=gen, dtype=torch.float64)
    perms = [torch.randperm(6, generator=gen) for _ in range(10)]
    rows = []
    for label, positions, causal in (("no positions, no mask", False, False),
                                     ("+ sinusoidal positions", True, False),
                                     ("+ causal mask", False, True)):
        err, out, out_rev = _equivariance_error(layer, words, reverse, positions, causal)
        rand = max(_equivariance_error(layer, s, p, positions, causal)[0]
                   for s, p in zip(seqs, perms))
        # the vector of "I": position 0 in "I love you", position 2 in "you love I"
        rows.append([label, err, rand, float((out[0] - out_rev[2]).abs().max())])
    passed = rows[0][1] < 1e-6 and rows[0][2] < 1e-6 and min(r[2] for r in rows[1:]) > 1e-3
    check = (f"without positions or mask |F(Px) - P F(x)| <= {max(rows[0][1:3]):.1e}; with "
             f"positions it is {rows[1][2]:.2f}, with a causal mask {rows[2][2]:.2f}")
    figure = draw(lambda: _plot_permutation(rows), out_dir, "permutation", fmt)
    return Result("permutation", ["setting", "I love you -> you love I",
                                  "10 random permutations of 6", "|out('I') - out('I')|"],
                  rows, [figure], passed, check,
                  {"error_plain": max(rows[0][1:3]), "error_positions": rows[1][2],
                   "error_causal": rows[2][2]},
                  ["float64, one EncoderLayer (d = 16, 2 heads), random inputs; the last column "
                   "compares the output vector of 'I' in the two sentences"])


def _plot_permutation(rows):
    fig, (ax,) = new_figure(1, width=6.0)
    x = torch.arange(len(rows)).numpy()
    for k, (col, label) in enumerate(((1, "'I love you' reversed"), (2, "random permutations"))):
        ax.bar(x + (k - 0.5) * 0.35, [max(r[col], 1e-18) for r in rows], 0.35, label=label)
    ax.set_xticks(x.tolist(), [r[0] for r in rows])
    ax.axhline(1e-6, color="gray", ls="--", label="1e-6")
    ax.set_yscale("log")
    ax.set_ylabel("max |F(P x) - P F(x)|")
    ax.set_title("one encoder layer: does permuting the input just permute the output?")
    ax.legend()
    return fig


def rotation(k: int, dim: int) -> Tensor:
    """M_k (D, D), block-diagonal: PE(p + k) = PE(p) @ M_k for the sin/cos pairs.

    With w_i = 10000^(-2i/D): [sin w(p+k), cos w(p+k)] = [sin wp, cos wp] @
    [[cos wk, -sin wk], [sin wk, cos wk]].
    """
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float64) * (-math.log(10000.0) / dim))
    m = torch.zeros(dim, dim, dtype=torch.float64)
    for i, w in enumerate(freq.tolist()):
        c, s = math.cos(w * k), math.sin(w * k)
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    return m


def positions(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """For a fixed offset k, PE(p + k) is one linear map (a rotation per frequency pair)
    of PE(p), the same for every p; checked on the model's own float32 table."""
    dim = 16
    table = sinusoids(1024, dim).double()
    rows = []
    for k in (1, 4, 16, 64):
        m = rotation(k, dim)
        errs = [float((table[k:n + k] - table[:n] @ m).abs().max()) for n in (128, 1024 - k)]
        rows.append([k, errs[0], errs[1], float((m @ m.T - torch.eye(dim)).abs().max())])
    worst = max(r[1] for r in rows)
    passed = worst < 1e-5 and max(r[3] for r in rows) < 1e-12
    check = (f"PE(p + k) = PE(p) M_k for every p < 128 to {worst:.1e} (k = 1, 4, 16, 64), "
             f"M_k orthogonal; up to p = 1023 the float32 table drifts to "
             f"{max(r[2] for r in rows):.1e}")
    figure = draw(lambda: _plot_positions(table[:64], rotation(4, dim)), out_dir, "positions", fmt)
    return Result("positions", ["offset k", "max err, p < 128", "max err, p < 1024 - k",
                                "|M M^T - I|"], rows, [figure], passed, check,
                  {"max_error_128": worst},
                  ["the error comes from the float32 table (angles p * w rounded), not the map"])


def _plot_positions(table: Tensor, m: Tensor):
    fig, (ax, ax2) = new_figure(2)
    im = ax.imshow(table.T.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xlabel("position p")
    ax.set_ylabel("dimension (sin, cos pairs)")
    ax.set_title("sinusoids(64, 16): the model's table")
    fig.colorbar(im, ax=ax)
    im2 = ax2.imshow(m.numpy(), cmap="RdBu_r", vmin=-1, vmax=1)
    ax2.set_title("M_4: PE(p + 4) = PE(p) M_4, every p")
    ax2.set_xlabel("output dimension")
    ax2.set_ylabel("input dimension")
    fig.colorbar(im2, ax=ax2)
    return fig


@torch.no_grad()
def generate(model: Transformer, src: Tensor, length: int, cached: bool) -> tuple[Tensor, Tensor]:
    """Greedy generation of exactly `length` tokens (EOS not special), one sentence.

    cached: the model's `step` (keys/values of the prefix kept in the state);
    otherwise `decode_features` re-runs the whole prefix at every step.
    Returns tokens (length,) and their log-probability rows (length, V).
    """
    enc = model.encode(src)
    state = model.init_state(enc)
    prefix = torch.full((1, 1), BOS, dtype=torch.long)
    rows = []
    for _ in range(length):
        if cached:
            log_probs, state, _ = model.step(prefix[:, -1], state, enc)
        else:
            features, _ = model.decode_features(enc, prefix)
            log_probs = torch.log_softmax(model.logits(features[:, -1]).float(), -1)
        rows.append(log_probs[0])
        prefix = torch.cat([prefix, log_probs.argmax(-1, keepdim=True)], 1)
    return prefix[0, 1:], torch.stack(rows)


def kv_cache(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """Cached incremental decoding gives the log-probabilities of recomputing the prefix,
    at a per-token cost that stays flat instead of growing with the length."""
    model = small_transformer()
    gen = torch.Generator().manual_seed(2)
    src = torch.cat([torch.randint(4, VOCAB, (1, 19), generator=gen), torch.tensor([[EOS]])], 1)
    tokens, cached = generate(model, src, 64, cached=True)
    tokens_re, recomputed = generate(model, src, 64, cached=False)
    forced = torch.log_softmax(model(src, torch.cat([torch.tensor([BOS]), tokens[:-1]])[None])[0]
                               .float(), -1)[0].detach()
    diff = float((cached - recomputed).abs().max())
    diff_forced = float((cached - forced).abs().max())
    _time_per_token(model, src, 8)  # warm-up: first calls allocate
    rows = [[length, *_time_per_token(model, src, length)] for length in LENGTHS]
    rows = [r + [r[2] / r[1]] for r in rows]
    passed = diff < 1e-5 and diff_forced < 1e-5 and bool((tokens == tokens_re).all())
    check = (f"over 64 greedy steps the cached log-probs match recomputing the prefix to "
             f"{diff:.1e} (and one teacher-forced pass to {diff_forced:.1e}); same tokens")
    figure = draw(lambda: _plot_kv(rows), out_dir, "kv_cache", fmt)
    return Result("kv-cache", ["tokens generated", "ms/token cached", "ms/token recompute",
                               "recompute / cached"], rows, [figure], passed, check,
                  {"max_diff": diff, "max_diff_forced": diff_forced},
                  [f"random 2+2-layer Transformer (d = {SMALL.emb_size}), one 20-token source; "
                   "wall-clock on one thread, best of 2 runs"])


def _time_per_token(model: Transformer, src: Tensor, length: int) -> list[float]:
    """ms per generated token, cached and recomputed: best of 2 runs on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = []
        for use_cache in (True, False):
            best = math.inf
            for _ in range(2):
                tick = time.perf_counter()
                generate(model, src, length, cached=use_cache)
                best = min(best, 1000 * (time.perf_counter() - tick) / length)
            out.append(best)
        return out
    finally:
        torch.set_num_threads(threads)


def _plot_kv(rows):
    fig, (ax,) = new_figure(1, width=5.5)
    lengths = [r[0] for r in rows]
    ax.plot(lengths, [r[1] for r in rows], "o-", label="with the cache (step)")
    ax.plot(lengths, [r[2] for r in rows], "s-", label="recompute the prefix (decode_features)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens generated")
    ax.set_ylabel("ms per generated token")
    ax.set_title("per-token cost: flat with the cache, growing without")
    ax.legend()
    return fig
