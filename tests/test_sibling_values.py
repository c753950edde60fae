"""The table benchmark processes forked from one parent share (ltx2k/runner/sibling_values.py)."""

from __future__ import annotations

import os

import pytest

from ltx2k.runner.sibling_values import _HEADER, SiblingValues


def _in_child(fn) -> int:
    """Run *fn* in a forked child, as asv's forkserver runs a benchmark; its exit status."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if fn() else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_value_one_child_leaves_is_read_by_a_later_sibling():
    table = SiblingValues()
    assert _in_child(lambda: table.put("time_device_cold/k/v/s", 1.25e-6)) == 0
    assert _in_child(lambda: table.put("time_device_cold/k/w/s", 2.5e-6)) == 0
    # A third child sees both, and the parent too (one set of shared pages).
    assert _in_child(lambda: table.get("time_device_cold/k/v/s") == 1.25e-6) == 0
    assert table.get("time_device_cold/k/w/s") == 2.5e-6
    assert table.get("time_device_cold/k/x/s") is None


def test_a_later_value_replaces_an_earlier_one_under_the_same_key():
    table = SiblingValues()
    assert table.put("a", 1.0) and table.put("a", 2.0)
    assert table.get("a") == 2.0


def test_another_parents_table_is_not_shared():
    one, other = SiblingValues(), SiblingValues()
    assert _in_child(lambda: one.put("a", 1.0)) == 0
    assert other.get("a") is None


def test_a_write_cut_short_reads_as_no_values_never_as_wrong_ones():
    table = SiblingValues()
    table.put("a", 1.0)
    # A process killed mid-write leaves a payload that does not match its header.
    length, crc = _HEADER.unpack_from(table._mem, 0)
    table._mem[_HEADER.size] = ord("X")
    assert table.get("a") is None
    # ... or a header that promises more than the table holds.
    _HEADER.pack_into(table._mem, 0, len(table._mem), crc)
    assert table.get("a") is None
    assert table.put("b", 2.0)  # the next writer starts a fresh table
    assert table.get("b") == 2.0 and table.get("a") is None


def test_a_full_table_refuses_the_value_and_keeps_the_others():
    table = SiblingValues(size=64)
    assert table.put("a", 1.0)
    assert not table.put("b" * 100, 2.0)
    assert table.get("a") == 1.0 and table.get("b" * 100) is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_value_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="value must be finite"):
        SiblingValues().put("a", bad)


def test_a_table_too_small_for_its_header_is_refused():
    with pytest.raises(ValueError, match="size must exceed"):
        SiblingValues(size=_HEADER.size)
