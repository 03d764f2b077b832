#!/usr/bin/env bash
# The whole GPU check in one call: the main job on the starter suite, the GPU test set, benchmarks.
# Usage: scripts/gpu-check.sh [stage ...]   stages: run tests bench ncu calibrate floor start
#        (default: run tests bench). The first `run` on a fresh machine measures every baseline, torch.compile
#        included (about 8 minutes for the starter suite): give it its own call (RUN_LIMIT=560), then the rest.
# Every step is bounded by `timeout`, reads no stdin, and logs under $OUT (the device tool returns $OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/solbench-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/src"
if ls .whl/*.whl >/dev/null 2>&1; then
  # packages missing on the device machine travel as wheels (see docs/PERFORMANCE.md)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH="/tmp/site:$PWD/src" SOLBENCH_EXTRA_PATH=/tmp/site
fi
export SOLBENCH_GPU_DB="$OUT/gpu.db"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(run tests bench)
declare -A status
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  </dev/null 2>&1 | tee "$OUT/nvidia-smi.txt"
for stage in "${stages[@]}"; do
  start=$(date +%s)
  case "$stage" in
    run)   timeout ${RUN_LIMIT:-350} python3 -m solbench.cli run --device cuda --db "$SOLBENCH_GPU_DB" --quiet </dev/null \
             2>&1 | tee "$OUT/run.txt" ;;
    tests) timeout ${TESTS_LIMIT:-230} python3 -m pytest -m gpu -q -p no:cacheprovider tests </dev/null 2>&1 | tee "$OUT/tests.txt" ;;
    bench) timeout 240 python3 benchmarks/bench_harness.py --db "$SOLBENCH_GPU_DB" --out "$OUT/bench.json" </dev/null \
             2>&1 | tee "$OUT/bench.txt" ;;
    ncu)   timeout 300 python3 benchmarks/ncu_agreement.py --out "$OUT/ncu.json" </dev/null 2>&1 | tee "$OUT/ncu.txt" ;;
    calibrate) timeout 120 python3 -m solbench.cli calibrate --device cuda --db "$SOLBENCH_GPU_DB" </dev/null \
             2>&1 | tee "$OUT/calibrate.txt" ;;
    floor) timeout 120 python3 benchmarks/launch_floor.py </dev/null 2>&1 | tee "$OUT/floor.txt" ;;
    start) timeout 120 python3 benchmarks/bench_worker_start.py --device cuda </dev/null 2>&1 | tee "$OUT/start.txt" ;;
    *) echo "unknown stage $stage"; continue ;;
  esac
  status[$stage]="rc=${PIPESTATUS[0]} $(( $(date +%s) - start ))s"
done
echo
echo "== solbench GPU check =="
printf '%-10s %s\n' stage result
for stage in "${stages[@]}"; do printf '%-10s %s\n' "$stage" "${status[$stage]:-skipped}"; done
[ -f "$OUT/tests.txt" ] && tail -n 3 "$OUT/tests.txt"
exit 0
