"""Every family learns the synthetic corpus in a tiny CPU run; checkpoints round-trip;
an interrupted run resumed from its checkpoint ends where an uninterrupted one does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from nmt.core.config import config_to_dict
from nmt.core.tokens import PAD
from nmt.data.batching import collate, iterate_batches, join_pairs
from nmt.data.corpora import SYNTH_PAIR
from nmt.decoding.evaluate import bleu_chrf
from nmt.decoding.translate import translate_ids
from nmt.models.checks import config_from_dict
from nmt.models.runs import load_run
from nmt.training.loss import loss_fn
from nmt.training.trainer import Trainer

MODELS = {
    "fixed_context": {"family": "fixed_context", "bidirectional": False},
    "bahdanau": {"family": "bahdanau"},
    "luong_general": {"family": "luong", "score": "general"},
    "luong_local_p": {"family": "luong", "score": "general", "attention": "local-p",
                      "window": 3},
    "transformer": {"family": "transformer", "heads": 4, "ff_size": 128, "enc_layers": 2,
                    "dec_layers": 2},
}
STEPS = {"fixed_context": 500, "bahdanau": 500, "luong_general": 700, "luong_local_p": 500,
         "transformer": 260}


def tiny_config(root: Path, runs: Path, name: str, model: dict, local: dict | None = None,
                **train):
    transformer = model["family"] == "transformer"
    raw = {
        "name": name, "runs_dir": str(runs),
        "data": {"root": str(root), "corpus": "synth", "pair": SYNTH_PAIR, "max_len": 12},
        "vocab": {"size": 600},
        "model": {"emb_size": 64, "hidden_size": 64, "dropout": 0.0, **model},
        "train": {"batch_tokens": 800, "lr": 0.002 if transformer else 0.01, "warmup": 30,
                  "schedule": "inverse_sqrt" if transformer else "constant",
                  "label_smoothing": 0.0, "max_steps": 260, "valid_every": 1000,
                  "log_every": 20, "valid_sentences": 60, "align_sentences": 0, **train},
        "decode": {"beam": 1}, "local": local or {},
    }
    return config_from_dict(raw)


def short_pairs(root: Path, n: int = 40) -> tuple[list[str], list[str]]:
    folder = root / "synth" / SYNTH_PAIR
    src = (folder / "test.src").read_text().splitlines()
    tgt = (folder / "test.tgt").read_text().splitlines()
    pairs = [(s, t) for s, t in zip(src, tgt) if len(s.split()) <= 8][:n]
    return [s for s, _ in pairs], [t for _, t in pairs]


@pytest.mark.parametrize("name", list(MODELS))
def test_every_family_learns_the_synthetic_corpus(name, data_root, tmp_path):
    cfg = tiny_config(data_root, tmp_path, name, MODELS[name], max_steps=STEPS[name])
    trainer = Trainer(cfg, quiet=True)
    trainer.fit()
    losses = [r["loss"] for r in trainer.run.read_metrics() if r["kind"] == "train"]
    assert losses[-1] < 0.4 * losses[0], losses
    _, vocab, model, _ = load_run(cfg.run_dir)
    sources, refs = short_pairs(data_root)
    hyps = translate_ids(model, vocab, vocab.encode_src(sources), cfg.decode, beam=1)
    baseline = bleu_chrf(sources, refs)["bleu"]  # copying the source: the trivial baseline
    bleu = bleu_chrf(hyps, refs)["bleu"]
    assert bleu > baseline + 10, (bleu, baseline, hyps[:3])


def test_trainer_steps_the_local_window_curriculum(data_root, tmp_path):
    """local.window_start: the trainer sets the half-width of each step through the
    model's at_step hook (30 -> 3 over 6 steps: 21 after step 2)."""
    model = MODELS["luong_local_p"]
    trainer = Trainer(tiny_config(data_root, tmp_path, "curriculum", model, max_steps=2,
                                  local={"window_start": 30, "window_steps": 6}), quiet=True)
    trainer.fit()
    assert trainer.model.local.half_width == pytest.approx(21.0)


@pytest.mark.parametrize("key", ["position_limit", "position_guide"])
def test_training_loss_adds_the_terms_the_forward_pass_returns(data_root, tmp_path, key):
    """local.position_limit / position_guide: loss_fn = cross-entropy + the auxiliary loss
    the same forward pass returns, its per-position terms summed over the real target
    positions only; a pass run before (with no loss) leaves nothing behind."""
    trainer = Trainer(tiny_config(data_root, tmp_path, key, MODELS["luong_local_p"],
                                  max_steps=1, local={key: 1.0}), quiet=True)
    model = trainer.model
    with torch.no_grad():
        model.local.v_p.weight.fill_(3.0)  # z = 3 * sum(tanh(W_p h_t)): mostly far past +-1
    d = trainer.data
    batch = collate(d.train_src[:8], d.train_tgt[:8])
    model.train()
    stale = collate(d.train_src[8:12], d.train_tgt[8:12])
    model(stale.src, stale.tgt_in)  # a forward with no loss: nothing is kept from it
    torch.manual_seed(0)
    with_penalty = loss_fn(model, batch, 0.0)
    real = batch.tgt_out != PAD
    enc = model.encode(batch.src)
    _, _, terms = model.decode_with_aux(enc, batch.tgt_in)  # (B, T)
    assert terms.shape == real.shape
    penalty = terms[real].sum()
    assert penalty > 0 and terms[~real].abs().sum() > 0  # padding's terms exist, not counted
    model.eval()  # evaluation: the same weights, no auxiliary loss
    assert model(batch.src, batch.tgt_in, select=real)[2] is None
    logits, _, _ = model(batch.src, batch.tgt_in, select=real)
    plain = torch.nn.functional.cross_entropy(logits, batch.tgt_out[real], reduction="sum")
    assert with_penalty.item() == pytest.approx(plain.item() + penalty.item(), rel=1e-5)


class _TwoGroups:
    """A family that asks for its output layer at a tenth of the rate (the hook only)."""

    @staticmethod
    def param_groups(model) -> list[dict]:
        out = {id(p) for p in model.out.parameters()}
        return [{"params": [p for p in model.parameters() if id(p) not in out]},
                {"params": list(model.out.parameters()), "scale": 0.1}]


def test_the_optimiser_takes_the_models_parameter_groups_in_training_and_adapt(
        data_root, tmp_path, monkeypatch):
    """Seq2Seq.param_groups: nmt.training.optim.build_optimizer (training and --adapt alike) gives
    each group its scale of the rate, so Adam's first step moves the output layer about a
    tenth as far as the rest."""
    from nmt.models.base import Seq2Seq
    from nmt.training.adapt import adapt_copy

    monkeypatch.setattr(Seq2Seq, "param_groups", _TwoGroups.param_groups)
    cfg = tiny_config(data_root, tmp_path, "groups", MODELS["bahdanau"], max_steps=1,
                      clip=0.0, schedule="constant", warmup=0)
    trainer = Trainer(cfg, quiet=True)
    assert [g["scale"] for g in trainer.optim.param_groups] == [1.0, 0.1]
    before = _params(trainer.model)
    trainer.fit()

    def moved(after: dict, start: dict) -> tuple[float, float]:
        step = {k: (after[k] - start[k]).abs().max().item() for k in start}
        return step["out.bias"], step["score.v.weight"]

    slow, rest = moved(trainer.model.state_dict(), before)
    assert slow == pytest.approx(0.1 * rest, rel=0.05)
    d = trainer.data
    tuned, _ = adapt_copy(trainer.model, d.train_src[:16], d.train_tgt[:16], 1, 1e-3,
                          cfg.train)
    slow, rest = moved(tuned.state_dict(), _params(trainer.model))
    assert slow == pytest.approx(0.1 * rest, rel=0.05)


def test_the_optimiser_is_torchs_fused_adam_with_the_same_update_as_the_default():
    """build_optimizer takes torch's fused Adam on the CPU; three steps of it move a model
    as the per-tensor Adam with the same betas, eps and groups does."""
    from nmt.models.base import Seq2Seq
    from nmt.training.optim import build_optimizer
    from tests.numpy_ref import build

    fused_model = build("bahdanau", seed=3, emb_size=6, hidden_size=5)
    plain_model = build("bahdanau", seed=3, emb_size=6, hidden_size=5)
    fused = build_optimizer(fused_model, 1e-2)
    assert all(g["fused"] for g in fused.param_groups)
    plain = torch.optim.Adam(Seq2Seq.param_groups(plain_model), lr=1e-2, betas=(0.9, 0.98),
                             eps=1e-9)
    src = torch.tensor([[5, 6, 7, 3], [8, 3, 0, 0]])
    tgt = torch.tensor([[2, 5, 6], [2, 7, 0]])
    for _ in range(3):
        for model, optim in ((fused_model, fused), (plain_model, plain)):
            optim.zero_grad()
            model(src, tgt)[0].logsumexp(-1).sum().backward()
            optim.step()
    for (name, a), b in zip(fused_model.state_dict().items(), plain_model.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)
    assert not torch.equal(fused_model.state_dict()["out.bias"], build("bahdanau", seed=3,
                           emb_size=6, hidden_size=5).state_dict()["out.bias"])


def _params(model) -> dict:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_resume_reaches_the_same_parameters(data_root, tmp_path):
    model = MODELS["bahdanau"]
    full = tiny_config(data_root, tmp_path, "full", {**model, "dropout": 0.2},
                       max_steps=24, valid_every=8)
    first = Trainer(full, quiet=True)
    first.fit()
    part = tiny_config(data_root, tmp_path, "part", {**model, "dropout": 0.2},
                       max_steps=16, valid_every=8)
    Trainer(part, quiet=True).fit()
    resumed_cfg = tiny_config(data_root, tmp_path, "part", {**model, "dropout": 0.2},
                              max_steps=24, valid_every=8)
    resumed = Trainer(resumed_cfg, resume=True, quiet=True)
    assert resumed.progress.step == 16
    resumed.fit()
    a, b = _params(first.model), _params(resumed.model)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_checkpoint_round_trip_restores_the_model(data_root, tmp_path):
    cfg = tiny_config(data_root, tmp_path, "rt", MODELS["luong_general"], max_steps=5,
                      valid_every=5)
    trainer = Trainer(cfg, quiet=True)
    trainer.fit()
    _, _, model, payload = load_run(cfg.run_dir, "last")
    assert payload["progress"]["step"] == 5
    for key, value in trainer.model.state_dict().items():
        assert torch.equal(value, model.state_dict()[key])


def test_training_reports_the_pairs_it_leaves_out(data_root, tmp_path, capsys):
    """The pairs dropped by data.max_len and the vocabulary SentencePiece actually built
    are printed and logged: a silent filter once left out 37.6% of the synthetic corpus."""
    cfg = tiny_config(data_root, tmp_path, "count", MODELS["bahdanau"], max_steps=1)
    trainer = Trainer(cfg)
    trainer.fit()
    record = next(r for r in trainer.run.read_metrics() if r["kind"] == "data")
    folder = data_root / "synth" / SYNTH_PAIR
    pairs = len((folder / "train.src").read_text().splitlines())
    src, tgt = trainer.data.train_src, trainer.data.train_tgt
    kept = sum(1 < len(s) <= 13 and 0 < len(t) <= 12 for s, t in zip(src, tgt))
    assert record["pairs"] == pairs and record["kept"] == kept and 0 < kept < pairs
    assert record["src_vocab"] == trainer.data.vocab.src.get_piece_size() <= 600
    out = capsys.readouterr().err
    assert f"data: {kept:,} of {pairs:,} training pairs ({pairs - kept:,} empty or " \
           "longer than data.max_len=12 subwords, left out)" in out


def test_join_pairs_uses_every_pair_once_and_keeps_one_eos():
    """data.concat: runs of 1..k pairs joined end to end; the inner sources lose their EOS
    (the encoder sees one sentence), the targets are joined as they are."""
    eos = 3
    src = [np.array([10 + i, 20 + i, eos], np.int32) for i in range(30)]
    tgt = [np.array([100 + i], np.int32) for i in range(30)]
    keep = [i for i in range(30) if i != 7]
    joined_src, joined_tgt = join_pairs(src, tgt, keep, 3, seed=5)
    sizes = [len(t) for t in joined_tgt]
    assert sum(sizes) == len(keep) and max(sizes) <= 3 and len(set(sizes)) > 1
    assert sorted(int(x) for t in joined_tgt for x in t) == [100 + i for i in keep]
    for s, t in zip(joined_src, joined_tgt):
        assert list(s) == [x for i in (int(v) - 100 for v in t) for x in (10 + i, 20 + i)] + [eos]
    assert [list(t) for t in join_pairs(src, tgt, keep, 3, seed=5)[1]] == \
        [list(t) for t in joined_tgt]
    assert [len(t) for t in join_pairs(src, tgt, keep, 1, seed=5)[1]] == [1] * len(keep)


def test_training_on_joined_pairs_reports_the_examples(data_root, tmp_path, capsys):
    cfg = tiny_config(data_root, tmp_path, "joined", MODELS["bahdanau"], max_steps=1)
    cfg = config_from_dict(config_to_dict(cfg), overrides=["data.concat=3"])
    trainer = Trainer(cfg)
    trainer.fit()
    record = next(r for r in trainer.run.read_metrics() if r["kind"] == "data")
    assert record["kept"] < record["pairs"]
    assert record["kept"] / 3 <= record["examples"] < record["kept"] * 0.75
    assert max(len(s) for s in trainer.data.train_src) > 13
    assert f"joined into {record['examples']:,} examples of 1 to 3 pairs (data.concat)" in \
        capsys.readouterr().err


def test_train_compile_runs_the_training_pass_compiled_and_keeps_plain_checkpoints(
        data_root, tmp_path, monkeypatch):
    """train.compile: the training pass goes through torch.compile(..., dynamic=True);
    validation, decoding and checkpoints use the plain module, so a compiled run resumes
    and loads like any other. (A stand-in for torch.compile, which takes minutes on CPU.)"""
    calls = {"compiled": 0, "steps": 0}

    class Compiled(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.inner = module

        def forward(self, *args, **kwargs):
            calls["steps"] += 1
            return self.inner(*args, **kwargs)

    def fake_compile(module, dynamic=None):
        calls["compiled"] += 1
        assert dynamic is True
        return Compiled(module)

    monkeypatch.setattr(torch, "compile", fake_compile)
    cfg = tiny_config(data_root, tmp_path, "compiled", MODELS["bahdanau"], max_steps=4,
                      valid_every=2, compile=True)
    trainer = Trainer(cfg, quiet=True)
    trainer.fit()
    assert calls == {"compiled": 1, "steps": 4}  # every training step, no validation pass
    _, _, model, _ = load_run(cfg.run_dir, "last")  # plain parameter names in the checkpoint
    a, b = _params(model), _params(trainer.model)
    assert all(torch.equal(a[k], b[k]) for k in a)
    more = tiny_config(data_root, tmp_path, "compiled", MODELS["bahdanau"], max_steps=6,
                       valid_every=2, compile=True)
    resumed = Trainer(more, resume=True, quiet=True)
    assert resumed.progress.step == 4
    resumed.fit()
    assert calls == {"compiled": 2, "steps": 6}


def test_native_bf16_reads_the_cpu_flags_and_refuses_cuda_emulation(monkeypatch):
    """distributed.native_bf16: a CPU with AVX512-BF16 or AMX tiles; on CUDA only bf16 the
    card multiplies in hardware (torch's default check counts pre-Ampere emulation)."""
    from nmt.training import distributed as dist

    cpu = torch.device("cpu")
    for avx512, amx in ((False, False), (True, False), (False, True)):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda v=avx512: v)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda v=amx: v)
        assert dist.native_bf16(cpu) == (avx512 or amx)
    asked = []

    def is_bf16_supported(including_emulation=True):
        asked.append(including_emulation)
        return including_emulation  # a T4: emulated only

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    assert dist.native_bf16(torch.device("cuda", 0)) is False and asked == [False]
    assert isinstance(dist.autocast(cpu, "bf16"), torch.autocast)
    assert not isinstance(dist.autocast(cpu, "fp32"), torch.autocast)
    with pytest.raises(ValueError):
        dist.autocast(cpu, "auto")


def _native(monkeypatch, native: bool, tmp_path: Path) -> None:
    from nmt.training import distributed as dist

    monkeypatch.setattr(dist, "native_bf16", lambda dev: native)
    monkeypatch.setenv("NMT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.precision_auto
@pytest.mark.parametrize("faster", ["fp32", "bf16"])
def test_precision_auto_keeps_what_the_timing_finds_faster_and_remembers_it(
        faster, data_root, tmp_path, monkeypatch):
    """train.precision: auto times both precisions on this model's own batches (spread
    over the epoch, so of several shapes) and keeps the faster; the run's first record
    and precision.json say so with the timings; --resume reuses the run's choice and a
    second run of the same shapes the cache's, neither timing again."""
    from nmt.training import precision

    _native(monkeypatch, True, tmp_path)
    seen = []
    real = precision.time_steps

    def timed(step, batches, precisions, dev):
        seen.append(({tuple(b.src.shape) for b in batches}, list(precisions)))
        real(step, batches, precisions, dev)  # the real passes: they must leave no trace
        return {"fp32": [1.0] * 4, "bf16": [0.5 if faster == "bf16" else 0.99] * 4}

    monkeypatch.setattr(precision, "time_steps", timed)
    cfg = tiny_config(data_root, tmp_path, "auto", MODELS["bahdanau"], max_steps=4,
                      precision="auto")
    trainer = Trainer(cfg, quiet=True)
    assert trainer.precision == faster
    (shapes, precisions), = seen
    assert precisions == ["fp32", "bf16"] and len(shapes) > 1  # batches of several shapes
    trainer.fit()
    record = next(r for r in trainer.run.read_metrics() if r["kind"] == "data")
    assert record["precision"] == faster and record["precision_source"] == "probe"
    assert record["precision_timings"]["fp32"] == 1.0 and record["probe_s"] >= 0
    kept = json.loads(trainer.run.precision.read_text())
    assert kept["precision"] == faster and kept["timings"]["fp32"] == 1.0

    more = tiny_config(data_root, tmp_path, "auto", MODELS["bahdanau"], max_steps=6,
                       precision="auto")
    assert Trainer(more, resume=True, quiet=True).chosen["source"] == "run"
    again = tiny_config(data_root, tmp_path, "auto_again", MODELS["bahdanau"], max_steps=4,
                        precision="auto")
    second = Trainer(again, quiet=True)
    assert second.chosen["source"] == "cache" and second.precision == faster
    assert len(seen) == 1  # timed once in all


@pytest.mark.precision_auto
def test_precision_as_written_or_without_native_bf16_is_not_timed(data_root, tmp_path,
                                                                  monkeypatch):
    """fp32 and bf16 are obeyed as written, and auto is fp32 where bf16 is not native:
    no timing runs in either case."""
    from nmt.training import precision

    def never(*args):
        raise AssertionError("timed")

    monkeypatch.setattr(precision, "time_steps", never)
    for native, setting, expected, source in ((True, "fp32", "fp32", "config"),
                                              (False, "bf16", "bf16", "config"),
                                              (False, "auto", "fp32", "device")):
        _native(monkeypatch, native, tmp_path)
        cfg = tiny_config(data_root, tmp_path, f"{setting}_{native}", MODELS["bahdanau"],
                          max_steps=1, precision=setting)
        trainer = Trainer(cfg, quiet=True)
        assert (trainer.precision, trainer.chosen["source"]) == (expected, source)


@pytest.mark.precision_auto
def test_precision_timing_changes_nothing_the_run_trains(data_root, tmp_path, monkeypatch):
    """The probe's passes leave weights, gradients and random streams as they were: a run
    with auto (dropout on) trains step for step as the same run with its choice written."""
    _native(monkeypatch, True, tmp_path)
    model = {**MODELS["transformer"], "dropout": 0.3}
    auto = Trainer(tiny_config(data_root, tmp_path, "probed", model, max_steps=6,
                               log_every=1, precision="auto"), quiet=True)
    assert auto.chosen["source"] == "probe"
    assert all(p.grad is None for p in auto.model.parameters())
    auto.fit()
    written = Trainer(tiny_config(data_root, tmp_path, "written", model, max_steps=6,
                                  log_every=1, precision=auto.precision), quiet=True)
    written.fit()
    losses = [[r["loss"] for r in t.run.read_metrics() if r["kind"] == "train"]
              for t in (auto, written)]
    assert len(losses[0]) == 6 and losses[0] == losses[1]


def test_precision_probe_picks_bf16_only_past_the_margin():
    """precision.faster: bf16 only when it saves at least MARGIN of fp32's time."""
    from nmt.training import precision

    m = precision.MARGIN
    assert precision.faster({"fp32": 1.0}) == "fp32"
    assert precision.faster({"fp32": 1.0, "bf16": 1.0 - m}) == "bf16"
    assert precision.faster({"fp32": 1.0, "bf16": 1.0 - m + 1e-3}) == "fp32"
    assert precision.faster({"fp32": 1.0, "bf16": 1.5}) == "fp32"


def test_a_bf16_run_bounds_the_kernel_cache_unless_the_environment_sets_it(monkeypatch):
    """precision.bound_kernel_cache: ONEDNN_PRIMITIVE_CACHE_CAPACITY is set to
    KERNEL_CACHE, and a value already in the environment is left alone."""
    import os

    from nmt.training import precision

    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    precision.bound_kernel_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == precision.KERNEL_CACHE
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "7")
    precision.bound_kernel_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "7"


def test_training_logits_come_from_a_few_row_counts_and_equal_the_unpadded_ones():
    """Seq2Seq.forward with `select`: the output layer multiplies a multiple of ROWS rows
    (real positions plus zero rows), and the logits returned are exactly the real rows'."""
    from nmt.models import base, build_model
    from nmt.models.checks import config_from_dict as build

    cfg = build({"model": {"family": "transformer", "emb_size": 32, "heads": 2, "ff_size": 64,
                           "enc_layers": 1, "dec_layers": 1, "dropout": 0.0}})
    torch.manual_seed(0)
    model = build_model(cfg.model, 50, 50, False).eval()
    rows = []
    model.out.register_forward_hook(lambda m, i, o: rows.append(i[0].size(0)))
    src = torch.randint(4, 50, (3, 7))
    tgt = torch.randint(4, 50, (3, 5))
    tgt[1, 3:] = PAD
    select = tgt != PAD
    logits, _, _ = model(src, tgt, select=select)
    full, _, _ = model(src, tgt)
    assert rows[0] % base.ROWS == 0 and rows[0] >= int(select.sum())
    assert logits.shape == (int(select.sum()), 50)
    assert torch.allclose(logits, full[select], atol=1e-5)


@pytest.mark.parametrize("name", ["bahdanau", "transformer"])
def test_a_bf16_step_multiplies_in_bf16_and_keeps_weights_gradients_and_loss_in_fp32(
        name, data_root, tmp_path):
    """Under train.precision=bf16 the linear layers of the training pass compute in bf16,
    while parameters, Adam's moments (built from the gradients) and the loss stay float32,
    and the loss is the fp32 loss to bf16's precision; the run logs the precision it used."""
    steps = {}
    for precision in ("fp32", "bf16"):
        cfg = tiny_config(data_root, tmp_path, f"{name}_{precision}", MODELS[name],
                          max_steps=1, precision=precision)
        trainer = Trainer(cfg, quiet=True)
        seen = set()
        hooks = [m.register_forward_hook(lambda m, i, o: seen.add(o.dtype))
                 for m in trainer.model.modules() if isinstance(m, torch.nn.Linear)]
        batch = trainer.epoch_batches(0)[0]
        first = next(iterate_batches(trainer.data.train_src, trainer.data.train_tgt, [batch]))
        loss = trainer.train_step(first)
        for h in hooks:
            h.remove()
        steps[precision] = loss
        assert seen == {torch.float32 if precision == "fp32" else torch.bfloat16}
        assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
        assert all(s["exp_avg"].dtype == torch.float32 for s in trainer.optim.state.values())
        trainer.fit()
        record = next(r for r in trainer.run.read_metrics() if r["kind"] == "data")
        assert record["precision"] == precision
    assert steps["bf16"] == pytest.approx(steps["fp32"], rel=2e-2)
    assert steps["bf16"] != steps["fp32"]


def test_checkpoints_carry_the_gpu_generators_and_resume_restores_them(data_root, tmp_path,
                                                                        monkeypatch):
    """With CUDA present, checkpoints/last.pt holds every GPU generator's state and
    --resume puts it back (dropout on a GPU draws from it: without it resume is exact on
    the CPU only). CUDA is stood in for: the trainer stays on the CPU."""
    from nmt.core.checkpoint import load_checkpoint
    from nmt.training import distributed as dist

    states = [torch.arange(16, dtype=torch.uint8), torch.arange(16, 32, dtype=torch.uint8)]
    restored = []
    monkeypatch.setattr(dist, "device", lambda: torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [s.clone() for s in states])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.append)
    cfg = tiny_config(data_root, tmp_path, "cuda_rng", MODELS["bahdanau"], max_steps=2,
                      precision="fp32")
    trainer = Trainer(cfg, quiet=True)
    trainer.fit()
    saved = load_checkpoint(trainer.run.checkpoint("last"))["rng_cuda"]
    assert [torch.equal(a, b) for a, b in zip(saved, states)] == [True, True]
    restored.clear()
    Trainer(tiny_config(data_root, tmp_path, "cuda_rng", MODELS["bahdanau"], max_steps=3,
                        precision="fp32"), resume=True, quiet=True)
    assert len(restored) == 1 and all(torch.equal(a, b) for a, b in zip(restored[0], states))


def test_adapting_gives_back_every_generator_it_reseeds(monkeypatch):
    """nmt.training.adapt:adapting seeds every device (torch.manual_seed); it forks the
    CPU's generator and each GPU's, so the caller's CUDA state comes back unchanged."""
    import contextlib

    from nmt.core.config import TrainConfig
    from nmt.training import adapt

    forked = []

    @contextlib.contextmanager
    def fork_rng(devices=None, **kw):
        forked.append(devices)
        yield

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.random, "fork_rng", fork_rng)
    monkeypatch.setattr(torch, "manual_seed", lambda seed: None)
    model = build_tiny()
    src = [np.array([5, 6, 3]), np.array([7, 3])]
    tgt = [np.array([5, 6]), np.array([7])]
    next(adapt.adapting(model, src, tgt, 1e-3, TrainConfig(batch_tokens=100)))
    assert forked == [[0, 1]]


def build_tiny():
    from nmt.core.config import ModelConfig
    from nmt.models import build_model

    torch.manual_seed(0)
    return build_model(ModelConfig(family="bahdanau", emb_size=16, hidden_size=16,
                                   dropout=0.1), 20, 20, True)


@pytest.mark.parametrize("kind", ["local-p", "local-m"])
def test_local_attention_places_its_window_in_fp32_under_bf16_autocast(kind):
    """LocalWindow: p_t, the window and its Gaussian are float32 in a bf16 step, and equal
    the fp32 computation (bf16 would resolve p_t near 40 only to a quarter of a word)."""
    from nmt.models.attention import LocalWindow

    torch.manual_seed(0)
    local = LocalWindow(kind, 10, 32)
    query = torch.randn(2, 5, 32)
    step = torch.arange(5).expand(2, 5)
    mask = torch.ones(2, 60, dtype=torch.bool)
    plain_centre = local.centre(query, step, mask)
    plain = local(query, step, mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        centre = local.centre(query, step, mask)
        inside, log_gauss = local(query, step, mask)
    assert centre.dtype == torch.float32 and log_gauss.dtype == torch.float32
    assert torch.allclose(centre, plain_centre, atol=1e-5)
    assert torch.equal(inside, plain[0]) and torch.allclose(log_gauss, plain[1], atol=1e-5)
