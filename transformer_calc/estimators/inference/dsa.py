"""DeepSeek Sparse Attention (DeepSeek-V3.2) on one inference rank: its lightning indexer's cache, and the
latent tokens a query attends (docs/formulas.md §5.5).

Source: transformers models/deepseek_v32/modeling_deepseek_v32.py (DeepseekV32Indexer: `update_indexer` caches
one d_I-wide key per token and indexer layer, DynamicIndexedLayer.indexer_keys; the top-k selection);
DeepSeek-V3.2 tech report §2.1 (the indexer scores every cached key: 2·H_I·(d_I + 1) FLOPs per key). The
indexer's weights are estimators/mla.py's. A model without DSA caches no indexer keys and attends every token.
"""

from __future__ import annotations

from transformer_calc.estimators.inference.rank_parts import KVGroup
from transformer_calc.model.config import LayerAttention, ModelConfig


def indexer_groups(m: ModelConfig) -> tuple[KVGroup, ...]:
    """The indexer keys as a cache group: one d_I-wide key per token in each of the model's indexer layers,
    replicated on every rank, each scored by the indexer's H_I heads (FLOPs/2 per key: H_I·(d_I + 1));
    none without DSA."""
    if not m.is_dsa:
        return ()
    H, d = m.index_n_heads or 0, m.index_head_dim or 0
    return (KVGroup(m.n_indexer_layers, d, None, None, H * (d + 1)),)


def attended_tokens(m: ModelConfig, kind: LayerAttention) -> int | None:
    """The most cached tokens a query of a layer of `kind` reads and attends: DSA's full (latent) layers the
    index_topk its indexer picks; None (every cached token) otherwise."""
    return m.index_topk if kind is LayerAttention.full else None
