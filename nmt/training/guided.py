"""Guided alignment's training parts: a teacher's word links for the training pairs, mapped
onto pieces, and the loss that teaches attention to follow them (Garg et al. 2019; for RNN
attention Chen et al. 2016, Mi et al. 2016). Config section `guided` (docs/alignment.md).

The teacher is eflomal (`nmt data links`: trained on the corpus's training + validation
pairs, both directions symmetrised; cached beside the corpus under a key of its
settings) or, for a corpus that ships them, the gold links of `<split>.gold`. Words are
whitespace tokens, which are SentencePiece's words too (a piece that starts with "▁"
starts a word). Row t of the supervised map is the decoder step that predicts target
piece t, as `nmt align` reads a guided run (nmt.align.guided).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from nmt.align.metrics import alignment_error_rate
from nmt.align.statistical import (
    ITERATIONS,
    SAMPLERS,
    eflomal_links,
    require_eflomal,
    statistical_links,
)
from nmt.align.words import pieces_to_words
from nmt.core.checkpoint import atomic_write
from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.locks import file_lock
from nmt.core.tokens import EOS
from nmt.data.corpora import LiveCorpus, read_hashed, read_parallel
from nmt.data.folder import sha256_file
from nmt.data.links import GoldAlignment, Link, PharaohFile, format_pharaoh, read_gold
from nmt.data.pin import corpus_of
from nmt.data.store import split_digest
from nmt.data.symmetrize import symmetrize
from nmt.models.attention import supervised
from nmt.training.bootstrap import model_links, teacher_key


def alignment_loss(attn: Tensor, guide: Tensor, layer: int, heads: int) -> Tensor:
    """sum_t sum_s -g_ts log a_ts over the batch: the cross-entropy from each target
    position's normalised teacher links g (B, T, S) to the supervised attention a; a
    position without links (a zero row of g) adds nothing."""
    a = supervised(attn, layer, heads).float()
    return -(guide * torch.log(a.clamp_min(1e-9))).sum()


def piece_targets(src_pieces: Sequence[str], tgt_pieces: Sequence[str], links: set[Link],
                  null: bool = False, word_of: dict | None = None) -> np.ndarray | None:
    """(T+1, S+1) targets of one pair (target pieces + EOS row, source pieces + EOS
    column): row t spreads mass 1 equally over the pieces of the source words linked to
    the word of target piece t; rows of unlinked words, the EOS row and column stay 0.
    `null` (guided.null_word) and a pair with links: the rows of unlinked words and the EOS
    row put their mass 1 on the source EOS instead (the NULL word). None when a link lies
    outside the pair's words (the teacher saw other words). `word_of`: the words are a
    gold's tokens, each piece covering those listed (nmt.align.spans)."""
    if word_of:
        sw, tw = word_of["src"], word_of["tgt"]
    else:
        sw, tw = ([[w] for w in pieces_to_words(p)] for p in (src_pieces, tgt_pieces))
    n_s, n_t = (max(max(w, default=-1) for w in words) + 1 if words else 0
                for words in (sw, tw))
    if any(i >= n_s or j >= n_t for i, j in links):
        return None
    words = np.zeros((n_t, n_s), dtype=np.float32)
    for i, j in links:
        words[j, i] = 1.0
    out = np.zeros((len(tgt_pieces) + 1, len(src_pieces) + 1), dtype=np.float32)
    if n_t and n_s:
        out[:-1, :-1] = np.minimum(_cover(tw, n_t) @ words @ _cover(sw, n_s).T, 1.0)
    total = out.sum(1, keepdims=True)
    if null and links:
        out[total[:, 0] == 0, -1] = 1.0
        total = out.sum(1, keepdims=True)
    return np.divide(out, total, out=out, where=total > 0)


def _cover(word_of: Sequence[Sequence[int]], n_words: int) -> np.ndarray:
    """0/1 (pieces, words): piece k covers the words listed at k."""
    out = np.zeros((len(word_of), n_words), dtype=np.float32)
    for k, words in enumerate(word_of):
        out[k, list(words)] = 1.0
    return out


class PieceTargets(Sequence):
    """Every pair's `piece_targets` (src ids end in EOS), computed when a batch reads it, so
    training holds the links' line offsets (PharaohFile) rather than a matrix per pair."""

    def __init__(self, vocab, src_ids: Sequence, tgt_ids: Sequence, links: Sequence[set[Link]],
                 null: bool = False, word_of: Sequence[dict] | None = None):
        if not len(src_ids) == len(tgt_ids) == len(links):
            raise ValueError(f"{len(links)} pairs' links for {len(src_ids)} pairs")
        self.vocab, self.src, self.tgt, self.links, self.null = vocab, src_ids, tgt_ids, links, null
        self.word_of = word_of

    def __len__(self) -> int:
        return len(self.links)

    def __getitem__(self, i: int) -> np.ndarray | None:
        src = self.vocab.src_pieces([int(x) for x in self.src[i] if x != EOS])
        tgt = self.vocab.tgt_pieces([int(x) for x in self.tgt[i]])
        return piece_targets(src, tgt, self.links[i], self.null,
                             self.word_of[i] if self.word_of else None)


def guide_targets(vocab, src_ids: Sequence, tgt_ids: Sequence, links: Sequence[set[Link]],
                  null: bool = False, word_of: Sequence[dict] | None = None
                  ) -> tuple[PieceTargets, int]:
    """The pairs' `PieceTargets`, and how many pairs the links do not fit (they get None:
    no guidance), counted in one pass that also reads every line of the links."""
    targets = PieceTargets(vocab, src_ids, tgt_ids, links, null, word_of)
    return targets, sum(targets[i] is None for i in range(len(targets)))


def pair_guides(cfg: Config, vocab, sources: Sequence[str], targets: Sequence[str],
                src_ids: list, tgt_ids: list, from_corpus: bool,
                word_of: Sequence[dict] | None = None,
                heuristic: str | None = None) -> tuple[list[np.ndarray | None], float]:
    """`--adapt` of a guided run keeps its guidance: the piece targets of eflomal's links of
    the pairs being aligned, eflomal trained as its own `--statistical` row is (the
    corpus's training pairs plus these pairs; `from_corpus`: they are a split of the corpus,
    tokenised alike), both directions joined by `heuristic` (default: the run's
    guided.symmetrize; `nmt align --adapt-guides`). Always eflomal, also for
    a run taught by gold links: gold of the pairs being aligned is what they are scored on.
    `word_of`: the pairs are a gold's tokens, which the ids' pieces cover so
    (nmt.align.spans). Also returns the seconds eflomal's fit took (part of the adaptation's
    cost, also where this process had the fit already)."""

    require_eflomal()
    train = corpus_of(cfg).load(cfg.data.train)
    langs = None if from_corpus else (cfg.src_lang, cfg.tgt_lang)
    fwd, rev, info = statistical_links(sources, targets, train, langs, work=Path(cfg.run_dir))
    heuristic = heuristic or cfg.guided.symmetrize
    links = [symmetrize(f, r, len(s.split()), len(t.split()), heuristic)
             for f, r, s, t in zip(fwd, rev, sources, targets, strict=True)]
    return (guide_targets(vocab, src_ids, tgt_ids, links, cfg.guided.null_word, word_of)[0],
            info["seconds"])


def _words(lines: Sequence[str]) -> list[list[str]]:
    return [line.lower().split() for line in lines]


def links_folder(cfg: Config, corpus=None, shas: dict | None = None) -> Path:
    """Where the teacher's links of `corpus`'s (default: `cfg`'s corpus as imported)
    training and validation pairs are cached: the data root's cache, under a key of the
    settings and the split files' contents (`shas`: each split's two sha256 as a pass read
    them; else the files are hashed now, to look the folder up)."""

    corpus = corpus or LiveCorpus.of(cfg)
    teacher = cfg.guided.teacher
    settings = {"teacher": teacher, "symmetrize": cfg.guided.symmetrize, "pair": cfg.data.pair,
                "splits": [cfg.data.train, cfg.data.valid],
                **({"iterations": ITERATIONS, "samplers": SAMPLERS} if teacher == "eflomal"
                   else teacher_key(cfg))}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for split in (cfg.data.train, cfg.data.valid):
        for sha in (shas[split] if shas else map(sha256_file, corpus.paths(split))):
            digest.update(bytes.fromhex(sha))
    return corpus.cache / "links" / f"{cfg.data.pair}.{teacher}-{digest.hexdigest()[:16]}"


def teacher_links(cfg: Config, split: str, compute: bool = True,
                  corpus=None) -> Sequence[set[Link]]:
    """The teacher's word links (source, target) of every pair of `split` of `corpus`
    (default: `cfg`'s corpus as imported; a run passes its pin); eflomal's come from the
    cache, computed first (for the training and validation splits together) when
    `compute` and missing."""

    corpus = corpus or LiveCorpus.of(cfg)
    if cfg.guided.teacher == "gold":
        path = corpus.gold(split)
        if path is None:
            raise NMTError(f"guided.teacher gold: the {cfg.data.corpus} corpus has no "
                           f"{split}.gold for {cfg.data.pair}; use guided.teacher: eflomal")
        return [set(g.possible) for g in read_gold(path)]
    pinned = getattr(corpus, "links", lambda split: None)(split)
    if pinned is not None:
        return PharaohFile(pinned)
    folder = links_folder(cfg, corpus)
    path = folder / f"{split}.links"
    if not path.is_file():
        if not compute:
            raise NMTError(f"{path}: no cached links; run `nmt data links --config ...`")
        write_teacher_links(cfg, corpus=corpus)
    if not path.is_file():
        raise NMTError(f"{path}: eflomal's links cover {cfg.data.train} and {cfg.data.valid} "
                       f"only, not {split}")
    return PharaohFile(path)


def write_teacher_links(cfg: Config, threads: int | None = None, corpus=None) -> Path:
    """Run the teacher (eflomal, or the teacher runs: nmt.training.bootstrap) on the
    corpus's training + validation pairs in both directions, symmetrise (guided.symmetrize)
    and cache the links of each split; returns the folder. One process computes them
    (under the folder's lock); another waiting for it reads what it wrote."""

    corpus = corpus or LiveCorpus.of(cfg)
    folder = links_folder(cfg, corpus)
    splits = (cfg.data.train, cfg.data.valid)
    with file_lock(folder.parent / f".{folder.name}.lock"):
        if all((folder / f"{split}.links").is_file() for split in splits):
            return folder
        texts, shas = _read(corpus, splits)
        if links_folder(cfg, corpus, shas) != folder:  # the key is of the text read
            raise NMTError(f"{corpus.paths(splits[0])[0]}: the corpus changed while its links "
                           "were being computed (a re-import?); nothing was kept: run again")
        if cfg.guided.teacher == "runs":
            links = model_links(cfg, texts)
        else:
            require_eflomal()
            links = _eflomal(cfg, texts, threads, folder.parent)
        settings = json.dumps({
            "teacher": cfg.guided.teacher, "symmetrize": cfg.guided.symmetrize,
            "splits": {s: len(v) for s, v in links.items()},
            "digests": {s: split_digest(*shas[s]) for s in splits}},
            indent=2) + "\n"
        # settings first, the links last: a folder whose links are all there is whole
        atomic_write(folder / "settings.json", lambda handle: handle.write(settings.encode()))
        for split, pair_links in links.items():
            text = "".join(format_pharaoh(x) + "\n" for x in pair_links).encode("utf-8")
            atomic_write(folder / f"{split}.links", lambda handle, text=text: handle.write(text))
    return folder


def _read(corpus, splits: tuple) -> tuple[dict, dict]:
    """Each split's (sources, targets) and the sha256 of its two files, in one read."""
    texts, shas = {}, {}
    for split in splits:
        (sources, src_sha), (targets, tgt_sha) = map(read_hashed, corpus.paths(split))
        if len(sources) != len(targets):
            read_parallel(*corpus.paths(split))  # its one-line error
        texts[split], shas[split] = (sources, targets), (src_sha, tgt_sha)
    return texts, shas


def _eflomal(cfg: Config, splits: dict, threads: int | None, work: Path
             ) -> dict[str, list[set[Link]]]:
    src, tgt, owner = [], [], []
    for split, (sources, targets) in splits.items():
        for k, (s, t) in enumerate(zip(_words(sources), _words(targets))):
            if s and t:  # eflomal aligns non-empty pairs; an empty one gets no links
                src.append(s)
                tgt.append(t)
                owner.append((split, k))
    fwd, rev = eflomal_links(src, tgt, threads, work)
    links = {split: [set() for _ in sources] for split, (sources, _) in splits.items()}
    for (split, k), f, r, s, t in zip(owner, fwd, rev, src, tgt):
        links[split][k] = symmetrize(f, r, len(s), len(t), cfg.guided.symmetrize)
    return links


def teacher_aer(records, links: Sequence[set[Link]]) -> float:
    """AER of the records' links against the teacher's (every teacher link sure)."""

    gold = [GoldAlignment(frozenset(x), frozenset(x)) for x in links[:len(records)]]
    return alignment_error_rate([r.links for r in records], gold)["aer"]
