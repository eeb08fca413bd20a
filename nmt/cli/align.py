"""`nmt align` and `nmt compare` (registered on the main app)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.app import app
from nmt.errors import NMTError


def _read_pairs(path: Path) -> tuple[list[str], list[str]]:
    """`source ||| target` lines; errors name the file and line."""
    from nmt.data.corpora import read_lines

    sources, targets = [], []
    for number, line in enumerate(read_lines(path), 1):
        if line.count("|||") != 1:
            raise NMTError(f"{path}:{number}: expected 'source ||| target'")
        src, tgt = (part.strip() for part in line.split("|||"))
        sources.append(src)
        targets.append(tgt)
    if not sources:
        raise NMTError(f"{path}: no sentence pairs")
    return sources, targets


def _inputs(cfg, split, pairs, src, tgt, limit) -> tuple[list[str], list[str], Path | None]:
    """Sentences to align and the corpus gold file that goes with them, if any."""
    from nmt.data.corpora import load_split

    if pairs is not None:
        sources, targets = _read_pairs(pairs)
        gold = None
    elif src:
        sources, targets, gold = list(src), list(tgt or [""] * len(src)), None
        if tgt and len(tgt) != len(src):
            raise NMTError(f"--src given {len(src)} times but --tgt {len(tgt)} times")
    else:
        split = split or cfg.data.test
        root = Path(cfg.data.root)
        sources, targets = load_split(root, cfg.data.corpus, cfg.data.pair, split)
        gold = root / cfg.data.corpus / cfg.data.pair / f"{split}.gold"
        gold = gold if gold.is_file() else None
    if limit:
        sources, targets = sources[:limit], targets[:limit]
    return sources, targets, gold


def align_one(run: Path, sources, targets, mode, layer, shifted, method, threshold):
    """Records for one run: forced on `targets`, or free on the run's own translation."""
    from nmt.collect import collect
    from nmt.evaluate import translate_ids
    from nmt.run import load_run

    cfg, vocab, model, _ = load_run(run)
    if not model.has_attention:
        return cfg, None
    src_ids = vocab.encode_src(sources)
    if mode == "free":
        targets = translate_ids(model, vocab, src_ids, cfg.decode)
    elif not all(t.strip() for t in targets):
        raise NMTError("forced alignment needs a target for every sentence; give --tgt or "
                       "use --mode free")
    records = collect(model, vocab, src_ids, vocab.encode_tgt(targets), layer=layer,
                      shifted=shifted, meta={"mode": mode, "run": str(run)}, method=method,
                      threshold=threshold)
    return cfg, records


def _gold_for(gold, records, one_based, limit):
    from nmt.alignment import check_links_in_range, read_gold

    entries = read_gold(gold, one_based=one_based)
    entries = entries[:limit] if limit else entries  # --limit aligns a prefix
    check_links_in_range(entries, [len(r.src_words) for r in records],
                         [len(r.tgt_words) for r in records], gold)
    return entries


def _layer_table(records, gold) -> list[dict]:
    """AER of every decoder layer, naive and shifted reading (multi-layer models)."""
    from nmt.alignment import alignment_error_rate, links_from_matrix
    from nmt.collect import word_matrix

    rows = []
    for layer in range(records[0].weights.shape[0]):
        for shifted in (False, True):
            links = [links_from_matrix(word_matrix(r.weights, r.src_tokens[:-1],
                                                   r.tgt_tokens[:-1], shifted, layer))
                     for r in records]
            rows.append({"layer": layer, "reading": "shifted" if shifted else "naive",
                         "aer": alignment_error_rate(links, gold)["aer"]})
    return rows


def _plots(out, names, all_records, picks, fmt):
    from nmt.plotting import plot_grid, plot_heatmap

    paths = []
    first = next(recs for recs in all_records if recs is not None)
    for k in picks:
        base = first[k]
        panels, targets = [], []
        for name, recs in zip(names, all_records):
            rec = recs[k] if recs is not None else None
            panels.append((name, rec.word_weights if rec is not None else None))
            targets.append(rec.tgt_words if rec is not None else base.tgt_words)
            if rec is not None:
                paths.append(plot_heatmap(rec.word_weights, rec.src_words, rec.tgt_words,
                                          out / name / f"sentence{k}.{fmt}", f"{name}: #{k}"))
        paths.append(plot_grid(panels, base.src_words, targets, out / f"grid_sentence{k}.{fmt}",
                               f"sentence #{k}"))
    return paths


def align_command(runs, split, pairs, src, tgt, mode, gold, one_based, limit, out, plot, fmt,
                  layer, reading_name, method="argmax", threshold=0.0):
    from nmt.alignment import format_pharaoh, save_alignments
    from nmt.collect import alignment_summary

    if fmt not in ("png", "svg"):
        raise NMTError(f"--format {fmt!r}: choose png or svg")
    shifted = None if reading_name == "auto" else reading_name == "shifted"
    names = [Path(r).name for r in runs]
    if len(set(names)) != len(names):
        names = [str(r).replace("/", "_") for r in runs]
    from nmt.run import load_run

    cfg0 = load_run(runs[0])[0]
    sources, targets, corpus_gold = _inputs(cfg0, split, pairs, src, tgt, limit)
    gold = gold or (corpus_gold if mode == "forced" else None)
    out.mkdir(parents=True, exist_ok=True)
    summary, all_records = {}, []
    for run, name in zip(runs, names):
        cfg, records = align_one(Path(run), sources, targets, mode, layer, shifted, method,
                                 threshold)
        all_records.append(records)
        if records is None:
            summary[name] = {"family": cfg.model.family, "note": "no attention (fixed context)"}
            continue
        save_alignments(out / f"{name}.npz", records)
        (out / f"{name}.links").write_text("".join(format_pharaoh(r.links) + "\n"
                                                   for r in records), encoding="utf-8")
        entries = _gold_for(gold, records, one_based, limit) if gold else None
        summary[name] = {"family": cfg.model.family, **alignment_summary(records, entries)}
        if entries is not None and records[0].weights.shape[0] * records[0].weights.shape[1] > 1:
            summary[name]["aer_by_layer"] = _layer_table(records, entries)
    if all(r is None for r in all_records):
        raise NMTError("none of the runs has attention to export (fixed_context models only)")
    picks = list(range(min(plot, len(sources))))
    _plots(out, names, all_records, picks, fmt)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def over_training(run: Path, sentence: int, out: Path, fmt: str) -> Path:
    """One validation sentence's attention at every validation step, as a grid (+ GIF)."""
    from nmt.alignment import load_alignments
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


@app.command()
def align(
    run: Annotated[list[Path], typer.Option("--run", "-r", help="run directory (repeat for side by side)")],
    split: Annotated[str | None, typer.Option(help="split of the run's corpus (default: test)")] = None,
    pairs: Annotated[Path | None, typer.Option(help="file of 'source ||| target' lines")] = None,
    src: Annotated[list[str] | None, typer.Option(help="source sentence (repeatable)")] = None,
    tgt: Annotated[list[str] | None, typer.Option(help="target for --src (forced mode)")] = None,
    mode: Annotated[str, typer.Option(help="forced (on the given target) or free (on the model's translation)")] = "forced",
    gold: Annotated[Path | None, typer.Option(help="gold alignments (Pharaoh i-j / talp i-j, ipj)")] = None,
    one_based: Annotated[bool, typer.Option(help="gold indices start at 1")] = False,
    limit: Annotated[int, typer.Option(help="only the first N sentences (0 = all)")] = 0,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("reports/align"),
    plot: Annotated[int, typer.Option(help="plot the first N sentences")] = 3,
    fmt: Annotated[str, typer.Option("--format", help="png or svg")] = "png",
    layer: Annotated[int | None, typer.Option(help="transformer layer for word links (default: penultimate)")] = None,
    reading: Annotated[str, typer.Option(help="auto, naive or shifted (Chen et al. 2020)")] = "auto",
    links: Annotated[str, typer.Option(help="hard links: argmax per target word, or threshold")] = "argmax",
    threshold: Annotated[float, typer.Option(help="with --links threshold: every word pair with weight >= this")] = 0.5,
    over_training_: Annotated[bool, typer.Option("--over-training", help="draw one validation sentence across training steps")] = False,
    sentence: Annotated[int, typer.Option(help="sentence for --over-training")] = 0,
) -> None:
    """Export attention matrices, hard links and plots; AER against gold alignments."""
    if mode not in ("forced", "free"):
        raise NMTError(f"--mode {mode!r}: choose forced or free")
    if reading not in ("auto", "naive", "shifted"):
        raise NMTError(f"--reading {reading!r}: choose auto, naive or shifted")
    if limit < 0:
        raise NMTError(f"--limit must be 0 (all) or positive, got {limit}")
    if over_training_:
        for r in run:
            path = over_training(r, sentence, out / r.name, fmt)
            typer.echo(f"wrote {path}")
        return
    if links not in ("argmax", "threshold") or not 0.0 < threshold <= 1.0:
        raise NMTError(f"--links {links!r} --threshold {threshold}: choose argmax or "
                       "threshold, with a threshold in (0, 1]")
    summary = align_command(run, split, pairs, src, tgt, mode, gold, one_based, limit, out,
                            plot, fmt, layer, reading, links, threshold)
    for name, row in summary.items():
        if "note" in row:
            typer.echo(f"{name:<24} {row['note']}")
            continue
        aer = (f" AER {row['aer']:.3f} (P {row['precision']:.3f} R {row['recall']:.3f}; "
               f"diagonal {row['diagonal_aer']:.3f})" if "aer" in row else "")
        typer.echo(f"{name:<24} entropy {row['entropy']:.3f} nats, EOS mass "
                   f"{row['eos_mass']:.3f}{aer}")
    typer.echo(f"wrote {out}")

@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="run directories")],
    out: Annotated[Path, typer.Option(help="report folder")] = Path("reports/compare"),
    split: Annotated[str | None, typer.Option(help="split to report (default: test)")] = None,
    sentence: Annotated[list[int] | None, typer.Option(help="sentence index for the alignment grid (repeatable)")] = None,
) -> None:
    """One Markdown + HTML report putting runs side by side."""
    from nmt.report import compare_runs

    path = compare_runs(list(runs), out, split, sentence)
    typer.echo(f"wrote {path} and {path.with_suffix('.html')}")
