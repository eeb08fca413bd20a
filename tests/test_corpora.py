"""Tests for reading and finding corpora (nmt/data/corpora.py), and the Multi30k preset's
import through the pipeline (nmt/data/pipeline.py; the other sources: test_import.py).

Everything is built in tmp_path; nothing touches the network.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import socket
import unicodedata
from pathlib import Path

import pytest

from nmt.core.errors import NMTError
from nmt.data.corpora import corpus_dir, ensure_synth, load_split, normalise, read_lines
from nmt.data.pipeline import download

SHARED_MULTI30K = Path(__file__).parents[1] / ".." / "shared" / "corpora" / "multi30k"

# line i of TRAIN_DE translates line i of TRAIN_EN; two pairs have an empty side.
TRAIN_DE = [
    "Zwei junge Männer spielen Fußball.",
    "  Ein   Hund\tläuft über   die Wiese.  ",
    "",  # empty German side: dropped
    "Eine Frau trägt einen grünen Hut.",
    "Kinder spielen am Strand.",
    "Ein Mädchen isst ein Brötchen.",
]
TRAIN_EN = [
    "Two young men are playing soccer.",
    "A dog runs across the meadow.",
    "A man is sleeping.",
    "A woman wears a green hat.",
    "   \t ",  # whitespace-only English side: dropped
    "A girl is eating a bread roll.",
]
SPLITS = {
    "train": (TRAIN_DE, TRAIN_EN),
    "val": (["Ein Junge springt.", "Zwei Hunde bellen."],
            ["A boy jumps.", "Two dogs bark."]),
    "test_2016_flickr": (["Eine ältere Frau liest.", "Ein Mann fährt Fahrrad.", "Es schneit."],
                         ["An older woman reads.", "A man rides a bike.", "It is snowing."]),
    "test_2017_flickr": (["Die Sonne scheint."], ["The sun is shining."]),
}


def import_corpus(corpus: str, pair: str, raw: Path, root: Path) -> dict:
    """`nmt data download CORPUS --pair PAIR --from RAW`: the manifest it wrote."""
    return download(corpus, pair, root, raw).manifest


def _gz(path: Path, lines: list[str] | bytes) -> Path:
    data = lines if isinstance(lines, bytes) else "".join(f"{x}\n" for x in lines).encode()
    path.write_bytes(gzip.compress(data))
    return path


def _raw_dir(tmp_path: Path, splits: dict = SPLITS, nfd: bool = False) -> Path:
    """A directory laid out like shared/corpora/multi30k: {split}.{lang}.gz."""
    raw = tmp_path / "raw"
    raw.mkdir(exist_ok=True)
    for split, (de, en) in splits.items():
        if nfd:  # decomposed umlauts, as some tools write them
            de = [unicodedata.normalize("NFD", x) for x in de]
        _gz(raw / f"{split}.de.gz", de)
        _gz(raw / f"{split}.en.gz", en)
    return raw


def _import_error(raw: Path, tmp_path: Path, pair: str = "de-en") -> str:
    with pytest.raises(NMTError) as info:
        import_corpus("multi30k", pair, raw, tmp_path / "data")
    message = str(info.value)
    assert "\n" not in message
    return message


def test_import_writes_normalised_files_and_manifest(tmp_path):
    raw = _raw_dir(tmp_path, nfd=True)
    root = tmp_path / "data"
    manifest = import_corpus("multi30k", "de-en", raw, root)
    out = root / "multi30k" / "de-en"
    expected = {f"{s}.{lang}" for s in SPLITS for lang in ("de", "en")} | {"manifest.json"}
    assert {p.name for p in out.iterdir()} == expected

    on_disk = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert on_disk == manifest
    assert manifest["source"]["kind"] == "dir"
    assert manifest["source"]["path"] == str(raw.resolve())
    assert manifest["source"]["preset"] == "multi30k"
    assert manifest["pair"] == "de-en" and manifest["corpus"] == "multi30k"
    assert set(manifest["splits"]) == set(SPLITS)
    sizes = {s: e["lines"] for s, e in manifest["splits"].items()}
    assert sizes == {"train": 4, "val": 2, "test_2016_flickr": 3, "test_2017_flickr": 1}
    assert manifest["filters"]["empty"] == {"on": True, "dropped": 2}
    for split, entry in manifest["splits"].items():
        for lang in ("de", "en"):
            data = (out / f"{split}.{lang}").read_bytes()
            assert entry["sha256"][lang] == hashlib.sha256(data).hexdigest()
            assert data.endswith(b"\n") and data.count(b"\n") == entry["lines"]

    de, en = load_split(root, "multi30k", "de-en", "train")
    # NFC: the composed umlauts are back; whitespace is collapsed and trimmed
    assert de[0] == "Zwei junge Männer spielen Fußball." and "\u00e4" in de[0]
    assert all(unicodedata.is_normalized("NFC", x) for x in de)
    assert de[1] == "Ein Hund läuft über die Wiese."
    # the dropped pairs are gone from both sides together: every pair still corresponds
    assert list(zip(de, en)) == [
        ("Zwei junge Männer spielen Fußball.", "Two young men are playing soccer."),
        ("Ein Hund läuft über die Wiese.", "A dog runs across the meadow."),
        ("Eine Frau trägt einen grünen Hut.", "A woman wears a green hat."),
        ("Ein Mädchen isst ein Brötchen.", "A girl is eating a bread roll."),
    ]
    assert load_split(root, "multi30k", "de-en", "test_2017_flickr") == (
        ["Die Sonne scheint."], ["The sun is shining."])


def test_reverse_pair_and_other_languages(tmp_path):
    raw = _raw_dir(tmp_path)
    for split, (de, _) in SPLITS.items():
        _gz(raw / f"{split}.fr.gz", [f"phrase {i}" if x else "" for i, x in enumerate(de)])
    manifest = import_corpus("multi30k", "en-de", raw, tmp_path / "data")
    assert manifest["pair"] == "en-de"
    en, de = load_split(tmp_path / "data", "multi30k", "en-de", "train")
    assert en[0] == "Two young men are playing soccer." and de[0].startswith("Zwei")
    # a pair without a hub id imports from local files
    manifest = import_corpus("multi30k", "fr-en", raw, tmp_path / "data")
    assert set(manifest["splits"]) == set(SPLITS) and manifest["splits"]["train"]["lines"] == 4
    fr, en = load_split(tmp_path / "data", "multi30k", "fr-en", "train")
    assert (fr[1], en[1]) == ("phrase 1", "A dog runs across the meadow.")


def test_one_import_serves_the_reverse_direction(tmp_path):
    root = tmp_path / "data"
    import_corpus("multi30k", "de-en", _raw_dir(tmp_path), root)
    before = {p.name: p.read_bytes() for p in (root / "multi30k" / "de-en").iterdir()}
    for split in SPLITS:
        de, en = load_split(root, "multi30k", "de-en", split)
        assert load_split(root, "multi30k", "en-de", split) == (en, de)
    # the de-en folder (and its manifest) serves en-de; nothing is copied or rewritten
    assert corpus_dir(root, "multi30k", "en-de") == root / "multi30k" / "de-en"
    assert not (root / "multi30k" / "en-de").exists()
    assert {p.name: p.read_bytes() for p in (root / "multi30k" / "de-en").iterdir()} == before
    # a split neither direction has names the folder and its splits
    with pytest.raises(NMTError, match=r"split 'dev' is not in .*de-en.*test_2016_flickr"):
        load_split(root, "multi30k", "en-de", "dev")
    # a pair's own import wins over the reverse one
    raw = tmp_path / "raw2"
    raw.mkdir()
    _gz(raw / "train.en.gz", ["Own English."])
    _gz(raw / "train.de.gz", ["Eigenes Deutsch."])
    import_corpus("multi30k", "en-de", raw, root)
    assert corpus_dir(root, "multi30k", "en-de") == root / "multi30k" / "en-de"
    assert load_split(root, "multi30k", "en-de", "train") == (["Own English."],
                                                               ["Eigenes Deutsch."])
    assert load_split(root, "multi30k", "de-en", "train")[0][0].startswith("Zwei")


def test_missing_corpus_names_the_pair_and_the_import_command(tmp_path):
    root = tmp_path / "data"
    import_corpus("multi30k", "de-en", _raw_dir(tmp_path), root)  # another pair only
    for pair in ("en-fr", "fr-en"):
        with pytest.raises(NMTError) as info:
            load_split(root, "multi30k", pair, "train")
        message = str(info.value)
        assert "\n" not in message
        assert f"multi30k/{pair}/train." in message
        assert f"nmt data download multi30k --pair {pair}" in message
        assert "-".join(reversed(pair.split("-"))) in message  # either direction will do
        assert not (root / "multi30k" / pair).exists()


def test_synth_directions_keep_their_own_folders_and_gold(tmp_path):
    root = tmp_path / "data"
    ensure_synth(root, sizes={"train": 20, "val": 5, "test": 5})
    assert corpus_dir(root, "synth", "tgt-src") == root / "synth" / "tgt-src"
    fwd, back = (read_lines(root / "synth" / p / "val.gold") for p in ("src-tgt", "tgt-src"))
    assert fwd != back
    src, tgt = load_split(root, "synth", "src-tgt", "val")
    assert load_split(root, "synth", "tgt-src", "val") == (tgt, src)  # same text, own gold


# sha256 of data/synth/src-tgt/* as ensure_synth wrote them before the import pipeline
SYNTH_SRC_TGT = {
    "test.gold": "ff998842c35487f9f4583014e9d705c568849fb66a8ebe1585d605820484dbf3",
    "test.src": "2246dbfd8a3a8569fab0f288edda925088f20f6e478d34c5d0635701816a95c1",
    "test.tgt": "554494fbc04b025e96a309bbd4f021eed9dc0645faca75eba3efe8c3e0c51b31",
    "train.gold": "432122aa0e4554b26dbb89581c47d4575abab57b350833d5dda2e8bcabf84a34",
    "train.src": "b2eef1a050ce6c68deb042072c6d4c3f7857972f79b46be2837590d1efa9a65a",
    "train.tgt": "33ab9b9554d0d51e353e9833b5b9061c789e7a0f3f80a715930bde36a8893121",
    "val.gold": "1fec8e8e4e5a5bca5cfa4db2f689d35ac1af9c759dd08c3e433bc55448e96c68",
    "val.src": "1d8e02bc322b3b3729c7977c86fdbc07dc2d45c8ed50de9845552662099262d4",
    "val.tgt": "f4e626934da87a6f137c9e236cf6141fd2a1c5143c7c5e54c40b1aa9f035c5f4",
}


def test_the_synthetic_corpus_stays_bit_for_bit(data_root):
    out = data_root / "synth" / "src-tgt"
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()
            if p.suffix in (".src", ".tgt", ".gold")} == SYNTH_SRC_TGT
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["source"] == {"kind": "synth", "seed": 1234,
                                  "sizes": {"train": 12000, "val": 500, "test": 500}}
    assert manifest["splits"]["val"]["sha256"]["src"] == SYNTH_SRC_TGT["val.src"]


def test_an_interrupted_synth_leaves_nothing_that_counts_as_done(tmp_path, monkeypatch):
    import nmt.data.corpora

    def interrupted(out, **kwargs):
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "train.src").write_text("half\n")
        raise KeyboardInterrupt

    real = nmt.data.corpora.write_synth
    monkeypatch.setattr(nmt.data.corpora, "write_synth", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ensure_synth(tmp_path, sizes={"train": 20, "val": 5, "test": 5})
    assert not (tmp_path / "synth" / "src-tgt").exists()
    monkeypatch.setattr(nmt.data.corpora, "write_synth", real)
    out = ensure_synth(tmp_path, sizes={"train": 20, "val": 5, "test": 5})
    assert len(read_lines(out / "train.src")) == 20


def test_plain_files_and_empty_eval_lines_are_kept(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.de").write_text("Hallo Welt\nGuten Tag\n", encoding="utf-8")
    (raw / "train.en").write_text("Hello world\nGood day", encoding="utf-8")  # no final newline
    (raw / "val.de").write_text("Ja\n\n", encoding="utf-8")
    (raw / "val.en").write_text("Yes\nNo\n", encoding="utf-8")
    (raw / "README").write_text("not a split\n")
    manifest = import_corpus("multi30k", "de-en", raw, tmp_path / "data")
    assert manifest["splits"]["train"]["lines"] == 2
    # only training pairs are filtered; evaluation splits keep their line count
    assert manifest["splits"]["val"]["lines"] == 2
    assert load_split(tmp_path / "data", "multi30k", "de-en", "val") == (["Ja", ""], ["Yes", "No"])


def test_normalise():
    assert normalise("  a \t b\u00a0 c \r") == "a b c"
    assert normalise(unicodedata.normalize("NFD", "Grüße")) == "Grüße"
    assert normalise("\u2028") == ""


def test_byte_order_marks_are_stripped_and_counted(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    bom = "\ufeff"
    (raw / "train.de").write_bytes(f"{bom}Ein Hund.\nEine Katze.\n".encode())  # a BOM file
    (raw / "train.en").write_text("A dog.\nA cat.\n", encoding="utf-8")
    _gz(raw / "test.de.gz", [f"{bom}Ja.", "Nein."])
    _gz(raw / "test.en.gz", [f"{bom}Yes.", bom])  # two files joined: a BOM alone on a line
    manifest = import_corpus("multi30k", "de-en", raw, tmp_path / "data")
    de, en = load_split(tmp_path / "data", "multi30k", "de-en", "train")
    assert de == ["Ein Hund.", "Eine Katze."] and en == ["A dog.", "A cat."]
    assert load_split(tmp_path / "data", "multi30k", "de-en", "test") == (["Ja.", "Nein."],
                                                                         ["Yes.", ""])
    assert manifest["splits"]["train"]["bom_stripped"] == 1
    assert manifest["splits"]["test"]["bom_stripped"] == 3
    assert not any(bom in p.read_text(encoding="utf-8")
                   for p in (tmp_path / "data" / "multi30k" / "de-en").iterdir())

# --- bad inputs: one NMTError that names the file (and line) ---------------------------------


def test_missing_directory(tmp_path):
    message = _import_error(tmp_path / "nowhere", tmp_path)
    assert str(tmp_path / "nowhere") in message and "not found" in message


def test_split_with_one_language_file(tmp_path):
    raw = _raw_dir(tmp_path)
    (raw / "val.en.gz").unlink()
    message = _import_error(raw, tmp_path)
    assert "val.de.gz" in message and "val.en" in message and "missing" in message


def test_no_training_split(tmp_path):
    raw = _raw_dir(tmp_path, {"val": SPLITS["val"]})
    message = _import_error(raw, tmp_path)
    assert str(raw) in message and "train.de" in message


def test_different_line_counts_name_both_files_and_counts(tmp_path):
    raw = _raw_dir(tmp_path)
    _gz(raw / "test_2016_flickr.en.gz", ["A line.", "Another line."])
    message = _import_error(raw, tmp_path)
    assert str(raw / "test_2016_flickr.de.gz") in message
    assert str(raw / "test_2016_flickr.en.gz") in message
    assert "has 3 lines" in message and "has 2" in message


def test_invalid_utf8_names_file_and_line(tmp_path):
    raw = _raw_dir(tmp_path)
    _gz(raw / "train.de.gz", "Zwei Männer\nEin Hund\n".encode() + "Grüße\n".encode("latin-1")
        + b"mehr\nnoch\nende\n")
    message = _import_error(raw, tmp_path)
    assert f"{raw / 'train.de.gz'}:3:" in message and "UTF-8" in message


def test_nul_byte_names_file_and_line(tmp_path):
    raw = _raw_dir(tmp_path)
    (raw / "val.en.gz").unlink()
    (raw / "val.en").write_bytes(b"A boy jumps.\nTwo\x00dogs bark.\n")
    message = _import_error(raw, tmp_path)
    assert f"{raw / 'val.en'}:2:" in message and "NUL" in message


def test_empty_corpus(tmp_path):
    raw = _raw_dir(tmp_path)
    _gz(raw / "train.de.gz", b"")
    _gz(raw / "train.en.gz", b"")
    message = _import_error(raw, tmp_path)
    assert str(raw / "train.de.gz") in message and "empty" in message


def test_training_split_with_only_empty_pairs(tmp_path):
    raw = _raw_dir(tmp_path)
    _gz(raw / "train.de.gz", ["", "Ein Hund", "  "])
    _gz(raw / "train.en.gz", ["A dog", "", "A cat"])
    message = _import_error(raw, tmp_path)
    assert str(raw / "train.de.gz") in message and "empty" in message


def test_corrupt_gzip_names_the_file(tmp_path):
    raw = _raw_dir(tmp_path)
    data = bytearray(gzip.compress(("Ein Hund läuft.\n" * 500).encode()))
    for i in range(20, 40):
        data[i] ^= 0xFF
    (raw / "train.de.gz").write_bytes(bytes(data))
    assert str(raw / "train.de.gz") in _import_error(raw, tmp_path)
    (raw / "train.de.gz").write_bytes(b"plain text, not gzip\n")
    assert str(raw / "train.de.gz") in _import_error(raw, tmp_path)


def test_read_lines_missing_file(tmp_path):
    with pytest.raises(NMTError, match="x.de: file not found"):
        read_lines(tmp_path / "x.de")


def test_a_name_without_a_preset_is_sent_to_import(tmp_path):
    raw = _raw_dir(tmp_path)
    with pytest.raises(NMTError, match=r"unknown corpus 'wmt14'.*multi30k.*nmt data import wmt14"):
        import_corpus("wmt14", "de-en", raw, tmp_path / "data")
    with pytest.raises(NMTError, match="unknown corpus 'wmt14'"):
        download("wmt14", "de-en", tmp_path / "data")


@pytest.mark.parametrize("pair", ["de-xx", "de-de", "de", "de-en-fr", "../x-en"])
def test_unknown_pair(tmp_path, pair):
    message = _import_error(_raw_dir(tmp_path), tmp_path, pair)
    assert f"'{pair}'" in message
    if pair == "de-xx":  # well formed, but not a Multi30k language
        assert "en, de, fr, cs" in message
    assert not (tmp_path / "data").exists()


def test_pair_without_hub_id_suggests_from(tmp_path):
    with pytest.raises(NMTError) as info:
        download("multi30k", "fr-en", tmp_path / "data")
    assert "--from" in str(info.value) and "fr-en" in str(info.value)


def test_unreachable_hub_suggests_from(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no cached copy either

    def no_network(*args, **kwargs):  # in case `datasets` was imported before the env was set
        raise OSError("network disabled in tests")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    with pytest.raises(NMTError) as info:
        download("multi30k", "de-en", tmp_path / "data")
    message = str(info.value)
    assert "bentrevett/multi30k" in message and "--from" in message and "\n" not in message
    assert not (tmp_path / "data" / "multi30k").exists()


# sha256 of data/multi30k/de-en/* as the import before the pipeline wrote them
MULTI30K_DE_EN = {
    "test_2016_flickr.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
    "test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
    "train.de": "550c2612c7ae45ed46754e67c3011fde500b1bf88592a376e2ed6126903766f7",
    "train.en": "f7cb7c7d411f6039a15de94de8c4d1709fada7b7474791598fd18451ec62427d",
    "val.de": "c02c1d05fb89dba12b00503a2744b1105d45fef287501fd701b4fea5b1fca3e5",
    "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
}


@pytest.mark.skipif(not SHARED_MULTI30K.is_dir(), reason="../shared/corpora/multi30k not present")
def test_import_real_multi30k(tmp_path):
    manifest = import_corpus("multi30k", "de-en", SHARED_MULTI30K, tmp_path)
    sizes = {split: entry["lines"] for split, entry in manifest["splits"].items()}
    assert sizes == {"train": 29000, "val": 1014, "test_2016_flickr": 1000}
    assert all(entry["dropped"] == 0 for entry in manifest["filters"].values())
    # the preset imports Multi30k as published: the files of the import before, byte for byte
    out = tmp_path / "multi30k" / "de-en"
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in out.iterdir() if p.name != "manifest.json"} == MULTI30K_DE_EN
    de, en = load_split(tmp_path, "multi30k", "de-en", "train")
    assert len(de) == len(en) == 29000
    assert all(de) and all(en)
    assert any("ä" in line or "ü" in line or "ö" in line for line in de[:200])


def test_iter_lines_reads_lazily_and_checks_like_read_lines(tmp_path):
    from nmt.data.corpora import iter_lines, line_source

    path = tmp_path / "in.txt"
    path.write_bytes("\ufeffeins\nzwei\r\n\n".encode() + b"\xff\n")
    with line_source(path) as lines:
        assert [next(lines), next(lines), next(lines)] == ["eins", "zwei\r", ""]
        with pytest.raises(NMTError, match=rf"{path}:4: invalid UTF-8"):
            next(lines)
    assert list(iter_lines(io.StringIO("a\nb"), "<stdin>")) == ["a", "b"]
    with pytest.raises(NMTError, match="file not found"):
        with line_source(tmp_path / "missing.txt"):
            pass
