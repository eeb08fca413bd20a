"""Model registry: one literal dict from family name to class."""

from __future__ import annotations

from nmt.core.config import LocalConfig, ModelConfig
from nmt.core.errors import NMTError
from nmt.models.base import Seq2Seq
from nmt.models.rnn import Bahdanau, FixedContext, Luong
from nmt.models.transformer import Transformer

MODELS: dict[str, type[Seq2Seq]] = {
    "fixed_context": FixedContext,
    "bahdanau": Bahdanau,
    "luong": Luong,
    "transformer": Transformer,
}


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint: bool,
                local: LocalConfig = LocalConfig()) -> Seq2Seq:
    """Instantiate the family named by `cfg.family` for the given vocabulary sizes (and the
    local attention's training aids, config section `local`)."""
    if cfg.family not in MODELS:
        raise NMTError(f"unknown model.family '{cfg.family}'; choose one of: {', '.join(MODELS)}")
    if cfg.tie_embeddings and cfg.family == "luong" and cfg.emb_size != cfg.hidden_size:
        raise NMTError("model.tie_embeddings needs model.emb_size == model.hidden_size for "
                       "luong (the softmax reads the attentional vector); set one or the other")
    return MODELS[cfg.family](src_vocab, tgt_vocab, cfg, joint, local)
