#!/usr/bin/env bash
# The offline end-to-end demo: synthetic corpus -> one run per family (configs/demo/),
# trained two at a time with one thread each -> alignments scored against the synthetic
# gold -> one comparison report -> the lab's checks -> the README's demo table, after
# saying where this demo's figures differ from the committed ones (scripts/demo_table.py).
set -euo pipefail
start=$SECONDS
cd "$(dirname "$0")/.."
NMT=.venv/bin/nmt
LOGS=reports/demo/logs
rm -rf runs/demo reports/demo
mkdir -p "$LOGS"
$NMT data synth

queue() {  # train the given families one after the other
  for family in "$@"; do
    echo "== training $family (configs/demo/$family.yaml; log: $LOGS/$family.log)"
    if ! $NMT train --config "configs/demo/$family.yaml" --set train.threads=1 \
        > "$LOGS/$family.log" 2>&1; then
      echo "== $family failed:"; tail -n 5 "$LOGS/$family.log"; return 1
    fi
    grep -E "^(done|test)" "$LOGS/$family.log" | sed "s/^/   $family: /" || true
  done
}
# the two longest trainings lead the two queues, so both end at about the same time
queue luong_local_p luong_general & first=$!
queue transformer bahdanau fixed_context & second=$!
wait $first && wait $second

runs=(runs/demo/fixed_context runs/demo/bahdanau runs/demo/luong_general
      runs/demo/luong_local_p runs/demo/transformer)
echo "== alignments against the synthetic gold"
align_runs=()
for run in "${runs[@]}"; do align_runs+=(--run "$run"); done
$NMT align "${align_runs[@]}" --split test --limit 200 --out reports/demo/align
echo "== comparison report"
$NMT compare "${runs[@]}" --out reports/demo
echo "open reports/demo/report.html (or read reports/demo/report.md)"
$NMT lab all --out reports/demo/lab  # the essays' claims, checked (uses the runs above)
.venv/bin/python scripts/demo_table.py compare \
  || echo "== this machine's demo differs from the README's table past the gate (above)"
.venv/bin/python scripts/demo_table.py write --seconds $((SECONDS - start))
