"""The two engines answer the same question (docs/deploy.md, "Decode"): each sentence's own
length limit, ending in EOS there, at most MAX_STEPS whatever the ratio; PAD and BOS never
emitted; n-best lists without a hypothesis twice, scored as our search scores them. Also
`--threads` on translate and evaluate, `engine_for`'s float32 route and `by_length`'s
sorted batches.

The property runs the Hypothesis profile "suite" in `make test` and "fuzz" in `make fuzz`
(tests/conftest.py)."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import nmt
from nmt.core.checkpoint import load_checkpoint, save_checkpoint
from nmt.core.engine import MAX_STEPS
from nmt.core.rundir import RunDir
from nmt.core.tokens import BOS, EOS, PAD
from nmt.data.batching import collate
from nmt.decoding.engines import INT8_FAMILIES, PyTorchEngine, engine_for
from nmt.decoding.search import length_penalty, max_length
from nmt.decoding.translate import by_length
from nmt.training.trainer import Trainer
from tests.conftest import tiny_model
from tests.test_cli import run_cli
from tests.test_train import MODELS, short_pairs, tiny_config

pytest.importorskip("ctranslate2")  # the [deploy] extra; make install brings it

FAR = 1e4  # an output bias this far below gives a token no probability at all in float32


@pytest.fixture(scope="module")
def runs(data_root, tmp_path_factory) -> dict:
    """One tiny Transformer, briefly trained (its hypotheses end both early and late, so
    limits cut them), as four runs that differ in the output bias of some tokens:
    "trained" as it is; "neutral", PAD and BOS far below: the model gives them nothing, so
    the engine's normalisation without them changes no score (docs/deploy.md); "pad_bos",
    PAD and BOS far above every other token; "endless", EOS far below: it never ends."""
    folder = tmp_path_factory.mktemp("agreement")
    cfg = tiny_config(data_root, folder, "trained", MODELS["transformer"], max_steps=40,
                      threads=1, valid_every=1000, valid_sentences=8)
    Trainer(cfg, quiet=True).fit()
    out = {"trained": cfg.run_dir}
    for name, bias in (("neutral", {PAD: -FAR, BOS: -FAR}), ("pad_bos", {PAD: 30.0, BOS: 30.0}),
                       ("endless", {PAD: -FAR, BOS: -FAR, EOS: -FAR})):
        out[name] = folder / name
        shutil.copytree(cfg.run_dir, out[name])
        best = RunDir(out[name]).checkpoint("best")
        payload = load_checkpoint(best)
        for token, shift in bias.items():
            payload["model"]["out.bias"][token] += shift
        save_checkpoint(best, payload)
    return out


@pytest.fixture(scope="module")
def neutral(runs, data_root) -> tuple:
    """The neutral run on both engines, and twelve short test sources."""
    texts, _ = short_pairs(data_root, 12)
    ours = nmt.load(runs["neutral"])
    return ours, nmt.load(runs["neutral"], engine="ctranslate2"), ours.vocab.encode_src(texts)


def forced_scores(module, src: list, hyps: list, renormalise: bool = False) -> list[float]:
    """log p(ids + EOS | src) of each hypothesis, teacher-forced through the PyTorch model;
    `renormalise`: each step normalised without PAD and BOS, as the engine's search is."""
    if not hyps:
        return []
    batch = collate([src] * len(hyps), hyps)
    with torch.no_grad():
        logits, _, _ = module(batch.src, batch.tgt_in)
    logits = logits.float()
    if renormalise:
        logits[..., [PAD, BOS]] = float("-inf")
    picked = logits.log_softmax(-1).gather(-1, batch.tgt_out.unsqueeze(-1)).squeeze(-1)
    return picked.masked_fill(batch.tgt_out == PAD, 0.0).sum(1).tolist()


def check_scores(module, src_ids: list, nbest: list, alpha: float, renormalise: bool = False
                 ) -> None:
    """No list holds the same ids twice, and each score is the forced one of its ids and
    EOS, GNMT-normalised, within 1e-3."""
    for src, hyps in zip(src_ids, nbest):
        ids = [h for h, _ in hyps]
        assert len({tuple(h) for h in ids}) == len(ids), hyps
        for (h, score), forced in zip(hyps, forced_scores(module, src, ids, renormalise)):
            assert score == pytest.approx(forced / length_penalty(len(h) + 1, alpha),
                                          abs=1e-3), (h, score, forced)


# --------------------------------------------------------------------- the property


@given(ratio=st.floats(0.1, 3.0) | st.sampled_from([math.inf, 1e30]),
       offset=st.integers(0, 6), beam=st.integers(1, 6), data=st.data(),
       batch_size=st.integers(1, 6))
def test_both_engines_agree_over_length_settings_beams_and_n_best_sizes(
        neutral, ratio, offset, beam, data, batch_size):
    """Greedy: the same ids on both engines. Beam: every CTranslate2 hypothesis scores what
    PyTorch's forced pass gives its ids and EOS, length penalty included, within 1e-3, and
    no n-best list holds the same ids twice (items 6 and 7 of issue 50)."""
    ours, theirs, src_ids = neutral
    n_best = data.draw(st.integers(1, beam), label="n_best")
    cfg = dataclasses.replace(ours.cfg.decode, max_len_ratio=ratio, max_len_offset=offset,
                              batch_size=batch_size)
    got, _ = theirs.engine.nbest(src_ids, cfg, beam, n_best)
    assert all(1 <= len(hyps) <= n_best for hyps in got)
    assert all(len(h) < max_length(len(s), ratio, offset) for s, hyps in zip(src_ids, got)
               for h, _ in hyps)
    if beam == 1:
        assert got == ours.engine.nbest(src_ids, cfg, 1)[0]
    else:
        check_scores(ours.module, src_ids, got, cfg.length_penalty)


# ------------------------------------------------------------------- items 6 and 7


def test_item6_hypotheses_cut_at_the_limit_end_in_eos_once_each(neutral):
    """decode.max_len_ratio 0.5, offset 0, beam 5, 5-best (the issue's setting): the engine
    decoded each batch to its longest sentence's limit and cut the rest, keeping the cut
    pieces' log-probabilities and no EOS: duplicates, and scores far from PyTorch's."""
    ours, theirs, src_ids = neutral
    cfg = dataclasses.replace(ours.cfg.decode, max_len_ratio=0.5, max_len_offset=0,
                              batch_size=6)
    got, _ = theirs.engine.nbest(src_ids, cfg, 5, 5)
    assert len({len(s) for s in src_ids}) > 1  # the batch holds several limits
    assert any(len(h) == max_length(len(s), 0.5, 0) - 1 for s, hyps in zip(src_ids, got)
               for h, _ in hyps)  # some are cut
    check_scores(ours.module, src_ids, got, cfg.length_penalty)


def test_item6_where_no_limit_binds_the_n_best_lists_are_ours(neutral, data_root):
    """The engine stops a sentence once `beam` hypotheses have ended and keeps those, as our
    search does, so with room to spare the two n-best lists are the same."""
    ours, theirs, _ = neutral
    src_ids = ours.vocab.encode_src(short_pairs(data_root, 24)[0])
    cfg = dataclasses.replace(ours.cfg.decode, max_len_ratio=3.0, max_len_offset=10)
    for beam in (3, 6):
        a, b = ours.engine.nbest(src_ids, cfg, beam, beam)[0], theirs.engine.nbest(
            src_ids, cfg, beam, beam)[0]
        same = sum([h for h, _ in x] == [h for h, _ in y] for x, y in zip(a, b))
        assert same >= 0.9 * len(src_ids), (beam, same)


def test_item7_any_length_ratio_gives_both_engines_one_finite_limit(runs, neutral):
    """decode.max_len_ratio .inf or 1e30 gave PyTorch a limit of one step (an empty string
    for every sentence) and CTranslate2 an OverflowError; a finite ratio past the exported
    position table made the engine raise. Every limit is now at most MAX_STEPS, the table's
    rows, on both engines."""
    from nmt.decoding.export import POSITIONS

    assert MAX_STEPS <= POSITIONS
    deploy = (Path(__file__).resolve().parents[1] / "docs" / "deploy.md").read_text()
    assert f"at most {MAX_STEPS:,} steps, the exported position" in deploy  # the page's limit
    for ratio in (math.inf, 1e30, math.nan, 5000.0):
        assert max_length(7, ratio, 10) == MAX_STEPS
    assert max_length(7, 1.5, 10) == 20 and max_length(7, 0.1, 0) == 1
    ours, theirs, src_ids = neutral
    roomy = dataclasses.replace(ours.cfg.decode, max_len_ratio=50.0)
    plain = ours.engine.nbest(src_ids, roomy, 1)[0]
    assert all(hyps[0][0] for hyps in plain)
    for ratio in (math.inf, 1e30):
        cfg = dataclasses.replace(ours.cfg.decode, max_len_ratio=ratio)
        assert ours.engine.nbest(src_ids, cfg, 1)[0] == plain
        assert theirs.engine.nbest(src_ids, cfg, 1)[0] == plain
    endless = nmt.load(runs["endless"], engine="ctranslate2")
    for ratio in (math.inf, 400.0):
        cfg = dataclasses.replace(endless.cfg.decode, max_len_ratio=ratio)
        [[(ids, _)]], _ = endless.engine.nbest(src_ids[:1], cfg, 1)
        assert len(ids) == MAX_STEPS - 1  # and EOS at the last step


# ---------------------------------------------------------------------------- item 18


def test_item18_threads_sets_the_engines_workers_on_translate_and_evaluate(
        runs, data_root, monkeypatch, capsys):
    """docs/deploy.md: `--threads` sets torch's threads and the engine's one-thread workers
    for `nmt translate` and `nmt evaluate`, as for `nmt serve`."""
    import ctranslate2

    made = []
    real = ctranslate2.Translator
    monkeypatch.setattr(ctranslate2, "Translator",
                        lambda *args, **options: made.append(options) or real(*args, **options))
    texts, _ = short_pairs(data_root, 2)
    run = runs["trained"]
    for threads, command in ((1, ["translate", *texts]), (2, ["evaluate", "--limit", "3"])):
        code, out, err = run_cli(capsys, *command, "--run", run, "--engine", "ctranslate2",
                                 "--threads", threads)
        assert code == 0 and made[-1]["inter_threads"] == threads, err
    assert "ctranslate2" in out  # evaluate names the engine it printed figures of
    for command in (["translate", *texts], ["evaluate", "--limit", "3"]):
        threads = 1 if torch.get_num_threads() != 1 else 2
        code, _, err = run_cli(capsys, *command, "--run", run, "--threads", threads)
        assert code == 0 and torch.get_num_threads() == threads, err


def test_the_engine_leaves_torchs_threads_as_they_were(runs):
    """CTranslate2 sets the calling thread's OpenMP count (torch's count too) to its
    intra_threads: the engine puts torch's back, so PyTorch runs decoded beside it (nmt
    serve's recurrent runs) keep their threads."""
    for threads in (2, 3):
        torch.set_num_threads(threads)
        for _ in range(2):
            nmt.load(runs["trained"], engine="ctranslate2")
            assert torch.get_num_threads() == threads


# ---------------------------------------------------------------------------- item 19


def test_item19_a_recurrent_run_asked_for_ctranslate2_without_int8_stays_float32():
    """`nmt serve --engine ctranslate2` with no --quantize: a recurrent run goes to PyTorch
    in float32, never in int8, even where int8 is shipped for its family."""
    recurrent = [f for f in INT8_FAMILIES if f != "transformer"]
    assert recurrent
    for family in recurrent:
        for asked in (None, "float32"):
            engine, quantize, why = engine_for(family, "ctranslate2", asked)
            assert engine == "pytorch" and "Transformers only" in why
            engine = PyTorchEngine(tiny_model("bahdanau"), family, quantize)
            assert engine.quantize == "float32"
            assert not any("quantized" in type(m).__module__ for m in engine.module.modules())
        assert engine_for(family, "ctranslate2", "int8")[:2] == ("pytorch", "int8")


def test_item19_ctranslate2_never_emits_pad_or_bos(runs, data_root):
    """A model that prefers PAD and BOS to every other token: the engine never emits them,
    greedy output is PyTorch's, and each beam score is the forced one normalised without
    them, as the engine's softmax is (docs/deploy.md)."""
    ours = nmt.load(runs["pad_bos"])
    theirs = nmt.load(runs["pad_bos"], engine="ctranslate2")
    src_ids = ours.vocab.encode_src(short_pairs(data_root, 6)[0])
    cfg = ours.cfg.decode
    greedy = theirs.engine.nbest(src_ids, cfg, 1)[0]
    assert greedy == ours.engine.nbest(src_ids, cfg, 1)[0]
    beam, _ = theirs.engine.nbest(src_ids, cfg, 4, 4)
    emitted = {i for hyps in greedy + beam for ids, _ in hyps for i in ids}
    assert emitted and not emitted & {PAD, BOS}
    check_scores(ours.module, src_ids, beam, cfg.length_penalty, renormalise=True)


def test_item19_by_length_hands_the_engine_length_sorted_batches(neutral):
    """The speed promise: batches of sources of near lengths, shortest first, each source's
    result back at its place; on CTranslate2 one engine call per length limit."""
    seen = []

    def decode(batch):
        seen.append([len(s) for s in batch])
        return [len(s) for s in batch]

    sources = [[5] * n + [EOS] for n in (7, 2, 9, 0, 4, 4, 1, 8, 3)]
    assert by_length(sources, 3, decode, empty=lambda: 0) == [0 if n == 1 else n for n in
                                                             map(len, sources)]
    assert seen == [[2, 3, 4], [5, 5, 8], [9, 10]]

    ours, theirs, src_ids = neutral
    calls = []
    translator = theirs.engine.translator

    class Spy:
        def translate_batch(self, source, **options):
            calls.append(([len(s) for s in source], options))
            return translator.translate_batch(source, **options)

        def __getattr__(self, name):
            return getattr(translator, name)

    theirs.engine.translator = Spy()
    try:
        cfg = dataclasses.replace(ours.cfg.decode, max_len_ratio=0.8, max_len_offset=1,
                                  batch_size=4)
        theirs.engine.nbest(src_ids, cfg, 3, 2)
    finally:
        theirs.engine.translator = translator
    searches = [(lengths, o) for lengths, o in calls if "target_prefix" not in o]
    flat = [n for lengths, _ in searches for n in lengths]
    assert sorted(flat) == sorted(len(s) for s in src_ids) and flat == sorted(flat)
    for lengths, options in searches:
        limits = {max_length(n, 0.8, 1) for n in lengths}
        assert limits == {options["max_decoding_length"] + 1}
