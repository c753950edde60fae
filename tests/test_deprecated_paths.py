"""The modules' old paths, ``ltx2k.reference`` and ``ltx2k.shapes``, still import.

Each is the very module at its new path (``ltx2k.workload.reference``,
``ltx2k.workload.shapes``), whichever way it is reached, and warns exactly once per
process, at the line that first used the old path. Every check runs in a fresh
interpreter: "once per process" needs a process that has not imported them yet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

MOVED = {
    "reference": ("ltx2k.workload.reference", "split_rotary_reference"),
    "shapes": ("ltx2k.workload.shapes", "ROPE_SHAPES"),
}
# Ways to reach a module by its old path; "{name}" is "reference" or "shapes".
STYLES = {
    "import": "import ltx2k.{name}",
    "from-import": "from ltx2k.{name} import {attr}",
    "from-package": "from ltx2k import {name}",
    "attribute": "import ltx2k; ltx2k.{name}.{attr}",
    "import_module": "importlib.import_module('ltx2k.{name}')",
}

REPORT = """
report = {"warnings": [
    [w.category.__name__, str(w.message), w.filename, w.lineno] for w in caught
]}
for name, (new, attr) in MOVED.items():
    old = sys.modules["ltx2k." + name]
    target = importlib.import_module(new)
    setattr(old, "_probe", name)  # state set through the old path, read through the new
    report[name] = {
        "same": old is target and getattr(ltx2k, name) is target,
        "attr": getattr(old, attr) is getattr(target, attr),
        "state": getattr(target, "_probe", None) == name,
    }
print(json.dumps(report))
"""


def _env() -> dict[str, str]:
    # The interpreter's default warning filters, whatever the caller's.
    return {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=_env(), timeout=120
    )


def _statement(style: str, name: str) -> str:
    return STYLES[style].format(name=name, attr=MOVED[name][1])


@pytest.mark.parametrize("first", STYLES)
def test_old_path_is_the_new_module_and_warns_once(tmp_path, first):
    lines = [
        "import importlib, json, sys, warnings",
        f"MOVED = {MOVED!r}",
        "caught = []",
        "warnings.simplefilter('always')",  # no deduplication but ours
        "warnings.showwarning = lambda *a, **k: caught.append(warnings.WarningMessage(*a))",
    ]
    first_line = {}
    for name in MOVED:
        first_line[name] = len(lines) + 1
        lines.append(_statement(first, name))
    for _ in range(2):  # every way again, twice: no second warning
        lines += [_statement(style, name) for style in STYLES for name in MOVED]
    lines.append("import ltx2k")
    script = tmp_path / "importer.py"
    script.write_text("\n".join(lines) + "\n" + REPORT)

    done = _run([str(script)])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    for name, (new, _) in MOVED.items():
        assert report[name] == {"same": True, "attr": True, "state": True}
        ours = [w for w in report["warnings"] if f"ltx2k.{name} moved" in w[1]]
        assert ours == [
            [
                "DeprecationWarning",
                f"ltx2k.{name} moved to {new}; import that instead",
                str(script),
                first_line[name],
            ]
        ]
    assert len(report["warnings"]) == len(MOVED), report["warnings"]


def test_default_filters_show_it_once_to_a_script():
    # DeprecationWarning is shown by default only where __main__ triggers it: that is why
    # the warning must point at the importing line, not inside the package.
    code = (
        "import ltx2k.shapes\nimport ltx2k.shapes\nfrom ltx2k import shapes\nimport ltx2k.reference"
    )
    done = _run(["-c", code])
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("DeprecationWarning") == 2, done.stderr
    assert "<string>:1: DeprecationWarning: ltx2k.shapes moved to ltx2k.workload.shapes" in (
        done.stderr
    )
    assert "<string>:4: DeprecationWarning: ltx2k.reference moved to" in done.stderr


def test_new_paths_do_not_warn():
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "import ltx2k.workload.reference, ltx2k.workload.shapes\n"
        "from ltx2k.workload import reference, shapes\n"
        "import ltx2k; ltx2k.apply_ltx2_split_rotary_emb; ltx2k.__version__"
    )
    done = _run(["-c", code])
    assert done.returncode == 0, done.stderr
