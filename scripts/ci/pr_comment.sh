#!/usr/bin/env bash
# Post, or update in place, the PR benchmark comment from pr-bench artifacts.
# Runs in the privileged workflow_run half of the PR gate, so it treats every
# artifact byte as untrusted (PR code ran on the machine that made them): the
# PR number must be digits and must belong to a PR whose commits include the
# benchmarked head; nothing from the artifacts is ever executed or evaluated.
#
# Input: $LTX2K_ARTIFACTS/*/{verdict.json,report.md} (pr_gate.sh, one dir per GPU)
# Environment:
#   GH_TOKEN            token with pull-requests: write (read by gh)
#   GH_REPO             owner/name (default $GITHUB_REPOSITORY)
#   LTX2K_ARTIFACTS     directory of downloaded artifacts (default artifacts)
#   LTX2K_RUN_HEAD_SHA  head commit of the pr-bench run (workflow_run.head_sha)
#   LTX2K_RUN_URL       link to the pr-bench run (optional)
#   LTX2K_RUN_PATH      workflow file of that run (workflow_run.path)
#   LTX2K_RUN_HEAD_REPO owner/name the run's head commit came from
#                       (workflow_run.head_repository.full_name)
#   LTX2K_COMMENT_AUTHOR  login whose comment is updated (default github-actions[bot])
#   LTX2K_DRY_RUN=1     print the comment instead of posting it
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# shellcheck source=scripts/ci/lib.sh
source scripts/ci/lib.sh

artifacts=${LTX2K_ARTIFACTS:-artifacts}
repo=${GH_REPO:-${GITHUB_REPOSITORY:-}}
run_head=${LTX2K_RUN_HEAD_SHA:-}
author=${LTX2K_COMMENT_AUTHOR:-github-actions[bot]}
marker='<!-- ltx2k-pr-bench -->'
[[ -n "$repo" ]] || ci_die "GH_REPO (owner/name) is not set"
[[ "$run_head" =~ ^[0-9a-f]{40}$ ]] || ci_die "LTX2K_RUN_HEAD_SHA: not a commit hash: '$run_head'"
# The trigger matches workflows by *name*: any workflow a PR adds and calls
# "PR benchmark" would fire it. Only the gate's own file counts.
gate=.github/workflows/pr-bench.yml
run_path=${LTX2K_RUN_PATH:-}
[[ "$run_path" == "$gate" ]] ||
    ci_die "LTX2K_RUN_PATH: the triggering run is '$run_path', not the PR gate $gate"
head_repo=${LTX2K_RUN_HEAD_REPO:-}
[[ "$head_repo" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] ||
    ci_die "LTX2K_RUN_HEAD_REPO: not an owner/name: '$head_repo'"
# A fork's report.md is posted as inert text (a code block): no links, images or
# formatting from a repository we do not control.
fork=0
[[ "$head_repo" == "$repo" ]] || fork=1

shopt -s nullglob
verdicts=("$artifacts"/*/verdict.json)
if ((${#verdicts[@]} == 0)); then
    ci_log "no verdict.json under $artifacts/: nothing was benchmarked, nothing to post"
    exit 0
fi

body=$(mktemp)
trap 'rm -f "$body"' EXIT
# Python for the JSON and the size cap; it reads the artifacts as data only.
run_url=${LTX2K_RUN_URL:-}
[[ -z "$run_url" || "$run_url" =~ ^https://[A-Za-z0-9./_-]+$ ]] ||
    ci_die "LTX2K_RUN_URL: not a plain https URL: '$run_url'"
pr=$(MARKER=$marker RUN_HEAD=$run_head RUN_URL=$run_url BODY=$body FORK=$fork \
    python3 - "${verdicts[@]}" <<'PY'
import json, os, pathlib, re, sys

# GitHub takes up to 65536 characters, but report.md comes from a machine that ran
# PR code: a reviewer should not have to scroll through that much of it. The full
# reports stay in the run's artifacts.
LIMIT = 20000
ICON = {"ok": "✅", "insufficient": "⚪", "regressed": "❌", "error": "💥"}
env = os.environ
rows, sections, prs = [], [], set()
for path in map(pathlib.Path, sys.argv[1:]):
    v = json.loads(path.read_text())
    pr, head, verdict = v.get("pr"), str(v.get("head")), str(v.get("verdict"))
    if not isinstance(pr, int) or isinstance(pr, bool) or pr <= 0:
        sys.exit(f"{path}: 'pr' is not a PR number: {pr!r}")
    if head != env["RUN_HEAD"]:
        sys.exit(f"{path}: head {head!r} is not the run's head {env['RUN_HEAD']!r}")
    if verdict not in ICON:
        sys.exit(f"{path}: unknown verdict {verdict!r}")
    prs.add(pr)
    gpu = "".join(c for c in str(v.get("gpu")) if c.isalnum() or c in "-_.")[:40]
    rows.append(f"| {gpu} | {ICON[verdict]} {verdict} |")
    report = path.with_name("report.md")
    text = report.read_text(errors="replace") if report.is_file() else "(no report.md)"
    # No @-mentions from untrusted text: they would notify whoever they name.
    text = re.sub(r"@(?=[A-Za-z0-9])", "@\u200b", text)
    if env["FORK"] == "1":
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
        text = f"{gpu} report (from a fork, shown as text):\n\n{fence}text\n{text}\n{fence}"
    sections.append(text)
if len(prs) != 1:
    sys.exit(f"artifacts name several PRs: {sorted(prs)}")
head = [
    env["MARKER"],
    "## Benchmark gate",
    "",
    f"Head `{env['RUN_HEAD'][:12]}`" + (f" ([run]({env['RUN_URL']}))" if env["RUN_URL"] else "") + ".",
    "",
    "| GPU | verdict |",
    "| --- | --- |",
    *sorted(rows),
    "",
]
foot = [
    "",
    "_Benchmarks run only while the `benchmark` label is on the PR. For a PR from a fork, "
    "a maintainer must remove and re-apply the label after every new push._",
]
NOTE = "\n\n(truncated to keep this comment under {} characters; the full report is in the run's artifacts)\n"
room = LIMIT - len("\n".join(head + foot)) - 200
parts = []
for s in sections:
    note = NOTE.format(LIMIT)
    chunk = s if len(s) <= room else s[: max(room - len(note), 0)] + note
    room -= len(chunk)
    parts.append(chunk)
pathlib.Path(env["BODY"]).write_text("\n".join(head + parts + foot) + "\n")
print(prs.pop())
PY
)

# The PR number came from an artifact: accept it only if the benchmarked commit
# is one of that PR's commits, so a doctored artifact cannot write to another PR.
pr_head=$(gh api "repos/$repo/pulls/$pr" --jq .head.sha)
if [[ "$pr_head" != "$run_head" ]] &&
    ! gh api --paginate "repos/$repo/pulls/$pr/commits" --jq '.[].sha' | grep -qx "$run_head"; then
    ci_die "PR #$pr does not contain the benchmarked commit ${run_head:0:12}"
fi
pr_repo=$(gh api "repos/$repo/pulls/$pr" --jq .head.repo.full_name)
[[ "$pr_repo" == "$head_repo" ]] ||
    ci_die "PR #$pr comes from '$pr_repo', but the benchmarked run's head is from '$head_repo'"
# A PR that edits the gate ran its own version of it (pull_request runs the PR's
# workflow file): its verdicts are the PR's say-so, not the gate's.
if gh api --paginate "repos/$repo/pulls/$pr/files" --jq '.[].filename' | grep -qxF "$gate"; then
    ci_die "PR #$pr changes $gate, so its run is not the gate's: nothing posted"
fi

if [[ "${LTX2K_DRY_RUN:-0}" == 1 ]]; then
    ci_log "dry run: comment for PR #$pr follows"
    cat "$body"
    exit 0
fi

comment_id=$(gh api --paginate "repos/$repo/issues/$pr/comments" \
    --jq ".[] | select(.user.login == \"$author\" and (.body | contains(\"$marker\"))) | .id" |
    head -n 1)
if [[ -n "$comment_id" ]]; then
    gh api --method PATCH "repos/$repo/issues/comments/$comment_id" -F "body=@$body" >/dev/null
    ci_log "updated comment $comment_id on PR #$pr"
else
    gh api --method POST "repos/$repo/issues/$pr/comments" -F "body=@$body" >/dev/null
    ci_log "commented on PR #$pr"
fi
