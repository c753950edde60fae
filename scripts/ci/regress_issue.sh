#!/usr/bin/env bash
# Open, or update, the ONE tracking issue for performance regressions on main.
# Reads $LTX2K_REGRESS_DIR/{status,report.md,report.json} from regress_report.sh;
# does nothing unless the status is `regressed`. The issue is found by its label
# and exact title, so reruns and nightly runs update it instead of piling up issues.
#
# With LTX2K_CONFIRM_DIR (the confirm.sh outputs of every GPU runner, one
# subdirectory each, or one confirm.sh output itself), a flagged GPU counts only
# if its runner confirmed the regression (bisected and re-measured it) or could
# not say (its confirm failed or is missing: a crash must not hide a regression).
# If every flagged GPU re-measured its steps and none held, no issue is opened.
#
# Environment:
#   GH_TOKEN            token with issues: write (read by gh)
#   GH_REPO             owner/name (default $GITHUB_REPOSITORY)
#   LTX2K_REGRESS_DIR   directory written by regress_report.sh (default regress)
#   LTX2K_CONFIRM_DIR   directory of confirm.sh outputs (optional; unset: every
#                       regression the report flags opens the issue)
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
confirmed=$(mktemp)
trap 'rm -f "$body" "$confirmed"' EXIT
if [[ -n "${LTX2K_CONFIRM_DIR:-}" ]]; then
    [[ -f "$dir/report.json" ]] || ci_die "no $dir/report.json to match confirmations with"
    # Python for the JSON; the confirm outputs are read as data, never run.
    set +e
    REPORT=$dir/report.json CONFIRM_DIR=$LTX2K_CONFIRM_DIR OUT=$confirmed python3 <<'PY'
import json, os, pathlib, re, sys

env = os.environ
report = json.loads(pathlib.Path(env["REPORT"]).read_text())
flagged = sorted({
    m
    for row in report.get("rows", [])
    for m, cell in (row.get("cells") or {}).items()
    if isinstance(cell, dict) and cell.get("flag") == "regression"
})
root = pathlib.Path(env["CONFIRM_DIR"])
results = {}
for status_file in [root / "status", *sorted(root.glob("*/status"))]:
    d = status_file.parent
    machine_file = d / "machine"
    if not status_file.is_file() or not machine_file.is_file():
        continue
    machine = machine_file.read_text().strip()
    status = status_file.read_text().strip()
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", machine):
        sys.exit(f"{machine_file}: not a machine name: {machine[:40]!r}")
    if status not in ("confirmed", "not-confirmed", "nothing-flagged", "error"):
        sys.exit(f"{status_file}: unknown status {status[:40]!r}")
    summary = d / "summary.md"
    results[machine] = (status, summary.read_text(errors="replace") if summary.is_file() else "")
groups = {"confirmed": [], "unconfirmed": [], "dismissed": []}
sections = []
for m in flagged:
    status, summary = results.get(m, ("missing", ""))
    if status == "confirmed":
        groups["confirmed"].append(m)
    elif status == "not-confirmed":
        groups["dismissed"].append(m)
    else:  # error, missing, or flagged cells without a step to re-measure
        groups["unconfirmed"].append(m)
    if status != "not-confirmed":
        sections.append(summary or f"### {m}: no confirmation ({status})\n")
lines = []
if groups["confirmed"]:
    lines.append(
        "Confirmed on the GPU's own runner (bisected to one commit and re-measured as an "
        "interleaved A/B pair): " + ", ".join(groups["confirmed"]) + "."
    )
if groups["unconfirmed"]:
    lines.append(
        "Flagged, but not re-measured (the confirm job failed, did not run, or found no "
        "step to bisect): " + ", ".join(groups["unconfirmed"]) + "."
    )
if groups["dismissed"]:
    lines.append(
        "Flagged, but not confirmed when re-measured (left out of this issue): "
        + ", ".join(groups["dismissed"]) + "."
    )
body = "\n".join(lines) + "\n\n" + "\n".join(sections)
pathlib.Path(env["OUT"]).write_text(body)
sys.exit(0 if groups["confirmed"] or groups["unconfirmed"] else 3)
PY
    decided=$?
    set -e
    case $decided in
    0) ;;
    3)
        ci_log "every flagged GPU re-measured its steps and none held: no issue"
        cat "$confirmed" >&2
        exit 0
        ;;
    *) ci_die "cannot read the confirm results in $LTX2K_CONFIRM_DIR" ;;
    esac
fi
{
    echo "The nightly/push benchmark of \`${head:0:12}\` found a significant regression."
    [[ -n "${LTX2K_RUN_URL:-}" ]] && echo "Run: ${LTX2K_RUN_URL}"
    [[ -n "${LTX2K_PAGES_URL:-}" ]] && echo "Dashboard: ${LTX2K_PAGES_URL}"
    echo
    echo "This issue is updated in place by \`.github/workflows/gpu-bench.yml\`;" \
        "close it once the regression is fixed or accepted."
    echo
    if [[ -s "$confirmed" ]]; then
        echo "## Confirmation on the GPU runners"
        echo
        cat "$confirmed"
        echo
        echo "## Regression report"
        echo
    fi
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
