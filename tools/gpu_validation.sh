#!/usr/bin/env bash
# One validation pass of the harness on a GPU machine, step by step: offline install,
# GPU tests, correctness gate, quick table, asv runs, the regression detector and
# `ltx2k confirm` on real changes, sharding, interference, the main job.
# Logs and packed results -> $OUT. A fresh machine gets a copy of the working tree
# without its git history, so the asv steps measure a clone of a git bundle.
#
# Usage: OUT=/tmp/out bash tools/gpu_validation.sh [STEPS...]
#        (default steps: info install clone tests desk check quick asv)
#
# Steps:
#   info install clone   the machine; the offline install; the clone with history (/tmp/repo)
#   tests build check quick   GPU tests; the native extension's build; the gate; ltx2k quick
#   desk                  the desk run, pytest --benchmark-only, every shape in one process
#   asv asvfull nextcommit asv3   asv runs: HEAD, HEAD traced, the commit before, 3 commits
#                         (CELL_COST=1: asv's cost per cell, tools/asv_cell_cost.py, and
#                         the GPU's clocks every 250 ms, clocks.csv)
#   report                the prologue's table and the sample-order reading of the results
#   noise                 a second run of one commit's device time, judged by ltx2k power
#   inject                the branch inject-slowdown against BASE: ltx2k regress, asv continuous
#   stepcheck hostcheck hostconfirm   throwaway branches: a kernel step found and confirmed,
#                         calibrated host latency along no-op commits, confirm on a host step
#   shard interference    several GPUs: ltx2k shard-run, scripts/interference.sh
#   main pack             the README's main job; pack /tmp/repo/results
#
# Inputs (environment):
#   BUNDLE        git bundle or repository with the history the asv steps measure;
#                 default: this checkout (`git bundle create repo.bundle main` makes one)
#   RESULTS_TGZ   optional results.tgz from an earlier pass ($OUT/results.tgz): the asv
#                 steps continue that history instead of starting an empty one
#   INTERF_TGZ    optional interference.tgz from an earlier pass, when the interference
#                 step is split over two machines' time limits (INTERF_CONDITIONS)
#   WHEELHOUSE    wheel directory for the offline install (default .whl)
#   BASE, TESTS, MAIN_ARGS, ASV_RANGE, ASV_ARGS, ..._TIMEOUT and the rest: see each step
set -uo pipefail
OUT=${OUT:-/tmp/ltx2k-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTORCH_NVML_BASED_CUDA_CHECK=1
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$HOME/.triton/cache}
steps=${*:-"info install clone tests desk check quick asv"}
log() { echo "=== $(date +%T) $*" | tee -a "$OUT/validation.log"; }
stamp() { while IFS= read -r line; do printf '%(%T)T %s\n' -1 "$line"; done; }  # each line's time
# Commits on the throwaway branches get one author and one date, so their shas are the
# same every run.
bench_identity() {
  git config user.email bench@localhost && git config user.name bench
  export GIT_AUTHOR_DATE="2026-12-01T00:00:00Z" GIT_COMMITTER_DATE="2026-12-01T00:00:00Z"
}
for step in $steps; do
  log "$step"
  case $step in
    info) { nvidia-smi; nvidia-smi -L; nvidia-smi topo -m; python3 -c "import torch,triton,sys;print(sys.version, torch.__version__, triton.__version__, torch.cuda.get_device_name())"; git log --oneline | head -5; } 2>&1 | tee "$OUT/info.log" ;;
    install) bash scripts/bootstrap.sh --wheelhouse "${WHEELHOUSE:-.whl}" 2>&1 | tail -5 ;;
    tests) # shellcheck disable=SC2086 # TESTS: a list of test files, split and globbed
           timeout "${TESTS_TIMEOUT:-540}" python3 -m pytest ${TESTS:-tests/test_gpu_bitexact.py tests/test_rope.py tests/test_adaln.py tests/test_rope_pair.py tests/test_qknorm_rope.py tests/test_native_outputs.py tests/test_validation.py tests/test_algorithms_and_launch_paths.py tests/test_machine.py tests/test_measure.py tests/test_native.py tests/test_native_failsafe.py tests/test_native_failsafe_gpu.py tests/test_ops.py tests/test_threads.py tests/test_negated_views.py} -q -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log" | tail -15 ;;
    desk) # pytest-benchmark over every kernel, variant and shape of the data file in one process
          timeout "${DESK_TIMEOUT:-480}" python3 -m pytest tests/test_benchmarks.py --benchmark-only -q -p no:cacheprovider --benchmark-columns=median,iqr,rounds 2>&1 | tee "$OUT/desk.log" | tail -15 ;;
    build) # the native call path's C++ extension, built once before anything times it
           python3 -c "import time, torch; torch.cuda.init(); from ltx2k.kernels import _native; t = time.time(); m = _native.build(verbose=True); print(f'native build {time.time() - t:.1f} s; driver: {m.driver_error() or \"ok\"}')" 2>&1 | tee "$OUT/native_build.log" | tail -3 ;;
    check) ltx2k check 2>&1 | tee "$OUT/check.log" | tail -3; grep -c ' ok$' "$OUT/check.log" ;;
    quick) ltx2k quick 2>&1 | tee "$OUT/quick.txt" ;;
    clone) # asv measures commits, so it runs in a clone with the history (BUNDLE)
           rm -rf /tmp/repo && git clone -q -b main "${BUNDLE:-$PWD}" /tmp/repo && git -C /tmp/repo log --oneline | head -3
           git -C /tmp/repo branch -q inject-slowdown origin/inject-slowdown 2>/dev/null
           # results of an earlier pass (on a fresh machine each time) continue the history
           # shellcheck disable=SC2012 # a glance at the unpacked result files
           [ -f "${RESULTS_TGZ:-}" ] && tar xzf "$RESULTS_TGZ" -C /tmp/repo && ls /tmp/repo/results/* | head -5 ;;
    asv) # CELL_COST=1: every cell timestamped (tools/asv_cell_cost.py; the clone's copy of
         # the suite is patched, never committed) and the run's cost per cell reported
         [ -n "${CELL_COST:-}" ] && ( cd /tmp/repo && python3 tools/asv_cell_cost.py patch benchmarks/bench_kernels.py )
         # and the GPU's clocks, power and clock-event (throttle) reasons every 250 ms, to
         # place a slow cell against them (older drivers name the reasons "throttle")
         smi=""
         if [ -n "${CELL_COST:-}" ]; then
           reasons=clocks_event_reasons.active
           nvidia-smi --query-gpu=$reasons --format=csv >/dev/null 2>&1 || reasons=clocks_throttle_reasons.active
           nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,$reasons,power.draw,temperature.gpu,utilization.gpu \
             --format=csv,nounits -lms 250 > "$OUT/clocks.csv" 2>&1 & smi=$!
         fi
         # shellcheck disable=SC2086 # ASV_RANGE, ASV_ARGS: argument lists
         ( cd /tmp/repo && time ${CELL_COST:+env CELL_LOG="$OUT/cells.jsonl"} timeout "${ASV_TIMEOUT:-480}" ltx2k run ${ASV_RANGE:-HEAD^!} ${ASV_ARGS:-} ) 2>&1 \
           | stamp | tee "$OUT/asv_run.log" | grep -v "^\S* \s*$" | tail -20
         if [ -n "${CELL_COST:-}" ]; then
           python3 tools/asv_cell_cost.py report "$OUT/cells.jsonl" > "$OUT/cell_cost.txt" 2>&1; tail -5 "$OUT/cell_cost.txt"; gzip -f "$OUT/cells.jsonl"
           [ -n "$smi" ] && kill "$smi" && gzip -f "$OUT/clocks.csv"
         fi
         tar czf "$OUT/results.tgz" -C /tmp/repo results ;;
    report) # what the results say: the prologue's table of the newest result file, and where
            # in each cell its slow samples fall (tools/prologue_table.py, tools/sample_order.py)
            newest=$(ls -t /tmp/repo/results/*/*-*.json 2>/dev/null | grep -v machine.json | head -1)
            [ -n "$newest" ] && python3 tools/prologue_table.py "$newest" > "$OUT/prologue_table.md" 2>&1 && head -40 "$OUT/prologue_table.md"
            python3 tools/sample_order.py /tmp/repo/results --min-runs 2 > "$OUT/sample_order.txt" 2>&1; head -12 "$OUT/sample_order.txt" ;;
    asvfull) ( cd /tmp/repo && time LTX2K_TRACE=1 timeout "${ASV_TIMEOUT:-300}" ltx2k run --show-stderr HEAD^! ) 2>&1 | tee "$OUT/asv_full.log" | grep -E "real|Running [0-9]+ total|failed"
             tar czf "$OUT/results.tgz" -C /tmp/repo results ;;  # packed per step: a later timeout loses nothing
    nextcommit) # the runner's steady state: after `main`, the commit before HEAD, every benchmark,
           # on a machine whose caches the first commit warmed; timestamped like `main`
           ( cd /tmp/repo && time timeout "${NEXT_TIMEOUT:-300}" ltx2k run HEAD~1^! ) 2>&1 \
             | stamp | tee "$OUT/next_commit.log" | grep -E "real|Running [0-9]+ total|Benchmarking|failed"
           tar czf "$OUT/results.tgz" -C /tmp/repo results ;;
    asv3) ( cd /tmp/repo && time timeout "${ASV3_TIMEOUT:-200}" ltx2k run -- --skip-existing-commits -b "${ASV3_BENCH:-time_device_cold}" "${BASE:-HEAD}~3..${BASE:-HEAD}" ) 2>&1 | tee "$OUT/asv_3commits.log" | grep -E "real|For ltx2k commit|Running [0-9]+ total"
          tar czf "$OUT/results.tgz" -C /tmp/repo results ;;
    noise) # run-to-run noise: one commit's device time again, next to the results it already
           # has; ltx2k power prints the A/A pair's false flags and the smallest slowdown it flags
           ( cd /tmp/repo && cp -r results /tmp/results_run1 && timeout "${NOISE_TIMEOUT:-150}" ltx2k run -- -b "time_device" "${BASE:-HEAD}^!" >"$OUT/asv_noise.log" 2>&1;
             ltx2k power /tmp/results_run1 results --commit "$(git rev-parse "${BASE:-HEAD}")" --json "$OUT/power.json" ) 2>&1 | tee "$OUT/power.txt" | tail -20 ;;
    inject) ( cd /tmp/repo && timeout "${INJECT_TIMEOUT:-120}" ltx2k run -- -b "time_device_cold" inject-slowdown^! >"$OUT/asv_inject.log" 2>&1;
              ltx2k regress --results results --repo . --head "$(git rev-parse inject-slowdown)" --baseline "${BASE:-main}" --markdown "$OUT/regress_inject.md" --json "$OUT/regress_inject.json" >/dev/null; echo "regress exit $?";
              head -40 "$OUT/regress_inject.md";
              timeout "${CONT_TIMEOUT:-150}" python3 -m asv continuous --machine h200 --record-samples -b "SplitRope.time_device_cold" -f 1.05 "${BASE:-main}" inject-slowdown 2>&1 | tee "$OUT/asv_continuous.log" | tail -14; echo "asv continuous exit ${PIPESTATUS[0]}" ) 2>&1
            tar czf "$OUT/results.tgz" -C /tmp/repo results ;;
    interference) # scripts/interference.sh on a 2-GPU host; INTERF_CONDITIONS splits it over two
                  # passes, the first pass's $OUT/interference.tgz handed to the second as INTERF_TGZ
           [ -d /tmp/interference ] || { [ -f "${INTERF_TGZ:-}" ] && tar xzf "$INTERF_TGZ" -C /tmp; }
           ( cd /tmp/repo && LTX2K_PYTHON=python3 LTX2K_CONDITIONS="${INTERF_CONDITIONS:-}" LTX2K_WARMUP_S=${INTERF_WARMUP_S:-20} \
               LTX2K_BENCH="${INTERF_BENCH:-\.time_(device_cold|device_warm|host_latency)}" \
               timeout "${INTERF_TIMEOUT:-540}" bash scripts/interference.sh HEAD /tmp/interference ) 2>&1 | grep -v "^\s*$" | tee "$OUT/interference.log" | grep -E "interference\]|real|total" | tail -20
           tar czf "$OUT/interference.tgz" -C /tmp interference ;;
    shard) # a commit range sharded over every GPU of the host (ltx2k shard-run)
           # shellcheck disable=SC2086 # SHARD_RANGE: asv's range arguments
           ( cd /tmp/repo && time timeout "${SHARD_TIMEOUT:-240}" ltx2k shard-run --results /tmp/shard-results -- \
               -b "${SHARD_BENCH:-time_device_cold|AdaValues9.time_host_latency}" ${SHARD_RANGE:-HEAD~2..HEAD} ) 2>&1 | tee "$OUT/shard.log" | grep -v "^\s*$" | tail -25
           tar czf "$OUT/shard-results.tgz" -C /tmp shard-results ;;
    stepcheck) # the regression detector end to end on this GPU: a throwaway branch with
           # two no-op commits, a real kernel change (4 heads per program in "blocked"
           # instead of 16), two more no-ops; every commit but the change is measured, so
           # regress names a two-commit range and confirm must bisect it.
           ( cd /tmp/repo && bench_identity
             base=$(git rev-parse HEAD); git checkout -q -b step-check
             git commit -q --allow-empty -m "no-op 1"; git commit -q --allow-empty -m "no-op 2"
             sed -i 's/bh = min(16, triton.next_power_of_2(num_heads))/bh = min(4, triton.next_power_of_2(num_heads))/' ltx2k/kernels/rope.py
             git commit -qam "rope blocked: 4 heads per program"; change=$(git rev-parse HEAD)
             git commit -q --allow-empty -m "no-op 3"; git commit -q --allow-empty -m "no-op 4"
             git rev-list "$base^..HEAD" | grep -v "$change" > /tmp/hashes.txt
             echo "base $base change $change head $(git rev-parse HEAD)"
             time timeout "${STEP_ASV_TIMEOUT:-300}" ltx2k run -- -b "${STEP_BENCH:-SplitRope.time_device_cold\('(blocked|per_head)'}" HASHFILE:/tmp/hashes.txt 2>&1 | grep -E "real|For ltx2k commit|Running [0-9]+ total|failed"
             tar czf "$OUT/results.tgz" results
             ltx2k regress --results results --repo . --head HEAD --last 20 --json "$OUT/regress_step.json" --markdown "$OUT/regress_step.md"; echo "regress (history, head) exit $?"
             head -30 "$OUT/regress_step.md"
             { for pair in "$base step-check~3" "step-check~1 step-check"; do
                 # shellcheck disable=SC2086 # the pair: two commits
                 set -- $pair
                 echo "## A/A: --baseline $1 --head $2"; ltx2k regress --results results --repo . --baseline "$1" --head "$2" | head -3; echo "exit ${PIPESTATUS[0]}"; done
               echo "## A/A history: --last 20 --head step-check~3"; ltx2k regress --results results --repo . --last 20 --head step-check~3 | head -3; echo "exit ${PIPESTATUS[0]}"
             } 2>&1 | tee "$OUT/aa.md"
             time timeout "${CONFIRM_TIMEOUT:-300}" ltx2k confirm --report "$OUT/regress_step.json" --max-cells "${CONFIRM_CELLS:-1}" --json "$OUT/confirm.json"; echo "confirm exit $?"
           ) 2>&1 | tee "$OUT/stepcheck.log" | grep -v "^\s*$" | tail -60 ;;
    hostcheck) # calibrated host latency along a history with no change in it: a throwaway
           # branch of no-op commits, each measured once; the results are judged offline
           ( cd /tmp/repo && bench_identity
             git checkout -q -b host-check
             for i in $(seq "${HOSTCHECK_COMMITS:-8}"); do git commit -q --allow-empty -m "no-op $i"; done
             git rev-list "HEAD~${HOSTCHECK_COMMITS:-8}..HEAD" > /tmp/hashes.txt
             time timeout "${HOSTCHECK_TIMEOUT:-480}" ltx2k run -- -b track_host_calibrated HASHFILE:/tmp/hashes.txt 2>&1 | grep -E "real|For ltx2k commit|Running [0-9]+ total|failed|track_host"
             tar czf "$OUT/results.tgz" results
             ltx2k regress --results results --repo . --head HEAD --last 20 --markdown "$OUT/regress_hostcheck.md" | head -5; echo "regress exit ${PIPESTATUS[0]}"
           ) 2>&1 | tee "$OUT/hostcheck.log" | grep -v "^\s*$" | tail -40 ;;
    hostconfirm) # ltx2k confirm on a real host-side change: a throwaway branch whose one
           # commit adds four redundant contiguity checks to every RoPE call (host time
           # only), then a no-op commit; the change must be confirmed on every measuring
           # process of the interleaved rounds, the no-op pair must not be.
           ( cd /tmp/repo && bench_identity
             base=$(git rev-parse HEAD); git checkout -q -b host-step
             sed -i 's/^    call = CALLS.get((variant, launch))$/    for _ in range(4):\n        x.is_contiguous()\n    call = CALLS.get((variant, launch))/' ltx2k/kernels/rope.py
             git diff --stat; git commit -qam "rope: four redundant contiguity checks per call"; change=$(git rev-parse HEAD)
             git commit -q --allow-empty -m "no-op"; noop=$(git rev-parse HEAD)
             for pair in "$base $change step" "$change $noop aa"; do
               # shellcheck disable=SC2086 # the pair: two commits and a label
               set -- $pair
               time timeout "${HOSTCONFIRM_TIMEOUT:-280}" ltx2k confirm --benchmark SplitRope.track_host_calibrated \
                 --param "${HOSTCONFIRM_PARAM:-shape=B4_S25_H32_D64}" --good "$1" --bad "$2" \
                 --rounds "${HOSTCONFIRM_ROUNDS:-4}" --json "$OUT/host_confirm_$3.json" --markdown "$OUT/host_confirm_$3.md"
               echo "confirm $3 exit $?"; done
           ) 2>&1 | tee "$OUT/hostconfirm.log" | grep -v "^\s*$" | tail -40 ;;
    main) # the README's main job in the clone (results of an earlier pass continue its history)
          wh=$(cd "${WHEELHOUSE:-.whl}" && pwd)
          # shellcheck disable=SC2086 # MAIN_ARGS: arguments for scripts/main.sh
          ( cd /tmp/repo && time LTX2K_WHEELHOUSE="$wh" timeout ${MAIN_TIMEOUT:-420} bash scripts/main.sh ${MAIN_ARGS:-} ) 2>&1 \
            | stamp | tee "$OUT/main.log" | grep -v "^\S* \s*$" | tail -25
          tar czf "$OUT/results.tgz" -C /tmp/repo results; tar czf "$OUT/html.tgz" -C /tmp/repo html ;;
    pack) tar czf "$OUT/results.tgz" -C /tmp/repo results ;;
    *) echo "unknown step $step" ;;
  esac
done
log "done"
