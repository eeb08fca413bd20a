"""`nmt lab`: each experiment's property is asserted here, not just that it ran.

The lab computes with the project's attention code, so these tests also fail when
that code breaks (masked_softmax, attend, AdditiveScore, scaled_dot_product, the
Transformer's layers, sinusoids, cached step).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

import nmt.cli
from nmt.core.errors import NMTError
from nmt.lab import masks, rnn_attention, scaling, softmax, trained, transformer
from nmt.lab.base import Result
from nmt.lab.names import ExperimentName
from nmt.lab.registry import EXPERIMENTS, run_experiment
from nmt.lab.report import write_report
from nmt.models.attention import attend, masked_softmax, override_weights, scaled_dot_product
from tests.conftest import random_batch, tiny_model


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def no_demo_runs(monkeypatch, tmp_path):
    """Trained-run experiments must not pick up a real runs/demo from the checkout."""
    monkeypatch.setattr(trained, "DEMO_BOTTLENECK", (tmp_path / "none_a", tmp_path / "none_b"))
    monkeypatch.setattr(trained, "DEMO_ATTENTION", (tmp_path / "none_c",))


def test_registry_matches_the_cli_names():
    assert set(EXPERIMENTS) == {n.value for n in ExperimentName}
    for name, entry in EXPERIMENTS.items():
        assert entry.claim.endswith(".") and entry.not_shown.endswith("."), name
    assert {n for n, e in EXPERIMENTS.items() if e.needs_run} == {
        "bottleneck", "attention-is-not-explanation"}


def test_softmax_toy_gives_the_correct_weights_not_the_essays(tmp_path):
    r = softmax.toy(tmp_path, "png")
    weights = [row[2] for row in r.rows]
    assert weights == pytest.approx([0.467, 0.283, 0.172, 0.077], abs=1e-3)
    assert max(abs(w - e) for w, e in zip(weights, softmax.ESSAY_WEIGHTS)) > 0.03
    assert r.rows[3][4] == pytest.approx(-0.40, abs=0.01)  # the 4th score the essay implies
    assert r.passed and r.figures[0].is_file()


def test_saturation_unscaled_entropy_collapses(tmp_path, monkeypatch):
    monkeypatch.setattr(scaling, "SAMPLES", 200)
    r = scaling.saturation(tmp_path, "svg")
    v = r.values
    assert v["entropy_raw_512"] < 0.25 * v["entropy_scaled_512"]
    assert v["grad_raw_1024"] < 0.3 * v["grad_scaled_1024"]
    assert v["ten_x_weight"] > 0.999
    for row in r.rows:  # var(q.k) grows like d; fused and explicit paths agree
        assert 0.8 < row[1] / row[0] < 1.2 and row[8] < 1e-5
    assert r.passed and r.figures[0].read_text().lstrip().startswith("<?xml")


def test_argmax_read_has_no_gradient_softmax_matches_finite_differences(tmp_path):
    r = softmax.argmax_vs_softmax(tmp_path, "png")
    assert r.values["soft_fd_error"] < 1e-8
    assert r.values["hard_autograd_max"] == 0
    assert r.values["hard_pieces"] >= 2 and r.values["hard_fd_at_switch"] > 1e3
    assert r.passed


def test_stability_naive_overflows_masked_softmax_does_not(tmp_path):
    x = torch.tensor([1000.0, 999.0, 998.0])
    assert not torch.isfinite(scaling.naive_softmax(x)).all()
    w = masked_softmax(x, torch.ones(3, dtype=torch.bool))
    assert torch.isfinite(w).all()
    assert w.tolist() == pytest.approx(torch.softmax(torch.tensor([2.0, 1.0, 0.0]), -1).tolist(),
                                       abs=1e-6)
    r = scaling.stability(tmp_path, "png")
    assert r.values["shift_error_float64"] < 1e-12 and r.passed
    rows = {row[0]: row[1:] for row in r.rows}  # where each naive form first overflows
    assert math.isfinite(rows[88.0][0]) and not math.isfinite(rows[89.0][0])  # float32
    assert math.isfinite(rows[709.0][1]) and not math.isfinite(rows[710.0][1])  # float64
    assert all(row[2] == pytest.approx(float(w[0]), abs=1e-6) for row in rows.values())


def test_tanh_free_weights_ignore_the_state(tmp_path):
    assert rnn_attention.hand_set_score(False).use_tanh is False
    states = torch.linspace(-3, 3, 13, dtype=torch.float64)
    flat, _ = rnn_attention.read_at(states, use_tanh=False)
    moving, _ = rnn_attention.read_at(states, use_tanh=True)
    assert (flat - flat[0]).abs().max() < 1e-12
    assert (moving.amax(0) - moving.amin(0)).max() > 0.2
    r = rnn_attention.tanh(tmp_path, "png")
    rows = {(row[0], row[1]): row for row in r.rows}
    assert rows["without tanh", -1.0][2:] == pytest.approx(rows["without tanh", 1.0][2:], abs=1e-12)
    assert rows["with tanh", -1.0][2] > rows["with tanh", -1.0][4]  # s = -1 reads 'I'
    assert rows["with tanh", 1.0][4] > rows["with tanh", 1.0][2]  # s = +1 reads 'cats'
    assert r.passed


def test_gradient_check_three_ways_agree(tmp_path):
    r = softmax.gradient_check(tmp_path, "png")
    assert r.values["max_diff"] < 1e-8 and r.passed
    assert sum(row[2] for row in r.rows) == pytest.approx(0, abs=1e-12)


def test_identical_sources_any_weights_same_context(tmp_path):
    r = softmax.identical_sources(tmp_path, "png")
    assert r.values["max_context_error"] < 1e-12 and r.values["max_score_grad"] < 1e-12
    assert r.values["weight_spread"] > 0.5 and r.passed


def test_permutation_equivariance_and_what_breaks_it(tmp_path):
    r = transformer.permutation(tmp_path, "png")
    assert r.values["error_plain"] < 1e-6
    assert r.values["error_positions"] > 1e-2 and r.values["error_causal"] > 1e-2
    assert r.passed


def test_positions_offset_is_one_linear_map(tmp_path):
    table = transformer.sinusoids(200, 16).double()
    for k in (1, 7, 30):
        assert (table[k:100 + k] - table[:100] @ transformer.rotation(k, 16)).abs().max() < 1e-5
    r = transformer.positions(tmp_path, "png")
    assert r.values["max_error_128"] < 1e-5 and r.passed


def test_masks_padding_and_causal(tmp_path, monkeypatch):
    rows, agree = masks.padding_rows(transformer.small_transformer())
    assert agree < 1e-5  # the lab's encoder helper computes what `encode` does
    assert max(r[1] for r in rows) < 1e-5  # with the mask: batched == alone
    assert all(r[2] > 1e-3 for r in rows[1:]) and rows[-1][3] > 0.1  # without: it moves
    model = tiny_model("transformer")
    peek = masks.peeking(model)
    src, tgt = [5, 6, 7, masks.EOS], [8, 9, 10, 11]
    assert masks.future_leak(model, src, tgt) == 0
    assert masks.future_leak(peek, src, tgt) > 1e-4
    # end to end on a freshly generated corpus, few steps (the collapse needs the full run)
    monkeypatch.setattr(masks, "DATA_ROOT", tmp_path / "data")
    monkeypatch.setattr(masks, "STEPS", 12)
    r = masks.masks(tmp_path, "png")
    assert r.values["padding_with_mask"] < 1e-5 and r.values["leak_causal"] == 0
    assert r.values["leak_peeking"] > 0 and r.figures[0].is_file()
    assert (tmp_path / "data" / "synth" / "src-tgt" / "train.src").is_file()


def test_kv_cache_equals_recompute(tmp_path, monkeypatch):
    model = transformer.small_transformer()
    src = torch.tensor([[5, 9, 12, 7, transformer.EOS]])
    tokens, cached = transformer.generate(model, src, 24, cached=True)
    tokens_re, recomputed = transformer.generate(model, src, 24, cached=False)
    assert (cached - recomputed).abs().max() < 1e-5 and torch.equal(tokens, tokens_re)
    monkeypatch.setattr(transformer, "LENGTHS", (4, 8))
    r = transformer.kv_cache(tmp_path, "png")
    assert r.values["max_diff"] < 1e-5 and r.values["max_diff_forced"] < 1e-5 and r.passed
    assert [row[0] for row in r.rows] == [4, 8]


def test_override_weights_hook_reaches_both_attention_paths():
    g = torch.Generator().manual_seed(0)
    scores, values = torch.randn(2, 3, 4, generator=g), torch.randn(2, 4, 5, generator=g)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])[:, None, :]
    plain, _ = attend(scores, values, mask)
    with override_weights(trained.uniform):
        ctx, w = attend(scores, values, mask)
    assert torch.allclose(ctx[1], values[1, :2].mean(0).expand(3, 5), atol=1e-6)
    assert torch.equal(attend(scores, values, mask)[0], plain)  # gone after the block
    q, k, v = (torch.randn(1, 2, 3, 8, generator=g) for _ in range(3))
    full = torch.ones(1, 1, 1, 3, dtype=torch.bool)
    with override_weights(trained.uniform):
        out, _ = scaled_dot_product(q, k, v, full, need_weights=True)
        fused, _ = scaled_dot_product(q, k, v, full, need_weights=False)
    assert torch.allclose(out, v.mean(2, keepdim=True).expand_as(out), atol=1e-6)
    assert not torch.allclose(fused, out, atol=1e-3)  # the fused path is left alone


def test_permuted_weights_stay_on_allowed_positions():
    w = torch.tensor([[0.5, 0.3, 0.2, 0.0, 0.0]] * 4)
    mask = w > 0
    out = trained.permuted(3)(w, mask)
    assert (out[:, 3:] == 0).all()
    for row in out:
        assert sorted(row[:3].tolist()) == pytest.approx([0.2, 0.3, 0.5])


@pytest.mark.parametrize("family", ["bahdanau", "transformer"])
def test_intervention_control_is_exact_and_swaps_move_the_output(family):
    model = tiny_model(family)
    src = random_batch()[0]
    from nmt.decoding.search import greedy

    res = trained.intervene(model, src, greedy(model, src))
    assert res["same weights (control)"][0] < 1e-6
    assert res["uniform"][0] > 0 and 0 <= res["uniform"][1] <= 1
    if family == "transformer":
        assert {"next head's weights", "previous layer's weights"} <= set(res)


def _fake_run(root: Path, family: str, bleus: list[float]) -> Path:
    run = root / family
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(f"model: {{family: {family}}}\n")
    buckets = [{"bucket": b, "sentences": 50, "bleu": x}
               for b, x in zip(("1-9", "10-19", "20-29"), bleus)]
    (run / "scores.json").write_text(json.dumps({"test": {"by_length": buckets}}))
    return run


def test_bottleneck_compares_relative_drops(tmp_path, no_demo_runs):
    fixed = _fake_run(tmp_path / "a", "fixed_context", [30.0, 15.0, 6.0])
    attn = _fake_run(tmp_path / "a", "bahdanau", [40.0, 36.0, 32.0])
    r = trained.bottleneck(tmp_path / "out", "png", run=[fixed, attn])
    assert r.passed and r.values["drop_fixed_context"] == pytest.approx(0.8)
    worse = _fake_run(tmp_path / "b", "bahdanau", [40.0, 10.0, 2.0])
    assert trained.bottleneck(tmp_path / "out", "png", run=[fixed, worse]).passed is False
    assert trained.bottleneck(tmp_path / "out", "png").passed is None  # skipped
    with pytest.raises(NMTError, match="needs trained runs, .*`nmt lab run bottleneck --run A"):
        run_experiment("bottleneck", tmp_path / "out")
    with pytest.raises(NMTError, match="takes no --run"):
        run_experiment("tanh", tmp_path / "out", runs=[fixed])


def test_bottleneck_without_runs_reads_the_demo_runs_that_exist(tmp_path, monkeypatch):
    """Without --run: `make demo`'s runs, those of them present; two are enough."""
    fixed = _fake_run(tmp_path / "a", "fixed_context", [30.0, 15.0, 6.0])
    attn = _fake_run(tmp_path / "a", "bahdanau", [40.0, 36.0, 32.0])
    monkeypatch.setattr(trained, "DEMO_BOTTLENECK", (fixed, attn, tmp_path / "absent"))
    r = trained.bottleneck(tmp_path / "out", "png")
    assert r.passed and r.values["drop_fixed_context"] == pytest.approx(0.8)
    monkeypatch.setattr(trained, "DEMO_BOTTLENECK", (fixed, tmp_path / "absent"))
    assert trained.bottleneck(tmp_path / "out", "png").passed is None  # one run: skipped


def test_report_embeds_every_figure(tmp_path):
    r1 = softmax.toy(tmp_path, "png")
    r2 = rnn_attention.tanh(tmp_path, "svg")
    r3 = Result("bottleneck", [], [], [], None, "needs --run")
    md = write_report([r1, r2, r3], tmp_path, {"softmax-toy": 0.1}, EXPERIMENTS)
    text, page = md.read_text(), (tmp_path / "report.html").read_text()
    assert "## softmax-toy" in text and "![softmax-toy](softmax_toy.png)" in text
    assert "SKIPPED" in text and "What it does not show" in text
    assert page.count("data:image/png;base64,") == 1 and page.count("<svg") == 1
    assert "<?xml" not in page


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    old, sys.argv = sys.argv, ["nmt", *map(str, args)]
    try:
        nmt.cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_lab_list_and_run(capsys, tmp_path, no_demo_runs):
    code, out, _ = run_cli(capsys, "lab", "list")
    assert code == 0 and all(name in out for name in EXPERIMENTS)
    code, out, _ = run_cli(capsys, "lab", "run", "softmax-toy", "--out", tmp_path / "lab")
    assert code == 0 and "PASS" in out and "0.4674" in out
    assert (tmp_path / "lab" / "softmax_toy.png").is_file()
    code, _, err = run_cli(capsys, "lab", "run", "bottleneck", "--out", tmp_path / "lab")
    assert code == 2 and err.startswith("nmt: error: bottleneck: needs trained runs")
    code, _, err = run_cli(capsys, "lab", "run", "softmax-toy", "--format", "gif")
    assert code == 2 and "gif" in err


def test_saturation_rows_measure_distributions_over_the_keys():
    """Each row's entropies lie in [0, log KEYS] and its largest weights are per query:
    scaled, the largest weight stays where d = 4 has it; unscaled, it goes to one."""
    one_hot = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    assert float(scaling._entropy(torch.full((3, 4), 0.25))) == pytest.approx(math.log(4))
    assert float(scaling._entropy(one_hot)) == pytest.approx(0.0, abs=1e-12)
    gen = torch.Generator().manual_seed(3)
    rows = [scaling._measure(d, gen) for d in (4, 1024)]
    for row in rows:
        assert all(0 <= e <= math.log(scaling.KEYS) for e in row[2:4])
        assert 1 / scaling.KEYS <= row[5] < 0.35 and 1 / scaling.KEYS <= row[4] <= 1
    assert rows[1][4] > 0.9 > 0.35 > rows[1][5]
    fig = scaling._plot_saturation(rows)  # every panel against d
    assert all(list(line.get_xdata()) == [4, 1024] for ax in fig.axes for line in ax.lines[:1])


def test_masks_padding_rows_start_from_no_padding_and_the_figure_draws_them():
    rows, _ = masks.padding_rows(transformer.small_transformer())
    assert [r[0] for r in rows] == [0, 2, 4, 8, 16]
    assert rows[0][2] < 1e-5  # no padding: nothing to mask, batched = alone even without it
    fig = masks._plot(rows, {"causal": [2.0, 1.0]}, {"causal": (0.5, 10.0)})
    with_mask, without = fig.axes[0].lines[:2]
    assert list(with_mask.get_xdata()) == [0, 2, 4, 8, 16]
    assert list(without.get_ydata()) == [max(r[2], 1e-9) for r in rows]


def test_the_masks_word_corpus_reads_each_side_with_its_own_vocabulary(tmp_path):
    from nmt.data.corpora import SYNTH_PAIR, load_split

    corpus = masks.word_corpus(tmp_path / "data")
    sources, targets = load_split(tmp_path / "data", "synth", SYNTH_PAIR, "train")
    kept = [(s, t) for s, t in zip(sources, targets) if len(s.split()) <= masks.MAX_WORDS]
    for (src, tgt), (source, line) in list(zip(corpus.train, kept))[:50]:
        assert " ".join(corpus.tgt_words[i] for i in tgt) == line
        assert len(src) == len(source.split()) + 1 and src[-1] == masks.EOS


def test_the_interventions_figure_draws_each_measure_in_its_panel():
    fig = trained._plot_interventions({"run": {"same weights": (0.0, 0.0),
                                               "uniform": (0.25, 0.5)}})
    (js,), (share,) = ([p.get_height() for p in ax.patches] for ax in fig.axes[:2])
    assert (js, share) == (0.25, 0.5)


def test_js_divergence_is_never_below_zero_nor_above_ln_2():
    """nmt.lab.trained.js_divergence's docstring: in [0, ln 2], however close the rows
    (float32 rounding alone puts about half of these a hair below 0)."""
    import math

    import torch

    gen = torch.Generator().manual_seed(0)
    lp = torch.log_softmax(torch.randn(512, 500, generator=gen) * 3, -1)
    near = torch.log_softmax(lp + 1e-6 * torch.randn(512, 500, generator=gen), -1)
    close = trained.js_divergence(lp, near)
    assert (close >= 0).all() and close.max() < 1e-6
    far = torch.full((1, 2), -1e9)
    far[0, 0], other = 0.0, torch.full((1, 2), -1e9)
    other[0, 1] = 0.0
    assert trained.js_divergence(far, other).item() == pytest.approx(math.log(2), abs=1e-6)
