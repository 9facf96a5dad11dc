#!/usr/bin/env bash
# Record the real counterparts of the modeled samples on an H100/H200: one prepared run, under 8 minutes.
#   0. check the device: torch must see a CUDA GPU (else stop at once: the 8B model would run on the CPU),
#   1. calibrate (achievable HBM bandwidth and bf16 GEMM rate; stored in the user cache and in every
#      trace collected afterwards),
#   2. collect Llama-3-8B shapes (random weights, built on the GPU in bf16), batch 1 and 64, fused
#      (flash) and materialized (math) attention. Counters (ncu) on the batch-1 flash run only, for one
#      layer of one decode step (--counter-steps decode:0/layer=0: a few dozen kernels, well inside the
#      replay budget that is checked before ncu starts). Batch 64 runs a shorter prompt so the math
#      backend's S x S scores fit (the collector checks memory first and says what fits),
#   3. check that re-importing a kept Kineto file gives the collected rows exactly, and time the
#      collector's own overhead,
#   4. run the GPU tests, by file name,
#   5. print versions and each trace's report, so the closing note can quote them.
# Results (traces, reports) go to OUT; the big intermediates (the profiler's Kineto JSON) to WORK.
# Usage: scripts/record_gpu_samples.sh [OUT_DIR]   (default sample_traces/gpu; WORK=${TMPDIR:-/tmp}/rooftop-gpu-work)
# Needs: a CUDA GPU, torch>=2.5 with CUDA, `pip install -e '.[collect,ncu,test]'`, ncu on PATH for counters.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-sample_traces/gpu}
WORK=${WORK:-${TMPDIR:-/tmp}/rooftop-gpu-work}
PY=${PYTHON:-python3}
PROMPT=${PROMPT:-2048}
PROMPT_B64=${PROMPT_B64:-512}
GEN=${GEN:-16}
BUDGET=${BUDGET:-480}          # seconds for the whole script; optional steps are skipped past it
mkdir -p "$OUT" "$WORK"
log() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }
left() { echo $((BUDGET - SECONDS)); }

log "device"
if ! $PY -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "record_gpu_samples: torch sees no CUDA GPU; stopping (nothing recorded)" >&2
  exit 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.max.sm,clocks.max.mem --format=csv,noheader || true
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
$PY -c 'import nvtx' 2>/dev/null || echo "nvtx: not installed (counters need it: pip install nvtx)"
HAVE_NCU=0
if command -v ncu >/dev/null && $PY -c 'import nvtx' 2>/dev/null; then HAVE_NCU=1; ncu --version | tail -1; fi
[ "$HAVE_NCU" = 1 ] || echo "ncu or nvtx missing: timelines only, no counters"

log "calibrate"
timeout 90 $PY -m rooftop calibrate || echo "calibration failed: peaks fall back to the datasheet"

gpu=$($PY -c 'import torch; n=torch.cuda.get_device_name(0).lower(); print("h200" if "h200" in n else "h100" if "h100" in n else "gpu")')
for b in 1 64; do
  prompt=$([ "$b" = 1 ] && echo "$PROMPT" || echo "$PROMPT_B64")
  for attn in flash math; do
    name=llama3-8b_${gpu}_b${b}_$([ $attn = flash ] && echo fused || echo materialized)
    counters=()
    limit=150
    if [ "$b" = 1 ] && [ "$attn" = flash ] && [ "$HAVE_NCU" = 1 ]; then
      counters=(--counters --counter-steps decode:0/layer=0 --counter-budget 120 --counter-timeout 200)
      limit=300
    fi
    if [ "$(left)" -lt 60 ]; then echo "skipping $name: $(left) s left of the ${BUDGET} s budget"; continue; fi
    log "collect $name (batch $b, prompt $prompt)"
    room=$(( $(left) - 30 )); [ "$room" -lt "$limit" ] && limit=$room
    timeout $limit $PY -m rooftop collect --preset llama3-8b --batch $b --prompt-len "$prompt" --gen-len $GEN \
      --dtype bf16 --attn $attn "${counters[@]}" --kineto "$WORK/$name.pt.trace.json" \
      -o "$OUT/$name.parquet" || echo "collect $name failed (rc=$?)"
  done
done

log "one path: collect == import of the kept Kineto file"
first=$(ls "$WORK"/*.pt.trace.json 2>/dev/null | head -1)
if [ -n "$first" ] && [ "$(left)" -gt 40 ]; then
  timeout 60 $PY - "$first" "$OUT" <<'PY' || echo "re-import check failed for $first"
import sys, tempfile
from pathlib import Path
from collectors.readers.importers import import_any
from rooftop.trace import load_trace, write_trace
src, out = Path(sys.argv[1]), Path(sys.argv[2])
rows, meta = import_any(src)
with tempfile.TemporaryDirectory() as tmp:
    again = load_trace(write_trace(Path(tmp) / "t.parquet", rows, meta)).events
collected = load_trace(out / src.name.replace(".pt.trace.json", ".parquet")).events
# the timeline columns (a --counters run adds ncu's counters to the collected file afterwards)
cols = ["id", "kind", "name", "start_ns", "dur_ns", "device", "stream", "correlation", "path", "phase", "step",
        "layer", "op", "model_flops", "model_bytes"]
same = collected[cols].equals(again[cols])
print(f"{src.name}: {len(again)} rows, {int((again['kind'] == 'kernel').sum())} kernels, "
      f"identical to the collected trace: {same}")
PY
fi

if [ "$(left)" -gt 60 ]; then
  log "collector overhead: profiled vs unprofiled decode step (batch 1, flash)"
  timeout 60 $PY - <<'PY' || echo "overhead measurement failed"
import time, torch
from rooftop.llm.shapes import preset
from collectors.capture.workloads.llama import Llama
m = Llama(preset("llama3-8b"), batch=1, max_len=2048 + 64, dtype="bf16", device="cuda", attn="flash", seed=0)
tok = torch.randint(0, 1000, (1, 2048), device="cuda")
m.prefill(tok, None)
def steps(n, rec=None):
    torch.cuda.synchronize(); t = time.perf_counter()
    for i in range(n):
        m.decode(tok[:, :1], 2048 + i, rec)
    torch.cuda.synchronize(); return (time.perf_counter() - t) / n
steps(3)
plain = steps(16)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                            record_shapes=True) as prof:
    prof_t = steps(16)
print(f"decode step: {plain*1e3:.3f} ms unprofiled, {prof_t*1e3:.3f} ms under the profiler "
      f"({(prof_t/plain-1)*100:+.1f}%)")
PY
fi

log "GPU tests"
timeout $(( $(left) > 150 ? 150 : ($(left) > 30 ? $(left) : 30) )) $PY -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_collect.py tests/test_record.py tests/test_collect_ready.py || echo "gpu tests failed"

log "reports"
for f in "$OUT"/*.parquet; do [ -e "$f" ] && { timeout 30 $PY -m rooftop report "$f" --top 5 || true; }; done
ls -la "$OUT"
log "done in ${SECONDS}s (budget ${BUDGET}s); intermediates in $WORK"
