"""A catalogue of bad inputs across every verb, run through the in-process CLI.

Each error case must exit 2 with exactly one stderr line `nmt: error: ...` that names the
file, line or key, print no traceback, and leave every file that existed before unchanged
(the two trained runs, the corpus, and the case's own copies).

Some inputs are not errors and are handled gracefully (exit 0):
- `translate` of an empty or whitespace-only line prints an empty line in its place;
- characters outside the vocabulary (emoji, CJK) become <unk> pieces and translate;
- a 3,000-word sentence translates (its source is cut to evaluate.MAX_SOURCE subwords);
- a corpus line of 100,000 characters imports as is (`data download --from`); training
  drops every pair longer than data.max_len subwords, so it never reaches the model.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from nmt.data.subwords import Vocab
from nmt.models.checks import load_config
from nmt.training.batches import load_data
from nmt.training.trainer import Trainer
from tests.test_cli import assert_user_error, run_cli
from tests.test_reliability import make_corpus, write_config


@dataclass
class Env:
    tmp: Path  # this case's own folder
    data: Path  # the synthetic corpus root (shared)
    runs: Path  # the folder of the trained runs (shared)
    configs: Path  # their YAML configs
    vocab: int  # their vocabulary size

    def run(self, family: str) -> Path:
        return self.runs / family

    def copy_run(self, family: str = "bahdanau", name: str = "copy") -> Path:
        return Path(shutil.copytree(self.run(family), self.tmp / "runs" / name))

    def file(self, name: str, content: str | bytes) -> Path:
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)
        return path

    def config(self, text: str) -> Path:
        """A config whose data section points at the shared corpus, plus `text`; should a
        check ever let it through, training stops after 2 steps."""
        base = (f"runs_dir: {self.tmp / 'runs'}\n"
                f"data: {{root: {self.data}, corpus: synth, pair: src-tgt, max_len: 12}}\n"
                "vocab: {size: 200}\n")
        if "train:" not in text:
            base += "train: {max_steps: 2, valid_every: 2, threads: 1}\n"
        return self.file("cfg.yaml", base + text)

    def raw(self, **files: bytes) -> Path:
        """Raw corpus files for `data download --from` (name_lang='...' -> name.lang)."""
        raw = self.tmp / "raw"
        defaults = {"train_de": b"Ein Hund.\nZwei Katzen.\n", "train_en": b"A dog.\nTwo cats.\n",
                    "val_de": b"Ein Mann.\n", "val_en": b"A man.\n"}
        for key, data in {**defaults, **files}.items():
            if data is not None:
                self.file(f"raw/{key.replace('_', '.')}", data)
        return raw

    def sentences(self, n: int = 2) -> list[tuple[str, str]]:
        folder = self.data / "synth" / "src-tgt"
        src = (folder / "test.src").read_text().splitlines()
        tgt = (folder / "test.tgt").read_text().splitlines()
        return list(zip(src, tgt))[:n]


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> dict:
    """One tiny run per family that the catalogue needs (20 steps, one thread)."""
    data = make_corpus(tmp_path_factory.mktemp("data"))
    runs = tmp_path_factory.mktemp("runs")
    configs = tmp_path_factory.mktemp("configs")
    for family in ("bahdanau", "fixed_context"):
        path = write_config(configs / f"{family}.yaml", data, runs, family, family)
        Trainer(load_config(path), quiet=True).fit()
    vocab = Vocab.from_dir(runs / "bahdanau" / "spm").src_size
    return {"data": data, "runs": runs, "configs": configs, "vocab": vocab}


@pytest.fixture
def env(shared, tmp_path) -> Env:
    return Env(tmp_path, **shared)


def checksums(env: Env) -> dict[Path, str]:
    folders = (env.runs, env.data, env.configs, env.tmp)
    return {p: hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in folders for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_unchanged(before: dict[Path, str], env: Env) -> None:
    after = checksums(env)
    damaged = [str(p) for p, digest in before.items() if after.get(p) != digest]
    assert not damaged, f"changed or removed by a failing command: {damaged}"


# ----------------------------------------------------------------- the error catalogue
# Each case builds its inputs under env.tmp and returns (CLI arguments, fragments that the
# one error line must contain).

CASES = {}


def case(name: str):
    def register(build):
        CASES[name] = build
        return build
    return register


def _download(raw: Path, env: Env) -> list:
    return ["data", "download", "multi30k", "--pair", "de-en", "--from", raw,
            "--root", env.tmp / "data"]


# corpus files --------------------------------------------------------------------------

@case("corpus-missing-dir")
def _(env):
    return _download(env.tmp / "nowhere", env), [str(env.tmp / "nowhere"), "not found"]


@case("corpus-missing-partner-file")
def _(env):
    raw = env.raw(train_en=None)
    return _download(raw, env), [str(raw / "train.de"), "no partner", "train.en"]


@case("corpus-empty")
def _(env):
    raw = env.raw(train_de=b"", train_en=b"")
    return _download(raw, env), [str(raw / "train.de"), "empty"]


@case("corpus-only-empty-pairs")
def _(env):
    raw = env.raw(train_de=b"Ein Hund.\n\n", train_en=b"\n   \n")
    return _download(raw, env), [str(raw / "train.de"), "empty side"]


@case("corpus-mismatched-line-counts")
def _(env):
    raw = env.raw(val_en=b"A man.\nA woman.\n")
    return _download(raw, env), [str(raw / "val.de"), str(raw / "val.en"), "1 lines", "has 2"]


@case("corpus-invalid-utf8")
def _(env):
    raw = env.raw(train_de="Ein Hund.\nGrüße\n".encode("cp1252"))
    return _download(raw, env), [f"{raw / 'train.de'}:2:", "UTF-8"]


@case("corpus-nul-byte")
def _(env):
    raw = env.raw(train_en=b"A dog.\nTwo\x00cats.\n")
    return _download(raw, env), [f"{raw / 'train.en'}:2:", "NUL"]


@case("corpus-corrupt-gzip")
def _(env):
    raw = env.raw(train_de=None, train_en=None)
    env.file("raw/train.de.gz", b"\x1f\x8b\x08\x00 not really gzip")
    env.file("raw/train.en", b"A dog.\n")
    return _download(raw, env), [str(raw / "train.de.gz"), "cannot read"]


@case("corpus-not-imported")
def _(env):
    cfg = env.file("cfg.yaml", f"data: {{root: {env.tmp / 'data'}, corpus: multi30k, "
                               "pair: de-en}\nmodel: {family: bahdanau}\n")
    return (["data", "prepare", "--config", cfg],
            [str(env.tmp / "data" / "multi30k" / "de-en" / "train.de"), "nmt data download"])


@case("synth-root-is-a-file")
def _(env):
    root = env.file("root", "a file\n")
    return ["data", "synth", "--root", root], [str(root)]


@case("download-root-is-a-file")
def _(env):
    root = env.file("root", "a file\n")
    return ["data", "download", "--from", env.raw(), "--root", root], [str(root)]


# configs -------------------------------------------------------------------------------

@case("config-missing-file")
def _(env):
    return ["train", "--config", env.tmp / "nope.yaml"], [str(env.tmp / "nope.yaml"), "not found"]


@case("config-key-typo")
def _(env):
    cfg = env.config("model: {family: bahdanau, hiden_size: 64}\n")
    return ["train", "--config", cfg], [str(cfg), "'model.hiden_size'", "hidden_size"]


@case("config-wrong-type")
def _(env):
    cfg = env.config("model: {family: bahdanau}\ntrain: {max_steps: lots}\n")
    return ["train", "--config", cfg], [str(cfg), "'train.max_steps'", "must be int"]


@case("config-negative-size")
def _(env):
    cfg = env.config("model: {family: bahdanau, hidden_size: -32}\n")
    return ["train", "--config", cfg], [str(cfg), "'model.hidden_size'", "positive", "-32"]


@case("config-unknown-family")
def _(env):
    cfg = env.config("model: {family: rnnsearch}\n")
    return ["train", "--config", cfg], [str(cfg), "'model.family'", "'rnnsearch'", "bahdanau"]


@case("config-vocab-below-the-characters")
def _(env):
    cfg = env.config("model: {family: bahdanau}\n").read_text().replace("size: 200", "size: 5")
    cfg = env.file("cfg.yaml", cfg)
    return ["train", "--config", cfg], ["vocab.size=5 is below the", "set vocab.size to at least"]


@case("config-max-len-below-every-pair")
def _(env):
    cfg = env.config("model: {family: bahdanau}\n").read_text().replace("max_len: 12", "max_len: 1")
    cfg = env.file("cfg.yaml", cfg)
    return ["train", "--config", cfg], ["no training pairs of at most data.max_len=1 subwords",
                                        "raise data.max_len"]


@case("config-unknown-scorer")
def _(env):
    cfg = env.config("model: {family: luong, score: cosine}\n")
    return ["train", "--config", cfg], [str(cfg), "'model.score'", "'cosine'", "general"]


@case("config-beam-0-via-set")
def _(env):
    cfg = env.config("model: {family: bahdanau}\n")
    return (["train", "--config", cfg, "--set", "decode.beam=0"],
            [str(cfg), "'decode.beam'", "positive", "0"])


@case("config-run-name-outside-runs")
def _(env):
    cfg = env.config("model: {family: bahdanau}\n")
    return ["train", "--config", cfg, "--set", "name=.."], [str(cfg), "'name'", "'..'"]


@case("config-set-without-equals")
def _(env):
    cfg = env.config("model: {family: bahdanau}\n")
    return ["train", "--config", cfg, "--set", "decode.beam"], ["--set", "KEY=VALUE"]


@case("config-invalid-yaml")
def _(env):
    cfg = env.file("cfg.yaml", "model:\n  family: bahdanau\ntrain: {lr: 0.1\n"
                               "decode: {beam: 1}\n")
    return ["train", "--config", cfg], [str(cfg), "invalid YAML", "line 4"]


@case("config-python-tag")
def _(env):
    marker = env.tmp / "marker"
    cfg = env.config(f'model: !!python/object/apply:os.system ["touch {marker}"]\n')
    return ["data", "prepare", "--config", cfg], [str(cfg), "invalid YAML", "python/object"]


@case("config-not-a-mapping")
def _(env):
    cfg = env.file("list.yaml", "- model\n- train\n")
    return ["train", "--config", cfg], [str(cfg), "mapping"]


# runs ----------------------------------------------------------------------------------

@case("run-missing-dir")
def _(env):
    return ["translate", "--run", env.tmp / "no_run", "x"], [str(env.tmp / "no_run"), "not found"]


@case("run-half-written")
def _(env):
    run = env.tmp / "runs" / "half"
    run.mkdir(parents=True)
    shutil.copy(env.run("bahdanau") / "config.yaml", run / "config.yaml")
    return (["translate", "--run", run, "x"],
            [str(run / "checkpoints" / "last.pt"), "checkpoint not found"])


@case("run-half-written-resume")
def _(env):
    run = env.tmp / "runs" / "half"
    run.mkdir(parents=True)
    cfg = shutil.copy(env.run("bahdanau") / "config.yaml", run / "config.yaml")
    return (["train", "--config", cfg, "--resume", "--set", f"runs_dir={env.tmp / 'runs'}",
             "--set", "name=half"],
            [str(run / "checkpoints" / "last.pt"), "nothing to resume"])


@case("run-checkpoint-of-another-vocabulary")
def _(env):
    run = env.copy_run()
    path = run / "checkpoints" / "best.pt"
    payload = torch.load(path, weights_only=True)
    torch.save({**payload, "src_vocab": env.vocab + 5, "tgt_vocab": env.vocab + 5}, path)
    return (["translate", "--run", run, "x"],
            [str(path), f"{env.vocab + 5}/{env.vocab + 5}", f"{env.vocab}/{env.vocab}"])


@case("run-truncated-checkpoint")
def _(env):
    run = env.copy_run()
    path = run / "checkpoints" / "best.pt"
    path.write_bytes(path.read_bytes()[:4000])
    return ["evaluate", "--run", run], [str(path), "truncated"]


@case("run-corrupt-config")
def _(env):
    run = env.copy_run()
    (run / "config.yaml").write_text("model: [bahdanau\n")
    return ["translate", "--run", run, "x"], [str(run / "config.yaml"), "invalid YAML"]


@case("run-config-not-a-mapping")
def _(env):
    run = env.copy_run()
    (run / "config.yaml").write_text("just a string\n")
    return ["compare", run, "--out", env.tmp / "report"], [str(run / "config.yaml"), "mapping"]


@case("run-corrupt-sentencepiece-model")
def _(env):
    run = env.copy_run()
    (run / "spm" / "joint.model").write_bytes(b"not a model")
    return ["translate", "--run", run, "x"], [str(run / "spm" / "joint.model"), "SentencePiece"]


@case("train-over-an-existing-run")
def _(env):
    cfg = env.configs / "bahdanau.yaml"
    return ["train", "--config", cfg], [str(env.run("bahdanau")), "--resume", "--set name="]


@case("resume-with-another-vocabulary")
def _(env):
    run = env.copy_run()
    return (["train", "--config", run / "config.yaml", "--resume", "--no-evaluate",
             "--set", f"runs_dir={run.parent}", "--set", f"name={run.name}",
             "--set", "vocab.size=150"],
            [str(run / "checkpoints" / "last.pt"), "vocab.size was ", "now 150",
             "resume without changing them"])


@case("resume-with-another-model-size")
def _(env):
    run = env.copy_run()
    return (["train", "--config", run / "config.yaml", "--resume", "--no-evaluate",
             "--set", f"runs_dir={run.parent}", "--set", f"name={run.name}",
             "--set", "model.hidden_size=48"],
            [str(run / "checkpoints" / "last.pt"), "model.hidden_size was ", "now 48"])


# translate -----------------------------------------------------------------------------

@case("translate-missing-input-file")
def _(env):
    return (["translate", "--run", env.run("bahdanau"), "--input", env.tmp / "in.txt"],
            [str(env.tmp / "in.txt"), "not found"])


@case("translate-input-invalid-utf8")
def _(env):
    path = env.file("in.txt", b"fine\n\xff\xfe broken\n")
    return ["translate", "--run", env.run("bahdanau"), "--input", path], [f"{path}:2:", "UTF-8"]


@case("translate-input-is-a-directory")
def _(env):
    return (["translate", "--run", env.run("bahdanau"), "--input", env.tmp],
            [str(env.tmp), "cannot read"])


@case("translate-beam-0")
def _(env):
    return ["translate", "--run", env.run("bahdanau"), "--beam", "0", "x"], ["--beam"]


@case("translate-n-best-over-beam")
def _(env):
    return (["translate", "--run", env.run("bahdanau"), "--beam", "2", "--n-best", "3", "x"],
            ["--n-best 3", "--beam 2"])


# align ---------------------------------------------------------------------------------

def _align(env: Env, *args) -> list:
    return ["align", "--out", env.tmp / "align", *args]


def _pairs(env: Env, n: int = 2) -> Path:
    return env.file("pairs.txt", "".join(f"{s} ||| {t}\n" for s, t in env.sentences(n)))


@case("align-gold-line-count")
def _(env):
    gold = env.file("gold.txt", "0-0\n0-0\n0-0\n")
    return (_align(env, "--run", env.run("bahdanau"), "--pairs", _pairs(env), "--gold", gold),
            [str(gold), "3 lines", "2 sentences"])


@case("align-gold-link-outside-sentence")
def _(env):
    gold = env.file("gold.txt", "0-0 40-40\n0-0\n")
    return (_align(env, "--run", env.run("bahdanau"), "--pairs", _pairs(env), "--gold", gold),
            [f"{gold}:1:", "40-40", "outside"])


@case("align-gold-malformed-link")
def _(env):
    gold = env.file("gold.txt", "0-0\n0:1\n")
    return (_align(env, "--run", env.run("bahdanau"), "--pairs", _pairs(env), "--gold", gold),
            [f"{gold}:2:", "'0:1'"])


@case("align-gold-missing-file")
def _(env):
    gold = env.tmp / "gold.txt"
    return (_align(env, "--run", env.run("bahdanau"), "--pairs", _pairs(env), "--gold", gold),
            [str(gold), "not found"])


@case("align-fixed-context-alone")
def _(env):
    return (_align(env, "--run", env.run("fixed_context"), "--limit", "2"),
            ["none of the runs has attention", "fixed_context"])


@case("align-pairs-without-separator")
def _(env):
    (s1, t1), (s2, t2) = env.sentences(2)
    pairs = env.file("pairs.txt", f"{s1} ||| {t1}\n{s2} {t2}\n")
    return (_align(env, "--run", env.run("bahdanau"), "--pairs", pairs),
            [f"{pairs}:2:", "'source ||| target'"])


@case("align-forced-without-target")
def _(env):
    return (_align(env, "--run", env.run("bahdanau"), "--src", env.sentences(1)[0][0]),
            ["forced alignment needs a target", "--mode free"])


@case("align-out-is-a-file")
def _(env):
    out = env.file("align", "a file\n")
    return (["align", "--out", out, "--run", env.run("bahdanau"), "--pairs", _pairs(env)],
            [str(out)])


@case("align-one-based-gold-with-index-0")
def _(env):
    gold = env.file("gold.txt", "1-1\n0-1\n")
    return (_align(env, "--run", env.run("bahdanau"), "--pairs", _pairs(env), "--gold", gold,
                   "--one-based"), [f"{gold}:2:", "--one-based"])


@case("align-over-training-without-snapshots")
def _(env):
    return (_align(env, "--run", env.run("bahdanau"), "--over-training"),
            [str(env.run("bahdanau") / "align" / "steps"), "align_sentences"])


@case("compare-sentence-out-of-range")
def _(env):
    return (["compare", env.run("bahdanau"), "--out", env.tmp / "report", "--sentence", "999"],
            ["999"])


@case("align-negative-limit")
def _(env):
    return _align(env, "--run", env.run("bahdanau"), "--limit", "-1"), ["--limit", "greater than or equal to 0"]


# evaluate and compare ------------------------------------------------------------------

@case("evaluate-unknown-split")
def _(env):
    return (["evaluate", "--run", env.run("bahdanau"), "--split", "tset"],
            ["tset.src", "split 'tset'", "test, train, val"])


@case("evaluate-negative-limit")
def _(env):
    return ["evaluate", "--run", env.run("bahdanau"), "--limit", "-1"], ["--limit", "greater than or equal to 0"]


@case("compare-missing-run")
def _(env):
    return (["compare", env.run("bahdanau"), env.tmp / "gone", "--out", env.tmp / "report"],
            [str(env.tmp / "gone"), "not found"])


@case("compare-not-a-run")
def _(env):
    (env.tmp / "empty").mkdir()
    return (["compare", env.tmp / "empty", "--out", env.tmp / "report"],
            [str(env.tmp / "empty"), "no config.yaml"])


@case("compare-out-is-a-file")
def _(env):
    out = env.file("report", "a file, not a folder\n")
    return ["compare", env.run("bahdanau"), "--out", out], [str(out), "not a directory"]


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_clear_error(name, env, capsys):
    args, fragments = CASES[name](env)
    before = checksums(env)
    assert_user_error(run_cli(capsys, *args), *fragments)
    assert_unchanged(before, env)
    assert not (env.tmp / "marker").exists()  # nothing from a config was executed


def test_the_catalogue_is_large_enough():
    assert len(CASES) >= 25


# ------------------------------------------------------------------------ graceful inputs


def _translate(capsys, env: Env, lines: list[str], family: str = "bahdanau") -> list[str]:
    path = env.file("in.txt", "".join(line + "\n" for line in lines))
    before = checksums(env)
    code, out, err = run_cli(capsys, "translate", "--run", env.run(family), "--input", path)
    assert code == 0 and err == "", err
    assert_unchanged(before, env)
    outputs = out.split("\n")
    assert outputs.pop() == ""  # every output line ends with a newline
    assert len(outputs) == len(lines), out
    return outputs


def test_translate_blank_lines_give_empty_lines_in_order(env, capsys):
    sentence = env.sentences(1)[0][0]
    lines = ["", sentence, "   ", "\t", sentence, ""]
    outputs = _translate(capsys, env, lines)
    assert [outputs[i] for i in (0, 2, 3, 5)] == ["", "", "", ""]
    assert outputs[1] == outputs[4]  # the same sentence, the same (deterministic) output


def test_translate_blank_arguments_and_stdin(env, capsys, monkeypatch):
    code, out, err = run_cli(capsys, "translate", "--run", env.run("bahdanau"), "", "  ")
    assert (code, out, err) == (0, "\n\n", "")
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n \n"))
    code, out, err = run_cli(capsys, "translate", "--run", env.run("bahdanau"))
    assert (code, out, err) == (0, "\n\n", "")


@pytest.mark.parametrize("family", ["bahdanau", "fixed_context"])
def test_translate_characters_outside_the_vocabulary(env, capsys, family):
    _translate(capsys, env, ["🙂🚀 👍", "漢字を読む", "Ωμέγα ∑ ∞ \u200b", env.sentences(1)[0][0] + " 🙂"],
               family)


def test_translate_a_3000_word_sentence(env, capsys):
    words = " ".join(env.sentences(1)[0][0].split() * 3000)
    sentence = " ".join(words.split()[:3000])
    assert len(sentence.split()) == 3000
    _translate(capsys, env, [sentence, "", sentence[:50]])


def test_corpus_with_a_100k_character_line(env, capsys):
    """It imports as is; training drops it (longer than data.max_len) and trains on the rest."""
    pairs = (env.data / "synth" / "src-tgt" / "train.src").read_text().splitlines()[:40]
    targets = (env.data / "synth" / "src-tgt" / "train.tgt").read_text().splitlines()[:40]
    long_line = ("wort " * 20_000).strip()
    assert len(long_line) >= 99_999
    de = "\n".join(pairs[:20] + [long_line] + pairs[20:]) + "\n"
    en = "\n".join(targets[:20] + ["words " + targets[20]] + targets[20:]) + "\n"
    raw = env.raw(train_de=de.encode(), train_en=en.encode(),
                  val_de=("\n".join(pairs[:5]) + "\n").encode(),
                  val_en=("\n".join(targets[:5]) + "\n").encode())
    code, out, err = run_cli(capsys, *_download(raw, env))
    assert code == 0 and err == "", err
    assert "train: 41 pairs" in out
    imported = (env.tmp / "data" / "multi30k" / "de-en" / "train.de").read_text().splitlines()
    assert imported[20] == long_line

    cfg = env.file("long.yaml", f"runs_dir: {env.tmp / 'runs'}\n"
                                f"data: {{root: {env.tmp / 'data'}, corpus: multi30k, "
                                "pair: de-en, test: val, max_len: 100}\n"
                                "vocab: {size: 200}\n"
                                "model: {family: bahdanau, emb_size: 16, hidden_size: 16}\n"
                                "train: {max_steps: 2, valid_every: 2, threads: 1, "
                                "batch_tokens: 200, align_sentences: 0}\n"
                                "decode: {beam: 1}\n")
    code, _, err = run_cli(capsys, "train", "--config", cfg, "--no-evaluate")
    assert code == 0 and "Traceback" not in err and "nmt: error" not in err, err
    data = load_data(load_config(cfg))
    assert len(data.train_src[20]) > 1000  # encoded in full...
    assert 20 not in data.train_idx and len(data.train_idx) >= 30  # ...and not trained on


@pytest.mark.parametrize("sources,targets,message", [
    (["a b", "c d"], ["x y", "   "], "pair 1: empty target"),
    (["   ", "c d"], ["x y", "z"], "pair 0: empty source"),
])
def test_an_empty_side_given_to_eflomal_is_named_by_its_own_index(sources, targets, message,
                                                                  monkeypatch):
    """nmt.align.statistical:statistical_links — the index counts the pairs given (not the
    training pairs eflomal learns from beside them), and an empty source is refused too;
    nothing reaches eflomal."""
    from nmt.align import statistical
    from nmt.core.errors import NMTError

    monkeypatch.setattr(statistical, "eflomal_links", lambda *a, **k: pytest.fail("ran"))
    train = (["u v"] * 3, ["w"] * 3)
    with pytest.raises(NMTError, match=message):
        statistical.statistical_links(sources, targets, train)
