"""Throughput on Multi30k de-en, per family: parameters, training target tokens/s in fp32
and in bf16 (where the CPU has native bf16), the precision `train.precision: auto` picks
by its own timing probe (nmt.training.precision) and the probe's figures, peak memory
per precision, training FLOP/s as a fraction of the fp32 GEMM peak at the model's own
matrix shapes (a number that travels between machines), and decoding sentences/s
(greedy and beam 5, batch 64).

Each family and precision runs in its own process (clean peak memory), one after the
other, so the figures are side by side in one run on the same machine. Needs the corpus, from the
Hugging Face hub or from a folder of the raw files {split}.{lang}.gz:
    nmt data download multi30k --pair de-en [--from DIR]
Usage: python benchmarks/throughput.py [--families transformer bahdanau] [--steps 30]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from nmt.core.memory import peak_rss_mib

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["transformer", "bahdanau", "luong_general", "luong_local_p", "fixed_context"]


def measure(family: str, steps: int, sentences: int, threads: int, runs_dir: Path,
            compiled: bool = False, precision: str = "fp32", decode: bool = True) -> dict:
    from nmt.training.precision import bound_kernel_cache

    bound_kernel_cache()  # as the trainer does
    import torch

    from nmt.data.store import encode_split
    from nmt.data.subwords import Vocab, prepare_vocab
    from nmt.models import build_model
    from nmt.models.checks import load_config

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = load_config(ROOT / "configs" / "multi30k" / f"{family}.yaml",
                      [f"train.precision={precision}"])
    vocab_dir = prepare_vocab(cfg)
    vocab = Vocab.from_dir(vocab_dir)
    src, tgt = encode_split(cfg, vocab_dir, cfg.data.train)
    model = build_model(cfg.model, vocab.src_size, vocab.tgt_size, vocab.joint)
    params = sum(p.numel() for p in model.parameters())
    out = {"family": family, "params": params, **train_rates(model, cfg, src, tgt, steps, compiled)}
    if not decode:
        out["peak_mib"] = peak_rss_mib()
        return out
    test_src, _ = encode_split(cfg, vocab_dir, cfg.data.test)
    trained = runs_dir / family
    if (trained / "checkpoints").is_dir():  # decode with a trained model: realistic lengths
        from nmt.models.runs import load_run

        _, vocab, model, _ = load_run(trained)
    out["decoded_by"] = "trained" if (trained / "checkpoints").is_dir() else "untrained"
    out.update(decode_rates(model, vocab, test_src[:sentences], cfg))
    out["peak_mib"] = peak_rss_mib()
    return out


def probe(family: str, threads: int) -> dict:
    """What train.precision: auto picks for this family here: the trainer's own timing
    (nmt.training.precision.time_steps) over batches spread across an epoch."""
    from nmt.training.precision import bound_kernel_cache

    bound_kernel_cache()
    import torch

    from nmt.data.batching import iterate_batches, token_batches
    from nmt.data.store import encode_split
    from nmt.data.subwords import Vocab, prepare_vocab
    from nmt.models import build_model
    from nmt.models.checks import load_config
    from nmt.training import distributed as dist
    from nmt.training import precision
    from nmt.training.loss import loss_fn

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = load_config(ROOT / "configs" / "multi30k" / f"{family}.yaml", [])
    vocab_dir = prepare_vocab(cfg)
    vocab = Vocab.from_dir(vocab_dir)
    src, tgt = encode_split(cfg, vocab_dir, cfg.data.train)
    model = build_model(cfg.model, vocab.src_size, vocab.tgt_size, vocab.joint, cfg.local)
    model.train()
    batches = token_batches([(len(s), len(t)) for s, t in zip(src, tgt)],
                            cfg.train.batch_tokens, seed=1)
    spread = precision.spread(batches)
    cpu = torch.device("cpu")

    def step(batch, name):
        with dist.autocast(cpu, name):
            loss = loss_fn(model, batch, cfg.train.label_smoothing)
        loss.backward()
        model.zero_grad(set_to_none=True)

    tick = time.perf_counter()
    choice = precision.decide(precision.time_steps(
        step, list(iterate_batches(src, tgt, spread)), precision.supported(cpu), cpu))
    return {"timings": choice["timings"], "chosen": choice["precision"],
            "probe_s": time.perf_counter() - tick}


def train_rates(model, cfg, src: list, tgt: list, steps: int, compiled: bool = False) -> dict:
    """Target tokens/s and FLOP/s over `steps` timed training steps (after 3 warm-up
    steps) in cfg.train.precision (fp32 or bf16, autocast as the trainer does);
    each timed batch's FLOPs are counted in a separate, untimed pass of the plain module.
    The fp32 GEMM peak is measured at the step's own shapes, and for a bf16 step the bf16
    peak too. `compiled`: the timed steps run torch.compile(model, dynamic=True) (as
    train.compile does), and warmup_s reports the warm-up steps' seconds (the compile)."""
    import torch
    from flops import gemm_peak, step_flops

    from nmt.data.batching import iterate_batches, token_batches
    from nmt.training import distributed as dist
    from nmt.training.loss import loss_fn
    from nmt.training.optim import build_optimizer

    optim = build_optimizer(model, 1e-4)  # the trainer's optimiser (fused Adam), its clipping
    lengths = [(len(s), len(t)) for s, t in zip(src, tgt)]
    batches = token_batches(lengths, cfg.train.batch_tokens, seed=1)[: steps + 3]
    model.train()
    tokens, seconds, flops, shapes = 0, 0.0, 0, Counter()

    run = torch.compile(model, dynamic=True) if compiled else model
    warmup = time.perf_counter()

    cpu = torch.device("cpu")
    precision = cfg.train.precision  # fp32 or bf16, as main asks

    def forward_backward(batch, module=run):
        with dist.autocast(cpu, precision):
            loss = loss_fn(module, batch, cfg.train.label_smoothing)
        (loss / batch.n_tokens).backward()

    for i, batch in enumerate(iterate_batches(src, tgt, batches)):
        if i == 3:
            warmup = time.perf_counter() - warmup
        if i >= 3:  # the first steps warm up allocators and kernels (and compile)
            counted, by_shape = step_flops(lambda: forward_backward(batch, model))
            flops += counted
            shapes.update(by_shape)
            optim.zero_grad(set_to_none=True)
        tick = time.perf_counter()
        forward_backward(batch)
        if cfg.train.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip)
        optim.step()
        optim.zero_grad(set_to_none=True)
        if i >= 3:
            seconds += time.perf_counter() - tick
            tokens += batch.n_tokens
    peak, shape = gemm_peak(shapes)
    own = gemm_peak(shapes, dtype=torch.bfloat16)[0] if precision == "bf16" else peak
    return {"train_tok_s": tokens / seconds, "train_flop_s": flops / seconds,
            "warmup_s": warmup, "precision": precision, "own_peak": own,
            "gemm_peak": peak, "gemm_shape": list(shape), "flops_per_tok": flops / tokens}


def decode_rates(model, vocab, test_src: list, cfg) -> dict:
    """Sentences/s of greedy and beam-5 decoding (batch `decode.batch_size`)."""
    from nmt.decoding.translate import translate_ids

    model.eval()
    rates = {}
    for beam, key in ((1, "greedy_sent_s"), (5, "beam5_sent_s")):
        tick = time.perf_counter()
        translate_ids(model, vocab, test_src, cfg.decode, beam=beam)
        rates[key] = len(test_src) / (time.perf_counter() - tick)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=FAMILIES)
    parser.add_argument("--steps", type=int, default=30, help="timed training steps")
    parser.add_argument("--sentences", type=int, default=256, help="test sentences decoded")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=ROOT / "runs",
                        help="decode with runs/<family> when trained (untrained models stop "
                             "at random lengths, which makes decoding speed meaningless)")
    parser.add_argument("--compile", action="store_true",
                        help="time the training steps under torch.compile (train.compile)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--one-precision", help=argparse.SUPPRESS)
    parser.add_argument("--no-decode", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.steps, args.sentences, args.threads,
                                 args.runs, args.compile, args.one_precision,
                                 not args.no_decode)))
        return
    if args.probe:
        print(json.dumps(probe(args.probe, args.threads)))
        return
    print(conditions(args))
    print("| family | parameters | fp32 train tgt tok/s | bf16 train tgt tok/s | bf16 / fp32 | "
          "auto picks (probe: fp32 / bf16 s per 1k tokens) | peak MiB fp32 | peak MiB bf16 | "
          "fp32 fraction of fp32 GEMM peak | greedy sent/s | beam-5 sent/s | decoded by |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    untrained = []
    for family in args.families:
        def child(*extra):
            out = subprocess.run([sys.executable, __file__, *extra, "--steps", str(args.steps),
                                  "--sentences", str(args.sentences), "--threads",
                                  str(args.threads), "--runs", str(args.runs)]
                                 + (["--compile"] if args.compile else []),
                                 capture_output=True, text=True, cwd=ROOT, check=True)
            return json.loads(out.stdout.strip().splitlines()[-1])

        r = child("--one", family, "--one-precision", "fp32")
        choice = child("--probe", family)
        bf16 = (child("--one", family, "--one-precision", "bf16", "--no-decode")
                if "bf16" in choice["timings"] else None)
        t = choice["timings"]
        picks = (f"{choice['chosen']} ({t['fp32']:.2f} / {t['bf16']:.2f}; "
                 f"{choice['probe_s']:.0f} s)" if bf16 else "fp32 (no native bf16)")
        print(f"| {family} | {r['params'] / 1e6:.1f} M | {r['train_tok_s']:,.0f} | "
              + (f"{bf16['train_tok_s']:,.0f} | {bf16['train_tok_s'] / r['train_tok_s']:.2f} | "
                 if bf16 else "— | — | ")
              + f"{picks} | {r['peak_mib']:,.0f} | "
              + (f"{bf16['peak_mib']:,.0f}" if bf16 else "—")
              + f" | {r['train_flop_s'] / r['gemm_peak']:.1%} | {r['greedy_sent_s']:.1f} | "
              f"{r['beam5_sent_s']:.1f} | {r['decoded_by']} model |", flush=True)
        if r["decoded_by"] == "untrained":
            untrained.append(family)
    if untrained:
        print(f"\nNote: no trained run under {args.runs} for {', '.join(untrained)}: decoded "
              "with an untrained model, which stops at random lengths; its decoding speed "
              "is not a realistic figure (train runs/<family> first).")


def conditions(args) -> str:
    """Date, machine, threads, versions and load: the conditions every figure depends on."""
    import os
    import platform

    import torch

    info = Path("/proc/cpuinfo")
    names = [x.split(":", 1)[1].strip() for x in info.read_text().splitlines()
             if x.startswith("model name")] if info.is_file() else []
    cpu = names[0] if names else platform.processor()
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{time.strftime('%Y-%m-%d %H:%M')} | {cpu}, {os.cpu_count()} CPUs, "
            f"{args.threads} threads | torch {torch.__version__} | load average {load} | "
            f"{args.steps} timed steps, {args.sentences} sentences"
            f"{', torch.compile' if args.compile else ''}\n")


if __name__ == "__main__":
    main()
