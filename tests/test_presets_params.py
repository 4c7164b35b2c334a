"""Presets reproduce published / transformers-built parameter counts exactly.

No torch or transformers here: the counts below were taken from transformers' models built on
the meta device from the real configs (tools/crosscheck/verify_presets.py re-derives them) and
from the cited papers/model cards.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from transformer_calc.model.config import ModelConfig
from transformer_calc.estimators.params import total_params

PRESETS_PATH = Path(__file__).resolve().parents[1] / "presets" / "models.yaml"
PRESETS: dict = yaml.safe_load(PRESETS_PATH.read_text())["models"]


def total(name: str) -> int:
    return total_params(ModelConfig.model_validate(PRESETS[name]["model"]))  # a multimodal preset: towers included


# (preset, exact parameter count, where the number comes from)
REFERENCE_COUNTS = [
    ("gpt2", 124_439_808, "HF-config"),
    ("gpt2-xl", 1_557_611_200, "HF-config"),
    ("llama-2-7b", 6_738_415_616, "HF-config"),
    ("llama-2-70b", 68_976_648_192, "HF-config"),
    ("falcon-7b", 6_921_720_704, "HF-config"),
    ("falcon-40b", 41_303_293_952, "HF-config"),
    ("gpt-neox-20b", 20_554_567_680, "HF-config-and-Black2022"),
    ("mistral-7b", 7_241_732_096, "HF-config"),
    ("gpt3", 174_604_259_328, "Brown2020-Table2.1-as-GPT2-config"),
]


@pytest.mark.parametrize(
    ("preset", "expected", "source"),
    REFERENCE_COUNTS,
    ids=[f"{p}-{n}-{s}" for p, n, s in REFERENCE_COUNTS],
)
def test_reference_counts(preset: str, expected: int, source: str) -> None:
    assert total(preset) == expected, f"{preset}: count_params disagrees with {source}"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_expected_params_match_count(name: str) -> None:
    expected = PRESETS[name].get("expected_params")
    if expected is None:
        pytest.skip("no expected_params")
    assert total(name) == expected


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_has_source(name: str) -> None:
    source = PRESETS[name].get("source")
    assert isinstance(source, str) and source.strip()


def test_schema_version_and_count() -> None:
    doc = yaml.safe_load(PRESETS_PATH.read_text())
    assert doc["schema_version"] == 1
    assert len(PRESETS) >= 25


def test_names_and_aliases_unique_lowercase() -> None:
    seen: dict[str, str] = {}
    for name, entry in PRESETS.items():
        for alias in [name, *entry.get("aliases", [])]:
            assert alias == alias.lower(), f"{alias!r} is not lowercase"
            assert re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", alias), f"odd characters in {alias!r}"
            assert alias not in seen, f"{alias!r} used by {seen.get(alias)} and {name}"
            seen[alias] = name


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_required_model_fields(name: str) -> None:
    model = PRESETS[name]["model"]
    for key in ("n_layers", "d_model", "n_heads", "vocab_size", "max_seq_len"):
        assert key in model, f"{name}: model.{key} missing"
