"""A statistical word aligner beside the models: eflomal (Östling & Tiedemann 2016).

eflomal is a Bayesian IBM-1 -> HMM -> HMM+fertility aligner fitted by Gibbs sampling. Like
every statistical aligner it trains on the text it aligns: here the run's corpus training
pairs plus the pairs being aligned. It gives one link set per direction (each target word
-> at most one source word, and the reverse); `nmt.data.symmetrize` joins them, and the
result is a 0/1 link matrix record (meta method=eflomal) scored by the same AER code as the
models. eflomal is an optional extra: ``pip install -e '.[align]'``.

Words: the pairs to align are split on whitespace only (their gold indexes those tokens).
Training pairs from the same corpus are split the same way; when the pairs come from
elsewhere (``--pairs``, ``--src``), the corpus is tokenised like the Hansards gold
(`gold_style_tokens`): lowercased, punctuation and hyphens split off, English ``'s`` /
``n't`` split, French elisions and contractions expanded (``l'`` -> ``le``, ``du`` ->
``de le``, ``des`` -> ``de les``), as in the Och & Ney (2003) English-French test set.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

from nmt.align.bidirectional import link_matrix, word_record
from nmt.align.io import load_gold
from nmt.align.metrics import alignment_summary
from nmt.align.records import AlignmentRecord
from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.scratch import scratch, sweep
from nmt.data.links import Link, parse_pharaoh
from nmt.data.pin import corpus_of, gold_of, scoring_split
from nmt.data.symmetrize import DEFAULT_HEURISTIC, symmetrize

INSTALL_HINT = ("the statistical aligner needs eflomal, an optional extra: "
                "pip install -e '.[align]' (or .venv/bin/pip install eflomal==2.0.0)")
METHOD = "eflomal"
ITERATIONS = 1.0  # eflomal's iterations relative to its default (5000 / sqrt(pairs) per model)
SAMPLERS = 3  # independent Gibbs samplers, averaged (eflomal's default)
WORK = Path("data") / ".cache"  # eflomal's work folder's place when a caller names none

_PUNCT = re.compile(r"""([.,!?;:()"«»\[\]{}…/]|(?<=\w)-(?=\w)|--)""")
_FR_ELISION = re.compile(r"\b(l|d|j|n|c|s|m|t|qu|\w+qu)['’]", re.IGNORECASE)
_FR_FULL = {"l": "le", "d": "de", "j": "je", "n": "ne", "c": "ce", "s": "se", "m": "me",
            "t": "te"}
_FR_CONTRACTIONS = {"du": "de le", "des": "de les", "au": "à le", "aux": "à les"}
_EN_CLITIC = re.compile(r"(\w)('s|n't|'re|'ve|'ll|'d|'m)\b", re.IGNORECASE)


def require_eflomal():
    """The eflomal module, or a one-line NMTError saying how to install it."""
    try:
        import eflomal  # optional extra: pip install -e '.[align]'
    except ImportError:
        raise NMTError(INSTALL_HINT) from None
    return eflomal


def gold_style_tokens(text: str, lang: str) -> list[str]:
    """Lowercased tokens in the Hansards gold's convention (see the module docstring)."""
    text = text.lower().replace("’", "'")
    if lang == "fr":
        text = _FR_ELISION.sub(lambda m: _FR_FULL.get(m.group(1), m.group(1) + "e") + " ", text)
    elif lang == "en":
        text = _EN_CLITIC.sub(r"\1 \2", text)
    text = _PUNCT.sub(r" \1 ", text)
    tokens = text.split()
    if lang == "fr":
        tokens = [w for t in tokens for w in _FR_CONTRACTIONS.get(t, t).split()]
    return tokens


def eflomal_links(src: Sequence[Sequence[str]], tgt: Sequence[Sequence[str]],
                  threads: int | None = None, work: Path | None = None
                  ) -> tuple[list[set[Link]], list[set[Link]]]:
    """Forward and reverse links (source i, target j) of every pair; eflomal trains on all of
    them (IBM-1/HMM/fertility, `ITERATIONS`, `SAMPLERS` samplers on `threads` OpenMP
    threads; None: as OMP_NUM_THREADS says). Its files (the text, the links) live in a
    scratch folder `work/.eflomal.tmp-*` (a run's folder or a data root's cache; None:
    `WORK`): removed when done, and by the next eflomal of `work` when this one was
    killed (nmt.core.scratch)."""
    eflomal = require_eflomal()
    if len(src) != len(tgt):
        raise ValueError(f"{len(src)} source but {len(tgt)} target sentences")
    for n, (s, t) in enumerate(zip(src, tgt)):
        if not s or not t:
            raise NMTError(f"pair {n}: empty {'source' if not s else 'target'}; eflomal "
                           "aligns non-empty pairs only")
    old = os.environ.get("OMP_NUM_THREADS")
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)  # the eflomal binary is OpenMP
    try:
        work = Path(work if work is not None else WORK)
        sweep(work, "eflomal")  # what a killed eflomal of this place left
        with scratch(work / "eflomal") as d:
            for name, sentences in (("src.txt", src), ("tgt.txt", tgt)):
                (d / name).write_text("".join(" ".join(s) + "\n" for s in sentences),
                                      encoding="utf-8")
            with open(d / "src.txt", encoding="utf-8") as fs, \
                    open(d / "tgt.txt", encoding="utf-8") as ft:
                aligner = eflomal.Aligner(n_samplers=SAMPLERS, rel_iterations=ITERATIONS)
                aligner.align(fs, ft, links_filename_fwd=str(d / "fwd"),
                              links_filename_rev=str(d / "rev"))
            fwd = (d / "fwd").read_text(encoding="utf-8").splitlines()
            rev = (d / "rev").read_text(encoding="utf-8").splitlines()
    finally:
        if old is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = old
    if len(fwd) != len(src) or len(rev) != len(src):
        raise NMTError(f"eflomal wrote {len(fwd)}/{len(rev)} link lines for {len(src)} pairs")
    return [parse_pharaoh(line) for line in fwd], [parse_pharaoh(line) for line in rev]


def statistical_links(sources: Sequence[str], targets: Sequence[str],
                      train: tuple[Sequence[str], Sequence[str]],
                      langs: tuple[str, str] | None = None, threads: int | None = None,
                      work: Path | None = None
                      ) -> tuple[list[set[Link]], list[set[Link]], dict]:
    """eflomal's forward and reverse links of (sources, targets) (split on whitespace),
    trained on the `train` pairs plus them; `langs` = (source, target) language tokenises
    the training pairs with `gold_style_tokens`, None splits them on whitespace too.
    `work`: where eflomal works (`eflomal_links`). The dict says how: training pairs used,
    tokenisation, seconds."""
    if not targets:
        raise NMTError("the statistical aligner needs a target for every sentence "
                       "(forced mode on given pairs)")
    for k, (s, t) in enumerate(zip(sources, targets)):  # k counts the pairs given, from 0
        for side, text in (("source", s), ("target", t)):
            if not text.strip():
                raise NMTError(f"pair {k}: empty {side}; the statistical aligner (eflomal) "
                               "aligns non-empty pairs only (forced mode on given pairs)")
    if langs is None:
        train_src = [s.lower().split() for s in train[0]]
        train_tgt = [t.lower().split() for t in train[1]]
    else:
        train_src = [gold_style_tokens(s, langs[0]) for s in train[0]]
        train_tgt = [gold_style_tokens(t, langs[1]) for t in train[1]]
    keep = [n for n, (s, t) in enumerate(zip(train_src, train_tgt)) if s and t]
    src = [train_src[n] for n in keep] + [s.lower().split() for s in sources]
    tgt = [train_tgt[n] for n in keep] + [t.lower().split() for t in targets]
    key, other = _fit_key(src, tgt), _fit_key(tgt, src)
    if key in _FITS:
        fwd, rev, seconds = _FITS[key]
    elif other in _FITS:  # the same text the other way round: its links, flipped
        back, ahead, seconds = _FITS[other]
        fwd, rev = [_flip(x) for x in ahead], [_flip(x) for x in back]
    else:
        start = time.perf_counter()
        fwd, rev = eflomal_links(src, tgt, threads, work)
        seconds = time.perf_counter() - start
        fwd, rev = fwd[len(keep):], rev[len(keep):]
        _FITS.clear()  # one fit kept, and only the given pairs' links
        _FITS[key] = fwd, rev, seconds
    info = {"train_pairs": len(keep), "seconds": seconds,
            "tokenize": "whitespace" if langs is None else "gold-style"}
    return [set(x) for x in fwd], [set(x) for x in rev], info


# The last eflomal fit of this process, by the digest of its words: `nmt align --adapt
# --reverse --statistical` needs one fit of the same pairs three times (each run's guides,
# one of them the other way round, and the eflomal row). Its seconds are the fit's own:
# a row reusing it still counts the seconds the fit took.
_FITS: dict[str, tuple[list[set[Link]], list[set[Link]], float]] = {}


def _fit_key(src: Sequence[Sequence[str]], tgt: Sequence[Sequence[str]]) -> str:
    digest = hashlib.sha256(f"{ITERATIONS} {SAMPLERS}".encode())
    for s, t in zip(src, tgt, strict=True):
        digest.update(("\x1f".join(s) + "\x1e" + "\x1f".join(t) + "\n").encode())
    return digest.hexdigest()


def _flip(links: set[Link]) -> set[Link]:
    return {(j, i) for i, j in links}


def statistical_records(sources: Sequence[str], targets: Sequence[str],
                        forward: Sequence[set[Link]], reverse: Sequence[set[Link]],
                        heuristic: str, meta: dict) -> list[AlignmentRecord]:
    """0/1 link-matrix records (meta method=eflomal) of the symmetrised links."""
    records = []
    for k, (s, t) in enumerate(zip(sources, targets, strict=True)):
        words_s, words_t = s.split(), t.split()
        links = symmetrize(forward[k], reverse[k], len(words_s), len(words_t), heuristic)
        records.append(word_record(
            k, words_s, words_t, link_matrix(links, len(words_s), len(words_t)), links,
            {**meta, "method": METHOD, "symmetrize": heuristic, "mode": "forced"}))
    return records


def statistical_rows(cfg: Config, sources: Sequence[str], targets: Sequence[str],
                     from_corpus: bool, heuristics: Sequence[str] = (DEFAULT_HEURISTIC,),
                     threads: int | None = None) -> list[tuple[str, list[AlignmentRecord], dict]]:
    """`(name, records, info)` rows for `nmt align --statistical`: eflomal trained on the
    corpus's training pairs plus the pairs (tokenised like them: `from_corpus` means the
    pairs are a split of the same corpus), one row per symmetrisation heuristic."""

    require_eflomal()
    train = corpus_of(cfg).load(cfg.data.train)
    langs = None if from_corpus else (cfg.src_lang, cfg.tgt_lang)
    run = Path(cfg.run_dir)  # eflomal works in the run's folder, else the data root's cache
    work = run if run.is_dir() else Path(cfg.data.root) / ".cache"
    fwd, rev, info = statistical_links(sources, targets, train, langs, threads, work)
    rows = []
    for heuristic in heuristics:
        name = METHOD if len(heuristics) == 1 else f"{METHOD}.{heuristic}"
        records = statistical_records(sources, targets, fwd, rev, heuristic,
                                      {"train_pairs": info["train_pairs"]})
        rows.append((name, records, {"family": "statistical", "method": METHOD,
                                     "symmetrize": heuristic, "direction": "both", **info}))
    return rows


def corpus_statistical(cfg: Config, split: str, heuristic: str = DEFAULT_HEURISTIC,
                       limit: int = 0) -> tuple[list[AlignmentRecord], dict]:
    """eflomal on a split of the run's corpus (for `nmt compare --statistical`): the records
    and their summary (AER and the diagonal's against the corpus gold, when it has one)."""

    sources, targets, _ = scoring_split(cfg, cfg.run_dir, split)
    if limit:
        sources, targets = sources[:limit], targets[:limit]
    (_, records, info), = statistical_rows(cfg, sources, targets, True, (heuristic,))
    gold = gold_of(cfg, split)
    entries = load_gold(gold, records, prefix=bool(limit)) if gold is not None else None
    return records, {**info, **alignment_summary(records, entries)}
