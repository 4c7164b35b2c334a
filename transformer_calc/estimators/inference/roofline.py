"""Inference cost per GPU: KV cache, memory, and prefill/decode time as a roofline.

Source: seed notes 003, Part "Inference" (§ "The Bare Minimum and the kv-Cache", "Basic Memory,
FLOPs, and Latency", "Case Study: Falcon-40B") and App. "Compute-bound vs Memory-bound";
kipply 2022, "Transformer Inference Arithmetic"; Pope et al. 2022 (prefill and decode). The seed's
slips are corrected as listed in docs/seed-errata.md, rows INF-*, FAL-* and ROOF-*.

Conventions (the ones published calculators disagree on):

- B sequences run together, each with an S-token prompt, generating N_new tokens. The prefill
  processes the S prompt tokens and yields the first new token; then N_new - 1 decode steps yield
  the rest. Decode step j (j = 1 .. N_new-1) feeds token j, at position S + j, so it attends over
  a context of c = S + j tokens. The cache peaks at S + N_new - 1 tokens.
- FLOPs: 2 per multiply-accumulate of every weight matrix, for every processed token: Q, K, V, O,
  the MLP (the top-k experts of a MoE), the router, the LM head, OPT's embedding projections. Not
  counted: norms, biases, activation functions, softmax, the embedding lookup (a gather, not a
  matmul). The LM head runs on every prompt token, as in the seed's 2·B·S·N and a plain forward;
  engines that project only the last prompt position do 2·B·(S-1)·V·D less in the prefill.
- Attention: QK^T and softmax·V cost 2·2·A·h_d·c FLOPs per token per layer at context c. Causal
  attention is counted exactly: a prompt of S tokens costs the sum over i = 1..S of that at c = i,
  i.e. 2·A·h_d·S·(S+1) per sequence and layer (FlashAttention-style kernels skip masked blocks).
- Bytes moved per step: every resident weight read once, except the tables a step only gathers
  rows from (an untied token embedding, learned positions); a MoE reads only the experts its
  tokens touch. Plus the K/V cache read and the new K/V written. Activations are assumed to stay
  on chip (fused kernels) and are not counted.
- Time of a step: max(FLOPs / peak, bytes / bandwidth), the roofline; compute and memory traffic
  overlap (seed App. "Compute-bound vs Memory-bound"). Tensor-parallel communication is added on
  top (not overlapped).
- Per GPU under T-way tensor parallelism (Megatron-LM, as `params.tensor_parallel_params`): query
  heads, MLP width and vocabulary split T ways; K/V heads split when T divides n_kv, replicated
  when n_kv divides T (each GPU then holds one K/V head and caches it). Other T are refused.
- Bytes per element: the dtype's bits / 8 (int4 packs two values per byte). A weight total is
  rounded up to whole bytes once; a plain dtype (int4, int8, fp8) takes every parameter at that
  dtype, without scales. The quantized formats (`quant.FORMATS`: gptq-int4, awq-int4, q8_0,
  q4_k_m, q5_k_m, mxfp4, nvfp4) count their codes, group scales and zero points exactly and leave
  the tensors they do not quantize at 16 (GGUF: 32) bits; see quant.py. A model's
  `weight_format` (gpt-oss: mxfp4) is its default weight dtype.
- Memory is per GPU, in exact bytes, compared with the GPU's `memory_bytes` (the hardware
  table's capacity, decimal GB as marketed).
- Hybrid models (estimators/mixers/: Gated DeltaNet layers beside attention): a mixer layer keeps a
  decode state constant in the context instead of a KV cache (`decode_state`): its conv state at
  the activation dtype and its recurrent state at `state_dtype` (default fp32, as transformers'
  cache holds it). A decode step reads and writes the state of every sequence (counted with the
  cache's reads and writes), a prompt writes it once; the mixing FLOPs (conv, state, chunked
  delta rule) are counted with the attention FLOPs: the recurrent form for one token, the chunked
  form for a prompt. Memory, the largest B and S, and the serving capacity count the state per
  sequence beside the KV cache.
- DeepSeek-V4 (T = 1, its routed experts over ep GPUs; docs/formulas.md §5.16 "Inference and serving"):
  its decode state is its KV
  cache, the sliding window of every layer (`_KVGroup`s) and the compressed entries, open windows and
  overlap of its CSA and HCA layers (`_Compressed`), equal to transformers' cache tensors. A CSA query
  attends the k_I entries its indexer picks; the indexer scores all. floor(c/m) and c mod m step with the
  context, so `decode_sum` sums the contexts of each residue modulo lcm(m, m') apart, each in closed form.

All byte and FLOP counts are exact ints; seconds and ratios are floats.
"""

from __future__ import annotations

from transformer_calc.errors import TcalcError

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from transformer_calc.model.units import BITS_PER_BYTE, FLOPS_PER_MAC
from transformer_calc.model.config import ATTENTION_KINDS, LayerAttention, ModelConfig
from transformer_calc.devices.hardware import COLLECTIVE_LATENCY_S, DTYPE_ALIASES, DTYPES, GPU, peak_flops
from transformer_calc.model.checkpoint import StoredWeights
import transformer_calc.estimators.deepseek_v4 as v4
from transformer_calc.estimators.inference.quant import FORMATS, QuantizedWeights, quantized_weights, resolve_format, stored_shard
from transformer_calc.estimators.params import (
    GATED_MATRICES,
    PLAIN_MATRICES,
    attention_weights,
    check_tensor_parallel,
    count_params,
    indexer_params,
    kv_heads_per_rank,
    latent_projections,
    mlp_params,
    per_layer_table_rank,
    sliding_extra,
    tensor_parallel_params,
    varied_attention,
)
from transformer_calc.estimators.mixers import MIXERS
from transformer_calc.estimators.shared_block import matmul_weights_per_application, shared_block_rereads

KV_TENSORS = 2  # K and V are cached; the query is not (seed eq. kv_cache_memory; errata INF-1)
ALL_REDUCES_PER_LAYER = 2  # Megatron-LM: after the attention output and after the MLP output

# Storage dtypes for weights, the KV cache and activations -> bits per element.
DTYPE_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}
# KV-cache dtypes: the plain ones, and llama.cpp's block-quantized cache types (`--cache-type-k/v`:
# ggml-common.h blocks of 32 values: q8_0 34 B, q4_0 18 B, q4_1 20 B, q5_0 22 B, q5_1 24 B,
# iq4_nl 18 B), as bits per value.
KV_DTYPE_BITS: dict[str, int | Fraction] = DTYPE_BITS | {
    "q8_0": Fraction(34 * 8, 32), "q4_0": Fraction(18 * 8, 32), "q4_1": Fraction(20 * 8, 32),
    "q5_0": Fraction(22 * 8, 32), "q5_1": Fraction(24 * 8, 32), "iq4_nl": Fraction(18 * 8, 32),
}
CHECKPOINT = "checkpoint"  # weight_dtype: the bytes a checkpoint's headers give (InferenceSpec.stored)
_FLOAT_COMPUTE = ("fp32", "fp16", "bf16", "fp8")  # weight dtypes that are also the matmul dtype
_ACTIVATION_DEFAULT = ("fp32", "fp16", "bf16")  # compute dtypes that are also the activation dtype

COMPUTE, MEMORY, MIXED = "compute", "memory", "mixed"
STATE_DTYPE = "fp32"  # a mixer's recurrent state: transformers' LinearAttentionLayer keeps the fp32 state the delta rule returns
MLA_CACHE_KINDS = ("latent", "decompressed")
MAX_TENSOR_PARALLEL = 1024  # the largest T `min_tensor_parallel` tries (beyond any NVLink domain)
MAX_CONTEXT_SEARCH = 2**62  # the longest prompt `inference_memory` reports (bounds its bisection)


# ============================================================================ the input
@dataclass(frozen=True)
class InferenceSpec:
    """What is run: B prompts of S tokens, N_new new tokens each, on T tensor-parallel GPUs.

    Dtypes left as None are derived: compute_dtype (whose peak the roofline uses) is the weight
    dtype for fp32/fp16/bf16/fp8 weights and bf16 for int8/int4 (weight-only quantization:
    kernels dequantize to bf16); activation_dtype (all-reduces, workspace) is the compute dtype
    when that is fp32/fp16/bf16, else bf16; kv_dtype is the activation dtype.

    cache_kv_heads changes the cache only (its size, reads and writes), not the weights: the
    seed's Falcon-40B study pretends MHA this way. To change the model itself, override the
    ModelConfig's n_kv_heads.
    """

    batch_size: int  # B, concurrent sequences
    prompt_len: int  # S, prompt tokens per sequence
    new_tokens: int = 1  # N_new, generated tokens per sequence (the first comes from the prefill)
    tensor_parallel: int = 1  # T
    expert_parallel: int = 1  # ep: each GPU holds n_experts / ep routed experts (weights and reads)
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None
    compute_dtype: str | None = None
    activation_dtype: str | None = None
    cache_kv_heads: int | None = None  # K/V heads the cache holds; None: the model's n_kv_heads
    kv_cache: bool = True  # False: the seed's naive inference, every step reprocesses the context
    collective_latency_s: float = COLLECTIVE_LATENCY_S
    mla_cache: str = "latent"  # MLA: "latent" (r_kv + d_rope per token, transformers 5) or "decompressed"
    stored: StoredWeights | None = None  # a checkpoint's stored bytes, used when weight_dtype is "checkpoint"
    # images per sequence, encoded by the vision tower in the prefill; their tokens are part of
    # prompt_len (`with_images` adds both)
    images: int = 0
    state_dtype: str | None = None  # hybrids: the recurrent (delta-rule / SSM) state's dtype; None: fp32
    # MoE: redundant expert slots (SGLang --ep-num-redundant-experts, DeepSeek's EPLB): the ep GPUs
    # hold n_experts + r expert copies, (n_experts + r) / ep each; routing (k per token) is unchanged
    redundant_experts: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.redundant_experts, bool) or not isinstance(self.redundant_experts, int) or self.redundant_experts < 0:
            raise ValueError(f"redundant_experts ({str(self.redundant_experts)[:40]!r}) must be a whole number >= 0")
        for name in ("batch_size", "prompt_len", "new_tokens", "tensor_parallel", "expert_parallel"):
            _check_positive_int(name, getattr(self, name))
        if isinstance(self.images, bool) or not isinstance(self.images, int) or self.images < 0:
            raise ValueError(f"images ({str(self.images)[:40]!r}) must be a whole number >= 0")
        if self.cache_kv_heads is not None:
            _check_positive_int("cache_kv_heads", self.cache_kv_heads)
        if not isinstance(self.kv_cache, bool):
            raise ValueError(f"kv_cache ({self.kv_cache!r}) must be true or false")
        if self.mla_cache not in MLA_CACHE_KINDS:
            raise ValueError(f"mla_cache ({str(self.mla_cache)[:80]!r}) must be one of {', '.join(MLA_CACHE_KINDS)}")
        latency = self.collective_latency_s
        if isinstance(latency, bool) or not isinstance(latency, (int, float)) or not (
            math.isfinite(latency) and latency >= 0
        ):
            raise ValueError(
                f"collective_latency_s ({latency!r}) must be a finite number of seconds >= 0"
            )
        if isinstance(self.weight_dtype, str) and self.weight_dtype.strip().lower() == CHECKPOINT:
            if self.stored is None:
                raise ValueError("weight_dtype 'checkpoint' needs a checkpoint (a model folder, repo id or .gguf file)")
            weight = CHECKPOINT
        else:
            weight = _weight_dtype(self.weight_dtype)
        if self.compute_dtype is None:
            compute = self.stored.compute_dtype if weight == CHECKPOINT and self.stored is not None else (
                weight if weight in _FLOAT_COMPUTE else "bf16")
        else:
            compute = checked_dtype("compute_dtype", self.compute_dtype, DTYPES)
        if self.activation_dtype is None:
            activation = compute if compute in _ACTIVATION_DEFAULT else "bf16"
        else:
            activation = checked_dtype("activation_dtype", self.activation_dtype, DTYPE_BITS)
        kv = activation if self.kv_dtype is None else checked_dtype("kv_dtype", self.kv_dtype, KV_DTYPE_BITS)
        state = STATE_DTYPE if self.state_dtype is None else checked_dtype("state_dtype", self.state_dtype, DTYPE_BITS)
        for name, value in (
            ("weight_dtype", weight),
            ("compute_dtype", compute),
            ("activation_dtype", activation),
            ("kv_dtype", kv),
            ("state_dtype", state),
            ("collective_latency_s", float(latency)),
        ):
            object.__setattr__(self, name, value)  # resolved once; the dataclass stays frozen

    @property
    def peak_context_len(self) -> int:
        """Tokens per sequence in the cache at the last decode step: S + N_new - 1."""
        return self.prompt_len + self.new_tokens - 1

    # The derived dtypes as __post_init__ resolved them: a None given is never left in a built spec.
    @property
    def resolved_kv_dtype(self) -> str:
        assert self.kv_dtype is not None  # resolved in __post_init__
        return self.kv_dtype

    @property
    def resolved_compute_dtype(self) -> str:
        assert self.compute_dtype is not None  # resolved in __post_init__
        return self.compute_dtype

    @property
    def resolved_state_dtype(self) -> str:
        assert self.state_dtype is not None  # resolved in __post_init__
        return self.state_dtype

    @property
    def resolved_activation_dtype(self) -> str:
        assert self.activation_dtype is not None  # resolved in __post_init__
        return self.activation_dtype


def _check_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} ({value!r}) must be a whole number >= 1")


def checked_dtype(name: str, value: object, allowed: dict[str, int] | dict[str, int | Fraction] | tuple[str, ...]) -> str:
    key = value.strip().lower() if isinstance(value, str) else None
    key = DTYPE_ALIASES.get(key, key) if key is not None else None
    if key is None or key not in allowed:
        raise ValueError(f"{name} ({value!r}) is not supported; use one of {', '.join(allowed)}")
    return key


def _weight_dtype(value: object) -> str:
    """A plain dtype (DTYPE_BITS) or a quantization format with its scales (quant.FORMATS)."""
    if isinstance(value, str) and (fmt := resolve_format(value)) is not None:
        return fmt
    try:
        return checked_dtype("weight_dtype", value, DTYPE_BITS)
    except TcalcError:
        raise
    except ValueError:
        raise ValueError(
            f"weight_dtype ({str(value)[:40]!r}) is not supported; use one of {', '.join(DTYPE_BITS)} "
            f"or a quantized format: {', '.join(FORMATS)}"
        ) from None


def dtype_bytes(dtype: str) -> Fraction:
    """Bytes per element: bits / 8, exact (int4: 1/2)."""
    return Fraction(DTYPE_BITS[checked_dtype("dtype", dtype, DTYPE_BITS)], BITS_PER_BYTE)


def _bytes(elements: int, bits: int | Fraction) -> int:
    """Whole bytes holding `elements` values of `bits` bits (int4: rounded up once)."""
    return -(-elements * bits // BITS_PER_BYTE)


# ============================================================================ per-GPU shapes
@dataclass(frozen=True)
class _KVGroup:
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
class _StateGroup:
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
class _Compressed:
    """DeepSeek-V4's compressed attention layers of one kind (CSA or HCA) on one rank: `layers` layers whose
    cache, beside the sliding window (a `_KVGroup`), holds one compressed entry per `rate` tokens, the open
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
class _Shard:
    """What one of T ranks holds and does (Megatron-LM layout), in elements."""

    layers: int
    head_dim: int
    q_heads: int  # A / T
    kv_heads: int  # K/V heads this rank caches (MLA: every head reads the one latent)
    kv_groups: tuple[_KVGroup, ...]  # the cache, by attention kind
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
    state_groups: tuple[_StateGroup, ...] = ()  # the mixer layers' decode state (hybrid models)
    # Zamba2: weights a step reads again because a stored shared block runs at several layers (each
    # application streams its block's weights from HBM: a block of hundreds of MB does not stay in cache)
    reread_params: int = 0
    compressed: tuple[_Compressed, ...] = ()  # DeepSeek-V4's CSA and HCA layers' compressed state


def matmul_params(m: ModelConfig, T: int = 1) -> int:
    """Weights that one token multiplies on one of T ranks (all of them for T = 1).

    Q, K, V, O (MLA: its down and up projections), the active experts' MLP matrices, the shared
    experts and their gate, the MoE router, the LM head (tied or not: the embedding lookup is a
    gather, the head a matmul) and OPT's embedding projections. Per rank: heads, MLP width and
    vocabulary split T ways (ceil(V/T) rows), K/V replicated when n_kv < T, router, MLA's latent
    down-projections and OPT's projections replicated. Biases and norms are not matmul weights.
    """
    _check_positive_int("T", T)
    if m.deepseek_v4 is not None:
        v4.check_layout(m, T, 1)
        return _deepseek_v4_matmul_params(m)
    D = m.d_model
    check_tensor_parallel(m, T)
    q_rank, kv_rank = m.n_heads // T, kv_heads_per_rank(m.n_kv_heads, T, "n_kv_heads")
    n_matrices = GATED_MATRICES if m.gated_mlp else PLAIN_MATRICES
    q, k, v, o = attention_weights(m, q_rank, q_rank if m.is_mla else kv_rank)
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
    indexer = indexer_params(m) - 2 * (m.index_head_dim or 0) if m.is_dsa else 0
    # Zamba2's shared blocks: a token multiplies their weights once per application (T = 1 only)
    shared = m.n_shared_block_applications * matmul_weights_per_application(m)
    # MiMo-V2-Flash: its sliding layers' extra K/V heads
    kv_s = kv_heads_per_rank(m.kv_heads_of(LayerAttention.sliding), T, "sliding_kv_heads")
    shared += m.n_attention_layers(LayerAttention.sliding) * sliding_extra(m, q_rank, kv_rank, kv_s)[0]
    if m.irregular_layers:  # Gemma 4: every layer's own q, k, v, o; the kv-shared layers' wider MLP; the
        # per-layer input matmuls (the model projection D x L·P, each layer's gate and projection). Per rank
        # (params._gemma4_parts, vLLM gemma4.py): q, o and the MLP T ways, K/V heads `kv_heads_per_rank`, the
        # model projection column-parallel (D x L·P/T), the gate and projection replicated (2·L·D·P)
        attention_all = _varied_attention_matmuls(m, T) if m.attention_pattern and not m.is_mla else 0
        if not attention_all:
            attention_all = m.n_softmax_layers() * attention
        wide = (m.kv_shared_layers * n_matrices * D * ((m.shared_expert_d_ff if m.is_moe else m.d_ff) // T)
                if m.kv_shared_double_mlp else 0)
        L_P = m.n_layers * m.per_layer_input_dim
        ple = D * L_P // T + 2 * D * L_P
        # Gemma 3n (modeling_gemma3n.py): per layer AltUp's router twice (D x n), its prediction (n x n²) and
        # correction (n x n) coefficients and the token's n x n mix of its D x n streams (computed coefficients,
        # counted here as their D·n² multiply-adds per token), LAuReL's D x r x D; the model's 2·(n - 1) D x D
        # AltUp projections
        n, r = m.altup_inputs, m.laurel_rank
        altup = (m.n_layers * (2 * D * n + n ** 3 + D * n * n + n * n) + 2 * (n - 1) * D * D) if n is not None else 0
        laurel = m.n_layers * 2 * D * r if r is not None else 0
        return attention_all + mixers + mlp + wide + ple + altup + laurel + lm_head + projections + shared
    return (m.n_softmax_layers() * attention + mixers + mlp + lm_head + projections + m.n_indexer_layers * indexer
            + shared)


def _varied_attention_matmuls(m: ModelConfig, T: int) -> int:
    """Gemma 4's q, k, v, o weights over every layer on one of T ranks (`params.varied_attention`); 0 when
    the layers do not vary by kind (Gemma 3n: its base shape, `attention_by_field` empty)."""
    if not count_params(m).attention_by_field:
        return 0
    first_shared, total = m.first_kv_shared_layer, 0
    for kind in (k for k in LayerAttention if k in ATTENTION_KINDS):
        for shared, (lo, hi) in ((False, (0, first_shared)), (True, (first_shared, m.n_layers))):
            if n := m.n_attention_layers(kind, lo, hi):
                parts = varied_attention(m, kind, shared, T)
                total += n * (parts["attn_q"] + parts["attn_k"] + parts["attn_v"] + parts["attn_o"])
    return total


def _kv_groups(m: ModelConfig, spec: InferenceSpec, cached_heads: int) -> tuple[_KVGroup, ...]:
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
    if m.is_mla:
        if spec.mla_cache == "latent":
            per_layer = (m.kv_lora_rank or 0) + (m.qk_rope_head_dim or 0)
        else:
            per_layer = (m.n_heads // T) * (m.head_dim + m.v_dim)
    else:
        # K of h_d and V of h_v per cached head (h_v = head_dim unless v_head_dim is given: MiMo-V2-Flash)
        per_layer = cached_heads * (m.head_dim + m.v_dim)
    windows = {LayerAttention.full: None, LayerAttention.sliding: m.sliding_window,
               LayerAttention.chunked: m.attention_chunk_size}

    def elements(kind: LayerAttention) -> int:
        if kind is LayerAttention.sliding and m.sliding_kv_heads is not None:  # MiMo-V2-Flash: 2·n_kv heads
            return kv_heads_per_rank(m.sliding_kv_heads, T, "sliding_kv_heads") * (m.head_dim + m.v_dim)
        return per_layer

    groups = tuple(
        _KVGroup(n, elements(kind), windows[kind], m.index_topk if kind is LayerAttention.full else None)
        for kind in LayerAttention
        if kind in ATTENTION_KINDS and (n := m.n_kv_layers(kind))
    )
    if m.is_dsa:
        # DSA's indexer keys (modeling_deepseek_v32.py DeepseekV32Indexer: `update_indexer`, one
        # d_I-wide key per token and indexer layer, DynamicIndexedLayer.indexer_keys), replicated on
        # every rank; the indexer scores every cached key: 2·H_I·(d_I + 1) FLOPs per key (tech report §2.1)
        H, d = m.index_n_heads or 0, m.index_head_dim or 0
        groups += (_KVGroup(m.n_indexer_layers, d, None, None, H * (d + 1)),)
    if m.n_shared_block_applications:
        # Zamba2's shared attention caches its K and V at each application's layer (modeling_zamba2.py
        # Zamba2Attention: past_key_values.update(..., layer_idx) of the hybrid layer), full attention
        groups += (_KVGroup(m.n_shared_block_applications, per_layer, None),)
    return groups


def _varied_kv_groups(m: ModelConfig, T: int = 1) -> tuple[_KVGroup, ...]:
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
    groups: list[_KVGroup] = []
    for kind in (k for k in LayerAttention if k in ATTENTION_KINDS):
        what = "full_kv_heads" if kind is LayerAttention.full and m.full_kv_heads is not None else "n_kv_heads"
        hd = m.kind_head_dim(kind)
        elements = KV_TENSORS * kv_heads_per_rank(m.kv_heads_of(kind), T, what) * hd
        width = m.n_heads // T * 2 * hd
        if own := m.n_attention_layers(kind, 0, first_shared):
            groups.append(_KVGroup(own, elements, windows[kind], None, width))
        if shared := m.n_attention_layers(kind, first_shared, m.n_layers):
            groups.append(_KVGroup(shared, 0, windows[kind], None, width, read_elements=elements))
    return tuple(groups)


def _state_groups(m: ModelConfig, T: int) -> tuple[_StateGroup, ...]:
    """The decode state of the mixer layers (estimators/mixers/), per kind, on one of T ranks."""
    out = []
    for kind in m.mixer_kinds:
        mixer = MIXERS[kind]
        st = mixer.state(m, T)
        out.append(_StateGroup(m.n_attention_layers(kind), st.conv, st.recurrent, mixer.token_flops(m, T),
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


def _deepseek_v4_shard(m: ModelConfig, spec: InferenceSpec) -> _Shard:
    """DeepSeek-V4 on one GPU, or with its routed experts over ep GPUs (T = 1: each GPU runs its own
    sequences' attention and holds n_experts / ep experts; docs/formulas.md §5.16 "Inference and
    serving"). Its cache is its decode state,
    estimators/deepseek_v4.py `cache_elements` (equal to transformers 5.23's cache tensors): every layer's
    sliding window of the one K = V head (`_KVGroup`s: 2·h_d on a sliding-only layer, h_d on a compressed
    one, the last W - 1 tokens), and the CSA / HCA layers' compressed entries, open-window buffers and
    CSA overlap (`_Compressed`). A query attends min(c, W) window keys and, on a CSA layer, the k_I
    entries its indexer picks (every entry on an HCA layer), as a sparse kernel reads them; the CSA
    indexer scores every entry. Weights: every parameter resident; a step reads all but the token
    embedding and the routed experts no token touches."""
    T, ep = spec.tensor_parallel, spec.expert_parallel
    v4.check_layout(m, T, ep)
    expert_layout(m, T, ep)
    if spec.cache_kv_heads is not None:
        raise ValueError("cache_kv_heads does not apply to DeepSeek-V4 (one K = V head and compressed entries); drop it")
    if not spec.kv_cache:
        raise ValueError("kv_cache false (the naive mode) is not modeled for DeepSeek-V4 (its compressors keep state "
                         "across steps); drop --no-kv-cache")
    m = expert_slots(m, spec)
    v4.check(m)
    check_tensor_parallel(m, T, ep, 1)  # ep divides the experts (and their redundant slots)
    blocks = m.deepseek_v4
    assert blocks is not None
    D, A, hd, W, L = m.d_model, m.n_heads, m.head_dim, m.sliding_window or 1, m.n_layers
    n_csa, n_hca = len(blocks.csa_layer_ids), len(blocks.hca_layer_ids)
    n_sliding = L - n_csa - n_hca
    d_i, m_c = blocks.index_head_dim, blocks.csa_compress_rate
    kv_and_gate = v4.KV_AND_GATE
    window = tuple(g for g in (_KVGroup(n_sliding, KV_TENSORS * hd, W), _KVGroup(n_csa + n_hca, hd, W)) if g.layers)
    width = A * 2 * hd  # every head scores over h_d and re-weights h_d-wide values
    compressed = tuple(g for g in (
        _Compressed(n_csa, m_c, hd, d_i, kv_and_gate * v4.CSA_SERIES * (hd + d_i), kv_and_gate * m_c * (hd + d_i),
                    blocks.index_topk, width, blocks.index_n_heads * d_i),
        _Compressed(n_hca, blocks.hca_compress_rate, hd, 0, kv_and_gate * hd, 0, None, width, 0),
    ) if g.layers)
    full = count_params(m)
    expert = v4.GATED_MATRICES * D * m.moe_d_ff  # DeepseekV4Experts: no bias
    held_experts = m.n_experts // ep  # this GPU's routed experts (transformers' ep plan: split by expert)
    n_in = GATED_MATRICES - 1  # gate and up
    qkv_width = (A + 1) * hd  # q_b_proj's A·h_d and kv_proj's h_d
    mlp_width = n_in * (m.experts_per_token * m.moe_d_ff + m.shared_expert_d_ff)
    return _Shard(
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

    def __init__(self, shard: Callable[[ModelConfig, InferenceSpec], _Shard]) -> None:
        self.uncached = shard
        self.__doc__, self.__name__ = shard.__doc__, shard.__name__
        self._memo: dict[tuple[object, ...], _Shard] = {}

    def __call__(self, m: ModelConfig, spec: InferenceSpec) -> _Shard:
        key = (m, *[getattr(spec, name) for name in _LAYOUT_FIELDS])
        sh = self._memo.get(key)
        if sh is None:
            if len(self._memo) >= _SHARD_MEMO_SIZE:
                self._memo.clear()
            sh = self._memo[key] = self.uncached(m, spec)
        return sh


@_MemoByLayout
def rank_shard(m: ModelConfig, spec: InferenceSpec) -> _Shard:
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
    if m.is_mla and spec.cache_kv_heads is not None:
        raise ValueError("cache_kv_heads does not apply to multi-head latent attention; drop it")
    if m.sliding_kv_heads is not None and spec.cache_kv_heads is not None:
        raise ValueError("cache_kv_heads sets one K/V head count, but this model's sliding layers have their own "
                         f"(sliding_kv_heads {m.sliding_kv_heads}); drop cache_kv_heads")
    model_kv = kv_heads_per_rank(m.n_kv_heads, T, "n_kv_heads")
    cache_heads = m.n_kv_heads if spec.cache_kv_heads is None else spec.cache_kv_heads
    cached = kv_heads_per_rank(cache_heads, T, "cache_kv_heads")
    n_in = (GATED_MATRICES if m.gated_mlp else PLAIN_MATRICES) - 1  # matrices D -> F: up (+ gate)
    F_exp = m.moe_d_ff if m.is_moe else m.d_ff
    expert = sum(mlp_params(m, F_exp // (etp if m.is_moe else T), d_in=m.expert_d))  # one expert on this GPU (params')
    full = count_params(m)
    embedding_rows = 0 if m.tied_embeddings else -(-m.vocab_size // T) * m.d_embedding
    # Prefill transient of one block: its input and output (2·D) plus the widest intermediate,
    # the fused Q/K/V output or the MLP's up (+ gate) outputs of every active expert.
    widest_kv = max(model_kv, kv_heads_per_rank(m.kv_heads_of(LayerAttention.sliding), T, "sliding_kv_heads"))
    qkv_width = ((m.n_heads // T) * (hd + hd + m.v_dim) if m.is_mla
                 else (m.n_heads // T + widest_kv) * hd + widest_kv * m.v_dim)
    if m.irregular_layers and not m.is_mla:  # Gemma 4: the widest kind's q, k, v on this rank
        qkv_width = max((m.n_heads // T + KV_TENSORS * kv_heads_per_rank(m.kv_heads_of(k), T)) * m.kind_head_dim(k)
                        for k in ATTENTION_KINDS if k in m.attention_pattern)
    mlp_width = max(m.experts_per_token * n_in * F_exp // T + n_in * m.shared_expert_d_ff // T, n_in * m.d_ff // T)
    return _Shard(
        layers=m.n_layers,
        head_dim=hd,
        q_heads=m.n_heads // T,
        kv_heads=m.n_heads // T if m.is_mla else cached,
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
        state_groups=_state_groups(m, T),
        reread_params=shared_block_rereads(m),
    )


def _store(m: ModelConfig, spec: InferenceSpec, etp: int) -> QuantizedWeights | None:
    """The rank's weights in a quantized format or as a checkpoint stores them (None: a plain dtype)."""
    if spec.weight_dtype == CHECKPOINT and spec.stored is not None:
        return stored_shard(m, spec.stored, spec.tensor_parallel, spec.expert_parallel, etp)
    if spec.weight_dtype in FORMATS:
        return quantized_weights(m, spec.weight_dtype, spec.tensor_parallel, spec.expert_parallel)
    return None


def _kv_bytes(sh: _Shard, spec: InferenceSpec, tokens: int, *, held: bool = True, read: bool = False,
              allocated: bool = False) -> int:
    """Cache bytes of `tokens` positions of one sequence on one rank: what the cache holds after
    them (`held`: sliding and chunked layers keep their last window - 1), or, with held=False,
    `tokens` freshly written positions in every layer; `read`: what a query reads of what is held
    (DSA: at most index_topk tokens of the latent cache, every indexer key). DeepSeek-V4's compressed
    layers add their state after `tokens` positions (`_Compressed.held`; written fresh: the state those
    tokens leave from an empty cache); `allocated`: its buffers at their largest. Whole bytes, rounded once."""
    bits = KV_DTYPE_BITS[spec.resolved_kv_dtype]

    def count(g: _KVGroup) -> int:
        n = g.cached(tokens) if held else tokens
        return min(n, g.topk) if read and g.topk is not None else n

    def width(g: _KVGroup) -> int:
        return g.read_elements if read and g.read_elements is not None else g.elements

    elements = sum(g.layers * width(g) * count(g) for g in sh.kv_groups)
    elements += sum(g.held(tokens, read=read and held, allocated=allocated) for g in sh.compressed)
    return _bytes(elements, bits)


def state_bytes(sh: _Shard, spec: InferenceSpec) -> int:
    """Decode-state bytes of one sequence on one rank: every mixer layer's conv state at the
    activation dtype and its recurrent state at the state dtype (0 without mixer layers)."""
    if not sh.state_groups:
        return 0
    return sum(_group_state_bytes(sh.state_groups, spec))


def _group_state_bytes(groups: tuple[_StateGroup, ...], spec: InferenceSpec) -> tuple[int, int]:
    """(conv bytes, recurrent bytes) of one sequence over `groups`: the conv state and the states kept
    at the activation dtype (lightning), and the recurrent states at the state dtype."""
    act = sum(g.layers * (g.conv + (g.recurrent if g.recurrent_at_activation_dtype else 0)) for g in groups)
    conv = sum(g.layers * g.conv for g in groups)
    state = sum(g.layers * g.recurrent for g in groups if not g.recurrent_at_activation_dtype)
    act_bits, state_bits = DTYPE_BITS[spec.resolved_activation_dtype], DTYPE_BITS[spec.resolved_state_dtype]
    conv_bytes = _bytes(conv, act_bits)
    return conv_bytes, _bytes(act, act_bits) - conv_bytes + _bytes(state, state_bits)


def paged_compressed_elements(sh: _Shard, context: int, block_size: int) -> int:
    """DeepSeek-V4's compressed state of one sequence of `context` tokens under a paged engine, in
    elements (0 for every other model): each compressed layer's floor(c / m) entries (h_d + d_I each) in
    whole blocks of `block_size` entries, the way a full-attention layer pages its tokens, and its
    open-window buffers and CSA overlap as a constant per-sequence slot at their largest (m - 1 tokens),
    the way a hybrid's mixer state is held beside the blocks. The window is paged as a sliding layer's."""
    return sum(g.layers * (-(-(context // g.rate) // block_size) * block_size * (g.entry + g.index_entry)
                           + g.buffer * (g.rate - 1) + g.overlap) for g in sh.compressed)


def _kv_bytes_per_token(sh: _Shard, spec: InferenceSpec) -> int:
    """Cache bytes one token adds in every layer, on one rank, while the context is shorter than
    every window: 2·L·n_kv_rank·h_d·p for standard attention (MLA latent: L·(r_kv + d_rope)·p)."""
    return _kv_bytes(sh, spec, 1, held=False)


def _weights_read_bytes(sh: _Shard, spec: InferenceSpec, tokens: int) -> int:
    """Weight bytes one step reads when it processes `tokens` tokens (all sequences together).

    Every weight is read once, except the tables a step only gathers rows from (an untied token
    embedding, learned positions: a few rows, not counted). A MoE reads at most
    min(n_experts, tokens·top-k) experts per layer (an upper bound: it assumes distinct experts
    until all are touched); under expert parallelism a GPU holds n_experts/ep of them and receives
    ceil(tokens·top-k / min(T, ep)) of the assignments.
    """
    T, ep = sh.expert_assignments_share
    share = min(T, ep)  # expert parallelism: each GPU receives 1/min(T, ep) of the assignments
    touched = min(sh.n_experts, -(-tokens * sh.experts_per_token // share))
    if sh.store is not None:  # a quantized format: its bytes, an idle expert at its stored size
        q = sh.store
        idle_bytes = sh.moe_layers * (sh.n_experts - touched) * q.expert_bytes if q.expert_params else 0
        read = q.total_bytes - q.gathered_bytes - idle_bytes
        return -(-read.numerator // read.denominator) if isinstance(read, Fraction) else read
    idle = sh.moe_layers * (sh.n_experts - touched) * sh.expert_params
    return _bytes(sh.params - sh.gathered_params - idle + sh.reread_params, DTYPE_BITS[spec.weight_dtype])


def _weight_split(sh: _Shard, spec: InferenceSpec) -> tuple[Fraction, Fraction]:
    """(bytes read whatever the routing: the weights less the gathered tables and the routed
    experts, bytes of one routed expert in one layer) on one rank."""
    if sh.store is not None:
        q = sh.store
        expert = q.expert_bytes if q.expert_params else Fraction(0)
        experts = sh.moe_layers * sh.n_experts * expert if q.expert_params else 0
        return Fraction(q.total_bytes - q.gathered_bytes) - experts, expert
    w_bits = DTYPE_BITS[spec.weight_dtype]
    expert = Fraction(sh.expert_params * w_bits, BITS_PER_BYTE)
    dense = sh.params - sh.gathered_params - sh.moe_layers * sh.n_experts * sh.expert_params + sh.reread_params
    return Fraction(dense * w_bits, BITS_PER_BYTE), expert


# ============================================================================ KV cache, memory
@dataclass(frozen=True)
class KVCache:
    """The K/V cache at `context_len` tokens per sequence (all zero in naive mode)."""

    context_len: int
    n_kv_heads: int  # heads cached (the model's, or InferenceSpec.cache_kv_heads)
    kv_heads_per_gpu: int  # n_kv / T, or 1 replicated head when n_kv < T
    bytes_per_token: int  # one token of one sequence, all layers, whole model: 2·L·n_kv·h_d·p
    bytes_per_token_per_gpu: int
    total_bytes: int  # B · context · bytes_per_token
    per_gpu_bytes: int  # B · context · bytes_per_token_per_gpu (>= total / T: replication)


def kv_cache(m: ModelConfig, spec: InferenceSpec, context_len: int | None = None) -> KVCache:
    """Seed eq. (kv_cache_memory) 2·p·B·S·D·L/T, generalized: 2·p·B·c·L·n_kv·h_d in all.

    Per GPU the cache holds max(n_kv/T, 1) heads (errata INF-4). Sliding-window and chunked
    layers hold at most their last W - 1 (chunk - 1) tokens, as transformers' cache layers do;
    MLA caches its latent (r_kv + d_rope per token and layer), replicated on every TP rank.
    `context_len` defaults to the peak, S + N_new - 1 tokens per sequence. `bytes_per_token` is
    the growth per token while the context is shorter than every window.
    """
    c = spec.peak_context_len if context_len is None else context_len
    _check_positive_int("context_len", c)
    sh = rank_shard(m, spec)
    whole = sh if spec.tensor_parallel == 1 else rank_shard(m, dataclasses.replace(spec, tensor_parallel=1))
    heads = m.n_kv_heads if spec.cache_kv_heads is None else spec.cache_kv_heads
    if not spec.kv_cache:
        return KVCache(c, heads, sh.kv_heads, 0, 0, 0, 0)
    B = spec.batch_size
    return KVCache(
        context_len=c,
        n_kv_heads=heads,
        kv_heads_per_gpu=sh.kv_heads,
        bytes_per_token=_kv_bytes_per_token(whole, spec),
        bytes_per_token_per_gpu=_kv_bytes_per_token(sh, spec),
        total_bytes=B * _kv_bytes(whole, spec, c),
        per_gpu_bytes=B * _kv_bytes(sh, spec, c),
    )


@dataclass(frozen=True)
class DecodeState:
    """The decode state of a hybrid model's mixer layers: constant in the context (unlike the KV
    cache of its attention layers), per sequence, for B sequences, and on one GPU."""

    layers_by_kind: dict[str, int]  # mixer kind -> layers of it
    conv_dtype: str  # the conv state's dtype (the activation dtype)
    state_dtype: str  # the recurrent state's dtype
    conv_bytes_per_sequence: int  # every mixer layer, the whole model
    recurrent_bytes_per_sequence: int
    bytes_per_sequence: int
    bytes_per_sequence_per_gpu: int  # the heads one GPU holds
    total_bytes: int  # B sequences
    per_gpu_bytes: int


def decode_state(m: ModelConfig, spec: InferenceSpec) -> DecodeState | None:
    """The mixer layers' decode state (None: an attention-only model). Per sequence and layer a
    Gated DeltaNet holds conv_dim·K conv values and H_v·d_k·d_v recurrent values (estimators/
    mixers/deltanet.py), split T ways with the heads; held whatever the context, and only with a
    cache (naive mode keeps none)."""
    if not m.is_hybrid:
        return None
    sh = rank_shard(m, spec)
    whole = _state_groups(m, 1)
    conv, recurrent = _group_state_bytes(whole, spec)
    held = 1 if spec.kv_cache else 0
    per_gpu = state_bytes(sh, spec)
    return DecodeState(
        layers_by_kind={k.value: m.n_attention_layers(k) for k in m.mixer_kinds},
        conv_dtype=spec.resolved_activation_dtype,
        state_dtype=(spec.resolved_activation_dtype if all(g.recurrent_at_activation_dtype for g in whole)
                     else spec.resolved_state_dtype),
        conv_bytes_per_sequence=conv,
        recurrent_bytes_per_sequence=recurrent,
        bytes_per_sequence=conv + recurrent,
        bytes_per_sequence_per_gpu=per_gpu,
        total_bytes=held * spec.batch_size * (conv + recurrent),
        per_gpu_bytes=held * spec.batch_size * per_gpu,
    )


@dataclass(frozen=True)
class InferenceMemory:
    """Memory of one GPU at the peak of the generation, against its capacity."""

    weights_bytes: int  # tensor_parallel_params(m, T) at the weight dtype
    kv_cache_bytes: int  # the cache at S + N_new - 1 tokens
    workspace_bytes: int  # the prefill's largest transient (see `inference_memory`)
    total_bytes: int
    capacity_bytes: int  # the GPU's memory_bytes
    fits: bool
    max_batch_size: int  # largest B that fits at this S and N_new (0: not even B = 1)
    max_prompt_len: int  # longest S that fits at this B and N_new, within the context (0: not even S = 1)
    state_bytes: int = 0  # hybrids: the mixer layers' decode state of the B sequences (in total_bytes)


TOWER_BITS = 16  # a quantized format's towers: the formats quantize the language model's linears only


def tower_bytes(sh: _Shard, spec: InferenceSpec) -> int:
    """Bytes of the towers one GPU holds (whole on every GPU): at the weight dtype, at 16 bits beside
    a quantized format, and 0 for a checkpoint (its stored bytes hold them already)."""
    if not sh.tower_params or spec.weight_dtype == CHECKPOINT:
        return 0
    return _bytes(sh.tower_params, TOWER_BITS if sh.store is not None else DTYPE_BITS[spec.weight_dtype])


def memory_terms(sh: _Shard, spec: InferenceSpec) -> tuple[int, int, int]:
    """(weight bytes, cache bytes per cached token, workspace bytes per prefill token). The weights
    are the language model's shard plus the towers (vision/audio encoders and projectors) whole."""
    if sh.store is not None:
        weights = sh.store.total_bytes + tower_bytes(sh, spec)
    elif sh.tower_params and spec.weight_dtype != CHECKPOINT:  # one rounding of the whole
        weights = _bytes(sh.params + sh.tower_params, DTYPE_BITS[spec.weight_dtype])
    else:
        weights = _bytes(sh.params, DTYPE_BITS[spec.weight_dtype])
    kv_token = _kv_bytes_per_token(sh, spec) if spec.kv_cache else 0
    workspace_token = _bytes(sh.workspace_width, DTYPE_BITS[spec.resolved_activation_dtype])
    return weights, kv_token, workspace_token


def inference_memory(m: ModelConfig, gpu: GPU, spec: InferenceSpec) -> InferenceMemory:
    """Weights + KV cache + workspace per GPU, and the largest B and S that fit.

    Workspace: the largest transient of one block while the prefill runs all B·S tokens at once,
    p_act · B·S · (2·D + max((A/T + 2·n_kv_rank)·h_d, k·n_in·F/T)): the block's input and
    output plus its widest intermediate (the fused Q/K/V output, or the MLP's up and gate outputs
    of the k active experts; n_in = 2 gated, 1 plain). Attention scores are never materialized
    (FlashAttention) and the logits, B·S·V/T, are not counted. Naive mode holds no cache; its
    workspace is that of its longest pass, S + N_new - 1 tokens. Conservative: the cache at its
    peak is counted together with the prefill's workspace.

    Both limits are closed forms, linear in B and in S: B_max = (M - W) // per-sequence bytes,
    S_max from W + B·(kv·(S + N_new - 1) + ws·S) <= M.
    """
    sh = rank_shard(m, spec)
    weights, _, ws_token = memory_terms(sh, spec)
    B, S, extra = spec.batch_size, spec.prompt_len, spec.new_tokens - 1

    state = state_bytes(sh, spec) if spec.kv_cache else 0  # constant in the context

    def per_sequence(prompt: int, allocated: bool = False) -> int:
        """Cache at the peak context, decode state, and the prefill workspace, one sequence
        (`allocated`: DeepSeek-V4's open-window buffers at their largest, non-decreasing in the prompt)."""
        kv_seq = _kv_bytes(sh, spec, prompt + extra, allocated=allocated) if spec.kv_cache else 0
        return kv_seq + state + ws_token * (prompt if spec.kv_cache else prompt + extra)

    kv = B * (_kv_bytes(sh, spec, S + extra) if spec.kv_cache else 0)
    workspace = B * ws_token * (S if spec.kv_cache else S + extra)
    total = weights + kv + B * state + workspace
    capacity = gpu.memory_bytes
    free = capacity - weights
    max_batch = max(free // per_sequence(S), 0)
    # per_sequence is non-decreasing in the prompt (piecewise linear where windows cap the cache):
    # the longest prompt is found by bisection, at most ~64 evaluations, and capped where prompt and
    # new tokens fill the model's context window (S + N_new - 1 <= max_seq_len).
    max_prompt = 0
    context_cap = max(m.max_seq_len - spec.new_tokens + 1, 0)
    if free >= 0 and context_cap >= 1 and B * per_sequence(1, True) <= free:
        lo, hi = 1, 2
        while B * per_sequence(hi, True) <= free and hi < MAX_CONTEXT_SEARCH:
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if B * per_sequence(mid, True) <= free else (lo, mid)
        max_prompt = min(lo, context_cap)
    return InferenceMemory(
        weights_bytes=weights,
        kv_cache_bytes=kv,
        workspace_bytes=workspace,
        total_bytes=total,
        capacity_bytes=capacity,
        fits=total <= capacity,
        max_batch_size=max_batch,
        max_prompt_len=max(max_prompt, 0),
        state_bytes=B * state,
    )


def _divisors(n: int, limit: int) -> list[int]:
    """The divisors of n up to `limit`, ascending (at most `limit` trial divisions)."""
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def min_tensor_parallel(m: ModelConfig, gpu: GPU, spec: InferenceSpec) -> int | None:
    """Smallest T (a divisor of n_heads and d_ff, compatible with the K/V heads) at which the
    spec fits on each GPU; None if none does. T is tried in increasing order."""
    cache_heads = m.n_kv_heads if spec.cache_kv_heads is None else spec.cache_kv_heads
    for T in _divisors(m.n_heads, MAX_TENSOR_PARALLEL):
        try:
            _, etp = expert_layout(m, T, spec.expert_parallel)
            check_tensor_parallel(expert_slots(m, spec), T, spec.expert_parallel, etp)
        except TcalcError:
            raise
        except ValueError:
            continue
        if (m.n_kv_heads % T and T % m.n_kv_heads) or (cache_heads % T and T % cache_heads):
            continue
        try:
            fits = inference_memory(m, gpu, dataclasses.replace(spec, tensor_parallel=T)).fits
        except TcalcError:
            raise
        except ValueError:  # a layout the weight format refuses (GGUF at T > 1)
            continue
        if fits:
            return T
    return None


# ============================================================================ roofline
@dataclass(frozen=True)
class Roofline:
    """One kernel (or step) on the roofline: time = max(FLOPs / peak, bytes / bandwidth)."""

    flops: int
    bytes_moved: int
    compute_s: float  # FLOPs / peak FLOP/s
    memory_s: float  # bytes / memory bytes/s
    seconds: float  # max of the two: they overlap (seed App. "Compute-bound vs Memory-bound")
    bound: str  # "compute" when compute_s >= memory_s, else "memory"
    intensity: float  # FLOPs per byte (inf when nothing is moved)
    math_bandwidth: float  # lambda_math = peak / bandwidth; compute-bound iff intensity >= it


def roofline(flops: int, bytes_moved: int, peak_flops_s: int, memory_bw_bytes_s: int) -> Roofline:
    """The roofline of `flops` FLOPs and `bytes_moved` bytes on a peak and a bandwidth.

    The bound is decided in exact integers (flops·bandwidth >= bytes·peak), so at intensity =
    lambda_math compute_s == memory_s and the bound is "compute".
    """
    checks = (("flops", flops, 0), ("bytes_moved", bytes_moved, 0),
              ("peak_flops_s", peak_flops_s, 1), ("memory_bw_bytes_s", memory_bw_bytes_s, 1))
    for name, value, low in checks:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} ({value!r}) must be a whole number >= {low}")
    compute_s, memory_s = flops / peak_flops_s, bytes_moved / memory_bw_bytes_s
    return Roofline(
        flops=flops,
        bytes_moved=bytes_moved,
        compute_s=compute_s,
        memory_s=memory_s,
        seconds=max(compute_s, memory_s),
        bound=COMPUTE if flops * memory_bw_bytes_s >= bytes_moved * peak_flops_s else MEMORY,
        intensity=flops / bytes_moved if bytes_moved else math.inf,
        math_bandwidth=peak_flops_s / memory_bw_bytes_s,
    )


# ============================================================================ communication
@dataclass(frozen=True)
class Communication:
    """Tensor-parallel all-reduces (and, with ep > T, expert all-to-alls) of one step on one GPU
    (all zero on one GPU)."""

    all_reduces: int  # 2·L per step
    bytes_per_all_reduce: int  # B · tokens · D · activation bytes
    link_bytes_s: int  # one direction: the GPU's bidirectional interconnect / 2
    transfer_s: float  # all_reduces · 2(T-1)/T · size / link (ring all-reduce)
    latency_s: float  # (all_reduces + all_to_alls) · collective_latency_s
    seconds: float
    all_to_alls: int = 0  # expert parallelism beyond T: dispatch + combine per MoE layer


def _communication_exact(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, tokens: int
) -> tuple[Communication, Fraction]:
    T, ep = spec.tensor_parallel, spec.expert_parallel
    gpus, _ = expert_layout(m, T, ep)
    if gpus == 1:
        return Communication(0, 0, 0, 0.0, 0.0, 0.0), Fraction(0)
    if gpu.interconnect_bytes_s is None:
        raise ValueError(
            f"{gpu.name} has no interconnect bandwidth in the hardware table; use T = 1 and ep = 1"
        )
    p_act = DTYPE_BITS[spec.resolved_activation_dtype]
    link = Fraction(gpu.interconnect_bytes_s, 2)  # one direction of the bidirectional figure
    n = ALL_REDUCES_PER_LAYER * m.n_layers if T > 1 else 0
    size = _bytes(spec.batch_size * tokens * m.d_model, p_act) if T > 1 else 0
    transfer = n * Fraction(2 * (T - 1), T) * size / link  # ring: reduce-scatter + all-gather
    n_a2a = 0
    if ep > T:
        # DP attention: each MoE layer dispatches its tokens' hidden states to the experts' owners
        # and combines the results (two all-to-alls); a GPU sends its 1/T share of its group's
        # B·tokens·k assignments, (ep - 1)/ep of them to other GPUs (Rajbhandari et al. 2022,
        # DeepSpeed-MoE; the payload is D activations per assignment).
        n_a2a = 2 * m.n_moe_layers()
        sent = Fraction(-(-spec.batch_size * tokens * m.experts_per_token // T) * m.d_model * p_act, 8)
        transfer += n_a2a * sent * Fraction(ep - 1, ep) / link
    latency = (n + n_a2a) * Fraction(spec.collective_latency_s)
    comm = Communication(
        all_reduces=n,
        bytes_per_all_reduce=size,
        link_bytes_s=gpu.interconnect_bytes_s // 2,
        transfer_s=float(transfer),
        latency_s=float(latency),
        seconds=float(transfer + latency),
        all_to_alls=n_a2a,
    )
    return comm, transfer + latency


def tp_communication(m: ModelConfig, gpu: GPU, spec: InferenceSpec, tokens: int) -> Communication:
    """Two all-reduces per layer (Megatron-LM: after W_O and after the MLP output) of the
    activations of `tokens` tokens per sequence (S in the prefill, 1 in a decode step).

    Ring all-reduce: each GPU sends and receives 2(T-1)/T x size (Patarasuk & Yuan 2009; seed
    App. "Collective Communications"), over one direction of the interconnect, plus a fixed
    latency per collective. Parallel-attention blocks (Falcon, GPT-J) can fuse the two into one
    (vLLM's Falcon does), so for them this is an upper bound. The embedding's all-reduce and the
    LM head's logit gather (one each per step) are not counted.
    """
    _check_positive_int("tokens", tokens)
    return _communication_exact(m, gpu, spec, tokens)[0]


# ============================================================================ steps
@dataclass(frozen=True)
class Step:
    """One forward pass of the whole batch on one GPU: the prefill, or one decode step."""

    tokens: int  # tokens processed per sequence (S prefill, 1 decode, c naive)
    context_len: int  # tokens the last of them attends over
    matmul_flops: int  # 2 · B · tokens · matmul_params per GPU
    attention_flops: int  # 2·2 · B · L · (A/T) · h_d · sum of the contexts (+ the mixers' mixing, hybrids)
    weight_bytes: int  # weights read
    kv_read_bytes: int  # the KV cache read (+ the mixers' decode state, hybrids)
    kv_write_bytes: int  # the new K/V written (+ the mixers' decode state, hybrids)
    roofline: Roofline
    comm: Communication
    seconds: float  # roofline.seconds + comm.seconds

    @property
    def flops(self) -> int:
        return self.roofline.flops

    @property
    def bytes_moved(self) -> int:
        return self.roofline.bytes_moved

    @property
    def bound(self) -> str:
        return self.roofline.bound


def roofline_step(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, sh: _Shard, tokens: int, context: int,
    kv_read_tokens: int, kv_write_tokens: int, towers: tuple[int, int] = (0, 0),
) -> tuple[Step, Fraction, Fraction]:
    """The step, its exact time and its exact communication time. `tokens` new tokens per
    sequence, the last of them at `context`; `towers`: (FLOPs, weight bytes) of the vision tower
    encoding the images in this step (`tower_prefill`)."""
    B = spec.batch_size
    matmul = FLOPS_PER_MAC * B * tokens * sh.matmul_params + towers[0]
    # Token i attends over i positions (at most its window); the new tokens sit at
    # context-tokens+1 .. context. Scores over h_d, re-weighting over h_v per query head.
    first = context - tokens + 1
    head_width = sh.attention_width
    if m.is_mla and spec.kv_cache and spec.mla_cache == "latent" and tokens == 1:
        # MLA decode over the latent cache runs absorbed (DeepSeek-V2 paper, arXiv:2405.04434 sec.
        # 2.1.2: W^UK absorbed into the query, W^UV into the output; FlashMLA's decode kernel: head
        # dim 576 for K, 512 for V): each head scores over r_kv + d_rope and re-weights r_kv-wide
        # latent values. The absorption's own matmuls have kv_b_proj's parameters, already counted
        # per token in matmul_params. The fewest FLOPs a latent cache allows: re-expanding the cached
        # latent instead costs 2·r_kv·(d_nope + d_v) per head per cached token.
        head_width = 2 * (m.kv_lora_rank or 0) + (m.qk_rope_head_dim or 0)
    attention = B * sum(
        FLOPS_PER_MAC * g.layers * (sh.q_heads * head_width if g.flop_width is None else g.flop_width)
        * g.attended_sum(first, context)
        for g in sh.kv_groups
    )
    for c in sh.compressed:  # DeepSeek-V4: the attended compressed entries and the indexer's scores
        attended, scored = c.attended_sum(first, context)
        attention += B * FLOPS_PER_MAC * c.layers * (c.attend_width * attended + c.index_width * scored)
    weights = _weights_read_bytes(sh, spec, B * tokens) + towers[1]
    kv_read = B * _kv_bytes(sh, spec, kv_read_tokens, read=True) if kv_read_tokens else 0
    kv_write = B * _kv_bytes(sh, spec, kv_write_tokens, held=False) if kv_write_tokens else 0
    if sh.state_groups:  # hybrid: the mixers' conv and state work, and their decode state's traffic
        recurrent = spec.kv_cache and tokens == 1  # one cached token: the recurrent form
        per_token = sum(g.layers * (g.token_flops if recurrent else g.prompt_token_flops) for g in sh.state_groups)
        attention += B * tokens * per_token
        if spec.kv_cache:  # a step reads the state it continues (none before the prompt) and writes it
            state = B * state_bytes(sh, spec)
            kv_read += state if kv_read_tokens else 0
            kv_write += state
    peak = peak_flops(gpu, spec.resolved_compute_dtype)
    bw = gpu.memory_bw_bytes_s
    line = roofline(matmul + attention, weights + kv_read + kv_write, peak, bw)
    comm, comm_s = _communication_exact(m, gpu, spec, tokens)
    exact = max(Fraction(line.flops, peak), Fraction(line.bytes_moved, bw)) + comm_s
    step = Step(tokens, context, matmul, attention, weights, kv_read, kv_write, line, comm,
                line.seconds + comm.seconds)
    return step, exact, comm_s


def prefill_step(m: ModelConfig, gpu: GPU, spec: InferenceSpec) -> Step:
    """The prefill: S tokens per sequence, causal attention, the cache written (time to first
    token).

    FLOPs per GPU: 2·B·S·N_matmul/T + 2·B·L·(A/T)·h_d·S·(S+1); bytes: the weights once plus
    B·S tokens of K/V written. The seed's 2·B·S·N_params counts the matmuls, not attention.
    """
    sh = rank_shard(m, spec)
    S = spec.prompt_len
    return roofline_step(m, gpu, spec, sh, S, S, 0, S if spec.kv_cache else 0, tower_prefill(m, spec, sh))[0]


def tower_prefill(m: ModelConfig, spec: InferenceSpec, sh: _Shard) -> tuple[int, int]:
    """(FLOPs, weight bytes) of encoding the prompt's images, B·images of them, on one GPU.

    First-order count (docs/formulas.md "Towers"): 2 FLOPs per weight per token the weight sees, the
    vision encoder over image_patches patches and the projector over image_tokens tokens per image,
    2·B·images·(N_vision·patches + N_projector·tokens); the encoder's attention over its patches
    (quadratic in them) and element-wise work are not counted; a convolutional encoder (Gemma 3n's
    MobileNetV5) is priced by its own per-image FLOPs (`Towers.image_flops`, counted by layer). The
    towers are held whole and run on every GPU (not split by tensor parallelism); their weights are
    read once per prefill."""
    if not spec.images or m.towers is None or m.towers.text_only:
        return 0, 0
    t = m.towers
    images = spec.batch_size * spec.images
    flops = images * (t.vision_flops + FLOPS_PER_MAC * t.projector * t.image_tokens)
    return flops, tower_bytes(sh, spec)


def with_images(m: ModelConfig, spec: InferenceSpec, images: int) -> InferenceSpec:
    """`spec` with `images` images in each sequence's prompt: prompt_len grows by images × the
    model's tokens per image (`Towers.image_tokens`) and the prefill encodes them (`tower_prefill`)."""
    if isinstance(images, bool) or not isinstance(images, int) or images < 0:
        raise ValueError(f"images ({str(images)[:40]!r}) must be a whole number >= 0")
    if images == 0:
        return spec
    if m.towers is None or not m.towers.image_tokens:
        raise ValueError(f"images ({images}) need a multimodal model with a vision tower; {m.name or 'this model'} has "
                         "none (give a multimodal config.json, e.g. a gemma3 or qwen3_vl one), or drop images")
    if m.towers.text_only:
        raise ValueError(f"images ({images}) need the vision tower, which text_only drops; drop one of the two")
    return dataclasses.replace(spec, prompt_len=spec.prompt_len + images * m.towers.image_tokens,
                               images=spec.images + images)


def decode_step_exact(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, sh: _Shard, context: int
) -> tuple[Step, Fraction, Fraction]:
    if spec.kv_cache:  # one token; read the c-1 cached tokens' K/V, write the new token's
        return roofline_step(m, gpu, spec, sh, 1, context, context - 1, 1)
    return roofline_step(m, gpu, spec, sh, context, context, 0, 0)  # naive: a prefill of c tokens


def decode_step(m: ModelConfig, gpu: GPU, spec: InferenceSpec, context_len: int) -> Step:
    """One decode step whose new token is the `context_len`-th of its sequence.

    With the cache: FLOPs 2·B·N_matmul/T + 2·2·B·L·(A/T)·h_d·c; bytes: the weights once, the
    cached c-1 tokens' K/V read, the new token's written (together the cache at c tokens). Naive
    (no cache, the seed's "Naive Inference"): the whole context is reprocessed, a prefill of c.
    """
    _check_positive_int("context_len", context_len)
    return decode_step_exact(m, gpu, spec, rank_shard(m, spec), context_len)[0]


# ============================================================================ the generation
@dataclass(frozen=True)
class Decode:
    """The N_new - 1 decode steps of a generation, at contexts S+1 .. S+N_new-1, on one GPU.

    With N_new = 1 there are no steps; the per-token figures then describe the step that would
    come next (context S + 1), and the totals are 0.
    """

    steps: int
    flops: int  # summed over the steps
    bytes_moved: int
    comm_s: float
    seconds: float  # summed step times
    seconds_per_token: float  # time per output token: seconds / steps (one token per sequence)
    tokens_per_s: float  # B / seconds_per_token, the whole batch
    compute_bound_steps: int
    bound: str  # "compute" or "memory" when every step agrees, else "mixed"
    first: Step  # context S + 1
    last: Step  # context S + N_new - 1 (S + 1 when N_new = 1)


Poly = tuple[int | Fraction, int | Fraction, int | Fraction]  # Newton form (f0, Δf0, Δ²f0)


def _newton(values: list[int] | list[Fraction]) -> Poly:
    """Forward differences of a polynomial of degree <= 2 sampled at 0, 1, 2."""
    f0, f1, f2 = values
    return f0, f1 - f0, f2 - 2 * f1 + f0


def _newton_value(p: Poly, i: int) -> int | Fraction:
    """f(i) = f0 + C(i,1)·Δf0 + C(i,2)·Δ²f0."""
    return sum(c * math.comb(i, k) for k, c in enumerate(p))


def _newton_sum(p: Poly, a: int, b: int) -> int | Fraction:
    """Sum of f(i) over i in [a, b): by the hockey-stick identity, sum_{i<n} C(i,k) = C(n,k+1)."""
    def prefix(n: int) -> int | Fraction:
        return sum(c * math.comb(n, k + 1) for k, c in enumerate(p))
    return prefix(b) - prefix(a)


def _split(h: Poly, n: int) -> int:
    """First i in [1, n] where h(i) >= 0 stops equalling h(0) >= 0 (n when it never does).

    h is monotone on [0, n) (linear with a cache, increasing in naive mode), so the flip sits at
    a real root of a quadratic: estimated in exact integers (isqrt), then corrected by a step or
    two.
    """
    first = _newton_value(h, 0) >= 0
    if (_newton_value(h, n - 1) >= 0) == first:
        return n
    f0, d1, d2 = (Fraction(c) for c in h)
    a2, a1, a0 = d2 / 2, d1 - d2 / 2, f0  # h(i) = a2·i² + a1·i + a0
    if a2 == 0:
        root = -a0 / a1
    else:
        scale = math.lcm(a2.denominator, a1.denominator, a0.denominator)
        A2, A1, A0 = (int(x * scale) for x in (a2, a1, a0))
        s = math.isqrt(max(A1 * A1 - 4 * A2 * A0, 0))
        roots = (Fraction(-A1 + s, 2 * A2), Fraction(-A1 - s, 2 * A2))
        root = min(roots, key=lambda r: abs(r - Fraction(n, 2)))  # the one inside [0, n)
    i = min(max(math.ceil(root), 1), n - 1)
    while i > 1 and (_newton_value(h, i - 1) >= 0) != first:
        i -= 1
    while i < n and (_newton_value(h, i) >= 0) == first:
        i += 1
    return i


def _sum_steps(
    exact: Callable[[int], tuple[Step, Fraction, Fraction]], start: int, stop: int, peak: int | Fraction,
    bw: int | Fraction,
) -> tuple[int, int, Fraction, Fraction, int]:
    """(FLOPs, bytes, communication s, seconds, compute-bound steps) of the decode steps at
    contexts [start, stop), on which every per-step quantity is one polynomial of degree <= 2."""
    n = stop - start
    if n <= 0:
        return 0, 0, Fraction(0), Fraction(0), 0
    if n < 3:  # too few steps to sample a polynomial inside the piece: add them
        flops = bytes_moved = compute_steps = 0
        comm_s = seconds = Fraction(0)
        for context in range(start, stop):
            step, t, comm = exact(context)
            flops, bytes_moved, comm_s, seconds, compute_steps = (
                flops + step.flops, bytes_moved + step.bytes_moved, comm_s + comm, seconds + t,
                compute_steps + (step.bound == COMPUTE),
            )
        return flops, bytes_moved, comm_s, seconds, compute_steps
    samples = [exact(start + i) for i in range(3)]
    f = _newton([s.flops for s, _, _ in samples])  # FLOPs of step i
    b = _newton([s.bytes_moved for s, _, _ in samples])  # bytes moved by step i
    x = _newton([comm for _, _, comm in samples])  # communication seconds of step i
    h = (bw * f[0] - peak * b[0], bw * f[1] - peak * b[1], bw * f[2] - peak * b[2])  # h(i) >= 0: step i compute-bound
    split = _split(h, n)
    on_compute, on_memory = ((0, split), (split, n))
    if _newton_value(h, 0) < 0:
        on_compute, on_memory = on_memory, on_compute
    seconds = Fraction(_newton_sum(f, *on_compute), peak) + Fraction(_newton_sum(b, *on_memory), bw)
    seconds += _newton_sum(x, 0, n)
    return (int(_newton_sum(f, 0, n)), int(_newton_sum(b, 0, n)), Fraction(_newton_sum(x, 0, n)),
            seconds, on_compute[1] - on_compute[0])


def decode(m: ModelConfig, gpu: GPU, spec: InferenceSpec) -> Decode:
    """All decode steps, summed in closed form: the cost does not grow with N_new.

    Every per-step quantity is a polynomial of degree <= 2 in the step index (FLOPs: linear with
    a cache, quadratic in naive mode; bytes and communication: linear), so three evaluated steps
    fix it, and its sum over any range of steps is a closed form (Newton forward differences).
    The roofline's max() switches branch at most once, where compute and memory time cross
    (solved exactly). A naive-mode MoE's first steps, whose touched-expert count still grows,
    are a polynomial piece of their own (no loop over steps).
    """
    sh = rank_shard(m, spec)
    S, B, n_steps = spec.prompt_len, spec.batch_size, spec.new_tokens - 1
    peak, bw = peak_flops(gpu, spec.resolved_compute_dtype), gpu.memory_bw_bytes_s

    def exact(context: int) -> tuple[Step, Fraction, Fraction]:
        return decode_step_exact(m, gpu, spec, sh, context)

    flops, bytes_moved, comm_s, seconds, compute_steps = decode_sum(sh, spec, exact, peak, bw)
    first = exact(S + 1)[0]
    last = exact(S + max(n_steps, 1))[0]
    if n_steps == 0:
        per_token, bound = first.seconds, first.bound
    else:
        per_token = float(seconds / n_steps)
        bound = COMPUTE if compute_steps == n_steps else MEMORY if compute_steps == 0 else MIXED
    return Decode(
        steps=n_steps,
        flops=flops,
        bytes_moved=bytes_moved,
        comm_s=float(comm_s),
        seconds=float(seconds),
        seconds_per_token=per_token,
        tokens_per_s=B / per_token,
        compute_bound_steps=compute_steps,
        bound=bound,
        first=first,
        last=last,
    )


def decode_sum(
    sh: _Shard, spec: InferenceSpec, exact: Callable[[int], tuple[Step, Fraction, Fraction]],
    peak: int | Fraction, bw: int | Fraction,
) -> tuple[int, int, Fraction, Fraction, int]:
    """(FLOPs, bytes, added seconds, seconds, compute-bound steps) of the N_new - 1 decode steps,
    in closed form, on a roofline of `peak` FLOP/s and `bw` B/s. `exact(c)` gives the step at
    context c, its time and the seconds added to its roofline (communication; `expected.py` adds
    its fixed costs there), which must be a polynomial of degree <= 2 in c on each piece."""
    S, B, n_steps = spec.prompt_len, spec.batch_size, spec.new_tokens - 1
    flops = bytes_moved = compute_steps = 0
    seconds = comm_s = Fraction(0)
    start, stop = S + 1, S + 1 + n_steps  # contexts of the steps: [start, stop)
    # A naive-mode MoE reads min(n_experts, B·c·k) experts per layer at context c: linear in c
    # until every expert is touched, constant after. That saturation point is one more break.
    saturated = None
    if not spec.kv_cache and sh.n_experts > 1:
        saturated = -(-sh.n_experts // (B * sh.experts_per_token))
    # Windows (sliding, chunked layers) make every per-step quantity piecewise polynomial, with
    # a break where the context reaches a window: sum each piece separately.
    spans = [g.window for g in sh.kv_groups if g.window]
    # DSA: attention saturates at context k_I (min(c, k_I) keys), the latent read at k_I + 1 (min(c - 1, k_I))
    spans += [b for g in sh.kv_groups if g.topk for b in (g.topk, g.topk + 1)]
    # DeepSeek-V4: the overlap is read from context m + 1 on, the CSA attention saturates at k_I entries
    # (context m·k_I) and their read one step later
    for g in sh.compressed:
        spans += [g.rate + 1, *((g.rate * g.topk, g.rate * g.topk + 1) if g.topk else ())]
    breaks = spans + ([saturated] if saturated else [])
    cuts = sorted({start, stop, *(b for b in breaks if start < b < stop)})
    # DeepSeek-V4's compressed entries (floor(c / m)) and open windows (c mod m) step with the context: on
    # the contexts of one residue modulo the rates' period, lo + r + period·j, every per-step quantity is
    # linear in j again, so each residue is a closed-form sum of its own (period sums, never one per step)
    period = state_period(sh)
    for lo, hi in zip(cuts, cuts[1:]):
        for r in range(min(period, hi - lo)):
            def strided(j: int, base: int = lo + r) -> tuple[Step, Fraction, Fraction]:
                return exact(base + period * j)
            f_, b_, x_, t_, c_ = _sum_steps(strided, 0, -(-(hi - lo - r) // period), peak, bw)
            flops, bytes_moved, comm_s, seconds, compute_steps = (
                flops + f_, bytes_moved + b_, comm_s + x_, seconds + t_, compute_steps + c_
            )
    return flops, bytes_moved, comm_s, seconds, compute_steps


MAX_STATE_PERIOD = 4096  # the longest period of DeepSeek-V4's compress rates `decode_sum` sums by residue


def state_period(sh: _Shard) -> int:
    """The period in the context of DeepSeek-V4's compressed state, lcm(m, m') (1 for every other model):
    DeepSeek-V4-Flash's 4 and 128 give 128."""
    period = math.lcm(*(g.rate for g in sh.compressed)) if sh.compressed else 1
    if period > MAX_STATE_PERIOD:
        raise ValueError(f"the compress rates' least common multiple ({period}) exceeds {MAX_STATE_PERIOD}, the longest "
                         "period the decode's closed-form sum takes; use rates whose lcm is at most that")
    return period


# ============================================================================ compute-bound batch
def weights_only_compute_bound_batch(m: ModelConfig, gpu: GPU, spec: InferenceSpec) -> float:
    """The seed's threshold (App. "Compute-bound vs Memory-bound"): the batch at which a decode
    step's matmul FLOPs, 2·B·N_matmul, balance reading the weights, lambda_math · W_read bytes.

    B* = lambda_math · W_read / (2·N_matmul) ~ lambda_math · p / 2: 153.0 on an A100 80GB in
    bf16, 200.6 on the 40GB part (errata FAL-6; the seed says ~200 for the 80GB). It ignores
    attention and the KV cache, which is why the real threshold (`compute_bound_batch`) is higher
    or does not exist (errata FAL-5).
    """
    sh = rank_shard(m, spec)
    weights = _weights_read_bytes(sh, spec, sh.n_experts)  # every expert touched
    peak = peak_flops(gpu, spec.resolved_compute_dtype)
    lambda_math = Fraction(peak, gpu.memory_bw_bytes_s)
    return float(lambda_math * weights / (FLOPS_PER_MAC * sh.matmul_params))


def compute_bound_batch(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, context_len: int | None = None
) -> int | None:
    """Smallest B at which the decode step at `context_len` is compute-bound; None if no B is.

    Per GPU, FLOPs are B·f and bytes W(B) + B·k (f, k: FLOPs and cache bytes per sequence; W the
    weights read), so the step is compute-bound iff B·(f·bw - k·peak) >= W·peak: a closed form,
    and never when f·bw <= k·peak (the KV reads alone outweigh the FLOPs, errata FAL-5). A MoE's
    W(B) grows until every expert is touched; that regime is solved separately. The default
    context is the generation's last decode step (S + N_new - 1, at least S + 1), where the cache
    is largest: from this B on, every decode step of the generation is compute-bound.
    """
    c = spec.prompt_len + max(spec.new_tokens - 1, 1) if context_len is None else context_len
    _check_positive_int("context_len", c)
    sh = rank_shard(m, spec)
    peak, bw = peak_flops(gpu, spec.resolved_compute_dtype), gpu.memory_bw_bytes_s

    def is_compute_bound(batch: int) -> bool:
        variant = dataclasses.replace(spec, batch_size=batch)
        return decode_step_exact(m, gpu, variant, sh, c)[0].bound == COMPUTE

    one = decode_step_exact(m, gpu, dataclasses.replace(spec, batch_size=1), sh, c)[0]
    tokens = one.tokens
    f, kv = one.flops, one.kv_read_bytes + one.kv_write_bytes
    all_weights = _weights_read_bytes(sh, spec, sh.n_experts)  # every expert touched
    coef = f * bw - kv * peak
    if coef <= 0:
        return None
    saturated = -(-sh.n_experts // (tokens * sh.experts_per_token))  # B from which all are read
    batch = max(-(-all_weights * peak // coef), saturated)
    if saturated > 1:  # MoE below saturation: W(B) = W_base + B·tokens·top-k·L·expert bytes
        base, one_expert = _weight_split(sh, spec)
        expert_bytes = sh.moe_layers * one_expert
        coef_low = f * bw - (kv + tokens * sh.experts_per_token * expert_bytes) * peak
        low = math.ceil(base * peak / coef_low) if coef_low > 0 else saturated
        if low < saturated:  # compute-bound before every expert is read
            batch = max(low, 1)
    # Whole-byte rounding of the weights can move the answer by one; settle it on the step itself.
    while batch > 1 and is_compute_bound(batch - 1):
        batch -= 1
    while not is_compute_bound(batch):
        batch += 1
    return batch


# ============================================================================ everything
@dataclass(frozen=True)
class InferenceEstimate:
    """`tcalc inference`: one generation of N_new tokens for B prompts of S tokens on T GPUs."""

    spec: InferenceSpec
    gpu_name: str
    matmul_params_per_gpu: int
    kv_cache: KVCache  # at the peak context, S + N_new - 1
    memory: InferenceMemory  # per GPU
    prefill: Step
    decode: Decode
    time_to_first_token_s: float  # the prefill
    total_s: float  # prefill + every decode step
    tokens_per_s: float  # B · N_new / total_s
    compute_bound_batch: int | None  # exact, at the last decode step's context
    compute_bound_batch_weights_only: float  # the seed's lambda_math · p / 2 form


def estimate_inference(m: ModelConfig, gpu: GPU, spec: InferenceSpec) -> InferenceEstimate:
    """Every inference estimate for one model, GPU and spec."""
    prefill = prefill_step(m, gpu, spec)
    dec = decode(m, gpu, spec)
    total = prefill.seconds + dec.seconds
    return InferenceEstimate(
        spec=spec,
        gpu_name=gpu.name,
        matmul_params_per_gpu=matmul_params(m, spec.tensor_parallel),
        kv_cache=kv_cache(m, spec),
        memory=inference_memory(m, gpu, spec),
        prefill=prefill,
        decode=dec,
        time_to_first_token_s=prefill.seconds,
        total_s=total,
        tokens_per_s=spec.batch_size * spec.new_tokens / total,
        compute_bound_batch=compute_bound_batch(m, gpu, spec),
        compute_bound_batch_weights_only=weights_only_compute_bound_batch(m, gpu, spec),
    )
