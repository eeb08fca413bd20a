"""Experiment names and figure formats as Enums (typer validates them; no torch import)."""

from __future__ import annotations

from enum import Enum


class ExperimentName(str, Enum):
    softmax_toy = "softmax-toy"
    saturation = "saturation"
    argmax_vs_softmax = "argmax-vs-softmax"
    stability = "stability"
    tanh = "tanh"
    gradient_check = "gradient-check"
    identical_sources = "identical-sources"
    permutation = "permutation"
    positions = "positions"
    masks = "masks"
    kv_cache = "kv-cache"
    bottleneck = "bottleneck"
    attention_is_not_explanation = "attention-is-not-explanation"


class FigureFormat(str, Enum):
    png = "png"
    svg = "svg"
