"""What one tensor/expert-parallel rank holds for inference, as data: its KV cache as groups of layers
(`KVGroup`; `CompressedGroup` for a cache that grows by one entry per m tokens), its mixer layers' decode
state (`StateGroup`), its weight matrices (`Matrix`) and their stored bytes in a format
(`QuantizedWeights`), and the whole share (`Shard`). The types only: shard.py builds them from the layer
plan, each block's own module contributes its groups (inference/gemma_layers.py, kind_attention.py,
dsa.py, shared_block.py, deepseek_v4.py), and every inference estimate reads them without knowing the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

KV_TENSORS = 2  # K and V are cached; the query is not (seed eq. kv_cache_memory; errata INF-1)


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
class Matrix:
    """One kind of weight matrix on one rank: `count` copies per layer... (already multiplied
    out over layers), each `out` x `inputs` (inputs: the dimension the blocks run along)."""

    name: str  # ggml-style category: attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down, ...
    inputs: int
    elements: int  # of one copy
    layer: int | None  # its layer (None: not in a block)
    expert: bool = False  # a routed expert's (3-D in GGUF: one tensor for every expert of a layer)


@dataclass(frozen=True)
class QuantizedWeights:
    """Bytes of one rank's weights in a format."""

    format: str
    quantized_params: int  # elements stored in blocks
    other_params: int  # elements left at rest_bits
    quantized_bytes: int  # blocks + per-tensor extras (GPTQ g_idx, NVFP4 scales)
    other_bytes: int
    total_bytes: int
    expert_bytes: Fraction  # one routed expert of one layer, the mean over the MoE layers (0: dense)
    expert_params: int  # its elements, biases included
    gathered_bytes: int  # the token embedding and learned positions (gathers), as stored
    bits_per_quantized_weight: float


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
