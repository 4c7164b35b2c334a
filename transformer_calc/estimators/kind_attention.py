"""Attention shaped by layer kind (MiMo-V2-Flash): sliding layers with K/V heads and sinks of their own,
what they hold beyond a full-attention layer, so that the estimators ask this module instead of
branching on the family (training's side of the block: estimators/training/kind_attention.py).

Source: transformers modeling_mimo_v2_flash.py MiMoV2FlashAttention (a sliding layer's k_proj and v_proj
over `swa_num_key_value_heads` = 2·n_kv heads, its `attention_sink_bias` of one logit per query head),
configuration_mimo_v2_flash.py; ModelConfig.sliding_kv_heads and sliding_sinks.
"""
from __future__ import annotations

from transformer_calc.model.config import ModelConfig


def sliding_extra(m: ModelConfig, q_heads: int, kv_heads: int, sliding_kv_heads: int) -> tuple[int, int]:
    """(matmul weights, all parameters) a sliding layer holds beyond a full one, for the given heads (one
    rank's): MiMo-V2-Flash gives its sliding layers 2·n_kv K/V heads (k_proj, v_proj and their biases widen:
    h_d + h_v per extra head and input feature) and a sink logit per query head. (0, 0) for a model whose
    sliding layers have the full layers' K/V heads (sliding_kv_heads = kv_heads) and no sinks of their own."""
    D, hd, hv = m.d_model, m.head_dim, m.v_dim
    extra_heads = sliding_kv_heads - kv_heads
    weights = D * extra_heads * (hd + hv)
    biases = extra_heads * (hd + hv) if m.qkv_bias else 0
    return weights, weights + biases + (q_heads if m.sliding_sinks else 0)


def varied_labels(m: ModelConfig) -> list[str]:
    """This block by name when the model has it (its sliding layers differ from the base block), else []."""
    return ["sliding attention with its own K/V heads or sinks (MiMo-V2-Flash)"] if m.per_kind_attention else []
