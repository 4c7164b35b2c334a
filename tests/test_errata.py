"""Seed slips (docs/seed-errata.md) that touch tcalc's code paths: tcalc gives the corrected value."""

from __future__ import annotations

import pytest

from transformer_calc.model.config import ModelConfig
from transformer_calc.estimators.params import count_params

GPT_NEO_1_3B = {  # seed 001 l.82-99 layer list: q/k/v without bias, out_proj with bias
    "n_layers": 24, "d_model": 2048, "n_heads": 16, "vocab_size": 50257, "max_seq_len": 2048,
    "qkv_bias": False, "attn_out_bias": True, "mlp_bias": True,
}


def test_arch1_embeddings_counted_once_not_per_layer():
    """ARCH-1: (V+K)·D once; adding layers adds no embedding parameters."""
    m = ModelConfig.model_validate({"L": 2, "D": 8, "A": 2, "V": 10, "K": 6})
    p1, p2 = count_params(m), count_params(m.with_overrides({"L": 4}))
    assert p1.embedding + p1.position == (10 + 6) * 8
    assert p2.total - p1.total == 2 * p1.layer.total


@pytest.mark.parametrize(("norm", "per_layer", "final"), [("layernorm", 4 * 8, 2 * 8), ("rmsnorm", 2 * 8, 8)])
def test_arch3_two_layernorms_are_4D_per_layer(norm, per_layer, final):
    """ARCH-3: two LayerNorms hold 4D per layer (scale + bias), not 2D; RMSNorm 2D."""
    p = count_params(ModelConfig.model_validate({"L": 2, "D": 8, "A": 2, "V": 10, "norm": norm}))
    assert (p.layer.norms, p.final_norm) == (per_layer, final)


def test_arch13_gpt_neo_1_3b_from_the_listed_shapes():
    """ARCH-13: summing seed 001's GPT-Neo-1.3B layer list gives 1,315,575,808."""
    p = count_params(ModelConfig.model_validate(GPT_NEO_1_3B))
    assert p.layer.total == 50_352_128
    assert (p.embedding, p.position, p.final_norm) == (102_926_336, 4_194_304, 4_096)
    assert p.total == 1_315_575_808
