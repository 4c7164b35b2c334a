"""ModelConfig: aliases, derived defaults, validation messages, overrides re-validate."""

from __future__ import annotations

import pytest
from hypothesis import given

from transformer_calc.model.config import ModelConfig, build_model
from transformer_calc.errors import TcalcError

from conftest import model_configs

GPT2_SHAPE = {"L": 12, "D": 768, "A": 12, "V": 50257, "K": 1024}


def test_seed_letters_are_aliases():
    m = ModelConfig.model_validate(GPT2_SHAPE)
    assert (m.n_layers, m.d_model, m.n_heads, m.vocab_size, m.max_seq_len) == (12, 768, 12, 50257, 1024)


def test_defaults_derive_from_other_fields():
    m = ModelConfig.model_validate(GPT2_SHAPE)
    assert m.n_kv_heads == 12  # MHA
    assert m.head_dim == 64  # D / A
    assert m.d_ff == 3072  # E = 4 (seed "MLP")
    assert m.norm_bias is True  # LayerNorm has a bias
    assert m.qkv_bias and m.attn_out_bias and m.mlp_bias


def test_rmsnorm_has_no_bias_by_default():
    m = ModelConfig.model_validate({**GPT2_SHAPE, "norm": "rmsnorm"})
    assert m.norm_bias is False


def test_expansion_sets_d_ff_exactly():
    assert ModelConfig.model_validate({**GPT2_SHAPE, "E": 3.5}).d_ff == 2688


def test_fractional_d_ff_is_rejected():
    with pytest.raises(TcalcError, match=r"expansion E \(0.3333\) times d_model \(768\)"):
        build_model({**GPT2_SHAPE, "E": 0.3333})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({**GPT2_SHAPE, "A": 7}, r"d_model \(768\) must be divisible by n_heads \(7\)"),
        ({**GPT2_SHAPE, "n_kv_heads": 5}, r"n_heads \(12\) must be divisible by n_kv_heads \(5\)"),
        ({**GPT2_SHAPE, "L": 0}, r"n_layers \(0\): input should be greater than 0; use a positive number"),
        ({**GPT2_SHAPE, "D": -768}, r"d_model \(-768\)"),
        ({**GPT2_SHAPE, "L": 2.5}, r"n_layers \(2.5\).*whole number"),
        ({**GPT2_SHAPE, "mlp": "swish"}, r"mlp \('swish'\): input should be 'gelu', 'relu', 'swiglu', 'geglu', 'relu2', 'relu2_glu' or 'xielu'"),
        ({**GPT2_SHAPE, "n_layer": 3}, r"unknown field 'n_layer'; did you mean 'n_layers'"),
        ({"D": 768, "A": 12, "V": 10}, r"n_layers is required"),
        ({**GPT2_SHAPE, "n_experts": 2, "experts_per_token": 3}, r"experts_per_token \(3\) exceeds n_experts \(2\)"),
        ({**GPT2_SHAPE, "n_layers": 4}, r"n_layers is given twice"),
    ],
    ids=["heads-divide", "kv-divide", "zero", "negative", "float-int", "enum", "unknown-key", "missing", "moe-topk", "alias-twice"],
)
def test_validation_errors_name_field_value_and_fix(spec, message):
    with pytest.raises(TcalcError, match=message):
        build_model(spec)


def test_head_dim_lifts_divisibility():
    m = build_model({**GPT2_SHAPE, "A": 7, "head_dim": 100})
    assert m.head_dim == 100


def test_config_is_frozen():
    m = ModelConfig.model_validate(GPT2_SHAPE)
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="frozen"):
        m.n_layers = 3  # type: ignore[misc]


def test_overrides_rederive_defaults_and_revalidate():
    m = ModelConfig.model_validate(GPT2_SHAPE)
    bigger = m.with_overrides({"D": 1024, "A": 16})
    assert (bigger.head_dim, bigger.d_ff) == (64, 4096)
    with pytest.raises(ValueError):
        m.with_overrides({"A": 7})


def test_override_d_ff_replaces_expansion_and_back():
    m = ModelConfig.model_validate({**GPT2_SHAPE, "E": 2})
    assert m.with_overrides({"d_ff": 1000}).d_ff == 1000
    assert m.with_overrides({"d_ff": 1000}).with_overrides({"E": 3}).d_ff == 2304


def test_explicit_values_survive_overrides():
    m = ModelConfig.model_validate({**GPT2_SHAPE, "d_ff": 11008})
    assert m.with_overrides({"D": 1024, "A": 16}).d_ff == 11008


@given(model_configs())
def test_roundtrip_through_given_spec(m):
    assert ModelConfig.model_validate(m.given) == m
    assert ModelConfig.model_validate(m.model_dump()) == m


def test_one_whole_number_parser():
    """config.parse_whole: every integer flag and count (issue 21: one parser; issue 26: exponents
    beyond any physical count refused before computing, never a Decimal overflow)."""
    import time

    from transformer_calc.model.config import parse_count, parse_whole

    assert parse_whole("8k") == 8000 and parse_whole("8k", binary=True) == 8192
    assert parse_whole("1_000") == 1000 and parse_whole("1e3") == 1000 and parse_whole("1.5k") == 1500
    assert parse_count("1.4T") == 1_400_000_000_000 and parse_count("70B") == 70 * 10**9
    for bad in ("1e999999999", "1e100000", "9" * 40, "2.5", "lots", "1x", "-3"):
        start = time.monotonic()
        with pytest.raises(ValueError):
            parse_whole(bad)
        assert time.monotonic() - start < 0.1
