"""What `nmt align` does: align sentences with one or more runs, save matrices, links,
plots and a summary (AER against gold when there is gold)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from nmt.align.extract import collect
from nmt.align.io import (
    AlignmentRecord,
    corpus_gold,
    load_alignments,
    load_gold,
    read_pairs,
    save_alignments,
    write_links,
)
from nmt.align.metrics import alignment_error_rate, alignment_summary
from nmt.align.words import links_from_matrix, word_matrix
from nmt.config import Config
from nmt.errors import NMTError


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
    layer: int | None = None  # transformer layer (default: penultimate)
    reading: str = "auto"  # auto | naive | shifted
    links: str = "argmax"  # argmax | threshold
    threshold: float = 0.5

    @property
    def shifted(self) -> bool | None:
        return None if self.reading == "auto" else self.reading == "shifted"


def select_inputs(cfg: Config, opts: AlignOptions) -> tuple[list[str], list[str], Path | None]:
    """Sentences to align and the corpus gold file that goes with them, if any."""
    from nmt.data.corpora import load_split

    gold = None
    if opts.pairs is not None:
        sources, targets = read_pairs(opts.pairs)
    elif opts.src:
        if opts.tgt and len(opts.tgt) != len(opts.src):
            raise NMTError(f"--src given {len(opts.src)} times but --tgt {len(opts.tgt)} times")
        sources, targets = list(opts.src), list(opts.tgt or [""] * len(opts.src))
    else:
        split = opts.split or cfg.data.test
        sources, targets = load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair, split)
        gold = corpus_gold(cfg, split)
    if opts.limit:
        sources, targets = sources[:opts.limit], targets[:opts.limit]
    return sources, targets, gold


def align_one(run: Path, sources: list[str], targets: list[str], opts: AlignOptions
              ) -> tuple[Config, list[AlignmentRecord] | None]:
    """Records for one run: forced on `targets`, or free on the run's own translation."""
    from nmt.progress import counting
    from nmt.rundir import load_run
    from nmt.translate import translate_ids

    cfg, vocab, model, _ = load_run(run)
    if not model.has_attention:
        return cfg, None
    src_ids = vocab.encode_src(sources)
    if opts.mode == "free":
        with counting(len(src_ids), f"{run.name}: translating"):  # a bar on a terminal
            targets = translate_ids(model, vocab, src_ids, cfg.decode)
    elif not all(t.strip() for t in targets):
        raise NMTError("forced alignment needs a target for every sentence; give --tgt or "
                       "use --mode free")
    with counting(len(src_ids), f"{run.name}: aligning"):
        records = collect(model, vocab, src_ids, vocab.encode_tgt(targets), layer=opts.layer,
                          shifted=opts.shifted, meta={"mode": opts.mode, "run": str(run)},
                          method=opts.links, threshold=opts.threshold)
    return cfg, records


def layer_table(records: list[AlignmentRecord], gold: list, opts: AlignOptions) -> list[dict]:
    """AER of every decoder layer, naive and shifted reading (multi-layer models)."""
    rows = []
    for layer in range(records[0].weights.shape[0]):
        for shifted in (False, True):
            links = [links_from_matrix(word_matrix(r.weights, r.src_tokens[:-1],
                                                   r.tgt_tokens[:-1], shifted, layer),
                                       opts.links, opts.threshold)
                     for r in records]
            rows.append({"layer": layer, "reading": "shifted" if shifted else "naive",
                         "aer": alignment_error_rate(links, gold)["aer"]})
    return rows


def plot_sentences(out: Path, names: list[str], all_records: list, picks: list[int],
                   fmt: str) -> list[Path]:
    """A heatmap per run and sentence, and one grid per sentence with a panel per run."""
    from nmt.plotting import plot_grid, plot_heatmap

    paths = []
    first = next(recs for recs in all_records if recs is not None)
    for k in picks:
        panels, targets = [], []
        for name, recs in zip(names, all_records):
            rec = recs[k] if recs is not None else None
            panels.append((name, rec.word_weights if rec is not None else None))
            targets.append(rec.tgt_words if rec is not None else first[k].tgt_words)
            if rec is not None:
                paths.append(plot_heatmap(rec.word_weights, rec.src_words, rec.tgt_words,
                                          out / name / f"sentence{k}.{fmt}", f"{name}: #{k}"))
        paths.append(plot_grid(panels, first[k].src_words, targets,
                               out / f"grid_sentence{k}.{fmt}", f"sentence #{k}"))
    return paths


def run_names(runs: list[Path]) -> list[str]:
    """Output names: the run folders' names, or their paths when two share a name."""
    names = [Path(r).name for r in runs]
    return names if len(set(names)) == len(names) else [str(r).replace("/", "_") for r in runs]


def align_runs(opts: AlignOptions) -> dict:
    """Align with every run; write `<out>/<name>.npz/.json/.links`, plots, summary.json."""
    from nmt.rundir import load_config

    if opts.gold is not None and opts.mode == "free":
        raise NMTError("--gold scores links against gold made for the reference; with "
                       "--mode free the links are on the model's own translation: drop one")
    sources, targets, corpus_gold_path = select_inputs(load_config(opts.runs[0]), opts)
    gold = opts.gold or (corpus_gold_path if opts.mode == "forced" else None)
    opts.out.mkdir(parents=True, exist_ok=True)
    summary, all_records = {}, []
    for run, name in zip(opts.runs, run_names(opts.runs)):
        cfg, records = align_one(Path(run), sources, targets, opts)
        all_records.append(records)
        if records is None:
            summary[name] = {"family": cfg.model.family, "note": "no attention (fixed context)"}
            continue
        save_alignments(opts.out / f"{name}.npz", records)
        write_links(opts.out / f"{name}.links", records)
        entries = load_gold(gold, records, opts.one_based) if gold else None
        summary[name] = {"family": cfg.model.family, **alignment_summary(records, entries)}
        if entries is not None and records[0].weights.shape[0] * records[0].weights.shape[1] > 1:
            summary[name]["aer_by_layer"] = layer_table(records, entries, opts)
    if all(r is None for r in all_records):
        raise NMTError("none of the runs has attention to export (fixed_context models only)")
    picks = list(range(min(opts.plot, len(sources))))
    plot_sentences(opts.out, run_names(opts.runs), all_records, picks, opts.fmt)
    (opts.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def over_training_grid(run: Path, sentence: int, out: Path, fmt: str) -> Path:
    """One validation sentence's attention at every validation step, as a grid (+ GIF)."""
    from nmt.plotting import plot_grid, plot_heatmap, save_gif

    steps = sorted((run / "align" / "steps").glob("step*.npz"))
    if not steps:
        raise NMTError(f"{run}/align/steps: no attention snapshots; the run has no attention "
                       "or train.align_sentences was 0")
    panels, frames, base = [], [], None
    out.mkdir(parents=True, exist_ok=True)
    for path in steps:
        records = load_alignments(path)
        if sentence >= len(records):
            raise NMTError(f"--sentence {sentence}: snapshots hold {len(records)} sentences")
        rec = records[sentence]
        base = base or rec
        step = int(path.stem[4:])
        panels.append((f"step {step}", rec.word_weights))
        frames.append(plot_heatmap(rec.word_weights, rec.src_words, rec.tgt_words,
                                   out / f"frame_{step:08d}.png", f"step {step}"))
    grid = plot_grid(panels, base.src_words, base.tgt_words,
                     out / f"over_training_sentence{sentence}.{fmt}", f"{run.name}: #{sentence}")
    save_gif(frames, out / f"over_training_sentence{sentence}.gif")
    return grid
