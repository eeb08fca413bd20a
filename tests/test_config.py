"""Tests for the typed, validated configuration (nmt/core/config.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from nmt.core.config import Config, ModelConfig, save_config
from nmt.core.errors import NMTError
from nmt.data.sources import PRESETS
from nmt.models import MODELS
from nmt.models.attention import SCORERS
from nmt.models.checks import choices, config_from_dict, load_config

FAMILIES, SCORES = tuple(MODELS), tuple(SCORERS)
ATTENTION_KINDS = ("global", "local-m", "local-p")

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "configs").rglob("*.yaml"))

VALID = """\
name: demo
data: {corpus: multi30k, pair: de-en, test: test_2016_flickr, max_len: 80}
vocab: {model_type: bpe, size: 4000, joint: false}
model:
  family: luong
  emb_size: 128
  hidden_size: 96
  attention: local-p
  score: general
  window: 5
train:
  lr: 0.002
  schedule: plateau
  max_minutes: 20
decode: {beam: 4}
"""


def _write(tmp_path: Path, text: str, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _load(tmp_path: Path, text: str, overrides: list[str] = ()) -> Config:
    return load_config(_write(tmp_path, text), overrides)


def _error(tmp_path: Path, text: str, overrides: list[str] = ()) -> str:
    with pytest.raises(NMTError) as info:
        _load(tmp_path, text, overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_valid_yaml_loads_with_types_and_defaults(tmp_path):
    cfg = _load(tmp_path, VALID)
    assert cfg.name == "demo"
    assert (cfg.data.corpus, cfg.data.pair, cfg.data.test, cfg.data.max_len) == (
        "multi30k", "de-en", "test_2016_flickr", 80)
    assert (cfg.src_lang, cfg.tgt_lang) == ("de", "en")
    assert (cfg.vocab.model_type, cfg.vocab.size, cfg.vocab.joint) == ("bpe", 4000, False)
    assert cfg.model.family == "luong" and cfg.model.attention == "local-p"
    assert cfg.model.hidden_size == 96 and cfg.model.window == 5
    assert cfg.train.lr == 0.002 and cfg.train.schedule == "plateau"
    assert isinstance(cfg.train.max_minutes, float) and cfg.train.max_minutes == 20.0
    assert cfg.decode.beam == 4
    assert cfg.model.dropout == ModelConfig.dropout  # untouched keys keep their defaults
    assert cfg.run_dir == Path("runs") / "demo"


def test_run_name_defaults_to_file_stem(tmp_path):
    cfg = load_config(_write(tmp_path, "model: {family: bahdanau}\n", "my_run.yaml"))
    assert cfg.name == "my_run"
    assert cfg.run_dir == Path("runs") / "my_run"


def test_exponent_floats_are_floats(tmp_path):
    # PyYAML's YAML 1.1 rules read `5e-4` as a string; a config must not reject it.
    cfg = _load(tmp_path, "model: {family: bahdanau}\ntrain: {lr: 5e-4, weight_decay: 1E-5}\n")
    assert cfg.train.lr == pytest.approx(5e-4) and cfg.train.weight_decay == pytest.approx(1e-5)
    cfg = _load(tmp_path, "model: {family: bahdanau}\n", ["train.lr=3e-4"])
    assert cfg.train.lr == pytest.approx(3e-4)


def test_unknown_key_names_it_and_lists_valid_keys(tmp_path):
    message = _error(tmp_path, "model: {family: bahdanau}\nmodle: {}\n")
    assert "cfg.yaml" in message and "'modle'" in message
    for key in ("data", "vocab", "model", "train", "decode"):
        assert key in message


def test_nested_unknown_key_names_the_full_path(tmp_path):
    message = _error(tmp_path, "model: {family: bahdanau, hiden_size: 128}\n")
    assert "'model.hiden_size'" in message
    assert "hidden_size" in message and "emb_size" in message


@pytest.mark.parametrize("text, key", [
    ("model: {family: bahdanau, hidden_size: '128'}", "model.hidden_size"),
    ("model: {family: bahdanau, hidden_size: 12.5}", "model.hidden_size"),
    ("model: {family: bahdanau, bidirectional: 1}", "model.bidirectional"),
    ("model: {family: bahdanau}\nvocab: {joint: 'yes please'}", "vocab.joint"),
    ("model: {family: bahdanau}\ntrain: {lr: fast}", "train.lr"),
    ("model: {family: bahdanau}\ntrain: {max_steps: true}", "train.max_steps"),
    ("model: {family: 3}", "model.family"),
    ("model: [bahdanau]", "model"),
])
def test_wrong_type_names_the_key(tmp_path, text, key):
    message = _error(tmp_path, text + "\n")
    assert f"'{key}'" in message and "must be" in message


def test_missing_family_names_it_and_lists_choices(tmp_path):
    for text in ("model: {hidden_size: 64}\n", "data: {corpus: synth}\n", ""):
        message = _error(tmp_path, text)
        assert "model.family" in message
        assert all(family in message for family in FAMILIES)


@pytest.mark.parametrize("key, value, choices", [
    ("family", "lstm_attention", FAMILIES),
    ("score", "cosine", SCORES),
    ("attention", "local", ATTENTION_KINDS),
    ("rnn_type", "rnn", ("gru", "lstm")),
])
def test_invalid_choice_lists_the_options(tmp_path, key, value, choices):
    if key == "family":
        text = f"model: {{family: {value}}}\n"
    else:
        text = f"model: {{family: luong, {key}: {value}}}\n"
    message = _error(tmp_path, text)
    assert f"model.{key}" in message and repr(value) in message
    assert all(choice in message for choice in choices)


@pytest.mark.parametrize("override", [
    "model.hidden_size=0", "model.emb_size=-8", "model.heads=0", "vocab.size=0",
    "train.batch_tokens=-1", "decode.beam=0", "data.max_len=0", "train.warmup=-1",
    "train.lr=0", "train.lr=-0.001", "train.max_minutes=-5", "train.clip=.nan",
])
def test_non_positive_sizes_are_rejected(tmp_path, override):
    key = override.split("=")[0]
    message = _error(tmp_path, "model: {family: transformer}\n", [override])
    assert f"'{key}'" in message and "positive" in message


def test_other_value_checks(tmp_path):
    assert "model.dropout" in _error(tmp_path, "model: {family: luong, dropout: 1.0}\n")
    assert "data.pair" in _error(tmp_path, "model: {family: luong}\ndata: {pair: de-de}\n")
    assert "data.pair" in _error(tmp_path, "model: {family: luong}\ndata: {pair: deen}\n")
    message = _error(tmp_path, "model: {family: transformer, emb_size: 100, heads: 3}\n")
    assert "emb_size" in message and "heads" in message
    assert "'vocab.size' must exceed the 4 special pieces" in _error(
        tmp_path, "model: {family: luong}\nvocab: {size: 3}\n")
    for key in ("valid", "test"):  # scores of training pairs would be no scores
        message = _error(tmp_path, f"model: {{family: luong}}\ndata: {{{key}: train}}\n")
        assert f"'data.{key}' names the training split ('train')" in message, message


def test_set_overrides_parse_values_and_nest(tmp_path):
    cfg = _load(tmp_path, VALID, ["model.hidden_size=128", "vocab.joint=true",
                                  "train.max_minutes=3", "data.pair=en-de", "name=other"])
    assert cfg.model.hidden_size == 128 and isinstance(cfg.model.hidden_size, int)
    assert cfg.vocab.joint is True
    assert cfg.train.max_minutes == 3.0 and isinstance(cfg.train.max_minutes, float)
    assert cfg.data.pair == "en-de" and cfg.data.corpus == "multi30k"  # siblings kept
    assert cfg.name == "other"
    # a section absent from the file, and a section left empty (`train:` is None)
    cfg = _load(tmp_path, "model: {family: bahdanau}\ntrain:\n", ["train.lr=0.5", "decode.beam=2"])
    assert cfg.train.lr == 0.5 and cfg.decode.beam == 2


def test_set_overrides_are_validated(tmp_path):
    message = _error(tmp_path, VALID, ["model.hiden_size=128"])
    assert "'model.hiden_size'" in message and "hidden_size" in message
    assert "'mdl'" in _error(tmp_path, VALID, ["mdl.hidden_size=1"])
    assert "'model.hidden_size'" in _error(tmp_path, VALID, ["model.hidden_size=big"])
    assert "KEY=VALUE" in _error(tmp_path, VALID, ["model.hidden_size"])
    assert "not a section" in _error(tmp_path, VALID, ["model.family.x=1"])
    assert "model.family" in _error(tmp_path, VALID, ["model.family=gpt"])


def test_config_from_dict_leaves_its_input_alone():
    raw = {"model": {"family": "luong"}, "train": {"lr": 0.01}}
    cfg = config_from_dict(raw, overrides=["model.hidden_size=32", "train.lr=0.5"])
    assert cfg.model.hidden_size == 32 and cfg.train.lr == 0.5
    assert raw == {"model": {"family": "luong"}, "train": {"lr": 0.01}}


def test_invalid_yaml_names_the_file(tmp_path):
    message = _error(tmp_path, "model:\n  family: bahdanau\n  hidden_size: [1, 2\n")
    assert str(tmp_path / "cfg.yaml") in message and "invalid YAML" in message
    message = _error(tmp_path, "- just\n- a list\n")
    assert "cfg.yaml" in message and "mapping" in message


def test_missing_config_file_names_it(tmp_path):
    with pytest.raises(NMTError, match="nope.yaml: config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_save_then_load_round_trip(tmp_path):
    cfg = _load(tmp_path, VALID, ["train.lr=1e-5", "train.max_minutes=0.25"])
    saved = tmp_path / "resolved.yaml"
    save_config(cfg, saved)
    again = load_config(saved)
    assert again == cfg
    assert dataclasses.asdict(again) == dataclasses.asdict(cfg)
    # the saved name wins over the file stem
    assert again.name == "demo"


def test_configs_are_found_by_purpose():
    """configs/: one folder per purpose, one file per family there, a README, 25 files."""
    assert {p.parent.name for p in CONFIGS} == {"demo", "synth", "multi30k", "hansards"}
    assert (REPO / "configs" / "README.md").is_file()
    assert len([p for p in (REPO / "configs").rglob("*") if p.is_file()]) <= 25
    for path in CONFIGS:
        assert path.read_text().startswith("# "), f"{path}: a header says what it is for"


def test_the_default_run_name_gets_the_pair_when_the_pair_is_not_the_files(tmp_path):
    """`--set data.pair=en-de` on bahdanau.yaml (de-en) trains runs/bahdanau_en-de, so the
    two directions never share a run; the file's own pair, or an explicit name, keeps it."""
    path = REPO / "configs" / "multi30k" / "bahdanau.yaml"
    assert load_config(path).name == "bahdanau"
    assert load_config(path, ["data.pair=de-en"]).name == "bahdanau"
    assert load_config(path, ["data.pair=en-de"]).name == "bahdanau_en-de"
    assert load_config(path, ["data.pair=en-de"]).run_dir == Path("runs/bahdanau_en-de")
    assert load_config(path, ["data.pair=en-de", "name=mine"]).name == "mine"
    named = tmp_path / "named.yaml"
    named.write_text("name: fixed\ndata: {pair: de-en}\nmodel: {family: bahdanau}\n")
    assert load_config(named, ["data.pair=en-de"]).name == "fixed"
    bare = tmp_path / "bare.yaml"  # no data section: the default pair is the file's own
    bare.write_text("model: {family: bahdanau}\n")
    assert load_config(bare).name == "bare"
    assert load_config(bare, ["data.pair=tgt-src"]).name == "bare_tgt-src"


def test_a_run_saved_before_the_local_section_still_loads(tmp_path):
    """Runs trained before 2026-12-01 saved model.window_start ... and the removed
    model.position_lr / renormalise_steps: rundir.load_config reads them in today's keys."""
    from nmt.models.runs import load_config as load_run_config

    old = {"name": "old", "model": {"family": "luong", "attention": "local-p", "window": 10,
                                    "window_start": 60, "window_steps": 1500,
                                    "position_limit": 3.0, "position_guide": 1.0,
                                    "position_lr": 1.0, "renormalise_steps": 0}}
    run = tmp_path / "old"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(old))
    cfg = load_run_config(run)
    assert (cfg.local.window_start, cfg.local.window_steps, cfg.local.position_limit,
            cfg.local.position_guide) == (60, 1500, 3.0, 1.0)
    with pytest.raises(NMTError, match="'model.window_start' is now 'local.window_start'"):
        config_from_dict(old)  # a user's config is told, not silently migrated


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO / "configs")))
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert cfg.name == path.stem
    assert cfg.run_dir.parent == Path(cfg.runs_dir)
    assert cfg.model.family in FAMILIES
    assert cfg.data.corpus in {"synth", *PRESETS}


def test_choices_come_from_the_registries_and_the_fields():
    assert choices("model.family") == tuple(MODELS)  # one list of names: the registry
    assert choices("model.score") == tuple(SCORERS)
    assert choices("model.attention") == ATTENTION_KINDS
    assert choices("model.emb_size") is None
