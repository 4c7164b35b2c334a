"""Zamba2's shared transformer blocks on one inference rank: the KV cache their attention keeps at each
application (docs/formulas.md §5.12).

Source: transformers 5.23 models/zamba2/modeling_zamba2.py (Zamba2Attention: `past_key_values.update(...,
layer_idx)` of the hybrid layer the block runs at: each application caches its own K and V, with full
attention). The blocks' weights, FLOPs and re-reads are estimators/shared_block.py's. A model without shared
blocks has no applications and caches nothing here.
"""

from __future__ import annotations

from transformer_calc.estimators.inference.rank_parts import KVGroup
from transformer_calc.model.config import ModelConfig


def cache_groups(m: ModelConfig, per_layer: int) -> tuple[KVGroup, ...]:
    """The applications' caches: `per_layer` elements per token (the attention block's, on the rank) at each of
    the n_app applications, over the whole context; none without shared blocks."""
    if not m.n_shared_block_applications:
        return ()
    return (KVGroup(m.n_shared_block_applications, per_layer, None),)
