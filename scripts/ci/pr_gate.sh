#!/usr/bin/env bash
# PR benchmark gate on one GPU: asv continuous of the PR's merge base against its
# head, judged by `ltx2k regress` (which knows that track_pct_copy_bandwidth is
# higher-is-better, unlike asv's own verdict).
#
#   bash scripts/ci/pr_gate.sh [BASE [HEAD]]      e.g. pr_gate.sh origin/main HEAD
#
# Writes to $LTX2K_OUT (default pr-bench/):
#   report.md           markdown for the PR comment
#   verdict.json        {gpu, machine, pr, base, head, verdict, ...}
#   asv-continuous.txt  asv's own table and log
# Exit status: 0 for ok and insufficient data, 1 for a significant regression
# or a benchmark that failed to run (the check must not pass on a crash).
#
# Environment:
#   LTX2K_BASE_SHA, LTX2K_HEAD_SHA  commits (the arguments take precedence;
#                                   defaults origin/main and HEAD)
#   LTX2K_GPU         runner GPU label, for the report (default: the machine name)
#   LTX2K_PR_NUMBER   PR number, recorded for the comment workflow (optional)
#   LTX2K_BENCH       asv --bench regex (optional: all benchmarks)
#   LTX2K_FACTOR      asv continuous --factor (default 1.1)
#   LTX2K_RESULTS     results directory; must be asv.conf.json's results_dir
#   LTX2K_OUT         output directory (default pr-bench)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# shellcheck source=scripts/ci/lib.sh
source scripts/ci/lib.sh

base_in=${1:-${LTX2K_BASE_SHA:-origin/main}}
head_in=${2:-${LTX2K_HEAD_SHA:-HEAD}}
head=$(ci_commit "$head_in" LTX2K_HEAD_SHA)
# The merge base, not the base branch's tip: the PR is judged on its own
# changes, not on whatever landed on main since it branched.
base_tip=$(ci_commit "$base_in" LTX2K_BASE_SHA)
base=$(git merge-base "$base_tip" "$head") || ci_die "no merge base of '$base_in' and '$head_in'"
pr=${LTX2K_PR_NUMBER:-}
[[ -z "$pr" || "$pr" =~ ^[0-9]+$ ]] || ci_die "LTX2K_PR_NUMBER: not a number: '$pr'"
factor=${LTX2K_FACTOR:-1.1}
out=${LTX2K_OUT:-pr-bench}
bench_args=()
if [[ -n "${LTX2K_BENCH:-}" ]]; then
    bench_args=(--bench "$LTX2K_BENCH")
fi

mkdir -p "$out"
# PR code gets a Triton cache of its own, fresh per job: the persistent cache
# (docs/runners.md) is trusted by main's runs, and a PR must not be able to
# plant compiled kernels in it. Base and head share this one, so both see the
# same cold/warm conditions.
TRITON_CACHE_DIR=$(mktemp -d "${RUNNER_TEMP:-/tmp}/ltx2k-pr-triton.XXXXXX")
export TRITON_CACHE_DIR
# The same holds for bytecode: main's runs read the bytecode cache of
# ltx2k/runner/bytecode.py, so PR code writes its own, fresh per job.
PYTHONPYCACHEPREFIX=$(mktemp -d "${RUNNER_TEMP:-/tmp}/ltx2k-pr-pycache.XXXXXX")
export PYTHONPYCACHEPREFIX
unset PYTHONDONTWRITEBYTECODE

ci_bootstrap
machine=$(ltx2k machine --write --name-only)
gpu=${LTX2K_GPU:-$machine}
ci_asv_env "$machine"
ci_log "gpu '$gpu' (machine '$machine'): ${base:0:12} (merge base) vs ${head:0:12}"

# asv clones this checkout with --mirror, which copies refs, not a detached
# HEAD: name both commits so asv can find them whatever actions/checkout did.
git update-ref refs/ltx2k/pr-base "$base"
git update-ref refs/ltx2k/pr-head "$head"

set +e
asv continuous --machine "$machine" --factor "$factor" --split --show-stderr \
    "${bench_args[@]}" "$base" "$head" 2>&1 | tee "$out/asv-continuous.txt"
continuous_rc=${PIPESTATUS[0]}
regress_rc=
if ((continuous_rc <= 1)); then
    # 0/1 = asv's own unchanged/worse; >1 = benchmarks failed to run.
    ltx2k regress --results "${LTX2K_RESULTS:-results}" --repo . --head "$head" --baseline "$base" \
        --markdown "$out/regress.md" --json "$out/regress.json"
    regress_rc=$?
fi
set -e

case "$regress_rc" in
0) verdict=ok ;;
2) verdict=regressed ;;
3) verdict=insufficient ;;
*) verdict=error ;;
esac

{
    echo "### ${gpu}: ${verdict}"
    echo
    echo "\`${head:0:12}\` (head) against \`${base:0:12}\` (merge base) on machine \`${machine}\`."
    echo
    if [[ -f "$out/regress.md" ]]; then
        cat "$out/regress.md"
    else
        echo "The benchmarks failed to run (asv continuous exited ${continuous_rc}); see the log below."
    fi
    echo
    echo "<details><summary>asv continuous output</summary>"
    echo
    echo '```'
    tail -n 200 "$out/asv-continuous.txt"
    echo '```'
    echo "</details>"
} >"$out/report.md"

GPU=$gpu MACHINE=$machine PR=$pr BASE=$base HEAD=$head VERDICT=$verdict \
    CONTINUOUS_RC=$continuous_rc REGRESS_RC=$regress_rc \
    "$ci_python" -c '
import json, os, sys
e = os.environ
json.dump({
    "gpu": e["GPU"], "machine": e["MACHINE"], "pr": int(e["PR"]) if e["PR"] else None,
    "base": e["BASE"], "head": e["HEAD"], "verdict": e["VERDICT"],
    "asv_continuous_rc": int(e["CONTINUOUS_RC"]),
    "regress_rc": int(e["REGRESS_RC"]) if e["REGRESS_RC"] else None,
}, sys.stdout, indent=2)
' >"$out/verdict.json"

ci_output verdict "$verdict"
ci_summary "$out/report.md"
ci_log "verdict: $verdict"
case "$verdict" in
ok | insufficient) exit 0 ;;
*) exit 1 ;;
esac
