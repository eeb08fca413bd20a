"""How a guided run is read (Garg et al. 2019): its supervised layer and heads, naively.
Row t of the supervised map is the decoder step that predicts target piece t. What trains
a guided run (teacher links, piece targets, the loss) is nmt.training.guided."""

from __future__ import annotations

from nmt.core.config import Config


def reading_of(cfg: Config) -> dict:
    """How `nmt align`, `translate --alignments` and validation read a run by default: a
    guided run's supervised layer and heads, naively; {} for an unguided run."""
    if not cfg.guided.weight:
        return {}
    return {"layer": cfg.guided.layer, "heads": cfg.guided.heads, "shifted": False,
            "null": cfg.guided.null_word, "full_context": cfg.guided.full_context}
