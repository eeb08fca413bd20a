"""Tests for the `nmt` command line (nmt/cli.py), run in-process.

Errors caused by input must print exactly one line `nmt: error: ...` on stderr and exit 2.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

import nmt.cli
import nmt.data.corpora
from nmt.core.errors import NMTError

REPO = Path(__file__).resolve().parents[1]


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """Run `nmt ARGS` in this process; returns (exit code, stdout, stderr)."""
    capsys.readouterr()  # drop anything printed before
    old_argv = sys.argv
    sys.argv = ["nmt", *map(str, args)]
    try:
        nmt.cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old_argv
    out, err = capsys.readouterr()
    return code, out, err


def assert_user_error(result: tuple[int, str, str], *fragments: str) -> str:
    """Exit code 2, one `nmt: error:` line on stderr containing every fragment, no traceback."""
    code, out, err = result
    assert code == 2, (code, out, err)
    assert "Traceback" not in out + err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nmt: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _gz(path: Path, data: bytes) -> None:
    path.write_bytes(gzip.compress(data))


def _raw_dir(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    raw.mkdir()
    _gz(raw / "train.de.gz", "Zwei Männer spielen.\n\nEin Hund läuft.\n".encode())
    _gz(raw / "train.en.gz", b"Two men play.\nA cat.\nA dog runs.\n")
    _gz(raw / "val.de.gz", "Ein Mädchen.\n".encode())
    _gz(raw / "val.en.gz", b"A girl.\n")
    return raw


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(text, encoding="utf-8")
    return path


HELP = {
    ("data", "download"): ["--pair", "--from", "--root"],
    ("data", "synth"): ["--root", "--seed", "--force"],
    ("data", "prepare"): ["--config", "--set"],
    ("train",): ["--config", "--set", "--resume"],
    ("translate",): ["--run", "--input", "--beam", "--n-best"],
    ("evaluate",): ["--run", "--split", "--beam", "--limit"],
}


@pytest.mark.parametrize("verb", list(HELP), ids=" ".join)
def test_help_of_each_verb(capsys, verb):
    code, out, err = run_cli(capsys, *verb, "--help")
    assert code == 0 and err == ""
    assert f"nmt {' '.join(verb)}" in out
    for option in HELP[verb]:
        assert option in out


def test_top_level_help_lists_the_verbs(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for verb in ("data", "train", "translate", "evaluate"):
        assert verb in out


def test_config_key_typo(capsys, tmp_path):
    cfg = _config(tmp_path, "model: {family: bahdanau, hiden_size: 64}\n")
    assert_user_error(run_cli(capsys, "train", "--config", cfg),
                      str(cfg), "'model.hiden_size'", "hidden_size")
    assert_user_error(run_cli(capsys, "data", "prepare", "-c", cfg), "'model.hiden_size'")


def test_config_wrong_type(capsys, tmp_path):
    cfg = _config(tmp_path, "model: {family: bahdanau, hidden_size: lots}\n")
    assert_user_error(run_cli(capsys, "data", "prepare", "--config", cfg),
                      "'model.hidden_size'", "must be int")
    cfg = _config(tmp_path, "model: {family: bahdanau}\n")
    assert_user_error(run_cli(capsys, "data", "prepare", "--config", cfg,
                              "--set", "vocab.joint=3"), "'vocab.joint'", "true or false")


def test_missing_config_file(capsys, tmp_path):
    assert_user_error(run_cli(capsys, "data", "prepare", "--config", tmp_path / "nope.yaml"),
                      "nope.yaml", "not found")


def test_unknown_corpus(capsys, tmp_path):
    assert_user_error(run_cli(capsys, "data", "download", "wmt14", "--from", _raw_dir(tmp_path),
                              "--root", tmp_path / "data"), "unknown corpus 'wmt14'", "multi30k")


def test_unknown_pair(capsys, tmp_path):
    assert_user_error(run_cli(capsys, "data", "download", "multi30k", "--pair", "de-xx",
                              "--root", tmp_path / "data"), "'de-xx'")


def test_pair_without_hub_suggests_from(capsys, tmp_path):
    assert_user_error(run_cli(capsys, "data", "download", "multi30k", "--pair", "cs-en",
                              "--root", tmp_path / "data"), "--from")


def test_from_missing_dir(capsys, tmp_path):
    assert_user_error(run_cli(capsys, "data", "download", "--from", tmp_path / "nowhere",
                              "--root", tmp_path / "data"), str(tmp_path / "nowhere"), "not found")


def test_mismatched_line_counts(capsys, tmp_path):
    raw = _raw_dir(tmp_path)
    _gz(raw / "val.en.gz", b"A girl.\nA boy.\n")
    assert_user_error(run_cli(capsys, "data", "download", "--from", raw,
                              "--root", tmp_path / "data"),
                      str(raw / "val.de.gz"), str(raw / "val.en.gz"), "1 lines", "has 2")


def test_invalid_utf8(capsys, tmp_path):
    raw = _raw_dir(tmp_path)
    _gz(raw / "train.de.gz", "Zwei Männer.\n".encode() + "Grüße\n".encode("cp1252") + b"x\n")
    assert_user_error(run_cli(capsys, "data", "download", "--from", raw,
                              "--root", tmp_path / "data"), f"{raw / 'train.de.gz'}:2:", "UTF-8")


def test_empty_corpus(capsys, tmp_path):
    raw = _raw_dir(tmp_path)
    _gz(raw / "train.de.gz", b"")
    _gz(raw / "train.en.gz", b"")
    assert_user_error(run_cli(capsys, "data", "download", "--from", raw,
                              "--root", tmp_path / "data"), str(raw / "train.de.gz"), "empty")


def test_translate_missing_run_dir(capsys, tmp_path):
    assert_user_error(run_cli(capsys, "translate", "--run", tmp_path / "no_run", "Hallo"),
                      str(tmp_path / "no_run"), "not found")
    assert_user_error(run_cli(capsys, "evaluate", "--run", tmp_path / "no_run"),
                      str(tmp_path / "no_run"))


def test_translate_bad_beam(capsys, tmp_path):
    assert_user_error(run_cli(capsys, "translate", "-r", tmp_path, "--beam", "0", "x"), "--beam")
    assert_user_error(run_cli(capsys, "translate", "-r", tmp_path, "--beam", "2",
                              "--n-best", "3", "x"), "--n-best 3", "--beam 2")


@pytest.mark.parametrize("args", [["bogus"], ["train"], ["data", "download", "--nope"],
                                  ["data", "synth", "--seed", "abc"]], ids=" ".join)
def test_usage_errors_are_one_line_with_exit_2(capsys, args):
    line = assert_user_error(run_cli(capsys, *args))
    assert line.endswith("--help`)"), line  # says where to look
    if args[0] == "data":  # the subcommand's own help, named as the user typed it
        assert line.endswith(f"(see `nmt data {args[1]} --help`)"), line


def test_debug_shows_the_exception(capsys, tmp_path):
    sys.argv, old = ["nmt", "--debug", "data", "download", "--pair", "de-xx"], sys.argv
    try:
        with pytest.raises(NMTError, match="de-xx"):
            nmt.cli.main()
    finally:
        sys.argv = old
        nmt.cli.STATE["debug"] = False


def test_interrupt_exits_130(capsys, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(nmt.data.corpora, "ensure_synth", interrupted)
    code, _, err = run_cli(capsys, "data", "synth", "--root", tmp_path)
    assert code == 130 and err.strip() == "nmt: interrupted"


def test_data_download_from_dir(capsys, tmp_path):
    code, out, err = run_cli(capsys, "data", "download", "multi30k", "--pair", "de-en",
                             "--from", _raw_dir(tmp_path), "--root", tmp_path / "data")
    assert code == 0 and err == ""
    assert "train: 2 pairs (1 empty pairs dropped)" in out
    assert "val: 1 pairs" in out
    out_dir = tmp_path / "data" / "multi30k" / "de-en"
    assert f"wrote {out_dir}" in out
    assert (out_dir / "train.de").read_text(encoding="utf-8") == \
        "Zwei Männer spielen.\nEin Hund läuft.\n"


def test_data_synth(capsys, tmp_path):
    code, out, err = run_cli(capsys, "data", "synth", "--root", tmp_path)
    assert code == 0 and err == ""
    out_dir = tmp_path / "synth" / "src-tgt"
    names = {p.name for p in out_dir.iterdir()}
    for split in ("train", "val", "test"):
        assert {f"{split}.src", f"{split}.tgt", f"{split}.gold"} <= names
        lines = [len((out_dir / f"{split}.{ext}").read_text(encoding="utf-8").splitlines())
                 for ext in ("src", "tgt", "gold")]
        assert lines[0] > 0 and len(set(lines)) == 1
        assert f"{split}: {lines[0]} pairs" in out
    manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["pair"] == "src-tgt"
    assert {s: e["lines"] for s, e in manifest["splits"].items() if s in ("train", "val", "test")} \
        == {s: len((out_dir / f"{s}.src").read_text().splitlines()) for s in ("train", "val", "test")}
    assert f"wrote {out_dir}" in out


def test_python_m_nmt_help():
    proc = subprocess.run([sys.executable, "-m", "nmt", "--help"], cwd=REPO, check=False,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout and "translate" in proc.stdout


def test_the_align_summary_line_gives_aer_beside_the_diagonal_only_with_gold():
    from nmt.cli.align import summary_line

    row = {"entropy": 1.25, "eos_mass": 0.05}
    scored = {**row, "aer": 0.2, "precision": 0.8, "recall": 0.7, "diagonal_aer": 0.5}
    assert "AER" not in summary_line(row)
    assert "AER 0.200 (P 0.800 R 0.700; diagonal 0.500)" in summary_line(scored)
