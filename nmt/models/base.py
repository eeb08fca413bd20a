"""The one interface every family implements, and the one search uses.

- `encode(src, src_emb=None)` runs once per batch and returns a dict of batch-first
  tensors (always with `mask`, (B, S) bool, True = real source position); given
  `src_emb` (B, S, E), it runs from those source embeddings instead of looking
  them up (`embed_source(src)` gives the looked-up ones): the one hook gradient
  attributions need (nmt.align.attribution).
- `init_state(enc)` gives the decoder state before the first step: a dict of
  batch-first tensors.
- `step(prev, state, enc)` -> (log_probs (B, V), state, attention (B, L, H, S)).
- `reorder(tree, index)` selects rows of an encoder output or a state by beam
  index; because everything is batch-first, one function serves all families.
- `decode_features(enc, tgt_in)` is the teacher-forced decoder used in
  training and forced alignment: features (B, T, D) and attention
  (B, L, H, T, S) (L layers, H heads; 1 and 1 for the RNN families).

Training hooks, so that the trainer and `--adapt` never name a family's modules:
- `forward` returns, beside logits and attention, the family's auxiliary loss of that
  very pass (`decode_with_aux`), or None for the papers' models: nothing is kept on a
  module between a forward pass and the loss;
- `param_groups()` gives Adam's parameter groups (each may carry a learning-rate `scale`);
- `at_step(step)` is called before each optimiser step, for a training-time schedule;
- `full_context_attention(enc, tgt_in)`: the attention of a pass that sees the whole
  target (guided alignment's full-context reading; the Transformer only).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.core.errors import NMTError
from nmt.core.tokens import PAD

# Training's output layer runs on the real target positions padded to a multiple of ROWS
# rows: CPU bf16 kernels keep one cached primitive per matrix shape, and an unrounded
# row count (new with nearly every batch) grows that cache, and the process, all run long.
ROWS = 64

State = dict[str, Tensor]


def reorder(tree: State, index: Tensor) -> State:
    """Select rows (dim 0) of every tensor in an encoder output or decoder state."""
    return {key: value.index_select(0, index) for key, value in tree.items()}


class Seq2Seq(nn.Module):
    """Base class: subclasses define encode, init_state, step_features, decode_features."""

    has_attention = True
    # How `nmt align` reads this family's attention by default (nmt.align.words.reading):
    # "naive" (row t predicts piece t) or "shifted" (piece t read where it is the input).
    alignment_reading = "naive"

    def __init__(self, src_vocab: int, tgt_vocab: int, out_size: int, tie: bool):
        super().__init__()
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.out = nn.Linear(out_size, tgt_vocab)
        self.tie = tie

    def tie_weights(self, tgt_embedding: nn.Embedding) -> None:
        if self.tie:
            if tgt_embedding.weight.shape != self.out.weight.shape:
                raise ValueError("tied embeddings need emb size == output feature size")
            self.out.weight = tgt_embedding.weight

    def encode(self, src: Tensor, src_emb: Tensor | None = None) -> State:
        raise NotImplementedError

    def embed_source(self, src: Tensor) -> Tensor:
        """The source embeddings (B, S, E) that `encode` looks up (before any scaling,
        positions or dropout)."""
        raise NotImplementedError

    def init_state(self, enc: State) -> State:
        raise NotImplementedError

    def step_features(self, prev: Tensor, state: State, enc: State
                      ) -> tuple[Tensor, State, Tensor | None]:
        raise NotImplementedError

    def decode_features(self, enc: State, tgt_in: Tensor, need_attn: bool = False
                        ) -> tuple[Tensor, Tensor | None]:
        raise NotImplementedError

    def decode_with_aux(self, enc: State, tgt_in: Tensor, need_attn: bool = False
                        ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """`decode_features` plus the auxiliary loss terms per target position (B, T) of
        this pass, or None (the papers' models)."""
        return (*self.decode_features(enc, tgt_in, need_attn), None)

    def full_context_attention(self, enc: State, tgt_in: Tensor) -> Tensor:
        """Attention (B, L, H, T, S) of a teacher-forced pass that sees the whole target
        (guided.full_context); only a decoder without recurrence can be run so."""
        raise NMTError(f"{type(self).__name__}: full-context attention needs a decoder "
                       "that reads the whole target at once (the Transformer); drop "
                       "guided.full_context")

    def logits(self, features: Tensor) -> Tensor:
        return self.out(features)

    def param_groups(self) -> list[dict]:
        """Adam's parameter groups; a group's optional "scale" multiplies the learning rate."""
        return [{"params": list(self.parameters())}]

    def at_step(self, step: int) -> None:
        """Called by the trainer before optimiser step `step` (1-based); nothing by default."""

    @torch.no_grad()
    def step(self, prev: Tensor, state: State, enc: State) -> tuple[Tensor, State, Tensor | None]:
        """One decoder step: prev (B,) token ids -> log-probs (B, V), state, attention."""
        features, state, attn = self.step_features(prev, state, enc)
        return F.log_softmax(self.logits(features).float(), dim=-1), state, attn

    def forward(self, src: Tensor, tgt_in: Tensor, need_attn: bool = False,
                select: Tensor | None = None, src_emb: Tensor | None = None,
                full_context: bool = False) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Teacher forcing: logits (B, T, V), attention (B, L, H, T, S) or None, and the
        auxiliary loss of this pass summed over the real target positions (or None).

        With `select` (B, T) bool, logits (N, V) and the auxiliary loss only for those
        positions (else the positions where `tgt_in` is not PAD); with `src_emb`
        (B, S, E), the encoder runs from those source embeddings; with `full_context`,
        the attention returned is `full_context_attention`'s (the logits stay causal).
        """
        enc = self.encode(src, src_emb)
        features, attn, aux = self.decode_with_aux(enc, tgt_in, need_attn and not full_context)
        if full_context:
            attn = self.full_context_attention(enc, tgt_in)
        if aux is not None:
            aux = aux[tgt_in != PAD if select is None else select].sum()
        if select is None:
            return self.logits(features), attn, aux
        features = features[select]  # (N, D): a row count new with nearly every batch
        n = features.size(0)
        rows = -(-n // ROWS) * ROWS  # so the output layer sees few shapes (docs/architecture.md)
        logits = self.logits(F.pad(features, (0, 0, 0, rows - n)))
        return logits[:n], attn, aux

    reorder = staticmethod(reorder)


class RNNSeq2Seq(Seq2Seq):
    """Shared teacher forcing for step-wise RNN decoders: it loops over `step_embedded`,
    so training, forced alignment and search run exactly the same decoder code. A step
    may return its auxiliary loss terms (B,) in the new state under "aux"; they are taken
    out of the state and stacked into (B, T).

    A step's input is split in two: `embed_target(ids)` (the previous word's embedding,
    dropout included), which does not depend on the recurrence, and `step_embedded(emb,
    state, enc)`, the rest of the step. Teacher forcing embeds the whole target once,
    so the loop neither looks up nor drops out, and the embedding's gradient is one
    tensor rather than one per step; search embeds one word per step."""

    def embed_target(self, ids: Tensor) -> Tensor:
        """The decoder's input embeddings of `ids`, (B,) -> (B, E) or (B, T) -> (B, T, E)."""
        raise NotImplementedError

    def step_embedded(self, emb: Tensor, state: State, enc: State
                      ) -> tuple[Tensor, State, Tensor | None]:
        """`step_features` from the previous word's embedding `emb` (B, E)."""
        raise NotImplementedError

    def step_features(self, prev: Tensor, state: State, enc: State
                      ) -> tuple[Tensor, State, Tensor | None]:
        return self.step_embedded(self.embed_target(prev), state, enc)

    def decode_with_aux(self, enc: State, tgt_in: Tensor, need_attn: bool = False
                        ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        state = self.init_state(enc)
        embedded = self.embed_target(tgt_in)  # (B, T, E)
        features, attns, aux = [], [], []
        for t in range(tgt_in.size(1)):
            feat, state, attn = self.step_embedded(embedded[:, t], state, enc)
            features.append(feat)
            if "aux" in state:
                aux.append(state.pop("aux"))
            if need_attn and attn is not None:
                attns.append(attn)
        attn = torch.stack(attns, dim=3) if attns else None  # (B, L, H, T, S)
        return torch.stack(features, dim=1), attn, torch.stack(aux, 1) if aux else None

    def decode_features(self, enc: State, tgt_in: Tensor, need_attn: bool = False
                        ) -> tuple[Tensor, Tensor | None]:
        return self.decode_with_aux(enc, tgt_in, need_attn)[:2]
