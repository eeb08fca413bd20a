"""A config checked against its rules: each field's declared limits (including the names
the registries define: model families, attention scores, symmetrisation heuristics) and the
checks that involve several keys; one line naming the key and what to change.
`config_from_dict` and `load_config` build a `Config` and check it here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nmt.core.config import (
    SECTIONS,
    Config,
    DataConfig,
    ModelConfig,
    build_config,
    field_rules,
    read_yaml,
)
from nmt.core.errors import NMTError
from nmt.core.fields import CHECKS
from nmt.data.symmetrize import HEURISTICS
from nmt.models import MODELS
from nmt.models.attention import SCORERS

# The registries a `registered` config field names: each list of names has one home.
REGISTRIES = {"models": MODELS, "scores": SCORERS, "heuristics": HEURISTICS}


def choices(key: str) -> tuple[str, ...] | None:
    """The valid values of a `section.name` key, or None when it takes any value."""
    rules = field_rules(key)
    if "registry" in rules:
        return tuple(REGISTRIES[rules["registry"]])
    return rules.get("choices")


def config_from_dict(raw: dict, where: str = "config", overrides: list[str] = ()) -> Config:
    """Build a raw mapping (plus `--set` overrides) into a `Config` and check it."""
    cfg = build_config(raw, where, overrides)
    if not cfg.model.family:
        raise NMTError(f"{where}: missing required key 'model.family'; "
                       f"choose one of: {', '.join(MODELS)}")
    validate(cfg, where)
    return cfg


def load_config(path: Path | str, overrides: list[str] = ()) -> Config:
    """Load and validate a YAML config. The run name defaults to the file's stem, with the
    corpus and the pair appended when they are not the file's own (`--set data.pair=en-de`
    on bahdanau.yaml trains runs/bahdanau_en-de, `--set data.corpus=mine` runs/bahdanau_mine),
    so neither two directions nor two corpora share a run."""
    path = Path(path)
    raw = read_yaml(path) or {}
    if not isinstance(raw, dict):
        raise NMTError(f"{path}: a config must be a YAML mapping of sections")
    data = raw.get("data")
    own = {"corpus": DataConfig.corpus, "pair": DataConfig.pair,
           **(data if isinstance(data, dict) else {})}
    cfg = config_from_dict({"name": path.stem, **raw}, str(path), overrides)
    changed = [getattr(cfg.data, k) for k in ("corpus", "pair") if getattr(cfg.data, k) != own[k]]
    if "name" not in raw and cfg.name == path.stem and changed:
        cfg = dataclasses.replace(cfg, name="_".join([path.stem, *changed]))
    name = Path(cfg.name)
    if not name.parts or name.is_absolute() or ".." in name.parts:
        raise NMTError(f"{path}: 'name' must be a run folder under runs_dir, e.g. 'bahdanau', "
                       f"got {cfg.name!r}")
    return cfg


def own_run(cfg: Config, path: Path | str, overrides: list[str] = ()) -> Config:
    """`cfg` of `path`, set to resume the run folder `path` sits in when it is a run's own
    config.yaml (beside its checkpoints/): the `runs_dir` and `name` written inside are
    where the run first trained, and a copy or a moved run must go on in its own folder.
    An explicit `--set runs_dir=...` or `--set name=...` wins."""
    home = Path(path).resolve().parent
    if (Path(path).name != "config.yaml" or not (home / "checkpoints").is_dir()
            or any(o.split("=", 1)[0].strip() in ("name", "runs_dir") for o in overrides)):
        return cfg
    return in_folder(cfg, home)


def in_folder(cfg: Config, folder: Path | str) -> Config:
    """`cfg` with `runs_dir` and `name` naming `folder` when they name another: the config
    of a run read from its folder, wherever the run was copied or moved, so that what reads
    the run's files (its pin: `nmt.data.pin.corpus_of(cfg)`) reads that folder's."""
    folder = Path(folder)
    if cfg.run_dir.resolve() == folder.resolve():
        return cfg
    return dataclasses.replace(cfg, runs_dir=str(folder.parent), name=folder.name)


def validate(cfg: Config, where: str) -> None:
    """Every field's own limits, then the checks that involve several keys."""
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            key, value = f"{section}.{f.name}", getattr(getattr(cfg, section), f.name)
            valid = choices(key)
            if valid is not None and value not in valid:
                raise NMTError(f"{where}: '{key}' is {value!r}; choose one of: {', '.join(valid)}")
            check = f.metadata.get("check")
            if check and not CHECKS[check](value):
                raise NMTError(f"{where}: '{key}' must be {check}, got {value!r}")
    v = cfg.vocab
    if v.size <= 4:  # SentencePiece then fails in its own words
        raise NMTError(f"{where}: 'vocab.size' must exceed the 4 special pieces (padding, "
                       f"unknown, start, end), got {v.size}")
    if not 0.0 <= v.sampling_alpha <= 1.0 or v.sampling_nbest == 0 or v.sampling_nbest < -1:
        raise NMTError(f"{where}: 'vocab.sampling_alpha' must be in [0, 1] (0 = off) and "
                       f"'vocab.sampling_nbest' -1 (all) or at least 1, got "
                       f"{v.sampling_alpha!r} and {v.sampling_nbest!r}")
    parts = cfg.data.pair.split("-")
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise NMTError(f"{where}: 'data.pair' must look like 'de-en', got {cfg.data.pair!r}")
    if cfg.data.train in (cfg.data.valid, cfg.data.test):
        key = "data.valid" if cfg.data.valid == cfg.data.train else "data.test"
        raise NMTError(f"{where}: '{key}' names the training split ({cfg.data.train!r}); "
                       "scores are of held-out pairs: name another split (nmt data show "
                       "lists them)")
    if cfg.model.family == "transformer" and cfg.model.emb_size % cfg.model.heads:
        raise NMTError(f"{where}: 'model.emb_size' ({cfg.model.emb_size}) must be divisible "
                       f"by 'model.heads' ({cfg.model.heads})")
    if cfg.train.schedule == "linear" and not (cfg.train.max_steps or cfg.train.max_minutes):
        raise NMTError(f"{where}: 'train.schedule' linear decays to zero at the end of the budget; "
                       "set 'train.max_steps' or 'train.max_minutes'")
    if cfg.model.family == "luong":
        _validate_luong(cfg.model, where)
    _validate_local(cfg, where)
    if cfg.guided.weight:
        _validate_guided(cfg, where)


def _validate_guided(cfg: Config, where: str) -> None:
    """Guided alignment needs attention, and pairs whose pieces the teacher's links map."""
    g, m = cfg.guided, cfg.model
    if m.family == "fixed_context":
        raise NMTError(f"{where}: 'guided.weight' supervises attention, which fixed_context "
                       "does not have: set guided.weight: 0 or another model.family")
    if cfg.data.concat > 1 or cfg.vocab.sampling_alpha:
        raise NMTError(f"{where}: 'guided.weight' maps each pair's word links onto its best "
                       "segmentation: set data.concat: 1 and vocab.sampling_alpha: 0")
    if m.family == "transformer" and not (-m.dec_layers <= g.layer < m.dec_layers):
        raise NMTError(f"{where}: 'guided.layer' {g.layer} is not one of the "
                       f"{m.dec_layers} decoder layers (0..{m.dec_layers - 1}, or negative "
                       "from the top)")
    if g.full_context and m.family != "transformer":
        raise NMTError(f"{where}: 'guided.full_context' reads a decoder without its causal "
                       f"mask, which only the transformer has ({m.family} is recurrent): "
                       "set guided.full_context: false")
    if m.family == "transformer" and g.heads > m.heads:
        raise NMTError(f"{where}: 'guided.heads' {g.heads} is more than 'model.heads' "
                       f"({m.heads})")


def _validate_local(cfg: Config, where: str) -> None:
    """The `local` section's aids need the attention they aid."""
    m, aids = cfg.model, cfg.local
    local = m.family == "luong" and m.attention != "global"
    if aids.window_start and not local:
        raise NMTError(f"{where}: 'local.window_start' widens Luong's local window, but the "
                       "model has none: set model.family: luong with attention local-m or "
                       "local-p, or window_start: 0")
    if aids.window_start and (aids.window_start <= m.window or not aids.window_steps):
        raise NMTError(f"{where}: 'local.window_start' ({aids.window_start}) is the half-width "
                       f"the window shrinks from: make it larger than 'model.window' "
                       f"({m.window}) and set 'local.window_steps' > 0, or set window_start: 0 "
                       "(the paper)")
    for key in ("position_limit", "position_guide", "position_hold"):
        if getattr(aids, key) and not (local and m.attention == "local-p"):
            raise NMTError(f"{where}: 'local.{key}' acts on local-p's predicted position, but "
                           f"'model.attention' is {m.attention if m.family == 'luong' else 'none'}"
                           f" ({m.family}): set model.attention: local-p or {key}: 0")


def _validate_luong(m: ModelConfig, where: str) -> None:
    """The paper's settings need matching sizes; say which key to change when they do not."""
    if m.score == "dot" and m.memory == "states" and m.bidirectional:
        raise NMTError(f"{where}: 'model.score' dot compares h_t with the encoder's states, which "
                       "are 2H wide with 'model.bidirectional' true: set bidirectional: false "
                       "(the paper's encoder) or memory: projected (a learned map: dot then has "
                       "the same function class as general)")
    if m.position_prior != "none" and m.attention != "local-p":
        raise NMTError(f"{where}: 'model.position_prior' shifts local-p's predicted position, "
                       f"but 'model.attention' is {m.attention}: set attention: local-p or "
                       "position_prior: none")
    if m.decoder_init == "copy" and m.enc_layers != m.dec_layers:
        raise NMTError(f"{where}: 'model.decoder_init' copy needs 'model.enc_layers' "
                       f"({m.enc_layers}) == 'model.dec_layers' ({m.dec_layers}); "
                       "set them equal or use decoder_init: bridge")
