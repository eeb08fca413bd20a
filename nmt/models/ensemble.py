"""Ensembles through the one step contract: search drives an `Ensemble` as it drives any
family, and the ensemble's step is the mean of its members' log-probabilities,
renormalised (a product of experts: log softmax of the mean)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from torch import Tensor, nn

from nmt.core.errors import NMTError
from nmt.models.base import Seq2Seq, State


def _split(tree: State, k: int) -> State:
    prefix = f"m{k}."
    return {key[len(prefix):]: v for key, v in tree.items() if key.startswith(prefix)}


class Ensemble(Seq2Seq):
    """Members of one vocabulary; encoder outputs and states are their members' dicts
    under prefixed keys ("m0.", "m1.", ...), so the shared `reorder` serves them too.
    `step` averages the members' per-step log-probabilities and renormalises them, so an
    ensemble of a run with itself is the run."""

    alignment_reading = "naive"

    def __init__(self, members: list[Seq2Seq]):
        nn.Module.__init__(self)
        self.members = nn.ModuleList(members)
        self.has_attention = all(m.has_attention for m in members)

    def encode(self, src: Tensor, src_emb: Tensor | None = None) -> State:
        enc = {"mask": None}
        for k, member in enumerate(self.members):
            part = member.encode(src)
            enc.update({f"m{k}.{key}": v for key, v in part.items()})
            enc["mask"] = part["mask"]
        return enc

    def init_state(self, enc: State) -> State:
        state = {}
        for k, member in enumerate(self.members):
            state.update({f"m{k}.{key}": v
                          for key, v in member.init_state(_split(enc, k)).items()})
        return state

    @torch.no_grad()
    def step(self, prev: Tensor, state: State, enc: State) -> tuple[Tensor, State, Tensor | None]:
        new, log_probs = {}, []
        for k, member in enumerate(self.members):
            lp, part, _ = member.step(prev, _split(state, k), _split(enc, k))
            log_probs.append(lp)
            new.update({f"m{k}.{key}": v for key, v in part.items()})
        return torch.log_softmax(torch.stack(log_probs).mean(0), -1), new, None

    def forward(self, src: Tensor, tgt_in: Tensor, need_attn: bool = False,
                select: Tensor | None = None, src_emb: Tensor | None = None,
                full_context: bool = False):
        """Teacher forcing: the mean of the members' log-probabilities as logits (their log
        softmax is `step`'s renormalised mean) and the members' mean attention (over
        layers and heads, then members) when all have it."""
        outs = [m(src, tgt_in, need_attn, select, src_emb, full_context) for m in self.members]
        log_probs = torch.stack([torch.log_softmax(o[0].float(), -1) for o in outs]).mean(0)
        attn = (torch.stack([o[1].mean((1, 2), keepdim=True) for o in outs]).mean(0)
                if need_attn and all(o[1] is not None for o in outs) else None)
        return log_probs, attn, None

    def embed_source(self, src: Tensor) -> Tensor:
        raise NMTError("saliency needs one model's source embeddings; align each run "
                       "separately (nmt align --run A --run B --ensemble pools their maps)")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_same_vocab(runs: list[tuple[Path, object]]) -> None:
    """Members must share their SentencePiece models byte for byte."""
    first_path, first = runs[0]
    want = [_digest(p) for p in first.paths]
    for path, vocab in runs[1:]:
        if [_digest(p) for p in vocab.paths] != want:
            raise NMTError(f"{path}: its vocabulary ({vocab.paths[0].parent}) differs from "
                           f"{first_path}'s; an ensemble needs runs trained with the same "
                           "SentencePiece models (same corpus and vocab settings)")
