"""The runs `nmt serve` holds and what each request asks of them.

The set of runs is fixed at start: the paths given on the command line are loaded once
through `nmt.load` (eval mode) and named by index and name; a client names runs only that
way, never by path. Every answer goes through the Python API (`Model.translate`,
`Model.align`, `Model.align_ids`, `Model.score`), so the server gives what `nmt translate`
and `nmt align` give for the same runs and sentences.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmt.align.bidirectional import check_reverse, flip_record, symmetrized_records
from nmt.align.extract import DEFAULT_METHOD, method_for
from nmt.align.records import AlignmentRecord
from nmt.core.errors import NMTError
from nmt.data.symmetrize import DEFAULT_AGREEMENT
from nmt.decoding.api import Model, load
from nmt.decoding.engines import engine_for
from nmt.explore.payload import READINGS, PanelSpec, panel_spec, panel_views
from nmt.explore.sources import RecordSet
from nmt.report.align import run_names

MAX_WORDS = 100  # per source or target sentence (whitespace-separated words)
MAX_CHARS = 1000  # characters per source or target sentence
MAX_PIECES = 400  # subword pieces per sentence (a long unspaced string is one "word")
MAX_BEAM = 16  # beam and n-best


@dataclass
class Served:
    """One run as the server holds it: its index and name (what clients use), the loaded
    model and, with --reverse, the run trained the other way."""

    index: int
    name: str
    model: Model
    reverse: Model | None = None
    reverse_name: str | None = None

    @property
    def parameters(self) -> int:
        """The run's weights as trained: counted on the float32 module, since an int8 copy
        packs its Linear and recurrent weights outside `parameters()`."""
        return sum(p.numel() for p in self.model.float_module.parameters())

    def info(self) -> dict:
        cfg = self.model.cfg
        return {"index": self.index, "name": self.name, "family": cfg.model.family,
                "pair": cfg.data.pair, "corpus": cfg.data.corpus,
                "parameters": self.parameters,
                "attention": self.model.float_module.has_attention,
                "beam": cfg.decode.beam, "decoder_layers": cfg.model.dec_layers,
                "heads": cfg.model.heads if cfg.model.family == "transformer" else None,
                "reverse": self.reverse_name}


def load_runs(paths: list[Path], reverse: list[Path] = (), engine: str = "pytorch",
              quantize: str | None = None, say=print) -> list[Served]:
    """Load every run once (and its --reverse: the k-th reverse is the k-th run's other
    direction, as in `nmt align`); names are the folders' names, or their paths when two
    share a name. Each run decodes on `engine` in `quantize` where its family can, else
    on the nearest that it can (nmt.decoding.engines.engine_for), said in one line."""

    if not paths:
        raise NMTError("nmt serve: give at least one run directory, e.g. nmt serve runs/bahdanau")
    reverse = list(reverse)
    if reverse and len(reverse) != len(paths):
        raise NMTError(f"--reverse given {len(reverse)} times for {len(paths)} runs; give one "
                       "reverse run per RUN, in the same order")
    names = run_names(list(paths) + reverse)
    served = []
    for k, path in enumerate(paths):
        model = load(path)
        run_engine, run_quantize, why = engine_for(model.family, engine, quantize)
        if why:
            say(f"nmt serve: {path} decodes on {run_engine}"
                f"{' in ' + run_quantize if run_quantize else ''}: {why}")
        if (run_engine, run_quantize) != ("pytorch", None):
            model = model.on(run_engine, run_quantize)
        rev = rev_name = None
        if reverse:
            rev, rev_name = load(reverse[k]), names[len(paths) + k]
            check_reverse(model.cfg, rev.cfg, str(path), str(reverse[k]))
        served.append(Served(k, names[k], model, rev, rev_name))
    return served


def too_long(field: str, text: str, model: Model | None = None) -> str | None:
    """Why `text` is over a limit (words, characters, subword pieces of `model`), or None."""
    if len(text) > MAX_CHARS:
        return f"{field}: {len(text):,} characters; the limit is {MAX_CHARS:,} characters"
    words = len(text.split())
    if words > MAX_WORDS:
        return f"{field}: {words:,} words; the limit is {MAX_WORDS:,} words"
    if model is not None:
        encode = model.vocab.encode_src if field == "source" else model.vocab.encode_tgt
        pieces = len(encode([text])[0])
        if pieces > MAX_PIECES:
            return (f"{field}: {pieces:,} subword pieces for run {model.name}; the limit is "
                    f"{MAX_PIECES:,} pieces")
    return None


# ---------------------------------------------------------------------------- translate


def pairs(links) -> list[list[int]] | None:
    return None if links is None else [[int(i), int(j)] for i, j in links]


def translate(run: Served, source: str, beam: int | None, n_best: int) -> dict:
    """The run's n-best translations of `source`, each with its word links: attention's,
    or saliency's for a family without attention (`links_method` says which)."""
    model = run.model
    method = method_for(model.float_module)
    [t] = model.translate([source], beam=beam, n_best=n_best, alignments=True, method=method)
    hyps = [{"text": h.text, "score": float(h.score), "links": pairs(h.links)}
            for h in t.hypotheses]
    return {"run": run.index, "name": run.name, "family": model.family,
            "beam": beam or max(model.cfg.decode.beam, n_best), "text": t.text,
            "score": float(t.score), "links": pairs(t.links), "links_method": method,
            "n_best": hyps}


# ---------------------------------------------------------------------------- align


def matrix_json(rec: AlignmentRecord) -> dict:
    """Words, the word-level matrix (target words x source words) and links of a record."""
    matrix = np.round(np.nan_to_num(rec.word_weights.astype(np.float64)), 6)
    layers, heads = rec.weights.shape[:2]
    return {"src_words": list(rec.src_words), "tgt_words": list(rec.tgt_words),
            "matrix": matrix.tolist(), "links": pairs(rec.links),
            "layers": int(layers), "heads": int(heads)}


def forward_record(model: Model, source: str, target: str | None, method: str,
                   beam: int | None) -> AlignmentRecord:
    """`nmt align`'s record: forced on `target`, or free on the run's own translation
    (the run's decode.beam, or `beam`)."""
    return model.align([source], None if target is None else [target], method, beam)[0]


@dataclass
class Aligned:
    """One run's answer to an align request: its record (None with a note), and with
    symmetrisation the reverse run's record (flipped to this order) and the symmetrised one."""

    run: Served
    method: str
    record: AlignmentRecord | None = None
    note: str | None = None
    target_logprob: float | None = None
    reverse: AlignmentRecord | None = None
    symmetrized: AlignmentRecord | None = None
    reverse_note: str | None = None

    def as_dict(self) -> dict:
        out = {"run": self.run.index, "name": self.run.name, "family": self.run.model.family,
               "method": self.method, "note": self.note, "target_logprob": self.target_logprob,
               **(matrix_json(self.record) if self.record is not None else {})}
        if self.reverse is not None or self.reverse_note:
            out["reverse"] = None if self.reverse is None else {
                "name": self.run.reverse_name, **matrix_json(self.reverse)}
            out["symmetrized"] = None if self.symmetrized is None else matrix_json(self.symmetrized)
            out["reverse_note"] = self.reverse_note
        return out


def no_attention(model: Model, method: str) -> str | None:
    if method == DEFAULT_METHOD and not model.float_module.has_attention:
        return (f"{model.family} has no attention (the whole source is one vector); switch "
                "the method to saliency")
    return None


def align(run: Served, source: str, target: str | None, method: str, beam: int | None = None,
          symmetrize: str | None = None) -> Aligned:
    """The run's alignment of `source` (forced on `target`, free when None) by `method`;
    with `symmetrize` (a heuristic of nmt.data.symmetrize) and a reverse run, also the
    reverse run's forced alignment of (target, source), flipped, and the two symmetrised,
    as `nmt align --reverse` does."""
    out = Aligned(run, method, note=no_attention(run.model, method))
    if out.note:
        return out
    rec = out.record = forward_record(run.model, source, target, method, beam)
    if target is not None:
        out.target_logprob = float(run.model.score([source], [target])[0])
    if symmetrize is None or run.reverse is None:
        return out
    out.reverse_note = no_attention(run.reverse, method)
    if out.reverse_note:
        return out
    text = target if target is not None else " ".join(rec.tgt_words)
    if not text.strip():
        out.reverse_note = "the translation is empty: nothing to align the other way"
        return out
    [back] = run.reverse.align([text], [source], method)
    out.reverse = flip_record(back)
    meta = {"method": method, "runs": [run.name, run.reverse_name],
            "mode": "forced" if target is not None else "free"}
    try:
        [out.symmetrized] = symmetrized_records([rec], [out.reverse], symmetrize, meta,
                                                DEFAULT_AGREEMENT)
    except NMTError as exc:
        out.reverse_note = str(exc)
    return out


# ---------------------------------------------------------------------------- the page's data


def explorer_data(results: list[Aligned], source: str, forced: bool, title: str) -> dict:
    """The document explorer.js shows (nmt.explore.payload's format, one sentence): one
    panel per run, plus the reverse and symmetrised panels of runs that have them. In free
    mode each panel carries its own target words (each run's own translation)."""
    first = next((a.record for a in results if a.record is not None), None)
    src = list(first.src_words) if first is not None else source.split()
    tgt = list(first.tgt_words) if first is not None and forced else []
    panels, entries = [], []

    def add(name: str, method: str, rec: AlignmentRecord | None, note: str | None,
            run: int, role: str) -> None:
        if rec is None:
            spec = PanelSpec(title=f"{name} · {method}", name=name, method=method, kind="soft")
            entry = {"note": note or "no matrix"}
        else:
            rs = RecordSet(name=name, method=method, path=Path(name), records={0: rec})
            spec = panel_spec(rs)
            entry = panel_views(rec, spec, None)
            if list(rec.src_words) != src:
                entry["src"] = list(rec.src_words)
            if list(rec.tgt_words) != tgt:
                entry["tgt"] = list(rec.tgt_words)
        panels.append({**spec.to_json(), "run": run, "role": role})
        entries.append(entry)

    for a in results:
        add(a.run.name, a.method, a.record, a.note, a.run.index, "forward")
        if a.reverse is not None or a.reverse_note:
            add(a.run.reverse_name or "reverse", f"{a.method} (reverse)", a.reverse,
                a.reverse_note, a.run.index, "reverse")
            heuristic = a.symmetrized.meta["symmetrize"] if a.symmetrized is not None else ""
            add(f"{a.run.name}+{a.run.reverse_name}", f"{a.method} ({heuristic or 'symmetrised'})",
                a.symmetrized, a.reverse_note, a.run.index, "symmetrized")
    return {"title": title, "split": None, "readings": list(READINGS), "gold": None,
            "panels": panels, "sentences": [{"i": 0, "src": src, "tgt": tgt, "p": entries}],
            "notes": []}
