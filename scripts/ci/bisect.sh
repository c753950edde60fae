#!/usr/bin/env bash
# Find the commit that changed one benchmark, on this runner's GPU (asv find).
#
#   bash scripts/ci/bisect.sh GOOD BAD BENCHMARK      or the LTX2K_BISECT_* variables
#
# asv find bisects on the benchmark's value, assuming the change is mostly
# monotonic over the range; BENCHMARK must match exactly one benchmark, e.g.
# 'bench_kernels.SplitRope.time_device_warm'. Results stay local (never pushed
# to the store): a bisect samples a few commits, not a history.
#
# Environment:
#   LTX2K_BISECT_GOOD, LTX2K_BISECT_BAD   commits (arguments take precedence)
#   LTX2K_BISECT_BENCH                    benchmark name or regex
#   LTX2K_BISECT_INVERT                   true: look for a *decrease* (for
#                                         higher-is-better track_pct_* benchmarks)
#   LTX2K_OUT                             output directory (default bisect)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# shellcheck source=scripts/ci/lib.sh
source scripts/ci/lib.sh

good=$(ci_commit "${1:-${LTX2K_BISECT_GOOD:-}}" LTX2K_BISECT_GOOD)
bad=$(ci_commit "${2:-${LTX2K_BISECT_BAD:-}}" LTX2K_BISECT_BAD)
bench=${3:-${LTX2K_BISECT_BENCH:-}}
[[ -n "$bench" && "$bench" != -* && "$bench" != *$'\n'* ]] ||
    ci_die "LTX2K_BISECT_BENCH: need one benchmark name or regex, got '$bench'"
[[ "$good" != "$bad" ]] || ci_die "good and bad are the same commit ${good:0:12}: nothing to bisect"
git merge-base --is-ancestor "$good" "$bad" ||
    ci_die "good commit ${good:0:12} is not an ancestor of bad commit ${bad:0:12}"
# Every commit asv find may build lies between good and bad, so bad on the
# default branch puts the whole range there.
ci_default_branch_commit "$bad" LTX2K_BISECT_BAD
find_args=()
case "${LTX2K_BISECT_INVERT:-false}" in
true) find_args=(--invert) ;;
false) ;;
*) ci_die "LTX2K_BISECT_INVERT: expected true or false, got '${LTX2K_BISECT_INVERT}'" ;;
esac
# asv find takes the oldest commit of its range as the known-good end: it
# measures it but can never name it. git's good..bad leaves good out, so that
# end would be good's child, and a change made by good's child would be blamed
# on a later commit (with two commits in the range, asv answers `bad` without
# measuring anything). good^..bad starts the range at good itself; a root
# commit has no parent, and then everything up to bad is the range.
if git rev-parse --verify --quiet "${good}^" >/dev/null; then
    range="${good}^..${bad}"
else
    range=$bad
fi
out=${LTX2K_OUT:-bisect}
mkdir -p "$out"

ci_bootstrap
machine=$(ltx2k machine --write --name-only)
ci_asv_env "$machine"
ci_log "asv find ${good:0:12}..${bad:0:12} '$bench' on machine '$machine'"

set +e
asv find --machine "$machine" --show-stderr "${find_args[@]}" "$range" "$bench" 2>&1 |
    tee "$out/asv-find.txt"
rc=${PIPESTATUS[0]}
set -e

{
    echo "### asv find on \`$machine\`"
    echo
    echo "Benchmark \`$bench\`, range \`${good:0:12}..${bad:0:12}\`${find_args[*]:+ (inverted)}."
    echo
    echo '```'
    tail -n 40 "$out/asv-find.txt"
    echo '```'
} >"$out/summary.md"
ci_summary "$out/summary.md"
((rc == 0)) || ci_die "asv find exited $rc"
