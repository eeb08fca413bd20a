"""Bootstrapped guidance (Zenkel et al. 2020): a trained pair of runs, one per direction,
aligns the corpus, its two directions symmetrised, and those links teach the next run in
place of eflomal's (`guided.teacher: runs`, docs/alignment.md "Past the teacher"). The
next run may start from the first's weights (`train.init_from`).

The runs read the pairs as `nmt align` reads them (their own reading: a guided run's
supervised heads and NULL word); the links are on the corpus's words, as eflomal's are.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from nmt.align.extract import collect
from nmt.align.guided import reading_of
from nmt.core.checkpoint import check_vocab, load_checkpoint
from nmt.core.config import Config
from nmt.core.errors import NMTError, one_line
from nmt.core.progress import counting
from nmt.core.rundir import RunDir
from nmt.data.folder import sha256_file
from nmt.data.links import Link
from nmt.data.symmetrize import flip_links, symmetrize
from nmt.decoding.api import load
from nmt.models.runs import load_config

CHUNK = 512  # pairs read at a time: the raw maps of a chunk are held, then dropped


def teacher_runs(cfg: Config) -> tuple[Path, Path]:
    """The teacher pair of `guided.teacher: runs`, checked: this direction, then the other,
    both trained on this corpus."""
    g = cfg.guided
    if not (g.teacher_run and g.teacher_reverse):
        raise NMTError("guided.teacher runs: set guided.teacher_run (a run of this direction) "
                       "and guided.teacher_reverse (one of the other), trained on this corpus")
    pair = cfg.data.pair.split("-")
    for path, want in ((g.teacher_run, pair), (g.teacher_reverse, pair[::-1])):
        other = load_config(path)
        if other.data.corpus != cfg.data.corpus or other.data.pair.split("-") != want:
            raise NMTError(f"guided.teacher runs: {path} was trained on {other.data.corpus} "
                           f"{other.data.pair}; it must be {cfg.data.corpus} {'-'.join(want)}")
    return Path(g.teacher_run), Path(g.teacher_reverse)


def teacher_key(cfg: Config) -> dict:
    """What the runs' links depend on besides the text: both best checkpoints' bytes."""
    digests = []
    for run in teacher_runs(cfg):
        path = RunDir(run).checkpoint("best")
        if not path.is_file():
            raise NMTError(f"guided.teacher runs: {path}: no best checkpoint yet; let the run "
                           "reach its first validation, or name another run")
        digests.append(sha256_file(path))
    return {"checkpoints": digests, "teacher_pairs": cfg.guided.teacher_pairs}


def model_links(cfg: Config, splits: dict[str, tuple[list[str], list[str]]]
                ) -> dict[str, list[set[Link]]]:
    """Every split's links from the teacher runs, symmetrised by guided.symmetrize; in the
    training split only the first guided.teacher_pairs pairs (0: all) get links, the others
    none (they train unguided)."""
    fwd, rev = (load(r) for r in teacher_runs(cfg))
    out = {}
    for split, (sources, targets) in splits.items():
        n = len(sources)
        if split == cfg.data.train and cfg.guided.teacher_pairs:
            n = min(n, cfg.guided.teacher_pairs)
        links: list[set[Link]] = [set() for _ in sources]
        with counting(n, f"teacher runs: {split}"):
            for start in range(0, n, CHUNK):
                end = min(start + CHUNK, n)
                src, tgt = sources[start:end], targets[start:end]
                ahead = _links(fwd, src, tgt)
                back = [flip_links(x) for x in _links(rev, tgt, src)]
                for k, (a, b, s, t) in enumerate(zip(ahead, back, src, tgt)):
                    ns, nt = len(s.split()), len(t.split())
                    inside = [{(i, j) for i, j in x if i < ns and j < nt} for x in (a, b)]
                    links[start + k] = symmetrize(*inside, ns, nt, cfg.guided.symmetrize)
        out[split] = links
    return out


def _links(model, sources: Sequence[str], targets: Sequence[str]) -> list[set[Link]]:
    """One direction's word links of non-empty pairs (an empty side: none)."""
    keep = [k for k, (s, t) in enumerate(zip(sources, targets)) if s.split() and t.split()]
    out: list[set[Link]] = [set() for _ in sources]
    if keep:
        vocab = model.vocab
        records = collect(model.module, vocab, vocab.encode_src([sources[k] for k in keep]),
                          vocab.encode_tgt([targets[k] for k in keep]), **reading_of(model.cfg))
        for k, rec in zip(keep, records):
            out[k] = set(rec.links)
    return out


def init_weights(model: torch.nn.Module, cfg: Config, vocab, resumed: bool = False) -> None:
    """train.init_from: start from that run's best weights (not its optimiser or step); a
    resumed run has its own."""
    if not cfg.train.init_from or resumed:
        return
    run = RunDir(cfg.train.init_from)
    path = run.checkpoint("best")
    payload = load_checkpoint(path)
    check_vocab(payload, vocab, path, "train.init_from needs a run of this vocabulary")
    theirs = sorted(sha256_file(p) for p in run.spm.glob("*.model"))
    if theirs != sorted({sha256_file(p) for p in vocab.paths}):
        raise NMTError(f"train.init_from {cfg.train.init_from}: trained with another "
                       "vocabulary (its SentencePiece models differ); start from a run of "
                       "this corpus and vocab settings")
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, KeyError) as exc:
        raise NMTError(f"train.init_from {cfg.train.init_from}: its weights do not fit this "
                       f"model ({one_line(exc)}); use a run of the same model settings") from None
