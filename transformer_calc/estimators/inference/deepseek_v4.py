"""DeepSeek-V4 inference on one GPU (T = 1, no expert parallelism): its decode state, the memory with it,
and the prefill and decode-step rooflines (docs/formulas.md §5.16, "Inference").

Sources: estimators/deepseek_v4.py (`cache_elements`: the decode state, equal to transformers 5.23's
cache tensors, tools/crosscheck/kv_cache_deepseek_v4.py; `forward_flops`: the eager forward's matmuls,
equal to FlopCounterMode); modeling_deepseek_v4.py for what a cached decode step computes; the roofline
of estimators/inference/roofline.py (seed notes 003 App. "Compute-bound vs Memory-bound").

Conventions:

- The decode state of one sequence after c tokens is `cache_elements(m, c).total` values at the state
  dtype (the model's dtype in transformers: its cache tensors are the activations'), rounded up to
  whole bytes once. It replaces the KV cache: DeepSeek-V4 has no other cache.
- Prefill of S tokens (no cache before it): `forward_flops(m, B, S)` (every part, the indexers' and the
  idle compressors' projections included) plus the LM head on every prompt token, 2·B·S·D·V, as the
  roofline counts it for every model. Bytes: the weights read once plus the state of B sequences at S
  tokens written.
- A decode step whose token is the c-th of its sequence: the per-token matmuls of `forward_flops(m, B, 1)`
  (projections, compressors' two projections, indexer projections, hyper-connections, k routed experts,
  the shared expert, the router) plus the LM head 2·B·D·V; attention over min(c, W) window keys plus
  floor(c / m) compressed entries on a CSA layer (floor(c / m') on an HCA layer), 2·2·B·A·h_d per key and
  layer, every compressed entry attended (the convention of `forward_flops`); each CSA indexer scores
  the token against the floor(c / m) entries, 2·B·H_I·d_I each. Bytes: the weights a step reads (all
  but the token embedding, which is gathered, and the routed experts no token touches: at most
  min(E, B·k) per layer, as roofline.py bounds it), the state of c - 1 tokens read, and what the token
  appends written: its window entry (h_d, 2·h_d on a sliding-only layer) and its open-window buffer
  entries (kv and gate); the compressed entry and overlap rewritten once per m tokens are not counted.
- Time: max(FLOPs / peak, bytes / bandwidth) per step; the decode steps summed in closed form
  (`decode_totals`), their time bracketed. T > 1 and expert parallelism are not modeled (not offered).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from transformer_calc.devices.hardware import GPU, peak_flops
from transformer_calc.errors import TcalcError
from transformer_calc.estimators import deepseek_v4 as v4
from transformer_calc.estimators.inference.roofline import DTYPE_BITS, Roofline, roofline
from transformer_calc.estimators.params import count_params
from transformer_calc.model.config import ModelConfig
from transformer_calc.model.units import BITS_PER_BYTE, FLOPS_PER_MAC

KV_AND_GATE = 2  # a compressor buffers each open-window token's kv and its gate


def _bytes(elements: int, bits: int) -> int:
    return -(-elements * bits // BITS_PER_BYTE)


def _dtype_bits(name: str, dtype: str) -> int:
    if dtype not in DTYPE_BITS:
        raise TcalcError(f"{name} ({dtype!r}) is not a plain dtype DeepSeek-V4 inference models; "
                         f"use one of {', '.join(DTYPE_BITS)}")
    return DTYPE_BITS[dtype]


def _check(m: ModelConfig, B: int, c: int, name: str) -> None:
    if m.deepseek_v4 is None:
        raise TcalcError("DeepSeek-V4 inference needs a deepseek_v4 model; give a deepseek_v4 config.json")
    v4.check(m)
    for field, value in (("batch_size", B), (name, c)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TcalcError(f"{field} ({value!r}) must be a whole number >= 1; give a positive count")


def state_bytes(m: ModelConfig, context_len: int, state_dtype: str = "bf16") -> int:
    """Decode-state bytes of one sequence after `context_len` tokens (`cache_elements` at the dtype)."""
    _check(m, 1, context_len, "context_len")
    return _bytes(v4.cache_elements(m, context_len).total, _dtype_bits("state_dtype", state_dtype))


def appended_elements(m: ModelConfig, context_len: int) -> int:
    """Values one decode token appends at position `context_len`: its window entry in every layer while
    the window still grows (h_d, 2·h_d on a sliding-only layer; a full window drops one and adds one, the
    same count), and its kv and gate in every compressor's and indexer's open-window buffer."""
    blocks, hd = m.deepseek_v4, m.head_dim
    assert blocks is not None
    n_csa, n_hca = len(blocks.csa_layer_ids), len(blocks.hca_layer_ids)
    window = hd * (2 * (m.n_layers - n_csa - n_hca) + n_csa + n_hca)
    buffers = KV_AND_GATE * (n_csa * v4.CSA_SERIES * (hd + blocks.index_head_dim) + n_hca * hd)
    return window + buffers


def weight_read_params(m: ModelConfig, batch_size: int) -> int:
    """Parameters one decode step of `batch_size` tokens reads: all but the token embedding (gathered)
    and the routed experts no token touches (at most min(E, B·k) touched per layer)."""
    p = count_params(m)
    touched = min(m.n_experts, batch_size * m.experts_per_token)
    idle = m.n_layers * (m.n_experts - touched) * v4.GATED_MATRICES * m.d_model * m.moe_d_ff
    return p.total - p.embedding - idle


@dataclass(frozen=True)
class V4Step:
    """One DeepSeek-V4 forward of B sequences on one GPU: the prefill, or one decode step."""

    tokens: int  # per sequence: S (prefill) or 1 (decode)
    context_len: int  # the last token's position
    flops: int
    attention_flops: int  # attention cores and indexer scoring (in flops)
    weight_bytes: int
    state_read_bytes: int
    state_write_bytes: int
    roofline: Roofline


def _line(m: ModelConfig, gpu: GPU, flops: int, moved: int, compute_dtype: str) -> Roofline:
    return roofline(flops, moved, peak_flops(gpu, compute_dtype), gpu.memory_bw_bytes_s)


def prefill(m: ModelConfig, gpu: GPU, batch_size: int, prompt_len: int, weight_dtype: str = "bf16",
            state_dtype: str = "bf16") -> V4Step:
    """The prefill of B prompts of S tokens: `forward_flops(m, B, S)` + the LM head; the weights read
    once and the B states at S tokens written."""
    _check(m, batch_size, prompt_len, "prompt_len")
    B, S = batch_size, prompt_len
    f = v4.forward_flops(m, B, S)
    flops = f.blocks + f.indexer + f.idle_compressors + FLOPS_PER_MAC * B * S * m.d_model * m.vocab_size
    blocks = m.deepseek_v4
    assert blocks is not None
    d_i, h_i, t = blocks.index_head_dim, blocks.index_n_heads, S // blocks.csa_compress_rate
    attention = f.attention_cores + len(blocks.csa_layer_ids) * FLOPS_PER_MAC * B * S * h_i * t * d_i
    weights = _bytes(weight_read_params(m, B * S), _dtype_bits("weight_dtype", weight_dtype))
    write = B * state_bytes(m, S, state_dtype)
    return V4Step(S, S, flops, attention, weights, 0, write,
                  _line(m, gpu, flops, weights + write, _compute(weight_dtype)))


def _compute(weight_dtype: str) -> str:
    return weight_dtype if weight_dtype in ("fp32", "fp16", "bf16", "fp8") else "bf16"


def decode_step(m: ModelConfig, gpu: GPU, batch_size: int, context_len: int, weight_dtype: str = "bf16",
                state_dtype: str = "bf16") -> V4Step:
    """One decode step of B sequences whose new token is the `context_len`-th (c >= 2: a prompt came first)."""
    _check(m, batch_size, context_len, "context_len")
    if context_len < 2:
        raise TcalcError(f"context_len ({context_len}) of a decode step must be >= 2 (the prompt's tokens "
                         "and the new one); use the prefill for the first token")
    B, c = batch_size, context_len
    blocks = m.deepseek_v4
    assert blocks is not None
    f = v4.forward_flops(m, B, 1)  # S = 1: no compressed entry, so only the per-token matmuls and 1 key
    A, hd, W = m.n_heads, m.head_dim, m.sliding_window or 1
    n_csa, n_hca = len(blocks.csa_layer_ids), len(blocks.hca_layer_ids)
    t_csa, t_hca = c // blocks.csa_compress_rate, c // blocks.hca_compress_rate
    keys = min(c, W)
    per_key = 2 * FLOPS_PER_MAC * B * A * hd  # scores and re-weighting, one query
    cores = per_key * (m.n_layers * keys + n_csa * t_csa + n_hca * t_hca)
    scoring = n_csa * FLOPS_PER_MAC * B * blocks.index_n_heads * t_csa * blocks.index_head_dim
    matmuls = (f.blocks - f.attention_cores) + f.indexer + f.idle_compressors
    flops = matmuls + cores + scoring + FLOPS_PER_MAC * B * m.d_model * m.vocab_size
    s_bits = _dtype_bits("state_dtype", state_dtype)
    weights = _bytes(weight_read_params(m, B), _dtype_bits("weight_dtype", weight_dtype))
    read = B * _bytes(v4.cache_elements(m, c - 1).total, s_bits)
    write = B * _bytes(appended_elements(m, c), s_bits)
    return V4Step(1, c, flops, cores + scoring, weights, read, write,
                  _line(m, gpu, flops, weights + read + write, _compute(weight_dtype)))


@dataclass(frozen=True)
class V4Memory:
    """One GPU's memory at the peak context: the weights and the B decode states."""

    weights_bytes: int
    state_bytes_per_sequence: int  # at the peak context S + N_new - 1
    state_bytes: int  # B sequences
    total_bytes: int
    capacity_bytes: int
    fits: bool
    max_batch_size: int  # the most sequences whose states fit beside the weights


def memory(m: ModelConfig, gpu: GPU, batch_size: int, context_len: int, weight_dtype: str = "bf16",
           state_dtype: str = "bf16") -> V4Memory:
    """Weights (every parameter at the weight dtype) plus B states at `context_len` tokens; the prefill's
    activations are not counted."""
    _check(m, batch_size, context_len, "context_len")
    weights = _bytes(count_params(m).total, _dtype_bits("weight_dtype", weight_dtype))
    per_seq = state_bytes(m, context_len, state_dtype)
    total = weights + batch_size * per_seq
    return V4Memory(weights, per_seq, batch_size * per_seq, total, gpu.memory_bytes, total <= gpu.memory_bytes,
                    max((gpu.memory_bytes - weights) // per_seq, 0))


def _floor_sum(n: int, m: int) -> int:
    """sum of floor(c / m) for c = 0 .. n (closed form: q full blocks of m, then r + 1 terms of q)."""
    if n < 0:
        return 0
    q, r = divmod(n, m)
    return m * q * (q - 1) // 2 + q * (r + 1)


def _range_sum(f: Callable[[int], int], a: int, b: int) -> int:
    """sum of g(c) for c = a .. b given f(n) = sum of g(c) for c = 0 .. n."""
    return f(b) - f(a - 1) if b >= a else 0


def _min_sum(n: int, cap: int) -> int:
    """sum of min(c, cap) for c = 0 .. n."""
    if n < 0:
        return 0
    k = min(n, cap)
    return k * (k + 1) // 2 + (n - k) * cap


@dataclass(frozen=True)
class V4Decode:
    """The N_new - 1 decode steps (contexts S + 1 .. S + N_new - 1) summed in closed form on one GPU."""

    steps: int
    flops: int
    bytes_moved: int
    min_s: float  # max(FLOPs / peak, bytes / bandwidth) of the sums: no step can beat its own roofline
    max_s: float  # FLOPs / peak + bytes / bandwidth: compute and memory traffic not overlapped


def decode_totals(m: ModelConfig, gpu: GPU, batch_size: int, prompt_len: int, new_tokens: int,
                  weight_dtype: str = "bf16", state_dtype: str = "bf16") -> V4Decode:
    """The decode steps after a prompt of S tokens, summed exactly without a loop: every per-step term is
    a constant, min(c, W), floor(c / m), floor(c / m') or c mod m = c − m·floor(c / m) (`decode_step`),
    each with a closed-form sum. The time of the sum of per-step maxima is bracketed: the per-step bound
    switches between compute and memory where floor(c/m) steps, which no polynomial piece follows."""
    _check(m, batch_size, prompt_len, "prompt_len")
    _check(m, batch_size, new_tokens, "new_tokens")
    s_bits = _dtype_bits("state_dtype", state_dtype)
    if s_bits % BITS_PER_BYTE:
        raise TcalcError(f"state_dtype ({state_dtype}) packs values below a byte; the decode totals need a "
                         "byte-wide state dtype (fp8, bf16, fp16, fp32)")
    B, n = batch_size, new_tokens - 1
    a, b = prompt_len + 1, prompt_len + n  # the steps' contexts
    blocks = m.deepseek_v4
    assert blocks is not None
    if n == 0:
        return V4Decode(0, 0, 0, 0.0, 0.0)
    first = decode_step(m, gpu, B, a, weight_dtype, state_dtype)
    A, hd, W, L = m.n_heads, m.head_dim, m.sliding_window or 1, m.n_layers
    m_c, m_h, d_i = blocks.csa_compress_rate, blocks.hca_compress_rate, blocks.index_head_dim
    n_csa, n_hca = len(blocks.csa_layer_ids), len(blocks.hca_layer_ids)
    n_sliding = L - n_csa - n_hca
    per_key = 2 * FLOPS_PER_MAC * B * A * hd
    score = FLOPS_PER_MAC * B * blocks.index_n_heads * d_i
    fixed_flops = first.flops - first.attention_flops  # matmuls and LM head: the same every step
    floors_c = _range_sum(lambda x: _floor_sum(x, m_c), a, b)
    floors_h = _range_sum(lambda x: _floor_sum(x, m_h), a, b)
    flops = (n * fixed_flops + per_key * L * _range_sum(lambda x: _min_sum(x, W), a, b)
             + (per_key + score) * n_csa * floors_c + per_key * n_hca * floors_h)
    # the state read at c − 1 (cache_elements' terms over c' = a − 1 .. b − 1) and the appended entries
    lo, hi = a - 1, b - 1
    csa_w = hd + d_i
    ids = _range_sum(lambda x: x * (x + 1) // 2, lo, hi)  # sum of c'
    fl_c = _range_sum(lambda x: _floor_sum(x, m_c), lo, hi)
    fl_h = _range_sum(lambda x: _floor_sum(x, m_h), lo, hi)
    window = hd * (2 * n_sliding + n_csa + n_hca) * _range_sum(lambda x: _min_sum(x, W - 1), lo, hi)
    compressed = n_csa * fl_c * csa_w + n_hca * fl_h * hd
    buffers = KV_AND_GATE * (n_csa * (ids - m_c * fl_c) * v4.CSA_SERIES * csa_w + n_hca * (ids - m_h * fl_h) * hd)
    overlap_steps = max(hi - max(lo, m_c) + 1, 0)  # steps whose c' >= m
    overlap = KV_AND_GATE * n_csa * m_c * csa_w * overlap_steps
    state_elements = window + compressed + buffers + overlap + n * appended_elements(m, a)
    moved = n * first.weight_bytes + B * state_elements * (s_bits // BITS_PER_BYTE)
    peak, bw = peak_flops(gpu, _compute(weight_dtype)), gpu.memory_bw_bytes_s
    return V4Decode(n, flops, moved, max(flops / peak, moved / bw), flops / peak + moved / bw)
