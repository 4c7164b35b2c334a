"""DeepSeek-V4's decode state for inference, part by part (docs/formulas.md §5.16, "Inference").

`tcalc inference`, `serve` and `sweep` price DeepSeek-V4 through the roofline of roofline.py. Its whole-model
switches are here: one GPU's shard of the model (`rank_shard`: its cache as sliding-window groups and compressed
groups, its weights, its experts) and the weights a token multiplies (`matmul_params`), each the layer plan's
(shard.py, passed in) for a model without DeepSeek-V4's blocks. This module also states that cache by part
for the report (`decode_state`), and in bytes of one sequence (`state_bytes`), from estimators/deepseek_v4.py
`cache_elements` (equal to transformers 5.23's cache tensors: tools/crosscheck/kv_cache_deepseek_v4.py; its
measured bytes are test fixtures).

Conventions: the state is held at the KV-cache dtype (`kv_dtype`, by default the activation dtype: the
model's dtype, which transformers' cache tensors take); it stands in for the KV cache (DeepSeek-V4 has no
other cache). The window grows until it holds W - 1 tokens, the compressed entries grow by one per m (m')
tokens without end, the open-window buffers and the CSA overlap stay below a constant: a
constant-plus-growing state. Per GPU: T = 1 (estimators/deepseek_v4.py `check_layout`), every GPU holding its
own B sequences' state also when the routed experts are spread over ep GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from transformer_calc.errors import TcalcError
from transformer_calc.estimators import deepseek_v4 as v4
from transformer_calc.estimators.inference.layout import expert_layout, expert_slots, weight_store
from transformer_calc.estimators.inference.rank_parts import KV_TENSORS, CompressedGroup, KVGroup, Shard
from transformer_calc.estimators.inference.spec import KV_DTYPE_BITS, InferenceSpec
from transformer_calc.estimators.params import GATED_MATRICES, check_tensor_parallel, count_params
from transformer_calc.model.config import ModelConfig
from transformer_calc.model.units import BITS_PER_BYTE, FLOPS_PER_MAC


def _bytes(elements: int, bits: int | Fraction) -> int:
    return int(-(-elements * bits // BITS_PER_BYTE))  # whole bytes, rounded up once


def _check(m: ModelConfig) -> None:
    if m.deepseek_v4 is None:
        raise TcalcError("DeepSeek-V4's decode state needs a deepseek_v4 model; give a deepseek_v4 config.json")
    v4.check(m)


def _check_context(context_len: object) -> None:
    if isinstance(context_len, bool) or not isinstance(context_len, int) or context_len < 1:
        raise TcalcError(f"context_len ({context_len!r}) must be a whole number >= 1; give a positive count")


def state_bytes(m: ModelConfig, context_len: int, kv_dtype: str = "bf16") -> int:
    """Decode-state bytes of one sequence after `context_len` tokens (`cache_elements` at the dtype)."""
    _check(m)
    _check_context(context_len)
    if kv_dtype not in KV_DTYPE_BITS:
        raise TcalcError(f"kv_dtype ({kv_dtype!r}) is not a cache dtype; use one of {', '.join(KV_DTYPE_BITS)}")
    return _bytes(v4.cache_elements(m, context_len).total, KV_DTYPE_BITS[kv_dtype])


def appended_elements(m: ModelConfig, context_len: int) -> int:
    """Values one decode token appends at position `context_len`: its window entry in every layer (h_d,
    2·h_d on a sliding-only layer; a full window drops one and adds one, the same count), and its kv and
    gate in every compressor's and indexer's open-window buffer (what roofline.py writes per decode token;
    the entry a closing window compresses is not counted)."""
    _check(m)
    blocks, hd = m.deepseek_v4, m.head_dim
    assert blocks is not None
    n_csa, n_hca = len(blocks.csa_layer_ids), len(blocks.hca_layer_ids)
    window = hd * (2 * (m.n_layers - n_csa - n_hca) + n_csa + n_hca)
    buffers = v4.KV_AND_GATE * (n_csa * v4.CSA_SERIES * (hd + blocks.index_head_dim) + n_hca * hd)
    return window + buffers


@dataclass(frozen=True)
class DecodeStateParts:
    """DeepSeek-V4's decode state at `context_len` tokens, by part, one sequence and B sequences (one GPU
    holds them all: T = 1; with ep GPUs each holds its own B). Each part is rounded up to whole bytes on its
    own; `bytes_per_sequence` once."""

    layers_by_kind: dict[str, int]  # sliding (window only), csa, hca
    compress_rates: dict[str, int]  # csa: m, hca: m'
    dtype: str
    context_len: int
    window_bytes_per_sequence: int  # the last min(c, W - 1) tokens' K = V head
    compressed_bytes_per_sequence: int  # floor(c / m) CSA entries (h_d + d_I), floor(c / m') HCA entries (h_d)
    buffer_bytes_per_sequence: int  # the open windows' c mod m tokens, kv and gate
    overlap_bytes_per_sequence: int  # CSA: the last full window's Ca slice, once c >= m
    bytes_per_sequence: int
    bytes_per_sequence_per_gpu: int
    total_bytes: int  # B sequences
    per_gpu_bytes: int


def decode_state(m: ModelConfig, spec: InferenceSpec, context_len: int | None = None) -> DecodeStateParts:
    """The decode state of `spec`'s B sequences at `context_len` (default: the peak, S + N_new - 1)."""
    _check(m)
    c = spec.peak_context_len if context_len is None else context_len
    _check_context(c)
    blocks = m.deepseek_v4
    assert blocks is not None
    bits = KV_DTYPE_BITS[spec.resolved_kv_dtype]
    parts = v4.cache_elements(m, c)
    n_csa, n_hca = len(blocks.csa_layer_ids), len(blocks.hca_layer_ids)
    per_seq = _bytes(parts.total, bits)
    return DecodeStateParts(
        layers_by_kind={"sliding": m.n_layers - n_csa - n_hca, "csa": n_csa, "hca": n_hca},
        compress_rates={"csa": blocks.csa_compress_rate, "hca": blocks.hca_compress_rate},
        dtype=spec.resolved_kv_dtype,
        context_len=c,
        window_bytes_per_sequence=_bytes(parts.window, bits),
        compressed_bytes_per_sequence=_bytes(parts.compressed, bits),
        buffer_bytes_per_sequence=_bytes(parts.buffers, bits),
        overlap_bytes_per_sequence=_bytes(parts.overlap, bits),
        bytes_per_sequence=per_seq,
        bytes_per_sequence_per_gpu=per_seq,
        total_bytes=spec.batch_size * per_seq,
        per_gpu_bytes=spec.batch_size * per_seq,
    )


# ============================================================================ its whole-model switches
def rank_shard(m: ModelConfig, spec: InferenceSpec, layered: Callable[[ModelConfig, InferenceSpec], Shard]) -> Shard:
    """One GPU's shard: DeepSeek-V4's (`_shard`), or `layered(m, spec)`, the layer plan's (shard.py), for a model
    without its blocks."""
    if m.deepseek_v4 is None:
        return layered(m, spec)
    return _shard(m, spec)


def matmul_params(m: ModelConfig, T: int, layered: Callable[[ModelConfig, int], int]) -> int:
    """Weights one token multiplies on one of T ranks: DeepSeek-V4's (`_matmul_params`, its layout checked), or
    `layered(m, T)`, the layer plan's (shard.py), for a model without its blocks."""
    if m.deepseek_v4 is None:
        return layered(m, T)
    v4.check_layout(m, T, 1)
    return _matmul_params(m)


def _matmul_params(m: ModelConfig) -> int:
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


def _shard(m: ModelConfig, spec: InferenceSpec) -> Shard:
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
    window, compressed = _cache_groups(m)
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
        matmul_params=_matmul_params(m),
        # the block's n_hc residual streams in and out (mHC, report §2.2) and its widest intermediate
        workspace_width=2 * blocks.hc_mult * D + max(qkv_width, mlp_width),
        store=weight_store(m, spec, 1),
        compressed=compressed,
    )


def _cache_groups(m: ModelConfig) -> tuple[tuple[KVGroup, ...], tuple[CompressedGroup, ...]]:
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
