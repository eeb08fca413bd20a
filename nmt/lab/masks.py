"""Why the Transformer needs its two masks (experiment: masks).

Padding mask: a short sentence batched with a long one must read exactly what
it reads alone. Causal mask: a decoder trained without it "sees the answer" (the
next target word is in its input), so its training loss collapses while free
decoding, where no future exists, gets no better. The model is the project's
`Transformer`; the unmasked variants only drop a mask, they change no code path.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.core.config import ModelConfig
from nmt.core.tokens import BOS, EOS, PAD, UNK
from nmt.data.batching import pad
from nmt.data.corpora import SYNTH_PAIR, load_split
from nmt.decoding.evaluate import bleu_chrf
from nmt.decoding.search import greedy
from nmt.lab.base import Result, draw, new_figure
from nmt.lab.transformer import VOCAB, small_transformer
from nmt.models.transformer import Transformer

DATA_ROOT = Path("data")  # where the synthetic corpus is generated (as `nmt data synth`)
TRAIN_CFG = ModelConfig(family="transformer", emb_size=64, heads=4, ff_size=128, enc_layers=1,
                        dec_layers=1, dropout=0.0)
STEPS, BATCH, MAX_WORDS = 300, 32, 12


@torch.no_grad()
def encoder_states(model: Transformer, src: Tensor, use_mask: bool = True) -> Tensor:
    """The encoder output (B, S, D) that `Transformer.encode` computes, with or without
    the padding mask (without: every position, padding included, may take weight)."""
    mask = (src != PAD) if use_mask else torch.ones_like(src, dtype=torch.bool)
    x = model._embed(model.src_embed, src)
    for layer in model.enc_layers:
        x = layer(x, mask[:, None, None, :])
    return x


@torch.no_grad()
def _pad_mass(model: Transformer, src: Tensor) -> float:
    """Weight the real positions of row 0 put on padding in layer 1, without the mask."""
    x = model._embed(model.src_embed, src)
    attn = model.enc_layers[0].attn
    k, v = attn.keys_values(x)
    _, w = attn(x, k, v, torch.ones(1, 1, 1, src.size(1), dtype=torch.bool), True)
    real = src[0] != PAD
    return float(w[0][:, real][..., ~real].sum(-1).mean())  # (h, T_real, S_pad) -> mean


def padding_rows(model: Transformer) -> tuple[list[list[float]], float]:
    """Short sentence alone vs batched with a longer one, for 0..16 padding positions."""
    gen = torch.Generator().manual_seed(4)
    short = torch.randint(4, VOCAB, (5,), generator=gen).tolist() + [EOS]
    alone = encoder_states(model, torch.tensor([short]))[0]
    rows = []
    for pads in (0, 2, 4, 8, 16):
        longer = torch.randint(4, VOCAB, (5 + pads,), generator=gen).tolist() + [EOS]
        batch = pad([short, longer])  # (2, 6 + pads): the short row ends in `pads` PADs
        with_mask = encoder_states(model, batch)[0, :len(short)]
        without = encoder_states(model, batch, use_mask=False)[0, :len(short)]
        rows.append([pads, float((with_mask - alone).abs().max()),
                     float((without - alone).abs().max()), _pad_mass(model, batch)])
    # The helper must be what `encode` computes: compare the cross-attention keys.
    batch = pad([short, short + short[:-1]])
    keys = model.dec_layers[0].cross.keys_values(encoder_states(model, batch))[0]
    agree = float((keys - model.encode(batch)["k0"]).abs().max().detach())
    return rows, agree


class Unmasked(nn.Module):
    """Wraps a decoder self-attention and drops its mask: every target position may
    read every other one, the future included."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        return self.inner.keys_values(memory)

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor, need_weights: bool):
        return self.inner(x, k, v, torch.ones_like(mask), need_weights)


def peeking(model: Transformer) -> Transformer:
    """A copy of `model` whose decoder self-attention ignores the causal mask."""
    other = copy.deepcopy(model)
    for layer in other.dec_layers:
        layer.self_attn = Unmasked(layer.self_attn)
    return other


@dataclass
class WordCorpus:
    """Synthetic sentence pairs as word ids (0-3 are PAD/UNK/BOS/EOS); sources end in EOS."""

    train: list[tuple[list[int], list[int]]]
    test: list[tuple[list[int], list[int]]]
    src_size: int
    tgt_words: list[str]  # id -> target word


@torch.no_grad()
def future_leak(model: Transformer, src: list[int], tgt: list[int]) -> float:
    """How much the logits at positions < t move when only the input word at t changes
    (teacher forcing): 0 when the decoder cannot see the future."""
    model.eval()
    tgt_in = pad([tgt], prefix=BOS)  # (1, T)
    changed = tgt_in.clone()
    changed[0, -1] = BOS if changed[0, -1] != BOS else EOS
    src_t = torch.tensor([src])
    before, after = model(src_t, tgt_in)[0], model(src_t, changed)[0]
    return float((before[0, :-1] - after[0, :-1]).abs().max())


def word_corpus(root: Path) -> WordCorpus:
    """The synthetic corpus (generated by `ensure_synth` if missing), sentences of at most
    MAX_WORDS source words, with a word vocabulary built from its training split."""

    splits = {s: load_split(root, "synth", SYNTH_PAIR, s) for s in ("train", "test")}
    vocab: list[dict[str, int]] = [{}, {}]
    for src, tgt in zip(*splits["train"]):
        for side, line in enumerate((src, tgt)):
            for word in line.split():
                vocab[side].setdefault(word, len(vocab[side]) + 4)
    encoded = {split: [([vocab[0].get(w, UNK) for w in s.split()] + [EOS],
                        [vocab[1].get(w, UNK) for w in t.split()])
                       for s, t in zip(srcs, tgts) if len(s.split()) <= MAX_WORDS]
               for split, (srcs, tgts) in splits.items()}
    words = ["<pad>", "<unk>", "<s>", "</s>"] + list(vocab[1])
    return WordCorpus(encoded["train"], encoded["test"], len(vocab[0]) + 4, words)


def train_tiny(model: Transformer, pairs: list[tuple[list[int], list[int]]], steps: int,
               seed: int) -> list[float]:
    """Plain Adam on cross-entropy (no smoothing), BATCH random pairs per step; the seed
    fixes the batches, so two models trained with one seed see the same data."""
    rng = random.Random(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    model.train()
    for _ in range(steps):
        chunk = rng.sample(pairs, BATCH)
        tgt_in = pad([t for _, t in chunk], prefix=BOS)
        tgt_out = pad([t for _, t in chunk], suffix=EOS)
        logits, _, _ = model(pad([s for s, _ in chunk]), tgt_in)  # (B, T, V)
        loss = F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def evaluate_tiny(model: Transformer, corpus: WordCorpus, n: int = 200) -> tuple[float, float]:
    """Teacher-forced next-word accuracy and greedy-decoding BLEU on n test sentences."""

    model.eval()
    pairs = corpus.test[:n]
    src = pad([s for s, _ in pairs])
    tgt_out = pad([t for _, t in pairs], suffix=EOS)
    logits, _, _ = model(src, pad([t for _, t in pairs], prefix=BOS))
    real = tgt_out != PAD
    accuracy = float((logits.argmax(-1) == tgt_out)[real].float().mean())
    hyps = [" ".join(corpus.tgt_words[i] for i in ids) for ids in greedy(model, src)]
    refs = [" ".join(corpus.tgt_words[i] for i in t) for _, t in pairs]
    return accuracy, bleu_chrf(hyps, refs)["bleu"]


def masks(out_dir: Path, fmt: str, run: list[Path] | None = None) -> Result:
    """Padding mask: batched = alone. Causal mask: without it training loss collapses
    while free decoding gets no better."""
    pad_rows, agree = padding_rows(small_transformer())
    corpus = word_corpus(DATA_ROOT)
    torch.manual_seed(0)
    causal = Transformer(corpus.src_size, len(corpus.tgt_words), TRAIN_CFG, joint=False)
    peek = peeking(causal)
    leak = {name: future_leak(m, *corpus.test[0]) for name, m in (("causal", causal),
                                                                   ("peeking", peek))}
    curves = {name: train_tiny(m, corpus.train, STEPS, seed=1)
              for name, m in (("causal", causal), ("peeking", peek))}
    scores = {name: evaluate_tiny(m, corpus) for name, m in (("causal", causal), ("peeking", peek))}
    final = {name: sum(c[-10:]) / 10 for name, c in curves.items()}
    rows: list[list] = [[f"short sentence, {r[0]} PADs: max |batched - alone|", r[1], r[2]]
                        for r in pad_rows]
    rows.append([f"weight on padding ({pad_rows[-1][0]} PADs, layer 1)", 0.0, pad_rows[-1][3]])
    rows.append(["logits before t move when input t changes", leak["causal"], leak["peeking"]])
    rows.append([f"training loss, last 10 of {STEPS} steps", final["causal"], final["peeking"]])
    rows.append(["teacher-forced accuracy (test)", scores["causal"][0], scores["peeking"][0]])
    rows.append(["greedy decoding BLEU (test)", scores["causal"][1], scores["peeking"][1]])
    worst_with = max(r[1] for r in pad_rows)
    passed = (worst_with < 1e-5 and min(r[2] for r in pad_rows[1:]) > 1e-3 and agree < 1e-5
              and leak["causal"] == 0 and leak["peeking"] > 1e-3
              and final["peeking"] < 0.5 * final["causal"]
              and scores["peeking"][1] <= scores["causal"][1] + 1.0)
    check = (f"with the padding mask the short sentence reads what it reads alone (max "
             f"|diff| {worst_with:.1e}); without it the output moves by up to "
             f"{pad_rows[-1][2]:.2f}; the decoder trained without the causal mask ends at loss "
             f"{final['peeking']:.2f} vs {final['causal']:.2f}, yet decodes at BLEU "
             f"{scores['peeking'][1]:.1f} vs {scores['causal'][1]:.1f}")
    figure = draw(lambda: _plot(pad_rows, curves, scores), out_dir, "masks", fmt)
    return Result("masks", ["measurement", "with the mask", "without the mask"], rows, [figure],
                  passed, check,
                  {"padding_with_mask": worst_with, "padding_without_mask": pad_rows[-1][2],
                   "loss_causal": final["causal"], "loss_peeking": final["peeking"],
                   "leak_causal": leak["causal"], "leak_peeking": leak["peeking"],
                   "bleu_causal": scores["causal"][1], "bleu_peeking": scores["peeking"][1]},
                  [f"padding: random 2+2-layer Transformer; causal: two 1+1-layer Transformers "
                   f"(d = {TRAIN_CFG.emb_size}) from one initialisation, trained {STEPS} steps on "
                   f"the same {BATCH}-sentence batches of the synthetic corpus (sources of at "
                   f"most {MAX_WORDS} words)"])


def _plot(pad_rows, curves, scores):
    fig, (ax, ax2) = new_figure(2)
    pads = [r[0] for r in pad_rows]
    ax.plot(pads, [max(r[1], 1e-9) for r in pad_rows], "o-", label="with the padding mask")
    ax.plot(pads, [max(r[2], 1e-9) for r in pad_rows], "s-", label="without it")
    ax.set_yscale("log")
    ax.set_xlabel("PAD positions after the short sentence")
    ax.set_ylabel("max |batched - alone| (0 drawn at 1e-9)")
    ax.set_title("padding mask: batched = alone")
    ax.legend()
    for name, curve in curves.items():
        acc, bleu = scores[name]
        ax2.plot(curve, label=f"{name}: teacher-forced acc {acc:.0%}, greedy BLEU {bleu:.1f}")
    ax2.set_xlabel("training step")
    ax2.set_ylabel("training cross-entropy")
    ax2.set_title("causal mask: peeking learns to copy, not to translate")
    ax2.legend(fontsize=7)
    return fig
