"""Adapt a copy of a model to the sentences being aligned, as statistical aligners train
on the text they align. The run itself (its checkpoint, the model passed in) is never
changed: training happens on a deep copy.

The copy trains with the run's own objective (`nmt.training.trainer.loss_fn`, label-smoothed cross
entropy per target token plus the auxiliary loss its forward pass returns, the run's
gradient clipping and batch size in tokens), with the trainer's optimiser
(`nmt.training.optim.build_optimizer`) at a small constant learning rate, dropout on (train mode);
it is returned in eval mode. A guided run keeps its guidance (`guided`, with `guides`:
each pair's piece targets, nmt.align.guided.pair_guides).
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass

import torch

from nmt.core.config import GuidedConfig, TrainConfig
from nmt.core.errors import NMTError
from nmt.data.batching import iterate_batches, token_batches
from nmt.models.base import Seq2Seq
from nmt.training.loss import loss_fn
from nmt.training.optim import build_optimizer

# Chosen on the synthetic validation gold (docs/experiments/, choosing the defaults).
DEFAULT_LR = 1e-3


@dataclass(frozen=True)
class Adaptation:
    """What `adapt_copy` did: steps, wall seconds, lr, and the mean per-token training
    loss of the first and the last step; `teacher_seconds`: what the guides took to make
    (eflomal's fit for a guided run, set by the caller), not in `seconds`."""

    steps: int
    seconds: float
    lr: float
    loss_first: float
    loss_last: float
    teacher_seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def _batches(src_ids: list, tgt_ids: list, batch_tokens: int, seed: int,
             guides: list | None = None):
    """Endless length-bucketed batches of the non-empty pairs, reshuffled every epoch
    (with `guides`, each batch carries its pairs' teacher targets)."""
    keep = [i for i, (s, t) in enumerate(zip(src_ids, tgt_ids)) if len(s) > 1 and len(t) > 0]
    if not keep:
        raise NMTError("--adapt: no sentence pair has both a source and a target to train on")
    lengths = [(len(s), len(t)) for s, t in zip(src_ids, tgt_ids)]
    epoch = 0
    while True:
        yield from iterate_batches(src_ids, tgt_ids,
                                   token_batches(lengths, batch_tokens, seed + epoch, keep),
                                   guides)
        epoch += 1


def adapting(model: Seq2Seq, src_ids: list, tgt_ids: list, lr: float, train: TrainConfig,
             seed: int = 0, guided: GuidedConfig | None = None, guides: list | None = None):
    """Fine-tune a deep copy of `model` on the pairs, one optimiser step per iteration:
    yields `(copy, loss)` after every step, always the same copy. A caller may switch it
    to eval mode to read it; the next step switches it back to train mode. `model` itself
    is never touched."""
    if lr <= 0:
        raise NMTError(f"--adapt-lr {lr}: need lr > 0")
    tuned = copy.deepcopy(model).train()
    device = next(tuned.parameters()).device
    optim = build_optimizer(tuned, lr)
    # manual_seed reseeds every device: fork them all, so the caller's CPU and CUDA
    # generators come back as they were (dropout draws here disturb neither)
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        for batch in _batches(list(src_ids), list(tgt_ids), train.batch_tokens, seed, guides):
            tuned.train()
            loss = loss_fn(tuned, batch.to(device), train.label_smoothing,
                           guided if guides is not None else None) / batch.n_tokens
            loss.backward()
            if train.clip:
                torch.nn.utils.clip_grad_norm_(tuned.parameters(), train.clip)
            optim.step()
            optim.zero_grad(set_to_none=True)
            yield tuned, loss.item()


def adapt_copy(model: Seq2Seq, src_ids: list, tgt_ids: list, steps: int, lr: float,
               train: TrainConfig, seed: int = 0, guided: GuidedConfig | None = None,
               guides: list | None = None) -> tuple[Seq2Seq, Adaptation]:
    """A deep copy of `model` fine-tuned for `steps` optimiser steps on the pairs
    (src ids end in EOS, tgt ids do not), guided by `guides` when given; the copy comes
    back in eval mode."""
    if steps < 1 or lr <= 0:
        raise NMTError(f"--adapt {steps} / --adapt-lr {lr}: need at least 1 step and lr > 0")
    start = time.perf_counter()
    losses = []
    for _, (tuned, loss) in zip(range(steps), adapting(model, src_ids, tgt_ids, lr, train, seed,
                                                          guided, guides)):
        losses.append(loss)
    tuned.eval()
    return tuned, Adaptation(steps, time.perf_counter() - start, lr, losses[0], losses[-1])
