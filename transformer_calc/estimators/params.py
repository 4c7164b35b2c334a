"""Exact parameter count of a decoder-only transformer, per component.

Source: seed notes 003, Part "Architecture" (embedding V*D, positions K*D, attention 4*D^2 weights,
MLP 2*E*D^2, two norms of D scale (+ D bias) each, LM head tied to the embedding), generalized to
what real model families build: GQA/MQA K/V widths, head_dim != D/A, gated MLPs (3 matrices),
fine-grained biases, RMSNorm (scale only), MoE experts and router, OPT's embedding projections and
position offset, BLOOM's embedding norm, per-head q/k norms, untied or biased LM heads, and the layers
that vary by kind and depth in Gemma 4 and Gemma 3n (estimators/gemma_layers.py: full layers
of their own width, k = v, shared-KV layers, per-layer embeddings, AltUp, LAuReL).

Conventions: every parameter tensor is counted once (tied embeddings are one tensor, as
`sum(p.numel() for p in model.parameters())` counts them in PyTorch); buffers (rotary
frequencies, causal masks) are not parameters. The result must equal what PyTorch builds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from transformer_calc.model.config import (
    ACTIVATION_PARAMS, LayerAttention, ModelConfig, ModelStructure, Positional, QKNormScope,
)
from transformer_calc.estimators import gemma_layers, mla
from transformer_calc.estimators.attention import attention_block
from transformer_calc.estimators.counts import ATTENTION_FIELDS, OPTIONAL_KEYS, LayerParams, ModelParams  # noqa: F401 (re-exported)
from transformer_calc.estimators.kind_attention import sliding_extra
from transformer_calc.estimators.primitives import GATED_MATRICES, PLAIN_MATRICES, kv_heads_per_rank, mlp_params, norm_params
from transformer_calc.estimators.mixers import MIXERS
from transformer_calc.estimators.shared_block import check_tensor_parallel as check_shared_blocks, shared_block_params

# count_params and shard_params are pure functions of a frozen, hashable ModelConfig (and ints)
# returning frozen dataclasses: they are memoized, so that a sweep or a planner that prices
# thousands of points of one (model, layout) counts its parameters once (issue 12).
MEMO_SIZE = 1024

ATTN_MATRICES = 4  # Q, K, V, O (seed, "Causal Attention": 4*D^2)


def mlp_params_per_expert(m: ModelConfig) -> tuple[int, int]:
    """(weights, biases) of one routed expert (of the dense MLP for a dense model)."""
    return mlp_params(m, m.moe_d_ff, d_in=m.expert_d) if m.is_moe else mlp_params(m, m.d_ff)


def latent_projections(m: ModelConfig) -> tuple[int, int]:
    """(weights, biases) of a latent MoE's fc1_latent_proj (D x ℓ) and fc2_latent_proj (ℓ x D), bias
    mlp_bias (modeling_nemotron_h.py NemotronHMoE); (0, 0) without one. Every token passes both; they
    are replicated on every tensor-parallel rank (vLLM ReplicatedLinear, Megatron-core TELinear
    parallel_mode="duplicated", TensorRT-LLM)."""
    ell = m.moe_latent_dim
    if ell is None:
        return 0, 0
    return 2 * m.d_model * ell, (ell + m.d_model) if m.mlp_bias else 0


def attention_weights(m: ModelConfig, q_heads: int, kv_heads: int, replicated_down: bool = True) -> tuple[int, int, int, int]:
    """(W_Q, W_K, W_V, W_O) weights for q_heads query and kv_heads K/V heads (one TP rank: the
    heads it holds; MLA's down-projections to the latents are replicated on every rank)."""
    return attention_block(m).weights(m, q_heads, kv_heads)  # estimators/attention.py


def _attention_bias(m: ModelConfig, q_heads: int, kv_heads: int, out_bias: bool) -> int:
    """q/k/v biases (column-parallel, split with the heads) and the output bias."""
    return attention_block(m).bias(m, q_heads, kv_heads, out_bias)  # estimators/attention.py


def _qk_norm(m: ModelConfig) -> int:
    if not m.qk_norm:
        return 0
    if m.qk_norm_scope is QKNormScope.full:  # OLMo-2 q_norm(A*h_d), k_norm(n_kv*h_d); Cohere
        return norm_params(m, m.n_heads * m.head_dim) + norm_params(m, m.n_kv_heads * m.head_dim)
    return 2 * norm_params(m, m.head_dim)


def _sub_norms(m: ModelConfig, mlp_width: int) -> int:
    """BitNet (modeling_bitnet.py BitNetAttention, BitNetMLP): attn_sub_norm RMSNorm(hidden_size)
    on o_proj's input (A·h_d = D there), ffn_sub_norm RMSNorm(intermediate_size) on down_proj's."""
    return norm_params(m, m.d_model) + norm_params(m, mlp_width) if m.sub_norms else 0


def layer_params(m: ModelConfig, moe: bool | None = None) -> LayerParams:
    """Parameters of one block (seed "Causal Attention", "MLP", "Layer Norm"); `moe` picks a MoE
    block (default: the model's kind) or a dense-MLP block of width d_ff."""
    D, A, kv = m.d_model, m.n_heads, m.n_kv_heads
    moe = m.is_moe if moe is None else moe
    q, k, v, o = attention_weights(m, A, kv)
    act = ACTIVATION_PARAMS.get(m.mlp, 0)  # per MLP module
    if moe:
        w_expert, b_expert = mlp_params(m, m.moe_d_ff, d_in=m.expert_d)
        lat_w, lat_b = latent_projections(m)  # LatentMoE: counted with the routed experts
        mlp_w, mlp_b = m.n_experts * w_expert + lat_w, m.n_experts * b_expert + lat_b
        shared = mlp_params(m, m.shared_expert_d_ff, bias=False)[0] if m.shared_expert_d_ff else 0
        shared += D if m.shared_expert_gate else 0  # Qwen2-MoE shared_expert_gate: Linear(D, 1)
        router = (D * m.n_experts + (m.n_experts if m.router_bias else 0)) if m.router else 0
        # modeling_gemma4.py Gemma4TextRouter: scale (D) on its normed input, per_expert_scale (E) on the weights
        router += D + m.n_experts if m.router_scales else 0
        activation = act * (m.n_experts + (1 if m.shared_expert_d_ff else 0))
    else:
        mlp_w, mlp_b = mlp_params(m, m.d_ff)
        shared = router = 0
        activation = act
    return LayerParams(
        attn_q=q,
        attn_k=k,
        attn_v=v,
        attn_o=o,
        attn_bias=_attention_bias(m, A, kv, m.attn_out_bias),
        qk_norm=_qk_norm(m),
        latent_norms=sum(norm_params(m, w) for w in mla.latent_norm_widths(m)),
        sinks=A if m.attention_sinks else 0,
        indexer=mla.indexer_params(m),
        mlp_weights=mlp_w,
        mlp_bias=mlp_b,
        activation=activation,
        shared_expert=shared,
        router=router,
        norms=m.norms_per_layer * norm_params(m, D) + _sub_norms(m, m.moe_d_ff if moe else m.d_ff),
    )


@lru_cache(maxsize=MEMO_SIZE)
def count_params(m: ModelConfig) -> ModelParams:
    """Exact parameter count, per component (see the module docstring for conventions): the count of the
    model's structure (`STRUCTURES`, the one pick)."""
    return STRUCTURES[m.structure].count(m)


def _layer_stack_params(m: ModelConfig) -> ModelParams:
    """A stack of layer kinds (every model but DeepSeek-V4): the blocks by attention, mixer and MLP kind, and
    what varies by kind and depth (`gemma_layers.parts`, all 0 for a model whose layers do not vary)."""
    L, D, V = m.n_layers, m.d_model, m.vocab_size
    d_emb = m.d_embedding
    layer = layer_params(m)
    dense = layer_params(m, moe=False) if m.is_moe else layer
    w_expert, b_expert = mlp_params_per_expert(m)
    n_positions = m.max_seq_len + m.position_offset
    # DeepSeek-V3 MTP module (its checkpoint, model.layers.61): enorm, hnorm, eh_proj (2D -> D), one
    # block, shared_head.norm, and its own stored copies of the embedding and the head.
    mtp_block = layer.total + 3 * norm_params(m, D) + 2 * D * D + 2 * V * d_emb
    varied = gemma_layers.parts(m, layer)
    return ModelParams(
        n_layers=L,
        n_moe_layers=m.n_moe_layers(),
        embedding=V * d_emb,
        position=n_positions * D if m.positional is Positional.learned else 0,
        embedding_projection=2 * d_emb * D if d_emb != D else 0,  # project_in + project_out
        embedding_norm=norm_params(m, D) if m.embedding_norm else 0,
        layer=layer,
        dense_layer=dense,
        final_norm=norm_params(m, D) if m.final_norm else 0,
        lm_head=0 if m.tied_embeddings else V * d_emb,
        lm_head_bias=V if m.lm_head_bias else 0,
        active_mlp_per_layer=(m.experts_per_token * (w_expert + b_expert) + sum(latent_projections(m))
                              if m.is_moe else layer.mlp_weights + layer.mlp_bias),
        mtp=m.mtp_layers * mtp_block,
        n_indexer_layers=m.n_indexer_layers,
        n_attention_layers=m.n_softmax_layers(),
        mixers=sum(m.n_attention_layers(k) * MIXERS[k].params(m).total for k in m.mixer_kinds),
        n_channel_free_layers=m.n_channel_free_layers(),
        shared_blocks=shared_block_params(m).total,
        sliding_extra=m.n_attention_layers(LayerAttention.sliding) * sliding_extra(
            m, m.n_heads, m.n_kv_heads, m.kv_heads_of(LayerAttention.sliding))[1],
        **varied.fields(),
        attention_by_field=varied.attention_by_field,
    )


# DeepSeek-V4's blocks are priced whole by their module (estimators/deepseek_v4.py), imported for its models
# only (issue 39: another model's estimate never loads it)
def _deepseek_v4_params(m: ModelConfig) -> ModelParams:
    from transformer_calc.estimators.deepseek_v4 import model_params

    return model_params(m)


def _deepseek_v4_layout(m: ModelConfig, T: int, ep: int) -> None:
    from transformer_calc.estimators.deepseek_v4 import check_layout

    check_layout(m, T, ep)  # T > 1 refused with its own reason; experts over ep GPUs priced


def _deepseek_v4_share(m: ModelConfig) -> None:
    from transformer_calc.estimators.deepseek_v4 import require_deepseek_v4_priced

    require_deepseek_v4_priced(m, "tensor parallelism (its per-rank share)")


def _priced(m: ModelConfig) -> None:
    """A per-rank share `shard_params` prices."""


@dataclass(frozen=True)
class Structure:
    """What this module asks of a model structure (`ModelConfig.structure`): its whole count, its layout
    check over T tensor- and ep expert-parallel ranks, and its refusal of a per-rank share it does not price."""

    count: Callable[[ModelConfig], ModelParams]
    check_layout: Callable[[ModelConfig, int, int], None]
    check_share: Callable[[ModelConfig], None]


# The one pick among whole-model implementations, keyed by ModelConfig.structure; a new one is one more entry.
# A stack of layer kinds: the blocks by kind here, Gemma 4's and Gemma 3n's varied layers checked by their module.
STRUCTURES = {
    ModelStructure.layers: Structure(_layer_stack_params, gemma_layers.check_layout, _priced),
    ModelStructure.deepseek_v4: Structure(_deepseek_v4_params, _deepseek_v4_layout, _deepseek_v4_share),
}


@dataclass(frozen=True)
class TowerParams:
    """A multimodal model's parameters beside its language model (docs/formulas.md "Towers").

    The counts are data on the model (`ModelConfig.towers`, computed from the config's
    vision_config/audio_config by `sources.hf_towers`, each citing its modeling file); `counted` is
    False when the towers are dropped (`text_only`): the model's totals are then the language
    model's alone, and the result says so.
    """

    language_model: int  # count_params(m).total: the decoder, embedding and head
    vision: int
    audio: int
    projector: int
    counted: bool

    @property
    def towers(self) -> int:
        return self.vision + self.audio + self.projector

    @property
    def total(self) -> int:
        """What transformers builds (towers included), or the language model alone when not counted."""
        return self.language_model + (self.towers if self.counted else 0)


def tower_params(m: ModelConfig) -> TowerParams | None:
    """The towers beside the language model (None for a text-only decoder)."""
    if m.towers is None:
        return None
    t = m.towers
    return TowerParams(count_params(m).total, t.vision, t.audio, t.projector, not t.text_only)


def total_params(m: ModelConfig) -> int:
    """Every parameter the model has: the language model (`count_params`) plus its counted towers,
    `sum(p.numel() for p in model.parameters())` of the class transformers builds for the config."""
    return count_params(m).total + m.tower_params


def seed_block_approx(m: ModelConfig) -> int:
    """Seed eq. (approx_params_no_sharding): N ~ (4 + 2E) * L * D^2, block weights only.

    With E = d_ff / D this is L * (4*D^2 + 2*D*d_ff), exact in integers; it ignores GQA, gating,
    biases, norms and embeddings (the O(V/DL) and O(1/D) corrections the seed drops).
    """
    L, D, F = m.n_layers, m.d_model, m.d_ff
    return L * (ATTN_MATRICES * D * D + PLAIN_MATRICES * D * F)


def seed_total_approx(m: ModelConfig) -> int:
    """Seed 004 "Model size": 12 * D^2 * L + D * V (E = 4 blocks plus the tied embedding)."""
    L, D, V = m.n_layers, m.d_model, m.vocab_size
    return 12 * D * D * L + D * V


def check_tensor_parallel(m: ModelConfig, T: int, ep: int = 1, etp: int | None = None) -> None:
    """Megatron-LM splits the query heads and every MLP width T ways: T must divide them; routed
    experts are split over ep expert-parallel ranks and their width over etp (default T)."""
    if T < 1:
        raise ValueError(f"tensor parallel size T ({T}) must be >= 1")
    if m.n_heads % T:
        raise ValueError(f"n_heads ({m.n_heads}) must be divisible by T ({T}); use a divisor of {m.n_heads}")
    STRUCTURES[m.structure].check_layout(m, T, ep)  # Gemma 4's and Gemma 3n's varied layers; DeepSeek-V4's
    for kind in m.mixer_kinds:
        MIXERS[kind].check(m, T)
    check_shared_blocks(m, T)
    if m.has_dense_mlp_layers and m.d_ff % T:
        raise ValueError(f"d_ff ({m.d_ff}) must be divisible by T ({T}); use a divisor of {m.d_ff}")
    if m.is_moe:
        if m.shared_expert_d_ff % T:
            raise ValueError(
                f"shared_expert_d_ff ({m.shared_expert_d_ff}) must be divisible by T ({T}); "
                f"use a divisor of {m.shared_expert_d_ff}"
            )
        etp = T if etp is None else etp
        if ep < 1 or m.n_experts % ep:
            raise ValueError(
                f"n_experts ({m.n_experts}) must be divisible by the expert-parallel size ep ({ep}); "
                f"use a divisor of {m.n_experts}"
            )
        if etp < 1 or m.moe_d_ff % etp:
            raise ValueError(
                f"moe_d_ff ({m.moe_d_ff}) must be divisible by the expert tensor-parallel size ({etp}); "
                f"use a divisor of {m.moe_d_ff}"
            )
    elif ep != 1:
        raise ValueError(f"expert parallelism ep ({ep}) needs a mixture-of-experts model; use ep 1")





@dataclass(frozen=True)
class ShardParams:
    """Parameters held by one tensor-(and expert-)parallel rank, split by where they live in a
    pipeline.

    The embedding part sits on the first pipeline stage; the head part (final norm, LM head) on
    the last; with tied embeddings and more than one stage the last stage keeps its own copy of
    the embedding table for the head (Megatron-LM does this), given as `tied_head_copy`.
    `layer` is a MoE block's shard (a dense model's block), `dense_layer` a dense-MLP block's;
    `routed_experts` is the part of `layer` that is expert-parallel (ZeRO shards it over the
    expert-data-parallel group, not the whole data-parallel group).
    """

    embedding: int  # token table shard + positions + projections + embedding norm
    layer: int  # one block's shard
    dense_layer: int  # one dense-MLP block's shard (== layer for dense models)
    routed_experts: int  # the routed experts inside `layer` (0 for dense models)
    final_norm: int
    lm_head: int  # untied head shard (+ bias); 0 when tied
    tied_head_copy: int  # the embedding shard a separate last stage needs when tied
    indexer: int = 0  # DSA: one layer's indexer, replicated, inside `layer` and `dense_layer`
    attention: int = 0  # the attention part of `layer` (what a mixer layer holds instead)
    mixers: tuple[tuple[LayerAttention, int], ...] = ()  # (kind, one layer's shard) of the other mixers
    dense_mlp: int = 0  # the MLP part of `dense_layer` (what a layer without MLP lacks)
    shared_blocks: int = 0  # Zamba2's shared blocks (T = 1 only: shared_block.check_tensor_parallel)
    sliding_extra: int = 0  # MiMo-V2-Flash: one sliding layer's shard beyond `attention`
    # Gemma 4's varied layers and per-layer inputs, the rank's share (`gemma_layers.parts`; Gemma 3n: T = 1 only);
    # not split by stage
    variants: int = 0

    def blocks(self, m: ModelConfig, start: int, stop: int) -> int:
        """The blocks' shards for layers [start, stop) (less the indexers GLM-5's shared layers lack)."""
        n_moe, n_free = m.n_moe_layers(start, stop), m.n_channel_free_layers(start, stop)
        shared = sum(1 for i in set(m.index_shared_layer_ids) if start <= i < stop) if self.indexer else 0
        total = n_moe * self.layer + (stop - start - n_moe - n_free) * self.dense_layer - shared * self.indexer
        total += n_free * (self.dense_layer - self.dense_mlp)  # one_mixer_per_layer: a mixer block, no MLP
        # the layers without softmax attention: a mixer layer (unless its attention runs beside the mixer,
        # Falcon-H1) and an MLP block (kind none, Nemotron-H); `n_softmax_layers` counts the others
        total -= (stop - start - m.n_softmax_layers(start, stop)) * self.attention
        total += m.n_attention_layers(LayerAttention.sliding, start, stop) * self.sliding_extra
        for kind, shard in self.mixers:  # a mixer layer: its mixer
            total += m.n_attention_layers(kind, start, stop) * shard
        return total

    def total(self, m: ModelConfig) -> int:
        return (self.embedding + self.blocks(m, 0, m.n_layers) + self.shared_blocks + self.final_norm + self.lm_head
                + self.variants)


@lru_cache(maxsize=MEMO_SIZE)
def shard_params(m: ModelConfig, T: int = 1, ep: int = 1, etp: int | None = None) -> ShardParams:
    """Parameters of one of T tensor-parallel (and ep expert-parallel) ranks, by component.

    Source: Shoeybi et al. 2019 (Megatron-LM) sec. 3 and the seed's "Tensor Parallelism": Q/K/V and
    the MLP input matrices are column-parallel (weights and biases split T ways), the attention
    output and MLP output matrices are row-parallel (weights split, their biases replicated), the
    token embedding and an untied LM head are vocabulary-parallel (ceil(V/T) rows per rank).
    Replicated on every rank: norms, learned positions, the MoE router, q/k norms, OPT projections,
    MLA's down-projections to the latents (q_a_proj, kv_a_proj_with_mqa) and their norms.
    K/V heads are split when T divides n_kv_heads; when n_kv_heads < T each rank keeps one K/V head
    (replication, as Megatron does for GQA/MQA). Requires T to divide n_heads and d_ff.
    Experts (Megatron-core MoE): each of ep expert-parallel ranks holds n_experts/ep routed experts,
    each split over etp expert-tensor-parallel ranks (default etp = T, Megatron's default);
    shared experts are split T ways like a dense MLP.
    """
    STRUCTURES[m.structure].check_share(m)  # (DeepSeek-V4's blocks: refused)
    check_tensor_parallel(m, T, ep, etp)
    etp = T if etp is None else etp
    full = count_params(m)
    kv_rank, q_rank = kv_heads_per_rank(m.n_kv_heads, T), m.n_heads // T
    attn = _shard_attention(m, full.layer, q_rank, kv_rank)
    norms = full.layer.norms  # (with BitNet's sub-norms, replicated like every norm here)
    dense_layer = attn + sum(mlp_params(m, m.d_ff // T)) + norms + full.dense_layer.activation
    routed, layer = _shard_moe(m, full.layer, T, ep, etp) if m.is_moe else (0, dense_layer - attn - norms)
    layer += attn + norms
    table = -(-m.vocab_size // T) * m.d_embedding  # vocabulary-parallel rows
    head_bias = -(-m.vocab_size // T) if m.lm_head_bias else 0
    return ShardParams(
        embedding=table + full.position + full.embedding_projection + full.embedding_norm,
        layer=layer,
        dense_layer=dense_layer,
        routed_experts=routed,
        final_norm=full.final_norm,
        lm_head=(0 if m.tied_embeddings else table) + head_bias,
        tied_head_copy=table if m.tied_embeddings else 0,
        indexer=full.layer.indexer,
        attention=attn,
        mixers=tuple((k, MIXERS[k].shard_params(m, T)) for k in m.mixer_kinds),
        dense_mlp=sum(mlp_params(m, m.d_ff // T)),
        shared_blocks=full.shared_blocks,
        sliding_extra=sliding_extra(m, q_rank, kv_rank, kv_heads_per_rank(
            m.kv_heads_of(LayerAttention.sliding), T, "sliding_kv_heads"))[1],
        variants=sum(gemma_layers.parts(m, full.layer, T, attn - full.layer.latent_norms - full.layer.indexer
                                   - (q_rank if m.attention_sinks else 0)).fields().values()),
    )


def _shard_attention(m: ModelConfig, full: LayerParams, q_rank: int, kv_rank: int) -> int:
    """One rank's attention: Q/K/V/O split by heads; q/k norms, MLA latent norms and DSA's indexer replicated
    (DeepSeek-V3.2's inference/model.py builds the indexer of plain, unsharded Linear layers)."""
    q, k, v, o = attention_weights(m, q_rank, kv_rank)  # (MLA has no K/V heads: kv_rank unused)
    attn = q + k + v + o + _attention_bias(m, q_rank, kv_rank, m.attn_out_bias)
    return attn + full.qk_norm + full.latent_norms + (q_rank if m.attention_sinks else 0) + full.indexer


def _shard_moe(m: ModelConfig, full: LayerParams, T: int, ep: int, etp: int) -> tuple[int, int]:
    """(routed experts, MoE block without attention and norms) of one rank: n_experts/ep experts split etp ways;
    shared experts split T ways; latent projections, the shared expert's gate and the router replicated."""
    routed = (m.n_experts // ep) * sum(mlp_params(m, m.moe_d_ff // etp, d_in=m.expert_d))
    shared = sum(mlp_params(m, m.shared_expert_d_ff // T, False)) if m.shared_expert_d_ff else 0
    shared += sum(latent_projections(m)) + (m.d_model if m.shared_expert_gate else 0)
    return routed, routed + shared + full.router + full.activation


def tensor_parallel_params(m: ModelConfig, T: int, ep: int = 1, etp: int | None = None) -> int:
    """Parameters held by one of T tensor-parallel ranks (see `shard_params`); T=1: the total."""
    if T == 1 and ep == 1:
        return count_params(m).total
    return shard_params(m, T, ep, etp).total(m)
