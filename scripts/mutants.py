"""One-line mutation check of the model, search and alignment code (`make mutants`).

Every mutant changes one line of one file (default: nmt/models, nmt/search.py and
nmt/align/{extract,io,words,metrics,export}.py): an operator swap (+/-, * and /, ** -> *,
& and |, < and <=, > and >=, == and !=, is / is not, in / not in), a numeric constant
(0 -> 1, n -> n - 1, 1.0 -> 2.0, 2.0 -> 1.0, x -> 2x), a dropped unary call
(torch.tanh(x) -> (x), math.sqrt(x) -> (x), ...), a dropped `not`, `~` or unary minus,
or an index shift ([1:] <-> [:-1]). For each mutant a fast, targeted test subset runs
against a scratch copy of the package (the working tree is never modified); a mutant
is *killed* when a test fails and *survives* when every test passes.

Speed: the parent imports torch, numpy and pytest once and forks a child per mutant, so
a mutant costs its tests only (OMP_NUM_THREADS=1, one mutant at a time).

    python scripts/mutants.py --list                      # mutants, with ids
    python scripts/mutants.py --files nmt/search.py --limit 20
    python scripts/mutants.py --sample 200 --seed 1       # a random sample
    python scripts/mutants.py --only nmt/search.py:61:0   # chosen ids
    python scripts/mutants.py --named                     # the issue's named mutations
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ["nmt/models/*.py", "nmt/search.py"] + [
    f"nmt/align/{name}.py" for name in ("extract", "io", "words", "metrics", "export")]
EQUATIONS = ["tests/test_equations_rnn.py", "tests/test_equations_luong.py",
             "tests/test_equations_transformer.py"]
SLOW = ["--deselect", "tests/test_limits.py::test_transformer_decodes_past_1024_target_positions",
        "--deselect", "tests/test_limits.py::test_transformer_encodes_and_teacher_forces_long_"
        "sequences"]  # 10 s together; they only concern transformer.py's position table
# The fast tests that should kill a mutant of each file: the first prefix that matches.
# Test files that do not exist (yet) are skipped; other items are passed to pytest as is.
TESTS = {
    "nmt/models/transformer.py": EQUATIONS + ["tests/test_attention.py", "tests/test_models.py",
                                              "tests/test_limits.py"],
    "nmt/models/": EQUATIONS + ["tests/test_attention.py", "tests/test_models.py",
                                "tests/test_equations_search.py", "tests/test_search.py",
                                "tests/test_limits.py", *SLOW],
    "nmt/search.py": ["tests/test_equations_search.py", "tests/test_search.py",
                      "tests/test_limits.py", *SLOW],
    "nmt/align/": ["tests/test_equations_align.py", "tests/test_alignment.py"],
}
BINOPS = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"),
          ast.Div: ("/", "*"), ast.Pow: ("**", "*"), ast.BitAnd: ("&", "|"),
          ast.BitOr: ("|", "&"), ast.FloorDiv: ("//", "*")}
COMPARES = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="),
            ast.GtE: (">=", ">"), ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
            ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is"),
            ast.In: ("in", "not in"), ast.NotIn: ("not in", "in")}
UNARY_CALLS = {"tanh", "sigmoid", "exp", "sqrt", "log", "abs", "relu", "log_softmax"}
# The one-line changes named in issue 9 ("Why"): id -> (file, exact text, replacement).
NAMED = {
    "gaussian-width": ("nmt/models/attention.py", "sigma = self.window / 2.0",
                       "sigma = self.window / 1.0"),
    "no-length-penalty": ("nmt/search.py", "/ length_penalty(len(tokens) + 1, alpha)", ""),
    "no-sqrt-dk-explicit": ("nmt/models/attention.py", " / math.sqrt(q.size(-1))", ""),
    "no-sqrt-dk-fused": ("nmt/models/attention.py", "attn_mask=mask, dropout_p=dropout)",
                         "attn_mask=mask, dropout_p=dropout, scale=1.0)"),
    "luong-previous-state": ("nmt/models/rnn.py", "query = h.unsqueeze(1)",
                             'query = state["h"][:, -1:]'),
    "local-m-position": ("nmt/models/attention.py", "torch.minimum(step.to(query.dtype),",
                         "torch.minimum(step.to(query.dtype) + 1,"),
    "shifted-naive-swap": ("nmt/align/words.py", "return mean[1:] if shifted else mean[:-1]",
                           "return mean[:-1] if shifted else mean[1:]"),
    "default-layer": ("nmt/align/words.py", "(L - 2 if L > 1 else 0) if layer is None",
                      "(L - 1 if L > 1 else 0) if layer is None"),
    "duplicate-nbest": ("nmt/search.py", 'scores[:, 1:] = float("-inf")', "scores[:, 1:] = 0.0"),
}


@dataclass
class Mutant:
    id: str  # file:line:k (k-th mutant of that line)
    path: str  # relative to the repository root
    line: int  # 1-based
    old: str  # the original line, stripped
    new: str  # the mutated line, stripped
    source: str  # the whole mutated file
    by: str = ""  # the first test that failed


def _replace(lines: list[bytes], node: ast.AST, start: int, end: int, text: str) -> bytes:
    """The node's line with bytes [start, end) replaced (ast columns are UTF-8 offsets)."""
    raw = lines[node.lineno - 1]
    return raw[:start] + text.encode() + raw[end:]


def _operator(lines, node, left, right, old: str, new: str):
    """Swap the operator written between `left` and `right` on one line."""
    if left.end_lineno != right.lineno:
        return None
    raw = lines[left.end_lineno - 1]
    gap = raw[left.end_col_offset:right.col_offset].decode()
    core = " ".join(gap.strip(" ()").split())
    if core != old:
        return None
    offset = left.end_col_offset + len(gap[:gap.index(old.split()[0])].encode())
    return _replace(lines, left, offset, offset + len(gap.strip(" ()").encode()), new)


def _number(value):
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return "1" if value == 0 else str(value - 1)
    return {0.0: "1.0", 1.0: "2.0", 2.0: "1.0"}.get(value, repr(value * 2))


def _node_mutations(lines, node):
    """(line number, mutated line bytes) for every mutation of one AST node."""
    one_line = getattr(node, "lineno", None) == getattr(node, "end_lineno", -1)
    seg = (node.col_offset, node.end_col_offset) if one_line else None
    if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
        yield node.left.end_lineno, _operator(lines, node, node.left, node.right,
                                              *BINOPS[type(node.op)])
    elif isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:]):
            if type(op) in COMPARES:
                yield left.end_lineno, _operator(lines, node, left, right, *COMPARES[type(op)])
    elif isinstance(node, ast.Constant) and seg and _number(node.value) is not None:
        yield node.lineno, _replace(lines, node, *seg, _number(node.value))
    elif isinstance(node, ast.Call) and seg and len(node.args) == 1 and not node.keywords:
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        arg = node.args[0]
        if name in UNARY_CALLS and arg.lineno == node.lineno == arg.end_lineno:
            inner = lines[node.lineno - 1][arg.col_offset:arg.end_col_offset].decode()
            yield node.lineno, _replace(lines, node, *seg, f"({inner})")
    elif isinstance(node, ast.UnaryOp) and seg and not isinstance(node.op, ast.UAdd):
        if not (isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)):
            inner = node.operand
            if inner.lineno == inner.end_lineno == node.lineno:
                text = lines[node.lineno - 1][inner.col_offset:inner.end_col_offset].decode()
                yield node.lineno, _replace(lines, node, *seg, f"({text})")
    elif isinstance(node, ast.Slice) and seg and node.step is None:
        text = ast.unparse(node)
        swap = {"1:": ":-1", ":-1": "1:"}.get(text)
        if swap:
            yield node.lineno, _replace(lines, node, *seg, swap)


def _skipped(tree: ast.AST) -> set[int]:
    """ids of nodes not to mutate: f-strings, raise statements, annotations, defaults."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        parts = []
        if isinstance(node, ast.JoinedStr | ast.Raise):
            parts = [node]
        elif isinstance(node, ast.arguments):  # default values: settings, not equations
            parts = [d for d in node.defaults + node.kw_defaults if d is not None]
        elif isinstance(node, ast.ClassDef):  # dataclass field defaults, likewise
            parts = [n.value for n in node.body if isinstance(n, ast.AnnAssign) and n.value]
        elif isinstance(node, ast.arg | ast.AnnAssign | ast.FunctionDef) and getattr(
                node, "annotation", None) is not None:
            parts = [node.annotation]
        if isinstance(node, ast.FunctionDef) and node.returns is not None:
            parts.append(node.returns)
        for part in parts:
            skip.update(id(sub) for sub in ast.walk(part))
    return skip


def mutants_of(path: str) -> list[Mutant]:
    """Every one-line mutant of one file that still compiles."""
    text = (ROOT / path).read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = text.encode().split(b"\n")
    skip = _skipped(tree)
    found: dict[int, list[bytes]] = {}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        for lineno, new in _node_mutations(lines, node):
            if new is not None and new != lines[lineno - 1] and new not in found.get(lineno, []):
                found.setdefault(lineno, []).append(new)
    out = []
    for lineno in sorted(found):
        for k, new in enumerate(found[lineno]):
            mutated = lines[:lineno - 1] + [new] + lines[lineno:]
            source = b"\n".join(mutated).decode()
            try:
                compile(source, path, "exec")
            except SyntaxError:
                continue
            out.append(Mutant(f"{path}:{lineno}:{k}", path, lineno,
                              lines[lineno - 1].decode().strip(), new.decode().strip(), source))
    return out


def named_mutant(name: str) -> Mutant:
    path, old, new = NAMED[name]
    text = (ROOT / path).read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise SystemExit(f"mutants: named mutation {name!r}: {old!r} is not exactly once in "
                         f"{path}; update NAMED in scripts/mutants.py")
    source = text.replace(old, new)
    lineno = text[:text.index(old)].count("\n") + 1
    return Mutant(name, path, lineno, text.splitlines()[lineno - 1].strip(),
                  source.splitlines()[lineno - 1].strip(), source)


def tests_for(path: str) -> list[str]:
    for prefix, tests in TESTS.items():
        if path.startswith(prefix):
            return [t for t in tests if not t.endswith(".py") or (ROOT / t).is_file()]
    raise SystemExit(f"mutants: no test subset for {path}; add one to TESTS")


def scratch_copy() -> Path:
    """A copy of the package and tests where mutants are written."""
    where = Path(tempfile.mkdtemp(prefix="nmt-mutants-"))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("nmt", "tests"):
        shutil.copytree(ROOT / name, where / name, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    return where


def run_tests(copy: Path, tests: list[str], timeout: float) -> tuple[str, str]:
    """Fork; the child runs pytest on the scratch copy. Returns 'passed', 'failed' or
    'timeout', and the first failing test's id."""
    log = copy / "pytest.log"
    pid = os.fork()
    if pid == 0:  # child: import the (mutated) package from the copy, never the tree
        os.chdir(copy)
        sys.path.insert(0, str(copy))
        sys.dont_write_bytecode = True
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(out, 2)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        import pytest

        code = pytest.main([*tests, "-x", "-q", "-p", "no:cacheprovider", "-W", "ignore"])
        os._exit(int(code))
    deadline = time.monotonic() + timeout
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                pid = 0
                if os.waitstatus_to_exitcode(status) == 0:
                    return "passed", ""
                failed = [line.split(" - ")[0].split(" ", 1)[1] for line in
                          log.read_text(errors="replace").splitlines()
                          if line.startswith(("FAILED ", "ERROR "))]
                return "failed", (failed or ["(no test id: see pytest output)"])[0]
            if time.monotonic() > deadline:
                return "timeout", ""
            time.sleep(0.02)
    finally:  # a timeout, or the parent interrupted: the child goes too
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def check(mutants: list[Mutant], timeout: float, log=print) -> dict[str, list[Mutant]]:
    """Run every mutant's tests; a baseline run of each subset must pass first."""
    copy = scratch_copy()
    results: dict[str, list[Mutant]] = {"killed": [], "survived": [], "timeout": []}
    try:
        for tests in sorted({tuple(tests_for(m.path)) for m in mutants}):
            if run_tests(copy, list(tests), timeout * 3)[0] != "passed":
                raise SystemExit(f"mutants: the unmutated tests fail: {' '.join(tests)}")
        for n, m in enumerate(mutants, 1):
            target = copy / m.path
            original = target.read_text(encoding="utf-8")
            target.write_text(m.source, encoding="utf-8")
            try:
                outcome, by = run_tests(copy, tests_for(m.path), timeout)
            finally:
                target.write_text(original, encoding="utf-8")
            kind = {"passed": "survived", "failed": "killed"}.get(outcome, "timeout")
            results[kind].append(m)
            m.by = by
            log(f"[{n}/{len(mutants)}] {kind.upper():8} {m.id}  {m.old}  ->  {m.new}"
                + (f"  [{by}]" if by else ""))
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return results


def summary(results: dict[str, list[Mutant]]) -> str:
    total = sum(len(v) for v in results.values())
    caught = len(results["killed"]) + len(results["timeout"])
    lines = [f"mutants: {total}, killed {len(results['killed'])}, timeout "
             f"{len(results['timeout'])}, survived {len(results['survived'])}; "
             f"kill rate {caught / max(total, 1):.1%}"]
    by_file: dict[str, list[int]] = {}
    for kind, items in results.items():
        for m in items:
            by_file.setdefault(m.path, [0, 0])[kind == "survived"] += 1
    for path, (dead, alive) in sorted(by_file.items()):
        lines.append(f"  {path}: {dead}/{dead + alive} killed")
    if results["survived"]:
        lines.append("survivors:")
        lines += [f"  {m.id}  {m.old}  ->  {m.new}" for m in results["survived"]]
    return "\n".join(lines)


def select(args) -> list[Mutant]:
    if args.named or (args.only and set(args.only) <= set(NAMED)):
        return [named_mutant(name) for name in NAMED if not args.only or name in args.only]
    files = sorted({p for pattern in (args.files or TARGETS) for p in glob.glob(
        pattern, root_dir=ROOT)})
    mutants = [m for f in files for m in mutants_of(f)]
    if args.only:
        wanted = set(args.only)
        mutants = [m for m in mutants if m.id in wanted]
        missing = wanted - {m.id for m in mutants}
        if missing:
            raise SystemExit(f"mutants: unknown ids {sorted(missing)}; see --list")
    if args.sample:
        mutants = sorted(random.Random(args.seed).sample(mutants, min(args.sample, len(mutants))),
                         key=lambda m: (m.path, m.line))
    return mutants[:args.limit] if args.limit else mutants


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="+", help=f"globs (default: {' '.join(TARGETS)})")
    parser.add_argument("--limit", type=int, default=0, help="only the first N mutants")
    parser.add_argument("--sample", type=int, default=0, help="a random sample of N mutants")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample")
    parser.add_argument("--only", nargs="+", help="mutant ids (file:line:k) or named ones")
    parser.add_argument("--named", action="store_true", help="the issue's named mutations")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    mutants = select(args)
    if args.list:
        for m in mutants:
            print(f"{m.id}  {m.old}  ->  {m.new}")
        print(f"{len(mutants)} mutants")
        return 0
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy  # noqa: F401  (imported once here, shared by every forked child)
    import pytest  # noqa: F401
    import torch
    import yaml  # noqa: F401

    torch.set_num_threads(1)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still remove the scratch copy
    start = time.monotonic()
    results = check(mutants, args.timeout, log=lambda s: print(s, flush=True))
    print(summary(results))
    print(f"{time.monotonic() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({k: [m.id for m in v] for k, v in results.items()},
                                        indent=1))
    return 1 if args.named and results["survived"] else 0


if __name__ == "__main__":
    sys.exit(main())
