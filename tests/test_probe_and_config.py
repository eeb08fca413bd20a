"""Issue 50's items on the precision probe (9, 10, 11, the cached bf16 of 19), the config
loader (16) and portability (17), and the same eyes on the other files read back: the
encoded-split cache, scores.json, metrics.jsonl and checkpoints.
Each test's name starts with its item's number."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import threading
import time
import typing
from pathlib import Path

import numpy as np
import pytest
import torch

from nmt.core import config as nmt_config
from nmt.core import fields as nmt_fields
from nmt.core.errors import NMTError
from nmt.models.checks import config_from_dict, load_config
from nmt.training import precision

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")
CLEAR = {"fp32": [1.0] * 4, "bf16": [0.5] * 4}  # bf16 half the time on every batch


@pytest.fixture
def bf16_cpu(monkeypatch, tmp_path):
    """A CPU that multiplies bf16 natively, and a precision cache of this test's own."""
    monkeypatch.setattr(precision.dist, "native_bf16", lambda dev: True)
    monkeypatch.setenv("NMT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "precision.json"


class _Batch:
    n_tokens = 100


def _resolve(probe, run_file=None):
    return precision.resolve("auto", CPU, run_file, lambda: "key", probe)


def _cached(cache: Path) -> dict:
    return json.loads(cache.read_text()) if cache.is_file() else {}


# 9 ------------------------------------------------------------------------------------------

def test_9_a_probe_that_times_no_batch_keeps_fp32_and_caches_nothing(bf16_cpu):
    """An epoch of one batch (only the untimed warm-up) or none: fp32, and the next start
    times again. Before, both timings were 0.0, bf16 won, and that was cached."""
    assert precision.faster({"fp32": 0.0, "bf16": 0.0}) == "fp32"  # "fp32 wins ties"
    for batches in ([_Batch()], []):
        record = _resolve(lambda ps, b=batches: precision.time_steps(
            lambda batch, p: None, b, ps, CPU))
        assert record["precision"] == "fp32" and record["source"] == "probe"
        assert "key" not in _cached(bf16_cpu)
        assert "no batch timed" in precision.describe(record, "auto")


def test_9_time_steps_times_every_batch_but_the_warm_up_in_each_precision():
    seen = []
    samples = precision.time_steps(lambda batch, p: seen.append(p), [_Batch()] * 3,
                                   ["fp32", "bf16"], CPU)
    assert {p: len(v) for p, v in samples.items()} == {"fp32": 2, "bf16": 2}
    assert seen == ["fp32", "bf16", "bf16", "fp32", "fp32", "bf16"]  # turns alternate


def test_9_time_steps_reports_seconds_per_thousand_target_tokens(monkeypatch):
    """A step of 0.05 s on a batch of 100 target tokens: 0.5 s per 1,000 tokens (a clock
    that only the step moves)."""
    clock = [0.0]
    monkeypatch.setattr(precision.time, "perf_counter", lambda: clock[0])

    def step(batch, p):
        clock[0] += 0.05

    samples = precision.time_steps(step, [_Batch()] * 3, ["fp32"], CPU)
    assert samples == {"fp32": [pytest.approx(0.5), pytest.approx(0.5)]}


def test_9_a_batch_without_target_tokens_is_timed_per_one_token():
    """Seconds per 1,000 target tokens: a batch whose rows are all padding counts as one
    token instead of dividing by zero."""
    class Empty:
        n_tokens = 0

    samples = precision.time_steps(lambda batch, p: None, [Empty()] * 2, ["fp32"], CPU)
    assert len(samples["fp32"]) == 1 and 0 <= samples["fp32"][0] < 1e3


# 10 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("entry", [
    {"precision": "bf16", "timings": "x"},
    {"precision": "bf16", "timings": [1]},
    {"precision": "bf16", "timings": {"bf16": "fast"}},
    {"precision": "bf16", "timings": {"fp32": 1.0, "bf16": -0.5}, "probe_s": 1.0},
    {"precision": "bf16", "timings": {"fp32": 1.0, "bf16": True}, "probe_s": 1.0},
    {"precision": "bf16", "timings": {"fp32": 1.0, "bf16": 0.5}, "probe_s": "long"},
    {"precision": "bf16", "timings": {"fp32": 1.0, "bf16": 0.5}, "spread": {"bf16": 3}},
    {"precision": "bf16", "timings": {"fp32": 1.0, "tf32": 0.5}},
    {"precision": "bf16"},  # a cache entry without its timings
    ["bf16"],
])
def test_10_a_malformed_cache_entry_is_ignored_and_timed_again(entry, bf16_cpu):
    """A cache entry with a valid precision but anything else malformed used to crash the
    start of training in `describe`; now the whole entry is checked and a bad one ignored."""
    bf16_cpu.parent.mkdir(parents=True)
    bf16_cpu.write_text(json.dumps({"key": entry}))
    probes = []
    record = _resolve(lambda ps: probes.append(ps) or CLEAR)
    assert probes == [["fp32", "bf16"]] and record["source"] == "probe"
    assert "bf16 matrix products" in precision.describe(record, "auto")
    assert _cached(bf16_cpu)["key"]["timings"] == {"fp32": 1.0, "bf16": 0.5}  # replaced


@pytest.mark.parametrize("kept", [{"precision": "bf16", "timings": "x"},
                                  {"precision": "fp32", "timings": {"fp32": "slow"}}])
def test_10_a_malformed_run_precision_file_is_ignored_on_resume(kept, bf16_cpu, tmp_path):
    run_file = tmp_path / "precision.json"
    run_file.write_text(json.dumps(kept))
    record = _resolve(lambda ps: CLEAR, run_file)
    assert record["source"] == "probe"
    precision.describe(record, "auto")
    run_file.write_text(json.dumps({"precision": "fp32"}))  # a whole one is kept
    assert _resolve(lambda ps: CLEAR, run_file)["source"] == "run"


# 11 -----------------------------------------------------------------------------------------

def test_11_only_a_decision_every_timed_batch_agrees_on_is_cached(bf16_cpu):
    """Batches on both sides of the margin (the difference within the noise), or a single
    timed batch: fp32, not cached, so the next start times again; a clear one is cached
    with each precision's spread."""
    noisy = {"fp32": [1.0, 1.0, 1.0, 1.0], "bf16": [0.5, 1.2, 0.5, 1.2]}  # mean 0.85
    for samples in (noisy, {"fp32": [1.0], "bf16": [0.5]}):
        probes = []
        for _ in range(2):
            record = _resolve(lambda ps, s=samples: probes.append(ps) or s)
            assert (record["precision"], record["source"]) == ("fp32", "probe")
            assert record["unsettled"] and "timed again" in precision.describe(record, "auto")
        assert len(probes) == 2 and "key" not in _cached(bf16_cpu)
    assert _resolve(lambda ps: CLEAR)["precision"] == "bf16"
    entry = _cached(bf16_cpu)["key"]
    assert entry["spread"] == {"fp32": [1.0, 1.0], "bf16": [0.5, 0.5]}
    assert _resolve(lambda ps: 1 / 0)["source"] == "cache"
    close = {"fp32": [1.0] * 4, "bf16": [0.96, 0.97, 0.99, 0.98]}  # clearly inside the margin
    assert precision.decide(close) | {"timings": None} == {
        "precision": "fp32", "settled": True, "timings": None,
        "spread": {"fp32": [1.0, 1.0], "bf16": [0.96, 0.99]}}


def test_11_a_torch_upgrade_or_another_cpu_misses_the_cache(monkeypatch, tmp_path):
    model = torch.nn.Linear(3, 2)
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu sse avx512f\n"
                    "processor\t: 1\nmodel name\t: Some CPU\nflags\t\t: fpu sse avx512f\n")
    monkeypatch.setattr(precision, "CPUINFO", info)
    key = precision.cache_key(CPU, model, {"batch_tokens": 800})
    assert precision.cache_key(CPU, model, {"batch_tokens": 800}) == key
    info.write_text(info.read_text().replace("avx512f", "avx512f avx512_bf16"))
    assert precision.cache_key(CPU, model, {"batch_tokens": 800}) != key  # same name, new flags
    info.write_text(info.read_text().replace(" avx512_bf16", ""))
    assert precision.cache_key(CPU, model, {"batch_tokens": 800}) == key
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    assert precision.cache_key(CPU, model, {"batch_tokens": 800}) != key


def test_11_two_probes_on_one_machine_take_turns_and_the_second_reads_the_first(bf16_cpu):
    """Two trainings starting at once would time each other's load: the probes hold a lock
    beside the cache, and the one that waited finds the other's result there."""
    spans, entered = [], threading.Event()

    def probe(ps):
        entered.set()
        tick = time.perf_counter()
        time.sleep(0.3)
        spans.append((tick, time.perf_counter()))
        return CLEAR

    records = []
    first = threading.Thread(target=lambda: records.append(_resolve(probe)))
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=lambda: records.append(_resolve(probe)))
    second.start()
    first.join(10)
    second.join(10)
    assert len(spans) == 1  # timed once: the second waited, then read the cache
    assert sorted(r["source"] for r in records) == ["cache", "probe"]
    assert {r["precision"] for r in records} == {"bf16"}


def test_11_two_agreeing_trials_settle_the_choice():
    """At least two paired trials that agree settle it (cached); one does not."""
    two = precision.decide({"fp32": [1.0, 1.0], "bf16": [0.5, 0.6]})
    assert (two["precision"], two["settled"]) == ("bf16", True)
    assert two["timings"] == {"fp32": 1.0, "bf16": 0.55}
    one = precision.decide({"fp32": [1.0], "bf16": [0.5]})
    assert (one["precision"], one["settled"]) == ("fp32", False)


def test_11_the_cache_lives_in_nmt_cache_dir_else_the_xdg_cache_else_home(monkeypatch, tmp_path):
    monkeypatch.delenv("NMT_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert precision.cache_file() == tmp_path / "home" / ".cache" / "nmt" / "precision.json"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert precision.cache_file() == tmp_path / "xdg" / "nmt" / "precision.json"
    monkeypatch.setenv("NMT_CACHE_DIR", str(tmp_path / "own"))
    assert precision.cache_file() == tmp_path / "own" / "precision.json"


# 19 (the cached precision) ------------------------------------------------------------------

def test_19_a_cached_bf16_is_ignored_on_a_device_without_native_bf16(monkeypatch, tmp_path):
    """The cache and the run's precision.json say bf16 (timed on another device, or a
    moved home): a device without native bf16 trains in fp32 and times nothing."""
    cache = tmp_path / "cache" / "precision.json"
    monkeypatch.setenv("NMT_CACHE_DIR", str(cache.parent))
    cache.parent.mkdir()
    entry = {"precision": "bf16", "timings": {"fp32": 1.0, "bf16": 0.5}, "probe_s": 1.0}
    cache.write_text(json.dumps({"key": entry}))
    run_file = tmp_path / "precision.json"
    run_file.write_text(json.dumps(entry))
    for native, expected in ((True, ("bf16", "run")), (False, ("fp32", "device"))):
        monkeypatch.setattr(precision.dist, "native_bf16", lambda dev, n=native: n)
        record = _resolve(lambda ps: 1 / 0, run_file)
        assert (record["precision"], record["source"]) == expected
        record = _resolve(lambda ps: 1 / 0)
        assert (record["precision"], record["source"]) == (expected[0], expected[1]
                                                           .replace("run", "cache"))


# 16: duplicate keys -------------------------------------------------------------------------

def _error(tmp_path: Path, text: str, overrides: list[str] = ()) -> str:
    path = tmp_path / "cfg.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(NMTError) as info:
        load_config(path, overrides)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_16_a_key_written_twice_is_refused_with_its_file_and_line(tmp_path):
    """A second `train:` block used to replace the first silently (its lr lost)."""
    message = _error(tmp_path, "model: {family: bahdanau}\ntrain:\n  lr: 0.01\n"
                               "decode: {beam: 2}\ntrain:\n  max_steps: 3\n")
    assert "line 5" in message and "'train' written twice (first on line 2)" in message
    message = _error(tmp_path, "model:\n  family: bahdanau\n  hidden_size: 8\n"
                               "  hidden_size: 16\n")
    assert "line 4" in message and "'hidden_size' written twice" in message
    message = _error(tmp_path, "model: {family: bahdanau, family: luong}\n")
    assert "line 1" in message and "'family'" in message


def test_16_a_merge_key_may_still_be_overridden(tmp_path):
    """`<<: *base` then a key of its own is YAML's way to override, not a duplicate."""
    path = tmp_path / "merged.yaml"
    path.write_text("x: &base {lr: 0.5, warmup: 7}\ntrain:\n  <<: *base\n  lr: 0.25\n")
    assert nmt_config.read_yaml(path)["train"] == {"lr": 0.25, "warmup": 7}


# 16: every number has a range ---------------------------------------------------------------

NUMBERS = [f"{section}.{f.name}" for section, cls in nmt_config.SECTIONS.items()
           for f in dataclasses.fields(cls)
           if typing.get_type_hints(cls)[f.name] in (int, float)]


@pytest.mark.parametrize("key", NUMBERS)
def test_16_every_numeric_field_declares_a_range_its_default_is_in(key):
    rules = nmt_config.field_rules(key)
    assert "check" in rules, f"{key}: no declared range"
    section, name = key.split(".")
    default = getattr(nmt_config.SECTIONS[section](), name)
    assert nmt_fields.CHECKS[rules["check"]](default), f"{key}: default outside its range"


@pytest.mark.parametrize("override", [
    "vocab.character_coverage=-3", "vocab.character_coverage=0.5", "train.plateau_patience=-5",
    "train.plateau_patience=0", "decode.max_len_ratio=.inf", "decode.max_len_ratio=1e30",
    "decode.max_len_ratio=11", "decode.max_len_ratio=0", "decode.max_len_offset=-1",
    "decode.max_len_offset=1001", "train.label_smoothing=1.0", "train.plateau_factor=0",
    "train.plateau_factor=1.5", "train.threads=-1", "train.threads=100000",
    "vocab.sampling_alpha=1.5", "vocab.sampling_nbest=0", "vocab.sampling_nbest=-2",
    "train.seed=18446744073709551616", "decode.length_penalty=.inf", "train.max_minutes=.inf",
    "local.position_guide=.nan", "train.lr=" + "9" * 400,
])
def test_16_a_value_out_of_its_range_is_one_line_naming_the_key(tmp_path, override):
    """The same check whether the value is written in the file or given with --set."""
    key, value = override.split("=")
    section, name = key.split(".")
    message = _error(tmp_path, "model: {family: bahdanau}\n", [override])
    assert f"'{key}'" in message
    text = f"model: {{family: bahdanau}}\n{section}:\n  {name}: {value}\n"
    if section == "model":
        text = f"model: {{family: bahdanau, {name}: {value}}}\n"
    assert f"'{key}'" in _error(tmp_path, text)


def test_16_the_ranges_admit_their_ends():
    cfg = config_from_dict({"model": {"family": "bahdanau"}}, overrides=[
        "decode.max_len_ratio=10", "decode.max_len_offset=1000", "decode.max_len_offset=0",
        "vocab.character_coverage=0.98", "train.plateau_factor=1", "train.threads=1024",
        "vocab.sampling_alpha=1", "train.seed=-5", "vocab.sampling_nbest=3"])
    assert (cfg.decode.max_len_ratio, cfg.decode.max_len_offset) == (10.0, 0)


# 17 -----------------------------------------------------------------------------------------

def test_17_the_trainer_imports_where_there_is_no_resource_module():
    """Windows has no `resource`: the trainer must import, and the peak is unknown there."""
    code = ("import sys; sys.modules['resource'] = None\n"
            "import nmt.training.trainer\n"
            "from nmt.core.memory import peak_rss_mib\n"
            "assert peak_rss_mib() is None\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# The same eyes on the other files read back -------------------------------------------------

def test_review_a_split_cache_that_reads_but_does_not_fit_is_encoded_again(
        data_root, tmp_path, capsys):
    """An encoded-split cache whose arrays load but are not this split's pairs (offsets
    that do not add up, too few sentences, ids past the vocabulary) used to be returned
    as it was: mislabelled data, or an index error deep in training."""
    from nmt.data.store import encode_split
    from nmt.data.subwords import prepare_vocab

    cfg = config_from_dict({"data": {"root": str(data_root), "corpus": "synth",
                                     "pair": "src-tgt"}, "vocab": {"size": 200},
                            "model": {"family": "bahdanau"}})
    vocab_dir = Path(shutil.copytree(prepare_vocab(cfg), tmp_path / "spm"))
    src, tgt = ([np.array(ids) for ids in side]  # copies: the test rewrites the files
                for side in encode_split(cfg, vocab_dir, cfg.data.valid))
    (store,) = vocab_dir.glob(f"{cfg.data.valid}.*")
    good = {p.stem: np.load(p) for p in store.glob("*.npy")}
    bad_offsets = {**good, "src_off": good["src_off"][::-1].copy()}
    too_few = {**good, "tgt_off": good["tgt_off"][:-1]}
    past_vocab = {**good, "src": good["src"].astype(np.int32) + 10_000}
    floats = {**good, "tgt": good["tgt"].astype(np.float32)}
    for arrays in (bad_offsets, too_few, past_vocab, floats):
        for name, array in arrays.items():
            np.save(store / f"{name}.npy", array)
        capsys.readouterr()
        again = encode_split(cfg, vocab_dir, cfg.data.valid)
        assert "encoding val again" in capsys.readouterr().err
        assert len(again[0]) == len(src) and all(
            (a == b).all() for a, b in zip([*again[0], *again[1]], [*src, *tgt]))


@pytest.mark.parametrize("text", ["[]", "null", '{"test": 5}'])
def test_review_scores_json_of_another_shape_is_one_line(tmp_path, text):
    from nmt.core.rundir import RunDir

    run = RunDir(tmp_path)
    run.scores.write_text(text)
    with pytest.raises(NMTError, match="scores.json: unreadable"):
        run.read_scores()
    with pytest.raises(NMTError, match="scores.json: unreadable"):
        run.write_scores("test", {"bleu": 1.0})
    assert run.scores.read_text() == text  # nothing overwritten


def test_review_a_metrics_line_cut_by_a_crash_is_left_out_and_named(tmp_path, capsys):
    from nmt.core.rundir import RunDir

    run = RunDir(tmp_path)
    run.metrics.write_text('{"kind": "train", "step": 1}\n7\n{"kind": "train", "st')
    assert run.read_metrics() == [{"kind": "train", "step": 1}]
    assert "metrics.jsonl: lines 2, 3 not a JSON record" in capsys.readouterr().err


@pytest.mark.parametrize("weights", ["x", {"w": [1, 2]}, None])
def test_review_a_checkpoint_with_its_marker_but_no_weights_is_one_line(tmp_path, weights):
    from nmt.core.checkpoint import FORMAT, load_checkpoint

    path = tmp_path / "best.pt"
    payload = {"format": FORMAT, "progress": {"step": 1}}
    torch.save(payload if weights is None else {**payload, "model": weights}, path)
    with pytest.raises(NMTError, match="best.pt: damaged nmt checkpoint"):
        load_checkpoint(path)
