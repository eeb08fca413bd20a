"""Tests for `nmt data import` (nmt/data/sources.py, pipeline.py, folder.py): one corpus of
our own making imported four ways, drawn splits, counted filters, bad inputs, atomic writes.

Hugging Face datasets are local folders in the hub's own shapes (parquet with a
`translation` feature and a README `configs:` section; jsonl with flat fields), loaded
through the same `load_dataset(..., streaming=True)` call as a hub id, offline.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import lzma
import random
import socket
import unicodedata
from pathlib import Path

import pytest

from nmt.core.errors import NMTError
from nmt.core.progress import rate
from nmt.data.corpora import load_split
from nmt.data.pipeline import Filters, import_from, run
from nmt.data.sources import FilePair
from tests.test_cli import assert_user_error, run_cli

LEXICON = {"mädchen": "girl", "junge": "boy", "hund": "dog", "katze": "cat", "straße": "street",
           "haus": "house", "sieht": "sees", "läuft": "runs", "über": "over", "groß": "big",
           "klein": "small", "rot": "red", "grün": "green", "ball": "ball", "buch": "book",
           "fluss": "river", "brücke": "bridge", "heute": "today", "oft": "often", "nie": "never"}


def make_pairs(n: int = 300, seed: int = 5) -> list[tuple[str, str]]:
    """Distinct pairs of 3-9 words; the target is the source's words translated, reversed."""
    rng, pairs, seen = random.Random(seed), [], set()
    while len(pairs) < n:
        words = [rng.choice(list(LEXICON)) for _ in range(rng.randint(3, 9))]
        pair = (" ".join(words) + " .", " ".join(LEXICON[w] for w in reversed(words)) + " .")
        if pair not in seen:
            seen.add(pair)
            pairs.append(pair)
    return pairs


def text(lines, nfd: bool = False, crlf: bool = False) -> bytes:
    form = "NFD" if nfd else "NFC"
    return "".join(unicodedata.normalize(form, x) + ("\r\n" if crlf else "\n")
                   for x in lines).encode()


def write_files(folder: Path, pairs, names=("corpus.de.gz", "corpus.en.xz")) -> list[Path]:
    """Two parallel files, compressed as their names say; German decomposed (NFD), English
    with CRLF line ends: normalising gives the same text as the other sources."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / name for name in names]
    for path, data in zip(paths, (text([p[0] for p in pairs], nfd=True),
                                  text([p[1] for p in pairs], crlf=True))):
        path.write_bytes({".gz": gzip.compress, ".xz": lzma.compress}.get(path.suffix,
                                                                           bytes)(data))
    return paths


def write_dir(folder: Path, splits: dict[str, list[tuple[str, str]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, pairs in splits.items():
        (folder / f"{split}.de").write_bytes(text([p[0] for p in pairs]))
        (folder / f"{split}.en").write_bytes(text([p[1] for p in pairs]))
    return folder


def write_tsv(path: Path, pairs) -> Path:
    """A translation-memory export: a header naming the languages, an extra column."""
    rows = ["en\tscore\tde"] + [f"{en}\t0.9\t{de}" for de, en in pairs]
    path.write_bytes(text(rows))
    return path


def write_parquet_hub(folder: Path, splits: dict[str, list[tuple[str, str]]]) -> Path:
    """A wmt-like dataset: parquet files with a `translation` struct, config `de-en`."""
    import pyarrow as pa  # optional extra: datasets' own dependency, only for these tests
    import pyarrow.parquet as pq  # optional extra: as above

    (folder / "de-en").mkdir(parents=True)
    config = ["---", "configs:", "- config_name: de-en", "  data_files:"]
    for split, pairs in splits.items():
        rows = [{"de": de, "en": en} for de, en in pairs]
        pq.write_table(pa.table({"translation": rows}),
                       folder / "de-en" / f"{split}-00000-of-00001.parquet")
        config += [f"  - split: {split}", f"    path: de-en/{split}-*.parquet"]
    (folder / "README.md").write_text("\n".join(config + ["---", "# wmt-like"]) + "\n")
    return folder


def write_jsonl_hub(folder: Path, splits: dict[str, list[tuple[str, str]]]) -> Path:
    """A multi30k-like dataset: jsonl files with flat `en` and `de` fields."""
    folder.mkdir(parents=True)
    for split, pairs in splits.items():
        (folder / f"{split}.jsonl").write_text("".join(
            json.dumps({"en": en, "de": de}, ensure_ascii=False) + "\n" for de, en in pairs))
    return folder


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """No hub: the offline switches, an empty HF_HOME and no sockets."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))

    def no_network(*args, **kwargs):  # in case `datasets` was imported before the env was set
        raise OSError("network disabled in tests")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "manifest.json"}


def leftovers(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if ".tmp-" in p.name or ".old-" in p.name]


def test_one_corpus_imported_four_ways_gives_the_same_splits(tmp_path, offline):
    pairs, root = make_pairs(), tmp_path / "data"
    ways = {"files": {"files": tuple(write_files(tmp_path / "raw", pairs))},
            "folder": {"from_dir": write_dir(tmp_path / "dir", {"train": pairs})},
            "tsv": {"tsv": write_tsv(tmp_path / "tm.tsv", pairs)},
            "hf": {"hf": str(write_parquet_hub(tmp_path / "wmt", {"train": pairs})),
                   "config": "de-en"}}
    kinds = {"files": "files", "folder": "dir", "tsv": "tsv", "hf": "hf"}
    for name, source in ways.items():
        done = import_from(name, "de-en", root, valid_size=20, test_size=30, **source)
        assert done.manifest["source"]["kind"] == kinds[name]
        assert {s: (e["lines"], e["origin"]) for s, e in done.manifest["splits"].items()} == {
            "train": (250, "source"), "val": (20, "drawn"), "test": (30, "drawn")}
    first = files_of(root / "files" / "de-en")
    for name in ways:
        assert files_of(root / name / "de-en") == first, name
    # every input pair is in exactly one split, unchanged, in input order within each split
    read = {s: list(zip(*load_split(root, "tsv", "de-en", s))) for s in ("train", "val", "test")}
    assert sorted(read["train"] + read["val"] + read["test"]) == sorted(pairs)
    assert read["val"] == [p for p in pairs if p in set(read["val"])]
    assert leftovers(root) == []


def test_a_shuffled_copy_lands_in_the_same_splits_and_imports_repeat_exactly(tmp_path):
    pairs, root = make_pairs(), tmp_path / "data"
    shuffled = random.Random(1).sample(pairs, len(pairs))
    for name, data in (("a", pairs), ("b", shuffled), ("c", pairs)):
        import_from(name, "de-en", root, files=tuple(write_files(tmp_path / name, data)),
                    valid_size=25, test_size=25)
    for split in ("train", "val", "test"):
        a, b = (sorted(zip(*load_split(root, n, "de-en", split))) for n in ("a", "b"))
        assert a == b, split
    assert files_of(root / "a" / "de-en") == files_of(root / "c" / "de-en")
    other = import_from("d", "de-en", root, files=tuple(write_files(tmp_path / "d", pairs)),
                        valid_size=25, test_size=25, seed=2)
    assert other.manifest["seed"] == 2  # another seed draws other pairs
    assert set(zip(*load_split(root, "d", "de-en", "val"))) != set(
        zip(*load_split(root, "a", "de-en", "val")))


def test_a_multi30k_like_hub_folder_keeps_its_own_splits(tmp_path, offline, monkeypatch):
    pairs = make_pairs(120)
    hub = write_jsonl_hub(tmp_path / "m30k", {"train": pairs[:100], "validation": pairs[100:110],
                                              "test": pairs[110:]})
    monkeypatch.chdir(tmp_path)  # a local folder given relative is recorded where it is
    done = import_from("m", "en-de", tmp_path / "data", hf="m30k",
                       split_map="test=test_2016_flickr")
    manifest = done.manifest
    assert manifest["source"]["id"] == str(hub.resolve())
    assert {s: e["lines"] for s, e in manifest["splits"].items()} == {
        "train": 100, "val": 10, "test_2016_flickr": 10}
    assert manifest["source"]["split_map"] == {"train": "train", "validation": "val",
                                               "test": "test_2016_flickr"}
    assert load_split(tmp_path / "data", "m", "de-en", "val") == (
        [p[0] for p in pairs[100:110]], [p[1] for p in pairs[100:110]])  # either direction
    with pytest.raises(NMTError, match=r"m30k split 'train' row 1: no field 'fr'.*--fields"):
        import_from("m2", "fr-en", tmp_path / "data", hf=str(hub))
    named = import_from("m3", "fr-en", tmp_path / "data", hf=str(hub), fields="de,en")
    assert named.manifest["splits"]["train"]["lines"] == 100
    import datasets  # reading a hub source quiets datasets' log and gives its level back

    assert datasets.logging.get_verbosity() == datasets.logging.WARNING


def filter_corpus(tmp_path: Path) -> Path:
    kept, again = ("Ein Hund läuft .", "A dog runs ."), ("Zwei Katzen schlafen .", "Two cats sleep .")
    train = [kept, ("", "A cat ."), ("", ""), ("", ""),  # empty x3: the repeats count as empty
             ("Hallo", "Hello"),  # min_words 2
             (" ".join(["wort"] * 13), " ".join(["word"] * 13)),  # max_words 12
             ("Ein Haus", "There is a house over there ."),  # ratio 3.5 > max_ratio 3
             ("Paris Berlin", "Paris Berlin"),  # same
             ("Ein Junge springt .", "A boy jumps ."),  # also in val: overlap
             kept, kept, again]  # duplicates x2
    return write_dir(tmp_path / "raw", {"train": train, "val": [("Ein Junge springt .",
                                                                 "A boy jumps ."), ("Ja", "Yes")]})


def test_each_filter_is_counted_and_can_be_turned_off(tmp_path, capsys):
    raw, root = filter_corpus(tmp_path), tmp_path / "data"
    code, out, err = run_cli(capsys, "data", "import", "f", "--pair", "de-en", "--from", raw,
                             "--min-words", "2", "--max-words", "12", "--max-ratio", "3",
                             "--root", root)
    assert code == 0, err
    manifest = json.loads((root / "f" / "de-en" / "manifest.json").read_text())
    assert manifest["filters"] == {
        "empty": {"on": True, "dropped": 3}, "min_words": {"value": 2, "dropped": 1},
        "max_words": {"value": 12, "dropped": 1}, "max_ratio": {"value": 3.0, "dropped": 1},
        "same": {"on": True, "dropped": 1}, "overlap": {"on": True, "dropped": 1},
        "duplicates": {"on": True, "dropped": 2}}
    assert load_split(root, "f", "de-en", "train") == (
        ["Ein Hund läuft .", "Zwei Katzen schlafen ."], ["A dog runs .", "Two cats sleep ."])
    assert manifest["splits"]["val"]["lines"] == 2  # evaluation splits are not filtered
    assert "train: 2 pairs (3 empty, 1 too short, 1 too long, 1 over the length ratio, " \
           "1 source = target, 1 also in val/test, 2 duplicate pairs dropped)" in out
    assert "max_words 12: 1" in out and f"wrote {root / 'f' / 'de-en'}" in out
    code, out, err = run_cli(capsys, "data", "import", "f", "--pair", "de-en", "--from", raw,
                             "--keep-empty", "--min-words", "0", "--max-words", "0",
                             "--max-ratio", "0", "--keep-same", "--keep-overlap",
                             "--keep-duplicates", "--root", root)
    assert code == 0, err
    manifest = json.loads((root / "f" / "de-en" / "manifest.json").read_text())
    assert all(entry["dropped"] == 0 for entry in manifest["filters"].values())
    assert manifest["splits"]["train"]["lines"] == 12
    assert all(f"{name}: off" in out for name in manifest["filters"])


def test_a_reimport_replaces_the_corpus_whole(tmp_path):
    pairs, root = make_pairs(60), tmp_path / "data"
    out = root / "c" / "de-en"
    import_from("c", "de-en", root, from_dir=write_dir(
        tmp_path / "one", {"train": pairs[:40], "val": pairs[40:50], "dev2": pairs[50:]}))
    assert (out / "dev2.de").is_file()
    (out / "spm").mkdir()  # a vocabulary cache: keyed by checksums, rebuilt when needed
    import_from("c", "de-en", root, from_dir=write_dir(tmp_path / "two", {"train": pairs[:50]}))
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "train.de", "train.en"]
    assert leftovers(root) == []
    before = files_of(out)
    bad = write_dir(tmp_path / "bad", {"train": pairs[:50]})
    (bad / "train.en").write_bytes(b"A dog.\n" * 49)  # refused: the old corpus stays
    with pytest.raises(NMTError, match="has 50 lines but .* has 49"):
        import_from("c", "de-en", root, from_dir=bad)
    assert files_of(out) == before and leftovers(root) == []


def test_an_interrupted_import_leaves_nothing(tmp_path):
    class Interrupted(FilePair):
        def __iter__(self):
            for number, pair in enumerate(super().__iter__()):
                if number == 30:
                    raise KeyboardInterrupt
                yield pair

    root = tmp_path / "data"
    with pytest.raises(KeyboardInterrupt):
        run("c", "de-en", root, Interrupted(*write_files(tmp_path / "raw", make_pairs(60))))
    assert not root.exists()


def _mismatch(tmp_path: Path, char: str) -> tuple[list, list[str]]:
    src = tmp_path / "a.de"
    src.write_bytes(f"Ein Hund .\nEine Katze{char}Ein Vogel .\nEin Haus .\n".encode())
    (tmp_path / "a.en").write_bytes(b"A dog .\nA cat\nA bird .\nA house .\n")
    name = {"\u2028": "U+2028 LINE SEPARATOR", "\r": "U+000D CARRIAGE RETURN"}[char]
    return (["--files", src, tmp_path / "a.en"],
            [f"{src} has 3 lines but {tmp_path / 'a.en'} has 4",
             f"line 2 of {src} holds a {name}, which some tools count as a line break"])


def _bad_file(tmp_path: Path, data: bytes, *fragments: str) -> tuple[list, list[str]]:
    (tmp_path / "b.de").write_bytes(data)
    (tmp_path / "b.en").write_bytes(b"A dog .\nTwo cats .\n")
    return (["--files", tmp_path / "b.de", tmp_path / "b.en"],
            [fragment.format(path=tmp_path / "b.de") for fragment in fragments])


def _tsv(tmp_path: Path, rows: str) -> tuple[list, list[str]]:
    (tmp_path / "t.tsv").write_text(rows)
    return ["--tsv", tmp_path / "t.tsv"], [f"{tmp_path / 't.tsv'}:3:", "1 column"]


BAD = {
    "mismatch-u2028": lambda t: _mismatch(t, "\u2028"),
    "stray-cr": lambda t: _mismatch(t, "\r"),
    "nul": lambda t: _bad_file(t, b"Ein Hund .\nZwei\x00Katzen .\n", "{path}:2:", "NUL"),
    "invalid-utf8": lambda t: _bad_file(t, "Ein Hund .\nGrüße .\n".encode("cp1252"),
                                        "{path}:2:", "invalid UTF-8"),
    "utf16": lambda t: _bad_file(t, "Ein Hund .\nZwei .\n".encode("utf-16"),
                                 "{path}:1:", "UTF-16"),
    "utf16-no-bom": lambda t: _bad_file(t, "Ein Hund .\nZwei .\n".encode("utf-16-le"),
                                        "{path}:1:", "UTF-16"),
    "empty-file": lambda t: _bad_file(t, b"", "{path}: the file is empty"),
    "one-column-row": lambda t: _tsv(t, "de\ten\nEin Hund .\tA dog .\nnur eine Spalte\n"),
    "two-sources": lambda t: (["--files", t / "x", t / "y", "--tsv", t / "z"],
                              ["exactly one source", "--files and --tsv"]),
    "no-source": lambda t: ([], ["exactly one source"]),
    "stray-option": lambda t: (["--tsv", t / "z", "--fields", "a,b"], ["--fields goes with --hf"]),
    "own-val-and-valid-size": lambda t: (
        ["--from", write_dir(t / "raw", {"train": [("a b", "c d")], "val": [("e", "f")]}),
         "--valid-size", "5"], ["source has its own 'val' split", "drop --valid-size"]),
    "too-few-to-draw": lambda t: (
        ["--files", *write_files(t / "raw", make_pairs(10)), "--valid-size", "10"],
        ["10 distinct training pairs left", "too few for 10 val and training"]),
    "script-dataset": lambda t: (_script_dataset(t), ["script-based dataset",
                                                      "--revision refs/convert/parquet"]),
    "unknown-hub-id": lambda t: (["--hf", "nobody/no-such-corpus"],
                                 ["could not load 'nobody/no-such-corpus'"]),
    "hub-broken-json": lambda t: (
        ["--hf", _jsonl_rows(t, '{"de": "ein Hund", "en": "a dog"}', '{broken')],
        ["split 'train' from its start: could not read (JSON parse error"]),
    "hub-number-field": lambda t: (
        ["--hf", _jsonl_rows(t, '{"de": "ein Hund", "en": "a dog"}', '{"de": 5, "en": "five"}')],
        ["split 'train' row 2: field 'de' holds int, not text", "--fields SRC_FIELD,TGT_FIELD"]),
    "no-train-split": lambda t: (
        ["--hf", write_jsonl_hub(t / "evalonly", {"validation": [("a b", "c d")]})],
        ["no split becomes 'train' (its splits: validation)", "--split-map validation=train"]),
    "several-configs-none-named": lambda t: (["--hf", _two_configs(t)],
                                             ["has several configs (de-en, other)", "--config NAME"]),
}


def test_the_split_map_the_no_train_error_names_imports(tmp_path, capsys, offline):
    hub = write_jsonl_hub(tmp_path / "evalonly", {"validation": [("a b", "c d"), ("e f", "g h")]})
    code, out, _ = run_cli(capsys, "data", "import", "c", "--pair", "de-en", "--hf", hub,
                           "--split-map", "validation=train", "--root", tmp_path / "data")
    assert code == 0 and "train: 2 pairs" in out, out


def _two_configs(tmp_path: Path) -> Path:
    folder = write_parquet_hub(tmp_path / "two", {"train": [("a b", "c d")]})
    card = (folder / "README.md").read_text()
    entry = card[card.index("- config_name: de-en"):card.index("---", 4)]
    (folder / "README.md").write_text(card.replace(entry, entry + entry.replace("de-en", "other", 1)))
    return folder


def _jsonl_rows(tmp_path: Path, *rows: str) -> Path:
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "train.jsonl").write_text("".join(row + "\n" for row in rows))
    return tmp_path / "rows"


def _script_dataset(tmp_path: Path) -> list:
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "legacy.py").write_text("# a dataset loading script\n")
    return ["--hf", tmp_path / "legacy"]


@pytest.mark.parametrize("case", list(BAD))
def test_bad_inputs_get_one_line_and_leave_nothing(case, tmp_path, capsys, offline):
    args, fragments = BAD[case](tmp_path)
    root = tmp_path / "data"
    assert_user_error(run_cli(capsys, "data", "import", "c", "--pair", "de-en", *args,
                              "--root", root), *fragments)
    assert not root.exists()


@pytest.mark.parametrize("name,pair,fragment", [("../up", "de-en", "'../up'"),
                                                ("c", "pt-BR-en", "'pt-BR-en'"),
                                                ("c", "de-de", "'de-de'")])
def test_names_must_be_safe(tmp_path, name, pair, fragment):
    with pytest.raises(NMTError, match=fragment):
        import_from(name, pair, tmp_path, files=(tmp_path / "a", tmp_path / "b"))
    assert list(tmp_path.iterdir()) == []


def test_counts_and_checksums_in_the_manifest(tmp_path):
    paths = write_files(tmp_path / "raw", make_pairs(50))
    (tmp_path / "raw" / "corpus.de.gz").write_bytes(gzip.compress(
        b"\xef\xbb\xbf" + gzip.decompress((tmp_path / "raw" / "corpus.de.gz").read_bytes())))
    manifest = import_from("c", "de-en", tmp_path / "data", files=tuple(paths)).manifest
    assert manifest["source"]["files"] == {
        str(p.resolve()): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    entry = manifest["splits"]["train"]
    assert entry["bom_stripped"] == 1 and entry["lines"] == 50
    for lang in ("de", "en"):
        data = (tmp_path / "data" / "c" / "de-en" / f"train.{lang}").read_bytes()
        assert entry["sha256"][lang] == hashlib.sha256(data).hexdigest()
    assert manifest["normalisation"] == "NFC, whitespace collapsed, BOM dropped"


def test_train_runs_on_an_imported_corpus(tmp_path, capsys):
    root = tmp_path / "data"
    import_from("mine", "de-en", root, tsv=write_tsv(tmp_path / "tm.tsv", make_pairs()),
                valid_size=20, test_size=20)
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(f"runs_dir: {tmp_path / 'runs'}\n"
                   f"data: {{root: {root}, corpus: mine, pair: en-de, max_len: 40}}\n"
                   "vocab: {size: 60}\n"
                   "model: {family: bahdanau, emb_size: 16, hidden_size: 16}\n"
                   "train: {max_steps: 3, valid_every: 3, threads: 1, batch_tokens: 200, "
                   "align_sentences: 0, valid_sentences: 10}\n"
                   "decode: {beam: 1}\n")
    code, _, err = run_cli(capsys, "train", "--config", cfg, "--no-evaluate")
    assert code == 0 and "Traceback" not in err, err
    assert (tmp_path / "runs").is_dir() and any((tmp_path / "runs").rglob("last.pt"))


@pytest.mark.parametrize("name", ["dev", "valid", "validation"])
def test_a_folders_dev_split_becomes_val_as_a_hub_datasets_does(tmp_path, offline, name):
    """Folder's docstring: valid, validation and dev become val (SPLIT_NAMES), as they do
    from the hub, so `nmt train`'s data.valid finds them; a suffixed one keeps its name."""
    pairs = make_pairs(140)
    splits = {"train": pairs[:100], name: pairs[100:110], "test": pairs[110:120]}
    hub = import_from("h", "de-en", tmp_path / "data",
                      hf=str(write_jsonl_hub(tmp_path / "hub", splits)))
    splits[f"{name}2"] = pairs[120:130]  # (datasets reads a hub folder's dev2 as validation)
    folder = import_from("f", "de-en", tmp_path / "data",
                         from_dir=write_dir(tmp_path / "raw", splits))
    assert {s: e["lines"] for s, e in hub.manifest["splits"].items()} == {
        "train": 100, "val": 10, "test": 10}
    assert {s: e["lines"] for s, e in folder.manifest["splits"].items()} == {
        "train": 100, "val": 10, "test": 10, f"{name}2": 10}
    assert load_split(tmp_path / "data", "f", "de-en", "val") == (
        [p[0] for p in pairs[100:110]], [p[1] for p in pairs[100:110]])
    both = write_dir(tmp_path / "both", {"train": pairs[:100], "dev": pairs[100:110],
                                         "val": pairs[110:120]})
    with pytest.raises(NMTError, match=r"both.*: dev\.\* and val\.\* are both the 'val' split"):
        import_from("b", "de-en", tmp_path / "data", from_dir=both)


def test_an_import_without_val_says_so_and_training_names_the_remedy(tmp_path, capsys):
    """Two files hold no validation split: the import's summary says how to draw one, and
    `nmt train` on it fails before training with the same remedy, naming the splits it has."""
    root, tsv = tmp_path / "data", write_tsv(tmp_path / "tm.tsv", make_pairs())
    code, out, _ = run_cli(capsys, "data", "import", "mine", "--pair", "de-en", "--tsv", tsv,
                           "--root", root)
    assert code == 0 and out.splitlines()[-1].startswith("note: no 'val' split")
    assert "--valid-size N" in out.splitlines()[-1]
    code, out, _ = run_cli(capsys, "data", "import", "mine", "--pair", "de-en", "--tsv", tsv,
                           "--root", root, "--valid-size", "20")
    assert code == 0 and "note: no 'val'" not in out
    import_from("bare", "de-en", root, tsv=tsv)
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(f"runs_dir: {tmp_path / 'runs'}\n"
                   f"data: {{root: {root}, corpus: bare, pair: de-en, test: test}}\n"
                   "model: {family: bahdanau, emb_size: 16, hidden_size: 16}\n")
    assert_user_error(run_cli(capsys, "train", "--config", cfg, "--no-evaluate"),
                      "split 'val' is not in", "(it has: train)", "--valid-size N")
    assert [p.name for p in (tmp_path / "runs").rglob("*")] == ["tiny", ".lock"]  # no work


def test_the_progress_shows_pairs_per_second():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    with rate("import", "pairs", stream=screen) as advance:
        advance(4096)
    assert "4,096 pairs" in screen.getvalue() and "pairs/s" in screen.getvalue()
    with rate("import", "pairs", stream=io.StringIO()) as advance:  # not a terminal: silent
        advance(1)


def test_filters_default_to_what_a_user_expects():
    assert Filters() == Filters(empty=True, min_words=1, max_words=250, max_ratio=9.0,
                                same=True, overlap=True, duplicates=True)
    assert Filters().drop("a", "b c d e f g h i j k") == "max_ratio"
    assert Filters().drop("a", "b c d e f g h i j") is None  # 9 times: at the limit, kept


def test_import_help_lists_every_source_and_switch(capsys):
    code, out, _ = run_cli(capsys, "data", "import", "--help")
    assert code == 0
    for option in ("--files", "--from", "--tsv", "--columns", "--hf", "--config", "--revision",
                   "--split-map", "--fields", "--valid-size", "--test-size", "--seed",
                   "--min-words", "--max-words", "--max-ratio", "--keep-empty", "--keep-same",
                   "--keep-overlap", "--keep-duplicates", "--root"):
        assert option in out, option
