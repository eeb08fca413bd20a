"""Typed, validated configuration: YAML in, frozen dataclasses out.

Unknown keys, keys written twice, wrong types, values out of a field's range and
missing required keys fail with one line that names the key (and the file and line)
and the valid options. `--set a.b=value` overrides use the same validation. The
resolved config is saved with every run. Every field declares its limits and whether a
`--resume` may change it (`fixed` or `free`: nmt.core.fields; `leaf_fields` lists them).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nmt.core.errors import NMTError, one_line
from nmt.core.fields import (
    INT_LIMIT,
    Loader,
    all_or_count,
    between,
    fixed,
    fraction,
    free,
    integer,
    non_negative,
    one_of,
    positive,
    registered,
)
from nmt.core.rundir import replace_text


def leaf_fields(cls: type | None = None, prefix: str = "") -> list[tuple[str, dataclasses.Field]]:
    """Every key of the config that holds a value (`name`, `data.valid`, ...) with its
    field, the sections walked: what `--resume` checks (`fixed`, `free`) and the docs list."""
    cls = cls or Config
    hints, found = typing.get_type_hints(cls), []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            found += leaf_fields(hints[f.name], f"{prefix}{f.name}.")
        else:
            found.append((f"{prefix}{f.name}", f))
    return found


def field_rules(key: str) -> dict:
    """The declared limits of a `section.name` key (`check`, `choices` or `registry`)."""
    section, name = key.split(".")
    return dict({f.name: f.metadata for f in dataclasses.fields(SECTIONS[section])}[name])


@dataclass(frozen=True)
class DataConfig:
    corpus: str = fixed("synth")  # corpus name: a folder under `root`
    pair: str = fixed("src-tgt")  # "<source>-<target>" language codes
    root: str = free("data")  # where `nmt data` writes corpora
    train: str = fixed("train")  # split names (files `{split}.{lang}`)
    valid: str = fixed("val")
    test: str = fixed("test")
    max_len: int = fixed(positive(100))  # training pairs longer than this (subwords) are dropped
    # training examples join runs of 1..concat shuffled pairs (sizes uniform, seeded; Kondo et
    # al. 2021) after max_len filters the pairs one by one. 1: the pairs as they are
    concat: int = fixed(positive(1))


@dataclass(frozen=True)
class VocabConfig:
    model_type: str = fixed(one_of("unigram", "bpe"))  # SentencePiece model: unigram | bpe
    size: int = fixed(positive(8000))  # vocabulary size (per side when not joint)
    joint: bool = fixed(True)  # one vocabulary for source and target
    character_coverage: float = fixed(between(1.0, 0.98, 1.0))  # SentencePiece character coverage:
    #   the share of the text's characters given pieces, the rarest rest UNK (its range)
    # SentencePiece normalisation. identity: hypotheses in the references' own NFC form;
    # nmt_nfkc (SentencePiece's default) emits "..." for "…". Also nfkc, *_cf (case-folded)
    normalization: str = fixed(one_of("identity", "nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf"))
    # subword regularisation (Kudo 2018): each epoch re-samples the training segmentation into
    # the run's `sampled/` store (a resumed run continues on it; SentencePiece's draws are not
    # repeatable from one process to another), the rest keeps the best. alpha: smoothing
    # (bpe: dropout), 0 = off
    sampling_alpha: float = fixed(between(0.0, 0, 1))
    sampling_nbest: int = fixed(all_or_count(-1))  # sample among the n best segmentations (-1 = all; unigram)


@dataclass(frozen=True)
class ModelConfig:
    family: str = fixed(registered("", "models"))  # fixed_context | bahdanau | luong | transformer (required)
    emb_size: int = fixed(positive(256))  # embedding size (transformer: d_model)
    hidden_size: int = fixed(positive(256))  # RNN hidden size per direction (transformer: unused)
    enc_layers: int = fixed(positive(1))  # encoder layers
    dec_layers: int = fixed(positive(1))  # decoder layers
    rnn_type: str = fixed(one_of("gru", "lstm"))  # gru | lstm (RNN families)
    bidirectional: bool = fixed(True)  # bidirectional encoder (RNN families)
    score: str = fixed(registered("general", "scores"))  # attention score: dot | general | concat | additive
    attention: str = fixed(one_of("global", "local-m", "local-p"))  # luong: global | local-m | local-p
    window: int = fixed(positive(10))  # luong local: half-width D of the window
    input_feeding: bool = fixed(True)  # luong: feed the attentional vector to the next step
    # Departures from the papers are options whose default is the paper's (docs/faithfulness.md).
    memory: str = fixed(one_of("states", "projected"))  # luong: attend over the encoder's states as they are (paper) |
    #   projected: a learned map of a bidirectional encoder's 2H states to H (dot is then general)
    decoder_init: str = fixed(one_of("copy", "bridge"))  # luong: start from the encoder's final states layer by layer
    #   (paper; a bidirectional encoder's forward ones) | bridge: s_0 = tanh(W h_N)
    gaussian: str = fixed(one_of("multiply", "renormalise"))  # luong local-p: align(h_t, h_s) * Gaussian, not renormalised
    #   (paper, eq. 10) | renormalise: the Gaussian as a log-bias inside the window's softmax
    position_prior: str = fixed(one_of("none", "diagonal"))  # luong local-p: p_t = S sigmoid(z_t) (paper, eq. 9) |
    #   diagonal: S sigmoid(z_t + logit((min(t, S-1) + 1/2) / S)), z_t learned: starts on local-m's line
    readout: str = fixed(one_of("maxout", "tanh"))  # fixed_context, bahdanau: maxout over pairs of units (papers) | tanh
    heads: int = fixed(positive(4))  # transformer attention heads
    ff_size: int = fixed(positive(1024))  # transformer feed-forward size
    dropout: float = fixed(fraction(0.1))  # dropout probability
    tie_embeddings: bool = fixed(True)  # share target embedding and output projection


@dataclass(frozen=True)
class LocalConfig:
    """Training aids of Luong's local attention (docs/experiments/, the local-p trials).
    None is in the paper, all are off by default, and none changes evaluation or search."""

    # train with a wider half-width that shrinks linearly to model.window over window_steps
    # steps (0 = model.window from the start, the paper; a curriculum)
    window_start: int = fixed(non_negative(0))
    window_steps: int = fixed(non_negative(0))
    # local-p: add (|z| - limit)^2 per step to the loss when p_t's logit
    # z = v_p^T tanh(W_p h_t) passes +-limit (0 = off)
    position_limit: float = fixed(non_negative(0.0))
    # local-p: add guide * the squared distance (in sigmas) from p_t to where the scores
    # over the whole source point (0 = off)
    position_guide: float = fixed(non_negative(0.0))
    # local-p: no gradient reaches p_t's predictor (W_p, v_p) in the first position_hold
    # steps, so the window stays where it starts while the scores learn to align (0 = off)
    position_hold: int = fixed(non_negative(0))


@dataclass(frozen=True)
class GuidedConfig:
    """Guided alignment (Garg et al. 2019; for RNN attention Chen et al. 2016): attention
    taught by a teacher's word links (docs/alignment.md). Off by default (the papers)."""

    # lambda: the training loss adds weight * the cross-entropy from each target piece's
    # normalised teacher links to the supervised attention (0 = off)
    weight: float = fixed(non_negative(0.0))
    # eflomal: the statistical aligner on the corpus's training + validation pairs, both
    # directions joined by `symmetrize` (nmt data links) | gold: the corpus's <split>.gold |
    # runs: teacher_run and teacher_reverse's own alignments, joined by `symmetrize`
    # (Zenkel et al. 2020's bootstrapping; nmt.training.bootstrap)
    teacher: str = fixed(one_of("eflomal", "gold", "runs"))
    teacher_run: str = fixed("")  # runs: a run of this corpus and direction
    teacher_reverse: str = fixed("")  # runs: a run of this corpus, the other direction
    teacher_pairs: int = fixed(non_negative(0))  # runs: the first N training pairs get links (0 = all)
    symmetrize: str = fixed(registered("grow-diag-final-and", "heuristics"))  # how eflomal's two directions join
    # transformer: the supervised decoder layer (negative: from the top)
    layer: int = fixed(integer(-2, "a decoder layer: -model.dec_layers to model.dec_layers - 1"))
    heads: int = fixed(positive(1))  # transformer: how many of that layer's heads (the first ones)
    null_word: bool = fixed(False)  # unlinked target words attend to the source EOS (IBM's NULL word), read as no link
    full_context: bool = fixed(False)  # transformer: loss and reading from a decoder pass without the causal mask (Garg)


@dataclass(frozen=True)
class TrainConfig:
    batch_tokens: int = fixed(positive(4096))  # target tokens per batch (length-bucketed)
    lr: float = free(positive(1e-3))  # peak learning rate (Adam)
    schedule: str = free(one_of("inverse_sqrt", "constant", "plateau", "linear"))  # constant | inverse_sqrt |
    #   plateau | linear: decays to zero at the end of max_steps or max_minutes (budgeted training)
    warmup: int = free(non_negative(1000))  # warmup steps (inverse_sqrt)
    plateau_patience: int = free(positive(2))  # validations without gain before lr *= plateau_factor
    plateau_factor: float = free(between(0.5, 0, 1, above=True))
    label_smoothing: float = free(fraction(0.1))
    clip: float = free(non_negative(1.0))  # gradient norm clipping (0 = off)
    weight_decay: float = fixed(non_negative(0.0))  # Adam's L2 term (a resume keeps the saved optimiser's)
    max_steps: int = free(non_negative(0))  # 0 = no limit
    max_epochs: int = free(non_negative(0))  # 0 = no limit
    max_minutes: float = free(non_negative(0.0))  # wall-clock budget, validation included (0 = no limit)
    valid_every: int = free(positive(500))  # steps between validations
    valid_sentences: int = fixed(non_negative(0))  # validation sentences decoded for BLEU, which picks the best checkpoint (0 = all)
    patience: int = free(non_negative(0))  # early stop after this many validations without BLEU gain (0 = off)
    seed: int = fixed(integer(1234))  # seeds every random stream of training
    threads: int = free(between(0, 0, 1024))  # torch CPU threads (0 = torch default)
    log_every: int = free(positive(50))  # steps between progress lines
    align_sentences: int = free(non_negative(3))  # validation sentences whose attention is dumped each validation
    max_bad_steps: int = free(positive(5))  # consecutive non-finite losses before training stops
    keep_last: int = free(non_negative(0))  # keep the weights of the last N validations as
    #   checkpoints/step<N>.pt, for `nmt average` (0 = none)
    tensorboard: bool = free(False)  # also log to runs/<name>/tensorboard (extra [tensorboard])
    compile: bool = free(False)  # torch.compile the training pass (docs/benchmarks.md: when it pays)
    precision: str = free(one_of("auto", "fp32", "bf16"))  # training step's matrix products (auto: the faster of the two, timed on this device; fp32 where bf16 is not native)
    init_from: str = fixed("")  # a run whose best weights this run starts from (same model and vocabulary)


@dataclass(frozen=True)
class DecodeConfig:
    beam: int = free(positive(5))  # beam size (1 = greedy)
    length_penalty: float = free(non_negative(1.0))  # GNMT alpha; 0 = none
    # max output length = ratio * source length + offset (bounded: the engines' position
    # tables and buffers are sized by it)
    max_len_ratio: float = free(between(1.5, 0, 10, above=True))
    max_len_offset: int = free(between(10, 0, 1000))  # pieces added to that limit
    batch_size: int = free(positive(64))  # sentences per decoding batch
    n_best: int = free(positive(1))


@dataclass(frozen=True)
class Config:
    name: str = free("")  # run name: runs/<name> (default: the config file's stem)
    runs_dir: str = free("runs")
    data: DataConfig = field(default_factory=DataConfig)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    local: LocalConfig = field(default_factory=LocalConfig)
    guided: GuidedConfig = field(default_factory=GuidedConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    @property
    def src_lang(self) -> str:
        return self.data.pair.split("-")[0]

    @property
    def tgt_lang(self) -> str:
        return self.data.pair.split("-")[1]

    @property
    def run_dir(self) -> Path:
        return Path(self.runs_dir) / self.name


SECTIONS = {"data": DataConfig, "vocab": VocabConfig, "model": ModelConfig,
             "local": LocalConfig, "guided": GuidedConfig, "train": TrainConfig,
             "decode": DecodeConfig}

# Keys that moved or went (runs trained before still load: `migrate`).
MOVED = {"model.window_start": "local.window_start", "model.window_steps": "local.window_steps",
         "model.position_limit": "local.position_limit",
         "model.position_guide": "local.position_guide"}
REMOVED = {"model.position_lr": 1.0, "model.renormalise_steps": 0}  # key: its only value now


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str, where: str) -> Any:
    """Check `value` against the annotated type `tp`; ints are accepted for floats."""
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, key, where)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # past 1e308: no float holds it
            raise NMTError(f"{where}: '{key}' must be a finite number, got {value!r}") from None
    if tp is bool and not isinstance(value, bool):
        raise NMTError(f"{where}: '{key}' must be true or false, got {value!r}")
    if tp in (int, float) and (isinstance(value, bool) or not isinstance(value, tp)):
        raise NMTError(f"{where}: '{key}' must be {_type_name(tp)}, got {value!r}")
    if tp is int and not -INT_LIMIT <= value < INT_LIMIT:
        raise NMTError(f"{where}: '{key}' must be a 64-bit integer, got {value!r}")
    if tp is str and not isinstance(value, str):
        raise NMTError(f"{where}: '{key}' must be a string, got {value!r}")
    return value


def _build(cls: type, raw: Any, prefix: str, where: str) -> Any:
    """Build dataclass `cls` from a mapping, rejecting unknown keys."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise NMTError(f"{where}: '{prefix or 'config'}' must be a mapping, got {raw!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in raw.items():
        full = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            if full in MOVED:
                raise NMTError(f"{where}: '{full}' is now '{MOVED[full]}'; rename the key")
            if full in REMOVED:
                raise NMTError(f"{where}: '{full}' was removed (a trial that did not help: "
                               "docs/experiments/); delete the key")
            valid = ", ".join(names)
            raise NMTError(f"{where}: unknown key '{full}'; valid keys here: {valid}")
        kwargs[key] = _coerce(value, hints[key], full, where)
    return cls(**kwargs)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse `a.b=value` (value read as YAML, so 128 is an int and true a bool)."""
    if "=" not in text:
        raise NMTError(f"--set {text!r}: expected KEY=VALUE, e.g. --set model.hidden_size=128")
    key, value = text.split("=", 1)
    try:
        parsed = yaml.load(value, Loader=Loader) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return key.strip().split("."), parsed


def build_config(raw: dict, where: str = "config", overrides: list[str] = ()) -> Config:
    """A raw mapping (plus `--set` overrides) as a typed `Config`: keys and types checked;
    each field's limits and the checks across keys are `nmt.models.checks.validate`'s."""
    if not isinstance(raw or {}, dict):
        raise NMTError(f"{where}: a config must be a YAML mapping of sections")
    raw = dict(raw or {})
    for text in overrides:
        path, value = parse_override(text)
        node = raw
        for part in path[:-1]:
            child = {} if node.get(part) is None else node[part]  # `train:` alone is None
            if not isinstance(child, dict):
                raise NMTError(f"--set {text}: '{part}' is not a section")
            node[part] = dict(child)  # a copy: never modify the caller's mapping
            node = node[part]
        node[path[-1]] = value
    return _build(Config, raw, "", where)


def read_yaml(path: Path | str) -> Any:
    """Parse a YAML file with the safe loader (no python tags); errors name file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NMTError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NMTError(f"{path}: cannot read config ({exc})") from None
    try:
        return yaml.load(text, Loader=Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or one_line(exc)
        raise NMTError(f"{path}:{line} invalid YAML ({problem})") from None


def migrate(raw: Any) -> Any:
    """A run's saved config from before a key moved or went, in today's keys (MOVED, and
    REMOVED dropped: they only acted in training, so a trained model is the same without)."""
    if not isinstance(raw, dict):
        return raw
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    for old, new in [*MOVED.items(), *((k, None) for k in REMOVED)]:
        section, key = old.split(".")
        if isinstance(raw.get(section), dict) and key in raw[section]:
            value = raw[section].pop(key)
            if new:
                target, name = new.split(".")
                raw.setdefault(target, {})
                raw[target] = {**(raw[target] or {}), name: value}
    return raw


def config_to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def save_config(cfg: Config, path: Path) -> None:
    """Write `cfg` as YAML by rename: a kill leaves the old file whole (a run's config.yaml
    is what `--resume` reads)."""
    replace_text(Path(path), yaml.safe_dump(config_to_dict(cfg), sort_keys=False))


__all__ = [
    "Config",
    "DataConfig",
    "DecodeConfig",
    "GuidedConfig",
    "LocalConfig",
    "ModelConfig",
    "TrainConfig",
    "VocabConfig",
    "build_config",
    "config_to_dict",
    "migrate",
    "read_yaml",
    "save_config",
]
