#!/usr/bin/env bash
# Per-GPU regression report of the newest commit against the ones before it.
# Reads results/ (as assembled by publish_site.sh) and writes
#   $LTX2K_REGRESS_DIR/report.md    markdown, one section per machine (ltx2k regress)
#   $LTX2K_REGRESS_DIR/report.json  the same, for machines
#   $LTX2K_REGRESS_DIR/status       ok | regressed | insufficient
# and the step output `status`. Exits 0 for all three statuses: a regression is
# reported through an issue, not by failing the dashboard deploy.
#
# Environment:
#   LTX2K_HEAD          commit to judge (default HEAD)
#   LTX2K_BASELINE      commit/ref to compare against; if unset, LTX2K_LAST is used
#   LTX2K_LAST          earlier commits of each GPU's history judged for steps (default 20)
#   LTX2K_RESULTS       results directory (default results)
#   LTX2K_REGRESS_DIR   output directory (default regress)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# shellcheck source=scripts/ci/lib.sh
source scripts/ci/lib.sh

results=${LTX2K_RESULTS:-results}
out=${LTX2K_REGRESS_DIR:-regress}
head=$(ci_commit "${LTX2K_HEAD:-HEAD}" LTX2K_HEAD)
if [[ -n "${LTX2K_BASELINE:-}" ]]; then
    baseline_args=(--baseline "$(ci_commit "$LTX2K_BASELINE" LTX2K_BASELINE)")
else
    last=${LTX2K_LAST:-20}
    [[ "$last" =~ ^[1-9][0-9]*$ && "$last" -ge 2 ]] || ci_die "LTX2K_LAST: not a whole number >= 2: '$last'"
    baseline_args=(--last "$last")
fi

ci_bootstrap
mkdir -p "$out"
set +e
# --repo: order the --last N commits by git history rather than by commit date.
ltx2k regress --results "$results" --repo . --head "$head" "${baseline_args[@]}" \
    --markdown "$out/report.md" --json "$out/report.json"
rc=$?
set -e
# Exit statuses documented by `ltx2k regress`; anything else is a crash, and a
# crash must not read as "no regression".
case $rc in
0) status=ok ;;
2) status=regressed ;;
3) status=insufficient ;;
*) ci_die "ltx2k regress exited $rc" ;;
esac
[[ -f "$out/report.md" ]] || ci_die "ltx2k regress wrote no $out/report.md"
printf '%s\n' "$status" >"$out/status"
ci_output status "$status"
ci_summary "$out/report.md"
ci_log "head ${head:0:12}: $status"
