"""What a training run trains on: the vocabulary, the encoded training and validation
splits (filtered by data.max_len, joined by data.concat), and what vocab.sampling_alpha
and guided alignment add to them."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.locks import file_lock
from nmt.data.batching import filter_long, join_pairs
from nmt.data.corpora import head_lines, split_paths
from nmt.data.store import encode_split, open_store, sampled_chunks, token_dtype, write_store
from nmt.data.subwords import Vocab, prepare_vocab
from nmt.training import distributed as dist
from nmt.training.guided import guide_targets, teacher_links


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
    # vocab.sampling_alpha: the kept pairs' line numbers, segmented anew each epoch from
    # the text files (sampled_examples); the best segmentation's store
    sample_keep: np.ndarray | None = None
    best_store: Path | None = None
    # guided.weight: each training pair's piece targets (None: no links), the validation
    # pairs' teacher links, and how many training pairs the links did not fit
    train_guides: Sequence | None = None
    valid_links: list | None = None
    unguided: int = 0


def load_data(cfg: Config) -> Data:
    """Vocabulary and encoded splits; rank 0 builds the caches, the other ranks reuse them."""
    if dist.is_main():
        vocab_dir = prepare_vocab(cfg)
        for split in (cfg.data.train, cfg.data.valid):
            encode_split(cfg, vocab_dir, split)
    dist.barrier()
    vocab_dir = prepare_vocab(cfg)
    vocab = Vocab.from_dir(vocab_dir)
    src, tgt = encode_split(cfg, vocab_dir, cfg.data.train)
    keep = filter_long(src, tgt, cfg.data.max_len)
    if not len(keep):
        raise NMTError(f"no training pairs of at most data.max_len={cfg.data.max_len} subwords")
    v_src, v_tgt = encode_split(cfg, vocab_dir, cfg.data.valid)
    n = min(cfg.train.valid_sentences or len(v_src), len(v_src))
    refs = head_lines(split_paths(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair,
                                  cfg.data.valid)[1], n)  # the first n, not the whole split
    pairs, kept = len(src), len(keep)
    sample_keep = keep if cfg.vocab.sampling_alpha else None  # filtered on the best one
    best_store = src.folder
    if cfg.data.concat > 1:
        src, tgt = join_pairs(src, tgt, keep, cfg.data.concat, cfg.train.seed)
        keep = range(len(src))
    data = Data(vocab, src, tgt, keep, v_src[:n], refs[:n], v_tgt[:n], pairs, kept,
                sample_keep, best_store)
    if cfg.guided.weight:
        _add_guides(cfg, data)
    return data


def _add_guides(cfg: Config, d: Data) -> None:
    """guided.weight: the teacher's links (nmt.align.guided) as piece targets."""

    links = teacher_links(cfg, cfg.data.train)
    if len(links) != len(d.train_src):
        raise NMTError(f"the teacher's links cover {len(links)} training pairs but the "
                       f"corpus has {len(d.train_src)}: re-run `nmt data links`")
    d.train_guides, d.unguided = guide_targets(d.vocab, d.train_src, d.train_tgt, links,
                                                  cfg.guided.null_word)
    d.valid_links = teacher_links(cfg, cfg.data.valid)[:len(d.valid_src)]


def sampled_examples(cfg: Config, d: Data, epoch: int, folder: Path) -> tuple:
    """vocab.sampling_alpha: epoch `epoch`'s training examples, the kept pairs segmented by
    sampling (Vocab.sample_pairs, seeded with train.seed + epoch) and joined into the same
    runs of pairs as load_data's (join_pairs' draws do not depend on the ids).

    They are streamed from the text files into a store in `folder` (the run's `sampled/`),
    read back while it holds this epoch, and every other epoch's store there is removed.
    SentencePiece's draws differ from process to process, so this store is what lets a
    resumed run continue its epoch on the same segmentation. Ranks take turns under a
    lock: the first writes, the others read what it wrote."""
    v = cfg.vocab
    seed = cfg.train.seed + epoch
    key = hashlib.sha256(json.dumps([str(d.best_store), cfg.data.max_len, v.sampling_alpha,
                                     v.sampling_nbest]).encode()).hexdigest()[:12]
    store = folder / f"seed{seed}.{key}"
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / ".lock"):
        sides, _ = open_store(store, len(d.sample_keep), d.vocab)
        if sides is None:
            paths = split_paths(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair,
                                cfg.data.train)
            dtypes = (token_dtype(d.vocab.src_size), token_dtype(d.vocab.tgt_size))
            chunks = sampled_chunks(paths, d.vocab, d.sample_keep, v.sampling_alpha,
                                    v.sampling_nbest, seed)
            write_store(store, chunks, len(d.sample_keep), dtypes, f"sampling epoch {epoch}")
            sides, problem = open_store(store, len(d.sample_keep), d.vocab)
            if sides is None:
                raise NMTError(f"{store}: {problem} right after writing it; check the disk")
        for other in folder.glob("seed*"):
            if other != store and other.is_dir():
                shutil.rmtree(other, ignore_errors=True)
    src, tgt = sides
    if cfg.data.concat > 1:
        return join_pairs(src, tgt, range(len(src)), cfg.data.concat, cfg.train.seed)
    return src, tgt
