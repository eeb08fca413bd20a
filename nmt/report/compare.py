"""`nmt compare`: one Markdown and one self-contained HTML report over several runs of a pair:
a table (one row per run, or per group of runs that differ only by seed, shown as mean ±
sample std), the sacreBLEU signatures, BLEU by source length, validation BLEU against
training time, and side-by-side attention grids of a few test sentences."""

from __future__ import annotations

import json
import os
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nmt.align.io import load_alignments
from nmt.align.records import AlignmentRecord
from nmt.align.statistical import METHOD, corpus_statistical
from nmt.core.checkpoint import load_checkpoint
from nmt.core.config import Config, config_to_dict
from nmt.core.document import Block, render_html, render_markdown
from nmt.core.errors import NMTError
from nmt.core.plotting import plot_grid, plot_lines
from nmt.core.rundir import RunDir, replace_text
from nmt.data.links import GoldAlignment, read_gold
from nmt.data.pin import gold_of
from nmt.models import MODELS
from nmt.models.runs import check_one_pair, load_config
from nmt.report.foreign import count_parameters, foreign_summary, home, is_foreign, note

NA = "—"
FIXED = "†"
FIXED_NOTE = (f"{FIXED} fixed_context has no attention: the whole source is encoded into one "
              "fixed vector, so there is no alignment to score (AER) and no attention "
              "distribution to measure (entropy).")
ATTENTION_NOTE = (
    "Attention weights are a computation, not an explanation: AER and entropy describe the "
    "weights, they do not prove which source words the model \"uses\" for its translation.")
TABLE_NOTE = ("Groups of runs that differ only by seed show mean ± sample standard deviation "
              "over the n runs. Training time is the last `elapsed` in metrics.jsonl; AER needs "
              "a gold alignment; entropy is in nats per target word.")
GRID_NOTE = ("Word-level attention of each run, forced on the reference (the same target words "
             "for every run), on one colour scale 0..1; where the split has gold links, the "
             "last panel is the gold.")
COLUMNS = (  # (key, header, decimals)
    ("params", "Params", 0), ("train_min", "Train min", 1), ("train_tok_s", "Train tok/s", 0),
    ("decode_sent_s", "Decode sent/s", 1), ("best_valid_bleu", "Best valid BLEU", 2),
    ("bleu", "BLEU", 2), ("chrf", "chrF", 2), ("aer", "AER", 3),
    ("diagonal_aer", "Diagonal AER", 3), ("entropy", "Entropy (nats)", 2))
ATTENTION_KEYS = ("aer", "diagonal_aer", "entropy")
STATISTICAL_NOTE = ("eflomal: a statistical word aligner (IBM-1, HMM, fertility; Östling & "
                    "Tiedemann 2016) trained on the corpus's training pairs plus this split, "
                    "both directions symmetrised; scored by the same AER code. Its grid panel "
                    "is its 0/1 link matrix.")
GOLD_PANEL = "gold (sure 1, possible ½)"
SOURCE_WORDS = (6, 14)  # default grid sentences: sources of this many words (inclusive)
N_SENTENCES = 2


@dataclass
class RunSummary:
    """What the report needs from one run directory."""

    name: str
    path: Path
    cfg: Config
    metrics: list[dict]
    scores: dict | None  # scores.json[split], None when the split was not evaluated
    params: int | None
    records: dict[int, AlignmentRecord] | None = None  # a foreign model's, computed here

    @property
    def has_attention(self) -> bool:
        return MODELS[self.cfg.model.family].has_attention


@dataclass
class Row:
    """One table row: a single run, or runs that differ only by seed."""

    runs: list[RunSummary]
    values: dict[str, list[float | None]] = field(default_factory=dict)


# ------------------------------------------------------------------------------ loading runs


def load_summary(path: Path, split: str | None, home_run=None) -> RunSummary:
    """Config, metrics, scores of `split` (default: the config's test) and parameter count
    (a model trained elsewhere: nmt.report.foreign's, on `home_run`'s split)."""
    run = RunDir(path)
    cfg = load_config(run.path)
    if is_foreign(cfg):
        return RunSummary(*foreign_summary(path, cfg, split or home_run[1].data.test, home_run))
    try:
        scores = run.read_scores().get(split or cfg.data.test)
        metrics = run.read_metrics()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise NMTError(f"{run.path}: scores.json or metrics.jsonl is not valid JSON ({exc}); "
                       "re-run `nmt evaluate` or restore the file") from None
    ckpt = next((p for p in (run.checkpoint("best"), run.checkpoint("last")) if p.is_file()), None)
    params = count_parameters(load_checkpoint(ckpt)["model"]) if ckpt else None
    return RunSummary(cfg.name or run.path.name, run.path, cfg, metrics, scores, params)


def model_label(cfg: Config) -> str:
    """Family and scorer, e.g. 'luong (general, local-p)' or 'bahdanau (additive)'."""
    m = cfg.model
    if m.family == "luong":
        return f"luong ({m.score}, {m.attention})"
    if m.family == "bahdanau":
        return "bahdanau (additive)"
    return m.family


def run_values(run: RunSummary) -> dict[str, float | None]:
    """The numbers of one table row (None where the run has no such number)."""
    elapsed = [r["elapsed"] for r in run.metrics if "elapsed" in r]
    valid = [r for r in run.metrics if r.get("kind") == "valid"]
    bleus = [r["bleu"] for r in valid if r.get("bleu") is not None]
    s = run.scores or {}
    align = s.get("alignment") or {}
    return {
        "params": run.params,
        "train_min": elapsed[-1] / 60 if elapsed else None,
        "train_tok_s": valid[-1].get("train_tokens_per_s") if valid else None,
        "decode_sent_s": s.get("sentences_per_s"), "best_valid_bleu": max(bleus, default=None),
        "bleu": s.get("bleu"), "chrf": s.get("chrf"),
        **{key: align.get(key) for key in ATTENTION_KEYS},
    }


def group_by_seed(runs: list[RunSummary]) -> list[Row]:
    """Rows in input order; runs differing only by where they are (`runs_dir`, `name`) and
    `train.seed`, each seed once, share one."""
    rows: dict[str, Row] = {}
    for run in runs:
        raw = config_to_dict(run.cfg)
        raw.pop("name"), raw.pop("runs_dir"), raw["train"].pop("seed")
        key = json.dumps(raw, sort_keys=True)
        while key in rows and run.cfg.train.seed in [r.cfg.train.seed for r in rows[key].runs]:
            key += " again"
        rows.setdefault(key, Row([])).runs.append(run)
    for row in rows.values():
        values = [run_values(r) for r in row.runs]
        row.values = {key: [v[key] for v in values] for key, _, _ in COLUMNS}
    return list(rows.values())


# ------------------------------------------------------------------------------------ table


def format_cell(values: list[float | None], decimals: int, exact: bool = False) -> str:
    """One value, or mean ± sample std over the available values ('(n=k)' if some lack it)."""
    have = [float(v) for v in values if v is not None]
    if not have:
        return NA
    fmt = (lambda x: f"{x:,.0f}") if decimals == 0 else (lambda x: f"{x:.{decimals}f}")
    if len(have) == 1 or (exact and len(set(have)) == 1):
        text = fmt(have[0])
    else:
        text = f"{fmt(statistics.mean(have))} ± {fmt(statistics.stdev(have))}"
    return text if len(have) == len(values) or len(values) == 1 else f"{text} (n={len(have)})"


def table_rows(rows: list[Row]) -> list[list[str]]:
    """Table cells per row: run(s), model, n, then COLUMNS."""
    out = []
    for row in rows:
        names = ", ".join(r.name for r in row.runs)
        if len(row.runs) > 1:
            names += f" (seeds {', '.join(str(r.cfg.train.seed) for r in row.runs)})"
        cells = [names, model_label(row.runs[0].cfg), str(len(row.runs))]
        fixed = not row.runs[0].has_attention
        for key, _, decimals in COLUMNS:
            cell = format_cell(row.values[key], decimals, exact=key == "params")
            cells.append(f"{cell} {FIXED}" if fixed and key in ATTENTION_KEYS else cell)
        out.append(cells)
    return out


def statistical_row(cfg: Config, split: str
                    ) -> tuple[list[str], dict[str, dict[int, AlignmentRecord]]]:
    """`--statistical`: eflomal's table cells (AER and the diagonal's; nothing else applies)
    and its 0/1 link records for the grids."""

    records, summary = corpus_statistical(cfg, split)
    cells = [METHOD, f"statistical ({summary['symmetrize']})", "1"]
    cells += [format_cell([summary.get(key) if key in ("aer", "diagonal_aer") else None], dec)
              for key, _, dec in COLUMNS]
    return cells, {METHOD: {r.index: r for r in records}}


def table_notes(runs: list[RunSummary], split: str) -> list[Block]:
    """Signatures, footnotes and caveats that go under the table."""
    blocks: list[Block] = []
    missing = [r for r in runs if r.scores is None]
    if missing:
        blocks.append(("p", f"No scores for split `{split}` in: "
                       + ", ".join(f"{r.name} (run `nmt evaluate --run {r.path} --split "
                                   f"{split}`)" for r in missing) + f"; their cells show {NA}."))
    for kind in ("bleu_signature", "chrf_signature"):
        sigs = {r.name: r.scores[kind] for r in runs if r.scores and r.scores.get(kind)}
        label = "BLEU" if kind.startswith("bleu") else "chrF"
        if len(set(sigs.values())) == 1:
            blocks.append(("p", f"sacreBLEU {label} signature: `{next(iter(sigs.values()))}`"))
        elif sigs:
            blocks.append(("p", f"sacreBLEU {label} signatures differ:"))
            blocks.append(("list", [f"{name}: `{sig}`" for name, sig in sigs.items()]))
    if any(not r.has_attention for r in runs):
        blocks.append(("p", FIXED_NOTE))
    blocks.append(("p", TABLE_NOTE))
    blocks.append(("p", ATTENTION_NOTE))
    return blocks


# ------------------------------------------------------------------------------------ plots


def _bucket_start(label: str) -> int:
    return int(re.match(r"\d+", label).group()) if re.match(r"\d+", label) else 10**9


def plot_by_length(runs: list[RunSummary], path: Path) -> Path | None:
    """BLEU per source-length bucket, one line per run; None if no run has the breakdown."""
    rows = {r.name: r.scores["by_length"] for r in runs if r.scores and r.scores.get("by_length")}
    if not rows:
        return None
    labels = sorted({b["bucket"] for br in rows.values() for b in br}, key=_bucket_start)
    pos = {label: n for n, label in enumerate(labels)}
    series = {name: ([pos[b["bucket"]] for b in br], [b["bleu"] for b in br])
              for name, br in rows.items()}
    sizes = {b["bucket"]: b["sentences"] for br in rows.values() for b in br}
    ticks = [f"{label}\n(n={sizes[label]})" for label in labels]  # tiny buckets are noisy
    return plot_lines(series, path, "source length (words)", "BLEU",
                      "BLEU by source length", xticks=ticks)


def plot_valid_curve(runs: list[RunSummary], path: Path) -> Path | None:
    """Validation BLEU against training minutes, one line per run; None without validations."""
    series = {}
    for r in runs:
        valid = [m for m in r.metrics if m.get("kind") == "valid" and m.get("bleu") is not None]
        if valid:
            series[r.name] = ([m["elapsed"] / 60 for m in valid], [m["bleu"] for m in valid])
    if not series:
        return None
    return plot_lines(series, path, "training time (minutes)", "validation BLEU",
                      "Validation BLEU during training")


# ------------------------------------------------------------------------- alignment grids


def _load_records(runs: list[RunSummary], split: str, notes: list[str]
                  ) -> dict[str, dict[int, AlignmentRecord] | None]:
    """Per run: records by sentence index, None for fixed_context; runs without a file skip."""
    out: dict[str, dict[int, AlignmentRecord] | None] = {}
    for r in runs:
        npz = RunDir(r.path).align / f"{split}.npz"
        if r.records is not None:  # computed by nmt.report.foreign
            out[r.name] = r.records
        elif not r.has_attention:
            out[r.name] = None
        elif npz.is_file():
            out[r.name] = {rec.index: rec for rec in load_alignments(npz)}
        else:
            notes.append(f"{r.name}: no `{npz}` (run `nmt evaluate --run {r.path} --split "
                         f"{split}` to write it); left out of the grids.")
    return out


def choose_sentences(records: dict[str, dict[int, AlignmentRecord] | None]) -> list[int]:
    """First N_SENTENCES indices whose source has SOURCE_WORDS words, from the first run."""
    first = next((recs for recs in records.values() if recs), {})
    low, high = SOURCE_WORDS
    return [i for i in sorted(first) if low <= len(first[i].src_words) <= high][:N_SENTENCES]


def gold_matrix(gold: GoldAlignment, shape: tuple[int, int]) -> np.ndarray | None:
    """The gold as a (target, source) panel: 1 for a sure link, 0.5 for a possible one;
    None when a link falls outside `shape` (the gold indexes other words)."""
    matrix = np.zeros(shape, dtype=np.float32)
    for value, links in ((0.5, gold.possible), (1.0, gold.sure)):
        for i, j in links:
            if j >= shape[0] or i >= shape[1]:
                return None
            matrix[j, i] = value
    return matrix


def plot_alignment_grids(runs: list[RunSummary], split: str, out: Path,
                         sentences: list[int] | None, notes: list[str],
                         extra: dict[str, dict[int, AlignmentRecord]] | None = None,
                         gold: list[GoldAlignment] | None = None) -> list[Path]:
    """One grid per sentence (one panel per run, then one per `extra` row such as eflomal's
    link matrix, then the `gold` of the split's sentences), forced on the shared reference."""
    records = {**_load_records(runs, split, notes), **(extra or {})}
    chosen = choose_sentences(records) if sentences is None else list(sentences)
    paths = []
    for idx in chosen:
        ref = next((recs[idx] for recs in records.values() if recs and idx in recs), None)
        if ref is None:
            files = ", ".join(str(RunDir(r.path).align / f"{split}.npz") for r in runs)
            raise NMTError(f"sentence {idx} is in none of {files or 'the runs'}; "
                           "pick an index that the runs' alignment files contain")
        shape = (len(ref.tgt_words), len(ref.src_words))
        panels: list[tuple[str, object]] = []
        for name, recs in records.items():
            rec = recs.get(idx) if recs else None
            if recs is None:
                panels.append((name, None))
            elif rec is not None and rec.word_weights.shape == shape:
                panels.append((name, rec.word_weights))
            else:
                notes.append(f"{name}: sentence {idx} missing or split into other words; "
                             "left out of its grid.")
        matrix = gold_matrix(gold[idx], shape) if gold and idx < len(gold) else None
        if matrix is not None:
            panels.append((GOLD_PANEL, matrix))
        path = out / f"align_{split}_{idx}.png"
        paths.append(plot_grid(panels, ref.src_words, ref.tgt_words, path,
                               title=f"{split} sentence {idx} (attention forced on the reference)"))
    return paths


# ---------------------------------------------------------------------------------- compare


def _load_all(run_paths: list[Path], split: str | None) -> tuple[list[RunSummary], str]:
    """Check every path first (cheap), then load; `split` defaults to the first run's test."""
    if not run_paths:
        raise NMTError("compare needs at least one run directory, e.g. runs/bahdanau")
    configs = [load_config(p) for p in run_paths]
    check_one_pair(list(zip(map(str, run_paths), configs)), "a report scores and draws every "
                   "run on the same split: give runs of one corpus and pair", corpus=True)
    home_run = home(list(zip(run_paths, configs)))
    split = split or home_run[1].data.test
    runs = [load_summary(Path(p), split, home_run) for p in run_paths]
    clash = [r for r in runs if [q.name for q in runs].count(r.name) > 1]
    base = os.path.commonpath([r.path.resolve() for r in clash]) if clash else ""
    for r in clash:  # a published copy keeps its run's name: label each by its own path
        if r.path.resolve() != Path(base):
            r.name = r.path.resolve().relative_to(base).as_posix()
    names = [r.name for r in runs]
    if dup := next((n for n in names if names.count(n) > 1), None):
        paths = ", ".join(str(r.path) for r in runs if r.name == dup)
        raise NMTError(f"run name {dup!r} appears twice ({paths}); pass each run once")
    return runs, split


def compare_runs(run_paths: list[Path], out: Path, split: str | None = None,
                 sentences: list[int] | None = None, statistical: bool = False) -> Path:
    """Write report.md, report.html and the PNGs under `out`; return the Markdown path.
    `statistical`: one more row and grid panel, eflomal on the same split (the extra)."""
    runs, split = _load_all(run_paths, split)
    first = next(r.cfg for r in runs if not is_foreign(r.cfg))  # whose split and gold
    cells, extra = statistical_row(first, split) if statistical else (None, None)
    taught = [r.name for r in runs if r.cfg.guided.weight and r.cfg.guided.teacher == METHOD]
    if extra and taught:  # the same aligner taught these runs: say so on its panel
        extra = {f"{METHOD} (teacher of {', '.join(taught)})": extra[METHOD]}
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NMTError(f"{out}: exists and is not a directory; pass a folder for --out")
    out.mkdir(parents=True, exist_ok=True)
    rows = group_by_seed(runs)
    head = ["Run", "Model", "n"] + [h for _, h, _ in COLUMNS]
    blocks: list[Block] = [
        ("h1", f"Comparison on `{split}`"),
        ("p", "Runs: " + ", ".join(f"`{r.path}`" for r in runs)),
        ("table", head, table_rows(rows) + ([cells] if cells else [])),
        *([("p", STATISTICAL_NOTE)] if cells else []), *table_notes(runs, split)]
    plots = [(plot_by_length(runs, out / "bleu_by_length.png"), "BLEU by source length"),
             (plot_valid_curve(runs, out / "valid_bleu_by_time.png"), "validation BLEU vs time")]
    blocks += [("h2", "Curves")] + [("img", p, alt) for p, alt in plots if p is not None]
    notes = [note([r.name for r in runs if is_foreign(r.cfg)])] if any(
        is_foreign(r.cfg) for r in runs) else []
    gold_path = gold_of(first, split)
    gold = read_gold(gold_path) if gold_path is not None else None
    grids = plot_alignment_grids(runs, split, out, sentences, notes, extra, gold)
    blocks.append(("h2", "Attention, side by side"))
    blocks.append(("p", GRID_NOTE))
    blocks += [("img", p, p.stem) for p in grids]
    if not grids:
        blocks.append(("p", "No sentence to show: no run has alignments of a 6-14 word source."))
    if notes:
        blocks.append(("list", notes))
    md_path = out / "report.md"
    replace_text(md_path, render_markdown(blocks))
    replace_text(out / "report.html", render_html(blocks, f"nmt compare: {split}"))
    return md_path
