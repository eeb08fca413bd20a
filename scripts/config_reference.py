"""The reference of every config key, generated from `nmt/core/config.py` (`make docs`).

Each key's type and default come from the dataclasses, its allowed values from the field's
declaration (`one_of`, `registered`: `nmt.models.checks.choices`; `positive`, `non_negative`,
`fraction`: the field's "check"), whether `--resume` refuses a change to it from its
`fixed`/`free` declaration (nmt.core.fields), and its text from the source's comments: the trailing
`# comment` on the field's line with its continuation lines (`#   ...`), and the comment
block on the lines just above the field. A section's class docstring opens its table.

    python scripts/config_reference.py          # rewrite the reference in docs/configuration.md
    python scripts/config_reference.py --check  # exit 1 when that page is stale
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import io
import re
import sys
import tokenize
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nmt.core import config as nmt_config  # noqa: E402
from nmt.core.checkpoint import RESUME_KEYS  # noqa: E402
from nmt.core.fields import FREE  # noqa: E402
from nmt.models.checks import choices  # noqa: E402

SOURCE = ROOT / "nmt" / "core" / "config.py"
PAGE = ROOT / "docs" / "configuration.md"
START, END = "<!-- reference:start -->", "<!-- reference:end -->"
COMMAND = "python scripts/config_reference.py"
CONTINUATION = re.compile(r"^#\s{3}")  # `#   ...` carries on the comment of the line above


def field_comments(source: str) -> dict[str, dict[str, str]]:
    """{class name: {field name: comment text}} read from the source of nmt/core/config.py."""
    lines = source.splitlines()
    comments: dict[int, str] = {}  # line number -> comment text (without '#')
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string
    found: dict[str, dict[str, str]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields: dict[int, tuple[str, int]] = {}  # first line -> (name, last line)
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                fields[stmt.lineno] = (stmt.target.id, stmt.end_lineno or stmt.lineno)
        texts: dict[str, str] = {}
        block: list[str] = []  # comment-only lines waiting for the field below them
        last: list[str] | None = None  # the trailing comment that continuation lines extend
        number = node.body[0].lineno
        end = node.end_lineno or number
        while number <= end:
            stripped = lines[number - 1].strip()
            if number in fields:
                name, last_line = fields[number]
                trailing = [comments[n] for n in range(number, last_line + 1) if n in comments]
                last = [_text(c) for c in trailing] or None
                texts[name] = (block, last)
                block = []
                number = last_line + 1
                continue
            if stripped.startswith("#"):
                if last is not None and CONTINUATION.match(stripped):
                    last.append(_text(stripped))
                else:
                    last = None
                    block.append(_text(stripped))
            else:  # a blank line, a docstring, a method: what came before belongs to none
                block, last = [], None
            number += 1
        found[node.name] = {name: " ".join([*above, *(trail or [])]).strip()
                            for name, (above, trail) in texts.items()}
    return found


def _text(comment: str) -> str:
    return comment.lstrip("#").strip()


def _md(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped; `*` and `<` literal outside code."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if not part.startswith("`"):
            part = part.replace("*", r"\*").replace("<", "&lt;").replace(">", "&gt;")
        out.append(part.replace("|", r"\|"))
    return "".join(out)


def _default(value: typing.Any) -> str:
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if value == "":
        return '`""`'
    return f"`{value}`"


def _allowed(key: str | None, f: dataclasses.Field) -> str:
    valid = choices(key) if key else None
    if valid is not None:
        return ", ".join(f"`{v}`" for v in valid)
    return f.metadata.get("check", "")


def _table(prefix: str, cls: type, comments: dict[str, str]) -> list[str]:
    hints = typing.get_type_hints(cls)
    rows = ["| key | type | default | allowed | on --resume | description |",
            "|---|---|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            continue  # a section: it has its own table
        key = f"{prefix}.{f.name}" if prefix else f.name
        cells = [f"`{key}`", hints[f.name].__name__, _default(f.default),
                 _md(_allowed(key if prefix else None, f)),
                 "free" if f.metadata.get("resume") == FREE else "refused",
                 _md(comments.get(f.name, ""))]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def refused_summary() -> list[str]:
    """The keys a resume refuses (`RESUME_KEYS`, from each field's declaration), a section
    whose every key is refused as `section.*`."""
    keys = [key for key, _ in nmt_config.leaf_fields()]
    parts = []
    for section in ["", *nmt_config.SECTIONS]:
        mine = [k for k in keys if (k.rsplit(".", 1)[0] if "." in k else "") == section]
        fixed = [k for k in mine if k in RESUME_KEYS]
        if section and fixed == mine:
            parts.append(f"`{section}.*`")
        elif section and len(fixed) > len(mine) / 2:
            parts.append(f"`{section}.*` but " + ", ".join(
                f"`{k}`" for k in mine if k not in fixed))
        else:
            parts += [f"`{k}`" for k in fixed]
    return ["### What a resume refuses", "",
            "`nmt train --resume` refuses a change to " + "; ".join(parts) + ". Every other "
            "key may change (the column \"on --resume\" below)."]


def reference(source: Path = SOURCE) -> str:
    """The Markdown that goes between the reference markers of docs/configuration.md."""
    comments = field_comments(Path(source).read_text(encoding="utf-8"))
    out = ["", "", *refused_summary(), "", "### Top level", ""]
    out += _table("", nmt_config.Config, comments.get("Config", {}))
    for section, cls in nmt_config.SECTIONS.items():
        out += ["", f"### `{section}`", ""]
        doc = inspect.getdoc(cls) or ""
        if doc and not doc.startswith(f"{cls.__name__}("):  # not dataclass's generated one
            out += [" ".join(doc.split()), ""]
        out += _table(section, cls, comments.get(cls.__name__, {}))
    moved = [f"`{old}` → `{new}`" for old, new in nmt_config.MOVED.items()]
    removed = [f"`{old}`" for old in nmt_config.REMOVED]
    out += ["", "Keys that moved: " + ", ".join(moved) + ". Keys that were removed: "
            + ", ".join(removed) + ". A config that uses one fails with a line saying what to "
            "rename or delete; runs trained with them keep loading.", "", ""]
    return "\n".join(out)


def current(page: str) -> str | None:
    """The reference as it stands in the page's text, or None without the markers."""
    if START not in page or END not in page.split(START, 1)[1]:
        return None
    return page.split(START, 1)[1].split(END, 1)[0]


def with_reference(page: str, text: str) -> str:
    head, rest = page.split(START, 1)
    return head + START + text + END + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the page is stale instead of rewriting it")
    args = parser.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    rel = PAGE.relative_to(ROOT)
    if current(page) is None:
        print(f"{rel}: no '{START}' ... '{END}' lines to write the reference between",
              file=sys.stderr)
        return 1
    text = reference()
    if current(page) == text:
        return 0
    if args.check:
        print(f"{rel} is stale (the config reference differs from nmt/core/config.py): "
              f"run `{COMMAND}` (make docs)", file=sys.stderr)
        return 1
    PAGE.write_text(with_reference(page, text), encoding="utf-8")
    print(f"wrote the config reference to {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
