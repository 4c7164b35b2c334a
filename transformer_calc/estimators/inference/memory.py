"""What inference holds in memory on one rank: the KV cache and decode state (`kv_cache`,
`decode_state`), the weights a step reads, and the total against a GPU (`inference_memory`,
`min_tensor_parallel`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

from transformer_calc.devices.hardware import GPU
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.inference.shard import (
    KVGroup,
    Shard,
    StateGroup,
    expert_layout,
    expert_slots,
    mixer_state_groups,
    rank_shard,
)
from transformer_calc.estimators.inference.spec import (
    CHECKPOINT,
    DTYPE_BITS,
    InferenceSpec,
    KV_DTYPE_BITS,
    MAX_CONTEXT_SEARCH,
    MAX_TENSOR_PARALLEL,
    check_positive_int,
    storage_bytes,
)
from transformer_calc.estimators.params import check_tensor_parallel
from transformer_calc.model.config import ModelConfig
from transformer_calc.model.units import BITS_PER_BYTE


def kv_bytes(sh: Shard, spec: InferenceSpec, tokens: int, *, held: bool = True, read: bool = False,
              allocated: bool = False) -> int:
    """Cache bytes of `tokens` positions of one sequence on one rank: what the cache holds after
    them (`held`: sliding and chunked layers keep their last window - 1), or, with held=False,
    `tokens` freshly written positions in every layer; `read`: what a query reads of what is held
    (DSA: at most index_topk tokens of the latent cache, every indexer key). DeepSeek-V4's compressed
    layers add their state after `tokens` positions (`CompressedGroup.held`; written fresh: the state those
    tokens leave from an empty cache); `allocated`: its buffers at their largest. Whole bytes, rounded once."""
    bits = KV_DTYPE_BITS[spec.resolved_kv_dtype]

    def count(g: KVGroup) -> int:
        n = g.cached(tokens) if held else tokens
        return min(n, g.topk) if read and g.topk is not None else n

    def width(g: KVGroup) -> int:
        return g.read_elements if read and g.read_elements is not None else g.elements

    elements = sum(g.layers * width(g) * count(g) for g in sh.kv_groups)
    elements += sum(g.held(tokens, read=read and held, allocated=allocated) for g in sh.compressed)
    return storage_bytes(elements, bits)


def state_bytes(sh: Shard, spec: InferenceSpec) -> int:
    """Decode-state bytes of one sequence on one rank: every mixer layer's conv state at the
    activation dtype and its recurrent state at the state dtype (0 without mixer layers)."""
    if not sh.state_groups:
        return 0
    return sum(_group_state_bytes(sh.state_groups, spec))


def _group_state_bytes(groups: tuple[StateGroup, ...], spec: InferenceSpec) -> tuple[int, int]:
    """(conv bytes, recurrent bytes) of one sequence over `groups`: the conv state and the states kept
    at the activation dtype (lightning), and the recurrent states at the state dtype."""
    act = sum(g.layers * (g.conv + (g.recurrent if g.recurrent_at_activation_dtype else 0)) for g in groups)
    conv = sum(g.layers * g.conv for g in groups)
    state = sum(g.layers * g.recurrent for g in groups if not g.recurrent_at_activation_dtype)
    act_bits, state_bits = DTYPE_BITS[spec.resolved_activation_dtype], DTYPE_BITS[spec.resolved_state_dtype]
    conv_bytes = storage_bytes(conv, act_bits)
    return conv_bytes, storage_bytes(act, act_bits) - conv_bytes + storage_bytes(state, state_bits)


def paged_compressed_elements(sh: Shard, context: int, block_size: int) -> int:
    """DeepSeek-V4's compressed state of one sequence of `context` tokens under a paged engine, in
    elements (0 for every other model): each compressed layer's floor(c / m) entries (h_d + d_I each) in
    whole blocks of `block_size` entries, the way a full-attention layer pages its tokens, and its
    open-window buffers and CSA overlap as a constant per-sequence slot at their largest (m - 1 tokens),
    the way a hybrid's mixer state is held beside the blocks. The window is paged as a sliding layer's."""
    return sum(g.layers * (-(-(context // g.rate) // block_size) * block_size * (g.entry + g.index_entry)
                           + g.buffer * (g.rate - 1) + g.overlap) for g in sh.compressed)


def _kv_bytes_per_token(sh: Shard, spec: InferenceSpec) -> int:
    """Cache bytes one token adds in every layer, on one rank, while the context is shorter than
    every window: 2·L·n_kv_rank·h_d·p for standard attention (MLA latent: L·(r_kv + d_rope)·p)."""
    return kv_bytes(sh, spec, 1, held=False)


# (1 − k/n)^t below 2^-100: the experts left unread hold under a byte of any model below 2^100 bytes, so a
# step reads every expert (the bytes, rounded up once, are those of the exact expectation)
UNTOUCHED_CUTOFF_BITS = 100
# (1 − k/n)^t is exact while n^t stays under 2^16 bits (every real model's decode batch); beyond, the float
# power (relative error ~1e-16: under a byte of any model below 10^16 bytes), so a hostile n or t stays fast
EXACT_POWER_BITS = 2**16


def untouched_share(n: int, k: int, tokens: int) -> Fraction:
    """The share of n experts that none of `tokens` tokens routes to, each token picking k of them:
    (1 − k/n)^tokens, exact (the occupancy problem's expectation, "balls into bins": an expert escapes
    one token's top-k with probability 1 − k/n; Feller, An Introduction to Probability Theory, vol. 1,
    ch. II "the occupancy problem"). Assumes uniform, independent routing, an upper estimate: a skewed
    router (hot experts, tokens of one sequence routed alike) leaves more experts untouched. 0 for a
    dense MLP (n = 1) and from the cutoff above on."""
    if tokens >= all_touched_tokens(n, k):
        return Fraction(0)
    if tokens * n.bit_length() > EXACT_POWER_BITS:
        return Fraction(math.exp(tokens * math.log1p(-k / n)))
    return Fraction(n - k, n) ** tokens


def all_touched_tokens(n: int, k: int) -> int:
    """The fewest tokens from which `untouched_share` is 0: (1 − k/n)^t < 2^-UNTOUCHED_CUTOFF_BITS
    (0 for a dense MLP or k = n). Mixtral (2 of 8): 241; DeepSeek-V3 (8 of 256): 2,184."""
    if n <= 1 or k >= n:
        return 0
    return math.floor(UNTOUCHED_CUTOFF_BITS / math.log2(n / (n - k))) + 1


def expected_experts_touched(n: int, k: int, tokens: int, held: int | None = None) -> float:
    """Experts a step of `tokens` tokens is expected to touch, k of n routed per token, among the `held`
    (default all n) one GPU holds: held·(1 − (1 − k/n)^tokens). k at one token; Mixtral (2 of 8) at 8
    tokens 7.20 (the bound min(n, tokens·k): 8); DeepSeek-V3 (8 of 256) at 32 tokens 163.3 (bound 256).
    MoE decode's weight reads follow this count of distinct experts, not the tokens ("Opportunistic
    Expert Activation", arXiv 2511.02237: MoE decode latency is governed by the number of activated
    experts; Yu et al. 2025, arXiv 2512.09277, METRO: likewise per GPU under expert parallelism)."""
    n_held = n if held is None else held
    return float(n_held * (1 - untouched_share(n, k, tokens)))


def weights_read_bytes(sh: Shard, spec: InferenceSpec, tokens: int | None) -> int:
    """Weight bytes one step reads when it processes `tokens` tokens (all sequences together; None:
    every expert, the step at which all are read).

    Every weight is read once, except the tables a step only gathers rows from (an untied token
    embedding, learned positions: a few rows, not counted). A MoE reads the experts its tokens are
    expected to touch: of the n_experts/ep a GPU holds, n_held·(1 − (1 − k/n)^t) per layer
    (`untouched_share`: uniform routing, an upper estimate), t the tokens routed over the expert-parallel
    group: the step's tokens, times ep/T under DP attention (ep > T: each GPU's experts serve ep/T
    attention groups). The mean GPU's reads: the slowest GPU of an EP group touches more (not modelled).
    Redundant expert slots are counted as n_experts + r experts routed uniformly. The bytes are the
    exact expectation's, rounded up once.
    """
    T, ep = sh.expert_assignments_share
    if tokens is None:
        idle = Fraction(0)
    else:
        routed = tokens * max(ep // T, 1)  # DP attention: the ep/T groups' tokens reach each GPU's experts
        idle = sh.n_experts * untouched_share(sh.n_experts * ep, sh.experts_per_token, routed)
    if sh.store is not None:  # a quantized format: its bytes, an idle expert at its stored size
        q = sh.store
        idle_bytes = sh.moe_layers * idle * q.expert_bytes if q.expert_params else 0
        read = q.total_bytes - q.gathered_bytes - idle_bytes
        return -(-read.numerator // read.denominator) if isinstance(read, Fraction) else read
    elements = sh.params - sh.gathered_params - sh.moe_layers * idle * sh.expert_params + sh.reread_params
    read_bytes = elements * DTYPE_BITS[spec.weight_dtype] / BITS_PER_BYTE  # exact; whole bytes, rounded up once
    return -(-read_bytes.numerator // read_bytes.denominator)


def weight_split(sh: Shard, spec: InferenceSpec) -> tuple[Fraction, Fraction]:
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
    check_positive_int("context_len", c)
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
        total_bytes=B * kv_bytes(whole, spec, c),
        per_gpu_bytes=B * kv_bytes(sh, spec, c),
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
    whole = mixer_state_groups(m, 1)
    if not whole:  # no mixer layer in the plan: no state beside the cache
        return None
    sh = rank_shard(m, spec)
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


def tower_bytes(sh: Shard, spec: InferenceSpec) -> int:
    """Bytes of the towers one GPU holds (whole on every GPU): at the weight dtype, at 16 bits beside
    a quantized format, and 0 for a checkpoint (its stored bytes hold them already)."""
    if not sh.tower_params or spec.weight_dtype == CHECKPOINT:
        return 0
    return storage_bytes(sh.tower_params, TOWER_BITS if sh.store is not None else DTYPE_BITS[spec.weight_dtype])


def memory_terms(sh: Shard, spec: InferenceSpec) -> tuple[int, int, int]:
    """(weight bytes, cache bytes per cached token, workspace bytes per prefill token). The weights
    are the language model's shard plus the towers (vision/audio encoders and projectors) whole."""
    if sh.store is not None:
        weights = sh.store.total_bytes + tower_bytes(sh, spec)
    elif sh.tower_params and spec.weight_dtype != CHECKPOINT:  # one rounding of the whole
        weights = storage_bytes(sh.params + sh.tower_params, DTYPE_BITS[spec.weight_dtype])
    else:
        weights = storage_bytes(sh.params, DTYPE_BITS[spec.weight_dtype])
    kv_token = _kv_bytes_per_token(sh, spec) if spec.kv_cache else 0
    workspace_token = storage_bytes(sh.workspace_width, DTYPE_BITS[spec.resolved_activation_dtype])
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
        kv_seq = kv_bytes(sh, spec, prompt + extra, allocated=allocated) if spec.kv_cache else 0
        return kv_seq + state + ws_token * (prompt if spec.kv_cache else prompt + extra)

    kv = B * (kv_bytes(sh, spec, S + extra) if spec.kv_cache else 0)
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
