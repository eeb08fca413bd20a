"""Throughput at fixed shapes on Multi30k de-en: parameters, training target tokens/s,
training FLOP/s as a fraction of the fp32 GEMM peak at the model's own matrix shapes
(both measured in the same process: a number that travels between machines),
decoding sentences/s (greedy and beam 5, batch 64) and peak memory, per family.

Each family runs in its own process (clean peak memory), one after the other, so the
figures are side by side in one run on the same machine. Needs the corpus, from the
Hugging Face hub or from a folder of the raw files {split}.{lang}.gz:
    nmt data download multi30k --pair de-en [--from DIR]
Usage: python benchmarks/throughput.py [--families transformer bahdanau] [--steps 30]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["transformer", "bahdanau", "luong_general", "luong_local_p", "fixed_context"]


def measure(family: str, steps: int, sentences: int, threads: int, runs_dir: Path,
            compiled: bool = False, precision: str | None = None) -> dict:
    import torch

    from nmt.data.subwords import Vocab, encode_split, prepare_vocab
    from nmt.models import build_model
    from nmt.models.checks import load_config

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = load_config(ROOT / "configs" / "multi30k" / f"{family}.yaml",
                      [f"train.precision={precision}"] if precision else [])
    vocab_dir = prepare_vocab(cfg)
    vocab = Vocab.from_dir(vocab_dir)
    src, tgt = encode_split(cfg, vocab_dir, cfg.data.train)
    model = build_model(cfg.model, vocab.src_size, vocab.tgt_size, vocab.joint)
    params = sum(p.numel() for p in model.parameters())
    out = {"family": family, "params": params, **train_rates(model, cfg, src, tgt, steps, compiled)}
    test_src, _ = encode_split(cfg, vocab_dir, cfg.data.test)
    trained = runs_dir / family
    if (trained / "checkpoints").is_dir():  # decode with a trained model: realistic lengths
        from nmt.models.runs import load_run

        _, vocab, model, _ = load_run(trained)
    out["decoded_by"] = "trained" if (trained / "checkpoints").is_dir() else "untrained"
    out.update(decode_rates(model, vocab, test_src[:sentences], cfg))
    out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def train_rates(model, cfg, src: list, tgt: list, steps: int, compiled: bool = False) -> dict:
    """Target tokens/s and FLOP/s over `steps` timed training steps (after 3 warm-up
    steps) in the trainer's precision (cfg.train.precision, autocast as the trainer does);
    each timed batch's FLOPs are counted in a separate, untimed pass of the plain module.
    The fp32 GEMM peak is measured at the step's own shapes, and for a bf16 step the bf16
    peak too. `compiled`: the timed steps run torch.compile(model, dynamic=True) (as
    train.compile does), and warmup_s reports the warm-up steps' seconds (the compile)."""
    import torch
    from flops import gemm_peak, step_flops

    from nmt.data.batching import iterate_batches, token_batches
    from nmt.training import distributed as dist
    from nmt.training.optim import build_optimizer
    from nmt.training.trainer import loss_fn

    optim = build_optimizer(model, 1e-4)  # the trainer's optimiser (fused Adam), its clipping
    lengths = [(len(s), len(t)) for s, t in zip(src, tgt)]
    batches = token_batches(lengths, cfg.train.batch_tokens, seed=1)[: steps + 3]
    model.train()
    tokens, seconds, flops, shapes = 0, 0.0, 0, Counter()

    run = torch.compile(model, dynamic=True) if compiled else model
    warmup = time.perf_counter()

    cpu = torch.device("cpu")
    precision = dist.precision_name(cpu, cfg.train.precision)  # resolved once, as the trainer

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
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"],
                        help="train.precision for the timed steps (default: each config's)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.steps, args.sentences, args.threads,
                                 args.runs, args.compile, args.precision)))
        return
    print(conditions(args))
    print("| family | parameters | precision | train tgt tok/s | train GFLOP/s | fp32 GEMM peak "
          "GFLOP/s (m×k×n) | fraction of fp32 peak | its precision's peak GFLOP/s | fraction "
          "of that | warm-up s | greedy sent/s | beam-5 sent/s | peak MiB | decoded by |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    untrained = []
    for family in args.families:
        out = subprocess.run([sys.executable, __file__, "--one", family, "--steps",
                              str(args.steps), "--sentences", str(args.sentences),
                              "--threads", str(args.threads), "--runs", str(args.runs)]
                             + (["--compile"] if args.compile else [])
                             + (["--precision", args.precision] if args.precision else []),
                             capture_output=True, text=True, cwd=ROOT, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        shape = "×".join(map(str, r["gemm_shape"]))
        print(f"| {family} | {r['params'] / 1e6:.1f} M | {r['precision']} | "
              f"{r['train_tok_s']:,.0f} | "
              f"{r['train_flop_s'] / 1e9:.1f} | {r['gemm_peak'] / 1e9:.1f} ({shape}) | "
              f"{r['train_flop_s'] / r['gemm_peak']:.1%} | {r['own_peak'] / 1e9:.1f} | "
              f"{r['train_flop_s'] / r['own_peak']:.1%} | {r['warmup_s']:.1f} | "
              f"{r['greedy_sent_s']:.1f} | "
              f"{r['beam5_sent_s']:.1f} | {r['peak_mib']:,.0f} | {r['decoded_by']} model |",
              flush=True)
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
