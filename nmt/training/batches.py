"""What a training run trains on: the vocabulary, the encoded training and validation
splits (filtered by data.max_len, joined by data.concat), and what vocab.sampling_alpha
and guided alignment add to them."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.locks import file_lock
from nmt.core.scratch import sweep
from nmt.data.batching import filter_long, join_pairs
from nmt.data.pin import Pin, pin_corpus
from nmt.data.subwords import Vocab
from nmt.training import distributed as dist
from nmt.training.guided import guide_targets, teacher_links, write_teacher_links


@dataclass
class Data:
    vocab: Vocab
    train_src: Sequence  # the store's Ragged sides (nmt.data.store), this epoch's sampled
    train_tgt: Sequence  # store's (vocab.sampling_alpha), or a Joined view (data.concat)
    train_idx: Sequence[int]
    valid_src: Sequence  # the first train.valid_sentences of the validation store
    valid_refs: list[str]
    valid_tgt: Sequence
    pairs: int  # the corpus's training pairs, and those kept by data.max_len (before
    kept: int  # data.concat joins them into train_src/train_tgt)
    corpus: Pin | None = None  # what the run pinned: every read of the run's data is its
    # vocab.sampling_alpha: the kept pairs' line numbers, segmented anew each epoch from
    # the pinned text files (sampled_examples)
    sample_keep: np.ndarray | None = None
    # guided.weight: each training pair's piece targets (None: no links), the validation
    # pairs' teacher links, and how many training pairs the links did not fit
    train_guides: Sequence | None = None
    valid_links: list | None = None
    unguided: int = 0


def load_data(cfg: Config, resume: bool = False, quiet: bool = False) -> Data:
    """The run's pinned corpus (nmt.data.pin: made at its first start by rank 0, which also
    computes a teacher's links; read back on resume), its vocabulary and encoded splits.
    The pin's notes go to stderr unless `quiet`."""
    failed = None
    if dist.is_main():
        try:
            pin = pin_corpus(cfg, resume, (lambda text: None) if quiet else _note)
            if cfg.guided.weight:
                _pin_links(cfg, pin)
        except NMTError as exc:  # every rank stops with rank 0's one line, none waits on
            failed = exc
    failed = dist.broadcast(None if failed is None else str(failed))  # (also the barrier)
    if failed is not None:
        raise NMTError(failed)
    pin = Pin(cfg.run_dir)
    vocab = Vocab.from_dir(pin.vocab_dir)
    src, tgt = pin.store(cfg.data.train, vocab)
    keep = filter_long(src, tgt, cfg.data.max_len)
    if not len(keep):
        raise NMTError(f"no training pairs of at most data.max_len={cfg.data.max_len} subwords "
                       f"(of {len(src):,}); raise data.max_len")
    v_src, v_tgt = pin.store(cfg.data.valid, vocab)
    n = min(cfg.train.valid_sentences or len(v_src), len(v_src))
    refs = pin.refs(cfg.data.valid, n)  # the first n, not the whole split
    pairs, kept = len(src), len(keep)
    sample_keep = keep if cfg.vocab.sampling_alpha else None  # filtered on the best one
    if cfg.data.concat > 1:
        src, tgt = join_pairs(src, tgt, keep, cfg.data.concat, cfg.train.seed)
        keep = range(len(src))
    data = Data(vocab, src, tgt, keep, v_src[:n], refs[:n], v_tgt[:n], pairs, kept,
                pin, sample_keep)
    if cfg.guided.weight:
        _add_guides(cfg, data)
    return data


def _note(text: str) -> None:
    print(text, file=sys.stderr)


def _pin_links(cfg: Config, pin: Pin) -> None:
    """Guided training with eflomal or teacher runs: the teacher's links of the pinned text
    (computed once into the cache, under its lock), pinned beside it."""
    if cfg.guided.teacher == "gold" or pin.links(cfg.data.train) is not None:
        return
    pin.keep_links(write_teacher_links(cfg, corpus=pin), (cfg.data.train, cfg.data.valid))


def _add_guides(cfg: Config, d: Data) -> None:
    """guided.weight: the teacher's links (nmt.align.guided) as piece targets."""

    links = teacher_links(cfg, cfg.data.train, corpus=d.corpus)
    if len(links) != len(d.train_src):
        raise NMTError(f"the teacher's links cover {len(links)} training pairs but the "
                       f"corpus has {len(d.train_src)}: re-run `nmt data links`")
    d.train_guides, d.unguided = guide_targets(d.vocab, d.train_src, d.train_tgt, links,
                                                  cfg.guided.null_word)
    d.valid_links = teacher_links(cfg, cfg.data.valid, corpus=d.corpus)[:len(d.valid_src)]


def sampled_examples(cfg: Config, d: Data, epoch: int, folder: Path) -> tuple:
    """vocab.sampling_alpha: epoch `epoch`'s training examples, the kept pairs segmented by
    sampling (Vocab.sample_pairs, seeded with train.seed + epoch) and joined into the same
    runs of pairs as load_data's (join_pairs' draws do not depend on the ids).

    They are streamed from the pinned text files into a store in `folder` (the run's
    `sampled/`) and read back while it holds this epoch. SentencePiece's draws differ from
    process to process, so this store is what lets a resumed run continue its epoch on the
    same segmentation: an epoch's store stays until a checkpoint of a later epoch exists
    (`prune_sampled`, called when last.pt is saved). Ranks take turns under a lock: the
    first writes, the others read what it wrote."""
    v = cfg.vocab
    sides = d.corpus.sampled(folder, cfg.train.seed + epoch, d.sample_keep, d.vocab,
                             v.sampling_alpha, v.sampling_nbest, f"sampling epoch {epoch}")
    src, tgt = sides
    if cfg.data.concat > 1:
        return join_pairs(src, tgt, range(len(src)), cfg.data.concat, cfg.train.seed)
    return src, tgt


def prune_sampled(cfg: Config, folder: Path, epoch: int) -> None:
    """Remove the sampled stores of every epoch but `epoch`, once a checkpoint of `epoch`
    is saved (a resumed run reads only its checkpoint's epoch)."""
    if not folder.is_dir():
        return
    keep = f"seed{cfg.train.seed + epoch}."
    with file_lock(folder / ".lock"):
        sweep(folder)  # a killed draw's scratch, which no later draw of its epoch may sweep
        for other in folder.glob("seed*"):
            if not other.name.startswith(keep) and other.is_dir():
                shutil.rmtree(other, ignore_errors=True)
