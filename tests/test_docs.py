"""The documentation against the code: the generated config reference is current, relative
links and images resolve, the README stays a short front page that needs nothing beside the
checkout, and every config key is used by a shipped config, a test or a doc page.

Each check is a function over a folder, so the tests beside it show it failing on a broken
copy in tmp_path."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from nmt.core import config as nmt_config
from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = tuple(nmt_config.SECTIONS)
CLASSES = {cls.__name__: section for section, cls in nmt_config.SECTIONS.items()}

# Keys used by nothing but documented outside the reference (docs/experiments/, say): none
# today. Add `"section.name",  # where it is documented` only for such a key.
ALLOWED_UNUSED: set[str] = set()


@functools.cache
def config_reference():
    """scripts/config_reference.py as a module (scripts/ is not a package)."""
    return load_script(ROOT / "scripts" / "config_reference.py")


# ---- the generated config reference -------------------------------------------------------

def test_config_reference_is_current():
    cr = config_reference()
    page = cr.PAGE.read_text(encoding="utf-8")
    assert cr.current(page) is not None, "docs/configuration.md lost its reference markers"
    assert cr.current(page) == cr.reference(), (
        "docs/configuration.md: the config reference is stale; run "
        "`python scripts/config_reference.py` (make docs)")


def test_config_reference_follows_comments_and_check_fails_when_stale(tmp_path, monkeypatch,
                                                                      capsys):
    cr = config_reference()
    source = cr.SOURCE.read_text(encoding="utf-8")
    assert "# beam size (1 = greedy)" in source
    changed = tmp_path / "config.py"
    changed.write_text(source.replace("# beam size (1 = greedy)", "# beam width, 1: greedy"),
                       encoding="utf-8")
    text = cr.reference(changed)
    assert text != cr.reference() and "beam width, 1: greedy" in text
    # continuation lines (`#   ...`) and a block above a field are the field's text
    assert "| `model.memory` |" in text and "(dot is then general)" in text
    assert "over window_steps steps (0 = model.window" in text

    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "configuration.md"
    page.write_text(f"# Configuration\n\n{cr.START}\nold\n{cr.END}\n", encoding="utf-8")
    monkeypatch.setattr(cr, "ROOT", tmp_path)
    monkeypatch.setattr(cr, "PAGE", page)
    assert cr.main(["--check"]) == 1
    message = capsys.readouterr().err.strip()
    assert "\n" not in message
    assert "docs/configuration.md" in message and "python scripts/config_reference.py" in message
    assert cr.main([]) == 0 and cr.main(["--check"]) == 0
    rewritten = page.read_text(encoding="utf-8")
    assert rewritten.startswith("# Configuration\n\n") and "| `decode.beam` |" in rewritten


# ---- links and images ---------------------------------------------------------------------

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+[\"'(][^)]*)?\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(\S+)", re.M)
HTML_REF = re.compile(r"<(?:img|a)\b[^>]*?\b(?:src|href)=\"([^\"]+)\"", re.I)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def doc_pages(root: Path) -> list[Path]:
    pages = [root / "README.md", root / "configs" / "README.md",
             *sorted((root / "docs").rglob("*.md"))]
    return [p for p in pages if p.is_file()]


def targets(text: str) -> list[str]:
    """Link and image targets of a Markdown page, outside code blocks and code spans."""
    text = CODE_SPAN.sub("", FENCE.sub("", text))
    found = [*LINK.findall(text), *DEFINITION.findall(text), *HTML_REF.findall(text)]
    return [t.strip("<>") for t in found]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation but '-' and '_' dropped,
    each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@functools.cache
def anchors(page: Path) -> frozenset[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    for heading in HEADING.findall(text):
        base = slug(heading)
        out.add(f"{base}-{seen[base]}" if base in seen else base)  # repeats get -1, -2, ...
        seen[base] = seen.get(base, 0) + 1
    return frozenset(out)


def broken_links(root: Path, text_of=lambda page: page.read_text(encoding="utf-8")) -> list[str]:
    """'page: target (why)' for every relative link or image that does not resolve."""
    root = root.resolve()
    broken = []
    for page in doc_pages(root):
        for target in targets(text_of(page)):
            if SCHEME.match(target) or target.startswith("#"):
                continue  # http(s):, mailto:, ...; anchors on the page itself
            path, _, anchor = unquote(target).partition("#")
            path = path.split("?")[0]
            file = (root / path.lstrip("/")) if path.startswith("/") else page.parent / path
            file = file.resolve()
            where = f"{page.relative_to(root)}: {target}"
            if not file.is_relative_to(root):
                broken.append(f"{where} (outside the checkout)")
            elif not file.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{where} (no heading #{anchor} in {file.relative_to(root)})")
    return broken


def test_relative_links_and_images_resolve():
    assert doc_pages(ROOT)[:2] == [ROOT / "README.md", ROOT / "configs" / "README.md"]
    broken = broken_links(ROOT)
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_link_check_finds_missing_files_images_and_headings(tmp_path):
    (tmp_path / "docs" / "images").mkdir(parents=True)
    (tmp_path / "docs" / "images" / "a.png").write_bytes(b"")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "README.md").write_text("[docs](../docs/page.md#a-b_c-d)\n")
    (tmp_path / "docs" / "page.md").write_text(
        "# Page\n\n## A b_c: `d`\n\n```bash\n# not a heading\n[x](missing-in-code.md)\n```\n"
        "![ok](images/a.png) `[x](missing-in-span.md)` [web](https://example.org/x) "
        "[top](#page) [mail](mailto:a@b.c)\n")
    (tmp_path / "README.md").write_text("[p](docs/page.md) ![i](docs/images/a.png)\n")
    assert broken_links(tmp_path) == []

    (tmp_path / "README.md").write_text(
        "[p](docs/gone.md) ![i](docs/images/b.png)\n[h](docs/page.md#not-a-heading)\n"
        "[n](docs/page.md#not-a-heading) [up](../elsewhere.md)\n")
    assert broken_links(tmp_path) == [
        "README.md: docs/gone.md (no such file)",
        "README.md: docs/images/b.png (no such file)",
        "README.md: docs/page.md#not-a-heading (no heading #not-a-heading in docs/page.md)",
        "README.md: docs/page.md#not-a-heading (no heading #not-a-heading in docs/page.md)",
        "README.md: ../elsewhere.md (outside the checkout)",
    ]
    assert slug("Adapting to the text: `--adapt`") == "adapting-to-the-text---adapt"


def test_the_real_pages_fail_with_one_broken_link():
    page = ROOT / "docs" / "configuration.md"

    def text_of(path: Path) -> str:
        text = path.read_text(encoding="utf-8")
        return text.replace("(faithfulness.md)", "(faithful.md)", 1) if path == page else text

    assert "(faithfulness.md)" in page.read_text(encoding="utf-8")
    assert broken_links(ROOT, text_of) == ["docs/configuration.md: faithful.md (no such file)"]


# ---- the README and the Makefile ----------------------------------------------------------

def readme_problems(root: Path) -> list[str]:
    text = (root / "README.md").read_text(encoding="utf-8")
    problems = []
    if len(text.splitlines()) > 250:
        problems.append(f"README.md has {len(text.splitlines())} lines (at most 250)")
    if "../shared" in text:
        problems.append("README.md mentions ../shared")
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    for number, line in enumerate(makefile.splitlines(), 1):
        if "../shared" in line and not line.lstrip().startswith("#"):
            problems.append(f"Makefile:{number} uses ../shared")
    return problems


def test_readme_is_short_and_nothing_needs_shared():
    assert readme_problems(ROOT) == []


def test_readme_check_fails_on_a_long_readme_or_shared(tmp_path):
    (tmp_path / "README.md").write_text("line\n" * 250)
    (tmp_path / "Makefile").write_text("# not ../shared in a comment\nall:\n\techo ok\n")
    assert readme_problems(tmp_path) == []
    (tmp_path / "README.md").write_text("line\n" * 250 + "see ../shared/gold\n")
    (tmp_path / "Makefile").write_text("GOLD ?= ../shared/gold\nall:\n\techo $(GOLD)\n")
    assert readme_problems(tmp_path) == ["README.md has 251 lines (at most 250)",
                                         "README.md mentions ../shared",
                                         "Makefile:1 uses ../shared"]


# ---- every config key is used -------------------------------------------------------------

def all_keys() -> set[str]:
    top = {f.name for f in dataclasses.fields(nmt_config.Config)
           if f.name not in nmt_config.SECTIONS}
    return top | {f"{section}.{f.name}" for section, cls in nmt_config.SECTIONS.items()
                  for f in dataclasses.fields(cls)}


DOTTED = re.compile(r"\b(" + "|".join(SECTIONS) + r")\.([A-Za-z_]\w*)")


def _distinctive() -> dict[str, str]:
    """Bare names that mean one key: with an underscore, in one section only (`rnn_type=`,
    `"log_every":`); `size` or `seed` alone could be anything."""
    owners: dict[str, list[str]] = {}
    for key in all_keys():
        if "." in key:
            section, name = key.split(".")
            owners.setdefault(name, []).append(key)
    return {name: keys[0] for name, keys in owners.items() if len(keys) == 1 and "_" in name}


def _from_mapping(raw) -> set[str]:
    """Keys of a parsed config: `section.name` for a section's keys, top-level names."""
    found = set()
    if isinstance(raw, dict):
        for key, value in raw.items():
            if key in nmt_config.SECTIONS and isinstance(value, dict):
                found |= {f"{key}.{name}" for name in value}
            elif isinstance(key, str):
                found.add(key)
    return found


def _yaml(text: str) -> set[str]:
    try:
        return _from_mapping(yaml.safe_load(text))
    except yaml.YAMLError:
        return set()


def _python(text: str) -> set[str]:
    """Keys in a test's code: `{"train": {"lr": ...}}`, `TrainConfig(lr=...)`, YAML strings,
    and the distinctive bare names as keyword arguments, dict keys or YAML keys."""
    found = set()
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (isinstance(key, ast.Constant) and key.value in nmt_config.SECTIONS
                        and isinstance(value, ast.Dict)):
                    found |= {f"{key.value}.{k.value}" for k in value.keys
                              if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name in CLASSES:
                found |= {f"{CLASSES[name]}.{kw.arg}" for kw in node.keywords if kw.arg}
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and re.search(r"^\s*(" + "|".join(SECTIONS) + r"):", node.value, re.M)):
            found |= _yaml(node.value)
    bare = _distinctive()
    names = "|".join(map(re.escape, bare))
    for name in re.findall(r"\b(" + names + r")\b[\"']?\s*[:=]", text):
        found.add(bare[name])
    return found


def _markdown(text: str) -> set[str]:
    """Keys on a doc page outside the generated reference: `section.name` and YAML blocks."""
    cr = config_reference()
    if cr.current(text) is not None:
        head, rest = text.split(cr.START, 1)
        text = head + rest.split(cr.END, 1)[1]
    found = set()
    for block in re.findall(r"^```ya?ml\n(.*?)^```", text, re.M | re.S):
        found |= _yaml(block)
    return found | {".".join(m) for m in DOTTED.findall(text)}


def used_keys(root: Path) -> dict[str, set[str]]:
    """{where: keys} over shipped configs, tests and docs (docs/experiments/ left out)."""
    used: dict[str, set[str]] = {}
    for path in sorted((root / "configs").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        used["configs"] = used.get("configs", set()) | _yaml(text) | {
            ".".join(m) for m in DOTTED.findall(text)}
    for path in sorted((root / "tests").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        used["tests"] = used.get("tests", set()) | _python(text) | {
            ".".join(m) for m in DOTTED.findall(text)}
    for path in sorted((root / "docs").rglob("*.md")):
        if "experiments" not in path.relative_to(root / "docs").parts:
            used["docs"] = used.get("docs", set()) | _markdown(path.read_text(encoding="utf-8"))
    return used


def unused_keys(root: Path) -> list[str]:
    used = set().union(*used_keys(root).values())
    return sorted(all_keys() - used)


def test_every_config_key_is_used():
    unused = [key for key in unused_keys(ROOT) if key not in ALLOWED_UNUSED]
    assert not unused, ("config keys that no shipped config, test or doc page (outside the "
                        "generated reference and docs/experiments/) uses: " + ", ".join(unused))
    assert not ALLOWED_UNUSED - set(unused_keys(ROOT)), "allowed keys that are used now"


def test_key_check_reads_configs_tests_and_docs(tmp_path):
    assert unused_keys(tmp_path) == sorted(all_keys())
    (tmp_path / "configs" / "x").mkdir(parents=True)
    (tmp_path / "configs" / "x" / "a.yaml").write_text(
        "name: a\nmodel:\n  family: luong  # --set train.lr=1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(
        'RAW = {"decode": {"beam": 1}}\nM = ModelConfig(heads=2)\nD = dict(rnn_type="lstm")\n'
        'T = "train: {seed: 1}\\n"\n')
    (tmp_path / "docs" / "experiments").mkdir(parents=True)
    (tmp_path / "docs" / "experiments" / "x.md").write_text("`vocab.size`\n")
    (tmp_path / "docs" / "p.md").write_text(
        "`data.pair`\n```yaml\nruns_dir: r\nlocal: {window_start: 1}\n```\n"
        "<!-- reference:start -->\n`data.root`\n<!-- reference:end -->\n")
    found = set(all_keys()) - set(unused_keys(tmp_path))
    assert found == {"name", "model.family", "train.lr", "decode.beam", "model.heads",
                     "model.rnn_type", "train.seed", "data.pair", "runs_dir",
                     "local.window_start"}


def test_gpu_check_says_in_one_line_when_there_is_no_gpu():
    """scripts/gpu_check.py (make gpu-check) without CUDA: one line, exit 0."""
    import subprocess
    import sys

    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: make gpu-check runs the real checks")
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.count("\n") == 1 and "no CUDA device" in out.stdout


@pytest.mark.parametrize("flag, value", [("--adapt-lr", "nmt.training.adapt:DEFAULT_LR"),
                                         ("--agreement-threshold",
                                          "nmt.data.symmetrize:DEFAULT_AGREEMENT")])
def test_the_cli_guides_defaults_are_the_codes(flag, value):
    """docs/cli.md's "(default X)" of an option `nmt align` resolves in code."""
    import importlib

    from nmt.report.align import AlignOptions

    module, name = value.split(":")
    text = (ROOT / "docs" / "cli.md").read_text()
    (documented,) = re.findall(rf"`{flag}` \(default ([^)]+)\)", text)
    assert float(documented) == getattr(importlib.import_module(module), name)
    if flag == "--adapt-lr":
        assert AlignOptions(runs=[Path("r")]).adapt_lr == float(documented)
