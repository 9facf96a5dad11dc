#!/usr/bin/env bash
# Run every benchmark at the sizes that fit; results (markdown) go to bench/out/*.md.
#   bench/run_all.sh           1k / 100k / 1M kernels (about 40 minutes on 2 cores)
#   bench/run_all.sh --quick   1k / 10k / 100k (a few minutes; HTA only up to 10k)
# HTA stops at 100k kernels in the full run: at 1M it is killed past 16 GB or times out.
# HTA is looked for at $HTA_PYTHON (default /tmp/hta-venv/bin/python); without it, its rows are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
HTA=${HTA_PYTHON:-/tmp/hta-venv/bin/python}
MEM_GB=${MEM_GB:-16}  # address-space cap per tool run; keep it under the machine's RAM
mkdir -p bench/out
if [[ "${1:-}" == "--quick" ]]; then
  SIZES=1000,10000,100000; HTA_MAX=10000; TUI=100000; REPORT=10000,100000; CURVES=1000,10000,100000
else
  SIZES=1000,100000,1000000; HTA_MAX=100000; TUI=1000000; REPORT=100000,1000000; CURVES=1000,10000,100000,1000000
fi
seed=()
[[ -z "$("$PY" -c 'import sys; sys.path.insert(0, "bench"); import make_kineto; print(make_kineto.seed_path() or "")')" ]] && seed=(--synthetic)
"$PY" bench/import_bench.py --sizes "$SIZES" "${seed[@]}" --hta-python "$HTA" --hta-max "$HTA_MAX" --mem-gb "$MEM_GB" \
  --json-out bench/out/import.json | tee bench/out/import.md
"$PY" bench/import_bench.py --sizes "$SIZES" --synthetic --hta-python "$HTA" --hta-max "$HTA_MAX" --mem-gb "$MEM_GB" \
  --json-out bench/out/import_synthetic.json | tee bench/out/import_synthetic.md
"$PY" bench/tui_bench.py --kernels "$TUI" --stock-rows 100000 | tee bench/out/tui.md
"$PY" bench/report_bench.py --sizes "$REPORT" | tee bench/out/report.md
"$PY" bench/curves.py --sizes "$CURVES" --hta-python "$HTA" --hta-max "$HTA_MAX" --mem-gb "$MEM_GB" | tee bench/out/curves.txt
