#!/usr/bin/env bash
# Quick asv run in the Triton interpreter (no GPU) and a dashboard of it in html/.
# It proves on every push that the suite, `ltx2k run` and `ltx2k publish` work
# end to end; the numbers themselves mean nothing (interpreter, --quick).
#
# Environment:
#   LTX2K_RANGE     asv commit range (default 'HEAD^!': this commit only)
#   LTX2K_RUN_ARGS  extra `asv run` arguments, split on whitespace (default --quick)
#   LTX2K_RESULTS   results directory (default results)
#   LTX2K_HTML      dashboard directory (default html)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# shellcheck source=scripts/ci/lib.sh
source scripts/ci/lib.sh

results=${LTX2K_RESULTS:-results}
html=${LTX2K_HTML:-html}
range=${LTX2K_RANGE:-HEAD^!}
# Unset means --quick; set-but-empty means a full run.
run_args_text=${LTX2K_RUN_ARGS-"--quick"}
read -r -a run_args <<<"$run_args_text"

ci_bootstrap
machine=$(ltx2k machine --write --name-only)
ci_log "machine '$machine', range '$range'"
ltx2k run -- "${run_args[@]}" "$range"

# asv publish draws only commits on asv.conf.json's branches (main). This job
# also runs on PRs (a detached merge commit) and on pushes to other branches,
# whose commits are on no local main: asv would leave them off every graph
# ("Couldn't find ... in branches") and the artifact would show no history.
# So the dashboard follows this checkout's own history, HEAD, through a copy
# of the config. The copy sits next to the original because asv resolves the
# config's paths and its ".ltx2k.runner.asv_env" plugin from the config's folder.
conf=$(mktemp ./.asv-dashboard.XXXXXX)
trap 'rm -f "$conf"' EXIT
"$ci_python" - "$conf" <<'PY'
import json, sys
from asv import util

conf = util.load_json("asv.conf.json", js_comments=True)
conf["branches"] = ["HEAD"]
with open(sys.argv[1], "w") as f:
    json.dump(conf, f, indent=2)
PY
ltx2k publish --config "$conf" --results "$results" --html "$html"
[[ -f "$html/index.html" ]] || ci_die "ltx2k publish wrote no $html/index.html"
ci_log "dashboard in $html/"
