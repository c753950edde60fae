"""The README's main job end to end on this machine: gate, asv run, store, regress, publish.

Runs in a scratch clone (asv needs real commits), on the CPU interpreter when
there is no GPU. It is the same code path `scripts/main.sh` takes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_main_job_publishes_a_dashboard(tmp_path):
    clone = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    store = tmp_path / "store.git"
    proc = subprocess.run(
        [sys.executable, "-m", "ltx2k.cli", "all", "--store", str(store), "--commits", "HEAD^!"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode in (0, 2), proc.stdout[-3000:] + proc.stderr[-3000:]
    for stage in ("1/5", "2/5", "3/5", "4/5", "5/5"):
        assert f"[ltx2k all] {stage}" in proc.stderr
    html = clone / "html"
    assert (html / "index.html").is_file() and (html / "summary.html").is_file()
    assert (html / "regress.md").read_text().strip()
    # The terminal gets a short summary; the full Markdown table is the file above.
    assert f"full report (Markdown): {Path('html') / 'regress.md'}" in proc.stdout
    assert "|---" not in proc.stdout and "<details>" not in proc.stdout
    # the store's branch now holds this machine's results for HEAD
    head = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    files = subprocess.run(
        ["git", "--git-dir", str(store), "ls-tree", "-r", "--name-only", "asv-results"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert any(f.startswith("results/") and head[:8] in f for f in files.splitlines()), files
