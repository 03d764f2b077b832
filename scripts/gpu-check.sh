#!/usr/bin/env bash
# The GPU check, by stages: the main job on the starter suite, the GPU test set, benchmarks.
# Usage: scripts/gpu-check.sh [stage ...]
#   stages: tests (= refs timing corpus+prebuild+builds rest bundled languages: the GPU test set), fast (= refs timing
#           corpus rest: the set but the bundled examples and the languages' tests), A+B (stages A and B at once, A on
#           four cores, B, host work alone, niced on the others: corpus+builds; A+B+C: B then C beside A), refs (the 124
#           references' soundness on the GPU, nothing timed, one at a time: 144 s on an H100; REFS_WORKERS above 1 runs
#           them in that many pytest-xdist processes, those of large workloads in one: with 4, 51 of 124 ran out of an
#           H100's memory), timing (the held stream, side streams, CUPTI, graph time, faults, hangs, repeats, tf32x3: 10
#           tests), corpus (the integrity corpus, 135 tests, about 6 min on an H100), rest (the fast set's other tests:
#           agents, compile ahead, hardware, memory, flush), quick (= corpus and timing in one pytest), bundled (every
#           starter example on the GPU, baselines included: the main job's stored evaluations where `run` came first),
#           select (the GPU tests matching GPU_K, a pytest -k), languages (one example per kernel language on one
#           problem, solutions posing as another language, a CUDA C++ build cached; the languages installed under
#           /opt/solbench-lang by scripts/carry-language.sh, each on its own solutions' path), prebuild (the corpus's
#           compiled solutions built into the build cache on the host, for `quick` or `corpus` beside it:
#           quick+prebuild), builds (the 50 shipped CUDA C++ examples built and their imports checked, on the host), run
#           (the main job; RUN_ARGS, e.g. "--language cuda_cpp --baselines none"), rerun (the main job again: `run
#           rerun` gives the fresh and the cached figure), cost (one solution's cost against SOL-ExecBench's CLI, side
#           by side: needs .seb/, docs/PERFORMANCE.md), profile (one solution's eval, its trusted worker and candidates
#           profiled: PROFILE_ARGS, by default the Triton gelu_tanh_and_mul example), phases (one solution's cold eval a
#           few times, by phase: PHASES_ARGS, by default rmsnorm's Triton example), agreement (the audit against each
#           honest fixture's claim, repeated: how far each stands from a false reject; AGREEMENT_ARGS, e.g. "--honest
#           --files cuda_graph_cache.py"), bench, ncu, calibrate, floor, firstdraw (a workload's first input draw with
#           the allocator's cache emptied and kept), start, probe, roundcost (a timing round's host time by part),
#           checks (the evaluation's own checks timed in-process on this host: benchmarks/bench_checks.py), repeat and
#           repeat-nohold (run-to-run agreement with the held stream, the default, and without), profcost (what the
#           language proof's profiler adds per solution: PROFCOST_N solutions, off and on), isolation (which step of the
#           candidate's sandbox this machine's CUDA tolerates, start and IPC), agents (the agent loop, an external agent
#           and a transfer experiment against a loopback model server, real GPU evaluations; then the loop's overhead),
#           serve (the evaluation service under load: request latency, served throughput, times idle and loaded; needs
#           the service's wheels in .whl: fastapi, starlette, uvicorn, opentelemetry-api; docs/GPU.md lists them)
#   (default: fast bundled run bench). Baselines are measured once per software version and harness digest and
#   cached in the database; a database carried in .gpudb/gpu.db is copied to $OUT/gpu.db and reused.
# On a fresh machine the first `run` (or `bundled`) compiles every torch.compile baseline ahead, beside its
# evaluations since 95bc860 (before it, first: 39 to 68 s on H100s), and evaluates about 7 s per solution (5 s in
# `rerun`): before 95bc860 the starter suite took 263 s on one H100 machine and did not end in 330 s on another (31
# of 35), so `RUN_LIMIT=330 ... run` and `RUN_LIMIT=215 ... rerun` (190 s) nearly fill one call's 600 s. Files
# outside the repository stay on the machine between the calls of one lease: keep $OUT/gpu.db there (and return
# it), copy it to .gpudb/gpu.db at the next call's start, carry .whl, and run the other stages, at most 10 minutes
# of them per call, each call started within the 30 s the machine waits. A change to a file of the harness digest
# (evaluate/baselines.py lists them; problems/inputs.py too) makes the cached baselines stale. pytest runs verbose,
# so a stage stopped at its limit still reports its tests, and each failure's report is printed when it happens
# (SOLBENCH_INSTAFAIL, tests/conftest.py).
# Every step is bounded by `timeout`, reads no stdin, and logs under $OUT (the device tool returns $OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/solbench-gpu}
mkdir -p "$OUT"
export SOLBENCH_INSTAFAIL=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/src"
# each pytest stage ends with its slowest tests, so a stage's time can be traced to them from its log
export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} --durations=15"
if ls .whl/*.whl >/dev/null 2>&1; then
  # packages missing on the device machine travel as wheels (see docs/PERFORMANCE.md)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH="/tmp/site:$PWD/src" SOLBENCH_EXTRA_PATH=/tmp/site
fi
# kernel languages installed by scripts/carry-language.sh, each in a folder of its own: a solution's candidate gets
# its own language's folder on the path, no other (evaluate/languages/packages.py)
[ -d /opt/solbench-lang ] && export SOLBENCH_LANG_ROOT=/opt/solbench-lang
export SOLBENCH_GPU_DB="$OUT/gpu.db"
[ -f .gpudb/gpu.db ] && [ ! -f "$SOLBENCH_GPU_DB" ] && cp .gpudb/gpu.db "$SOLBENCH_GPU_DB" && chmod u+w "$SOLBENCH_GPU_DB"
stages=()
for s in "$@"; do
  case "$s" in tests) stages+=(refs timing corpus+prebuild+builds rest bundled languages) ;;
    fast) stages+=(refs timing corpus rest) ;; *) stages+=("$s") ;; esac
done
[ ${#stages[@]} -eq 0 ] && stages=(refs timing corpus rest bundled run bench)
# the timing stage's tests by keyword (each builds and times on the GPU, so one at a time); refs: the references' checks
TIMING_K="held_stream or side_stream or cupti or graph_time or persisting or set_aside or profiler or repeats or fault \
or hang or tf32"
REFS_K=test_reference_on_the_gpu_is_sound
BUILDS_K=test_every_shipped_cuda_cpp_example_passes_the_imports_allowlist
STATUS=$(mktemp -d)  # each stage's result line, written by the stage (two may run at once, in subshells)
trap 'rm -rf "$STATUS"' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  </dev/null 2>&1 | tee "$OUT/nvidia-smi.txt"
run_stage() {
  local stage=$1 start
  start=$(date +%s)
  case "$stage" in
    run|rerun) # rerun: the main job again on the same machine, its builds and baselines cached by the run before;
           # its log has a line per step, and every thread's stack 20 s before the limit where it is still running
           SOLBENCH_STACKS_AFTER=$(( ${RUN_LIMIT:-350} - 20 )) timeout ${RUN_LIMIT:-350} python3 -m solbench.cli run \
             --device cuda --db "$SOLBENCH_GPU_DB" ${RUN_ARGS:-} </dev/null 2>&1 | tee "$OUT/$stage.txt" ;;
    refs)  # correctness only (nothing is timed), so it may run side by side on the GPU: REFS_WORKERS pytest-xdist
           # workers (on the device image), the references of large workloads one after another in one of them
           # (tests/evaluate/test_gpu.py); 4 workers without that ran out of an H100's memory (2026-12-06)
           w=${REFS_WORKERS:-1}; [ "$w" -gt 1 ] && par="-n $w --dist loadgroup" || par=""
           timeout ${REFS_LIMIT:-300} python3 -m pytest -m gpu $par -v -rfE -p no:cacheprovider -k "$REFS_K" tests \
             </dev/null 2>&1 | tee "$OUT/refs.txt" ;;
    rest)  timeout ${REST_LIMIT:-240} python3 -m pytest -m "gpu and not bundled and not languages" -v -rfE \
             -p no:cacheprovider -k "not $REFS_K and not exploit and not honest and not ($TIMING_K)" tests \
             </dev/null 2>&1 | tee "$OUT/rest.txt" ;;
    quick) timeout ${QUICK_LIMIT:-540} python3 -m pytest -m gpu -v -rfE -p no:cacheprovider \
             -k "not $REFS_K and (exploit or honest or $TIMING_K)" tests </dev/null 2>&1 | tee "$OUT/quick.txt" ;;
    corpus) timeout ${CORPUS_LIMIT:-540} python3 -m pytest -m gpu -v -rfE -p no:cacheprovider -k "exploit or honest" \
             tests </dev/null 2>&1 | tee "$OUT/corpus.txt" ;;
    timing) timeout ${TIMING_LIMIT:-300} python3 -m pytest -m gpu -v -rfE -p no:cacheprovider \
             -k "not $REFS_K and not exploit and not honest and ($TIMING_K)" tests </dev/null 2>&1 \
             | tee "$OUT/timing.txt" ;;
    bundled) # an example the main job evaluated in this database (this tree, this GPU, default options) is checked
           # from its stored evaluation, not evaluated again (tests/evaluate/test_gpu.py::_stored); the others are
           SOLBENCH_BUNDLED_STORED=1 timeout ${BUNDLED_LIMIT:-560} python3 -m pytest -m "gpu and bundled" -v -s -rfE \
             -p no:cacheprovider tests </dev/null 2>&1 | tee "$OUT/bundled.txt" ;;
    agents) { timeout ${AGENTS_LIMIT:-300} python3 -m pytest -m "gpu and agents" -v -rfE -s -p no:cacheprovider tests; \
             timeout 120 python3 benchmarks/bench_agent_loop.py --device cuda --attempts 3 --out "$OUT/agent-loop.json"; } \
             </dev/null 2>&1 | tee "$OUT/agents.txt" ;;
    languages) timeout ${LANGUAGES_LIMIT:-300} python3 -m pytest -m "gpu and languages" -v -rfE -s -p no:cacheprovider \
             -k "not $BUILDS_K" tests </dev/null 2>&1 | tee "$OUT/languages.txt" ;;
    prebuild) # the corpus's compiled solutions built into the build cache on the host, in the order the corpus
           # evaluates them (scripts/prebuild_corpus.py): beside `quick` or `corpus`, whose evaluations then find them
           timeout ${PREBUILD_LIMIT:-400} python3 scripts/prebuild_corpus.py </dev/null 2>&1 | tee "$OUT/prebuild.txt" ;;
    builds) # the 50 shipped CUDA C++ examples built on the host (nvcc; nothing runs on the GPU) and their imports
           # checked: the languages stage's host-side part, which `corpus+builds` runs beside the corpus
           timeout ${BUILDS_LIMIT:-400} python3 -m pytest -m "gpu and languages" -v -rfE -s -p no:cacheprovider \
             -k "$BUILDS_K" tests </dev/null 2>&1 | tee "$OUT/builds.txt" ;;
    select) timeout ${SELECT_LIMIT:-120} python3 -m pytest -m gpu -v -rfE -p no:cacheprovider -k "${GPU_K:?GPU_K}" tests \
             </dev/null 2>&1 | tee "$OUT/select.txt" ;;
    probe) timeout 90 python3 benchmarks/probe_transport.py </dev/null 2>&1 | tee "$OUT/probe.txt" ;;
    roundcost) # a timing round's host time by part (the CUPTI session's start, stop and records), and the pieces of a
           # checked call's exchange (benchmarks/probe_round_cost.py, probe_call_cost.py)
           { timeout 90 python3 benchmarks/probe_round_cost.py; timeout 60 python3 benchmarks/probe_call_cost.py; } \
             </dev/null 2>&1 | tee "$OUT/roundcost.txt" ;;
    repeat) timeout ${REPEAT_LIMIT:-150} python3 benchmarks/bench_repeat.py --out "$OUT/repeat.json" </dev/null 2>&1 \
             | tee "$OUT/repeat.txt" ;;
    repeat-nohold) timeout ${REPEAT_LIMIT:-150} python3 benchmarks/bench_repeat.py --no-hold \
             --out "$OUT/repeat-nohold.json" </dev/null 2>&1 | tee "$OUT/repeat-nohold.txt" ;;
    bench) timeout ${BENCH_LIMIT:-240} python3 benchmarks/bench_harness.py --db "$SOLBENCH_GPU_DB" --out "$OUT/bench.json" \
             --cold ${BENCH_COLD:-2} ${BENCH_ARGS:-} </dev/null \
             2>&1 | tee "$OUT/bench.txt" ;;
    profcost) timeout ${PROFCOST_LIMIT:-150} python3 benchmarks/bench_harness.py --db "$SOLBENCH_GPU_DB" \
             --profile-cost ${PROFCOST_N:-6} --out "$OUT/profcost.json" </dev/null 2>&1 | tee "$OUT/profcost.txt" ;;
    ncu)   timeout ${NCU_LIMIT:-300} python3 benchmarks/ncu_agreement.py --out "$OUT/ncu.json" \
             --budget-s $(( ${NCU_LIMIT:-300} - 30 )) ${NCU_ARGS:-} </dev/null 2>&1 | tee "$OUT/ncu.txt" ;;
    cost)  # solbench against SOL-ExecBench on its own rmsnorm Triton example (.seb/: its wheels and the example,
           # carried; benchmarks/cost_side_by_side.py), each cold, alternating; the peer in a site of its own, its
           # `python` a wrapper of this python3 (a symlink would leave this python3's virtual environment behind)
           ex=.seb/example/examples/triton/rmsnorm
           { python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/seb-site .seb/wheels/*.whl \
               && mkdir -p /tmp/pybin && printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" >/tmp/pybin/python \
               && chmod +x /tmp/pybin/python \
               && timeout ${COST_LIMIT:-420} python3 benchmarks/cost_side_by_side.py --problem "$ex" \
                    --solution "$ex/solution_triton.json" --peer-cwd .seb/example --db "$SOLBENCH_GPU_DB" \
                    --rounds ${COST_ROUNDS:-2} --budget-s $(( ${COST_LIMIT:-420} - 10 )) --out "$OUT/cost.json" \
                    --peer "PYTHONPATH=/tmp/seb-site \
                    PATH=/tmp/pybin:\$PATH /tmp/seb-site/bin/sol-execbench examples/triton/rmsnorm \
                    --solution examples/triton/rmsnorm/solution_triton.json -o $OUT/seb-rmsnorm.jsonl"; } \
             </dev/null 2>&1 | tee "$OUT/cost.txt" ;;
    agreement) # the audit against the timing's claim per workload, with each one's margin over the conviction line:
           # the honest corpus on the GPU, each solution AGREEMENT_REPEAT times (benchmarks/audit_agreement.py)
           timeout ${AGREEMENT_LIMIT:-300} python3 benchmarks/audit_agreement.py --device cuda \
             --budget-s $(( ${AGREEMENT_LIMIT:-300} - 40 )) --repeat ${AGREEMENT_REPEAT:-2} --out "$OUT/agreement.json" \
             ${AGREEMENT_ARGS:---honest} </dev/null 2>&1 | tee "$OUT/agreement.txt" ;;
    phases) # one solution's cold eval, PHASES_RUNS times, by phase (benchmarks/eval_phases.py; rmsnorm in Triton)
           r=src/solbench/suite/norm/rmsnorm
           timeout ${PHASES_LIMIT:-240} python3 benchmarks/eval_phases.py --db "$SOLBENCH_GPU_DB" \
             --out "$OUT/phases.json" \
             --runs ${PHASES_RUNS:-3} ${PHASES_ARGS:---problem $r --solution $r/solutions/triton.py} </dev/null 2>&1 \
             | tee "$OUT/phases.txt" ;;
    profile) # where one solution's time goes in the trusted worker (cProfile), default the Triton gelu example
           g=src/solbench/suite/activation/gelu_tanh_and_mul
           timeout ${PROFILE_LIMIT:-180} python3 benchmarks/worker_profile.py --db "$SOLBENCH_GPU_DB" \
             --out "$OUT/profile.txt" --dump "$OUT/profile.pstats" --dump-candidate "$OUT/candidate.pstats" \
             ${PROFILE_ARGS:---problem $g --solution $g/solutions/triton.py} </dev/null \
             >"$OUT/profile-log.txt" 2>&1; head -n 4 "$OUT/profile-log.txt" ;;
    serve) # the evaluation service under a bounded load: every starter example submitted, request latency, served
           # throughput, the rmsnorm example's times idle and under load (benchmarks/service_load.py)
           timeout ${SERVE_LIMIT:-560} python3 benchmarks/service_load.py --db "$SOLBENCH_GPU_DB" --device cuda \
             --limit-s $(( ${SERVE_LIMIT:-560} - 60 )) --out "$OUT/service.json" ${SERVE_ARGS:-} </dev/null 2>&1 \
             | tee "$OUT/service.txt" ;;
    calibrate) timeout 120 python3 -m solbench.cli calibrate --device cuda --db "$SOLBENCH_GPU_DB" </dev/null \
             2>&1 | tee "$OUT/calibrate.txt" ;;
    floor) timeout 120 python3 benchmarks/launch_floor.py </dev/null 2>&1 | tee "$OUT/floor.txt" ;;
    firstdraw) # a workload's first input draw after the caching allocator was emptied, against one that found
           # its blocks cached (benchmarks/probe_first_draw.py; rmsnorm's workloads)
           timeout ${FIRSTDRAW_LIMIT:-90} python3 benchmarks/probe_first_draw.py --out "$OUT/firstdraw.json" \
             </dev/null 2>&1 | tee "$OUT/firstdraw.txt" ;;
    checks) timeout ${CHECKS_LIMIT:-120} python3 benchmarks/bench_checks.py </dev/null 2>&1 | tee "$OUT/checks.txt" ;;
    start) timeout 120 python3 benchmarks/bench_worker_start.py --device cuda </dev/null 2>&1 | tee "$OUT/start.txt" ;;
    isolation) { timeout 100 python3 benchmarks/probe_isolation.py; timeout 100 python3 benchmarks/probe_isolation.py \
             --ipc; } </dev/null 2>&1 | tee "$OUT/isolation.txt" ;;
    *) echo "unknown stage $stage" >&2; return ;;
  esac
  echo "rc=${PIPESTATUS[0]} $(( $(date +%s) - start ))s" >"$STATUS/$stage"
}
# A+B: stage A on the first 4 of this process's cores and stage B (host work alone: builds) niced on the others, at
# once, as the main job's build pool does beside its evaluations; one after the other where there are fewer than 8.
# A+B+C: B then C beside A
side_by_side() {
  local first rest
  read -r first rest < <(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); j = lambda x: ",".join(map(str, x))
print(j(c[:4]), j(c[4:]) if len(c) >= 8 else "")')
  local s
  if [ -z "$rest" ] || ! command -v taskset >/dev/null; then
    run_stage "$1"; for s in ${2//+/ }; do run_stage "$s"; done; return
  fi
  ( taskset -cp "$first" $BASHPID >/dev/null; run_stage "$1" ) &
  ( taskset -cp "$rest" $BASHPID >/dev/null; renice -n 10 -p $BASHPID >/dev/null
    for s in ${2//+/ }; do run_stage "$s" >/dev/null; done ) &
  wait
}
for stage in "${stages[@]}"; do
  if [[ $stage == *+* ]]; then side_by_side "${stage%%+*}" "${stage#*+}"; else run_stage "$stage"; fi
done
# the database whole in its one file (the write-ahead log folded in): $OUT/gpu.db alone, carried to the next call as
# .gpudb/gpu.db, holds every baseline this call measured
[ -f "$SOLBENCH_GPU_DB" ] && timeout 60 python3 -c 'import sqlite3, sys
sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)")' "$SOLBENCH_GPU_DB" </dev/null
echo
echo "== solbench GPU check =="
printf '%-14s %s\n' stage result
for stage in $(printf '%s\n' "${stages[@]}" | tr + '\n'); do
  printf '%-14s %s\n' "$stage" "$(cat "$STATUS/$stage" 2>/dev/null || echo skipped)"
done
# the main job's evaluations so far, from the database (a run stopped at its limit prints no table of its own)
runs=$(printf '%s\n' "${stages[@]}" | grep -cxE 'run|rerun')
[ "$runs" -gt 0 ] && [ -f "$SOLBENCH_GPU_DB" ] && python3 scripts/run_summary.py "$SOLBENCH_GPU_DB" "$runs"
# pytest runs verbose, so a stage stopped by its time limit still shows which tests ran and how they ended
for f in quick refs timing corpus rest bundled agents languages builds select; do
  [ -f "$OUT/$f.txt" ] || continue
  # verbose pytest: "tests/FILE::TEST OUTCOME [ n%]", or under pytest-xdist "[gw0] [ n%] OUTCOME tests/FILE::TEST"
  n() { grep -cE "^tests/[^ ]*$1[^ ]* $2|^\[gw[0-9]+\] \[ *[0-9]+%\] $2 tests/[^ ]*$1" "$OUT/$f.txt"; }
  echo "-- $f: $(n '' PASSED) passed, $(n '' FAILED) failed, $(n '' ERROR) errors, $(n '' SKIPPED) skipped"
  [ "$f" = quick ] || [ "$f" = corpus ] && echo "   exploits $(n test_exploit_is_caught PASSED) caught," \
    "$(n test_exploit_is_caught FAILED) missed; honest $(n test_honest_solution_passes PASSED) passed," \
    "$(n test_honest_solution_passes FAILED) rejected"
  grep -E "^(FAILED|ERROR) |^INSTAFAIL |^E  |^=+ .*(passed|failed).* =+$|^(exploits caught|honest solutions passed):|^LANGUAGE " \
    "$OUT/$f.txt" \
    | tail -n 25
done
exit 0
