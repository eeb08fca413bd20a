"""Every writer through one scratch mechanism (issue 74, item 4 and defects 5 and 6):
nmt.core.scratch's liveness check cannot race a writer starting up, and no module of nmt/
writes or renames a file around it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nmt.core import scratch as scratch_module
from nmt.core.scratch import scratch, sweep

REPO = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- defect 5


def _sweep_once(monkeypatch, parent: Path) -> list:
    """Make the next writer's window between creating its owner file and locking it hold a
    sweep of `parent` (as `data gc`, `data list` or another import would run one); the
    sweep's result is appended to the returned list."""
    swept: list = []

    def starting(owner: Path) -> None:
        if not swept:
            swept.append(sweep(parent))

    monkeypatch.setattr(scratch_module, "_starting", starting)
    return swept


def test_5_a_sweep_while_a_writer_starts_up_takes_nothing_from_it(tmp_path, monkeypatch):
    target = tmp_path / "corpus"
    swept = _sweep_once(monkeypatch, tmp_path)
    with scratch(target) as live:
        (live / "half").write_text("x")
        assert swept, "the hook did not run"
        owner = live.with_name(live.name + scratch_module.OWNER)
        assert owner.is_file(), "the writer's owner file was swept"
        gone, alive = sweep(tmp_path)  # a later sweep sees a live writer
        assert gone == [] and alive == [live]
        assert (live / "half").read_text() == "x"
    assert not list(tmp_path.glob(".corpus.tmp-*"))


def test_5_a_swept_owner_file_is_given_up_for_another_name(tmp_path, monkeypatch):
    target = tmp_path / "last.pt"
    swept = _sweep_once(monkeypatch, tmp_path)
    with scratch(target, folder=False) as live:
        [(gone, _)] = swept
        assert [p.name for p in gone] != [live.name + scratch_module.OWNER]
        live.write_text("new")
        assert sweep(tmp_path)[0] == [] and live.read_text() == "new"


KILLED = ("import os, signal, sys; from pathlib import Path; from nmt.core.scratch import "
          "scratch\nwith scratch(Path(sys.argv[1])) as tmp:\n    (tmp / 'half').write_text('x')\n"
          "    os.kill(os.getpid(), signal.SIGKILL)")


def test_5_a_dead_writers_path_and_owner_are_swept_under_its_flock(tmp_path):
    target = tmp_path / "corpus"
    subprocess.run([sys.executable, "-c", KILLED, str(target)], check=False,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    [left] = [p for p in tmp_path.glob(".corpus.tmp-*") if p.is_dir()]
    assert sweep(tmp_path, dry_run=True) == ([left], [])
    assert left.exists()
    gone, alive = sweep(tmp_path)
    assert gone == [left] and alive == [] and not list(tmp_path.iterdir())


# ----------------------------------------------------------------------------- defect 6


SAVE_KILLED = ("import os, signal, sys; from pathlib import Path; "
               "from nmt.core.checkpoint import atomic_write\n"
               "def write(handle):\n    handle.write(b'half')\n    handle.flush()\n"
               "    os.kill(os.getpid(), signal.SIGKILL)\n"
               "atomic_write(Path(sys.argv[1]), write)")


def test_6_the_next_save_sweeps_what_a_killed_save_left(tmp_path):
    from nmt.core.checkpoint import atomic_write

    last = tmp_path / "checkpoints" / "last.pt"
    atomic_write(last, lambda handle: handle.write(b"old"))
    subprocess.run([sys.executable, "-c", SAVE_KILLED, str(last)], check=False,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    left = sorted(p.name for p in last.parent.iterdir())
    assert len(left) == 3 and last.read_bytes() == b"old", left  # a scratch file and owner
    (last.parent / ".last.pt.tmp999999999").write_bytes(b"an older nmt's, of a dead pid")
    atomic_write(last, lambda handle: handle.write(b"new"))
    assert [p.name for p in last.parent.iterdir()] == ["last.pt"]
    assert last.read_bytes() == b"new"


SYNTH_KILLED = ("import os, signal, sys; from pathlib import Path; import nmt.data.corpora as c\n"
                "def die(*args):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
                "c.shutil.copyfile = die\n"
                "c.ensure_synth(Path(sys.argv[1]), 5, {'train': 40, 'test': 10}, force=True)")


def test_6_a_killed_synth_force_leaves_nothing_the_next_one_does_not_sweep(tmp_path):
    from nmt.data.corpora import SYNTH_PAIR, SYNTH_REVERSE, ensure_synth

    root = tmp_path / "data"
    ensure_synth(root, sizes={"train": 40, "test": 10})
    old = (root / "synth" / SYNTH_REVERSE / "test.gold").read_text()
    subprocess.run([sys.executable, "-c", SYNTH_KILLED, str(root)], check=False,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    synth = root / "synth"
    assert [p for p in synth.iterdir() if ".tmp" in p.name]  # the killed reverse writer's
    assert (synth / SYNTH_REVERSE / "test.gold").read_text() == old  # whole, the old one
    ensure_synth(root, seed=7, sizes={"train": 40, "test": 10}, force=True)
    assert not [p for p in synth.iterdir() if ".tmp" in p.name or ".old-" in p.name]
    assert (synth / SYNTH_PAIR / "manifest.json").is_file()
    assert (synth / SYNTH_REVERSE / "test.gold").read_text() != old


class _FakeEflomal:
    """eflomal's Aligner as the work folder sees it: reads the text, writes both links."""

    seen: list = []

    class Aligner:
        def __init__(self, **options):
            pass

        def align(self, fs, ft, links_filename_fwd, links_filename_rev):
            _FakeEflomal.seen.append(Path(links_filename_fwd).parent)
            lines = fs.read().splitlines()
            for name in (links_filename_fwd, links_filename_rev):
                Path(name).write_text("0-0\n" * len(lines))


def test_6_eflomal_works_in_its_places_scratch_and_sweeps_a_killed_ones(tmp_path, monkeypatch):
    from nmt.align import statistical

    monkeypatch.setattr(statistical, "require_eflomal", lambda: _FakeEflomal)
    run = tmp_path / "runs" / "r"
    subprocess.run([sys.executable, "-c", KILLED, str(run / "eflomal")], check=False,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    [left] = [p for p in run.glob(".eflomal.tmp-*") if p.is_dir()]  # a killed eflomal's
    fwd, rev = statistical.eflomal_links([["a", "b"]], [["x"]], work=run)
    assert fwd == [{(0, 0)}] and rev == [{(0, 0)}]
    assert _FakeEflomal.seen[-1].parent == run and not left.exists()
    assert not list(run.iterdir())  # its own removed when done


# ----------------------------------------------------------------------------- item 4
# Every place in nmt/ that writes or renames a file goes through nmt.core.scratch: it is
# the mechanism itself, or it sits inside a `with scratch(...)` / `with staged(...)` block
# (a private path, swept when its owner is killed), or it is the `write` a caller hands to
# atomic_write / replace_file / replace_text (which write through a scratch file). The
# exceptions, each with its reason: functions that only ever write inside a scratch folder
# a caller made and handed them, and two files that are not replaced but appended to or
# locked.

NMT = REPO / "nmt"
MECHANISM = {"nmt/core/scratch.py"}
SCRATCH_BLOCKS = {"scratch", "staged"}
WRITES_THROUGH = {"atomic_write", "replace_file", "replace_text"}
HANDED_SCRATCH = {  # (module, function): why it may write directly
    ("nmt/data/folder.py", "SplitFiles.__init__"): "the split files of the import's staged folder",
    ("nmt/data/folder.py", "write_manifest"): "the manifest of an import's or synth's staged folder",
    ("nmt/data/pipeline.py", "_Pass1.read"): "pass one's file in the import's staged folder",
    ("nmt/data/store.py", "_fill"): "write_store's scratch folder, then swapped in",
    ("nmt/decoding/export.py", "_swap"):
        "moves the old export (in export's scratch folder after the swap) aside, named, when "
        "it holds files the export did not write",
    ("nmt/data/synth.py", "write_synth"): "the splits of ensure_synth's staged folder",
    ("nmt/data/store.py", "_NpyWriter.__init__"): "an array of write_store's scratch folder",
    ("nmt/data/subwords.py", "_train_one"): "a vocabulary in train_vocab's scratch folder",
    ("nmt/decoding/publish.py", "_transformers_files"): "publish's scratch folder",
    ("nmt/models/marian.py", "tokenizer_files"): "publish's scratch folder",
    ("nmt/training/trainer.py", "Trainer.log"):
        "metrics.jsonl is appended to, never replaced: a cut last line is skipped by "
        "RunDir.read_metrics, and keep_metrics rewrites the file by replace_text",
    ("nmt/core/locks.py", "_flock"): "a lock file: never replaced, it holds its holder's pid",
}
MODES = ("w", "a", "x", "+")


def _mode(call) -> str:
    import ast

    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    method = isinstance(call.func, ast.Attribute) and call.func.attr == "open" and not (
        isinstance(call.func.value, ast.Name) and call.func.value.id in ("os", "gzip"))
    args = call.args if method else call.args[1:]  # Path.open(mode) or open(path, mode)
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        return args[0].value
    return "r"


def _writes(call) -> str | None:
    """What `call` writes or renames a file with, or None."""
    import ast

    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(
        func.value, ast.Name) else None
    if owner == "tempfile" or owner == "shutil" and name in ("move", "copy", "copy2",
                                                             "copyfile", "copytree"):
        return f"{owner}.{name}"
    if owner == "os" and name in ("rename", "replace", "renames"):
        return f"os.{name}"
    if owner == "os" and name == "open":
        flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ""
        return "os.open" if any(f in flags for f in ("O_CREAT", "O_WRONLY", "O_TRUNC")) else None
    if owner in ("np", "numpy") and name.startswith("save") or (owner, name) == ("torch", "save"):
        return f"{owner}.{name}"
    if name in ("write_text", "write_bytes", "savefig", "symlink_to", "hardlink_to", "touch"):
        return name
    if name in ("rename", "replace") and isinstance(func, ast.Attribute) and len(
            call.args) == 1 and not call.keywords:  # Path's (str.replace takes two)
        return f".{name}"
    if name == "open" and owner not in ("os",) and any(m in _mode(call) for m in MODES):
        return f"open({_mode(call)!r})"
    return None


def _bypasses(path: Path) -> list[str]:
    """`module:line function what` of every write in `path` outside the mechanism."""
    import ast

    module = path.relative_to(REPO).as_posix()
    if module in MECHANISM:
        return []
    found: list[str] = []

    def visit(node, scope: list[str], safe: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = [*scope, node.name]
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                isinstance(item.context_expr, ast.Call) and _called(item.context_expr)
                in SCRATCH_BLOCKS for item in node.items):
            safe = True
        if isinstance(node, ast.Call):
            what = _writes(node)
            where = ".".join(scope)
            if what and not safe and (module, where) not in HANDED_SCRATCH:
                found.append(f"{module}:{node.lineno} {where or '<module>'} {what}")
            if _called(node) in WRITES_THROUGH:
                for arg in node.args[1:]:
                    visit(arg, scope, True)
                for child in [node.func, node.args[0]] if node.args else [node.func]:
                    visit(child, scope, safe)
                return
        for child in ast.iter_child_nodes(node):
            visit(child, scope, safe)

    visit(ast.parse(path.read_text(encoding="utf-8")), [], False)
    return found


def _called(call) -> str:
    import ast

    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def test_every_writer_in_nmt_goes_through_the_scratch_mechanism():
    bypassing = [hit for path in sorted(NMT.rglob("*.py")) for hit in _bypasses(path)]
    assert not bypassing, ("writers outside nmt.core.scratch (write inside `with "
                           "scratch(...)`, or through atomic_write/replace_text):\n"
                           + "\n".join(bypassing))


def test_the_writer_check_finds_a_new_bypassing_writer(tmp_path):
    bad = NMT / "core" / "_writer_probe.py"  # parsed where nmt's modules are, then removed
    bad.write_text("import os, numpy as np\nfrom pathlib import Path\n"
                   "def f(p, q):\n    Path(p).write_text('x')\n    os.replace(p, q)\n"
                   "    with open(p, 'a') as h:\n        h.write('y')\n"
                   "    np.save(p, [1])\n    p.replace(q)\n    s = 'a'.replace('a', 'b')\n"
                   "    with scratch(p) as tmp:\n        (tmp / 'ok').write_text('x')\n")
    try:
        found = [hit.split(" ", 2)[2] for hit in _bypasses(bad)]
    finally:
        bad.unlink()
    assert found == ["write_text", "os.replace", "open('a')", "np.save", ".replace"]
