"""Word-alignment benchmark (`make bench-align`): one table of AER, precision, recall and
seconds for family x method (attention, saliency) x (single direction / symmetrised) x
(adapted or not), on the synthetic test set and on the 447 human-aligned Hansards en-fr
sentences, beside the diagonal baseline and the statistical aligner (eflomal).

Every number comes from `nmt align`'s own code (`nmt.report.align.align_runs`, the eflomal
extra in `nmt.align.statistical`, AER from `nmt.align.metrics`). It reads existing runs and
skips missing ones with a line saying how to train them:
    synthetic:  runs/synth/<family> and runs/synth/<family>_tgt-src
                (nmt train -c configs/synth/<family>.yaml [--set data.pair=tgt-src])
    Hansards:   runs/hansards/<family> and runs/hansards/<family>_fr-en (Multi30k en-fr /
                fr-en; nmt train -c configs/hansards/<family>.yaml [--set data.pair=fr-en])
    and the guided runs <family>_guided: the Transformer on both, every family on
    Hansards (their overrides: `GUIDED` below)
Writes reports/bench-align/alignment.md and alignment.json (+ each setting's `nmt align`
output under reports/bench-align/<dataset>/).

Usage: python benchmarks/alignment.py [--only synth hansards] [--limit N] [--adapt STEPS]
       [--adapt-hansards STEPS] [--gold-dir DIR]
       [--methods attention saliency] [--symmetrize agreement grow-diag-final-and]
       [--no-eflomal] [--threads 1] [--reuse] [--families bahdanau transformer]

The Hansards rows need the gold folder (hansards.en-fr, hansards.en-fr.gold): --gold-dir
DIR or NMT_ALIGN_GOLD_DIR=DIR (`make bench-align NMT_ALIGN_GOLD_DIR=DIR`).

Two processes can share the work (one thread each) with --families, then one more run
with --reuse (and no --families) writes the whole table from their saved rows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from data_dirs import align_gold_dir, gold_dir_option

from nmt.core.machine import cpu_model

ROOT = Path(__file__).resolve().parents[1]
SYNTH_FAMILIES = ("bahdanau", "luong_general", "luong_local_m", "luong_local_p", "transformer")
HANSARDS_FAMILIES = SYNTH_FAMILIES
# The guided rows (docs/alignment.md, "Guided alignment"): a family's config with its
# attention taught by eflomal's links, an override rather than another file, run as
# <runs>/<family>_guided (one pair per example: the links are a pair's, so local-p's joined
# pairs are off); the Transformer also reads it with full target context. The
# recipes are measured in docs/experiments/2026-12-01-guided-alignment.md.
GUIDED = {"synth": "--set guided.weight=3 --set guided.null_word=true "
                   "--set guided.symmetrize=intersection",
          "hansards": "--set guided.weight=1 --set guided.null_word=true --set data.concat=1"}
GUIDED_FAMILIES = {"synth": ("transformer",), "hansards": HANSARDS_FAMILIES}
FULL_CONTEXT = " --set guided.full_context=true"  # the Transformer's only (Garg et al. 2019)


def guided_override(folder: str, family: str) -> str:
    return GUIDED[folder] + (FULL_CONTEXT if family == "transformer" else "")


def family_runs(folder: str, families: tuple, reverse_pair: str) -> list[tuple]:
    """(family, run, reverse run, its training command's config, the reverse's) of every
    family of `folder`'s configs, then of its guided runs (`GUIDED_FAMILIES`)."""
    runs = [(f, ROOT / "runs" / folder / f, ROOT / "runs" / folder / f"{f}_{reverse_pair}",
             f"configs/{folder}/{f}.yaml", f"configs/{folder}/{f}.yaml --set data.pair={reverse_pair}")
            for f in families]
    for f in GUIDED_FAMILIES[folder]:
        name, guided = f"{f}_guided", f"configs/{folder}/{f}.yaml {guided_override(folder, f)}"
        runs.append((name, ROOT / "runs" / folder / name,
                     ROOT / "runs" / folder / f"{name}_{reverse_pair}",
                     f"{guided} --set name={name}",
                     f"{guided} --set data.pair={reverse_pair} --set name={name}_{reverse_pair}"))
    return runs


ADAPT_HANSARDS = 300  # out-of-domain text needs more steps (docs/alignment.md, "Adapting to the text")


def synth_dataset() -> dict:
    """The synthetic corpus's test split with its gold; the 5-minute runs of every family."""
    runs = family_runs("synth", SYNTH_FAMILIES, "tgt-src")
    return {"name": "synth", "title": "synthetic test set (500 pairs, gold of the generator)",
            "runs": runs, "options": {"split": "test"}, "adapt": "adapt",
            "gold": ROOT / "data" / "synth" / "src-tgt" / "test.gold",
            "config": ROOT / "configs" / "synth" / "bahdanau.yaml"}


def hansards_dataset(gold_dir: Path) -> dict:
    """Hansards en-fr (Och & Ney 2003, 447 pairs) with models trained on Multi30k en-fr."""
    runs = family_runs("hansards", HANSARDS_FAMILIES, "fr-en")
    return {"name": "hansards", "title": "Hansards en-fr (447 pairs, sure + possible gold)",
            "runs": runs, "adapt": "adapt_hansards",
            "options": {"pairs": gold_dir / "hansards.en-fr",
                        "gold": gold_dir / "hansards.en-fr.gold", "one_based": True},
            "config": ROOT / "configs" / "hansards" / "bahdanau.yaml"}


def trained(run: Path) -> bool:
    return (run / "checkpoints" / "best.pt").is_file() or (run / "checkpoints" / "last.pt").is_file()


def score_rows(dataset: str, family: str, adapt: int, summary: dict) -> list[dict]:
    """Table rows from one `align_runs` summary (rows without links, fixed_context's
    attention, are left out)."""
    rows = []
    for name, entry in summary.items():
        if "aer" not in entry:
            continue
        adapt_seconds = entry.get("adapt", {}).get("seconds", 0.0)
        rows.append({
            "dataset": dataset, "family": family, "row": name,
            "method": entry.get("method", "attention"),
            "links": entry.get("symmetrize") or entry.get("direction", "forward"),
            "adapt": adapt, "aer": entry["aer"], "precision": entry["precision"],
            "recall": entry["recall"], "diagonal_aer": entry["diagonal_aer"],
            "seconds": entry.get("seconds", 0.0) + adapt_seconds,
        })
    return rows


def run_family(data: dict, family: str, fwd: Path, rev: Path, args, out: Path) -> list[dict]:
    """Every method x (single, symmetrised) x (adapted or not) of one family's runs."""
    from nmt.report.align import AlignOptions, align_runs

    reverse = [rev] if trained(rev) else []
    rows = []
    for adapt in sorted({0, getattr(args, data["adapt"])}):
        saved = out / f"{family}_adapt{adapt}" / "summary.json"
        if args.reuse and saved.is_file():  # an earlier run of the same setting
            print(f"  {family} adapt={adapt}: reusing {saved}", flush=True)
            rows += score_rows(data["name"], family, adapt, json.loads(saved.read_text()))
            continue
        opts = AlignOptions(
            runs=[fwd], reverse=reverse, out=out / f"{family}_adapt{adapt}", plot=0,
            limit=args.limit, methods=list(args.methods), adapt=adapt,
            symmetrize=list(args.symmetrize) if reverse else [], **data["options"])
        start = time.perf_counter()
        summary = align_runs(opts)
        print(f"  {family} adapt={adapt}: {len(summary)} rows in "
              f"{time.perf_counter() - start:.0f} s", flush=True)
        rows += score_rows(data["name"], family, adapt, summary)
    return rows


def ensemble_rows(data: dict, families: list[tuple[str, Path, Path]], args, out: Path
                  ) -> list[dict]:
    """`nmt align --ensemble` on the families' saved records (both directions trained):
    the mean map per direction, symmetrised, scored like every other row."""
    from nmt.align.bidirectional import mean_records, symmetrized_records
    from nmt.align.io import load_alignments, load_gold
    from nmt.align.metrics import alignment_error_rate
    from nmt.report.align import row_name

    rows = []
    if len(families) < 2:
        return rows
    names = "+".join(f for f, _, _ in families)
    gold_path = data["options"].get("gold") or data["gold"]
    for adapt in sorted({0, getattr(args, data["adapt"])}):
        for method in args.methods:
            sets = [[load_alignments(out / f"{f}_adapt{adapt}" / f"{row_name(run.name, method)}"
                                     ".npz") for run in (fwd, rev)] for f, fwd, rev in families]
            meta = {"method": method}
            fwd = mean_records([s[0] for s in sets], meta)
            back = mean_records([s[1] for s in sets], meta, flipped=True)
            gold = load_gold(gold_path, fwd, data["options"].get("one_based", False),
                             prefix=bool(args.limit))
            links = {"forward": fwd, "reverse": back}
            links |= {h: symmetrized_records(fwd, back, h, meta) for h in args.symmetrize}
            for kind, records in links.items():
                scores = alignment_error_rate([set(r.links) for r in records], gold)
                rows.append({"dataset": data["name"], "family": f"ensemble ({names})",
                             "row": f"ensemble.{kind}", "method": method, "links": kind,
                             "adapt": adapt, "aer": scores["aer"],
                             "precision": scores["precision"], "recall": scores["recall"],
                             "diagonal_aer": None, "seconds": 0.0})
    return rows


def baseline_rows(data: dict, args) -> list[dict]:
    """The diagonal and (with the extra) eflomal on the same pairs, by the same AER code."""
    from nmt.align.io import load_gold
    from nmt.align.metrics import alignment_error_rate, diagonal_links
    from nmt.align.statistical import statistical_rows
    from nmt.data.corpora import ensure_synth, load_split, read_pairs
    from nmt.data.pin import gold_of
    from nmt.data.symmetrize import HEURISTICS
    from nmt.models.checks import load_config

    cfg, options = load_config(data["config"]), data["options"]
    if "split" in options:  # the corpus as imported: no run is needed for these rows
        if cfg.data.corpus == "synth":
            ensure_synth(Path(cfg.data.root))
        sources, targets = load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair,
                                      options["split"])
        gold_path = gold_of(cfg, options["split"])
    else:
        (sources, targets), gold_path = read_pairs(options["pairs"]), options["gold"]
    if args.limit:
        sources, targets = sources[:args.limit], targets[:args.limit]
    sizes = [(len(s.split()), len(t.split())) for s, t in zip(sources, targets)]

    class Words:  # what load_gold needs to check the gold's indices
        def __init__(self, s, t):
            self.src_words, self.tgt_words = [None] * s, [None] * t

    gold = load_gold(gold_path, [Words(s, t) for s, t in sizes],
                     options.get("one_based", False), prefix=bool(args.limit))
    start = time.perf_counter()
    diagonal = [diagonal_links(s, t) for s, t in sizes]
    rows = [dict(row="diagonal", method="diagonal", links="-",
                 seconds=time.perf_counter() - start,
                 **alignment_error_rate(diagonal, gold))]
    if args.eflomal:
        from_corpus = "split" in data["options"]
        heuristics = tuple(h for h in args.symmetrize if h in HEURISTICS)  # eflomal: links
        for name, records, info in statistical_rows(cfg, sources, targets, from_corpus,
                                                    heuristics or ("grow-diag-final-and",),
                                                    args.threads):
            scores = alignment_error_rate([set(r.links) for r in records], gold)
            rows.append(dict(row=name, method="eflomal", links=info["symmetrize"],
                             seconds=info["seconds"], train_pairs=info["train_pairs"],
                             **scores))
    return [{"dataset": data["name"], "family": "-", "adapt": 0, **{
        k: v for k, v in r.items() if k not in ("sentences", "predicted", "sure", "possible",
                                                "predicted_and_sure", "predicted_and_possible")}}
            for r in rows]


LINKS = ("forward", "reverse", "intersection", "grow-diag-final-and", "agreement")


def pivot(rows: list[dict]) -> list[str]:
    """One line per family x method: AER of each link kind, unadapted / adapted."""
    adapts = sorted({r["adapt"] for r in rows})
    kinds = [k for k in LINKS if any(r["links"] == k for r in rows)]
    head = [f"{k}{'' if a == 0 else f' (adapt {a})'}" for a in adapts for k in kinds]
    lines = ["| family | method | " + " | ".join(head) + " |", "|---|---|" + "---|" * len(head)]
    for family, method in dict.fromkeys((r["family"], r["method"]) for r in rows):
        if family == "-":
            continue
        cells = []
        for a in adapts:
            for k in kinds:
                got = [r["aer"] for r in rows if (r["family"], r["method"], r["links"],
                                                  r["adapt"]) == (family, method, k, a)]
                cells.append(f"{got[0]:.3f}" if got else "—")
        lines.append(f"| {family} | {method} | " + " | ".join(cells) + " |")
    return lines + [""]


def reused_baselines(data: dict, args) -> list[dict]:
    """With --reuse: the diagonal and eflomal rows of the earlier alignment.json, if any."""
    saved = args.out / "alignment.json"
    if not (args.reuse and saved.is_file()):
        return []
    return [r for r in json.loads(saved.read_text())["rows"]
            if r["dataset"] == data["name"] and r["family"] == "-"]


def markdown(rows: list[dict], datasets: list[dict], meta: dict) -> str:
    lines = [f"# Word alignment benchmark ({meta['date']})", "",
             f"`{meta['command']}` on {meta['machine']}, {meta['threads']} thread(s). AER "
             "(Och & Ney 2003), precision and recall against the gold; seconds: extraction "
             "(+ adaptation) for model rows, training + aligning for eflomal.", ""]
    for data in datasets:
        mine = sorted((r for r in rows if r["dataset"] == data["name"]), key=lambda r: r["aer"])
        if not mine:
            continue
        baselines = ", ".join(f"{r['row']} {r['aer']:.3f}" for r in mine if r["family"] == "-")
        lines += [f"## {data['title']}", "", f"Baselines: {baselines}.", "", *pivot(mine),
                  "| family | method | links | adapted | AER | precision | recall | seconds |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in mine:
            lines.append(f"| {r['family']} | {r['method']} | {r['links']} | "
                         f"{r['adapt'] or 'no'} | {r['aer']:.3f} | {r['precision']:.3f} | "
                         f"{r['recall']:.3f} | {r['seconds']:.1f} |")
        lines.append("")
    if meta["skipped"]:
        lines += ["Skipped (not trained):", ""] + [f"- {s}" for s in meta["skipped"]] + [""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=["synth", "hansards"],
                        default=["synth", "hansards"])
    parser.add_argument("--limit", type=int, default=0, help="first N pairs (0 = all)")
    parser.add_argument("--adapt", type=int, default=100,
                        help="--adapt steps on the synthetic pairs (0 = none)")
    parser.add_argument("--adapt-hansards", type=int, default=ADAPT_HANSARDS,
                        help="--adapt steps on the Hansards pairs (0 = none)")
    parser.add_argument("--methods", nargs="+", default=["attention", "saliency"])
    parser.add_argument("--symmetrize", nargs="+",
                        default=["agreement", "grow-diag-final-and", "intersection"])
    parser.add_argument("--no-eflomal", dest="eflomal", action="store_false")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-align")
    parser.add_argument("--families", nargs="+", default=None,
                        help="only these families (default: all of the gold set's)")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse a family's saved rows of an earlier run with this --out")
    gold_dir_option(parser)
    args = parser.parse_args()
    gold_dir = (align_gold_dir(args.gold_dir, also="; or --only synth")
                if "hansards" in args.only else None)

    import torch

    torch.set_num_threads(args.threads)
    datasets = [synth_dataset() if d == "synth" else hansards_dataset(gold_dir)
                for d in args.only]
    for data in datasets if args.families else []:
        data["runs"] = [r for r in data["runs"] if r[0] in args.families]
    rows, skipped = [], []
    for data in datasets:
        print(f"== {data['title']}", flush=True)
        rows += reused_baselines(data, args) or baseline_rows(data, args)
        for family, fwd, rev, fwd_config, rev_config in data["runs"]:
            for run, config, what in ((fwd, fwd_config, ""), (rev, rev_config, " reverse")):
                if not trained(run):
                    skipped.append(f"{data['name']} {family}{what}: no "
                                   f"{run.relative_to(ROOT)}; `nmt train -c {config}`")
                    print(f"  skip {skipped[-1]}", flush=True)
            if trained(fwd):
                rows += run_family(data, family, fwd, rev, args, args.out / data["name"])
        both = [(f, fwd, rev) for f, fwd, rev, _, _ in data["runs"]  # the unguided families
                if trained(fwd) and trained(rev) and not f.endswith("_guided")]
        rows += ensemble_rows(data, both, args, args.out / data["name"])
    meta = {"date": time.strftime("%F"), "threads": args.threads, "skipped": skipped,
            "machine": f"{cpu_model()}, {os.cpu_count()} cores",
            "command": "python benchmarks/alignment.py " + " ".join(sys.argv[1:]),
            "limit": args.limit, "adapt": args.adapt, "adapt_hansards": args.adapt_hansards}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "alignment.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                        indent=1) + "\n")
    (args.out / "alignment.md").write_text(markdown(rows, datasets, meta))
    print((args.out / "alignment.md").read_text())


if __name__ == "__main__":
    main()
