"""`nmt data list` and `nmt data show` (nmt/data/overview.py) on corpora written by hand
in the manifest's old and new schemas, and `nmt train` on a corpus without the config's
test split."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from nmt.core.errors import NMTError
from nmt.core.plotting import plot_lengths
from nmt.data.corpora import SYNTH_PAIR
from nmt.data.overview import (
    JOINT_WORDS,
    MAX_WORDS,
    SideStats,
    find_corpora,
    read_manifest,
    split_stats,
)
from tests.test_cli import assert_user_error, run_cli

TRAIN = [("ein Hund läuft", "a dog runs"),
         ("zwei Männer spielen Fußball im Park", "two men play football in the park"),
         ("Hallo", "hello"), ("eine Frau", "a woman"), ("der Ball ist rot", "the ball is red")]
VAL = [("ein Mann", "a man"), ("die Katze schläft auf dem Sofa", "the cat sleeps on the sofa")]


def _write(folder: Path, splits: dict[str, list[tuple[str, str]]], langs=("de", "en")) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    entries = {}
    for split, pairs in splits.items():
        sha = {}
        for lang, column in zip(langs, (0, 1)):
            text = "".join(p[column] + "\n" for p in pairs)
            (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")
            sha[lang] = hashlib.sha256(text.encode()).hexdigest()
        entries[split] = {"lines": len(pairs), "sha256": sha}
    return entries


def new_corpus(root: Path, name: str = "mine") -> Path:
    """A corpus in the import pipeline's schema (source, seed, filters, split origins)."""
    folder = root / name / "de-en"
    entries = _write(folder, {"train": TRAIN, "val": VAL, "test": VAL})
    for split, entry in entries.items():
        entry["origin"] = "source" if split == "train" else "drawn"
    manifest = {"corpus": name, "pair": "de-en", "created": "2026-12-04 18:00:00",
                "source": {"kind": "files", "files": {"/in/a.de": "0" * 64, "/in/a.en": "1" * 64}},
                "seed": 1,
                "filters": {"empty": {"on": True, "dropped": 12},
                            "min_words": {"value": 1, "dropped": 0},
                            "max_words": {"value": 250, "dropped": 3},
                            "max_ratio": {"value": 9.0, "dropped": 5},
                            "same": {"on": False, "dropped": 0},
                            "overlap": {"on": True, "dropped": 1},
                            "duplicates": {"on": True, "dropped": 40}},
                "splits": entries}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return folder


def old_corpus(root: Path) -> Path:
    """A corpus as `nmt data download` wrote it before the import pipeline."""
    folder = root / "multi30k" / "de-en"
    entries = _write(folder, {"train": TRAIN, "val": VAL, "test_2016_flickr": VAL})
    for entry in entries.values():
        entry.update(dropped_empty=0, bom_stripped=0)
    entries["train"]["dropped_empty"] = 2
    (folder / "manifest.json").write_text(json.dumps(
        {"source": "hub:bentrevett/multi30k", "pair": "de-en", "created": "2026-11-01 10:00:00",
         "splits": entries}))
    return folder


def test_list_reads_both_schemas_and_marks_a_bad_manifest(capsys, tmp_path):
    root = tmp_path / "data"
    new_corpus(root)
    old_corpus(root)
    _write(root / "loose" / "cs-en", {"train": TRAIN}, ("cs", "en"))
    broken = root / "broken" / "en-fr"
    _write(broken, {"train": TRAIN}, ("en", "fr"))
    (broken / "manifest.json").write_text('{"source": "dir:/x", "splits": ')
    (root / "mine" / ".de-en.tmp-1").mkdir()  # an import under way: not a corpus
    code, out, err = run_cli(capsys, "data", "list", "--root", root)
    assert code == 0 and err == "", err
    lines = out.splitlines()
    assert lines[0].split() == ["corpus", "pair", "splits", "(pairs)", "source", "created"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {"broken", "loose", "mine", "multi30k"}
    assert "train 5, val 2, test 2" in rows["mine"]
    assert "files /in/a.de /in/a.en" in rows["mine"] and "2026-12-04 18:00:00" in rows["mine"]
    assert "train 5, val 2, test_2016_flickr 2" in rows["multi30k"]
    assert "hf bentrevett/multi30k" in rows["multi30k"]
    assert "train 5" in rows["loose"] and "[no manifest]" in rows["loose"]
    assert f"{broken / 'manifest.json'}:1: not valid JSON" in rows["broken"]
    assert "train 5" in rows["broken"]  # counted from its files


@pytest.mark.parametrize("text, says", [
    ('[1, 2]', "expected: a JSON object"),
    ('{"source": "dir:/x", "splits": {"train": {"lines": -3}}}', "splits.train.lines"),
    ('{"source": {"id": "x"}}', "'source' has a 'kind'"),
    ('{"pair": "de-en"}', "'source'"),
    ('{"source": "dir:/x", "pair": "fr-en"}', "'pair' is 'fr-en'"),
    ('{"source": "dir:/x", "filters": {"same": {"on": true}}}', "filters.same.dropped"),
    ('{"source": "dir:/x", "seed": "one"}', "'seed'"),
])
def test_a_manifest_of_another_shape_is_one_line_naming_the_file(tmp_path, text, says):
    path = tmp_path / "de-en" / "manifest.json"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(NMTError) as caught:
        read_manifest(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: not a corpus manifest") and says in message, message
    assert "\n" not in message


def test_show_prints_sizes_and_filter_counts_and_draws_the_lengths(capsys, tmp_path,
                                                                     monkeypatch):
    root = tmp_path / "data"
    new_corpus(root)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "data", "show", "mine", "--root", root)
    assert code == 0 and err == "", err
    lines = out.splitlines()
    assert lines[0] == f"corpus mine, pair de-en: {root / 'mine' / 'de-en'}"
    assert lines[1] == "source: files /in/a.de /in/a.en; created 2026-12-04 18:00:00; seed 1"
    # train: de 3+6+1+2+4 = 16 words, median 3, max 6; en 3+7+1+2+4 = 17 words, max 7
    assert any(line.split() == ["train", "5", "de", "16", f"{sum(len(s) for s, _ in TRAIN)}",
                                "3.2", "3.0", "6"] for line in lines), out
    assert any(line.split() == ["en", "17", f"{sum(len(t) for _, t in TRAIN)}", "3.4", "3.0",
                                "7"] for line in lines), out
    assert any(line.split()[:4] == ["val", "(drawn)", "2", "de"] for line in lines), out
    start = lines.index("filters on the training pairs (a pair is counted by the first "
                        "filter that drops it):")
    assert [line.split() for line in lines[start + 1:-1]] == [
        ["empty", "on", "12", "dropped"], ["min_words", "1", "0", "dropped"],
        ["max_words", "250", "3", "dropped"], ["max_ratio", "9", "5", "dropped"],
        ["same", "off"], ["overlap", "on", "1", "dropped"], ["duplicates", "on", "40", "dropped"]]
    png = Path("reports/data/mine-de-en-lengths.png")
    assert lines[-1].startswith(f"wrote {png} ")
    assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {p.name for p in (root / "mine" / "de-en").iterdir()} == {
        "manifest.json", *(f"{s}.{lang}" for s in ("train", "val", "test") for lang in ("de", "en"))
    }  # a read command: nothing written into the corpus folder


def test_show_reads_an_old_manifest_the_reverse_pair_and_a_bad_one(capsys, tmp_path):
    root = tmp_path / "data"
    folder = old_corpus(root)
    code, out, _ = run_cli(capsys, "data", "show", "multi30k", "--pair", "en-de", "--root",
                           root, "--out", tmp_path / "m.svg")
    assert code == 0
    assert f"corpus multi30k, pair en-de: {folder}" in out
    assert "source: hf bentrevett/multi30k; created 2026-11-01 10:00:00" in out
    assert out.splitlines()[3].split()[:3] == ["train", "5", "en"]  # en is the source here
    assert [line.split() for line in out.splitlines() if line.endswith(" dropped")] == [
        ["empty", "on", "2", "dropped"]]
    assert (tmp_path / "m.svg").read_text().startswith("<?xml")
    (folder / "manifest.json").write_text("{")
    code, out, _ = run_cli(capsys, "data", "show", "multi30k", "--root", root,
                           "--out", tmp_path / "m.png")
    assert code == 0
    assert f"manifest: {folder / 'manifest.json'}:1: not valid JSON" in out
    assert "train" in out and (tmp_path / "m.png").is_file()
    assert_user_error(run_cli(capsys, "data", "show", "multi30k", "--pair", "fr-en", "--root",
                              root), "no pair 'fr-en'", "de-en")
    assert_user_error(run_cli(capsys, "data", "show", "nope", "--root", root),
                      str(root / "nope"), "nmt data list")


def test_show_names_both_files_when_the_sides_differ(capsys, tmp_path):
    root = tmp_path / "data"
    folder = new_corpus(root)
    with open(folder / "val.en", "a", encoding="utf-8") as handle:
        handle.write("one line too many\n")
    assert_user_error(run_cli(capsys, "data", "show", "mine", "--root", root,
                              "--out", tmp_path / "x.png"),
                      f"{folder / 'val.de'} ends at line 2 but {folder / 'val.en'} goes on")


def test_lengths_are_counted_streaming_with_exact_totals_beyond_the_cap(tmp_path):
    """Histograms are capped (MAX_WORDS, JOINT_WORDS) but totals, mean, median and max are
    exact; split_stats never holds the lines."""
    lengths = [1, 2, 2, 3, 7, MAX_WORDS + 50]
    (tmp_path / "a.x").write_text("".join(" ".join(["w"] * n) + "\n" for n in lengths))
    (tmp_path / "a.y").write_text("".join(" ".join(["v"] * (n + 1)) + "\n" for n in lengths))
    stats = split_stats(tmp_path / "a.x", tmp_path / "a.y", joint=True)
    assert stats.pairs == 6 and stats.src.words == sum(lengths)
    assert stats.src.summary(6) == (sum(lengths) / 6, 2.5, MAX_WORDS + 50)
    assert stats.tgt.summary(6)[1:] == (3.5, MAX_WORDS + 51)
    assert stats.src.counts[MAX_WORDS] == 1 and stats.src.counts.sum() == 6
    assert stats.joint.shape == (JOINT_WORDS + 1, JOINT_WORDS + 1)
    assert stats.joint[2, 3] == 2 and stats.joint[JOINT_WORDS, JOINT_WORDS] == 1
    side = SideStats()
    side.add([5])
    assert side.summary(1) == (5.0, 5.0, 5)
    assert SideStats().summary(0) == (0.0, 0.0, 0)  # an empty split: zeros, no division


def test_plot_lengths_draws_a_png_for_one_and_for_several_splits(tmp_path):
    joint = np.zeros((JOINT_WORDS + 1, JOINT_WORDS + 1), np.int64)
    joint[3, 4] = 10
    counts = np.bincount([3] * 10, minlength=MAX_WORDS + 1)
    for splits in ({"train": (counts, counts, 10)},
                   {s: (counts, counts, 10) for s in ("train", "val", "test", "test_2017")}):
        path = plot_lengths(joint, splits, ("de", "en"), "train", tmp_path / f"{len(splits)}.png",
                            "mine de-en")
        assert path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(NMTError, match="unsupported figure format"):
        plot_lengths(joint, splits, ("de", "en"), "train", tmp_path / "x.jpg")


def test_list_on_an_empty_or_missing_root(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "data", "list", "--root", tmp_path)
    assert code == 0 and out.startswith(f"no corpora under {tmp_path}; import one")
    assert_user_error(run_cli(capsys, "data", "list", "--root", tmp_path / "nope"),
                      str(tmp_path / "nope"), "--root")
    assert find_corpora(tmp_path) == []


def _tiny_config(tmp_path: Path, data_root: Path, **data) -> Path:
    """Five steps of a tiny GRU on the synthetic corpus, one thread."""
    raw = {"name": "tiny", "runs_dir": str(tmp_path / "runs"),
           "data": {"root": str(data_root), "corpus": "synth", "pair": SYNTH_PAIR,
                    "max_len": 12, **data},
           "vocab": {"size": 600},
           "model": {"family": "bahdanau", "emb_size": 16, "hidden_size": 16, "dropout": 0.0},
           "train": {"batch_tokens": 400, "max_steps": 5, "valid_every": 5, "log_every": 5,
                     "valid_sentences": 5, "align_sentences": 0, "threads": 1,
                     "precision": "fp32"},
           "decode": {"beam": 1}}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_train_without_the_configs_test_split_keeps_the_run_and_says_how_to_evaluate(
        capsys, tmp_path, data_root):
    """data.test names a split the corpus lacks (a user's corpus under the Multi30k config's
    test_2016_flickr): training finishes, exits 0, keeps its checkpoints and metrics, and one
    line names the split, the splits there are and the command that evaluates one."""
    cfg = _tiny_config(tmp_path, data_root, test="test_2016_flickr")
    code, out, err = run_cli(capsys, "train", "--config", cfg)
    run = tmp_path / "runs" / "tiny"
    assert code == 0, (out, err)
    assert "Traceback" not in out + err
    corpus = data_root / "synth" / SYNTH_PAIR
    what = f"the test split 'test_2016_flickr' is not in {corpus} (it has: train, val, test)"
    assert err.startswith(f"note: {what}; training goes on")  # before the training's lines
    assert "(--set data.test=test evaluates test)" in err.splitlines()[0]
    last = out.splitlines()[-1]
    assert last.startswith(f"{what}: not evaluated; the run is kept in {run}")
    assert f"`nmt evaluate --run {run} --split test`" in last and "--set data.test=test" in last
    assert (run / "checkpoints" / "best.pt").is_file() and (run / "metrics.jsonl").is_file()
    assert not (run / "scores.json").exists()


def test_train_without_the_validation_split_fails_before_training(capsys, tmp_path, data_root):
    cfg = _tiny_config(tmp_path, data_root, valid="dev")
    assert_user_error(run_cli(capsys, "train", "--config", cfg),
                      "split 'dev' is not in", "it has: test, train, val")
    assert not (tmp_path / "runs" / "tiny" / "checkpoints").exists()


def test_another_corpus_gets_its_own_default_run_name():
    """`--set data.corpus=mine` on a Multi30k config trains runs/transformer_mine: a run on
    a user's corpus never lands in (or resumes) the Multi30k run of the same file."""
    from nmt.models.checks import load_config

    path = Path(__file__).resolve().parents[1] / "configs" / "multi30k" / "transformer.yaml"
    assert load_config(path, ["data.corpus=mine", "data.pair=de-en"]).name == "transformer_mine"
    assert load_config(path, ["data.corpus=mine", "data.pair=en-de"]).name == \
        "transformer_mine_en-de"
    assert load_config(path, ["data.corpus=multi30k"]).name == "transformer"
    assert load_config(path, ["data.corpus=mine", "name=x"]).name == "x"


def test_the_joint_plot_shows_train_or_else_the_first_split():
    from nmt.data.overview import _joint_split

    assert _joint_split(["valid", "train", "test"]) == "train"
    assert _joint_split(["valid", "test"]) == "valid"
    assert _joint_split([]) == "train"


def test_show_notes_a_split_whose_files_hold_other_than_the_manifest_says(capsys, tmp_path):
    root = tmp_path / "data"
    folder = new_corpus(root)
    code, out, _ = run_cli(capsys, "data", "show", "mine", "--root", root, "--out",
                           tmp_path / "a.png")
    assert code == 0 and "note:" not in out  # files as written: nothing to note
    (folder / "val.de").write_text("ein Mann\n", encoding="utf-8")
    (folder / "val.en").write_text("a man\n", encoding="utf-8")
    code, out, _ = run_cli(capsys, "data", "show", "mine", "--root", root, "--out",
                           tmp_path / "b.png")
    notes = [line.strip() for line in out.splitlines() if "note:" in line]
    assert code == 0 and notes == ["note: manifest.json says val has 2 pairs; the files hold 1"]
