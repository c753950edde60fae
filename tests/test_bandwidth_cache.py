"""The copy bandwidth cache: looked up without measuring, measured once, never half-written."""

import json

import pytest

from ltx2k.measure import bandwidth


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "copy_bandwidth.json"
    monkeypatch.setattr(bandwidth, "cache_path", lambda: path)
    return path


def test_a_lookup_never_measures_and_answers_none_until_a_value_is_cached(cache, monkeypatch):
    measured = []
    monkeypatch.setattr(
        bandwidth, "measure_copy_bandwidth", lambda on_gpu: measured.append(1) or 5e9
    )
    assert bandwidth.cached_copy_bandwidth(False) is None
    assert measured == []
    assert bandwidth.copy_bandwidth(False) == 5e9
    assert bandwidth.cached_copy_bandwidth(False) == 5e9
    assert bandwidth.copy_bandwidth(False) == 5e9
    assert measured == [1]  # measured once, then read from the cache
    assert bandwidth.copy_bandwidth(False, refresh=True) == 5e9
    assert measured == [1, 1]


@pytest.mark.parametrize(
    "text", ["", "not json", "[1, 2]", '{"%s": {"bytes_per_s": 0}}', '{"%s": {"bytes_per_s": -3}}']
)
def test_a_bad_or_foreign_cache_reads_as_nothing_and_is_replaced(cache, monkeypatch, text):
    key = bandwidth._device_key(False)
    cache.write_text(text.replace("%s", key))
    assert bandwidth.cached_copy_bandwidth(False) is None
    monkeypatch.setattr(bandwidth, "measure_copy_bandwidth", lambda on_gpu: 7e9)
    assert bandwidth.copy_bandwidth(False) == 7e9
    assert json.loads(cache.read_text())[key]["bytes_per_s"] == 7e9
    assert list(cache.parent.glob("*.tmp")) == []


def test_another_devices_entry_is_kept(cache, monkeypatch):
    cache.write_text(json.dumps({"cuda:other GPU:uuid": {"bytes_per_s": 1e12}}))
    assert bandwidth.cached_copy_bandwidth(False) is None
    monkeypatch.setattr(bandwidth, "measure_copy_bandwidth", lambda on_gpu: 7e9)
    bandwidth.copy_bandwidth(False)
    assert json.loads(cache.read_text())["cuda:other GPU:uuid"] == {"bytes_per_s": 1e12}
