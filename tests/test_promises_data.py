"""What docs/data.md promises of the import and the store, pinned one by one (issue 60,
item 5): a one-line change to any of these promises fails here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nmt.core import scratch as scratch_module
from nmt.core.errors import NMTError
from nmt.core.scratch import swap_in
from nmt.data.batching import Batches
from nmt.data.hub import Hub
from nmt.data.pipeline import Filters, run
from nmt.data.sources import FilePair, Folder, Tsv
from nmt.data.store import open_store, token_dtype, write_store
from nmt.data.subwords import training_sample


def _files(folder: Path, **splits: list[tuple[str, str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, pairs in splits.items():
        (folder / f"{split}.de").write_text("".join(s + "\n" for s, _ in pairs))
        (folder / f"{split}.en").write_text("".join(t + "\n" for _, t in pairs))
    return folder


def _lines(made, split: str, lang: str = "de") -> list[str]:
    return (made.folder / f"{split}.{lang}").read_text().splitlines()


def test_a_pair_of_exactly_max_words_is_kept():
    assert Filters(max_words=3).drop("a b c", "x y z") is None
    assert Filters(max_words=3).drop("a b c d", "x y z") == "max_words"


def test_overlap_with_val_and_test_is_found_on_the_normalised_text(tmp_path):
    raw = _files(tmp_path / "raw", train=[("ein Hund", "a dog"), ("zwei", "two")],
                 val=[("ein   Hund ", "a  dog")])
    made = run("o", "de-en", tmp_path / "data", Folder(raw, "de", "en"))
    assert _lines(made, "train") == ["zwei"] and made.manifest["filters"]["overlap"]["dropped"] == 1


def test_a_repeated_pair_keeps_its_first_copy(tmp_path):
    raw = _files(tmp_path / "raw", train=[("a", "x"), ("b", "y"), ("a", "x"), ("c", "z")])
    made = run("d", "de-en", tmp_path / "data", Folder(raw, "de", "en"))
    assert _lines(made, "train") == ["a", "b", "c"]  # the last copy kept would give b, a, c


def test_a_drawn_split_holds_n_distinct_pairs_with_copies_together(tmp_path):
    pairs = [(f"s{i % 40}", f"t{i % 40}") for i in range(120)]  # each pair three times
    raw = _files(tmp_path / "raw", train=pairs)
    made = run("v", "de-en", tmp_path / "data", Folder(raw, "de", "en"),
               filters=Filters(duplicates=False), valid_size=5)
    val, train = _lines(made, "val"), _lines(made, "train")
    assert len(set(val)) == 5 and len(val) == 15  # 5 distinct pairs, each with its copies
    assert not set(val) & set(train)


def test_a_last_line_without_a_final_newline_keeps_its_last_character(tmp_path):
    (tmp_path / "a.de").write_text("ein Hund\nzwei Katzen")
    (tmp_path / "a.en").write_text("a dog\ntwo cats")
    made = run("n", "de-en", tmp_path / "data", FilePair(tmp_path / "a.de", tmp_path / "a.en"))
    assert _lines(made, "train", "en") == ["a dog", "two cats"]


def test_a_files_final_crlf_is_not_named_as_a_stray_break(tmp_path):
    (tmp_path / "a.de").write_bytes(b"ein Hund\r\nzwei\r\ndrei\r\n")
    (tmp_path / "a.en").write_bytes(b"a dog\r\ntwo\r\n")
    with pytest.raises(NMTError) as err:
        run("c", "de-en", tmp_path / "data", FilePair(tmp_path / "a.de", tmp_path / "a.en"))
    assert "CARRIAGE RETURN" not in str(err.value) and "no line holds" in str(err.value)


@pytest.mark.parametrize("header", [b"de\ten\r\n", b" de \t en \n", b"\xef\xbb\xbfde\ten\n",
                                    b"DE\tEn\n"], ids=["crlf", "padded", "bom", "upper-case"])
def test_a_crlf_or_space_padded_tsv_header_is_still_a_header(tmp_path, header):
    path = tmp_path / "t.tsv"
    path.write_bytes(header + b"ein Hund\ta dog\n")
    assert [(s, t) for _, s, t in Tsv(path, "de", "en")] == [("ein Hund", "a dog")]


@pytest.mark.parametrize("ratio", [float("inf"), float("nan"), -1.0])
def test_a_max_ratio_json_cannot_hold_or_that_is_negative_is_refused(ratio):
    with pytest.raises(NMTError, match=r"^--max-ratio .*: use a finite number >= 0"):
        Filters(max_ratio=ratio)


def test_a_seed_beyond_the_draws_eight_byte_key_is_a_one_line_error(tmp_path):
    (tmp_path / "a.de").write_text("ein Hund\n")
    (tmp_path / "a.en").write_text("a dog\n")
    with pytest.raises(NMTError, match=r"^--seed 9223372036854775808: use a whole number"):
        run("n", "de-en", tmp_path / "data", FilePair(tmp_path / "a.de", tmp_path / "a.en"),
            seed=2**63)
    assert not (tmp_path / "data").exists()


def test_a_tsv_without_a_header_keeps_its_first_row_and_its_bom_for_the_count(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_bytes(b"\xef\xbb\xbfein Hund\ta dog\nzwei\ttwo\n")
    rows = [(s, t) for _, s, t in Tsv(path, "de", "en")]
    assert rows == [("\ufeffein Hund", "a dog"), ("zwei", "two")]  # the import drops, counts it
    made = run("t", "de-en", tmp_path / "data", Tsv(path, "de", "en"), valid_size=0, test_size=0)
    assert _lines(made, "train", "de") == ["ein Hund", "zwei"]


def test_a_hub_row_with_a_null_side_is_an_empty_pair_for_the_filter():
    hub = Hub.__new__(Hub)  # the row reader alone: no dataset is loaded
    hub.id, hub.fields = "x", ("de", "en")
    src, tgt = hub._row({"translation": {"de": None, "en": "a dog"}}, "train", 1)
    assert (src, tgt) == ("", "a dog") and Filters().drop(src, tgt) == "empty"


def test_a_failed_swap_puts_the_old_corpus_back(tmp_path, monkeypatch):
    target, new = tmp_path / "de-en", tmp_path / ".de-en.tmp-1"
    target.mkdir()
    (target / "train.de").write_text("old\n")
    new.mkdir()
    monkeypatch.setattr(scratch_module, "_EXCHANGE", None)  # the two-rename way
    real = Path.rename

    def failing(self, other):
        if self == new:
            raise OSError("disk full")
        return real(self, other)

    monkeypatch.setattr(Path, "rename", failing)
    with pytest.raises(OSError):
        swap_in(new, target)
    assert (target / "train.de").read_text() == "old\n"


def test_ids_are_uint16_up_to_and_including_65536_pieces():
    assert token_dtype(65_536) == np.uint16 and token_dtype(65_537) == np.int32


class _Sizes:
    src_size = tgt_size = 10


def test_a_store_holding_an_id_equal_to_the_vocabulary_size_is_refused(tmp_path):
    store = tmp_path / "train.abc"
    chunk = (np.array([1, 10], np.uint16), np.array([2]), np.array([4], np.uint16), np.array([1]))
    write_store(store, iter([chunk]), 1, (np.uint16, np.uint16), "t")
    sides, problem = open_store(store, 1, _Sizes())
    assert sides is None and "does not hold" in problem
    fine = (np.array([1, 9], np.uint16), *chunk[1:])
    write_store(tmp_path / "ok", iter([fine]), 1, (np.uint16, np.uint16), "t")
    assert open_store(tmp_path / "ok", 1, _Sizes())[0] is not None


def test_a_batch_with_exactly_as_many_rows_as_ranks_is_trained():
    batches = Batches(np.arange(5), np.array([0, 2, 5]), np.array([0, 1]))
    shards = [batches.shard(rank, 2) for rank in range(2)]
    assert [s.real(0) for s in shards] == [True, True]
    assert sorted(shards[0][0] + shards[1][0]) == [0, 1]


def test_above_the_bounds_the_sample_is_drawn_over_the_whole_text_by_bytes(tmp_path):
    path = tmp_path / "train.de"
    lines = [f"line {i:05d} " + "w" * (i % 7) for i in range(10_000)]
    path.write_text("".join(x + "\n" for x in lines))
    size = path.stat().st_size // 10  # the byte bound is the tighter one
    taken = list(training_sample([path], sentences=10**9, size=size))
    index = [int(x.split()[1]) for x in taken]
    assert 800 <= len(taken) <= 1000  # about a tenth of the lines, within the bytes
    assert sum(len(x.encode()) + 1 for x in taken) <= size
    assert max(index) > 9_000 and min(index) < 1_000  # from the whole text, not its head
