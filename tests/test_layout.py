"""The folder tree reads as the pipeline, and each layer only builds on the ones below it.

corpus -> subwords -> batches -> model -> search -> translate/evaluate -> align -> report.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nmt"
MODULES = sorted(PACKAGE.rglob("*.py"))

# Lower numbers are lower layers; a module may import its own layer or any lower one.
LAYERS = [
    ("nmt", 0), ("nmt.errors", 0), ("nmt.tokens", 0), ("nmt.locks", 0), ("nmt.progress", 0),
    ("nmt.config", 1), ("nmt.config_checks", 1), ("nmt.checkpoint", 1), ("nmt.distributed", 1), ("nmt.plotting", 1),
    ("nmt.document", 1), ("nmt.schedule", 1),
    ("nmt.data", 2),
    ("nmt.models", 3),
    ("nmt.search", 4), ("nmt.optim", 4),  # the optimiser over a model's parameter groups
    ("nmt.translate", 5), ("nmt.tensorboard", 5),
    ("nmt.align.export", 7),  # what `nmt align` does: loads runs, decodes, plots
    ("nmt.align.adapt", 7),  # fine-tunes a copy of a model with the training loss
    ("nmt.align", 5),  # matrices from a model, gold files, words, metrics: evaluate uses them
    ("nmt.evaluate", 6), ("nmt.train", 6), ("nmt.train_data", 6), ("nmt.rundir", 6),
    ("nmt.api", 6),  # a run as a Python object: what translate, evaluate and align use
    ("nmt.report", 8), ("nmt.explore", 8), ("nmt.lab", 8), ("nmt.serve", 8),
    ("nmt.cli", 9), ("nmt.__main__", 9),
]
# The one upward import, made inside a function: config validates `model.family` and
# `model.score` against the models' own registries, so the names live in one place.
# And `nmt.load`, the package's one entry point, hands over to the API inside the function.
ALLOWED_UP = {("nmt.config", "nmt.models"), ("nmt.config", "nmt.models.attention"),
              ("nmt", "nmt.api")}


def layer(module: str) -> int:
    for prefix, rank in sorted(LAYERS, key=lambda entry: -len(entry[0])):  # longest first
        if module == prefix or module.startswith(prefix + "."):
            return rank
    raise AssertionError(f"{module}: not placed in a layer; add it to LAYERS")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n == "nmt" or n.startswith("nmt.")}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_no_import_from_a_higher_layer(path):
    here = module_name(path)
    for target in imports(ast.parse(path.read_text(encoding="utf-8"))):
        if target == "nmt" or (here, target) in ALLOWED_UP:
            continue
        assert layer(target) <= layer(here), f"{here} (layer {layer(here)}) imports {target}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_modules_and_functions_stay_small(path):
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400, f"{path.name}: over 400 lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            assert length <= 60, f"{path.name}:{node.lineno} {node.name} has {length} lines"


def test_every_module_is_placed_in_a_layer():
    for path in MODULES:
        layer(module_name(path))
