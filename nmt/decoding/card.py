"""The model card (`README.md`) of a published model: the Hub's YAML metadata (languages,
license, `model-index` with BLEU and chrF per split scored on the checkpoint published and
AER where there is gold), then what it is, the corpus it was trained on, how it was trained,
how to use it and its limits (docs/deploy.md, "Publish a model")."""

from __future__ import annotations

from pathlib import Path

import yaml


def model_card(cfg, vocab, model, run: Path, facts: dict, license: str) -> str:
    src, tgt = cfg.src_lang, cfg.tgt_lang
    name = Path(run).name
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    transformer = cfg.model.family == "transformer"
    meta = {"language": [src, tgt], "license": license,
            "library_name": "transformers" if transformer else "nmt",
            "pipeline_tag": "translation", "tags": ["translation", "nmt", cfg.model.family]}
    if facts["scores"]:  # the Hub's metrics: only those of the checkpoint published
        meta["model-index"] = [{"name": name, "results": _results(cfg, facts["scores"])}]
    source = facts["manifest"].get("source", {})
    if (isinstance(source, dict) and source.get("kind") == "hf"
            and not Path(source["id"]).is_absolute()):  # a Hub id, not a local folder
        meta["datasets"] = [source["id"]]
    lines = ["---", yaml.safe_dump(meta, sort_keys=False).rstrip(), "---", "",
             f"# {name}: {cfg.model.family}, {src} to {tgt}", "",
             f"A {cfg.model.family} model ({params:,} parameters) trained with `nmt` from one "
             "YAML config (`config.yaml`, resolved), published with `nmt publish`.", ""]
    lines += _corpus(cfg, facts["manifest"])
    lines += ["## Training", "",
              f"- The checkpoint published: step {facts['steps']}, {facts['minutes']} minutes "
              f"into training, precision {facts['precision']}, on {facts['machine']}.",
              f"- Vocabulary: SentencePiece {cfg.vocab.model_type}, {vocab.src_size:,}"
              f"{'' if vocab.joint else f'/{vocab.tgt_size:,}'} pieces"
              f"{' (joint)' if vocab.joint else ''}.", ""]
    lines += _scores(facts["scores"]) + _usage(cfg, transformer) + _limits(cfg)
    return "\n".join(lines) + "\n"


def _results(cfg, scores: dict) -> list[dict]:
    results = []
    for split, entry in scores.items():
        metrics = [{"type": "bleu", "value": entry["bleu"], "name": "BLEU",
                    "args": {"signature": entry.get("bleu_signature")}},
                   {"type": "chrf", "value": entry["chrf"], "name": "chrF",
                    "args": {"signature": entry.get("chrf_signature")}}]
        aer = (entry.get("alignment") or {}).get("aer")
        if aer is not None:
            metrics.append({"type": "aer", "value": round(aer, 4), "name": "AER (alignment error rate)"})
        results.append({"task": {"type": "translation",
                                 "name": f"Translation {cfg.src_lang}-{cfg.tgt_lang}"},
                        "dataset": {"name": f"{cfg.data.corpus} {split}",
                                    "type": cfg.data.corpus, "split": split},
                        "metrics": metrics})
    return results


def _corpus(cfg, manifest: dict) -> list[str]:
    lines = ["## Corpus", ""]
    if not manifest:
        return lines + [f"`{cfg.data.corpus}` ({cfg.data.pair}); no manifest was kept.", ""]
    source = manifest.get("source")
    lines.append(f"`{cfg.data.corpus}` ({manifest.get('pair', cfg.data.pair)}), imported "
                 f"{manifest.get('created', '?')}; source: `{source if isinstance(source, str) else source.get('kind')}`.")
    if isinstance(source, dict):
        for key in ("id", "config", "revision", "path"):
            if source.get(key):
                lines.append(f"- {key}: `{source[key]}`")
        for path, sha in (source.get("files") or {}).items():
            lines.append(f"- `{Path(path).name}` sha256 `{sha}`")
    lines.append("")
    for split, entry in manifest.get("splits", {}).items():
        shas = ", ".join(f"{lang} `{sha[:16]}`" for lang, sha in entry.get("sha256", {}).items())
        lines.append(f"- {split}: {entry.get('lines', '?'):,} pairs ({shas})")
    return lines + [""]


def _scores(scores: dict) -> list[str]:
    if not scores:
        return ["## Scores", "", "This checkpoint was not evaluated (`nmt evaluate --checkpoint NAME` "
                "before `nmt publish` scores it).", ""]
    lines = ["## Scores", "", "| split | sentences | BLEU | chrF | AER | beam |",
             "|---|---|---|---|---|---|"]
    for split, entry in scores.items():
        aer = (entry.get("alignment") or {}).get("aer")
        lines.append(f"| {split} | {entry.get('sentences', '?')} | {entry['bleu']} | "
                     f"{entry['chrf']} | {'—' if aer is None else round(aer, 4)} | "
                     f"{entry.get('beam', '?')} |")
    signature = next(iter(scores.values())).get("bleu_signature")
    return lines + ["", f"sacreBLEU: `{signature}`", ""]


def _usage(cfg, transformer: bool) -> list[str]:
    nmt_way = ["With nmt (every family):", "", "```bash",
               "nmt translate --run THIS_FOLDER \"...\"", "nmt align --run THIS_FOLDER "
               "--src \"...\" --tgt \"...\"", "```", "", "```python", "import nmt",
               "model = nmt.load(\"THIS_FOLDER\")", "print(model.translate([\"...\"])[0].text)",
               "```", ""]
    if not transformer:
        return ["## Usage", ""] + nmt_way
    lines = ["## Usage", "", "With transformers (a MarianMTModel in Marian's own layout), as "
             "`nmt translate` decodes:", ""] + transformers_snippet(cfg) + [
             "", _what_differs(cfg), "", *nmt_way,
             "With CTranslate2: `ct2-transformers-converter --model THIS_FOLDER --output_dir "
             "ct2` (the folder follows Marian's conventions: `<pad>` last, a decoder that "
             "starts from a zero vector), or the `ctranslate2/` export when published with "
             "`--ctranslate2`. Give it the source pieces with `</s>` and suppress `<s>` and "
             "`<nmt_pad>`, which nmt never generates.", ""]
    if cfg.guided.weight > 0:
        lines += [f"Alignment: this model was trained with guided alignment; layer "
                  f"{cfg.guided.layer} (0-based), its first {cfg.guided.heads} "
                  "cross-attention heads averaged, is the alignment head.", ""]
    return lines


def transformers_snippet(cfg) -> list[str]:
    """The card's first code block: generate() with the arguments closest to `nmt
    translate`'s default decoding (its beam, length penalty and per-sentence limit)."""
    d = cfg.decode
    return ["```python", "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
            "tokenizer = AutoTokenizer.from_pretrained(\"THIS_FOLDER\")",
            "model = AutoModelForSeq2SeqLM.from_pretrained(\"THIS_FOLDER\")",
            "for text in [\"...\"]:  # one at a time: nmt's length limit is per sentence",
            "    batch = tokenizer([text], return_tensors=\"pt\")",
            f"    limit = int({d.max_len_ratio} * batch[\"input_ids\"].shape[1]) + {d.max_len_offset}",
            f"    ids = model.generate(**batch, num_beams={d.beam}, length_penalty="
            f"{d.length_penalty}, max_new_tokens=limit)",
            "    print(tokenizer.decode(ids[0], skip_special_tokens=True))", "```"]


def _what_differs(cfg) -> str:
    d = cfg.decode
    if d.beam == 1 or d.length_penalty == 0:
        return ("This is `nmt translate`'s decoding; a plain `model.generate(**batch)` "
                "(generation_config.json) differs only in its fixed length limit.")
    return (f"What differs from `nmt translate`: beam search ranks finished hypotheses by "
            f"score / length^{d.length_penalty} where nmt divides by GNMT's ((5 + length) / "
            f"6)^{d.length_penalty}; with `num_beams=1` or `length_penalty=0` the output is "
            "nmt's, and a plain `model.generate(**batch)` also has a fixed length limit.")


def _limits(cfg) -> list[str]:
    return ["## Limits", "",
            "A small model trained for minutes on two CPU cores on one corpus: expect it to "
            f"translate text like its training corpus ({cfg.data.corpus}) and little else. "
            "Attention weights are a computation, not an explanation.", ""]
