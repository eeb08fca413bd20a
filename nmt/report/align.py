"""What `nmt align` does: align sentences with one or more runs, save matrices, links,
plots and a summary (AER against gold when there is gold)."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from nmt.align.bidirectional import (
    check_reverse,
    flip_record,
    mean_records,
    symmetrized_records,
)
from nmt.align.extract import DEFAULT_METHOD, METHODS, collect
from nmt.align.guided import reading_of
from nmt.align.io import load_gold, save_alignments, write_links
from nmt.align.metrics import alignment_error_rate, alignment_summary
from nmt.align.records import AlignmentRecord
from nmt.align.spans import corpus_style, gold_reading
from nmt.align.statistical import require_eflomal, statistical_rows
from nmt.align.words import links_from_matrix, record_matrix
from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.progress import counting
from nmt.core.rundir import replace_text
from nmt.data.corpora import read_pairs
from nmt.data.pin import gold_of, scoring_split
from nmt.data.symmetrize import (
    AGREEMENT,
    DEFAULT_AGREEMENT,
    DEFAULT_HEURISTIC,
    HEURISTICS,
    SYMMETRIZATIONS,
)
from nmt.decoding.api import as_written, load
from nmt.decoding.translate import clip_source, nbest_ids
from nmt.models.opus import NO_CORPUS
from nmt.models.runs import check_one_pair, load_config
from nmt.report.align_plots import plot_sentences
from nmt.training.adapt import DEFAULT_LR, Adaptation, adapt_copy
from nmt.training.guided import pair_guides


@dataclass(frozen=True)
class AlignOptions:
    """Everything `nmt align` is asked to do (see `nmt align --help`)."""

    runs: list[Path]
    out: Path = Path("reports/align")
    split: str | None = None  # a split of the first run's corpus (default: its test split)
    pairs: Path | None = None  # or a file of `source ||| target` lines
    src: list[str] = field(default_factory=list)  # or sentences given on the command line
    tgt: list[str] = field(default_factory=list)
    mode: str = "forced"  # forced (on the given target) | free (on the model's translation)
    gold: Path | None = None
    one_based: bool = False
    limit: int = 0  # only the first N sentences (0 = all)
    plot: int = 3  # plot the first N sentences
    fmt: str = "png"
    layer: int | None = None  # transformer layer (default: mean of all layers)
    reading: str = "auto"  # auto | naive | shifted (attention only)
    links: str = "argmax"  # argmax | threshold
    threshold: float = 0.5
    methods: list[str] = field(default_factory=lambda: [DEFAULT_METHOD])  # nmt.align.extract.METHODS
    reverse: list[Path] = field(default_factory=list)  # k-th: the k-th run's other direction
    symmetrize: list[str] = field(default_factory=list)  # heuristics (nmt.data.symmetrize)
    agreement: float = DEFAULT_AGREEMENT  # threshold of the "agreement" symmetrisation
    adapt: int = 0  # fine-tune a copy of each model on the pairs for N steps first (0 = off)
    adapt_lr: float = DEFAULT_LR
    adapt_guides: str | None = None  # eflomal's links joined so guide --adapt (None: guided.symmetrize)
    statistical: bool = False  # one more row: eflomal on the corpus + the pairs (align extra)
    ensemble: bool = False  # rows of the mean map of all --run (and of all --reverse)
    checkpoint: str = "best"  # best | last | averaged (nmt average)

    @property
    def shifted(self) -> bool | None:
        return None if self.reading == "auto" else self.reading == "shifted"

    @property
    def heuristics(self) -> list[str]:
        """The symmetrisations asked for; agreement when only --reverse is given (it beat
        every link heuristic on the synthetic validation gold: docs/experiments/, choosing
        the defaults)."""
        return list(self.symmetrize) or ([AGREEMENT] if self.reverse else [])


def check_options(opts: AlignOptions) -> None:
    """One-line errors for option combinations that cannot mean anything."""
    free = opts.mode == "free"
    if opts.gold is not None and free:
        raise NMTError("--gold scores links against gold made for the reference; with "
                       "--mode free the links are on the model's own translation: drop one")
    given = [name for name, value in (("--pairs", opts.pairs), ("--src", opts.src),
                                      ("--split", opts.split)) if value]
    if len(given) > 1:
        raise NMTError(f"{' and '.join(given)} each name the sentences to align: give one")
    if opts.pairs is not None and free:
        raise NMTError("--pairs aligns the given pairs' words (those a gold indexes); --mode "
                       "free aligns the model's own translation: use --mode forced, or --src")
    if opts.reverse and len(opts.reverse) != len(opts.runs):
        raise NMTError(f"--reverse given {len(opts.reverse)} times for {len(opts.runs)} --run; "
                       "give one reverse run per --run, in the same order")
    if opts.ensemble and len(opts.runs) < 2:
        raise NMTError("--ensemble pools several runs: give at least two --run")
    if opts.symmetrize and not (opts.reverse or opts.statistical):
        raise NMTError("--symmetrize needs --reverse RUN2, a run trained the other way")
    if free and (opts.reverse or opts.adapt or opts.statistical):
        raise NMTError("--reverse, --adapt and --statistical need the same given pairs for "
                       "every model; use --mode forced")
    if opts.statistical:

        require_eflomal()
    bad = [m for m in opts.methods if m not in METHODS]
    if bad or not opts.methods:
        raise NMTError(f"--method {bad[0] if bad else ''!r}: use one of {', '.join(METHODS)}")
    if opts.adapt_guides is not None and opts.adapt_guides not in HEURISTICS:
        raise NMTError(f"--adapt-guides {opts.adapt_guides!r}: use one of {', '.join(HEURISTICS)}")
    if opts.adapt_guides is not None and not opts.adapt:
        raise NMTError("--adapt-guides sets the teacher links of --adapt: give --adapt N too")
    bad = [h for h in opts.symmetrize if h not in SYMMETRIZATIONS]
    if bad:
        raise NMTError(f"--symmetrize {bad[0]!r}: use one of {', '.join(SYMMETRIZATIONS)}")


def select_inputs(cfg: Config, opts: AlignOptions, home: Path | None = None
                  ) -> tuple[list[str], list[str], Path | None, dict | None]:
    """Sentences to align, the corpus gold file that goes with them (if any) and, for a
    split of the corpus of the run `home` (default: the first; `cfg` its config), what was
    read of it (its digest: nmt.data.pin)."""

    gold, scored = None, None
    if opts.pairs is not None:
        sources, targets = read_pairs(opts.pairs)
    elif opts.src:
        if opts.tgt and len(opts.tgt) != len(opts.src):
            raise NMTError(f"--src given {len(opts.src)} times but --tgt {len(opts.tgt)} times")
        sources, targets = list(opts.src), list(opts.tgt or [""] * len(opts.src))
    else:
        if cfg.data.corpus == NO_CORPUS:
            raise NMTError(f"{opts.runs[0]}: a model trained elsewhere (OPUS-MT) has no corpus "
                           "here; give the sentences (--src/--tgt, or --pairs with --gold), or "
                           "put a run of the corpus first: --run runs/NAME --run "
                           f"{opts.runs[0]} --split {opts.split or 'test'}")
        split = opts.split or cfg.data.test
        sources, targets, scored = scoring_split(cfg, home or opts.runs[0], split)
        scored = {"split": split, **scored}
        gold = gold_of(cfg, split)
    if opts.limit:
        sources, targets = sources[:opts.limit], targets[:opts.limit]
    return sources, targets, gold, scored


@dataclass
class Extraction:
    """One run's records per method (None: a method the model cannot give, attention of
    fixed_context), seconds per method, and the adaptation when --adapt was asked."""

    cfg: Config
    records: dict[str, list[AlignmentRecord] | None]
    seconds: dict[str, float]
    adaptation: Adaptation | None = None


def extract_run(run: Path, sources: list[str], targets: list[str], opts: AlignOptions,
                direction: str = "forward") -> Extraction:
    """Records of one run for every `opts.methods`: forced on `targets`, or free on the
    run's own translation (the search's ids, not re-encoded text); adapted first when
    `opts.adapt`. The run's checkpoint is only read."""

    loaded = load(run, checkpoint=opts.checkpoint)  # the Python API's model: the CLI and the API read runs one way
    cfg, vocab, model = loaded.cfg, loaded.vocab, loaded.module
    gold, tokens = None, (sources, targets)
    if opts.pairs is not None:  # a gold's tokens, read as the run's corpus is written
        sources, targets, gold, notice = gold_reading(
            vocab, sources, targets, (cfg.src_lang, cfg.tgt_lang), corpus_style(cfg, run))
        if notice:
            print(f"nmt align: {run}: {notice}", file=sys.stderr)
    src_ids = vocab.encode_src(sources)
    if opts.mode == "free":
        with counting(len(src_ids), f"{run.name}: translating"):  # a bar on a terminal
            tgt_ids = [hyps[0][0] for hyps in nbest_ids(model, src_ids, cfg.decode)]
        src_ids = [clip_source(s) for s in src_ids]  # as the search read them
    elif not all(t.strip() for t in targets):
        raise NMTError("forced alignment needs a target for every sentence; give --tgt or "
                       "use --mode free")
    else:
        tgt_ids = vocab.encode_tgt(targets)
    adaptation = None
    meta = {"mode": opts.mode, "run": str(run), "direction": direction}
    if opts.adapt:
        guides, teacher_seconds = None, 0.0
        if cfg.guided.weight:  # a guided run keeps its teacher: eflomal on these pairs
            guides, teacher_seconds = pair_guides(cfg, vocab, *tokens, src_ids, tgt_ids,
                                                  opts.pairs is None and not opts.src,
                                                  [g.word_of for g in gold] if gold else None,
                                                  opts.adapt_guides)
            meta["adapt_guided"] = "eflomal"
            meta["adapt_guides"] = opts.adapt_guides or cfg.guided.symmetrize
        elif opts.adapt_guides:
            print(f"nmt align: {run}: not a guided run, so it adapts on its own loss alone "
                  "(--adapt-guides does not apply to it)", file=sys.stderr)
        model, adaptation = adapt_copy(model, src_ids, tgt_ids, opts.adapt, opts.adapt_lr,
                                       cfg.train, guided=cfg.guided, guides=guides)
        adaptation = replace(adaptation, teacher_seconds=teacher_seconds)
        meta["adapt_steps"] = opts.adapt
    out = Extraction(cfg, {}, {}, adaptation)
    for method in opts.methods:
        if method == DEFAULT_METHOD and not model.has_attention:
            out.records[method] = None
            continue
        read = {"layer": opts.layer, "shifted": opts.shifted}  # as asked (checked), else
        if method == DEFAULT_METHOD and opts.layer is None and opts.shifted is None:
            read.update(reading_of(cfg))  # the run's own (a guided run: its supervised heads)
        start = time.perf_counter()
        with counting(len(src_ids), f"{run.name}: {method}"):
            out.records[method] = collect(
                model, vocab, src_ids, tgt_ids, method=method, meta=meta, links=opts.links,
                threshold=opts.threshold, gold=gold, **read)
        if gold is None:  # the words as written (a gold's are its own already)
            as_written(out.records[method], sources, None if opts.mode == "free" else targets)
        out.seconds[method] = time.perf_counter() - start
    return out


def layer_table(records: list[AlignmentRecord], gold: list, opts: AlignOptions) -> list[dict]:
    """AER of every decoder layer, naive and shifted reading (multi-layer models), with the
    hard links that `opts.links` asks for."""
    rows = []
    for layer in range(records[0].weights.shape[0]):
        for shifted in (False, True):
            links = [links_from_matrix(record_matrix(r, shifted, layer), opts.links,
                                       opts.threshold)
                     for r in records]
            rows.append({"layer": layer, "reading": "shifted" if shifted else "naive",
                         "aer": alignment_error_rate(links, gold)["aer"]})
    return rows


def run_names(runs: list[Path]) -> list[str]:
    """Output names: the run folders' names, or their paths when two share a name."""
    names = [Path(r).name for r in runs]
    return names if len(set(names)) == len(names) else [str(r).replace("/", "_") for r in runs]


def row_name(name: str, method: str, heuristic: str | None = None) -> str:
    """`<run>` for attention, `<run>.<method>` otherwise; `.<heuristic>` when symmetrised."""
    return name + ("" if method == DEFAULT_METHOD else f".{method}") + (
        f".{heuristic}" if heuristic else "")


class Rows:
    """Summary rows and their records, written as they come (npz, links, AER)."""

    def __init__(self, opts: AlignOptions, gold: Path | None):
        self.opts, self.gold = opts, gold
        self.summary: dict[str, dict] = {}
        self.names: list[str] = []
        self.records: list[list[AlignmentRecord] | None] = []

    def add(self, name: str, records: list[AlignmentRecord] | None, info: dict) -> None:
        self.names.append(name)
        self.records.append(records)
        if records is None:
            self.summary[name] = {**info, "note": "no attention (fixed context); try "
                                                  "--method saliency"}
            return
        save_alignments(self.opts.out / f"{name}.npz", records)
        write_links(self.opts.out / f"{name}.links", records)
        entries = (load_gold(self.gold, records, self.opts.one_based, prefix=bool(self.opts.limit))
                   if self.gold else None)
        row = {**info, **alignment_summary(records, entries)}
        if entries is not None and records[0].weights.shape[0] * records[0].weights.shape[1] > 1:
            row["aer_by_layer"] = layer_table(records, entries, self.opts)
        self.summary[name] = row


def adapt_info(*extractions: Extraction) -> dict:
    """`adapt` entry of a row: steps (per model), seconds (all models together), the
    seconds of the guides' eflomal fit (one fit serves both directions), lr."""
    done = [e.adaptation for e in extractions if e.adaptation is not None]
    if not done:
        return {}
    return {"adapt": {"steps": done[0].steps, "seconds": sum(a.seconds for a in done),
                      "teacher_seconds": max(a.teacher_seconds for a in done),  # one fit
                      "lr": done[0].lr, "loss_first": [a.loss_first for a in done],
                      "loss_last": [a.loss_last for a in done]}}


def add_pair(rows: Rows, names: tuple[str, str], fwd: Extraction, rev: Extraction) -> dict:
    """The reverse run's rows (flipped into forward order) and the symmetrised rows; returns
    the flipped records per method."""
    out = {}
    for method, records in rev.records.items():
        flipped = out[method] = None if records is None else [flip_record(r) for r in records]
        rows.add(row_name(names[1], method), flipped,
                 {"family": rev.cfg.model.family, "method": method, "direction": "reverse",
                  "seconds": rev.seconds.get(method, 0.0), **adapt_info(rev)})
        if flipped is None or fwd.records[method] is None:
            continue
        for heuristic in rows.opts.heuristics:
            meta = {"method": method, "runs": [str(r) for r in names], "mode": "forced"}
            sym = symmetrized_records(fwd.records[method], flipped, heuristic, meta,
                                      rows.opts.agreement)
            rows.add(row_name(f"{names[0]}+{names[1]}", method, heuristic), sym,
                     {"family": fwd.cfg.model.family, "method": method,
                      "symmetrize": heuristic, "direction": "both",
                      "seconds": fwd.seconds[method] + rev.seconds[method],
                      **adapt_info(fwd, rev)})
    return out


def add_ensemble(rows: Rows, forward: dict, flipped: dict) -> None:
    """`--ensemble`: per method, the mean map of every run that has one (row `ensemble`),
    of every reverse run (`ensemble-reverse`), and their symmetrisations."""
    for method, sets in forward.items():
        sets = [r for r in sets if r is not None]
        if len(sets) < 2:
            continue
        meta = {"method": method, "mode": "forced"}
        pooled = mean_records(sets, meta)
        rows.add(row_name("ensemble", method), pooled,
                 {"family": "ensemble", "method": method, "runs": len(sets)})
        back = [r for r in flipped.get(method, []) if r is not None]
        if len(back) < 2:
            continue
        pooled_back = mean_records(back, meta, flipped=True)
        rows.add(row_name("ensemble-reverse", method), pooled_back,
                 {"family": "ensemble", "method": method, "direction": "reverse",
                  "runs": len(back)})
        for heuristic in rows.opts.heuristics:
            rows.add(row_name("ensemble", method, heuristic),
                     symmetrized_records(pooled, pooled_back, heuristic, meta,
                                         rows.opts.agreement),
                     {"family": "ensemble", "method": method, "symmetrize": heuristic,
                      "direction": "both", "runs": len(back)})


def add_statistical(rows: Rows, cfg: Config, sources: list[str], targets: list[str]) -> None:
    """`--statistical`: eflomal's rows (one per link --symmetrize heuristic, default
    grow-diag-final-and; eflomal gives links, not the maps `agreement` needs),
    trained on the corpus's training pairs plus these pairs (nmt.align.statistical)."""

    from_corpus = rows.opts.pairs is None and not rows.opts.src
    heuristics = [h for h in rows.opts.symmetrize if h in HEURISTICS] or [DEFAULT_HEURISTIC]
    for name, records, info in statistical_rows(cfg, sources, targets, from_corpus, heuristics):
        rows.add(name, records, info)


def align_runs(opts: AlignOptions) -> dict:
    """Align with every run (and its --reverse); write `<out>/<row>.npz/.json/.links`,
    plots and summary.json; returns the summary (row name -> entry)."""

    check_options(opts)
    configs = [(run, load_config(run)) for run in opts.runs]
    check_one_pair([(str(run), cfg) for run, cfg in configs],
                   "every --run aligns the same sentences: give runs of one pair (a run "
                   "trained the other way goes in --reverse)")
    for run, reverse in zip(opts.runs, opts.reverse):
        check_reverse(load_config(run), load_config(reverse), str(run), str(reverse))
    # the split of the first run trained on a corpus here (an OPUS-MT model has none)
    home, home_cfg = next(((r, c) for r, c in configs if c.data.corpus != NO_CORPUS), configs[0])
    sources, targets, corpus_gold_path, scored = select_inputs(home_cfg, opts, home)
    gold = opts.gold or (corpus_gold_path if opts.mode == "forced" else None)
    opts.out.mkdir(parents=True, exist_ok=True)
    if scored is not None:  # which pairs were aligned: the split's digest (docs/data.md)
        replace_text(opts.out / "data.json", json.dumps(scored, indent=2) + "\n")
    rows = Rows(opts, gold)
    names = run_names(list(opts.runs) + list(opts.reverse))
    pooled: tuple[dict, dict] = ({m: [] for m in opts.methods}, {m: [] for m in opts.methods})
    for k, run in enumerate(opts.runs):
        fwd = extract_run(Path(run), sources, targets, opts)
        for method, records in fwd.records.items():
            rows.add(row_name(names[k], method), records,
                     {"family": fwd.cfg.model.family, "method": method,
                      "seconds": fwd.seconds.get(method, 0.0), **adapt_info(fwd)})
            pooled[0][method].append(records)
        if opts.reverse:
            rev = extract_run(Path(opts.reverse[k]), targets, sources, opts, "reverse")
            flipped = add_pair(rows, (names[k], names[len(opts.runs) + k]), fwd, rev)
            for method, records in flipped.items():
                pooled[1][method].append(records)
    if opts.ensemble:
        add_ensemble(rows, *pooled)
    if opts.statistical:
        add_statistical(rows, home_cfg, sources, targets)
    if all(r is None for r in rows.records):
        raise NMTError("none of the runs has attention to export (fixed_context models only); "
                       "use --method saliency to align them through attribution")
    picks = list(range(min(opts.plot, len(sources))))
    plot_sentences(opts.out, rows.names, rows.records, picks, opts.fmt)
    replace_text(opts.out / "summary.json", json.dumps(rows.summary, indent=2) + "\n")
    return rows.summary
