#!/usr/bin/env bash
# Benchmark, on this runner's GPU, every commit that this machine has no result
# for yet, and add the new results to the shared store.
#
#   pull the store -> ltx2k run --skip-existing-commits RANGE -> push this machine
#
# Environment:
#   LTX2K_STORE        git URL or path of the store (default: this GitHub repository)
#   LTX2K_STORE_TOKEN  token git uses for the store; only git talking to the store sees it
#   LTX2K_STORE_BRANCH store branch (default asv-results)
#   LTX2K_RANGE        asv commit range (default ALL, i.e. every commit on the
#                      branches of asv.conf.json; see below)
#   LTX2K_RUN_ARGS     extra `asv run` arguments, split on whitespace (e.g. --quick)
#   LTX2K_RESULTS      results directory; must be asv.conf.json's results_dir
#
# Fake runner on a CPU:
#   git init --bare /tmp/bare.git
#   LTX2K_STORE=/tmp/bare.git LTX2K_RANGE='HEAD^!' LTX2K_RUN_ARGS=--quick \
#       bash scripts/ci/runner_bench.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# shellcheck source=scripts/ci/lib.sh
source scripts/ci/lib.sh
ci_take_store_token "$@"

store=$(ci_store_url)
branch=${LTX2K_STORE_BRANCH:-asv-results}
results=${LTX2K_RESULTS:-results}
# Not asv's NEW: NEW skips every commit older than the newest one benchmarked on
# *any* machine (asv.results.get_existing_hashes reads all machines), so once
# the store holds h200 results an a100 runner would silently skip those
# commits. --skip-existing-commits checks this machine's results only.
range=${LTX2K_RANGE:-ALL}
read -r -a run_args <<<"${LTX2K_RUN_ARGS:-}"

ci_bootstrap
machine=$(ltx2k machine --write --name-only)
ci_log "machine '$machine', store '$store', range '$range'"

# Pull first: the store is how this runner learns what it (or a twin runner of
# the same GPU type) has already benchmarked. A store without the branch is a
# new store (the first push creates it); any other failure to reach it stops
# the job before hours of benchmarking that could not be pushed.
set +e
ci_with_store_auth git ls-remote --exit-code --heads "$store" "$branch" >/dev/null
probe=$?
set -e
case $probe in
0) ci_with_store_auth ltx2k store pull --store "$store" --branch "$branch" --dest "$results" ;;
2) ci_log "store has no branch '$branch' yet: this run's results will create it" ;;
*) ci_die "cannot read store '$store' (git ls-remote exited $probe)" ;;
esac

set +e
# `--`: ltx2k run passes everything after it to asv run verbatim.
ltx2k run -- --skip-existing-commits "${run_args[@]}" "$range"
run_status=$?
set -e

# Push even when some benchmarks failed: what was recorded is still data, and
# the failures are recorded as failures (null results) for the dashboard.
# Only this machine's directory: the other machines' copies pulled above may
# already be stale, and pushing them could undo another runner's newer push.
ci_with_store_auth ltx2k store push --store "$store" --branch "$branch" --results "$results" \
    --machine "$machine"
ci_output machine "$machine"

if ((run_status != 0)); then
    ci_die "ltx2k run exited $run_status; the results it recorded were pushed"
fi
ci_log "done: results of '$machine' pushed to the store"
