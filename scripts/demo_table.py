"""The README's demo table and figure, written from `make demo`'s own runs, and the gate
that says whether a fresh demo reproduces the committed table.

    python scripts/demo_table.py compare [--against README.md] [--runs runs/demo]
        prints, per family, the committed BLEU and AER beside this demo's and, on the
        machine class the table names, exits 1 when any family differs by more than
        BLEU_GATE BLEU or AER_GATE AER. The demo trains in fp32 with one thread per
        run, so one class reproduces its table bit for bit; another class's kernels round
        differently, the trajectories part, and step-budget runs end up to several BLEU
        apart (docs/experiments/2026-12-03-precision.md): there the differences are
        printed, not gated (--any-class gates them too);
    python scripts/demo_table.py write [--runs runs/demo]
        rewrites the table between the README's demo-table markers from the runs'
        metrics and scores, with the date and machine, and copies the grid figure.

`make demo` runs `compare` then `write`; CI runs `compare --against` the committed
README after `make demo` (.ci/run).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FAMILIES = ["fixed_context", "bahdanau", "luong_general", "luong_local_p", "transformer"]
BEGIN, END = "<!-- demo-table: written by make demo (scripts/demo_table.py) -->", "<!-- /demo-table -->"
BLEU_GATE, AER_GATE = 2.0, 0.03
FIGURE = ("align_test_4.png", ROOT / "docs" / "images" / "demo_grid.png")
NA = "—"


def machine() -> str:
    """The machine class: the CPU's model name and its bf16 kind, as the README names
    classes (the CPU count is not part of it: each demo run has one thread)."""
    info = Path("/proc/cpuinfo")
    text = info.read_text() if info.is_file() else ""
    names = re.findall(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = set((re.findall(r"^flags\s*:\s*(.+)$", text, re.M) or [""])[0].split())
    extra = ("AMX" if "amx_tile" in flags else "AVX512-BF16" if "avx512_bf16" in flags
             else "no native bf16")
    name = names[0] if names else platform.processor() or platform.machine()
    return f"{name} ({extra})"


def cpus() -> int:
    return os.cpu_count() or 1


def measure(runs: Path) -> dict[str, dict]:
    """Per family: the report's numbers (nmt.report.compare.run_values) and the precision."""
    from nmt.report.compare import load_summary, model_label, run_values

    out = {}
    for family in FAMILIES:
        summary = load_summary(runs / family, None)
        values = run_values(summary)
        data = next((r for r in summary.metrics if r.get("kind") == "data"), {})
        values["precision"] = data.get("precision", NA)
        values["label"] = model_label(summary.cfg)
        values["attention"] = summary.has_attention
        values["by_length"] = (summary.scores or {}).get("by_length") or []
        out[family] = values
    return out


def render(values: dict[str, dict], seconds: float | None = None) -> str:
    """The table, its heading line and its footnote, between the markers."""
    fmt = lambda v, spec: NA if v is None else format(v, spec)  # noqa: E731
    rows = []
    for family, v in values.items():
        mark = "" if v["attention"] else " †"
        rows.append(f"| {family} | {v['label']} | {fmt(v['params'], ',')} | {v['precision']} | "
                    f"{fmt(v['train_min'], '.1f')} | {fmt(v['bleu'], '.2f')} | "
                    f"{fmt(v['chrf'], '.2f')} | {fmt(v['aer'], '.3f')}{mark} | "
                    f"{fmt(v['diagonal_aer'], '.3f')}{mark} | "
                    f"{fmt(v['entropy'], '.2f')}{mark} |")
    took = f", {seconds // 60:.0f} min {seconds % 60:.0f} s in all" if seconds else ""
    lengths = lambda v: ", ".join(f"{b['bleu']:.1f} on {b['bucket']}"  # noqa: E731
                                  for b in v["by_length"])
    fixed = [(f, v) for f, v in values.items() if not v["attention"]]
    note = [f"† no attention: the whole source is one vector. Its BLEU falls with the "
            f"source's length, the bottleneck the attention papers removed: "
            f"{lengths(fixed[0][1])} words (Bahdanau: {lengths(values['bahdanau'])})."
            ] if fixed and "bahdanau" in values else []
    return "\n".join([
        BEGIN,
        f"Measured with `make demo` on {time.strftime('%Y-%m-%d')} on {machine()}, {cpus()} "
        f"CPUs{took}, "
        "two trainings at a time with one thread each. From `reports/demo/report.md` (test "
        "split, 500 sentences, beam 5; AER of 200 sentences against the generator's gold):",
        "",
        "| Run | Model | Params | Precision | Train min | BLEU | chrF | AER | Diagonal AER "
        "| Entropy (nats) |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        *note,
        END,
    ])


def _table(readme: Path) -> str:
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: no demo table between {BEGIN!r} and {END!r}")
    return text.split(BEGIN, 1)[1].split(END, 1)[0]


def measured_on(readme: Path) -> str | None:
    """The machine class the committed table names ("... on <class>, N CPUs")."""
    found = re.search(r" on \d{4}-\d\d-\d\d on (.+?\)), \d+ CPUs", _table(readme))
    return found.group(1) if found else None


def committed(readme: Path) -> dict[str, dict[str, float | None]]:
    """BLEU and AER per family from the table between the markers of `readme`."""
    table = _table(readme)
    header, out = None, {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        if header is None:
            header = cells
            continue
        row = dict(zip(header, cells))
        number = lambda key: (None if row[key].split()[0] == NA  # noqa: E731
                              else float(row[key].split()[0].replace(",", "")))
        out[row["Run"]] = {"bleu": number("BLEU"), "aer": number("AER")}
    return out


def compare(values: dict[str, dict], table: dict[str, dict]) -> list[str]:
    """One line per family; a line starting with "over" when past the gate."""
    lines = []
    for family, v in values.items():
        want = table.get(family)
        if want is None:
            lines.append(f"over  {family}: not in the committed table")
            continue
        bleu, aer = (abs(v[k] - want[k]) if None not in (v[k], want[k])  # one side missing:
                     else 0.0 if v[k] is want[k] is None else float("inf")  # over the gate
                     for k in ("bleu", "aer"))
        over = bleu > BLEU_GATE or aer > AER_GATE
        shown = lambda x, spec: NA if x is None else format(x, spec)  # noqa: E731
        lines.append(f"{'over' if over else 'ok  '}  {family}: BLEU {shown(v['bleu'], '.2f')} "
                     f"(table {shown(want['bleu'], '.2f')}), AER {shown(v['aer'], '.3f')} "
                     f"(table {shown(want['aer'], '.3f')})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["compare", "write"])
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "demo")
    parser.add_argument("--against", type=Path, default=README,
                        help="the README whose table is the reference (compare)")
    parser.add_argument("--reports", type=Path, default=ROOT / "reports" / "demo")
    parser.add_argument("--seconds", type=float, help="the demo's wall time (write)")
    parser.add_argument("--any-class", action="store_true",
                        help="gate even on another machine class than the table's")
    args = parser.parse_args()
    values = measure(args.runs)
    if args.action == "compare":
        lines = compare(values, committed(args.against))
        table_class, here = measured_on(args.against), machine()
        gated = args.any_class or table_class == here
        print(f"make demo against the committed table (gate: BLEU {BLEU_GATE}, AER {AER_GATE}; "
              f"table: {table_class}; here: {here}"
              + ("" if gated else "; another class: shown, not gated") + "):")
        print("\n".join(lines))
        if gated and any(line.startswith("over") for line in lines):
            print("some families differ from the table by more than the gate")
            sys.exit(1)
        return
    text = README.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    README.write_text(head + render(values, args.seconds) + rest.split(END, 1)[1], encoding="utf-8")
    shutil.copyfile(args.reports / FIGURE[0], FIGURE[1])
    print(f"wrote the demo table in {README.relative_to(ROOT)} and {FIGURE[1].relative_to(ROOT)}")


if __name__ == "__main__":
    main()
