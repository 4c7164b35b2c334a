"""One tensor/expert-parallel rank's share of a model for inference (`rank_shard`): its matmul
weights, its KV cache as groups of layers (`KVGroup`; `CompressedGroup` for a cache that grows by
one entry per m tokens), its decode-state groups (`StateGroup`), its experts, memoized by layout.
Every inference estimate (memory, steps, the decode's sum, the paged capacity) reads the groups
without knowing the model.
"""

from __future__ import annotations

import dataclasses
import transformer_calc.estimators.deepseek_v4 as v4
from collections.abc import Callable
from dataclasses import dataclass

from transformer_calc.estimators.inference.quant import (
    FORMATS,
    QuantizedWeights,
    quantized_weights,
    stored_shard,
)
from transformer_calc.estimators.inference.spec import (
    CHECKPOINT,
    InferenceSpec,
    KV_TENSORS,
    check_positive_int,
)
from transformer_calc.estimators.mla import indexer_matmul_params
from transformer_calc.estimators.gemma_layers import matmul_params as varied_matmul_params, per_layer_table_rank
from transformer_calc.estimators.attention import attention_block
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
from transformer_calc.model.units import FLOPS_PER_MAC


# ============================================================================ per-GPU shapes
@dataclass(frozen=True)
class KVGroup:
    """Layers that cache alike: `layers` layers, `elements` cached values per token per layer on
    one rank, `window` the attention span (None: the whole context; W for a sliding layer, the
    chunk for a chunked one)."""

    layers: int
    elements: int
    window: int | None
    topk: int | None = None  # DSA: a query reads (and attends) at most this many cached tokens
    flop_width: int | None = None  # FLOPs/2 per token per attended key and layer (None: the rank's q heads x h_d + h_v)
    # values a query reads per attended token and layer (None: `elements`); Gemma 4's kv-shared layers hold
    # and write none (elements 0) but read the K/V of the layer they share
    read_elements: int | None = None

    def cached(self, tokens: int) -> int:
        """Tokens held after `tokens` positions: all of them, or the last window - 1 (what
        transformers' sliding and chunked cache layers keep between steps)."""
        return tokens if self.window is None else min(tokens, self.window - 1)

    def attended_sum(self, first: int, last: int) -> int:
        """Keys attended over by the tokens at positions first..last (1-based), closed form: the
        token at i attends over i keys, or min(i, window)."""
        cap = self.window if self.window is not None else self.topk

        def prefix(n: int) -> int:  # sum over i = 1..n
            if n <= 0:
                return 0
            if cap is None or n <= cap:
                return n * (n + 1) // 2
            return cap * (cap + 1) // 2 + (n - cap) * cap
        return prefix(last) - prefix(first - 1)


@dataclass(frozen=True)
class StateGroup:
    """Mixer layers of one kind (estimators/mixers/) on one rank: `layers` layers, each holding
    `conv` + `recurrent` state elements per sequence, mixing one decode token in `token_flops` and
    a prompt token in `prompt_token_flops` (beyond the projections, which are matmul weights)."""

    layers: int
    conv: int
    recurrent: int
    token_flops: int
    prompt_token_flops: int
    recurrent_at_activation_dtype: bool = False


@dataclass(frozen=True)
class CompressedGroup:
    """DeepSeek-V4's compressed attention layers of one kind (CSA or HCA) on one rank: `layers` layers whose
    cache, beside the sliding window (a `KVGroup`), holds one compressed entry per `rate` tokens, the open
    window's tokens and (CSA) the last full window's overlap (estimators/deepseek_v4.py `cache_elements`;
    modeling_deepseek_v4.py DeepseekV4CSACache / DeepseekV4HCACache), per sequence and layer, in elements."""

    layers: int
    rate: int  # m (CSA) or m' (HCA): source tokens per compressed entry
    entry: int  # h_d: one compressed entry, the key and value a query attends
    index_entry: int  # d_I: the CSA indexer's compressed key of the same entry (0 on HCA)
    buffer: int  # one open-window token's kv and gate: 2·2·(h_d + d_I) on CSA (series Ca, Cb), 2·h_d on HCA
    overlap: int  # CSA: the last full window's Ca slice, kv and gate, 2·m·(h_d + d_I), held once c >= m (HCA: 0)
    topk: int | None  # CSA: k_I, the entries a query attends (the indexer's top-k); HCA: every entry
    attend_width: int  # FLOPs/2 per attended entry: A·(h_d + h_d), scores and re-weighting of every head
    index_width: int  # FLOPs/2 per entry the indexer scores: H_I·d_I (0 on HCA)

    def held(self, tokens: int, *, read: bool = False, allocated: bool = False) -> int:
        """Elements held after `tokens` positions (what a step reads when `read`: at most k_I entries'
        h_d, every indexer key, the buffers and the overlap); `allocated`: the buffers at their largest
        (m - 1 tokens) and the overlap whatever the context, the slot an engine reserves."""
        n = tokens // self.rate
        attended = min(n, self.topk) if read and self.topk is not None else n
        open_tokens = self.rate - 1 if allocated else tokens % self.rate
        overlap = self.overlap if allocated or tokens >= self.rate else 0
        return self.layers * (self.entry * attended + self.index_entry * n + self.buffer * open_tokens + overlap)

    def attended_sum(self, first: int, last: int) -> tuple[int, int]:
        """(entries attended, entries scored) by the tokens at positions first..last: the token at i
        attends min(floor(i / m), k_I) entries and its indexer scores floor(i / m), closed form."""
        def scored(n: int) -> int:  # sum of floor(i / m), i = 0 .. n
            q, r = divmod(max(n, 0), self.rate)
            return self.rate * q * (q - 1) // 2 + q * (r + 1)

        def attended(n: int) -> int:  # sum of min(floor(i / m), k_I), i = 0 .. n
            cap = self.topk
            if cap is None or n < self.rate * cap:
                return scored(n)
            return scored(self.rate * cap - 1) + (n - self.rate * cap + 1) * cap
        return attended(last) - attended(first - 1), scored(last) - scored(first - 1)


@dataclass(frozen=True)
class Shard:
    """What one of T ranks holds and does (Megatron-LM layout), in elements."""

    layers: int
    head_dim: int
    q_heads: int  # A / T
    kv_heads: int  # K/V heads this rank caches (MLA: every head reads the one latent)
    kv_groups: tuple[KVGroup, ...]  # the cache, by attention kind
    attention_width: int  # h_d + h_v: the two attention matmuls' widths per head
    params: int  # resident parameters, every expert
    gathered_params: int  # tables read by row (untied token embedding, learned positions)
    expert_params: int  # one routed expert's (a dense model: the MLP's) parameters in one layer
    moe_layers: int  # layers whose MLP is routed (all layers' MLPs for a dense model)
    n_experts: int
    experts_per_token: int
    # (T, ep): a step's tokens·k expert assignments of one attention group reach this GPU's
    # experts in the share max(T, ep)/(T·ep) = 1/min(T, ep) (all of them without expert parallelism)
    expert_assignments_share: tuple[int, int]
    matmul_params: int  # weights one token multiplies
    workspace_width: int  # activation elements per token of the prefill transient
    store: QuantizedWeights | None = None  # the weights' bytes in a quantized format (None: a plain dtype)
    tower_params: int = 0  # vision/audio towers and projectors, whole on every GPU (not read by a text step)
    state_groups: tuple[StateGroup, ...] = ()  # the mixer layers' decode state (hybrid models)
    # Zamba2: weights a step reads again because a stored shared block runs at several layers (each
    # application streams its block's weights from HBM: a block of hundreds of MB does not stay in cache)
    reread_params: int = 0
    compressed: tuple[CompressedGroup, ...] = ()  # DeepSeek-V4's CSA and HCA layers' compressed state


def matmul_params(m: ModelConfig, T: int = 1) -> int:
    """Weights that one token multiplies on one of T ranks (all of them for T = 1).

    Q, K, V, O (MLA: its down and up projections), the active experts' MLP matrices, the shared
    experts and their gate, the MoE router, the LM head (tied or not: the embedding lookup is a
    gather, the head a matmul) and OPT's embedding projections. Per rank: heads, MLP width and
    vocabulary split T ways (ceil(V/T) rows), K/V replicated when n_kv < T, router, MLA's latent
    down-projections and OPT's projections replicated. Biases and norms are not matmul weights.
    """
    check_positive_int("T", T)
    if m.deepseek_v4 is not None:
        v4.check_layout(m, T, 1)
        return _deepseek_v4_matmul_params(m)
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
    # DSA indexers (replicated): wq_b, wk, weights_proj; its k_norm is no matmul
    indexer = indexer_matmul_params(m)
    # Zamba2's shared blocks: a token multiplies their weights once per application (T = 1 only)
    shared = m.n_shared_block_applications * matmul_weights_per_application(m)
    # MiMo-V2-Flash: its sliding layers' extra K/V heads
    kv_s = kv_heads_per_rank(m.kv_heads_of(LayerAttention.sliding), T, "sliding_kv_heads")
    shared += m.n_attention_layers(LayerAttention.sliding) * sliding_extra(m, q_rank, kv_rank, kv_s)[0]
    if m.irregular_layers:  # Gemma 4's and Gemma 3n's layers (estimators/gemma_layers.py)
        return varied_matmul_params(m, T, attention, n_matrices) + mixers + mlp + lm_head + projections + shared
    return (m.n_softmax_layers() * attention + mixers + mlp + lm_head + projections + m.n_indexer_layers * indexer
            + shared)


def _kv_groups(m: ModelConfig, spec: InferenceSpec, cached_heads: int) -> tuple[KVGroup, ...]:
    """The cache per attention kind, on one rank.

    Standard attention: K and V of the rank's cached heads, 2·n_kv_rank·h_d per token and layer.
    MLA with the latent cache: the compressed latent and the shared rotary key, r_kv + d_rope per
    token and layer (modeling_deepseek_v3.py caches them; transformers 5 too), the same on every
    TP rank (replicated, not split); decompressed: per-head K (h_d) and V (h_v) of the rank's
    heads, as engines that expand the latent before caching hold.
    """
    T = spec.tensor_parallel
    if m.irregular_layers and not m.is_mla:
        return _varied_kv_groups(m, T)
    per_layer = attention_block(m).cached_elements(m, T, cached_heads, spec.mla_cache == "latent")
    windows = {LayerAttention.full: None, LayerAttention.sliding: m.sliding_window,
               LayerAttention.chunked: m.attention_chunk_size}

    def elements(kind: LayerAttention) -> int:
        if kind is LayerAttention.sliding and m.sliding_kv_heads is not None:  # MiMo-V2-Flash: 2·n_kv heads
            return kv_heads_per_rank(m.sliding_kv_heads, T, "sliding_kv_heads") * (m.head_dim + m.v_dim)
        return per_layer

    groups = tuple(
        KVGroup(n, elements(kind), windows[kind], m.index_topk if kind is LayerAttention.full else None)
        for kind in LayerAttention
        if kind in ATTENTION_KINDS and (n := m.n_kv_layers(kind))
    )
    if m.is_dsa:
        # DSA's indexer keys (modeling_deepseek_v32.py DeepseekV32Indexer: `update_indexer`, one
        # d_I-wide key per token and indexer layer, DynamicIndexedLayer.indexer_keys), replicated on
        # every rank; the indexer scores every cached key: 2·H_I·(d_I + 1) FLOPs per key (tech report §2.1)
        H, d = m.index_n_heads or 0, m.index_head_dim or 0
        groups += (KVGroup(m.n_indexer_layers, d, None, None, H * (d + 1)),)
    if m.n_shared_block_applications:
        # Zamba2's shared attention caches its K and V at each application's layer (modeling_zamba2.py
        # Zamba2Attention: past_key_values.update(..., layer_idx) of the hybrid layer), full attention
        groups += (KVGroup(m.n_shared_block_applications, per_layer, None),)
    return groups


def _varied_kv_groups(m: ModelConfig, T: int = 1) -> tuple[KVGroup, ...]:
    """Gemma 4's cache on one of T ranks, per attention kind and kv sharing.

    modeling_gemma4.py Gemma4TextAttention: a layer of `kind` caches its keys and values, n_kv·h_d
    each per token (a full layer: global_head_dim and num_global_key_value_heads; with k=v the value
    is the unrotated key, still a tensor of its own: `past_key_values.update(key_states,
    value_states)`); a kv-shared layer (the last num_kv_shared_layers) caches nothing (its cache
    layer stays empty) and attends over the K/V of the last earlier layer of its kind
    (`shared_kv_states`), reading as many values per token. Every query head scores over h_d and
    re-weights values of h_d: 2·A·h_d FLOPs/2 per key. Per rank (vLLM gemma4.py Gemma4Attention: num_kv_heads
    max(1, n_kv / T), the rank's A/T query heads): `kv_heads_per_rank` of the kind's K/V heads, 2·(A/T)·h_d.
    """
    first_shared, windows = m.first_kv_shared_layer, {LayerAttention.full: None, LayerAttention.sliding: m.sliding_window,
                                                      LayerAttention.chunked: m.attention_chunk_size}
    groups: list[KVGroup] = []
    for kind in (k for k in LayerAttention if k in ATTENTION_KINDS):
        what = m.kv_heads_field(kind)
        hd = m.kind_head_dim(kind)
        elements = KV_TENSORS * kv_heads_per_rank(m.kv_heads_of(kind), T, what) * hd
        width = m.n_heads // T * 2 * hd
        if own := m.n_attention_layers(kind, 0, first_shared):
            groups.append(KVGroup(own, elements, windows[kind], None, width))
        if shared := m.n_attention_layers(kind, first_shared, m.n_layers):
            groups.append(KVGroup(shared, 0, windows[kind], None, width, read_elements=elements))
    return tuple(groups)


def mixer_state_groups(m: ModelConfig, T: int) -> tuple[StateGroup, ...]:
    """The decode state of the mixer layers (estimators/mixers/), per kind, on one of T ranks."""
    out = []
    for kind in m.mixer_kinds:
        mixer = MIXERS[kind]
        st = mixer.state(m, T)
        out.append(StateGroup(m.n_attention_layers(kind), st.conv, st.recurrent, mixer.token_flops(m, T),
                               mixer.prompt_token_flops(m, T), st.recurrent_at_activation_dtype))
    return tuple(out)


def _deepseek_v4_matmul_params(m: ModelConfig) -> int:
    """Weights one DeepSeek-V4 token multiplies: `forward_flops` of one token (estimators/deepseek_v4.py:
    q_a/q_b/kv projections, grouped o_a/o_b, both compressors' projections, the indexers' projections,
    the hyper-connections and hc_head, k routed experts, the shared expert, the router) less its attention
    cores and indexer scoring, / 2, plus the LM head D·V."""
    blocks = m.deepseek_v4
    assert blocks is not None
    f = v4.forward_flops(m, 1, 1)
    scoring = len(blocks.csa_layer_ids) * FLOPS_PER_MAC * blocks.index_n_heads * (1 // blocks.csa_compress_rate) \
        * blocks.index_head_dim  # one token's indexer scores (none unless m = 1)
    per_token = f.blocks - f.attention_cores + f.indexer - scoring + f.idle_compressors
    return per_token // FLOPS_PER_MAC + m.d_model * m.vocab_size


def _deepseek_v4_shard(m: ModelConfig, spec: InferenceSpec) -> Shard:
    """DeepSeek-V4 on one GPU, or with its routed experts over ep GPUs (T = 1: each GPU runs its own
    sequences' attention and holds n_experts / ep experts; docs/formulas.md §5.16 "Inference and
    serving"). Its cache is its decode state,
    estimators/deepseek_v4.py `cache_elements` (equal to transformers 5.23's cache tensors): every layer's
    sliding window of the one K = V head (`KVGroup`s: 2·h_d on a sliding-only layer, h_d on a compressed
    one, the last W - 1 tokens), and the CSA / HCA layers' compressed entries, open-window buffers and
    CSA overlap (`CompressedGroup`). A query attends min(c, W) window keys and, on a CSA layer, the k_I
    entries its indexer picks (every entry on an HCA layer), as a sparse kernel reads them; the CSA
    indexer scores every entry. Weights: every parameter resident; a step reads all but the token
    embedding and the routed experts no token touches."""
    T, ep = spec.tensor_parallel, spec.expert_parallel
    v4.check_layout(m, T, ep)
    expert_layout(m, T, ep)
    if spec.cache_kv_heads is not None:
        raise ValueError("cache_kv_heads does not apply to DeepSeek-V4 (one K = V head and compressed entries); drop it")
    if not spec.kv_cache:
        from transformer_calc.estimators.support_table import Unpriced, refusal
        raise refusal(m, "kv_cache false (the naive mode)", Unpriced.naive_kv_cache)
    m = expert_slots(m, spec)
    v4.check(m)
    check_tensor_parallel(m, T, ep, 1)  # ep divides the experts (and their redundant slots)
    blocks = m.deepseek_v4
    assert blocks is not None
    D, A, hd, L = m.d_model, m.n_heads, m.head_dim, m.n_layers
    window, compressed = _deepseek_v4_cache_groups(m)
    full = count_params(m)
    expert = v4.GATED_MATRICES * D * m.moe_d_ff  # DeepseekV4Experts: no bias
    held_experts = m.n_experts // ep  # this GPU's routed experts (transformers' ep plan: split by expert)
    n_in = GATED_MATRICES - 1  # gate and up
    qkv_width = (A + 1) * hd  # q_b_proj's A·h_d and kv_proj's h_d
    mlp_width = n_in * (m.experts_per_token * m.moe_d_ff + m.shared_expert_d_ff)
    return Shard(
        layers=L,
        head_dim=hd,
        q_heads=A,
        kv_heads=m.n_kv_heads,
        kv_groups=window,
        attention_width=2 * hd,
        params=full.total - L * (m.n_experts - held_experts) * expert,
        gathered_params=0 if m.tied_embeddings else m.vocab_size * m.d_embedding,
        expert_params=expert,
        moe_layers=L,
        n_experts=held_experts,
        expert_assignments_share=(T, ep),
        experts_per_token=m.experts_per_token,
        matmul_params=_deepseek_v4_matmul_params(m),
        # the block's n_hc residual streams in and out (mHC, report §2.2) and its widest intermediate
        workspace_width=2 * blocks.hc_mult * D + max(qkv_width, mlp_width),
        store=_store(m, spec, 1),
        compressed=compressed,
    )


def _deepseek_v4_cache_groups(m: ModelConfig) -> tuple[tuple[KVGroup, ...], tuple[CompressedGroup, ...]]:
    """DeepSeek-V4's cache as roofline groups: every layer's sliding window of the one K = V head (2·h_d on a
    sliding-only layer, h_d on a compressed one), and the CSA / HCA layers' compressed entries."""
    blocks = m.deepseek_v4
    assert blocks is not None
    A, hd, W, L = m.n_heads, m.head_dim, m.sliding_window or 1, m.n_layers
    n_csa, n_hca = len(blocks.csa_layer_ids), len(blocks.hca_layer_ids)
    n_sliding = L - n_csa - n_hca
    d_i, m_c = blocks.index_head_dim, blocks.csa_compress_rate
    kv_and_gate = v4.KV_AND_GATE
    window = tuple(g for g in (KVGroup(n_sliding, KV_TENSORS * hd, W), KVGroup(n_csa + n_hca, hd, W)) if g.layers)
    width = A * 2 * hd  # every head scores over h_d and re-weights h_d-wide values
    compressed = tuple(g for g in (
        CompressedGroup(n_csa, m_c, hd, d_i, kv_and_gate * v4.CSA_SERIES * (hd + d_i), kv_and_gate * m_c * (hd + d_i),
                        blocks.index_topk, width, blocks.index_n_heads * d_i),
        CompressedGroup(n_hca, blocks.hca_compress_rate, hd, 0, kv_and_gate * hd, 0, None, width, 0),
    ) if g.layers)
    return window, compressed


def expert_layout(m: ModelConfig, T: int, ep: int) -> tuple[int, int]:
    """The replica's GPUs and each routed expert's tensor-parallel width under inference expert
    parallelism: (gpus, etp).

    ep divides T: the experts are spread over the T-way tensor-parallel group (vLLM's
    `--enable-expert-parallel`, where EP = TP), n_experts/ep per GPU, each split T/ep ways: the
    replica is T GPUs. T divides ep: attention is data-parallel over ep/T groups of T GPUs
    ("DP attention", SGLang/DeepSeek deployments), each GPU holds n_experts/ep whole experts: the
    replica is ep GPUs, and B counts the sequences of one attention group. Other pairs cannot be
    laid out.
    """
    if ep > 1 and not m.is_moe:
        raise ValueError(f"expert parallelism ep ({ep}) needs a mixture-of-experts model; use ep 1")
    if T % ep and ep % T:
        raise ValueError(
            f"the expert-parallel size ep ({ep}) and T ({T}) must divide one another; "
            f"use an ep that divides {T} or a multiple of it"
        )
    return max(T, ep), max(T // ep, 1)


def expert_slots(m: ModelConfig, spec: InferenceSpec) -> ModelConfig:
    """The model as the GPUs hold it with `redundant_experts` r: n_experts + r expert slots, the
    extra ones copies of the busiest experts (DeepSeek's EPLB, SGLang `--ep-num-redundant-experts`;
    DeepSeek-V3 report sec. 3.4: 32 redundant experts in its decode deployment), so ep must divide
    n_experts + r (SGLang's EP72 and EP48 of 256 + 32). Each GPU holds and reads (n_experts + r)/ep
    experts; a token still uses k of them, so the FLOPs and all-to-alls are unchanged. The router is
    counted with n_experts + r outputs: D·r parameters per MoE layer over the model's (DeepSeek-V3 at
    r = 32: 13 M of 671 B), stated, not removed. r = 0: the model itself."""
    r = spec.redundant_experts
    if not r:
        return m
    if not m.is_moe:
        raise ValueError(f"redundant_experts ({r}) needs a mixture-of-experts model; use 0")
    slots = m.n_experts + r
    if slots % spec.expert_parallel:
        raise ValueError(f"n_experts + redundant_experts ({m.n_experts} + {r} = {slots}) must be divisible by the "
                         f"expert-parallel size ep ({spec.expert_parallel}); use an ep that divides {slots}")
    return m.model_copy(update={"n_experts": slots})


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
    """What one GPU holds and does. Attention, dense MLPs, shared experts, embedding and head are
    split T ways; routed experts ep ways, each over etp = T/ep ranks (`expert_layout`). The matmul
    FLOPs per token stay the T-way average: with ep > T each GPU serves ep/T groups' tokens for
    1/ep of the experts, as much work per GPU as the T-way split."""
    if m.deepseek_v4 is not None:
        return _deepseek_v4_shard(m, spec)
    if m.irregular_layers and spec.cache_kv_heads is not None:
        raise ValueError(f"cache_kv_heads does not apply to a model whose layers cache unlike K/V heads "
                         f"({', '.join(m.irregular_layers)}); drop it")
    T, ep = spec.tensor_parallel, spec.expert_parallel
    _, etp = expert_layout(m, T, ep)
    m = expert_slots(m, spec)
    check_tensor_parallel(m, T, ep, etp)
    D, hd = m.d_model, m.head_dim
    if not (block := attention_block(m)).caches_kv_heads and spec.cache_kv_heads is not None:
        raise ValueError(f"cache_kv_heads does not apply to {block.name}; drop it")
    if m.sliding_kv_heads is not None and spec.cache_kv_heads is not None:
        raise ValueError("cache_kv_heads sets one K/V head count, but this model's sliding layers have their own "
                         f"(sliding_kv_heads {m.sliding_kv_heads}); drop cache_kv_heads")
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
    qkv_width = attention_block(m).qkv_width(m, m.n_heads // T, widest_kv)
    if m.irregular_layers and not m.is_mla:  # Gemma 4: the widest kind's q, k, v on this rank
        qkv_width = max((m.n_heads // T + KV_TENSORS * kv_heads_per_rank(m.kv_heads_of(k), T)) * m.kind_head_dim(k)
                        for k in ATTENTION_KINDS if k in m.attention_pattern)
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
        store=_store(m, spec, etp),
        tower_params=m.tower_params,
        state_groups=mixer_state_groups(m, T),
        reread_params=shared_block_rereads(m),
    )


def _store(m: ModelConfig, spec: InferenceSpec, etp: int) -> QuantizedWeights | None:
    """The rank's weights in a quantized format or as a checkpoint stores them (None: a plain dtype)."""
    if spec.weight_dtype == CHECKPOINT and spec.stored is not None:
        return stored_shard(m, spec.stored, spec.tensor_parallel, spec.expert_parallel, etp)
    if spec.weight_dtype in FORMATS:
        return quantized_weights(m, spec.weight_dtype, spec.tensor_parallel, spec.expert_parallel)
    return None
