"""scripts/mutants.py (`make mutants`): the catalogue covers evaluation and training, and
--full runs the fast pass's survivors against the whole suite of a toy checkout, where
only a slower test (one through a subprocess) kills some of them."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import load_script

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "mutants.py"


def script():
    return load_script(SCRIPT, register=True)  # dataclasses look their module up there


def test_evaluation_and_training_mutants_are_made_drawn_and_have_fast_tests():
    m = script()
    for path in ("nmt/decoding/evaluate.py", "nmt/training/trainer.py", "nmt/training/schedule.py", "nmt/training/optim.py"):
        assert m.mutants_of(path), path
        tests = m.tests_for(path)
        assert tests and all((REPO / f).is_file() for f in m.test_files(tests)), path
        assert m.area_of(path) in m.AREAS
    loss = {x.new for x in m.mutants_of("nmt/training/loss.py")}
    assert "real = batch.tgt_out == PAD" in loss  # loss_fn's padding mask inverted
    schedule = {x.new for x in m.mutants_of("nmt/training/schedule.py")}
    assert "factor = (warm / step)" in schedule  # inverse square root without the root
    options = dict(named=False, only=None, files=None, sample=0, seed=0, limit=0)
    drawn = m.select(argparse.Namespace(**{**options, "sample": 10**6}))  # all of them
    assert {"nmt/decoding/evaluate.py", "nmt/training/trainer.py"} <= {x.path for x in drawn}
    # every alignment module is in the catalogue, with a fast subset of existing tests
    align = sorted(str(p.relative_to(REPO)) for p in (REPO / "nmt" / "align").glob("*.py")
                   if m.mutants_of(str(p.relative_to(REPO))))
    assert {"nmt/align/guided.py", "nmt/align/statistical.py"} <= set(align)
    assert set(align) <= {x.path for x in drawn}
    for path in align:
        assert all((REPO / f).is_file() for f in m.test_files(m.tests_for(path))), path


def test_the_full_suite_is_reordered_by_file_never_cut():
    m = script()
    mutant = m.Mutant("nmt/decoding/search.py:1:0", "nmt/decoding/search.py", 1, "a", "b", "")
    seconds = {"tests/test_search.py": 1.0, "tests/test_docs.py": 0.5,
               "tests/test_api.py": 9.0, "tests/test_cli.py": 2.0, "tests/test_x.py": 0.1}
    texts = {"tests/test_api.py": "from nmt.decoding.search import greedy"}
    killers = {"nmt/decoding/search.py": {"tests/test_cli.py": 2}, "nmt/training/trainer.py": {"tests/test_x.py": 5}}
    rank = m.suite_order(mutant, seconds, killers, texts)
    assert sorted(rank, key=rank.get) == [
        "tests/test_cli.py",  # killed another mutant of nmt/decoding/search.py
        "tests/test_api.py",  # names the module
        "tests/test_x.py", "tests/test_docs.py",  # the rest, quickest first
        "tests/test_search.py"]  # the fast subset, which passed already


TOY = {
    "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    "nmt/__init__.py": "",
    "nmt/toy.py": """
        def add(a, b):
            return a + b


        def scale(x):
            return x * 3


        def clip(x):
            return x if x > 0 else 0
        """,
    "tests/test_fast.py": """
        from nmt.toy import add


        def test_add():
            assert add(2, 3) == 5
        """,
    "tests/test_slow.py": """
        import subprocess
        import sys

        from nmt.toy import clip


        def test_clip():
            assert (clip(-1), clip(0.5), clip(2)) == (0, 0.5, 2)


        def test_scale_in_a_subprocess(tmp_path):  # sees the mutant through PYTHONPATH only
            code = "from nmt.toy import scale; assert scale(2) == 6, scale(2)"
            subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
        """,
}


def test_full_mode_kills_with_the_whole_suite_what_the_fast_tests_miss(tmp_path):
    root = tmp_path / "toy"
    for name, text in TOY.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    out = tmp_path / "mutants.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), "--files",
                           "nmt/toy.py", "--tests", "tests/test_fast.py", "--full", "--json",
                           str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    outcome = {x["new"]: (x["fast"], x["full"], x["full_by"]) for x in result["mutants"]}
    assert outcome == {
        "return a - b": ("killed", "", ""),
        "return x / 3": ("survived", "killed", "tests/test_slow.py::test_scale_in_a_subprocess"),
        "return x * 2": ("survived", "killed", "tests/test_slow.py::test_scale_in_a_subprocess"),
        "return x if x >= 0 else 0": ("survived", "survived", ""),  # equivalent
        "return x if x > 1 else 0": ("survived", "killed", "tests/test_slow.py::test_clip"),
        "return x if x > 0 else 1": ("survived", "killed", "tests/test_slow.py::test_clip"),
    }
    assert result["survived"] == ["nmt/toy.py:10:0"] and result["unconfirmed"] == []
    assert result["areas"] == {"nmt/toy.py": {"mutants": 6, "fast_killed": 1, "killed": 5}}
    assert result["baseline"]["failing_unmutated"] == [] and result["baseline"]["files"] == 2
    assert "nmt/toy.py" in done.stdout and "1/6" in done.stdout and "5/6" in done.stdout
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
