"""In-domain word-alignment benchmark (`make bench-align-domain`; docs/alignment.md, "In
domain"): for each gold set, guided Transformers trained on in-domain text in both
directions against eflomal trained on the same text. AER, precision and recall on a
development slice of the gold (its first `--dev` pairs: every setting is chosen there) and
on the rest (where the chosen settings are reported), the seconds each aligner took, and
the runs' test BLEU.

Gold sets and their in-domain text (none is in the checkout; the dated page in
docs/experiments/ says where each comes from):
    hansards  Hansards en-fr (447 pairs; --gold-dir DIR or NMT_ALIGN_GOLD_DIR: hansards.en-fr,
              hansards.en-fr.gold) with Canadian federal Acts (laws/annual.en, laws/annual.fr)
    roen      the WPT Romanian-English gold (248 pairs: roen/gold.ro-en, roen/gold.ro-en.gold)
              with public Romanian-English text (roen/train.ro, roen/train.en)
    (--domain-dir DIR or NMT_ALIGN_DOMAIN_DIR: the folder holding laws/ and roen/)

Methods (each one run per direction, `nmt train`'s own commands, printed as they run):
    guided     Garg et al. (2019): the Transformer with one head taught eflomal's links, full
               target context, read in both directions and symmetrised (`GUIDED`)
    bootstrap  Zenkel et al. (2020): a second round started from the guided runs, taught
               their symmetrised links of the first `TEACHER_PAIRS` pairs (`BOOTSTRAP`)
    ensemble   the mean map of both methods' runs in each direction (`nmt align --ensemble`)
Adapted (`nmt align --adapt N`), the runs learn eflomal's links of the gold's pairs joined
by each of `--adapt-guides` (`nmt align --adapt-guides`). Every step is skipped when its
output exists (an imported corpus, a trained run, with --reuse an alignment folder), so a
killed benchmark goes on where it stopped.

Usage: python benchmarks/align_domain.py [--only hansards roen] [--methods guided bootstrap]
       [--minutes 20] [--adapt 100] [--adapt-guides H ...] [--dev 100] [--reuse]
       [--domain-dir DIR] [--gold-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from data_dirs import align_gold_dir, data_dir, gold_dir_option

from nmt.core.machine import cpu_model

ROOT = Path(__file__).resolve().parents[1]
DOMAIN_ENV = "NMT_ALIGN_DOMAIN_DIR"
RUNS = "runs/align-domain"
CONFIG = "configs/hansards/transformer.yaml"
# The recipe of docs/alignment.md, "Guided alignment": eflomal's links teach one head, one
# pair per example, a NULL word, full target context (Garg et al. 2019).
GUIDED = ["guided.weight=1", "guided.null_word=true", "data.concat=1", "guided.full_context=true"]
TEACHER_PAIRS = 10000  # round 2's guided pairs (docs/experiments/2026-12-06-align-in-domain.md)
BOOT_MINUTES = 8
SYMMETRIZE = ("grow-diag-final-and", "intersection", "union", "agreement")
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)  # agreement's link threshold, chosen on dev
ADAPT_GUIDES = ("grow-diag-final-and", "intersection", "union")  # --adapt-guides, chosen on dev
DATASETS = {
    "hansards": {"corpus": "laws", "pair": "en-fr", "size": 2000,
                 "train": ("laws/annual.en", "laws/annual.fr"),
                 "title": "Hansards en-fr (447 pairs) from Canadian federal Acts"},
    "roen": {"corpus": "roen", "pair": "ro-en", "size": 1000,
             "train": ("roen/train.ro", "roen/train.en"),
             "pairs": "roen/gold.ro-en", "gold": "roen/gold.ro-en.gold",
             "title": "Romanian-English (WPT, 248 pairs) from public ro-en text"},
}


def nmt(*args: str) -> float:
    """Run one `nmt` command (printed first); its wall seconds."""
    print("$ nmt " + " ".join(args), flush=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nmt", *args], cwd=ROOT, check=True)
    return time.perf_counter() - start


def sets(*pairs: str) -> list[str]:
    return [arg for pair in pairs for arg in ("--set", pair)]


def reverse(pair: str) -> str:
    src, tgt = pair.split("-")
    return f"{tgt}-{src}"


def trained(run: Path) -> bool:
    return (run / "checkpoints" / "best.pt").is_file()


def run_of(data: dict, method: str, pair: str) -> Path:
    return ROOT / RUNS / f"{data['corpus']}_{'' if method == 'guided' else 'boot_'}{pair}"


def config_args(data: dict, method: str, pair: str, minutes: float) -> list[str]:
    """`-c ... --set ...` of one method's run in direction `pair`."""
    common = [f"data.corpus={data['corpus']}", f"data.pair={pair}", "data.test=test",
              f"runs_dir={RUNS}", f"name={run_of(data, method, pair).name}", *GUIDED]
    if method == "guided":
        return ["-c", CONFIG, *sets(*common, f"train.max_minutes={minutes:g}")]
    first, other = run_of(data, "guided", pair), run_of(data, "guided", reverse(pair))
    return ["-c", CONFIG, *sets(
        *common, "guided.teacher=runs", f"guided.teacher_run={first.relative_to(ROOT)}",
        f"guided.teacher_reverse={other.relative_to(ROOT)}",
        f"guided.teacher_pairs={TEACHER_PAIRS}", f"train.init_from={first.relative_to(ROOT)}",
        f"train.max_minutes={BOOT_MINUTES}", "train.warmup=100")]


def prepare(data: dict, domain: Path, methods: list[str], minutes: float, out: Path) -> list[dict]:
    """Import the corpus, then the teacher's links and a run per method and direction, each
    unless it exists; returns each run's seconds (links timed only when made here)."""
    if not (ROOT / "data" / data["corpus"] / data["pair"] / "manifest.json").is_file():
        files = [str(domain / f) for f in data["train"]]
        nmt("data", "import", data["corpus"], "--pair", data["pair"], "--files", *files,
            "--valid-size", str(data["size"]), "--test-size", str(data["size"]))
    timing_path = out / "timing.json"
    timing = json.loads(timing_path.read_text()) if timing_path.is_file() else {}
    runs = []
    for method in methods:
        for pair in (data["pair"], reverse(data["pair"])):
            run = run_of(data, method, pair)
            if not trained(run):
                args = config_args(data, method, pair, minutes)
                timing[run.name] = {"links": nmt("data", "links", *args)}
                nmt("train", *args)
                out.mkdir(parents=True, exist_ok=True)
                timing_path.write_text(json.dumps(timing, indent=1) + "\n")
            runs.append(run_summary(run, method, pair, timing.get(run.name, {})))
    return runs


def run_summary(run: Path, method: str, pair: str, timing: dict) -> dict:
    """Training seconds (the run's own clock), links seconds when timed, test BLEU."""
    last = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()][-1]
    scores = json.loads((run / "scores.json").read_text()) if (run / "scores.json").is_file() else {}
    return {"run": run.name, "method": method, "pair": pair, "train_seconds": last["elapsed"],
            "links_seconds": timing.get("links"), "test_bleu": scores.get("test", {}).get("bleu")}


def align(data: dict, methods: list[str], pairs: Path, gold: Path, adapt: int,
          guides: str | None, folder: Path, reuse: bool) -> dict:
    """One `nmt align` of every method's runs, both directions, as an ensemble too when there
    are several methods (+ eflomal's rows when unadapted; adapted, eflomal's links of the
    pairs joined by `guides` teach the guided runs); its summary."""
    from nmt.report.align import AlignOptions, align_runs

    saved = folder / "summary.json"
    if reuse and saved.is_file():
        print(f"  reusing {saved}", flush=True)
        return json.loads(saved.read_text())
    runs, back = ([run_of(data, m, p) for m in methods]
                  for p in (data["pair"], reverse(data["pair"])))
    opts = AlignOptions(runs=runs, reverse=back, pairs=pairs, gold=gold, one_based=True,
                        symmetrize=list(SYMMETRIZE), adapt=adapt, adapt_guides=guides, plot=0,
                        out=folder, statistical=not adapt, ensemble=len(methods) > 1)
    start = time.perf_counter()
    summary = align_runs(opts)
    print(f"  {folder.name}: {len(summary)} rows in {time.perf_counter() - start:.0f} s",
          flush=True)
    return summary


def slices(links: list, gold: list, dev: int) -> dict:
    """AER, precision and recall of the links on all pairs, the dev slice and the rest."""
    from nmt.align.metrics import alignment_error_rate

    out = {}
    for name, part in (("all", slice(None)), ("dev", slice(0, dev)), ("rest", slice(dev, None))):
        got = alignment_error_rate(links[part], gold[part])
        out[name] = {k: got[k] for k in ("aer", "precision", "recall")}
    return out


def row_links(folder: Path, row: str) -> list:
    """The links of one `nmt align` row (its `.links` file)."""
    from nmt.data.links import parse_pharaoh

    lines = (folder / f"{row}.links").read_text().splitlines()
    return [set(parse_pharaoh(line)) for line in lines]


def owner(name: str, entry: dict, owners: dict) -> str:
    """Which method a summary row belongs to: eflomal, the ensemble, or a method's run."""
    family = entry.get("family")
    if family in ("statistical", "ensemble"):
        return "eflomal" if family == "statistical" else "ensemble"
    return owners[name.split("+")[0].split(".")[0]]


def costs(summary: dict, owners: dict) -> dict:
    """Per method, the seconds of aligning and of adapting (with eflomal's fit for the
    guides, one fit for all), read from its symmetrised rows; the ensemble's: all runs'."""
    out = {}
    for name, entry in summary.items():
        if entry.get("direction") == "both" and entry.get("family") not in ("statistical",
                                                                            "ensemble"):
            adapted = entry.get("adapt", {})
            out[owner(name, entry, owners)] = (entry.get("seconds", 0.0),
                                               adapted.get("seconds", 0.0),
                                               adapted.get("teacher_seconds", 0.0))
    aligning, adapting, fit = (list(x) for x in zip(*out.values()))
    out["ensemble"] = (sum(aligning), sum(adapting), max(fit))
    return {m: {"aligning": a, "adapting": b + c} for m, (a, b, c) in out.items()}


def score(summary: dict, folder: Path, gold: list, dev: int, setting: dict, owners: dict,
          training: dict) -> list[dict]:
    """One table row per aligned row of a summary (every method's, the ensemble's and
    eflomal's), and the agreement symmetrisation at each of `THRESHOLDS` (a setting like
    any other, chosen on dev) from each method's two saved maps."""
    from nmt.align.bidirectional import symmetrized_records
    from nmt.align.io import load_alignments

    spent = costs(summary, owners)
    rows, maps = [], {}
    for name, entry in summary.items():
        if "aer" not in entry:
            continue
        method = owner(name, entry, owners)
        direction = entry.get("direction") or "forward"
        if direction != "both":
            maps.setdefault(method, {})[direction] = name
        if entry.get("symmetrize") == "agreement":
            continue  # every threshold's row comes below
        statistical = method == "eflomal"
        rows.append({
            "method": method, "links": entry.get("symmetrize") or direction,
            **({"adapt": 0, "guides": "-"} if statistical else setting), "row": name,
            "seconds": {"training": training.get(method, 0.0),
                        "aligning": entry.get("seconds", 0.0) if statistical
                        else spent[method]["aligning"],
                        "adapting": 0.0 if statistical else spent[method]["adapting"]},
            **slices(row_links(folder, name), gold, dev)})
    for method, names in maps.items():
        if method == "eflomal" or "reverse" not in names:
            continue
        fwd, rev = (load_alignments(folder / f"{names[d]}.npz") for d in ("forward", "reverse"))
        for threshold in THRESHOLDS:
            records = symmetrized_records(fwd, rev, "agreement", {"method": "attention"},
                                          threshold)
            rows.append({"method": method, "links": f"agreement {threshold:g}", **setting,
                         "row": f"{names['forward']}.agreement-{threshold:g}",
                         "seconds": {"training": training[method], **spent[method]},
                         **slices([set(r.links) for r in records], gold, dev)})
    return rows


def diagonal_row(pairs: Path, gold: list, dev: int) -> dict:
    from nmt.align.metrics import diagonal_links

    sizes = [tuple(len(side.split()) for side in line.split(" ||| "))
             for line in pairs.read_text(encoding="utf-8").splitlines()]
    links = [diagonal_links(s, t) for s, t in sizes]
    return {"method": "diagonal", "links": "-", "adapt": 0, "guides": "-", "row": "diagonal",
            "seconds": {"training": 0.0, "aligning": 0.0, "adapting": 0.0},
            **slices(links, gold, dev)}


def chosen(rows: list[dict], method: str, adapted: bool | None) -> dict | None:
    """The row of `method` with the lowest development AER (among adapted or unadapted
    rows; None: either)."""
    pool = [r for r in rows if r["method"] == method
            and (adapted is None or bool(r["adapt"]) == adapted)]
    return min(pool, key=lambda r: r["dev"]["aer"]) if pool else None


def total_seconds(row: dict) -> float:
    return sum(row["seconds"].values())


def run_dataset(name: str, args) -> dict:
    """Everything for one gold set: runs, alignments, rows and the dev-chosen summary."""
    from nmt.data.links import read_gold

    data = DATASETS[name]
    out = args.out / name
    if name == "hansards":
        gold_dir = align_gold_dir(args.gold_dir)
        pairs, gold_path = gold_dir / "hansards.en-fr", gold_dir / "hansards.en-fr.gold"
    else:
        pairs, gold_path = args.domain_dir / data["pairs"], args.domain_dir / data["gold"]
    print(f"== {data['title']}", flush=True)
    runs = prepare(data, args.domain_dir, args.methods, args.minutes, out)
    gold = read_gold(gold_path, True)
    rows = [diagonal_row(pairs, gold, args.dev)]
    owners = {run_of(data, m, p).name: m for m in args.methods
              for p in (data["pair"], reverse(data["pair"]))}
    training = {m: sum(r["train_seconds"] + (r["links_seconds"] or 0.0) for r in runs
                       if r["method"] == m or (m == "bootstrap" and r["method"] == "guided"))
                for m in args.methods}  # round 2 stands on round 1
    training["ensemble"] = sum(training.values()) - (  # round 1 counted once
        training.get("guided", 0.0) if "bootstrap" in training else 0.0)
    settings = [(0, None)] + [(a, g) for a in args.adapt for g in args.adapt_guides]
    for adapt, guides in settings:
        folder = out / (f"adapt{adapt}" + (f"_{guides}" if guides else ""))
        summary = align(data, args.methods, pairs, gold_path, adapt, guides, folder,
                        args.reuse)
        rows += score(summary, folder, gold, args.dev,
                      {"adapt": adapt, "guides": guides or "-"}, owners, training)
    picks = {"eflomal": chosen(rows, "eflomal", None)}
    for method in args.methods + (["ensemble"] if len(args.methods) > 1 else []):
        picks[f"{method}, unadapted"] = chosen(rows, method, False)
        picks[f"{method}, adapted"] = chosen(rows, method, True)
    return {"name": name, "title": data["title"], "runs": runs, "rows": rows,
            "chosen": {k: v for k, v in picks.items() if v is not None}}


def markdown(results: list[dict], meta: dict) -> str:
    lines = [f"# In-domain word alignment ({meta['date']})", "",
             f"`{meta['command']}` on {meta['machine']}. AER (Och & Ney 2003), precision (P) "
             f"and recall (R) against the gold; settings chosen on its first {meta['dev']} "
             "pairs (dev), reported on the rest. Seconds: training (teacher links and both "
             "directions' runs; for bootstrap, both rounds), aligning, adapting (with "
             "eflomal's fit for the guides).", ""]
    for res in results:
        base = res["chosen"]["eflomal"]["rest"]["aer"]
        lines += [f"## {res['title']}", "", "Runs: " + "; ".join(
            f"{r['run']} ({r['train_seconds'] / 60:.1f} min training"
            + (f", {r['links_seconds'] / 60:.1f} min links" if r["links_seconds"] else "")
            + (f", test BLEU {r['test_bleu']:.2f}" if r["test_bleu"] is not None else "") + ")"
            for r in res["runs"]) + ".", "",
            "| chosen on dev | links | adapt | guides | AER rest | P rest | R rest | AER dev | "
            "× eflomal | seconds |", "|---|---|---|---|---|---|---|---|---|---|"]
        for label, r in res["chosen"].items():
            lines.append(
                f"| {label} | {r['links']} | {r['adapt'] or 'no'} | {r['guides']} | "
                f"{r['rest']['aer']:.3f} | "
                f"{r['rest']['precision']:.3f} | {r['rest']['recall']:.3f} | "
                f"{r['dev']['aer']:.3f} | {r['rest']['aer'] / base:.2f} | {total_seconds(r):.0f} |")
        lines += ["", "Every row:", "", "| method | links | adapt | guides | AER all | AER dev | "
                  "AER rest | P rest | R rest |", "|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(res["rows"], key=lambda r: r["dev"]["aer"]):
            lines.append(f"| {r['method']} | {r['links']} | {r['adapt'] or 'no'} | {r['guides']} | "
                         f"{r['all']['aer']:.3f} | {r['dev']['aer']:.3f} | {r['rest']['aer']:.3f} | "
                         f"{r['rest']['precision']:.3f} | {r['rest']['recall']:.3f} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--methods", nargs="+", choices=["guided", "bootstrap"],
                        default=["guided", "bootstrap"])
    parser.add_argument("--minutes", type=float, default=20.0,
                        help="training minutes of each round-1 run (each direction)")
    parser.add_argument("--adapt", type=int, nargs="*", default=[100],
                        help="--adapt steps to try besides none (chosen on dev)")
    parser.add_argument("--adapt-guides", nargs="+", default=list(ADAPT_GUIDES),
                        choices=["grow-diag-final-and", "intersection", "union"],
                        help="eflomal's links joined so teach the adapted runs (chosen on dev)")
    parser.add_argument("--dev", type=int, default=100, help="the gold's development pairs")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse the alignment folders of an earlier run with this --out")
    parser.add_argument("--domain-dir", type=Path, default=None,
                        help=f"folder with laws/ and roen/ (default: ${DOMAIN_ENV})")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-align-domain")
    gold_dir_option(parser)
    args = parser.parse_args()
    args.domain_dir = data_dir(args.domain_dir, "--domain-dir", DOMAIN_ENV,
                               "laws/annual.{en,fr} and roen/train.{ro,en}, gold.ro-en(.gold)")
    results = [run_dataset(name, args) for name in args.only]
    meta = {"date": time.strftime("%F"), "dev": args.dev,
            "machine": f"{cpu_model()}, {os.cpu_count()} cores",
            "command": "python benchmarks/align_domain.py " + " ".join(sys.argv[1:])}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "alignment.json").write_text(json.dumps({"meta": meta, "results": results},
                                                        indent=1) + "\n")
    (args.out / "alignment.md").write_text(markdown(results, meta))
    print((args.out / "alignment.md").read_text())


if __name__ == "__main__":
    main()
