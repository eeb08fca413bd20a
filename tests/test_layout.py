"""The folder tree reads as the pipeline, and imports only run downhill.

core -> data -> models -> align -> decoding -> training -> report/explore/serve/lab -> cli.
Each layer's rule is written once, in LAYERS: a module may import its own layer or any
lower one, at the top of a file or inside a function; there are no circles; an import
inside a function names its reason (an optional extra, or start-up time).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nmt"
MODULES = sorted(PACKAGE.rglob("*.py"))

# Lower numbers are lower layers (docs/architecture.md draws the same table).
LAYERS = {
    "nmt.core": 0,  # errors, tokens, config, checkpoint, run directory, locks, progress, plotting
    "nmt.data": 1,  # corpora, subwords, batching, word links, symmetrisation
    "nmt.models": 2,  # the families, their registry, the config checked against it, loading runs
    "nmt.align": 3,  # word alignments read out of models, and their scores
    "nmt.decoding": 4, "nmt.api": 4, "nmt.search": 4, "nmt.translate": 4,  # (the last three: old names)
    "nmt.training": 5,  # the training loop validates by decoding
    "nmt.report": 6, "nmt.explore": 6, "nmt.serve": 6, "nmt.lab": 6,  # presentation
    "nmt.cli": 7, "nmt.__main__": 7,
    "nmt": 8,  # the package root: `nmt.load`, the one entry point
}
TOP_LEVEL_FILES = 6  # at most this many modules directly under nmt/ besides the packages
REASON = re.compile(r"#.*\b(start-up|optional extra)\b")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {module_name(p): p for p in MODULES}


def layer(module: str) -> int:
    for prefix in sorted(LAYERS, key=len, reverse=True):  # longest first
        if module == prefix or module.startswith(prefix + "."):
            return LAYERS[prefix]
    raise AssertionError(f"{module}: not placed in a layer; add it to LAYERS")


def imports(path: Path) -> set[str]:
    """Every nmt module `path` imports, at the top or inside a function
    (`from nmt.x import y` counts as nmt.x.y when that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in NAMES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {n for n in found if n == "nmt" or n.startswith("nmt.")}


GRAPH = {name: imports(path) & set(NAMES) for name, path in NAMES.items()}


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_no_import_from_a_higher_layer(path):
    here = module_name(path)
    for target in GRAPH[here]:
        assert layer(target) <= layer(here), f"{here} (layer {layer(here)}) imports {target}"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    assert cycles(GRAPH) == []


def test_the_circle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_few_files_directly_under_nmt():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_FILES, top


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_an_import_inside_a_function_names_its_reason(path):
    """Only for an optional extra or start-up time, in a comment on the import or on the
    first import of the block it opens."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            first = node.lineno - 1
            while first > 0 and lines[first - 1].strip().startswith(("import ", "from ")):
                first -= 1
            block = lines[first:node.end_lineno]
            assert any(REASON.search(line) for line in block), \
                f"{path.relative_to(ROOT)}:{node.lineno}: import inside {fn.name} without a reason"


@pytest.mark.parametrize("package", sorted(p.parent for p in PACKAGE.rglob("__init__.py")),
                         ids=lambda p: p.name)
def test_every_package_says_what_it_owns(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc and len(doc) > 40, f"{package}: no docstring saying what it owns"


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_modules_and_functions_stay_small(path):
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400, f"{path.name}: over 400 lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            assert length <= 60, f"{path.name}:{node.lineno} {node.name} has {length} lines"


def test_every_module_is_placed_in_a_layer():
    for name in NAMES:
        layer(name)


def string_constants(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


# A registered name may also appear, as a string, only here (the reason beside each).
ELSEWHERE = {
    ("grow-diag-final-and", "nmt/core/config.py"): "guided.symmetrize's default: the base "
                                                   "cannot import the registry above it",
    ("attention", "nmt/serve/runs.py"): "a JSON field (has attention), not the method",
    ("attention", "nmt/lab/trained.py"): "a figure label, not the method",
}


def test_each_name_list_has_one_home():
    """The symmetrisation heuristics and the alignment methods are each written once: the
    CLI, the config, the server and its page build their choices from the registry."""
    from nmt.align.extract import METHODS
    from nmt.align.names import METHOD_NAMES
    from nmt.data.symmetrize import HEURISTICS, SOFT

    assert tuple(METHODS) == METHOD_NAMES
    homes = {**{n: "nmt/data/symmetrize.py" for n in (*HEURISTICS, *SOFT)},
             **{n: "nmt/align/names.py" for n in METHOD_NAMES}}
    constants = {str(p.relative_to(ROOT)): string_constants(p) for p in MODULES}
    for name, home in homes.items():
        where = {f for f, found in constants.items() if name in found}
        assert where - {home} <= {f for n, f in ELSEWHERE if n == name}, (name, where)


def test_the_architecture_page_lists_every_module_and_only_those():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`(nmt(?:/\w+)*\.py)`", page))
    actual = {str(p.relative_to(ROOT)) for p in MODULES}
    assert listed - actual == set(), f"listed but missing: {sorted(listed - actual)}"
    assert actual - listed == set(), f"not listed: {sorted(actual - listed)}"
