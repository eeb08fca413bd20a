#!/usr/bin/env bash
# The offline end-to-end demo: synthetic corpus -> one small run per family ->
# alignments scored against the synthetic gold -> one comparison report.
set -euo pipefail
cd "$(dirname "$0")/.."
NMT=.venv/bin/nmt
FAMILIES="${FAMILIES:-fixed_context bahdanau luong_general luong_local_p transformer}"
rm -rf runs/demo reports/demo
$NMT data synth
runs=()
for family in $FAMILIES; do
  echo "== training $family (configs/synth/$family.yaml)"
  $NMT train --config "configs/synth/$family.yaml" --set runs_dir=runs/demo
  runs+=("runs/demo/$family")
done
echo "== alignments against the synthetic gold"
align_runs=()
for run in "${runs[@]}"; do align_runs+=(--run "$run"); done
$NMT align "${align_runs[@]}" --split test --limit 200 --out reports/demo/align
echo "== comparison report"
$NMT compare "${runs[@]}" --out reports/demo
echo "open reports/demo/report.html (or read reports/demo/report.md)"
$NMT lab all --out reports/demo/lab  # the essays' claims, checked (uses the runs above)
