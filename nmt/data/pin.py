"""A run owns what it trains on (docs/data.md, "A run owns its data").

Before its first step a run pins its corpus into `runs/NAME/corpus/`: hard links to the
split files it reads (training, validation and test), the corpus's manifest and gold files,
the encoded stores it maps and, for guided training, the teacher's links, with
`pinned.json` recording each file's sha256 and the run's vocabulary's (`runs/NAME/spm/`).
Nothing under `data/` is ever changed in place (an import writes new files and exchanges
folders; caches are named by content), so a link is a snapshot that costs no space while
the corpus stays and keeps the old bytes when a re-import replaces it. Where links cannot
be made (another file system) the files are copied.

Training, subword sampling, validation, the end-of-training evaluation and `--resume` read
the pin only: `Pin` has the methods of `LiveCorpus`, so one consumer reads either. `nmt
evaluate` and `nmt align` read a pinned split from the pin too; a split the run did not pin
is read from the corpus and checked against the run's training pairs (`scoring_split`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.locks import file_lock
from nmt.core.rundir import RunDir
from nmt.core.scratch import link_or_copy, scratch, swap_in, sweep
from nmt.data.corpora import LiveCorpus, head_lines, read_parallel
from nmt.data.folder import lock, sha256_file
from nmt.data.snapshot import has_split, link_splits, manifest_shas, pair_hashes
from nmt.data.store import (
    SOURCE,
    Ragged,
    encode_files,
    open_store,
    sampled_chunks,
    split_digest,
    token_dtype,
    write_store,
)
from nmt.data.subwords import Vocab, train_vocab

FORMAT = "nmt-pin-1"
SCORED = "scored"  # splits the run did not pin, adopted when first scored
SIDES = ("src", "tgt")


class Pin:
    """A run's pinned corpus: `paths`, `load`, `gold` as LiveCorpus has them, plus the
    stores (`store`), the teacher's links (`links`) and each split's digest."""

    def __init__(self, run_path: Path | str):
        self.run = RunDir(run_path)
        self.folder = self.run.path / "corpus"
        record = self.folder / "pinned.json"
        try:
            self.record = json.loads(record.read_text(encoding="utf-8"))
            if self.record.get("format") != FORMAT:
                raise ValueError(f"not {FORMAT}")
            self.langs = tuple(self.record["langs"])
            self.splits: dict = self.record["splits"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise NMTError(f"{record}: unreadable pin ({exc}); the run's data cannot be "
                           "checked: start a new run") from None
        self.cache = Path(self.record.get("cache", "data/.cache"))

    label = property(lambda self: str(self.folder))
    vocab_dir = property(lambda self: self.run.spm)

    def has(self, split: str) -> bool:
        """Whether the run pinned `split` when it started (what it trained and chose on)."""
        return split in self.splits

    def _entry(self, split: str) -> tuple[Path, dict]:
        """Where `split`'s files are and their record: pinned at the start, or adopted from
        the corpus when it was first scored (`scoring_split`)."""
        if split in self.splits:
            return self.folder, self.splits[split]
        scored = self.folder / SCORED / split
        try:
            return scored, json.loads((scored / "scored.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise NMTError(f"{self.folder}: the run did not pin split '{split}' (it pinned "
                           f"{', '.join(self.splits)})") from None

    def paths(self, split: str) -> tuple[Path, Path]:
        folder = self._entry(split)[0]
        paths = tuple(folder / f"{split}.{lang}" for lang in self.langs)
        for path in paths:
            if not path.is_file():
                raise NMTError(f"{path}: missing from the run's pinned corpus; the run's data "
                               "is incomplete: start a new run")
        return paths

    def load(self, split: str) -> tuple[list[str], list[str]]:
        return read_parallel(*self.paths(split))

    def gold(self, split: str) -> Path | None:
        """The gold links pinned with `split`'s text, never the corpus's today: a split
        pinned without gold has none (another corpus's gold would fit or fail by chance)."""
        try:
            folder = self._entry(split)[0]
        except NMTError:
            return None
        path = folder / f"{split}.gold"
        return path if path.is_file() else None

    def digest(self, split: str) -> str:
        entry = self._entry(split)[1]["sha256"]
        return split_digest(entry[self.langs[0]], entry[self.langs[1]])

    def links(self, split: str) -> Path | None:
        """The teacher's pinned links of `split` (guided training with eflomal), if any."""
        path = self.folder / "links" / f"{split}.links"
        return path if path.is_file() else None

    def sha256(self, split: str) -> tuple[str, str]:
        """The sha256 of `split`'s (source, target) text as pinned."""
        entry = self._entry(split)[1]["sha256"]
        return entry[self.langs[0]], entry[self.langs[1]]

    def store(self, split: str, vocab: Vocab) -> tuple[Ragged, Ragged]:
        """The pinned encoded store of `split`, checked to be built from the pinned text;
        one that is damaged (or another text's) is encoded again from the pinned text with
        the run's vocabulary."""
        store, lines = self.folder / "store" / split, self.splits[split]["lines"]
        sides, problem = open_store(store, lines, vocab, self.sha256(split))
        if sides is not None:
            return sides
        print(f"{store}: {problem or 'missing'}; encoding {split} again from the pinned text",
              file=sys.stderr)
        folder = encode_files(self.paths(split), self.folder / "store", split, vocab)[0].folder
        with lock(store):
            with scratch(store) as tmp:  # the old store (if any) ends in tmp, removed with it
                os.rename(folder, tmp / "new")
                swap_in(tmp / "new", store)
        sides, problem = open_store(store, lines, vocab, self.sha256(split))
        if sides is None:
            raise NMTError(f"{store}: {problem}: the run's pinned text is not what it pinned; "
                           "start a new run")
        return sides

    def refs(self, split: str, count: int) -> list[str]:
        """The first `count` target lines of `split` (validation's references)."""
        return head_lines(self.paths(split)[1], count)

    def sampled(self, folder: Path, seed: int, keep: np.ndarray, vocab: Vocab, alpha: float,
                nbest: int, label: str) -> tuple[Ragged, Ragged]:
        """The pinned training pairs at `keep`, segmented by sampling with `seed` (subword
        regularisation), kept in `folder` (the run's `sampled/`) under a key of the pinned
        text's digest, the vocabulary and the options: never a folder's name, so a copied
        or moved run reads the draw its original made. Checked, like every store, against
        the digests of the text it was drawn from."""
        train = self.record["train"] if "train" in self.record else next(iter(self.splits))
        text = self.sha256(train)
        key = hashlib.sha256(json.dumps([*text, self.record.get("vocab"), len(keep), alpha,
                                         nbest, hashlib.sha256(keep.tobytes()).hexdigest()]
                                        ).encode()).hexdigest()[:12]
        store = folder / f"seed{seed}.{key}"
        folder.mkdir(parents=True, exist_ok=True)
        with file_lock(folder / ".lock"):
            sweep(folder)  # what killed draws left, of this epoch's or another's
            sides, _ = open_store(store, len(keep), vocab, text)
            if sides is None:
                paths, read = self.paths(train), []
                dtypes = (token_dtype(vocab.src_size), token_dtype(vocab.tgt_size))
                chunks = sampled_chunks(paths, vocab, keep, alpha, nbest, seed, read)
                write_store(store, chunks, len(keep), dtypes, label,
                            lambda: self._as_pinned(read, paths, text))
                sides, problem = open_store(store, len(keep), vocab, text)
                if sides is None:
                    raise NMTError(f"{store}: {problem} right after writing it; check the disk")
        return sides

    def _as_pinned(self, read: list, paths: tuple, pinned: tuple) -> tuple:
        """The digests of the text a pass read, which must be the pinned text's."""
        digests = tuple(lines.finish() for lines in read)
        if digests != tuple(pinned):
            raise NMTError(f"{paths[0]}: the run's pinned text is not what it pinned (sha256 "
                           f"{digests[0][:12]}, pinned {pinned[0][:12]}); start a new run")
        return digests

    def keep_links(self, folder: Path, splits: tuple[str, ...]) -> None:
        """Pin the teacher's links of `splits` from the cache `folder` (guided training)."""
        out = self.folder / "links"
        with scratch(out) as tmp:
            for split in splits:
                link_or_copy(folder / f"{split}.links", tmp / f"{split}.links")
            with lock(out):
                swap_in(tmp, out)

    def check_vocab(self) -> None:
        """The run's spm/ holds the vocabulary it pinned (a replaced model would pair the
        checkpoints with other pieces)."""
        for name, sha in self.record.get("vocab", {}).items():
            path = self.vocab_dir / name
            if not path.is_file() or sha256_file(path) != sha:
                raise NMTError(f"{path}: not the vocabulary this run pinned (sha256 {sha[:12]}); "
                               "restore it from a copy of the run, or start a new run")

    def changed(self, live: LiveCorpus, split: str) -> tuple[str, str] | None:
        """(pinned digest, the corpus's digest now) when `split` of the corpus as imported
        is no longer the pinned one; None when it is (or the corpus has no such split)."""
        try:
            paths = live.paths(split)
        except NMTError:
            return None
        manifest = manifest_shas(live.folder, split, self.langs)
        now = manifest or tuple(sha256_file(p) for p in paths)
        digest = split_digest(*now)
        return None if digest == self.digest(split) else (self.digest(split), digest)

    def train_hashes(self) -> np.ndarray:
        """Sorted 8-byte hashes of the run's training pairs (normalised), kept in the pin
        after the first call: what a scored split is checked against."""
        path = self.folder / "train.pairs.npy"
        if path.is_file():
            try:
                hashes = np.load(path)
                if len(hashes) <= self.splits["train"]["lines"]:
                    return hashes
            except (OSError, ValueError):
                pass
        hashes = np.unique(pair_hashes(*self.load("train")))
        with scratch(path, folder=False) as tmp:
            with open(tmp, "wb") as handle:
                np.save(handle, hashes)
            tmp.rename(path)
        return hashes


def corpus_of(cfg: Config, run_path: Path | str | None = None) -> Pin | LiveCorpus:
    """What a run's commands read of its data: its pin, or (a run older than pins) its
    corpus as imported."""
    pin = open_pin(run_path or cfg.run_dir)
    return pin if pin is not None else LiveCorpus.of(cfg)


def open_pin(run_path: Path | str) -> Pin | None:
    """The run's pin, or None for a run that has none (not started, or older than pins)."""
    return Pin(run_path) if (Path(run_path) / "corpus" / "pinned.json").is_file() else None


def pin_corpus(cfg: Config, resume: bool, say=print) -> Pin:
    """The run's pin (rank 0 only): made from the corpus as imported at a run's first
    start, read back on `--resume`. A resumed run continues on its pin even when the corpus
    has changed since, and says so in one line. A run older than pins is pinned on resume
    from the corpus as it is, with the run's own vocabulary (never a new one)."""
    run = RunDir(cfg.run_dir)
    live = LiveCorpus.of(cfg)
    options = _vocab_options(cfg)
    if resume and (pin := open_pin(run.path)) is not None:
        return _reopen(pin, cfg, live, options, say)
    if resume and not (run.spm.is_dir() and any(run.spm.glob("*.model"))):
        raise NMTError(f"{run.spm}: the run's vocabulary is missing; it cannot be resumed: "
                       "start a new run")
    splits = [cfg.data.train, cfg.data.valid]
    if cfg.data.test not in splits and has_split(live, cfg.data.test):
        splits.append(cfg.data.test)  # a corpus without the config's test split is allowed
    sweep(run.path, "corpus")  # a killed start's
    with scratch(run.path / "corpus") as tmp:
        shas = link_splits(live, splits, tmp)
        train = tuple(tmp / f"{cfg.data.train}.{lang}" for lang in live.langs)
        if resume:  # older than pins: its own vocabulary, whatever the corpus holds now
            vocab_dir = run.spm
            say(f"note: {run.path} predates pinned corpora; pinned {live.folder} as it is now "
                "with the run's own vocabulary")
        else:
            vocab_dir = train_vocab(train, cfg.vocab, live.cache)
        vocab = Vocab.from_dir(vocab_dir)
        models = {p.name: sha256_file(p) for p in sorted(vocab_dir.glob("*.model"))}
        stores_dir = vocab_dir if not resume else live.cache / "spm" / ("vocab-" + hashlib.sha256(
            json.dumps(models, sort_keys=True).encode()).hexdigest()[:16])
        stores = {}
        for split in (cfg.data.train, cfg.data.valid):
            paths = tuple(tmp / f"{split}.{lang}" for lang in live.langs)
            side = encode_files(paths, stores_dir, split, vocab)[0]
            (tmp / "store" / split).mkdir(parents=True, exist_ok=True)
            for name in ("src.npy", "tgt.npy", "src_off.npy", "tgt_off.npy", SOURCE):
                link_or_copy(side.folder / name, tmp / "store" / split / name)
            stores[split] = side.folder.name
        record = {"format": FORMAT, "corpus": cfg.data.corpus, "pair": cfg.data.pair,
                  "train": cfg.data.train,
                  "langs": list(live.langs), "from": str(live.folder),
                  "cache": str(live.cache), "pinned": time.strftime("%F %T"),
                  "splits": shas, "stores": stores,
                  "vocab": models, "vocab_options": options}
        (tmp / "pinned.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        with lock(run.path / "corpus"):
            swap_in(tmp, run.path / "corpus")  # a stale pin (a start that never stepped)
    if not resume:
        run.install_vocab(vocab_dir)
    return Pin(run.path)


def _reopen(pin: Pin, cfg: Config, live: LiveCorpus, options: dict, say) -> Pin:
    """A resumed run's pin, checked: the config's vocabulary options and the run's spm/ are
    the pinned ones; a corpus changed since is named, and the run goes on on its pin."""
    pinned = pin.record.get("vocab_options", options)
    if pinned != options:
        changed = ", ".join(f"vocab.{k}={options[k]}" for k in options
                            if options[k] != pinned.get(k))
        raise NMTError(f"{pin.run.checkpoint('last')}: trained with vocabularies of other "
                       f"options than the config's {changed}; resume with the config the "
                       "run was started with")
    pin.check_vocab()
    if (moved := pin.changed(live, cfg.data.train)) is not None:
        say(f"note: {live.folder}/{cfg.data.train} changed since this run pinned it (pinned "
            f"{moved[0]}, now {moved[1]}); continuing on the run's pinned copy ({pin.folder}); "
            "to train on the new corpus, start a new run (--set name=...)")
    return pin


def _vocab_options(cfg: Config) -> dict:
    """The options that make the vocabulary (sampling is training's, not the model's)."""
    return {k: v for k, v in asdict(cfg.vocab).items()
            if k not in ("sampling_alpha", "sampling_nbest")}


def scoring_split(cfg: Config, run_path: Path | str, split: str, say=None
                  ) -> tuple[list[str], list[str], dict]:
    """The pairs of `split` that `nmt evaluate` and `nmt align` score for a run, and what
    scores.json records of them: the pinned copy of a split the run pinned (a note when the
    corpus's has changed since); any other split adopted from the corpus as imported, with
    its gold, into the run's pin (`corpus/scored/SPLIT/`, so every later reader of the run,
    its gold included, reads the text that was scored), refused when it holds pairs the run
    trained on."""
    say = say or (lambda text: print(text, file=sys.stderr))
    pin, live = open_pin(run_path), LiveCorpus.of(cfg)
    if pin is None:  # a run older than pins: the corpus as it is, as before
        sources, refs = live.load(split)
        return sources, refs, {"digest": split_digest(*(sha256_file(p)
                                                         for p in live.paths(split)))}
    if pin.has(split):
        if (moved := pin.changed(live, split)) is not None:
            say(f"note: {live.folder}/{split} changed since the run pinned it (pinned "
                f"{moved[0]}, now {moved[1]}); scoring the pinned copy; import the new pairs "
                "under another split or corpus name to score them")
        sources, refs = pin.load(split)
        return sources, refs, {"digest": pin.digest(split), "pinned": True}
    _adopt(pin, live, split)
    sources, refs = pin.load(split)
    digest = pin.digest(split)
    seen = np.isin(pair_hashes(sources, refs), pin.train_hashes())
    if seen.any():
        raise NMTError(f"{live.folder}/{split} (digest {digest}): {int(seen.sum()):,} of its "
                       f"{len(sources):,} pairs are training pairs of {pin.run.path} (first: "
                       f"line {int(np.flatnonzero(seen)[0]) + 1}); scores on them would not "
                       "be held out: score a split without them")
    say(f"note: {split} is not a split {pin.run.path} pinned; scoring {live.folder}/{split} "
        f"(digest {digest}; none of its pairs are among the run's training pairs)")
    return sources, refs, {"digest": digest, "pinned": False, "overlap": 0}


def _adopt(pin: Pin, live: LiveCorpus, split: str) -> None:
    """`split` of the corpus as it is now, with its gold, linked into the run's pin under
    the corpus's lock (one snapshot of text and gold), unless the pin holds those bytes."""
    target = pin.folder / SCORED / split
    sweep(target.parent, split)  # a killed adoption's
    with scratch(target) as tmp:
        shas = link_splits(live, [split], tmp)[split]
        shas["from"] = str(live.folder)
        try:
            if pin._entry(split)[1]["sha256"] == shas["sha256"]:
                return  # adopted before, the same text
        except NMTError:
            pass
        (tmp / "scored.json").write_text(json.dumps(shas, indent=1) + "\n", encoding="utf-8")
        (tmp / "manifest.json").unlink(missing_ok=True)
        with lock(target):
            swap_in(tmp, target)


def gold_of(cfg: Config, split: str) -> Path | None:
    """The gold links of `split` as the run reads it (its pin's, never today's corpus's
    for a pinned run; the corpus's for a run older than pins)."""
    return corpus_of(cfg).gold(split)
