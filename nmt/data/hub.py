"""`--hf ID_OR_PATH`: an import's sentence pairs from a Hugging Face dataset, streamed (a
local folder in the hub's shapes reads the same way); the other sources and the `Source`
protocol it follows are in nmt/data/sources.py (docs/data.md, "Import your own corpus")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nmt.core.errors import NMTError, one_line
from nmt.data.folder import check_split
from nmt.data.sources import SPLIT_NAMES, Pair


@contextmanager
def _quiet_datasets() -> Iterator[None]:
    """`datasets` logs a reader's failure before raising it (its own stderr handler); the
    import turns the exception into one NMTError line, so the log would say it twice."""
    import datasets  # start-up: as in Hub._load, only a hub source imports it

    before = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        yield
    finally:
        datasets.logging.set_verbosity(before)


class Hub:
    """`--hf ID_OR_PATH`: a Hugging Face dataset (a local folder works the same), streamed.
    Rows hold a `translation` dict (wmt, opus) or flat columns (multi30k); `fields` names
    the two keys when they are not the language codes."""

    def __init__(self, dataset: str, src: str, tgt: str, *, config: str | None = None,
                 revision: str | None = None, split_map: dict[str, str] | None = None,
                 fields: tuple[str, str] | None = None):
        self.id, self.config, self.revision = dataset, config, revision
        self.label = dataset
        self.split_map = {**SPLIT_NAMES, **(split_map or {})}
        self.fields = fields or (src, tgt)
        self.data = self._load()
        ours = {hub: self.split_map.get(hub, hub) for hub in self.data}
        for hub, split in ours.items():
            check_split(split, f"{self.id} split '{hub}'")
        if len(set(ours.values())) < len(ours):
            raise NMTError(f"{self.id}: --split-map sends two splits to one name ({ours})")
        if "train" not in ours.values():  # named as the dataset names them, for --split-map
            first = next(iter(ours), "SPLIT")
            raise NMTError(f"{self.id}: no split becomes 'train' (its splits: {', '.join(ours)}); "
                           f"name one with --split-map, e.g. --split-map {first}=train")
        self.splits = ours

    def _load(self):
        try:
            import datasets  # start-up: datasets (seconds to import) only for --hf

            return datasets.load_dataset(self.id, self.config, revision=self.revision,
                                         streaming=True)
        except Exception as exc:  # noqa: BLE001 - any hub failure becomes one clear line
            if "Config name is missing" in str(exc):
                raise NMTError(f"{self.id} has several configs ({_configs(datasets, self.id)}); "
                               "pick one with --config NAME") from None
            if "scripts are no longer supported" in str(exc):
                raise NMTError(f"{self.id} is a script-based dataset, which datasets 4 no longer "
                               "runs; import its parquet branch: --revision refs/convert/parquet"
                               ) from None
            raise NMTError(f"could not load '{self.id}' with Hugging Face datasets "
                           f"({one_line(exc)}); check the id, --config and --revision, or "
                           "import local files with --files, --from DIR or --tsv") from None

    def split_names(self) -> list[str]:
        return list(self.splits.values())

    def describe(self) -> dict:
        local = Path(self.id).exists()  # a local folder: where it is, as --files records
        return {"kind": "hf", "id": str(Path(self.id).resolve()) if local else self.id,
                "config": self.config, "revision": self.revision,
                "split_map": self.splits, "fields": list(self.fields)}

    def __iter__(self) -> Iterator[Pair]:
        with _quiet_datasets():  # a read error is ours to report, in one line
            for hub, split in self.splits.items():
                rows = iter(self.data[hub])
                number = 0
                while True:
                    try:
                        row = next(rows, None)
                    except Exception as exc:  # noqa: BLE001 - a network or file failure
                        where = f"after row {number:,}" if number else "from its start"
                        raise NMTError(f"{self.id} split '{hub}' {where}: could not read "
                                       f"({one_line(exc)})") from None
                    if row is None:
                        break
                    number += 1
                    yield split, *self._row(row, hub, number)

    def _row(self, row: dict, hub: str, number: int) -> tuple[str, str]:
        table = row["translation"] if isinstance(row.get("translation"), dict) else row
        texts = []
        for field in self.fields:
            if field not in table:
                raise NMTError(f"{self.id} split '{hub}' row {number}: no field '{field}' (it "
                               f"has: {', '.join(map(str, table))}); name the two with "
                               "--fields SRC_FIELD,TGT_FIELD")
            text = "" if table[field] is None else table[field]
            if not isinstance(text, str):
                raise NMTError(f"{self.id} split '{hub}' row {number}: field '{field}' holds "
                               f"{type(text).__name__}, not text; fix the row, or name two "
                               "text fields with --fields SRC_FIELD,TGT_FIELD")
            texts.append(text)
        return texts[0], texts[1]


def _configs(datasets, dataset: str) -> str:
    """The config names of `dataset`, for the message that asks for one."""
    try:
        return ", ".join(datasets.get_dataset_config_names(dataset))
    except Exception:  # noqa: BLE001 - the message then says only that there are several
        return "see the dataset's card"
