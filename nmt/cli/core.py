"""`nmt data ...`, `nmt train`, `nmt translate`, `nmt evaluate`, `nmt export`, `nmt average`."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.app import (
    Checkpoint,
    ConfigOpt,
    Engine,
    EngineOpt,
    Method,
    Quantize,
    QuantizeOpt,
    RunOpt,
    SetOpt,
    app,
    data_app,
)
from nmt.core.errors import NMTError


@data_app.command("download")
def data_download(
    corpus: Annotated[str, typer.Argument(help="corpus name, e.g. multi30k")] = "multi30k",
    pair: Annotated[str, typer.Option(help="language pair src-tgt, e.g. de-en")] = "de-en",
    from_dir: Annotated[Path | None, typer.Option(
        "--from", help="import local raw files {split}.{lang}[.gz|.xz] instead of the hub"
    )] = None,
    root: Annotated[Path, typer.Option(help="data root")] = Path("data"),
) -> None:
    """Fetch a preset corpus (multi30k) from the Hugging Face hub, or import it from local
    files (--from); your own corpora: `nmt data import`."""
    from nmt.data.pipeline import download  # start-up: `nmt --help` imports no torch

    for line in download(corpus, pair, root, from_dir).lines():
        typer.echo(line)


@data_app.command("import")
def data_import(
    name: Annotated[str, typer.Argument(help="corpus name: the folder data/NAME/PAIR")],
    pair: Annotated[str, typer.Option(help="language pair src-tgt, e.g. de-en")],
    files: Annotated[tuple[Path, Path] | None, typer.Option(
        help="two line-aligned files SRC TGT (.gz, .xz too)")] = None,
    from_dir: Annotated[Path | None, typer.Option(
        "--from", help="a folder of {split}.{lang}[.gz|.xz] files (train, val, test*; dev -> val)")
    ] = None,
    tsv: Annotated[Path | None, typer.Option(help="a tab-separated file, one pair a row")] = None,
    columns: Annotated[str | None, typer.Option(
        help="--tsv's columns SRC,TGT: header names or 0-based indexes (default: the "
             "language codes' columns, else 0,1)")] = None,
    hf: Annotated[str | None, typer.Option(
        help="a Hugging Face dataset id or local dataset folder")] = None,
    config: Annotated[str | None, typer.Option(help="--hf's config (subset), e.g. ro-en")] = None,
    revision: Annotated[str | None, typer.Option(help="--hf's branch, tag or commit")] = None,
    split_map: Annotated[str | None, typer.Option(
        help="--hf's split names hub=ours,... (default validation/valid/dev=val)")] = None,
    fields: Annotated[str | None, typer.Option(
        help="--hf's fields SRC,TGT when they are not the language codes")] = None,
    valid_size: Annotated[int, typer.Option(
        min=0, help="draw a val split of N pairs from the training pairs")] = 0,
    test_size: Annotated[int, typer.Option(
        min=0, help="draw a test split of N pairs from the training pairs")] = 0,
    seed: Annotated[int, typer.Option(min=0, max=2**63 - 1, help="seed of the val/test draw")] = 1,
    min_words: Annotated[int, typer.Option(min=0, help="drop shorter pairs (0: off)")] = 1,
    max_words: Annotated[int, typer.Option(min=0, help="drop longer pairs (0: off)")] = 250,
    max_ratio: Annotated[float, typer.Option(
        min=0, help="drop pairs whose longer side has more than this many times the "
                    "shorter's words (0: off)")] = 9.0,
    extra_columns: Annotated[bool, typer.Option(
        "--extra-columns", help="--tsv: allow rows with more cells than the header (or the "
                                "first row); refused by default, naming the row")] = False,
    keep_empty: Annotated[bool, typer.Option(
        "--keep-empty", help="keep pairs with an empty side (and those of no words: "
                             "--min-words then counts only non-empty pairs)")] = False,
    keep_same: Annotated[bool, typer.Option(
        "--keep-same", help="keep pairs whose source equals the target")] = False,
    keep_overlap: Annotated[bool, typer.Option(
        "--keep-overlap", help="keep training pairs also in val or test")] = False,
    keep_duplicates: Annotated[bool, typer.Option(
        "--keep-duplicates", help="keep repeated training pairs")] = False,
    lowercase: Annotated[bool, typer.Option(
        "--lowercase", help="lowercase every split (for a gold alignment in lowercase; "
                            "the manifest says so)")] = False,
    root: Annotated[Path, typer.Option(help="data root")] = Path("data"),
) -> None:
    """Import your own corpus from --files, --from, --tsv or --hf: normalised, filtered
    (training pairs only; each filter counted), split, written whole (docs/data.md)."""
    from nmt.data.pipeline import Filters, import_from  # start-up: `nmt --help` imports no torch

    filters = Filters(empty=not keep_empty, min_words=min_words, max_words=max_words,
                      max_ratio=max_ratio, same=not keep_same, overlap=not keep_overlap,
                      duplicates=not keep_duplicates)
    for line in import_from(name, pair, root, files=files, from_dir=from_dir, tsv=tsv,
                            columns=columns, hf=hf, config=config, revision=revision,
                            split_map=split_map, fields=fields, valid_size=valid_size,
                            test_size=test_size, seed=seed, filters=filters,
                            extra_columns=extra_columns, lowercase=lowercase).lines():
        typer.echo(line)


@data_app.command("synth")
def data_synth(
    root: Annotated[Path, typer.Option(help="data root")] = Path("data"),
    seed: Annotated[int, typer.Option(help="random seed")] = 1234,
    force: Annotated[bool, typer.Option(help="regenerate even if present")] = False,
) -> None:
    """Generate the synthetic corpus with gold alignments (data/synth/src-tgt)."""
    from nmt.data.corpora import ensure_synth  # start-up: `nmt --help` imports no torch

    out = ensure_synth(root, seed, force=force)  # --force: replaced in one step, as an import
    for path in sorted(out.glob("*.src")):
        typer.echo(f"{path.stem}: {sum(1 for _ in open(path, encoding='utf-8'))} pairs "
                   f"(+ {path.stem}.gold alignments)")
    typer.echo(f"wrote {out}")


@data_app.command("prepare")
def data_prepare(config: ConfigOpt, set_: SetOpt = None) -> None:
    """Train (or reuse) the SentencePiece model(s) and encode the splits of a config."""
    from nmt.data.store import encode_split  # start-up: `nmt --help` imports no torch
    from nmt.data.subwords import Vocab, prepare_vocab  # start-up: `nmt --help` imports no torch
    from nmt.models.checks import load_config  # start-up: `nmt --help` imports no torch

    cfg = load_config(config, set_ or [])
    vocab_dir = prepare_vocab(cfg)
    vocab = Vocab.from_dir(vocab_dir)
    for split in (cfg.data.train, cfg.data.valid, cfg.data.test):
        src, tgt = encode_split(cfg, vocab_dir, split)
        typer.echo(f"{split}: {len(src)} pairs, {int(tgt.lengths().sum())} target pieces")
    typer.echo(f"vocabulary {vocab.src_size}/{vocab.tgt_size} pieces in {vocab_dir}")


@data_app.command("links")
def data_links(config: ConfigOpt, set_: SetOpt = None) -> None:
    """Cache the teacher's word links of a config's training and validation pairs for
    guided alignment (guided.teacher eflomal: eflomal both ways, guided.symmetrize)."""
    from nmt.models.checks import load_config  # start-up: `nmt --help` imports no torch
    from nmt.training.guided import (  # start-up: `nmt --help` imports no torch
        links_folder,
        teacher_links,
        write_teacher_links,
    )

    cfg = load_config(config, set_ or [])
    if cfg.guided.teacher == "gold":
        for split in (cfg.data.train, cfg.data.valid):
            links = teacher_links(cfg, split)
            typer.echo(f"{split}: {len(links)} pairs, {sum(map(len, links))} gold links "
                       "(the corpus's own; nothing to cache)")
        return
    folder = links_folder(cfg)
    if not (folder / f"{cfg.data.train}.links").is_file():
        write_teacher_links(cfg)
    for split in (cfg.data.train, cfg.data.valid):
        links = teacher_links(cfg, split, compute=False)
        typer.echo(f"{split}: {len(links)} pairs, {sum(map(len, links))} links")
    typer.echo(f"wrote {folder}")


@data_app.command("list")
def data_list(root: Annotated[Path, typer.Option(help="data root")] = Path("data")) -> None:
    """List every corpus under the data root: pair, split sizes, source, when imported."""
    from nmt.data.overview import list_corpora  # start-up: `nmt --help` imports no numpy

    for line in list_corpora(root):
        typer.echo(line)


@data_app.command("gc")
def data_gc(
    root: Annotated[Path, typer.Option(help="data root")] = Path("data"),
    runs: Annotated[list[Path] | None, typer.Option(
        help="a folder of runs whose pins keep caches (repeatable; default runs)")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="say what would go")] = False,
) -> None:
    """Remove caches (vocabularies, stores, teacher links in DATA/.cache) that no corpus
    and no run references, and what killed commands left; says how much it freed."""
    from nmt.data.caches import collect  # start-up: `nmt --help` imports no numpy

    for line in collect(root, runs or [Path("runs")], dry_run):
        typer.echo(line)


@data_app.command("show")
def data_show(
    name: Annotated[str, typer.Argument(help="corpus name, e.g. multi30k")],
    pair: Annotated[str | None, typer.Option(
        help="language pair (default: the corpus's only one)")] = None,
    root: Annotated[Path, typer.Option(help="data root")] = Path("data"),
    out: Annotated[Path | None, typer.Option(
        help="length histograms (.png or .svg; default reports/data/NAME-PAIR-lengths.png)")
                   ] = None,
) -> None:
    """Print a corpus's sizes and filter counts; draw its sentence lengths (docs/data.md)."""
    from nmt.data.overview import show_corpus  # start-up: `nmt --help` imports no numpy

    for line in show_corpus(root, name, pair, out):
        typer.echo(line)


@app.command()
def train(config: ConfigOpt, set_: SetOpt = None,
          resume: Annotated[bool, typer.Option(help="continue from checkpoints/last.pt")] = False,
          evaluate: Annotated[bool, typer.Option(help="evaluate the test split at the end")] = True,
          ) -> None:
    """Train one model family from a YAML config (runs/<name>/)."""
    from nmt.data.overview import missing_test_note  # start-up: `nmt --help` imports no torch
    from nmt.decoding.evaluate import evaluate_run  # start-up: `nmt --help` imports no torch
    from nmt.models.checks import load_config, own_run  # start-up: no torch for `--help`
    from nmt.training import distributed  # start-up: `nmt --help` imports no torch
    from nmt.training.trainer import (
        train as run_training,  # start-up: `nmt --help` imports no torch
    )

    distributed.setup()
    cfg = load_config(config, set_ or [])
    cfg = own_run(cfg, config, set_ or []) if resume else cfg
    evaluate = evaluate and distributed.is_main()
    if evaluate and (note := missing_test_note(cfg, trained=False)):
        typer.echo(note, err=True)
    run_training(cfg, resume=resume)
    distributed.cleanup()
    if evaluate and (note := missing_test_note(cfg, trained=True)):
        typer.echo(note)  # the run is kept: a missing test split is no reason to fail now
    elif evaluate:
        entry = evaluate_run(cfg.run_dir, cfg.data.test)
        typer.echo(f"{cfg.data.test}: BLEU {entry['bleu']:.2f} chrF {entry['chrf']:.2f} "
                   f"(beam {entry['beam']}) -> {cfg.run_dir / 'scores.json'}")


class OutputFormat(str, Enum):
    text = "text"
    jsonl = "jsonl"


RunsOpt = Annotated[list[Path], typer.Option(
    "--run", "-r", help="run directory; repeat for an ensemble (one vocabulary)")]
CheckpointOpt = Annotated[Checkpoint, typer.Option(
    help="which checkpoint: best, last, or averaged (nmt average)")]
ThreadsOpt = Annotated[int, typer.Option(
    min=0, help="torch threads, and --engine ctranslate2's workers (0: torch's default)")]


def set_threads(threads: int) -> None:
    """--threads, set before the model loads, as `nmt serve` sets it (docs/deploy.md)."""
    if threads:
        import torch  # start-up: `nmt --help` imports no torch

        torch.set_num_threads(threads)


@app.command()
def translate(
    run: RunsOpt,
    sentences: Annotated[list[str] | None, typer.Argument(help="sentences to translate")] = None,
    input_: Annotated[Path | None, typer.Option("--input", "-i", help="file, one sentence a line")] = None,
    beam: Annotated[int | None, typer.Option(min=1, help="beam size (1 = greedy)")] = None,
    n_best: Annotated[int | None, typer.Option(
        min=1, help="hypotheses per sentence, each `text<TAB>score` (default: decode.n_best)")] = None,
    alignments: Annotated[bool, typer.Option(
        "--alignments", help="add word links after a tab: Pharaoh source-target, 0-based")] = False,
    method: Annotated[Method | None, typer.Option(help="with --alignments: how links are read (default: the model's attention)")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="text, or jsonl: one JSON object per line")] = OutputFormat.text,
    sampling: Annotated[str | None, typer.Option(help="sample instead of search: top-k:K or top-p:P")] = None,
    temperature: Annotated[float, typer.Option(min=0.0, help="with --sampling: softmax temperature")] = 1.0,
    seed: Annotated[int, typer.Option(help="with --sampling: random seed")] = 0,
    checkpoint: CheckpointOpt = Checkpoint.best,
    engine: EngineOpt = Engine.pytorch,
    quantize: QuantizeOpt = None,
    threads: ThreadsOpt = 0,
) -> None:
    """Translate sentences given as arguments, in a file (--input) or on stdin, streaming:
    each chunk of 1,000 lines is written (in input order) as soon as it is decoded."""
    from nmt.align.extract import DEFAULT_METHOD  # start-up: `nmt --help` imports no torch
    from nmt.api import load  # start-up: torch and the models load only for this verb
    from nmt.cli.output import write_translations
    from nmt.data.corpora import line_source
    from nmt.decoding.api import CHUNK_LINES, Sampling

    if beam is not None and n_best is not None and n_best > beam:
        raise NMTError(f"--n-best {n_best} is larger than --beam {beam}")
    if sentences and input_ is not None:
        raise NMTError("give sentences as arguments or a file with --input, not both")
    if method is not None and not alignments:
        raise NMTError("--method says how --alignments are read: add --alignments, or drop it")
    plan = Sampling.parse(sampling, temperature, seed) if sampling else None
    set_threads(threads)
    model = load(*run, checkpoint=checkpoint.value, engine=engine.value,
                 quantize=quantize.value if quantize else None)
    n_best = n_best or (1 if plan else model.cfg.decode.n_best)
    typing = input_ is None and not sentences and sys.stdin.isatty()  # a line at a time
    with line_source(None if sentences else input_) as lines:
        chunks = model.translate_chunks(sentences or lines, beam, n_best, alignments,
                                        method.value if method else DEFAULT_METHOD, plan,
                                        chunk=1 if typing else CHUNK_LINES)
        write_translations(chunks, sys.stdout, n_best, fmt.value, alignments)


class ExportFormat(str, Enum):
    ctranslate2 = "ctranslate2"


@app.command()
def export(
    run: RunOpt,
    format_: Annotated[ExportFormat, typer.Option("--format", help="ctranslate2")
                       ] = ExportFormat.ctranslate2,
    quantize: Annotated[Quantize, typer.Option(help="weights stored as float32, int8 or "
                                                    "int8_float32")] = Quantize.float32,
    out: Annotated[Path | None, typer.Option(
        help="a new or empty folder, or an export to replace (default: RUN/ctranslate2/"
             "CHECKPOINT, where --engine ctranslate2 looks; CHECKPOINT-QUANTIZE when not "
             "float32)")
                   ] = None,
    checkpoint: CheckpointOpt = Checkpoint.best,
) -> None:
    """Export a Transformer run for CTranslate2 (a guided run with its alignment head);
    decode it with --engine ctranslate2 (docs/deploy.md)."""
    from nmt.decoding import export as exporting  # start-up: no torch for --help

    path = exporting.export(run, checkpoint.value, quantize.value, out)
    engine_dir = exporting.export_dir(run, checkpoint.value).resolve()
    if path == engine_dir and quantize.value == "float32":
        typer.echo(f"wrote {path} ({quantize.value}); decode it with "
                   f"nmt translate --run {run} --engine ctranslate2")
    else:
        typer.echo(f"wrote {path} ({quantize.value}) for ctranslate2.Translator; "
                   f"--engine ctranslate2 reads {engine_dir} (float32, quantised at load "
                   "with --quantize)")


@app.command()
def average(
    run: RunOpt,
    last: Annotated[int, typer.Option(min=1, help="average the last N kept checkpoints")] = 5,
) -> None:
    """Average the parameters of a run's last N kept checkpoints (train.keep_last) into
    checkpoints/averaged.pt; select it with --checkpoint averaged."""
    from nmt.core.checkpoint import average_run  # start-up: `nmt --help` imports no torch

    path, used = average_run(run, last)
    typer.echo(f"wrote {path} (the mean of {len(used)}: {', '.join(p.name for p in used)})")


@app.command()
def evaluate(
    run: RunsOpt,
    split: Annotated[str | None, typer.Option(help="split name (default: the config's test)")] = None,
    beam: Annotated[int | None, typer.Option(min=1, help="beam size (default: config)")] = None,
    limit: Annotated[int, typer.Option(min=0, help="only the first N sentences (0 = all)")] = 0,
    checkpoint: CheckpointOpt = Checkpoint.best,
    engine: EngineOpt = Engine.pytorch,
    quantize: QuantizeOpt = None,
    threads: ThreadsOpt = 0,
) -> None:
    """Decode a split, score it with sacreBLEU (BLEU, chrF) and dump its attention; with
    several --run, or another engine than PyTorch in float32, the scores are printed and
    nothing is written."""
    from nmt.api import load  # start-up: torch and the models load only for this verb
    from nmt.decoding.evaluate import evaluate_model

    set_threads(threads)
    model = load(*run, checkpoint=checkpoint.value, engine=engine.value,
                 quantize=quantize.value if quantize else None)
    split = split or model.cfg.data.test
    entry = evaluate_model(model, split, beam, limit, write=len(run) == 1)
    typer.echo(f"{split}: BLEU {entry['bleu']:.2f} chrF {entry['chrf']:.2f} "
               f"({entry['sentences']} sentences, beam {entry['beam']}, "
               f"{entry['sentences_per_s']:.1f} sent/s, {entry['engine']})")
    typer.echo(entry["bleu_signature"])
    for row in entry["by_length"]:
        typer.echo(f"  source {row['bucket']:>6} words: BLEU {row['bleu']:6.2f} "
                   f"({row['sentences']} sentences)")
