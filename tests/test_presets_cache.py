"""The JSON cache of parsed preset YAML: same data, keyed by the YAML bytes, never required."""

from __future__ import annotations

import json

from transformer_calc import presets


def fresh(monkeypatch, tmp_path, **env):
    presets._load_data.cache_clear()
    monkeypatch.setenv("TCALC_CACHE_DIR", str(tmp_path))
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def test_cache_holds_exactly_the_yaml_data(monkeypatch, tmp_path):
    from transformer_calc.presets import data_dir, safe_load_yaml

    fresh(monkeypatch, tmp_path)
    first = presets._load_data("models.yaml")
    (cached,) = tmp_path.glob("models-*.json")
    assert json.loads(cached.read_text()) == first
    assert first == safe_load_yaml((data_dir() / "models.yaml").read_text(), "models.yaml")
    presets._load_data.cache_clear()
    assert presets._load_data("models.yaml") == first  # second process: read from the cache


def test_damaged_cache_is_ignored_and_rewritten(monkeypatch, tmp_path):
    fresh(monkeypatch, tmp_path)
    good = presets._load_data("hardware.yaml")
    (cached,) = tmp_path.glob("hardware-*.json")
    cached.write_text("{not json")
    presets._load_data.cache_clear()
    assert presets._load_data("hardware.yaml") == good
    assert json.loads(cached.read_text()) == good


def test_key_changes_with_the_bytes():
    a = presets._cache_path("models.yaml", b"models: {}\n")
    b = presets._cache_path("models.yaml", b"models: {a: 1}\n")
    assert a is not None and b is not None and a != b


def test_cache_can_be_disabled_or_unwritable(monkeypatch, tmp_path):
    fresh(monkeypatch, tmp_path, TCALC_NO_CACHE="1")
    assert presets._cache_path("models.yaml", b"x") is None
    assert presets._load_data("models.yaml")["models"]
    assert not list(tmp_path.iterdir())
    presets._load_data.cache_clear()
    monkeypatch.delenv("TCALC_NO_CACHE")
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TCALC_CACHE_DIR", str(blocker / "sub"))  # cannot be created
    assert presets._load_data("models.yaml")["models"]
    presets._load_data.cache_clear()
