#!/usr/bin/env bash
# Do concurrent benchmark runs on one host disturb each other? (docs/runners.md)
#
# Benchmarks one commit on GPU A under four conditions, each into its own asv
# results dir, then compares them with `ltx2k interference`:
#
#   alone             nothing else runs on the host
#   concurrent-suite  GPU B runs the asv suite at the same time (what `ltx2k shard-run`
#                     does to its neighbours)
#   concurrent-load   GPU B runs a bandwidth-bound copy loop: device-to-device (HBM) and
#                     pinned host<->device (PCIe, host memory), i.e. an uncontrolled neighbour
#   alone-repeat      alone again: the control (its flags are the rule's false positives)
#                     and a check for drift (clocks, temperature) over the whole measurement
#
# Usage (repo root, a host with >= 2 identical GPUs and nothing else running on them):
#   bash scripts/interference.sh [COMMIT [OUT]]      defaults: HEAD, interference-<UTC time>
#   bash scripts/interference.sh load                the copy loop alone (GPU per CUDA_VISIBLE_DEVICES)
# Output: OUT/results/<condition>/ (asv results), OUT/logs/, and OUT/report/
#   interference.md, interference.json, interference.png and policy.json, which
#   `ltx2k shard-run --policy OUT/report/policy.json` reads.
#
# Environment:
#   LTX2K_PYTHON      python with torch and ltx2k's dependencies (default: python3)
#   LTX2K_GPU_A       nvidia-smi index of the measured GPU (default 0)
#   LTX2K_GPU_B       nvidia-smi index of the neighbour (default 1)
#   LTX2K_BENCH       asv -b regex on GPU A (default: cold device time and host latency)
#   LTX2K_RUN_ARGS    extra `asv run` arguments, split on whitespace
#   LTX2K_WARMUP_S    seconds the neighbour works before GPU A starts (default 30)
#   LTX2K_LOAD_BYTES  bytes per device buffer of the copy loop (default 2 GiB)
#   LTX2K_LOAD_DEVICE cuda (default) or cpu (smoke test of `load` without a GPU)
#   LTX2K_LOAD_SECONDS stop the copy loop after this many seconds (default: run until killed)
#   LTX2K_ALLOW_BUSY=1 run even if nvidia-smi shows other compute processes
#   LTX2K_CONDITIONS  the conditions to run, in order (default: all four). A job time limit
#                     too short for all four runs them in two calls into the same OUT (the first
#                     call's results/ carried over); the report covers every condition
#                     whose results OUT holds, once alone is among them. Record the GPUs'
#                     UUIDs (OUT/logs/gpus.csv): the two calls must have measured the same GPU.
#   LTX2K_DRY_RUN=1   print the plan and the commands, run nothing
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

PY=${LTX2K_PYTHON:-python3}
log() { printf '[interference] %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# The neighbour's load: both bandwidth paths a co-tenant can saturate. Device-to-device
# copies keep GPU B's HBM busy; pinned host<->device copies load PCIe and host memory,
# which GPU A's host-latency benchmarks share.
run_load() {
    exec "$PY" - <<'PY'
import os
import time

import torch

dev = os.environ.get("LTX2K_LOAD_DEVICE", "cuda")
n = int(os.environ.get("LTX2K_LOAD_BYTES", str(2 << 30)))
seconds = float(os.environ.get("LTX2K_LOAD_SECONDS", "0") or 0)
src = torch.ones(n, dtype=torch.uint8, device=dev)
dst = torch.empty_like(src)
small = torch.empty(max(n // 4, 1), dtype=torch.uint8, device=dev)
host = torch.ones(small.numel(), dtype=torch.uint8, pin_memory=dev == "cuda")
t0, rounds, moved = time.monotonic(), 0, 0
print(f"load: {n} B buffers on {dev}", flush=True)
while not seconds or time.monotonic() - t0 < seconds:
    dst.copy_(src)
    small.copy_(host, non_blocking=True)
    host.copy_(small, non_blocking=True)
    if dev == "cuda":
        torch.cuda.synchronize()
    rounds += 1
    moved += 2 * n + 2 * small.numel()
    if rounds % 200 == 0:
        print(f"load: {moved / (time.monotonic() - t0) / 1e9:.1f} GB/s", flush=True)
print(f"load: {rounds} rounds, {moved / (time.monotonic() - t0) / 1e9:.2f} GB/s", flush=True)
PY
}

if [[ "${1:-}" == load ]]; then
    run_load
fi

commit=$(git rev-parse --verify "${1:-HEAD}^{commit}") || die "not a commit: ${1:-HEAD}"
out=${2:-interference-$(date -u +%Y%m%dT%H%M%SZ)}
gpu_a=${LTX2K_GPU_A:-0}
gpu_b=${LTX2K_GPU_B:-1}
bench=${LTX2K_BENCH:-'\.time_(device_cold|host_latency)'}
warmup=${LTX2K_WARMUP_S:-30}
read -r -a run_args <<<"${LTX2K_RUN_ARGS:-}"
dry=${LTX2K_DRY_RUN:-0}
all_conditions=(alone concurrent-suite concurrent-load alone-repeat)
read -r -a conditions <<<"${LTX2K_CONDITIONS:-${all_conditions[*]}}"
[[ ${#conditions[@]} -gt 0 ]] || die "LTX2K_CONDITIONS is empty"
for c in "${conditions[@]}"; do
    [[ " ${all_conditions[*]} " == *" $c "* ]] ||
        die "LTX2K_CONDITIONS: unknown condition '$c' (known: ${all_conditions[*]})"
done
# Indices mean nvidia-smi's (PCI bus) order, for CUDA as well.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
[[ "$gpu_a" =~ ^[0-9]+$ && "$gpu_b" =~ ^[0-9]+$ && "$gpu_a" != "$gpu_b" ]] ||
    die "LTX2K_GPU_A=$gpu_a and LTX2K_GPU_B=$gpu_b must be two different GPU indices"

gpus=$(nvidia-smi --query-gpu=index,name --format=csv,noheader) || die "nvidia-smi failed"
name_a=$(awk -F', ' -v i="$gpu_a" '$1 == i {print $2}' <<<"$gpus")
name_b=$(awk -F', ' -v i="$gpu_b" '$1 == i {print $2}' <<<"$gpus")
[[ -n "$name_a" && -n "$name_b" ]] || die "GPUs $gpu_a and $gpu_b are not both in: $gpus"
[[ "$name_a" == "$name_b" ]] || die "GPU $gpu_a is $name_a but GPU $gpu_b is $name_b"
busy=$(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader || true)
if [[ -n "$busy" && "${LTX2K_ALLOW_BUSY:-0}" != 1 ]]; then
    die "other compute processes are running (set LTX2K_ALLOW_BUSY=1 to go on): $busy"
fi

# One GPU, one phase: every benchmark runs under the condition being measured.
measure_cmd=("$PY" -m ltx2k.cli shard-run --no-exclusive --results)
asv_tail=(-- -b "$bench" "${run_args[@]}" "$commit^!")
neighbour_tail=(-- "${run_args[@]}" "$commit^!") # the whole suite, as a shard would run it

log "commit ${commit:0:12}, GPU $gpu_a measured, GPU $gpu_b neighbour ($name_a); out $out"
if [[ "$dry" == 1 ]]; then
    for cond in "${conditions[@]}"; do
        case $cond in
        concurrent-suite) echo "neighbour: CUDA_VISIBLE_DEVICES=$gpu_b ${measure_cmd[*]} $out/neighbour ${neighbour_tail[*]} (looped)" ;;
        concurrent-load) echo "neighbour: CUDA_VISIBLE_DEVICES=$gpu_b bash $0 load" ;;
        esac
        echo "$cond: CUDA_VISIBLE_DEVICES=$gpu_a ${measure_cmd[*]} $out/results/$cond ${asv_tail[*]}"
    done
    echo "report: $PY -m ltx2k.cli interference --condition alone=$out/results/alone ... --commit $commit --out $out/report"
    exit 0
fi

mkdir -p "$out/results" "$out/logs"
neighbour_pid=""
stop_neighbour() {
    if [[ -n "$neighbour_pid" ]]; then
        # setsid made it a process group of its own: stop it and every child asv/benchmark.
        kill -TERM -- "-$neighbour_pid" 2>/dev/null || true
        wait "$neighbour_pid" 2>/dev/null || true
        neighbour_pid=""
    fi
}
# A timeout or Ctrl-C must stop the neighbour too: it runs in its own session (setsid), so
# nothing else would, and it would hold GPU B (seen: a `timeout` left it running).
trap stop_neighbour EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

snapshot() { # clocks, temperature, power: thermal or power coupling shows up here
    nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu \
        --format=csv >>"$out/logs/gpu-state.csv" 2>/dev/null || true
}

start_neighbour() { # KIND LOG
    local kind=$1 nlog=$2
    if [[ "$kind" == suite ]]; then
        # Again and again until stopped, so it outlasts GPU A's run; each pass re-measures
        # the same commit into the same (unanalysed) results dir.
        # Its work dirs go under OUT: stopping it mid-run leaves them behind.
        mkdir -p "$out/neighbour-tmp"
        CUDA_VISIBLE_DEVICES=$gpu_b TMPDIR="$out/neighbour-tmp" \
            setsid bash -c 'while :; do "$@" || sleep 5; done' _ \
            "${measure_cmd[@]}" "$out/neighbour" "${neighbour_tail[@]}" >"$nlog" 2>&1 &
    else
        CUDA_VISIBLE_DEVICES=$gpu_b setsid bash "$0" load >"$nlog" 2>&1 &
    fi
    neighbour_pid=$!
    # Wait until the neighbour really works (benchmarking a commit, or copying), then a bit more.
    local ready='commit 1/1|^load: '
    for _ in $(seq 1 600); do
        grep -Eq "$ready" "$nlog" && break
        kill -0 "$neighbour_pid" 2>/dev/null || die "the neighbour ($kind) died; see $nlog"
        sleep 1
    done
    grep -Eq "$ready" "$nlog" || die "the neighbour ($kind) did not start in 600 s; see $nlog"
    sleep "$warmup"
}

measure() { # CONDITION
    local cond=$1
    log "$cond: measuring GPU $gpu_a"
    snapshot
    # A benchmark that failed is recorded as failed (asv exit 2); the others still count.
    if ! CUDA_VISIBLE_DEVICES=$gpu_a "${measure_cmd[@]}" "$out/results/$cond" "${asv_tail[@]}" \
        2>&1 | tee "$out/logs/$cond.log" >&2; then
        log "$cond: shard-run exited non-zero; see $out/logs/$cond.log"
    fi
    snapshot
}

# The whole GPU, clocks and UUIDs included: calls that share one OUT must match here.
nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,driver_version --format=csv >>"$out/logs/gpus.csv" || true
for cond in "${conditions[@]}"; do
    case $cond in
    concurrent-suite)
        log "concurrent-suite: starting the suite on GPU $gpu_b"
        start_neighbour suite "$out/logs/neighbour-suite.log"
        ;;
    concurrent-load)
        log "concurrent-load: starting the copy loop on GPU $gpu_b"
        start_neighbour load "$out/logs/neighbour-load.log"
        ;;
    esac
    measure "$cond"
    stop_neighbour
done

# Report on every condition this OUT holds (an earlier call may have run the others).
cond_args=()
for cond in "${all_conditions[@]}"; do
    [[ -d "$out/results/$cond" ]] && cond_args+=(--condition "$cond=$out/results/$cond")
done
if [[ ! -d "$out/results/alone" || ${#cond_args[@]} -lt 4 ]]; then
    log "report: needs alone and at least one other condition; have: ${cond_args[*]:-none}"
    exit 0
fi
decide=()
[[ -d "$out/results/concurrent-suite" ]] || decide=(--decide "${cond_args[3]%%=*}")
"$PY" -m ltx2k.cli interference "${cond_args[@]}" "${decide[@]}" \
    --commit "$commit" --out "$out/report" >"$out/report.md"
log "report: $out/report/interference.md; policy for shard-run: $out/report/policy.json"
