#!/usr/bin/env bash
# Record the real counterparts of the modeled samples on an H100/H200, in well under 10 minutes:
#   1. calibrate (achievable HBM bandwidth and bf16 GEMM rate; stored in the user cache and in
#      every trace collected afterwards),
#   2. collect Llama-3-8B shapes (random weights), bf16, batch 1 and 64, with fused (flash) and
#      materialized (math) attention; counters (ncu) for a bounded replay: decode step 0 only,
#      on the batch-1 runs (each replayed kernel costs ~0.2-0.5 s under the full section set),
#      each collect also keeps the profiler's own Kineto JSON next to its trace (--kineto): the trace
#      is the Kineto importer's reading of that file, the same path as `rooftop import`,
#   3. time the collector's own overhead (an unprofiled run vs the profiled one), and check that
#      re-importing a kept Kineto file gives the collected rows exactly,
#   4. run the tests marked `gpu`,
#   5. print versions and each trace's report, so the closing note can quote them.
# Usage: scripts/record_gpu_samples.sh [OUT_DIR]   (default sample_traces/gpu)
# Needs: a CUDA GPU, torch with CUDA, `pip install -e '.[collect,ncu,test]'`, ncu on PATH for counters.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-sample_traces/gpu}
PY=${PYTHON:-python3}
PROMPT=${PROMPT:-2048}
GEN=${GEN:-16}
mkdir -p "$OUT"
log() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }

log "versions"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader || true
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
(command -v ncu >/dev/null && ncu --version | tail -1) || echo "ncu: not on PATH (timelines only, no counters)"

log "calibrate"
timeout 120 $PY -m rooftop calibrate || echo "calibration failed: peaks fall back to the datasheet"

gpu=$($PY -c 'import torch; n=torch.cuda.get_device_name(0).lower(); print("h200" if "h200" in n else "h100" if "h100" in n else "gpu")')
for b in 1 64; do
  for attn in flash math; do
    name=llama3-8b_${gpu}_b${b}_$([ $attn = flash ] && echo fused || echo materialized).parquet
    counters=()
    if [ "$b" = 1 ] && command -v ncu >/dev/null; then counters=(--counters --counter-steps decode:0); fi
    log "collect $name"
    timeout 240 $PY -m rooftop collect --preset llama3-8b --batch $b --prompt-len $PROMPT --gen-len $GEN \
      --dtype bf16 --attn $attn "${counters[@]}" --kineto "$OUT/${name%.parquet}.pt.trace.json" \
      -o "$OUT/$name" || echo "collect $name failed (rc=$?)"
  done
done

log "one path: collect == import of the kept Kineto file"
for f in "$OUT"/*.pt.trace.json; do
  timeout 120 $PY - "$f" <<'PY' || echo "re-import check failed for $f"
import sys, tempfile
from pathlib import Path
from collectors.readers.importers import import_any
from rooftop.trace import load_trace, write_trace
src = Path(sys.argv[1])
rows, meta = import_any(src)
with tempfile.TemporaryDirectory() as tmp:
    again = load_trace(write_trace(Path(tmp) / "t.parquet", rows, meta)).events
collected = load_trace(src.with_name(src.name.replace(".pt.trace.json", ".parquet"))).events
# the timeline columns (a --counters run adds ncu's counters to the collected file afterwards)
cols = ["id", "kind", "name", "start_ns", "dur_ns", "device", "stream", "correlation", "path", "phase", "step",
        "layer", "op", "model_flops", "model_bytes"]
same = collected[cols].equals(again[cols])
print(f"{src.name}: {len(again)} rows, {int((again['kind'] == 'kernel').sum())} kernels, steps "
      f"{sorted({(s['phase'], s['index']) for s in meta['steps']})[:3]}..., identical to the collected trace: {same}")
PY
done

log "collector overhead: profiled vs unprofiled decode step (batch 1, flash)"
timeout 120 $PY - <<'PY' || echo "overhead measurement failed"
import time, torch
from rooftop.models import preset
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

log "tests marked gpu"
timeout 180 $PY -m pytest -q -m gpu -p no:cacheprovider || echo "gpu tests failed"

log "reports"
for f in "$OUT"/*.parquet; do $PY -m rooftop report "$f" --top 5 || true; done
log "done"
