"""Training memory of attention layers shaped by their kind: MiMo-V2-Flash (docs/formulas.md §5.13).

Source: transformers 5.23 models/mimo_v2_flash/modeling_mimo_v2_flash.py (MiMoV2FlashAttention and its
eager_attention_forward). Its sliding layers have 2·n_kv K/V heads (`sliding_kv_heads`) and a learned sink
logit per query head (`sliding_sinks`); every layer's values are v_head_dim wide (`v_head_dim` < head_dim).
The attention part of one layer of `kind` (T ranks; the input and the W_O dropout as memory.py counts them):

- `default` profile (fused kernels; memory.py's `_layer_activations` conventions): the q/k/v input p·D,
  q and k p·(A + n_kv)·h_d, v p·n_kv·h_v, FlashAttention's fp32 logsumexp 4·A (else the scores and the
  softmax output 2·p·A·S; the sink column is one more per row on a sliding layer), W_O's input p·A·h_v.
- `torch-eager` profile (what autograd saves; measured by tools/crosscheck/activations_mixers.py): q and
  repeat_kv's k and v as the matmuls take them, contiguous at A heads, p·A·(2·h_d + h_v); the row maxima's
  int64 indices (`attn_weights.max(dim=-1)`: 8·A per token); the softmax output, in the scores' dtype
  (no fp32 upcast), over S keys plus the sink column on a sliding layer (p·A·(S + 1)), which P·V also takes
  (a view); W_O's input p·A·h_v. RoPE keeps its cos and sin (the head's, memory.torch_eager_head).

The other parts of the block (norms, MLP, MoE) are memory.py's. Not priced (refused by estimators/support_table.py's
lines): dropout, the seed profile, FP8 recipes and adapters (finetune.py has no per-kind modules yet).
"""

from __future__ import annotations

from transformer_calc.model.config import ActivationProfile, LayerAttention, ModelConfig, Parallelism, Recompute, Training, Workload

INDEX_BYTES = 8  # int64 indices of the row maxima
SOFTMAX_STAT_BYTES = 4  # FlashAttention's fp32 logsumexp


def shaped_by_kind(m: ModelConfig) -> bool:
    """Attention whose layers differ by kind or whose values are narrower (MiMo-V2-Flash)."""
    return m.per_kind_attention or (not m.is_mla and m.v_dim != m.head_dim)


def attention_bytes(m: ModelConfig, w: Workload, tr: Training, par: Parallelism, kind: LayerAttention) -> int:
    """The attention part of one layer of `kind` on one GPU (see the module docstring)."""
    from transformer_calc.estimators.params import kv_heads_per_rank

    B, S, D, T, p = w.batch_size, w.seq_len, m.d_model, par.tensor, tr.p
    S_rep = -(-S // T) if par.sequence_parallel else S
    if tr.recompute is Recompute.full:
        return 0  # the block input only (with the norms)
    A_t = m.n_heads // T
    kv_t = kv_heads_per_rank(m.kv_heads_of(kind), T, "sliding_kv_heads" if kind is LayerAttention.sliding else "n_kv_heads")
    hd, hv = m.head_dim, m.v_dim
    sink = 1 if kind is LayerAttention.sliding and m.sliding_sinks else 0
    N = B * S
    attn = p * B * S_rep * D  # the q/k/v input (the norm's output)
    if tr.activations is ActivationProfile.torch_eager and not tr.flash:
        attn += p * N * A_t * (2 * hd + hv)  # q, repeat_kv(k)^T, repeat_kv(v), contiguous
        core = INDEX_BYTES * N * A_t + p * N * A_t * (S + sink)  # row-max indices, softmax output
    elif tr.activations is ActivationProfile.torch_eager:  # SDPA (memory.torch_eager_layer's convention)
        attn += p * N * ((A_t + kv_t) * hd + kv_t * hv)  # q, k, v as projected
        core = p * N * A_t * hv + SOFTMAX_STAT_BYTES * N * A_t  # its output and logsumexp
    else:
        attn += p * N * ((A_t + kv_t) * hd + kv_t * hv)  # q, k, v
        if tr.flash:
            core = SOFTMAX_STAT_BYTES * N * A_t
        else:
            core = 2 * p * N * A_t * (S + sink)
    attn += 0 if tr.recompute is Recompute.selective else core
    attn += p * N * A_t * hv  # W_O's input
    return attn
