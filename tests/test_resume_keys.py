"""What `nmt train --resume` may change (issue 74, item 3 and defect 2): every config field
declares, once, whether a change to it changes what the run reads or how (`fixed`: refused
in one line naming each key, old and new) or not (`free`); the declaration drives
`check_resumable`, the generated reference and docs/configuration.md."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import typing
from pathlib import Path

import pytest
import yaml

from nmt.core.checkpoint import RESUME_KEYS, check_resumable, load_checkpoint
from nmt.core.config import Config, config_to_dict, leaf_fields
from nmt.core.errors import NMTError
from nmt.core.fields import FIXED, FREE, fixed, free, positive
from nmt.data.corpora import SYNTH_PAIR
from nmt.data.synth import write_synth
from tests.test_cli import run_cli

ROOT = Path(__file__).resolve().parents[1]


def undeclared(cls: type, prefix: str = "") -> list[str]:
    """Every leaf field of `cls` (sections walked) that declares neither `fixed` nor
    `free`, by its dotted key."""
    hints, missing = typing.get_type_hints(cls), []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            missing += undeclared(hints[f.name], f"{prefix}{f.name}.")
        elif f.metadata.get("resume") not in (FIXED, FREE):
            missing.append(f"{prefix}{f.name}")
    return missing


def test_every_config_field_declares_whether_a_resume_may_change_it():
    assert undeclared(Config) == [], ("declare these fields fixed(...) or free(...) in "
                                      "nmt/core/config.py (nmt.core.fields)")
    declared = {key: f.metadata["resume"] for key, f in leaf_fields()}
    assert set(RESUME_KEYS) == {k for k, kind in declared.items() if kind == FIXED}
    assert {"data.valid", "data.test", "data.pair", "data.corpus", "vocab.sampling_nbest",
            "model.hidden_size", "train.seed", "train.batch_tokens",
            "guided.teacher"} <= set(RESUME_KEYS)
    assert {"train.max_steps", "train.log_every", "train.threads", "data.root", "name",
            "runs_dir", "decode.beam"}.isdisjoint(RESUME_KEYS)


@dataclasses.dataclass(frozen=True)
class _Section:
    kept: int = fixed(positive(1))
    changed: str = free("x")
    forgotten: int = positive(2)  # a limit, but no resume declaration
    plain: bool = True


@dataclasses.dataclass(frozen=True)
class _Top:
    name: str = free("")
    section: _Section = dataclasses.field(default_factory=_Section)


def test_the_walk_finds_a_new_field_that_declares_nothing():
    assert undeclared(_Top) == ["section.forgotten", "section.plain"]
    limits = {f.name: dict(f.metadata) for f in dataclasses.fields(_Section)}
    assert limits["kept"] == {"check": "positive", "resume": FIXED}  # the limit is kept
    assert _Section().kept == 1 and _Section().changed == "x"


def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    return f"{value}-other"


def _with(raw: dict, key: str, value) -> dict:
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    node = out
    *sections, name = key.split(".")
    for part in sections:
        node = node[part]
    node[name] = value
    return out


SAVED = config_to_dict(Config())
LEAVES = dict(leaf_fields())


@pytest.mark.parametrize("key", sorted(RESUME_KEYS))
def test_a_change_to_a_fixed_key_is_refused_naming_its_old_and_new_value(key):
    old = LEAVES[key].default
    new = _changed(old)
    with pytest.raises(NMTError) as caught:
        check_resumable({"config": SAVED}, _with(SAVED, key, new), Path("last.pt"))
    message = str(caught.value)
    assert f"{key} was {old!r}, now {new!r}" in message and "\n" not in message
    assert message.startswith("last.pt: ") and "start another run" in message


@pytest.mark.parametrize("key", sorted(k for k in LEAVES if k not in RESUME_KEYS))
def test_a_change_to_a_free_key_is_accepted(key):
    check_resumable({"config": SAVED}, _with(SAVED, key, _changed(LEAVES[key].default)),
                    Path("last.pt"))


def test_every_changed_fixed_key_is_named_in_one_line_and_older_configs_compare_by_default():
    now = _with(_with(SAVED, "data.valid", "test"), "data.pair", "tgt-src")
    with pytest.raises(NMTError, match=r"data\.pair was 'src-tgt', now 'tgt-src'; "
                                       r"data\.valid was 'val', now 'test'; resume without"):
        check_resumable({"config": SAVED}, now, Path("last.pt"))
    older = {k: v for k, v in SAVED.items() if k != "local"}  # saved before `local:` existed
    older["model"] = {**SAVED["model"], "window_start": 3}  # where the key lived then
    check_resumable({"config": older}, _with(SAVED, "local.window_start", 3), Path("x"))
    with pytest.raises(NMTError, match=r"local\.window_steps was 0, now 5"):
        check_resumable({"config": older}, _with(SAVED, "local.window_steps", 5), Path("x"))
    check_resumable({}, now, Path("x"))  # a checkpoint without its config: nothing to compare


def test_the_configuration_page_names_what_a_resume_refuses_as_declared():
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = page.split("## What a resume may change\n", 1)[1].split("\n## ", 1)[0]
    paragraphs = {p.split(":", 1)[0]: p for p in section.split("\n\n")
                  if p.startswith(("Refused:", "Free:"))}
    named = {kind: re.findall(r"`((?:[a-z_]+\.)?(?:[a-z_]+|\*))`", text)
             for kind, text in paragraphs.items()}

    def expand(names: list[str]) -> set[str]:
        keys = set()
        for name in names:
            if name.endswith(".*"):
                keys |= {k for k in LEAVES if k.startswith(name[:-1])}
            elif name in LEAVES:
                keys.add(name)
        return keys

    refused, free_keys = expand(named["Refused"]), expand(named["Free"])
    exact_free = {n for n in named["Free"] if n in LEAVES}
    assert refused - exact_free == set(RESUME_KEYS), "the page's Refused paragraph drifted"
    assert free_keys.isdisjoint(RESUME_KEYS), "the page's Free paragraph names a fixed key"


# ------------------------------------------------------- defect 2: a resume from the CLI


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A 2-step run of a small synthetic corpus (with subword sampling on)."""
    base = tmp_path_factory.mktemp("resume")
    write_synth(base / "data" / "synth" / SYNTH_PAIR, seed=3,
                sizes={"train": 400, "val": 20, "test": 20})
    raw = {"name": "run", "runs_dir": str(base / "runs"),
           "data": {"root": str(base / "data"), "corpus": "synth", "pair": SYNTH_PAIR,
                    "max_len": 40},
           "vocab": {"size": 300, "sampling_alpha": 0.1},
           "model": {"family": "bahdanau", "emb_size": 16, "hidden_size": 16, "dropout": 0.0},
           "train": {"batch_tokens": 600, "max_steps": 2, "valid_every": 2, "log_every": 1,
                     "valid_sentences": 10, "align_sentences": 0, "threads": 1,
                     "precision": "fp32"},
           "decode": {"beam": 1}}
    config = base / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    from nmt.models.checks import load_config
    from nmt.training.trainer import train

    train(load_config(config), quiet=True)
    return base


def _copy(trained: Path, tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "run"
    shutil.copytree(trained / "runs" / "run", run)
    return run


def _files(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("change, says", [
    ("data.valid=test", "data.valid was 'val', now 'test'"),  # would pick best.pt on test
    ("data.pair=tgt-src", "data.pair was 'src-tgt', now 'tgt-src'"),  # rewrote config.yaml
    ("data.valid=dev", "data.valid was 'val', now 'dev'"),  # a split never pinned: KeyError
    ("vocab.sampling_nbest=4", "vocab.sampling_nbest was -1, now 4"),  # redrew the epoch
    ("model.hidden_size=24", "model.hidden_size was 16, now 24"),  # one mechanism for shapes
])
def test_a_resume_that_changes_what_the_run_reads_is_one_line_and_changes_nothing(
        trained, tmp_path, capsys, change, says):
    run = _copy(trained, tmp_path)
    before = _files(run)
    code, _, err = run_cli(capsys, "train", "--config", run / "config.yaml", "--resume",
                           "--set", "train.max_steps=4", "--set", change, "--no-evaluate")
    errors = [line for line in err.splitlines() if line.startswith("nmt: error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert says in errors[0] and str(run / "checkpoints" / "last.pt") in errors[0], errors
    assert _files(run) == before  # config.yaml, checkpoints, metrics: all as they were


def test_a_resume_that_changes_only_free_keys_continues(trained, tmp_path, capsys):
    """More steps, other logging, and a data root that moved: a pinned run reads its own
    copy of the corpus, so the moved folder is the same corpus."""
    run = _copy(trained, tmp_path)
    moved = tmp_path / "moved-data"
    shutil.copytree(trained / "data", moved)
    code, _, err = run_cli(capsys, "train", "--config", run / "config.yaml", "--resume",
                           "--set", "train.max_steps=4", "--set", "train.log_every=2",
                           "--set", f"data.root={moved}", "--set", "train.threads=2",
                           "--no-evaluate")
    assert code == 0, err
    assert load_checkpoint(run / "checkpoints" / "last.pt")["progress"]["step"] == 4
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["data"]["root"] == str(moved) and saved["train"]["max_steps"] == 4
