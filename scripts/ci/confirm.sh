#!/usr/bin/env bash
# Confirm, on this runner's GPU, the regressions that the regress report flags
# for it: `ltx2k confirm` bisects each flagged step to one commit (asv find)
# and re-measures that commit and the one before it as an interleaved A/B pair
# (asv continuous). A runner whose machine has nothing flagged is done at once.
# Results stay on the runner (never pushed to the store).
#
#   bash scripts/ci/confirm.sh [REPORT]        e.g. confirm.sh regress/report.json
#
# Writes to $LTX2K_OUT (default confirm/):
#   status        confirmed | not-confirmed | nothing-flagged | error
#   machine       this runner's asv machine name
#   summary.md    Markdown summary (regress_issue.sh puts it in the issue)
#   confirm.json  per-cell verdicts
#   confirm.log   ltx2k confirm's and asv's log
# and the step output `status`. Exit status 0 for confirmed, not-confirmed and
# nothing-flagged (the issue job reports what was confirmed); 1 when a flagged
# cell could not be confirmed either way, which must not read as "not confirmed".
#
# Environment:
#   LTX2K_REPORT      `ltx2k regress --json` report (default regress/report.json)
#   LTX2K_OUT         output directory (default confirm)
#   LTX2K_GPU         runner GPU label, for the log (default: the machine name)
#   LTX2K_ROUNDS      interleaved rounds per commit in the A/B (default 4)
#   LTX2K_MAX_CELLS   most flagged cells to check, worst first (default 20)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# shellcheck source=scripts/ci/lib.sh
source scripts/ci/lib.sh

report=${1:-${LTX2K_REPORT:-regress/report.json}}
out=${LTX2K_OUT:-confirm}
rounds=${LTX2K_ROUNDS:-4}
max_cells=${LTX2K_MAX_CELLS:-20}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || ci_die "LTX2K_ROUNDS: not a positive integer: '$rounds'"
[[ "$max_cells" =~ ^[1-9][0-9]*$ ]] || ci_die "LTX2K_MAX_CELLS: not a positive integer: '$max_cells'"
[[ -f "$report" ]] || ci_die "LTX2K_REPORT: no report at '$report' (regress_report.sh writes one)"
# Every full commit hash the report names (last good, first bad, the commit
# judged), found by pattern so that no field of the report format is missed.
# Each one the checkout knows must be on the default branch: confirm builds them.
while read -r sha; do
    if git cat-file -e "${sha}^{commit}" 2>/dev/null; then
        ci_default_branch_commit "$sha" LTX2K_REPORT
    fi
done < <(grep -oE '\b[0-9a-f]{40}\b' "$report" | sort -u)

mkdir -p "$out"
rm -f "$out"/{status,machine,summary.md,confirm.json,confirm.log}
ci_bootstrap
machine=$(ltx2k machine --write --name-only)
gpu=${LTX2K_GPU:-$machine}
printf '%s\n' "$machine" >"$out/machine"
ci_log "gpu '$gpu' (machine '$machine'): confirming the steps flagged in $report"

set +e
ltx2k confirm --report "$report" --machine "$machine" --rounds "$rounds" \
    --max-cells "$max_cells" --markdown "$out/summary.md" --json "$out/confirm.json" 2>&1 |
    tee "$out/confirm.log"
rc=${PIPESTATUS[0]}
set -e

# ltx2k confirm's exit statuses: 0 nothing confirmed, 2 confirmed, 1 error.
case $rc in
0)
    status=$("$ci_python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["status"])' \
        "$out/confirm.json") || ci_die "ltx2k confirm wrote no readable $out/confirm.json"
    [[ "$status" == not-confirmed || "$status" == nothing-flagged ]] ||
        ci_die "ltx2k confirm exited 0 with status '$status'"
    ;;
2) status=confirmed ;;
*) status=error ;;
esac
if [[ ! -s "$out/summary.md" ]]; then
    {
        echo "### ltx2k confirm on \`$machine\`: 💥 error (exit $rc)"
        echo
        echo '```'
        tail -n 30 "$out/confirm.log"
        echo '```'
    } >"$out/summary.md"
fi
printf '%s\n' "$status" >"$out/status"
ci_output status "$status"
ci_summary "$out/summary.md"
ci_log "machine '$machine': $status"
[[ "$status" != error ]] || ci_die "ltx2k confirm exited $rc; see $out/confirm.log"
