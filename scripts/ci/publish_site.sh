#!/usr/bin/env bash
# Assemble every runner's results from the store and build the dashboard in html/.
#
# Environment:
#   LTX2K_STORE        git URL or path of the store (default: this GitHub repository)
#   LTX2K_STORE_TOKEN  read token for a private store; only `ltx2k store` sees it
#   LTX2K_RESULTS      results directory (default results)
#   LTX2K_HTML         dashboard directory (default html)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# shellcheck source=scripts/ci/lib.sh
source scripts/ci/lib.sh
ci_take_store_token "$@"

store=$(ci_store_url)
results=${LTX2K_RESULTS:-results}
html=${LTX2K_HTML:-html}

ci_bootstrap
ci_with_store_auth ltx2k store pull --store "$store" --dest "$results"
ltx2k publish --results "$results" --html "$html"
[[ -f "$html/index.html" ]] || ci_die "ltx2k publish wrote no $html/index.html"
ci_log "dashboard of $(find "$results" -mindepth 2 -name machine.json | wc -l) machine(s) in $html/"
