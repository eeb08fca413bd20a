"""The lab's experiments, one literal registry, and the two ways to run them.

Each entry: the function, the claim it checks (one sentence), what it does NOT
show, and whether it needs a trained run (`--run`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import torch

from nmt.core.errors import NMTError
from nmt.lab import masks, rnn_attention, scaling, softmax, trained, transformer
from nmt.lab.base import Result, skipped
from nmt.lab.names import ExperimentName
from nmt.lab.report import write_report


class Experiment(NamedTuple):
    run: Callable[..., Result]  # (out_dir, fmt, run=None) -> Result
    claim: str
    not_shown: str
    needs_run: bool


EXPERIMENTS: dict[str, Experiment] = {
    "softmax-toy": Experiment(
        softmax.toy,
        "Dot-product scores of query [1, 0] against the four candidates give weights "
        "[0.467, 0.283, 0.172, 0.077], not the [0.451, 0.273, 0.165, 0.111] one essay prints.",
        "Anything about learned attention: the vectors are hand-picked and key = value.", False),
    "saturation": Experiment(
        scaling.saturation,
        "Without 1/sqrt(d_k) the variance of q.k grows like d and softmax saturates: low "
        "entropy, near one-hot weights, a vanishing gradient; with it they stay put.",
        "That trained queries and keys are independent unit-variance vectors; the argument "
        "is about initialisation-like statistics.", False),
    "argmax-vs-softmax": Experiment(
        softmax.argmax_vs_softmax,
        "A hard argmax read is piecewise constant with zero gradient almost everywhere; the "
        "softmax read is smooth and its autograd gradient matches finite differences.",
        "That hard attention cannot be trained at all (REINFORCE and relaxations exist).", False),
    "stability": Experiment(
        scaling.stability,
        "softmax(x + c) = softmax(x), so subtracting the maximum changes nothing, and it keeps "
        "scores of 1000 finite where the naive exp overflows to NaN.",
        "Precision loss in the scores themselves (large x + c in float32 rounds).", False),
    "tanh": Experiment(
        rnn_attention.tanh,
        "Without tanh the additive score's state term is one constant added to every source "
        "score, so the weights ignore the decoder state; with tanh they follow it.",
        "What a trained Bahdanau scorer does: the state is a hand-swept scalar and the "
        "weights are hand-set.", False),
    "gradient-check": Experiment(
        softmax.gradient_check,
        "For one read c = sum a_j h_j, d(g^T c)/de_j = a_j (h_j - c)^T g: the closed form, "
        "autograd and central finite differences agree to 1e-8 in float64.",
        "How a full model's loss shapes the weights: the source vectors are held fixed.", False),
    "identical-sources": Experiment(
        softmax.identical_sources,
        "When every source vector is the same, any weighting reads the same context and the "
        "scores get no gradient: a large weight is not importance.",
        "That weights never matter; only that their size alone cannot say.", False),
    "permutation": Experiment(
        transformer.permutation,
        "Self-attention without positions or mask is permutation-equivariant (to 1e-6); "
        "sinusoidal positions or a causal mask break it.",
        "Whether a trained model uses word order well; only that without positions it "
        "cannot tell orders apart.", False),
    "positions": Experiment(
        transformer.positions,
        "For a fixed offset k, PE(p + k) is one linear map of PE(p), a rotation per "
        "frequency pair, the same for every p.",
        "That a model learns to use relative offsets, or generalises past its training "
        "lengths.", False),
    "masks": Experiment(
        masks.masks,
        "With the padding mask a batched sentence reads exactly what it reads alone; a "
        "decoder trained without the causal mask copies the answer (its loss collapses) and "
        "then cannot translate.",
        "Anything about larger models: the training run is tiny and short.", False),
    "kv-cache": Experiment(
        transformer.kv_cache,
        "Cached incremental decoding gives the log-probabilities of recomputing the whole "
        "prefix (to 1e-5), at a per-token cost that stays flat instead of growing.",
        "Speed on other hardware or batch sizes: one sentence, one thread, wall-clock.", False),
    "bottleneck": Experiment(
        trained.bottleneck,
        "A fixed context vector loses more BLEU on long sources than attention models do.",
        "That the gap is caused by the bottleneck alone: the runs differ in more than "
        "attention (sizes, training time).", True),
    "attention-is-not-explanation": Experiment(
        trained.not_explanation,
        "Attention weights describe one computation; how much they matter is measured by "
        "replacing them (permuted, uniform, another head or layer) and watching the output.",
        "Which input caused a prediction: swapping weights tests sensitivity, not attribution.",
        True),
}
if set(EXPERIMENTS) != {n.value for n in ExperimentName}:
    raise RuntimeError("nmt.lab.names.ExperimentName and EXPERIMENTS disagree")


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run with one torch thread: the lab's tensors are tiny, and on a busy 2-core machine
    a second thread only waits (restored afterwards)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _check_out(out: Path) -> Path:
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NMTError(f"{out}: exists and is not a directory; pass a folder for --out")
    out.mkdir(parents=True, exist_ok=True)
    return out


def run_experiment(name: str, out: Path, fmt: str = "png",
                   runs: list[Path] | None = None) -> Result:
    """Run one experiment into `out`; an experiment that needs --run and has none is an error."""
    if name not in EXPERIMENTS:
        raise NMTError(f"unknown experiment '{name}'; choose one of: {', '.join(EXPERIMENTS)}")
    entry = EXPERIMENTS[name]
    if runs and not entry.needs_run:
        takers = ", ".join(n for n, e in EXPERIMENTS.items() if e.needs_run)
        raise NMTError(f"{name} takes no --run; only {takers} do")
    with one_thread():
        result = entry.run(_check_out(out), fmt, run=runs or None)
    if result.passed is None and entry.needs_run:
        raise NMTError(f"{name}: {result.check}")
    return result


def run_all(out: Path, fmt: str = "png", log: Callable[[str], None] = print
            ) -> tuple[list[Result], Path]:
    """Every experiment into `out`, then report.md + report.html; returns the results and
    the Markdown path. The trained-run experiments use `make demo`'s runs when present and
    are skipped (with the reason) otherwise."""

    out = _check_out(out)
    results, seconds = [], {}
    for name, entry in EXPERIMENTS.items():
        tick = time.perf_counter()
        with one_thread():
            try:
                result = entry.run(out, fmt)
            except NMTError as exc:  # a demo run that cannot be used: say why, go on
                if not entry.needs_run:
                    raise
                result = skipped(name, str(exc))
        seconds[name] = time.perf_counter() - tick
        log(f"{result.verdict:8} {name} ({seconds[name]:.1f} s)")
        results.append(result)
    return results, write_report(results, out, seconds, EXPERIMENTS)
