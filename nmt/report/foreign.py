"""A model trained elsewhere (an OPUS-MT model, nmt.models.opus) in `nmt compare`: it has no
run folder of ours, no corpus here, no saved scores or alignments, so the report computes
what it can show beside the runs: its cross-attention forced on the split's references (the
runs' own split, read as the first run trained on a corpus here reads it), the attention's
entropy and EOS mass, AER against that split's gold, and its parameter count. Its BLEU
needs a decoding pass of the split, which `nmt compare` (a reader of saved results) does
not run: the cell stays empty and a note says so."""

from __future__ import annotations

from pathlib import Path

import torch

from nmt.align.extract import collect
from nmt.align.guided import reading_of
from nmt.align.io import load_gold
from nmt.align.metrics import alignment_summary
from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.progress import counting
from nmt.data.pin import gold_of, scoring_split
from nmt.decoding.api import load
from nmt.models.opus import NO_CORPUS


def count_parameters(state: dict) -> int:
    """Number of parameters in a state dict; tied tensors (shared storage) count once."""
    seen: set[tuple[int, tuple[int, ...]]] = set()
    total = 0
    for tensor in state.values():
        if not torch.is_tensor(tensor):
            continue
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if tensor.numel() and key in seen:
            continue
        seen.add(key)
        total += tensor.numel()
    return total


def is_foreign(cfg: Config) -> bool:
    return cfg.data.corpus == NO_CORPUS


def home(named: list[tuple[Path, Config]]) -> tuple[Path, Config]:
    """The first (path, config) trained on a corpus here: whose split every row is shown on."""
    found = next(((p, c) for p, c in named if not is_foreign(c)), None)
    if found is None:
        raise NMTError(f"{named[0][0]}: a model trained elsewhere (OPUS-MT) has no corpus here; "
                       "compare it beside a run of the corpus it should be scored on, e.g. "
                       f"nmt compare runs/NAME {named[0][0]}")
    return found


def foreign_summary(path: Path, cfg: Config, split: str, home_run: tuple[Path, Config]
                    ) -> tuple[str, Path, Config, list, dict, int, dict]:
    """RunSummary's fields for a model trained elsewhere, plus its records by index: its
    forced attention on `split` as `home_run` reads it, and their summary (AER with gold)."""
    model = load(path)
    where, home_cfg = home_run
    sources, refs, _ = scoring_split(home_cfg, where, split)
    src_ids, tgt_ids = model.vocab.encode_src(sources), model.vocab.encode_tgt(refs)
    with counting(len(src_ids), f"{Path(path).name}: aligning {split}"):
        records = collect(model.float_module, model.vocab, src_ids, tgt_ids,
                          **reading_of(cfg), meta={"mode": "forced", "family": "transformer",
                                                   "run": str(path)})
    gold = gold_of(home_cfg, split)
    entries = load_gold(gold, records, prefix=True) if gold is not None else None
    scores = {"alignment": alignment_summary(records, entries), "sentences": len(records)}
    name = Path(str(path)).name  # hf:ORG/NAME: NAME, not the Hub cache's commit folder
    return (name, model.path, cfg, [], scores, count_parameters(model.float_module.state_dict()),
            {rec.index: rec for rec in records})


def note(names: list[str]) -> str:
    return (f"{', '.join(names)}: trained elsewhere (OPUS-MT); attention, entropy and AER are "
            "computed here on the split's references; BLEU needs its translations: `nmt "
            "translate --run MODEL` the split's sources and score them with sacrebleu.")
