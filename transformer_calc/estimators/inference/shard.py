"""One tensor/expert-parallel rank's share of a model for inference (`rank_shard`), summed over the layer
plan: its matmul weights, its KV cache as groups of layers (one per attention kind and kv-shared class, and
the groups each block's own module adds), its decode-state groups (one per mixer kind), its experts,
memoized by layout. The types are rank_parts.py's; every inference estimate (memory, steps, the decode's
sum, the paged capacity) reads the groups without knowing the model.

Each block's part is asked of its own module, which returns the base value for a model without the block:
the attention block (estimators/attention.py: cached elements, q/k/v width), varied layers by kind and depth
(inference/gemma_layers.py), sliding layers with their own K/V heads (inference/kind_attention.py), DSA's
indexer (inference/dsa.py), shared blocks (inference/shared_block.py), the mixers (estimators/mixers/), and
DeepSeek-V4's whole-model shard (inference/deepseek_v4.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from transformer_calc.estimators.attention import attention_block
from transformer_calc.estimators.gemma_layers import matmul_params as varied_matmul_params, per_layer_table_rank
from transformer_calc.estimators.inference import deepseek_v4, dsa, kind_attention, shared_block
from transformer_calc.estimators.inference import gemma_layers as varied_layers
from transformer_calc.estimators.inference.layout import (  # noqa: F401  (re-exported)
    expert_layout,
    expert_slots,
    weight_store,
)
from transformer_calc.estimators.inference.rank_parts import (  # noqa: F401  (re-exported)
    CompressedGroup,
    KVGroup,
    Shard,
    StateGroup,
)
from transformer_calc.estimators.inference.spec import InferenceSpec, check_positive_int
from transformer_calc.estimators.mla import indexer_matmul_params
from transformer_calc.estimators.mixers import MIXERS
from transformer_calc.estimators.params import (
    GATED_MATRICES,
    PLAIN_MATRICES,
    attention_weights,
    check_tensor_parallel,
    count_params,
    kv_heads_per_rank,
    latent_projections,
    mlp_params,
    sliding_extra,
    tensor_parallel_params,
)
from transformer_calc.estimators.shared_block import matmul_weights_per_application, shared_block_rereads
from transformer_calc.model.config import ATTENTION_KINDS, LayerAttention, ModelConfig


def matmul_params(m: ModelConfig, T: int = 1) -> int:
    """Weights that one token multiplies on one of T ranks (all of them for T = 1): the layer plan's
    (`_layered_matmul_params`), or DeepSeek-V4's (inference/deepseek_v4.py)."""
    check_positive_int("T", T)
    return deepseek_v4.matmul_params(m, T, _layered_matmul_params)


def _layered_matmul_params(m: ModelConfig, T: int) -> int:
    """Weights that one token multiplies on one of T ranks, summed over the layer plan.

    Q, K, V, O (MLA: its down and up projections), the active experts' MLP matrices, the shared
    experts and their gate, the MoE router, the LM head (tied or not: the embedding lookup is a
    gather, the head a matmul) and OPT's embedding projections. Per rank: heads, MLP width and
    vocabulary split T ways (ceil(V/T) rows), K/V replicated when n_kv < T, router, MLA's latent
    down-projections and OPT's projections replicated. Biases and norms are not matmul weights.
    Varied layers (Gemma 4, Gemma 3n: estimators/gemma_layers.py `matmul_params`, n_softmax·(q, k, v, o)
    for any other model) add each kind's own attention, the wide MLPs and the per-layer inputs.
    """
    D = m.d_model
    check_tensor_parallel(m, T)
    q_rank, kv_rank = m.n_heads // T, kv_heads_per_rank(m.n_kv_heads, T, "n_kv_heads")
    n_matrices = GATED_MATRICES if m.gated_mlp else PLAIN_MATRICES
    q, k, v, o = attention_weights(m, q_rank, kv_rank)  # (MLA has no K/V heads: kv_rank unused)
    attention = q + k + v + o
    n_moe = m.n_moe_layers()
    dense_mlp = n_matrices * D * (m.d_ff // T)
    moe_mlp = m.experts_per_token * n_matrices * m.expert_d * (m.moe_d_ff // T)
    moe_mlp += latent_projections(m)[0]  # LatentMoE's D <-> ℓ projections, replicated
    moe_mlp += n_matrices * D * (m.shared_expert_d_ff // T) + (D if m.shared_expert_gate else 0)
    moe_mlp += D * m.n_experts if m.router else 0
    d_emb = m.d_embedding
    lm_head = -(-m.vocab_size // T) * d_emb
    projections = 2 * d_emb * D if d_emb != D else 0  # OPT project_in + project_out
    mlp = n_moe * moe_mlp + (m.n_layers - n_moe - m.n_channel_free_layers()) * dense_mlp
    mixers = sum(m.n_attention_layers(k) * MIXERS[k].matmul_params(m, T) for k in m.mixer_kinds)  # their projections
    # DSA indexers (replicated): wq_b, wk, weights_proj; its k_norm is no matmul (0 layers without DSA)
    indexer = m.n_indexer_layers * indexer_matmul_params(m)
    # Zamba2's shared blocks: a token multiplies their weights once per application (T = 1 only)
    shared = m.n_shared_block_applications * matmul_weights_per_application(m)
    # MiMo-V2-Flash: its sliding layers' extra K/V heads
    kv_s = kv_heads_per_rank(m.kv_heads_of(LayerAttention.sliding), T, "sliding_kv_heads")
    shared += m.n_attention_layers(LayerAttention.sliding) * sliding_extra(m, q_rank, kv_rank, kv_s)[0]
    layers = varied_matmul_params(m, T, attention, n_matrices)  # every softmax layer's q, k, v, o, and varied parts
    return layers + mixers + mlp + lm_head + projections + indexer + shared


def _kv_groups(m: ModelConfig, spec: InferenceSpec, cached_heads: int) -> tuple[KVGroup, ...]:
    """The cache on one rank, one group per class of layers that cache alike: per softmax-attention kind
    its own layers and its kv-shared layers (which hold none and read the K/V of the layer they share),
    then the groups of DSA's indexer and of shared blocks; a class without layers holds nothing.

    Standard attention: K and V of the rank's cached heads, 2·n_kv_rank·h_d per token and layer.
    MLA with the latent cache: the compressed latent and the shared rotary key, r_kv + d_rope per
    token and layer (modeling_deepseek_v3.py caches them; transformers 5 too), the same on every
    TP rank (replicated, not split); decompressed: per-head K (h_d) and V (h_v) of the rank's
    heads, as engines that expand the latent before caching hold (estimators/attention.py, mla.py).
    A kind's own K/V heads (inference/kind_attention.py) or head width (inference/gemma_layers.py)
    replace the block's per-layer elements where a model has them.
    """
    T = spec.tensor_parallel
    per_layer = attention_block(m).cached_elements(m, T, cached_heads, spec.mla_cache == "latent")
    windows = {LayerAttention.full: None, LayerAttention.sliding: m.sliding_window,
               LayerAttention.chunked: m.attention_chunk_size}
    first_shared = m.first_kv_shared_layer
    groups: list[KVGroup] = []
    for kind in (k for k in LayerAttention if k in ATTENTION_KINDS):
        own, reading = m.n_kv_layers(kind), m.n_attention_layers(kind, first_shared, m.n_layers)
        if not (own or reading):
            continue
        base = kind_attention.cached_elements(m, T, kind, per_layer)
        elements, width = varied_layers.kind_cache(m, T, kind, base)
        topk = dsa.attended_tokens(m, kind)
        groups += [KVGroup(own, elements, windows[kind], topk, width),
                   KVGroup(reading, 0, windows[kind], topk, width, read_elements=elements)]
    groups += dsa.indexer_groups(m) + shared_block.cache_groups(m, per_layer)
    return tuple(g for g in groups if g.layers)


def mixer_state_groups(m: ModelConfig, T: int) -> tuple[StateGroup, ...]:
    """The decode state of the mixer layers (estimators/mixers/), per kind, on one of T ranks."""
    out = []
    for kind in m.mixer_kinds:
        mixer = MIXERS[kind]
        st = mixer.state(m, T)
        out.append(StateGroup(m.n_attention_layers(kind), st.conv, st.recurrent, mixer.token_flops(m, T),
                               mixer.prompt_token_flops(m, T), st.recurrent_at_activation_dtype))
    return tuple(out)


# ============================================================================ the shard, once per layout
# What one GPU holds depends on the model and the layout (T, ep, the cache's heads and form), never
# on the workload (B, S, N_new): a sweep that prices thousands of workloads of one layout computes
# the shard once (issue 12). The key is every InferenceSpec field but the workload's, so a field
# the shard comes to read is in the key by construction; tests/test_sweep.py checks the invariant.
_WORKLOAD_FIELDS = frozenset({"batch_size", "prompt_len", "new_tokens"})


_LAYOUT_FIELDS = tuple(f.name for f in dataclasses.fields(InferenceSpec) if f.name not in _WORKLOAD_FIELDS)


_SHARD_MEMO_SIZE = 256  # layouts kept (cleared when full)


class _MemoByLayout:
    """A shard function memoized by layout; `uncached` is the function itself."""

    def __init__(self, shard: Callable[[ModelConfig, InferenceSpec], Shard]) -> None:
        self.uncached = shard
        self.__doc__, self.__name__ = shard.__doc__, shard.__name__
        self._memo: dict[tuple[object, ...], Shard] = {}

    def __call__(self, m: ModelConfig, spec: InferenceSpec) -> Shard:
        key = (m, *[getattr(spec, name) for name in _LAYOUT_FIELDS])
        sh = self._memo.get(key)
        if sh is None:
            if len(self._memo) >= _SHARD_MEMO_SIZE:
                self._memo.clear()
            sh = self._memo[key] = self.uncached(m, spec)
        return sh


@_MemoByLayout
def rank_shard(m: ModelConfig, spec: InferenceSpec) -> Shard:
    """What one GPU holds and does: the layer plan's shard (`_layered_shard`), or DeepSeek-V4's
    (inference/deepseek_v4.py)."""
    return deepseek_v4.rank_shard(m, spec, _layered_shard)


def _layered_shard(m: ModelConfig, spec: InferenceSpec) -> Shard:
    """What one GPU holds and does, summed over the layer plan. Attention, dense MLPs, shared experts,
    embedding and head are split T ways; routed experts ep ways, each over etp = T/ep ranks
    (`expert_layout`). The matmul FLOPs per token stay the T-way average: with ep > T each GPU serves
    ep/T groups' tokens for 1/ep of the experts, as much work per GPU as the T-way split."""
    varied_layers.check_cache_heads(m, spec.cache_kv_heads)
    T, ep = spec.tensor_parallel, spec.expert_parallel
    _, etp = expert_layout(m, T, ep)
    m = expert_slots(m, spec)
    check_tensor_parallel(m, T, ep, etp)
    D, hd = m.d_model, m.head_dim
    if not (block := attention_block(m)).caches_kv_heads and spec.cache_kv_heads is not None:
        raise ValueError(f"cache_kv_heads does not apply to {block.name}; drop it")
    kind_attention.check_cache_heads(m, spec.cache_kv_heads)
    model_kv = kv_heads_per_rank(m.n_kv_heads, T, "n_kv_heads")
    # the K/V heads attention computes with (MLA: A, T dividing it); cache_kv_heads is refused for MLA above
    cache_heads = m.attention_kv_heads if spec.cache_kv_heads is None else spec.cache_kv_heads
    cached = kv_heads_per_rank(cache_heads, T, "cache_kv_heads")
    n_in = (GATED_MATRICES if m.gated_mlp else PLAIN_MATRICES) - 1  # matrices D -> F: up (+ gate)
    F_exp = m.moe_d_ff if m.is_moe else m.d_ff
    expert = sum(mlp_params(m, F_exp // (etp if m.is_moe else T), d_in=m.expert_d))  # one expert on this GPU (params')
    full = count_params(m)
    embedding_rows = 0 if m.tied_embeddings else -(-m.vocab_size // T) * m.d_embedding
    # Prefill transient of one block: its input and output (2·D) plus the widest intermediate,
    # the fused Q/K/V output or the MLP's up (+ gate) outputs of every active expert.
    widest_kv = max(model_kv, kv_heads_per_rank(m.kv_heads_of(LayerAttention.sliding), T, "sliding_kv_heads"))
    # varied layers (Gemma 4): the widest kind's q, k, v on this rank
    qkv_width = varied_layers.qkv_width(m, T, attention_block(m).qkv_width(m, m.n_heads // T, widest_kv))
    mlp_width = max(m.experts_per_token * n_in * F_exp // T + n_in * m.shared_expert_d_ff // T, n_in * m.d_ff // T)
    return Shard(
        layers=m.n_layers,
        head_dim=hd,
        q_heads=m.n_heads // T,
        kv_heads=cached,
        kv_groups=_kv_groups(m, spec, cached),
        attention_width=hd + m.v_dim,
        params=tensor_parallel_params(m, T, ep, etp),
        # Gemma 4's per-layer table: rows gathered too (vocabulary-parallel: ceil(V_ple/T) rows per rank)
        gathered_params=embedding_rows + full.position + per_layer_table_rank(m, T),
        expert_params=expert,
        moe_layers=m.n_moe_layers() if m.is_moe else m.n_layers,
        n_experts=m.n_experts // ep if m.is_moe else m.n_experts,
        expert_assignments_share=(T, ep) if m.is_moe else (1, 1),
        experts_per_token=m.experts_per_token,
        matmul_params=matmul_params(m, T),
        workspace_width=2 * D + max(qkv_width, mlp_width),
        store=weight_store(m, spec, etp),
        tower_params=m.tower_params,
        state_groups=mixer_state_groups(m, T),
        reread_params=shared_block_rereads(m),
    )
