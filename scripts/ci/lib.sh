# shellcheck shell=bash
# Helpers shared by scripts/ci/*.sh. Sourced, never executed.
#
# Every CI script takes its inputs from the environment (LTX2K_*) so that the
# workflow YAML stays a list of `bash scripts/ci/X.sh` calls and the same
# script runs unchanged on a laptop, a fake CPU runner or a GPU runner.

ci_log() { printf '[%s] %s\n' "${0##*/}" "$*" >&2; }
ci_die() {
    ci_log "error: $*"
    exit 1
}

# ci_output KEY VALUE: a step output for later `if:` conditions; a no-op locally.
ci_output() {
    if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
        printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"
    fi
}

# ci_summary FILE: append a markdown file to the job summary page; a no-op locally.
ci_summary() {
    if [[ -n "${GITHUB_STEP_SUMMARY:-}" && -f "$1" ]]; then
        cat "$1" >>"$GITHUB_STEP_SUMMARY"
    fi
}

# ci_bootstrap: install ltx2k with scripts/bootstrap.sh and put the python it
# chose first on PATH, so `ltx2k` and `asv` are that python's. On a GPU runner
# LTX2K_PYTHON (the python with the preinstalled torch) and LTX2K_WHEELHOUSE
# (offline wheels) come from the runner's .env (docs/runners.md).
# LTX2K_SKIP_BOOTSTRAP=1 skips the install, for machines that already have it
# and for the tests, which put fake `ltx2k`/`asv`/`gh` executables on PATH.
# ci_python is that python, for the scripts' own python snippets (asv's among
# them): with the install skipped, LTX2K_PYTHON, else python3.
# shellcheck disable=SC2034 # read by the scripts that source this file
ci_python=${LTX2K_PYTHON:-python3}
ci_bootstrap() {
    if [[ "${LTX2K_SKIP_BOOTSTRAP:-0}" != 1 ]]; then
        local args=() py bindir
        if [[ -n "${LTX2K_WHEELHOUSE:-}" ]]; then
            args=(--wheelhouse "$LTX2K_WHEELHOUSE")
        fi
        # bootstrap.sh prints the python to use on its last line.
        py=$(bash scripts/bootstrap.sh "${args[@]}" | tail -n 1)
        bindir=$("$py" -c 'import sysconfig; print(sysconfig.get_path("scripts"))') ||
            ci_die "scripts/bootstrap.sh named an unusable python: '$py'"
        PATH="$bindir:$PATH"
        # shellcheck disable=SC2034 # as above
        ci_python=$py
    fi
    command -v ltx2k >/dev/null || ci_die "ltx2k is not on PATH (did scripts/bootstrap.sh run?)"
}

# ci_asv_env MACHINE: the environment `ltx2k run` gives asv (ltx2k/runner/asv_run.py),
# for the asv commands it does not wrap (continuous, find).
ci_asv_env() {
    # forkserver launches: torch must not initialise CUDA before the fork.
    export PYTORCH_NVML_BASED_CUDA_CHECK=${PYTORCH_NVML_BASED_CUDA_CHECK:-1}
    if [[ "$1" == cpu-interpreter ]]; then
        export TRITON_INTERPRET=1
    fi
}

# ci_store_url: the results store. Default: the asv-results branch of this very
# GitHub repository, so a fork or a new deployment needs no configuration.
ci_store_url() {
    if [[ -n "${LTX2K_STORE:-}" ]]; then
        printf '%s\n' "$LTX2K_STORE"
    elif [[ -n "${GITHUB_REPOSITORY:-}" ]]; then
        printf '%s/%s.git\n' "${GITHUB_SERVER_URL:-https://github.com}" "$GITHUB_REPOSITORY"
    else
        ci_die "LTX2K_STORE is not set (a git URL or path of the results store, e.g. /tmp/bare.git)"
    fi
}

# The store token lives in a shell variable, not in the environment: the
# benchmarks that `ltx2k run` starts (and anything they import) inherit the
# environment, and they have no business with a token that can push.
# `unset` is not enough: /proc/<pid>/environ keeps what the process was started
# with, and every process this script starts can read it. So the script starts
# again (same pid, exec) from an environment without the token, which it reads
# back from file descriptor 3. Call it as `ci_take_store_token "$@"` before the
# script does anything; $0 must still name the script then (run it from the
# repository root, as the workflows do, or by absolute path).
_ci_store_token=""
ci_take_store_token() {
    if [[ -n "${LTX2K_STORE_TOKEN+set}" ]]; then
        local token=$LTX2K_STORE_TOKEN
        [[ -f "$0" ]] || ci_die "cannot start $0 again without LTX2K_STORE_TOKEN"
        exec env -u LTX2K_STORE_TOKEN LTX2K_STORE_TOKEN_FD=3 bash "$0" "$@" 3<<<"$token"
    fi
    if [[ "${LTX2K_STORE_TOKEN_FD:-}" == 3 ]]; then
        IFS= read -r _ci_store_token <&3 || true
        exec 3<&-
        unset LTX2K_STORE_TOKEN_FD
    fi
}

# ci_with_store_auth CMD...: run CMD with git credentials for the store that
# CMD's process tree alone sees. GIT_CONFIG_COUNT (git >= 2.31) injects the same
# extraheader actions/checkout would persist in .git/config, without writing
# it anywhere a later job on a long-lived self-hosted runner could read it.
ci_with_store_auth() {
    if [[ -z "$_ci_store_token" ]]; then
        "$@"
        return
    fi
    local server=${GITHUB_SERVER_URL:-https://github.com} basic
    basic=$(printf 'x-access-token:%s' "$_ci_store_token" | base64 | tr -d '\n')
    if [[ "${GITHUB_ACTIONS:-}" == true ]]; then
        echo "::add-mask::$basic"
    fi
    env GIT_CONFIG_COUNT=1 \
        GIT_CONFIG_KEY_0="http.${server}/.extraheader" \
        GIT_CONFIG_VALUE_0="AUTHORIZATION: basic $basic" \
        "$@"
}

# ci_commit REF NAME: the full hash of REF, or die naming the input.
ci_commit() {
    local ref=$1 name=$2
    # Refuse option-like or odd refs before git sees them: inputs can come from
    # workflow_dispatch forms.
    [[ "$ref" =~ ^[A-Za-z0-9][A-Za-z0-9._/~^-]*$ ]] || ci_die "$name: not a git revision: '$ref'"
    git rev-parse --verify --quiet "${ref}^{commit}" || ci_die "$name: unknown commit '$ref'"
}

# ci_default_branch_commit COMMIT NAME: die unless COMMIT is reachable from the
# default branch. A trusted runner holds the store's write token and measures
# whatever code it checks out, so it runs only commits that were reviewed and
# merged, never one that exists only on a feature branch.
ci_default_branch_commit() {
    local commit=$1 name=$2 branch=${LTX2K_DEFAULT_BRANCH:-main} ref
    [[ "$branch" =~ ^[A-Za-z0-9][A-Za-z0-9._/-]*$ ]] ||
        ci_die "LTX2K_DEFAULT_BRANCH: not a branch name: '$branch'"
    ref=refs/remotes/origin/$branch
    git rev-parse --verify --quiet "$ref" >/dev/null || ref=refs/heads/$branch
    git rev-parse --verify --quiet "$ref" >/dev/null ||
        ci_die "default branch '$branch' is not in this checkout (fetch it, fetch-depth: 0)"
    git merge-base --is-ancestor "$commit" "$ref" ||
        ci_die "$name: commit ${commit:0:12} is not on the default branch '$branch'; trusted runners measure merged code only"
}
