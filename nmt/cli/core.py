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
        "--from", help="import local raw files {split}.{lang}[.gz] instead of the hub")] = None,
    root: Annotated[Path, typer.Option(help="data root")] = Path("data"),
) -> None:
    """Fetch a corpus from the Hugging Face hub, or import it from local files (--from)."""
    from nmt.data.corpora import (  # start-up: `nmt --help` imports no torch
        download_corpus,
        import_corpus,
    )

    if from_dir is not None:
        manifest = import_corpus(corpus, pair, from_dir, root)
    else:
        manifest = download_corpus(corpus, pair, root)
    for split, info in manifest["splits"].items():
        dropped = f" ({info['dropped_empty']} empty pairs dropped)" if info["dropped_empty"] else ""
        typer.echo(f"{split}: {info['lines']} pairs{dropped}")
    typer.echo(f"wrote {root / corpus / pair}")


@data_app.command("synth")
def data_synth(
    root: Annotated[Path, typer.Option(help="data root")] = Path("data"),
    seed: Annotated[int, typer.Option(help="random seed")] = 1234,
    force: Annotated[bool, typer.Option(help="regenerate even if present")] = False,
) -> None:
    """Generate the synthetic corpus with gold alignments (data/synth/src-tgt)."""
    import shutil  # start-up: `nmt --help` imports no torch

    from nmt.data.corpora import SYNTH_PAIR, ensure_synth  # start-up: `nmt --help` imports no torch

    if force:
        shutil.rmtree(root / "synth" / SYNTH_PAIR, ignore_errors=True)
    out = ensure_synth(root, seed)
    for path in sorted(out.glob("*.src")):
        typer.echo(f"{path.stem}: {sum(1 for _ in open(path, encoding='utf-8'))} pairs "
                   f"(+ {path.stem}.gold alignments)")
    typer.echo(f"wrote {out}")


@data_app.command("prepare")
def data_prepare(config: ConfigOpt, set_: SetOpt = None) -> None:
    """Train (or reuse) the SentencePiece model(s) and encode the splits of a config."""
    from nmt.data.subwords import (  # start-up: `nmt --help` imports no torch
        Vocab,
        encode_split,
        prepare_vocab,
    )
    from nmt.models.checks import load_config  # start-up: `nmt --help` imports no torch

    cfg = load_config(config, set_ or [])
    vocab_dir = prepare_vocab(cfg)
    vocab = Vocab.from_dir(vocab_dir)
    for split in (cfg.data.train, cfg.data.valid, cfg.data.test):
        src, tgt = encode_split(cfg, vocab_dir, split)
        typer.echo(f"{split}: {len(src)} pairs, {sum(map(len, tgt))} target pieces")
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


@app.command()
def train(config: ConfigOpt, set_: SetOpt = None,
          resume: Annotated[bool, typer.Option(help="continue from checkpoints/last.pt")] = False,
          evaluate: Annotated[bool, typer.Option(help="evaluate the test split at the end")] = True,
          ) -> None:
    """Train one model family from a YAML config (runs/<name>/)."""
    from nmt.decoding.evaluate import evaluate_run  # start-up: `nmt --help` imports no torch
    from nmt.models.checks import load_config  # start-up: `nmt --help` imports no torch
    from nmt.training import distributed  # start-up: `nmt --help` imports no torch
    from nmt.training.trainer import (
        train as run_training,  # start-up: `nmt --help` imports no torch
    )

    distributed.setup()
    cfg = load_config(config, set_ or [])
    run_training(cfg, resume=resume)
    distributed.cleanup()
    if evaluate and distributed.is_main():
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
    plan = Sampling.parse(sampling, temperature, seed) if sampling else None
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
        help="folder (default: RUN/ctranslate2/CHECKPOINT, where --engine ctranslate2 looks)")
                   ] = None,
    checkpoint: CheckpointOpt = Checkpoint.best,
) -> None:
    """Export a Transformer run for CTranslate2 (a guided run with its alignment head);
    decode it with --engine ctranslate2 (docs/deploy.md)."""
    from nmt.decoding.export import export as export_run  # start-up: no torch for --help

    path = export_run(run, checkpoint.value, quantize.value, out)
    typer.echo(f"wrote {path} ({quantize.value}); decode it with "
               f"nmt translate --run {run} --engine ctranslate2")


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
) -> None:
    """Decode a split, score it with sacreBLEU (BLEU, chrF) and dump its attention; with
    several --run, or another engine than PyTorch in float32, the scores are printed and
    nothing is written."""
    from nmt.api import load  # start-up: torch and the models load only for this verb
    from nmt.decoding.evaluate import evaluate_model

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
