"""The Python API: a trained run as an object (docs/api.md).

    import nmt
    model = nmt.load("runs/bahdanau")
    [t] = model.translate(["Ein Hund läuft."], alignments=True)
    t.text, t.score, t.links          # word links (source, target), 0-based
    records = model.align(["Ein Hund läuft."], ["A dog runs."])   # what `nmt align` writes
    model.score(["Ein Hund läuft."], ["A dog runs."])             # log-probabilities

`nmt translate`, `nmt evaluate` and `nmt align` go through this module, so the CLI and
the API give the same results by construction.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
import torch

from nmt.align.extract import DEFAULT_METHOD, METHODS, collect
from nmt.align.guided import reading_of
from nmt.align.records import AlignmentRecord
from nmt.core.config import Config
from nmt.core.errors import NMTError, one_line
from nmt.core.tokens import PAD
from nmt.data.batching import collate
from nmt.data.corpora import normalise
from nmt.data.links import Link
from nmt.data.subwords import Vocab
from nmt.decoding.engines import PyTorchEngine, make_engine
from nmt.decoding.translate import clip_source
from nmt.models.base import Seq2Seq
from nmt.models.ensemble import Ensemble, check_same_vocab
from nmt.models.published import resolve
from nmt.models.runs import check_one_pair, load_run

CHUNK_LINES = 1000  # a stream is read, decoded and yielded this many lines at a time



BYTES = (bytes, bytearray, memoryview)  # iterating one gives ints, one per byte


def _not_text(name: str, value) -> NMTError:
    """The one line for a value that is not text; bytes are named with how to decode them."""
    hint = "; decode it first, e.g. data.decode('utf-8')" if isinstance(value, BYTES) else ""
    return NMTError(f"{name}: expected a string, got {type(value).__name__}{hint}")


def _sentences(value, name: str) -> Iterable:
    """`value` if it is an iterable of sentences; a bare string or bytes (iterating them
    would split them into characters or byte values) or a non-iterable is a one-line
    NMTError naming the argument."""
    if isinstance(value, BYTES):
        raise NMTError(f"{name}: expected a list of strings, got {type(value).__name__}; "
                       "decode it and wrap it, e.g. [data.decode('utf-8')]")
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise NMTError(f"{name}: expected a list of strings, got {type(value).__name__}; "
                       f"wrap one sentence as [text]")
    return value


def _texts(value, name: str, start: int = 0) -> list[str]:
    """`value` as a list of strings (`_sentences`), each item checked to be one (named by
    its place, counted from `start`: a chunk of a longer stream)."""
    out = list(_sentences(value, name))
    for i, item in enumerate(out, start):
        if not isinstance(item, str):
            raise _not_text(f"{name}[{i}]", item)
    return out


def _count(value, name: str, allow_none: bool = False) -> int | None:
    """A whole number of at least 1 (or None where that means the default), or NMTError."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise NMTError(f"{name}: expected a whole number of at least 1, got {value!r}")
    return value

@dataclass
class Hypothesis:
    """One translation: text, the search's score, its target pieces and, when alignments
    were asked for, word-level links (source, target), 0-based, and the word matrix
    (target words x source words) they were read from."""

    text: str
    score: float
    pieces: list[str]
    links: list[Link] | None = None
    word_matrix: np.ndarray | None = None
    src_words: list[str] | None = None
    tgt_words: list[str] | None = None

    def as_dict(self) -> dict:
        out = {"text": self.text, "score": round(self.score, 4), "pieces": self.pieces}
        if self.links is not None:
            out["links"] = [list(link) for link in self.links]
        return out


@dataclass
class Translation:
    """The n-best hypotheses of one source sentence, best first; `text`, `score`,
    `pieces` and `links` are the best one's."""

    source: str
    hypotheses: list[Hypothesis] = field(default_factory=list)

    text = property(lambda self: self.hypotheses[0].text)
    score = property(lambda self: self.hypotheses[0].score)
    pieces = property(lambda self: self.hypotheses[0].pieces)
    links = property(lambda self: self.hypotheses[0].links)
    word_matrix = property(lambda self: self.hypotheses[0].word_matrix)

    def as_dict(self, n_best: bool = False) -> dict:
        """The best hypothesis's fields, and `n_best` (every hypothesis) when there are
        several or when `n_best` asks for the key on every line (an empty source has one)."""
        out = {"source": self.source, **self.hypotheses[0].as_dict()}
        if n_best or len(self.hypotheses) > 1:
            out["n_best"] = [h.as_dict() for h in self.hypotheses]
        return out


@dataclass(frozen=True)
class Sampling:
    """Sampling instead of search: top-k (k > 0) or top-p (0 < p <= 1) at `temperature`,
    seeded so that the same call gives the same samples."""

    top_k: int = 0
    top_p: float = 1.0
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self):
        def number(value, kind=numbers.Real) -> bool:  # numpy's numbers too, not bool
            return isinstance(value, kind) and not isinstance(value, bool)

        checks = (("top_k", number(self.top_k, numbers.Integral) and self.top_k >= 0,
                   "a whole number >= 0"),
                  ("top_p", number(self.top_p) and 0.0 < self.top_p <= 1.0, "0 < top_p <= 1"),
                  ("temperature", number(self.temperature) and 0.0 <= self.temperature < math.inf,
                   "a number >= 0 (near 0: greedy)"),
                  ("seed", number(self.seed, numbers.Integral), "a whole number"))
        for name, ok, expected in checks:
            if not ok:
                raise NMTError(f"Sampling {name}={getattr(self, name)!r}: expected {expected}")

    @classmethod
    def parse(cls, text: str, temperature: float = 1.0, seed: int = 0) -> Sampling:
        """`top-k:K` or `top-p:P`, as `nmt translate --sampling` takes them."""
        kind, _, value = text.partition(":")
        try:
            if kind == "top-k" and int(value) > 0:
                return cls(top_k=int(value), temperature=temperature, seed=seed)
            if kind == "top-p" and 0.0 < float(value) <= 1.0:
                return cls(top_p=float(value), temperature=temperature, seed=seed)
        except ValueError:
            pass
        raise NMTError(f"--sampling {text!r}: use top-k:K with K >= 1 or top-p:P with "
                       "0 < P <= 1, e.g. --sampling top-k:10")


class Model:
    """A trained run (or an ensemble of runs, `load(a, b)`) loaded once, in eval mode."""

    def __init__(self, path: Path, cfg: Config, vocab: Vocab, module: Seq2Seq,
                 checkpoint: str = "best", engine=None):
        self.path, self.cfg, self.vocab, self.checkpoint = Path(path), cfg, vocab, checkpoint
        self.engine = engine or PyTorchEngine(module, cfg.model.family)
        # `float_module`: the run as trained (float32), which every forced pass reads
        # (alignment, attributions, which need gradients, score, parameter counts).
        # `module`: what decodes; on PyTorch in int8, the engine's quantised copy, which has
        # no backward pass and packs its weights outside `parameters()` (docs/api.md).
        self.float_module = module
        self.module = getattr(self.engine, "module", module)

    def on(self, engine: str = "pytorch", quantize: str | None = None,
           device: str | None = None) -> Model:
        """This run decoding on `engine` ("pytorch" or "ctranslate2") in `quantize`
        (nmt.decoding.engines); the loaded weights are shared, not read again."""
        module = self.float_module  # never an int8 copy quantised again
        if engine != "pytorch" and isinstance(module, Ensemble):
            raise NMTError(f"engine {engine!r}: an ensemble decodes on PyTorch only")
        return Model(self.path, self.cfg, self.vocab, module, self.checkpoint,
                     make_engine(engine, module, self.path, self.checkpoint, self.cfg,
                                 self.vocab, quantize, device))

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def family(self) -> str:
        return self.cfg.model.family

    def __repr__(self) -> str:
        return (f"nmt.Model({str(self.path)!r}, family={self.family!r}, "
                f"pair={self.cfg.data.pair!r}, engine={self.engine.name!r})")

    # ------------------------------------------------------------------ translation

    def translate(self, texts: str | Sequence[str], beam: int | None = None, n_best: int = 1,
                  alignments: bool = False, method: str = DEFAULT_METHOD,
                  sampling: Sampling | None = None) -> list[Translation]:
        """Translate sentences: one `Translation` (n-best hypotheses) per input, in order.
        `beam` defaults to the run's decode.beam (1 = greedy); `alignments` adds each
        hypothesis's word links, read exactly as `nmt align --mode free` reads them."""
        texts = [texts] if isinstance(texts, str) else _texts(texts, "texts")
        return [t for chunk in self.translate_chunks(texts, beam, n_best, alignments, method,
                                                     sampling, chunk=max(len(texts), 1))
                for t in chunk]

    def translate_chunks(self, lines: Iterable[str], beam: int | None = None, n_best: int = 1,
                         alignments: bool = False, method: str = DEFAULT_METHOD,
                         sampling: Sampling | None = None, chunk: int = CHUNK_LINES
                         ) -> Iterator[list[Translation]]:
        """`translate` over a stream, `chunk` lines at a time (length-sorted batches inside
        each chunk), yielding each chunk's translations in input order as soon as it is
        decoded: output starts after the first chunk and memory does not grow."""

        beam = self._beam(beam, n_best, sampling)
        chunk = _count(chunk, "chunk")
        if method not in METHODS:  # checked even without alignments: a typo is not ignored
            raise NMTError(f"method {method!r}: use one of {', '.join(METHODS)}")
        lines, done = iter(_sentences(lines, "lines")), 0
        while block := _texts(islice(lines, chunk), "lines", done):
            done += len(block)
            src_ids = self.vocab.encode_src(block)
            nbest, maps = self.engine.nbest(src_ids, self.cfg.decode, beam, n_best, sampling,
                                            attention=alignments and method == DEFAULT_METHOD)
            hyps = [[Hypothesis(self.vocab.decode_tgt(ids), score, self.vocab.tgt_pieces(ids))
                     for ids, score in sentence] for sentence in nbest]
            if alignments:
                self._add_links(src_ids, nbest, hyps, method, maps)
            yield [Translation(text, h) for text, h in zip(block, hyps)]

    def _beam(self, beam: int | None, n_best: int, sampling: Sampling | None) -> int:
        _count(beam, "beam", allow_none=True)
        _count(n_best, "n_best")
        if sampling is not None:
            if not isinstance(sampling, Sampling):
                raise NMTError(f"sampling: expected nmt.api.Sampling, e.g. Sampling(top_k=10) or "
                               f"Sampling.parse('top-p:0.9'), got {type(sampling).__name__}")
            if n_best > 1:
                raise NMTError("sampling draws one translation per sentence; drop n_best")
            return 1
        if beam is not None and n_best > beam:
            raise NMTError(f"--n-best {n_best} is larger than --beam {beam}; a beam of k "
                           "keeps at most k hypotheses")
        return beam or max(self.cfg.decode.beam, n_best)

    def _add_links(self, src_ids: list, nbest: list, hyps: list[list[Hypothesis]],
                   method: str, maps: list | None = None) -> None:
        """Each hypothesis's word links: read from the engine's own attention where it
        returned the run's reading (`maps`), else from a forced pass of the model."""
        flat = [(i, k) for i, sentence in enumerate(nbest) for k in range(len(sentence))]
        if not flat:
            return
        records = self.align_ids([clip_source(src_ids[i]) for i, _ in flat],  # as decoded
                                 [nbest[i][k][0] for i, k in flat], method, mode="free",
                                 weights=None if maps is None else [maps[i][k] for i, k in flat])
        for (i, k), rec in zip(flat, records):
            h = hyps[i][k]
            h.links, h.word_matrix = rec.links, rec.word_weights
            h.src_words, h.tgt_words = rec.src_words, rec.tgt_words

    # ------------------------------------------------------------------ alignment

    def align(self, sources: Sequence[str], targets: Sequence[str] | None = None,
              method: str = DEFAULT_METHOD, beam: int | None = None) -> list[AlignmentRecord]:
        """The records `nmt align` writes: forced on `targets`, or free (on the model's own
        translation with the run's decode settings, or `beam`) when `targets` is None."""
        sources = _texts(sources, "sources")
        targets = None if targets is None else _texts(targets, "targets")
        _count(beam, "beam", allow_none=True)
        src_ids = self.vocab.encode_src(sources)
        if targets is None:  # the source as the search read it (cut to MAX_SOURCE pieces)
            tgt_ids = [h[0][0] for h in self.engine.nbest(src_ids, self.cfg.decode, beam)[0]]
            return as_written(self.align_ids([clip_source(s) for s in src_ids], tgt_ids,
                                             method, mode="free"), sources)
        if len(targets) != len(sources):
            raise NMTError(f"align: {len(sources)} sources but {len(targets)} targets")
        if not all(t.strip() for t in targets):
            raise NMTError("forced alignment needs a target for every sentence; pass "
                           "targets=None for the model's own translation")
        return as_written(self.align_ids(src_ids, self.vocab.encode_tgt(list(targets)),
                                          method), sources, targets)

    def align_ids(self, src_ids: list, tgt_ids: list, method: str = DEFAULT_METHOD,
                  mode: str = "forced", **kwargs) -> list[AlignmentRecord]:
        """Records of encoded pairs (src ids end in EOS, tgt ids do not), in the run's
        default reading (a guided run's supervised layer and heads); `kwargs` go to
        `nmt.align.extract.collect` (layer, heads, shifted, links, threshold)."""

        if method == DEFAULT_METHOD:  # a guided run is read at its supervised heads
            kwargs = {**reading_of(self.cfg), **kwargs}
        if method == DEFAULT_METHOD and not self.float_module.has_attention:
            raise NMTError(f"{self.path}: {self.family} has no attention to align with; use "
                           "method saliency (--method saliency)")
        meta = {"mode": mode, "run": str(self.path), "family": self.family,
                **kwargs.pop("meta", {})}
        return collect(self.float_module, self.vocab, src_ids, tgt_ids, method=method,
                       meta=meta, **kwargs)

    # ------------------------------------------------------------------ scoring

    @torch.no_grad()
    def score(self, sources: Sequence[str], targets: Sequence[str], batch_size: int = 64
              ) -> list[float]:
        """log p(target | source) of each pair: the sum over the target's pieces and EOS
        of the model's log-probabilities (natural log), teacher-forced, in eval mode."""
        sources, targets = _texts(sources, "sources"), _texts(targets, "targets")
        _count(batch_size, "batch_size")
        if len(sources) != len(targets):
            raise NMTError(f"score: {len(sources)} sources but {len(targets)} targets")
        src_ids = self.vocab.encode_src(sources)
        tgt_ids = self.vocab.encode_tgt(targets)
        module = self.float_module.eval()
        device = next(module.parameters()).device
        out: list[float] = []
        for start in range(0, len(src_ids), batch_size):
            batch = collate(src_ids[start:start + batch_size],
                            tgt_ids[start:start + batch_size]).to(device)
            logits, _, _ = module(batch.src, batch.tgt_in)
            log_probs = torch.log_softmax(logits.float(), -1)
            picked = log_probs.gather(-1, batch.tgt_out.unsqueeze(-1)).squeeze(-1)
            out += (picked * (batch.tgt_out != PAD)).sum(1).tolist()
        return out


def load(*runs: str | Path, checkpoint: str = "best", device: str | None = None,
         engine: str = "pytorch", quantize: str | None = None) -> Model:
    """A trained run, `checkpoint` "best", "last" or "averaged" (`nmt average`); several
    runs of one vocabulary make an ensemble that averages their per-step log-probabilities.
    `engine` "ctranslate2" decodes an exported Transformer on CTranslate2 (exported here when
    missing or stale); `quantize` int8 (or int8_float32 on CTranslate2) decodes in int8
    (docs/deploy.md). Forced alignment and scoring run the PyTorch model."""

    if not runs:
        raise NMTError("nmt.load: give at least one run directory")
    for i, run in enumerate(runs):
        if not isinstance(run, (str, Path)):
            raise NMTError(f"nmt.load: run {i} is {type(run).__name__}; give a run "
                           "directory's path, e.g. 'runs/bahdanau'")
    runs = tuple(resolve(r) for r in runs)  # hf:ORG/NAME: the Hub cache's folder
    loaded = [load_run(Path(r), checkpoint) for r in runs]
    cfg, vocab, module, _ = loaded[0]
    if len(loaded) > 1:
        check_one_pair([(str(r), c) for r, (c, _, _, _) in zip(runs, loaded)],
                       "an ensemble averages runs that translate one way")
        check_same_vocab([(Path(r), v) for r, (_, v, _, _) in zip(runs, loaded)])
        module = Ensemble([m for _, _, m, _ in loaded])
    if device:
        try:
            module = module.to(device)
        except (RuntimeError, AssertionError, TypeError) as exc:  # unknown, or not built in
            raise NMTError(f"nmt.load: device {device!r}: {one_line(exc)}; use 'cpu', or "
                           "'cuda' with a CUDA build of torch") from None
    model = Model(Path(runs[0]), cfg, vocab, module.eval(), checkpoint)
    return model if (engine, quantize) == ("pytorch", None) else model.on(engine, quantize, device)


def as_written(records: list[AlignmentRecord], sources: Sequence[str],
                targets: Sequence[str] | None = None) -> list[AlignmentRecord]:
    """Each record's words as the texts wrote them (normalised, split on spaces) where the
    pieces make as many words: a character outside the vocabulary is `<unk>` in the pieces,
    not in the words, so runs of other vocabularies show one sentence the same way."""
    for rec, src, tgt in zip(records, sources, targets or [None] * len(records)):
        for side, text in (("src_words", src), ("tgt_words", tgt)):
            words = normalise(text).split() if text is not None else None
            if words is not None and len(words) == len(getattr(rec, side)):
                setattr(rec, side, words)
    return records
