"""Bad input to `ltx2k machine` and `ltx2k shapes` is one error line, never a traceback,
and leaves every file as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ltx2k import cli
from ltx2k.kernels import adaln
from ltx2k.workload import record, shapes


def _main(capsys, *argv) -> tuple[int, str]:
    rc = cli.main(list(argv))
    err = capsys.readouterr().err
    return rc, err


def _one_error_line(rc: int, err: str, *parts: str) -> None:
    assert rc == cli.EXIT_ERROR, err
    assert err.startswith("ltx2k: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for part in parts:
        assert part in err, (part, err)


# --- ltx2k machine --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,what",
    [
        ("[1, 2]", "holds a JSON array"),
        ('"h200"', "holds a JSON string"),
        ("3", "holds a JSON number"),
        ("null", "holds a JSON null"),
        ('{"version": 1, "h200": [1]}', "entry 'h200' is a JSON array"),
    ],
)
def test_a_machine_file_that_is_not_asvs_is_refused_and_kept(tmp_path, capsys, text, what):
    path = tmp_path / "m.json"
    path.write_text(text)
    rc, err = _main(capsys, "machine", "--write", "--path", str(path))
    _one_error_line(rc, err, f"machine file {path}", what, "fix or remove it")
    assert path.read_text() == text


def test_machine_path_without_write_is_refused(tmp_path, capsys):
    path = tmp_path / "m.json"
    rc, err = _main(capsys, "machine", "--path", str(path))
    _one_error_line(rc, err, "--path", str(path), "--write")
    assert not path.exists()


def test_an_empty_machine_path_is_refused_not_the_default(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    rc, err = _main(capsys, "machine", "--write", "--path", "")
    _one_error_line(rc, err, "--path must name a file")
    assert list(tmp_path.iterdir()) == []


# --- ltx2k shapes ---------------------------------------------------------------------------


def _data_with(tmp_path, edit) -> str:
    data = json.loads(shapes.DATA_FILE.read_text())
    edit(data)
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(data))
    return str(path)


def _first(**fields):
    return lambda d: d["shapes"][0].update(fields)


@pytest.mark.parametrize(
    "edit,message",
    [
        (_first(kernel=["split_rope"]), "shapes[0]: kernel must be a string, got list"),
        (_first(kernel={"a": 1}), "shapes[0]: kernel must be a string, got dict"),
        (_first(layout=["token_major"]), "shapes[0]: layout must be one of"),
        (_first(runs_on=["gpu"]), "shapes[0]: runs_on must be one of"),
        (_first(source=["recorded: x"]), "shapes[0]: source must be a string"),
        (
            lambda d: d["metric_shapes"]["kernel"]["split_rope"].append(["B1"]),
            "metric_shapes.kernel.split_rope: labels must be strings, got list",
        ),
    ],
)
def test_a_data_file_field_of_the_wrong_type_is_one_line(tmp_path, capsys, edit, message):
    path = _data_with(tmp_path, edit)
    rc, err = _main(capsys, "shapes", "--data", path)
    _one_error_line(rc, err, f"{path}: {message}")


def test_data_given_before_and_after_add_must_agree(tmp_path, capsys):
    data = tmp_path / "shapes.json"
    shutil.copy(shapes.DATA_FILE, data)
    before = data.read_bytes()
    rc, err = _main(
        capsys, "shapes", "--data", "other.json", "add", "rec.json", "--data", str(data)
    )
    _one_error_line(rc, err, "--data given twice", "'other.json'", repr(str(data)))
    assert data.read_bytes() == before


@pytest.mark.parametrize(
    "fields,parts",
    [
        ({"B": 10**30}, ["B*S", str(adaln.MAX_PROGRAMS)]),
        ({"S": 2**62}, ["B*S", str(adaln.MAX_PROGRAMS)]),
        # few enough tokens for the grid, but x [B, S, H*D] past any GPU's memory
        ({"B": 1, "S": 2**30, "H": 1024, "D": 512}, ["[B, S, H*D]", str(record.MAX_TENSOR_BYTES)]),
    ],
)
def test_a_data_file_shape_past_what_shapes_add_allows_is_refused(tmp_path, capsys, fields, parts):
    path = _data_with(tmp_path, _first(**fields))
    rc, err = _main(capsys, "shapes", "--data", path)
    _one_error_line(rc, err, f"{path}: shapes[0]: ", *parts)
    # appending to such a file is refused too, and writes nothing
    before = Path(path).read_bytes()
    rc, err = _main(capsys, "shapes", "add", "no-such-record.json", "--data", path)
    _one_error_line(rc, err, f"{path}: shapes[0]: ", *parts)
    assert Path(path).read_bytes() == before


def test_the_shipped_data_file_is_within_what_shapes_add_allows():
    """The suite loads the data file without check_runnable (see its docstring): the
    committed file is held to it here, every shape of every list."""
    from ltx2k.commands.shapes import check_runnable
    from ltx2k.workload import shapes

    suite = shapes.load(shapes.DATA_FILE, check_runnable)
    assert suite.shapes == shapes.SHAPES
