#!/usr/bin/env bash
# Open, or update, the ONE tracking issue for performance regressions on main.
# Reads $LTX2K_REGRESS_DIR/{status,report.md} from regress_report.sh; does
# nothing unless the status is `regressed`. The issue is found by its label and
# exact title, so reruns and nightly runs update it instead of piling up issues.
#
# Environment:
#   GH_TOKEN            token with issues: write (read by gh)
#   GH_REPO             owner/name (default $GITHUB_REPOSITORY)
#   LTX2K_REGRESS_DIR   directory written by regress_report.sh (default regress)
#   LTX2K_HEAD          the commit judged, for the text (default HEAD)
#   LTX2K_RUN_URL       link to the workflow run, for the text (optional)
#   LTX2K_PAGES_URL     link to the dashboard, for the text (optional)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# shellcheck source=scripts/ci/lib.sh
source scripts/ci/lib.sh

dir=${LTX2K_REGRESS_DIR:-regress}
repo=${GH_REPO:-${GITHUB_REPOSITORY:-}}
[[ -n "$repo" ]] || ci_die "GH_REPO (owner/name) is not set"
label=perf-regression
title="Performance regression on main (gpu-bench)"

[[ -f "$dir/status" ]] || ci_die "no $dir/status: run regress_report.sh first"
status=$(<"$dir/status")
if [[ "$status" != regressed ]]; then
    ci_log "status '$status': no issue to open or update"
    exit 0
fi
[[ -f "$dir/report.md" ]] || ci_die "no $dir/report.md"

head=${LTX2K_HEAD:-$(git rev-parse HEAD)}
body=$(mktemp)
trap 'rm -f "$body"' EXIT
{
    echo "The nightly/push benchmark of \`${head:0:12}\` found a significant regression."
    [[ -n "${LTX2K_RUN_URL:-}" ]] && echo "Run: ${LTX2K_RUN_URL}"
    [[ -n "${LTX2K_PAGES_URL:-}" ]] && echo "Dashboard: ${LTX2K_PAGES_URL}"
    echo
    echo "This issue is updated in place by \`.github/workflows/gpu-bench.yml\`;" \
        "close it once the regression is fixed or accepted."
    echo
    cat "$dir/report.md"
} >"$body"

gh label create "$label" --repo "$repo" --color D93F0B --force \
    --description "Benchmark regression found by gpu-bench" >/dev/null
number=$(gh issue list --repo "$repo" --state open --label "$label" --limit 100 \
    --json number,title --jq ".[] | select(.title == \"$title\") | .number" | head -n 1)

if [[ -n "$number" ]]; then
    gh issue edit "$number" --repo "$repo" --body-file "$body" >/dev/null
    # A comment as well: editing a body notifies nobody.
    gh issue comment "$number" --repo "$repo" \
        --body "Still regressed at \`${head:0:12}\`${LTX2K_RUN_URL:+ (${LTX2K_RUN_URL})}; description updated." >/dev/null
    ci_log "updated issue #$number"
else
    gh issue create --repo "$repo" --title "$title" --label "$label" --body-file "$body"
    ci_log "opened a new issue"
fi
