"""Issue 22: the 2025-26 families' config.json import, safe model_type hints, non-finite literals.

Parameter counts are compared with transformers 5.23's counts stored in tests/data/hf (written by
tools/crosscheck/hf_params.py --write-fixtures; tests/test_hf.py reads every fixture): this file
holds the hand-checkable goldens and the refusals.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from transformer_calc.errors import TcalcError
from transformer_calc.sources.files import parse_json
from transformer_calc.sources.hf import (
    OTHER_ARCHITECTURES,
    SUPPORTED_MODEL_TYPES,
    UNREPRESENTABLE,
    from_hf_config,
    type_hint,
)
from transformer_calc.cli import run

DATA = Path(__file__).parent / "data"
TRANSFORMERS_TYPES = [
    line.strip() for line in (DATA / "transformers_model_types.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]


# ------------------------------------------------------------------ 1. Infinity / NaN in a config.json
NEMOTRON_H = '{"model_type": "nemotron_h", "hidden_size": 4096, "time_step_limit": [0.0, Infinity]}'


def test_config_json_accepts_python_non_finite_literals():
    # transformers reads config.json with json.loads, which takes Infinity, -Infinity and NaN
    cfg = parse_json('{"a": [0.0, Infinity], "b": -Infinity, "c": NaN}', "config.json", non_finite=True)
    assert cfg["a"][1] == float("inf") and cfg["b"] == float("-inf") and cfg["c"] != cfg["c"]


def test_other_json_still_refuses_non_finite_literals():
    with pytest.raises(TcalcError, match="Infinity is not a JSON number"):
        parse_json('{"a": Infinity}', "index.json")


def test_nemotron_h_with_infinity_is_refused_by_its_model_type(tmp_path, capsys):
    # Nemotron 3 Super publishes time_step_limit [0.0, Infinity]: the model_type must be read first
    path = tmp_path / "config.json"
    path.write_text(NEMOTRON_H)
    assert run(["params", str(path)]) == 2
    err = capsys.readouterr().err
    assert "model_type 'nemotron_h' is not a plain transformer" in err and "Mamba-2" in err
    assert "Infinity" not in err


def test_non_finite_values_read_as_unused_fields_do_not_matter(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "num_hidden_layers": 2, "vocab_size": 100, "hidden_size": 64, '
                    '"num_attention_heads": 4, "intermediate_size": 128, "rope_theta": Infinity, "x": NaN}')
    assert run(["params", str(path), "-f", "json"]) == 0
    assert '"total"' in capsys.readouterr().out


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "intermediate_size", "head_dim"])
def test_a_non_finite_size_is_one_clear_error(key):
    with pytest.raises(TcalcError, match=rf"{key} \((inf|-inf|nan)\) must be a whole number; fix {key}"):
        from_hf_config({"model_type": "llama", key: float("inf")})


# ------------------------------------------------------------------ 2. safe did-you-mean
@pytest.mark.parametrize("typed, meant", [
    ("lama", "llama"), ("Llama", "llama"), ("qwen2-moe", "qwen2_moe"), ("deepseekv3", "deepseek_v3"),
    ("GPT-NeoX", "gpt_neox"), ("mixtrl", "mixtral"),
])
def test_spelling_slips_are_hinted(typed, meant):
    assert type_hint(typed) == meant


@pytest.mark.parametrize("other", ["qwen3_5", "deepseek_v32_exp", "gemma4", "olmo", "granitemoe", "glm4", "mpt",
                                   "qwen4", "deepseek_v2", "starcoder", "phimoe"])
def test_another_version_or_family_is_never_hinted(other):
    assert type_hint(other) is None


def test_no_transformers_model_type_is_hinted_to_another_count():
    """Every model_type transformers 5.23 knows is supported, refused by name, or refused without a
    did-you-mean (issue 22: qwen3_5 -> qwen3, deepseek_v32 -> deepseek_v3, gemma4 -> gemma were wrong)."""
    assert len(TRANSFORMERS_TYPES) > 700
    for model_type in TRANSFORMERS_TYPES:
        if model_type in SUPPORTED_MODEL_TYPES:
            continue
        with pytest.raises(TcalcError) as err:
            from_hf_config({"model_type": model_type})
        assert "did you mean" not in str(err.value), model_type


@pytest.mark.parametrize("model_type", sorted({*UNREPRESENTABLE, *OTHER_ARCHITECTURES}))
def test_known_but_refused_types_say_what_is_missing(model_type):
    with pytest.raises(TcalcError) as err:
        from_hf_config({"model_type": model_type})
    reason = UNREPRESENTABLE.get(model_type) or OTHER_ARCHITECTURES[model_type]
    assert reason in str(err.value) and f"'{model_type}'" in str(err.value)
