"""Shared fixtures: tiny seeded models of every family."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

from nmt.core.config import ModelConfig
from nmt.data.corpora import ensure_synth
from nmt.models import build_model

VOCAB = 40


def load_script(path: Path, register: bool = False):
    """A file of scripts/ or benchmarks/ (folders that are not packages) as a module, with
    its folder on sys.path while it loads (for the siblings it imports); `register`: also
    in sys.modules (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[spec.name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module
FAMILIES = {
    "fixed_context": dict(family="fixed_context"),
    "bahdanau": dict(family="bahdanau"),
    "luong_dot": dict(family="luong", score="dot", bidirectional=False),  # the paper's encoder
    "luong_general": dict(family="luong", score="general"),
    "luong_concat": dict(family="luong", score="concat"),
    "luong_local_m": dict(family="luong", score="general", attention="local-m", window=2),
    "luong_local_p": dict(family="luong", score="general", attention="local-p", window=2),
    "transformer": dict(family="transformer", heads=4, ff_size=64, enc_layers=2, dec_layers=2),
    "bahdanau_lstm": dict(family="bahdanau", rnn_type="lstm", dec_layers=2, enc_layers=2),
}


def tiny_model(name: str, seed: int = 0):
    torch.manual_seed(seed)
    cfg = ModelConfig(emb_size=32, hidden_size=32, dropout=0.0, **FAMILIES[name])
    return build_model(cfg, VOCAB, VOCAB, joint=True).eval()


@pytest.fixture(params=list(FAMILIES))
def family(request):
    return request.param


def random_batch(seed: int = 1, batch: int = 4, src_len: int = 9, tgt_len: int = 7):
    """(src, tgt_in) with sentences of different lengths, PAD = 0 after EOS = 3."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (batch, src_len), generator=g)
    tgt = torch.randint(4, VOCAB, (batch, tgt_len), generator=g)
    tgt[:, 0] = 2
    for row in range(batch):
        s_len = src_len - 2 * row if src_len - 2 * row > 1 else 2
        src[row, s_len - 1] = 3
        src[row, s_len:] = 0
        t_len = max(tgt_len - row, 2)
        tgt[row, t_len:] = 0
    return src, tgt


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    """The default synthetic corpus (12,000 training pairs); tiny runs use its short ones."""
    root = tmp_path_factory.mktemp("data")
    ensure_synth(root)
    return root


@pytest.fixture(autouse=True)
def _restore_threads():
    """Trainer sets torch's thread count from the config; keep it from leaking across tests."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def _cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _precision(request, _cache_dir, monkeypatch):
    """The suite's precision cache is its own folder (never the user's ~/.cache/nmt).
    NMT_TEST_PRECISION=fp32 or bf16 runs the suite with that precision wherever a config
    says auto (docs/development.md), except in the tests of auto itself (marker
    precision_auto)."""
    monkeypatch.setenv("NMT_CACHE_DIR", str(_cache_dir))
    forced = os.environ.get("NMT_TEST_PRECISION")
    if forced and "precision_auto" not in request.keywords:
        from nmt.training import precision

        resolve = precision.resolve
        monkeypatch.setattr(precision, "resolve", lambda setting, *rest: resolve(
            forced if setting == "auto" else setting, *rest))


# Hypothesis budgets (tests/test_fuzz.py): "suite" in make test, "fuzz" in make fuzz
# (--hypothesis-profile=fuzz: 400 examples per property and per server endpoint).
from hypothesis import settings as _hypothesis  # noqa: E402

_hypothesis.register_profile("suite", max_examples=12, deadline=None)
_hypothesis.register_profile("fuzz", max_examples=400, deadline=None)
_hypothesis.load_profile("suite")
