"""The benchmarks take their data folders from an option or an environment variable, never
from a path beside the checkout; without one they stop with one line, not a traceback.
Every case stops before any model is loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
GOLD = ("--gold-dir", "NMT_ALIGN_GOLD_DIR", "hansards.en-fr.gold")
RAW = ("--raw", "NMT_MULTI30K_DIR", "{split}.{lang}.gz")


def _run(script: str, *args: str, env: dict[str, str] | None = None):
    clean = {k: v for k, v in os.environ.items() if k not in ("NMT_ALIGN_GOLD_DIR",
                                                              "NMT_MULTI30K_DIR")}
    return subprocess.run([sys.executable, str(BENCHMARKS / script), *args], text=True,
                          capture_output=True, env=clean | (env or {}), timeout=120)


@pytest.mark.parametrize("script, args, names", [
    ("alignment.py", [], GOLD),
    ("alignment.py", ["--only", "hansards"], GOLD),
    ("adapt_curve.py", [], GOLD),
    ("normalization.py", [], RAW),
])
def test_missing_folder_is_one_line(script, args, names):
    done = _run(script, *args)
    assert done.returncode != 0 and done.stdout == ""
    message = done.stderr.strip()
    assert "\n" not in message and "Traceback" not in message
    assert all(name in message for name in names), message
    assert "shared" not in message


@pytest.mark.parametrize("script, option, env", [
    ("adapt_curve.py", "--gold-dir", "NMT_ALIGN_GOLD_DIR"),
    ("normalization.py", "--raw", "NMT_MULTI30K_DIR"),
])
def test_folder_that_does_not_exist_is_one_line(tmp_path, script, option, env):
    missing = tmp_path / "nowhere"
    for done in (_run(script, option, str(missing)), _run(script, env={env: str(missing)})):
        message = done.stderr.strip()
        assert done.returncode != 0 and "\n" not in message, message
        assert str(missing) in message and option in message and env in message


def test_gold_folder_without_its_files_names_them(tmp_path):
    (tmp_path / "hansards.en-fr").write_text("a b\tc d\n")
    done = _run("adapt_curve.py", env={"NMT_ALIGN_GOLD_DIR": str(tmp_path)})
    message = done.stderr.strip()
    assert done.returncode != 0 and "\n" not in message
    assert "has no hansards.en-fr.gold" in message


def test_raw_folder_without_matching_files(tmp_path):
    done = _run("normalization.py", "--raw", str(tmp_path), "--glob", "test*.gz")
    message = done.stderr.strip()
    assert done.returncode != 0 and "\n" not in message
    assert "test*.gz" in message and "NMT_MULTI30K_DIR" in message


def test_benchmarks_name_no_folder_beside_the_checkout():
    for path in BENCHMARKS.glob("*.py"):
        text = path.read_text()
        assert "../shared" not in text and '"shared"' not in text, path
