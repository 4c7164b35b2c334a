"""MiMo-V2-Flash's attention shaped by layer kind, on one inference rank (docs/formulas.md §5.13): its sliding
layers cache their own K/V heads, 2·n_kv of them (`sliding_kv_heads`), each a key of h_d and a value of h_v.

Source: transformers 5.23 models/mimo_v2_flash/modeling_mimo_v2_flash.py (MiMoV2FlashAttention: a sliding
layer's k_proj and v_proj of swa_num_key_value_heads heads, cached by `past_key_values.update`). Per rank the
K/V heads split T ways or replicate (`kv_heads_per_rank`), as the model's own K/V heads do. For every other
model (and every other kind) the attention block's cached elements stand: `cached_elements` returns them.
"""

from __future__ import annotations

from transformer_calc.estimators.primitives import kv_heads_per_rank
from transformer_calc.model.config import LayerAttention, ModelConfig


def cached_elements(m: ModelConfig, T: int, kind: LayerAttention, base: int) -> int:
    """Cached values per token in one layer of `kind` on one of T ranks: a sliding layer with its own K/V
    heads, kv_s·(h_d + h_v) of the rank's kv_s heads; else `base`, the attention block's (estimators/attention.py)."""
    if kind is LayerAttention.sliding and m.sliding_kv_heads is not None:  # MiMo-V2-Flash: 2·n_kv heads
        return kv_heads_per_rank(m.sliding_kv_heads, T, "sliding_kv_heads") * (m.head_dim + m.v_dim)
    return base


def check_cache_heads(m: ModelConfig, cache_kv_heads: int | None) -> None:
    """ValueError when `cache_kv_heads` (one K/V head count for the cache) is given for a model whose sliding
    layers have heads of their own."""
    if m.sliding_kv_heads is not None and cache_kv_heads is not None:
        raise ValueError("cache_kv_heads sets one K/V head count, but this model's sliding layers have their own "
                         f"(sliding_kv_heads {m.sliding_kv_heads}); drop cache_kv_heads")
