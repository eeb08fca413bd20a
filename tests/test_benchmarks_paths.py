"""The benchmarks take their data folders from an option or an environment variable, never
from a path beside the checkout; without one they stop with one line, not a traceback.
Every case stops before any model is loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import load_script

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


def test_time_to_bleu_without_the_corpus_or_the_config_stops_before_training(tmp_path):
    """benchmarks/time_to_bleu.py checks every family's config and corpus first: one line
    naming the missing file and the command that makes it, and no training started."""
    config = tmp_path / "t.yaml"
    config.write_text(f"data: {{root: {tmp_path / 'data'}, corpus: multi30k, pair: de-en}}\n"
                      "model: {family: bahdanau}\n")
    done = subprocess.run([sys.executable, str(BENCHMARKS / "time_to_bleu.py"), str(config),
                           "--out", str(tmp_path / "out"), "--runs-dir", str(tmp_path / "runs")],
                          text=True, capture_output=True, timeout=120, cwd=tmp_path)
    message = done.stderr.strip()
    assert done.returncode != 0 and "\n" not in message and "Traceback" not in message
    assert "val.de" in message and "nmt data download multi30k" in message, message
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()
    done = subprocess.run([sys.executable, str(BENCHMARKS / "time_to_bleu.py"), "nosuch"],
                          text=True, capture_output=True, timeout=120, cwd=tmp_path)
    assert done.returncode != 0 and "nosuch.yaml" in done.stderr and "\n" not in done.stderr.strip()
    done = subprocess.run([sys.executable, str(BENCHMARKS / "time_to_bleu.py"), "--report",
                           "--out", str(tmp_path / "none")], text=True, capture_output=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode != 0 and "no results yet" in done.stderr


def test_time_to_bleu_reports_the_median_over_seeds_and_lists_each(tmp_path):
    """The table takes each family's median test BLEU over its seeds and lists every seed;
    the validation curve is drawn from the same results."""
    import json

    module = load_script(BENCHMARKS / "time_to_bleu.py")
    sig = {"bleu_signature": "nrefs:1|case:mixed", "chrf_signature": "nc:6"}

    def result(family, seed, bleu):
        return {"family": family, "seed": seed, "steps": 100 * seed, "tokens_per_s": 1000,
                "valid": [[10.0, 50, 5.0], [20.0, 100, 9.0 + seed]], "averaged": {},
                "test": {"test_2016_flickr": {"bleu": bleu, "chrf": bleu + 20, **sig}}}

    rows = [result("bahdanau", 1, 30.0), result("bahdanau", 2, 36.0),
            result("transformer", 1, 33.0), result("bahdanau", 3, 31.0)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = module.report(tmp_path)
    line = next(x for x in table.splitlines() if x.startswith("| bahdanau"))
    assert "**31.00**" in line and "30.00/36.00/31.00" in line and "1, 2, 3" in line
    assert "**33.00**" in next(x for x in table.splitlines() if x.startswith("| transformer"))
    assert "nrefs:1|case:mixed" in table and (tmp_path / "validation.png").stat().st_size > 0


def test_bench_aligns_baselines_read_pairs_or_a_split_without_any_run(tmp_path, monkeypatch):
    """benchmarks/alignment.py: the diagonal's row of each gold, before any run is trained,
    on the first --limit pairs (a --limit that once met the whole gold file)."""
    import argparse

    bench = load_script(BENCHMARKS / "alignment.py")
    (tmp_path / "hansards.en-fr").write_text("a b c ||| x y z\nd e ||| u v\nf ||| w\n")
    (tmp_path / "hansards.en-fr.gold").write_text("1-1 2-2 3-3\n1-2 2-1\n1-1\n")
    args = argparse.Namespace(limit=2, eflomal=False, symmetrize=[], threads=1)
    [row] = bench.baseline_rows(bench.hansards_dataset(tmp_path), args)
    assert row["row"] == "diagonal"  # of the first 2 pairs: 3 of their 5 gold links
    assert row["aer"] == pytest.approx(1 - (3 + 3) / (5 + 5))
    monkeypatch.chdir(tmp_path)  # the synthetic corpus is made under ./data
    [synth] = bench.baseline_rows(bench.synth_dataset(), argparse.Namespace(
        limit=20, eflomal=False, symmetrize=[], threads=1))
    assert 0.5 < synth["aer"] < 1.0 and (tmp_path / "data" / "synth").is_dir()


def test_time_to_bleus_table_takes_a_seeds_last_result_and_names_its_machines(tmp_path):
    """A re-run of a seed replaces its earlier result in the table (it once pooled both)."""
    import json

    bench = load_script(BENCHMARKS / "time_to_bleu.py")

    def result(seed, bleu, machine):
        return {"run": f"r{seed}", "family": "bahdanau", "date": "2026-12-07", "machine": machine,
                "precision": "bf16", "seed": seed, "steps": 10, "tokens_per_s": 100,
                "valid": [[1.0, 10, bleu]], "test": {"test": {
                    "bleu": bleu, "chrf": 50.0, "bleu_signature": "b", "chrf_signature": "c"}},
                "averaged": {}}

    rows = [result(1, 30.0, "A"), result(2, 40.0, "A"), result(1, 34.0, "B")]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = bench.report(tmp_path)
    [row] = [line for line in text.splitlines() if line.startswith("| bahdanau")]
    assert "| 1, 2 |" in row and "**37.00**" in row and "34.00/40.00" in row, row
    assert "2026-12-07, A; 2026-12-07, B" in text
