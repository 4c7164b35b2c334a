"""Multi-head latent attention (DeepSeek-V2/V3, Kimi K2, GLM-5) and DeepSeek-V3.2's sparse attention
indexer (DSA): the block's own parameters, so that the estimators ask it instead of branching on MLA.

Sources: modeling_deepseek_v3.py DeepseekV3Attention (q_a_proj, q_a_layernorm, q_b_proj,
kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj); modeling_deepseek_v32.py DeepseekV32Indexer and
the DeepSeek-V3.2 tech report §2.1 (the lightning indexer).
"""
from __future__ import annotations

from transformer_calc.model.config import LoraTarget, ModelConfig
from transformer_calc.model.units import FLOPS_PER_MAC

# One nn.Linear module on one tensor-parallel rank, as the attention protocol (estimators/attention.py) states it:
# (its name in the modeling file, the LoRA targets that select it, d_in, d_out as sharded, split: col / row / rep)
LinearSpec = tuple[str, frozenset[LoraTarget], int, int, str]
# One weight tensor as GGUF names it, on one rank: (ggml name, its input dimension, its elements)
MatrixSpec = tuple[str, int, int]


def attention_weights(m: ModelConfig, q_heads: int, kv_heads: int) -> tuple[int, int, int, int]:
    """(W_Q, W_K, W_V, W_O) of MLA for q_heads query heads (no K/V heads of its own: kv_heads is unused; one TP rank's: its heads of q_b_proj, kv_b_proj and
    o_proj; the down-projections to the latents, q_a_proj and kv_a_proj_with_mqa, are replicated)."""
    D, hd = m.d_model, m.head_dim
    r_kv, rope, nope, dv = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
    assert r_kv is not None and rope is not None and nope is not None and dv is not None
    if m.q_lora_rank is None:
        q = D * q_heads * hd  # q_proj
    else:
        q = D * m.q_lora_rank + m.q_lora_rank * q_heads * hd  # q_a_proj + q_b_proj
    k = D * (r_kv + rope) + r_kv * q_heads * nope  # kv_a_proj_with_mqa + key half of kv_b_proj
    v = r_kv * q_heads * dv  # value half of kv_b_proj
    return q, k, v, q_heads * dv * D


def attention_bias(m: ModelConfig, q_heads: int, kv_heads: int, out_bias: bool) -> int:
    """MLA's biases (modeling_deepseek_v3.py: q_a_proj, kv_a_proj_with_mqa and o_proj take attention_bias;
    the down-projections are replicated, so one rank holds them whole; q_heads, kv_heads unused)."""
    r_kv, rope = m.kv_lora_rank, m.qk_rope_head_dim
    assert r_kv is not None and rope is not None  # MLA's widths are required (checks._check_mla)
    bias = (m.q_lora_rank or 0) + r_kv + rope if m.qkv_bias else 0
    return bias + (m.d_model if out_bias else 0)


def cached_elements(m: ModelConfig, T: int, cached_heads: int, latent: bool) -> int:
    """Cached values per token and layer on one of T ranks. The latent cache: the compressed latent and the
    shared rotary key, r_kv + d_rope (modeling_deepseek_v3.py caches them; transformers 5 too), the same on
    every rank (replicated, not split); decompressed: per-head K (h_d) and V (h_v) of the rank's A/T heads, as
    engines that expand the latent before caching hold (cached_heads unused)."""
    if latent:
        return (m.kv_lora_rank or 0) + (m.qk_rope_head_dim or 0)
    return (m.n_heads // T) * (m.head_dim + m.v_dim)


def qkv_width(m: ModelConfig, q_heads: int, kv_heads: int) -> int:
    """The q, k and v one rank's layer computes: per query head q and k of h_d, v of h_v (kv_b_proj expands the
    latent per head; kv_heads unused)."""
    return q_heads * (m.head_dim + m.head_dim + m.v_dim)


def linears(m: ModelConfig, T: int) -> list[LinearSpec]:
    """MLA's Linear modules on one of T ranks (modeling_deepseek_v3.py DeepseekV3Attention): q_proj, or
    q_a_proj (replicated) and q_b_proj; kv_a_proj_with_mqa (replicated), kv_b_proj (column-parallel, K and V of
    every head), o_proj (row-parallel)."""
    q, k, v, o = LoraTarget.q, LoraTarget.k, LoraTarget.v, LoraTarget.o
    D, hd, A = m.d_model, m.head_dim, m.n_heads
    r_kv, rope = m.kv_lora_rank or 0, m.qk_rope_head_dim or 0
    if m.q_lora_rank is None:
        out: list[LinearSpec] = [("q_proj", frozenset({q}), D, A * hd // T, "col")]
    else:
        out = [("q_a_proj", frozenset({q}), D, m.q_lora_rank, "rep"), ("q_b_proj", frozenset({q}), m.q_lora_rank, A * hd // T, "col")]
    return out + [("kv_a_proj_with_mqa", frozenset({k, v}), D, r_kv + rope, "rep"),
                  ("kv_b_proj", frozenset({k, v}), r_kv, A * ((m.qk_nope_head_dim or 0) + m.v_dim) // T, "col"),
                  ("o_proj", frozenset({o}), A * m.v_dim // T, D, "row")]


def matrices(m: ModelConfig, q_heads: int, kv_heads: int) -> list[MatrixSpec]:
    """MLA's weight tensors as GGUF names them (llama.cpp deepseek2: attn_q or attn_q_a and attn_q_b,
    attn_kv_a_mqa, attn_kv_b, attn_output) on one rank of q_heads query heads (kv_heads unused)."""
    D, hd = m.d_model, m.head_dim
    r_q, r_kv = m.q_lora_rank, m.kv_lora_rank or 0
    rope, nope, dv = m.qk_rope_head_dim or 0, m.qk_nope_head_dim or 0, m.v_head_dim or 0
    if r_q is None:
        out = [("attn_q", D, D * q_heads * hd)]
    else:
        out = [("attn_q_a", D, D * r_q), ("attn_q_b", r_q, r_q * q_heads * hd)]
    return out + [("attn_kv_a_mqa", D, D * (r_kv + rope)), ("attn_kv_b", r_kv, r_kv * q_heads * (nope + dv)),
                  ("attn_output", q_heads * dv, q_heads * dv * D)]


def score_width(m: ModelConfig, width: int, latent_decode: bool) -> int:
    """A head's score plus value width: `width` (h_d + h_v of the expanded heads), but one-token decode over the
    latent cache runs absorbed (DeepSeek-V2 paper, arXiv:2405.04434 sec. 2.1.2: W^UK absorbed into the query,
    W^UV into the output; FlashMLA's decode kernel: head dim 576 for K, 512 for V): each head scores over
    r_kv + d_rope and re-weights r_kv-wide latent values. The absorption's own matmuls have kv_b_proj's
    parameters, already counted per token in matmul_params. The fewest FLOPs a latent cache allows:
    re-expanding the cached latent instead costs 2·r_kv·(d_nope + d_v) per head per cached token."""
    if not latent_decode:
        return width
    return 2 * (m.kv_lora_rank or 0) + (m.qk_rope_head_dim or 0)


def stored_qkv(m: ModelConfig, hd: int, A_t: int, kv_t: int) -> tuple[int, int]:
    """(values kept per token for the backward, K/V heads per rank) of MLA (modeling_deepseek_v3.py): the latents,
    replicated on every TP rank, are kept twice (the RMSNorm's input and the up-projection's input); the rotary
    key part once; then per-head q and k of h_d = d_nope + d_rope and v of d_v. The score and attention shapes
    are per query head: A_t K/V heads (kv_t unused)."""
    r_q, r_kv, rope = m.q_lora_rank or 0, m.kv_lora_rank or 0, m.qk_rope_head_dim or 0
    return 2 * r_q + 2 * r_kv + rope + A_t * (2 * hd + m.v_dim), A_t


def latent_norm_widths(m: ModelConfig) -> tuple[int, ...]:
    """The widths of MLA's latent norms: kv_a_layernorm (r_kv) and q_a_layernorm (r_q, when q is low-rank);
    none for a model without MLA."""
    if m.kv_lora_rank is None:  # not MLA
        return ()
    return (m.kv_lora_rank,) + ((m.q_lora_rank,) if m.q_lora_rank else ())


def indexer_params(m: ModelConfig) -> int:
    """One DSA lightning indexer (modeling_deepseek_v32.py DeepseekV32Indexer; DeepSeek-V3.2 tech
    report §2.1): wq_b r_q x H_I·d_I (queries from MLA's q_lora_rank latent), wk D x d_I (one key
    head), k_norm nn.LayerNorm(d_I) (weight and bias, whatever the model's norm kind),
    weights_proj D x H_I (a weight per indexer head); no biases. 0 for a model without DSA."""
    if not m.is_dsa:
        return 0
    H, d, r_q, D = m.index_n_heads, m.index_head_dim, m.q_lora_rank, m.d_model
    assert H is not None and d is not None and r_q is not None  # checks._check_dsa
    layer_norm = 2 * d  # nn.LayerNorm(index_head_dim, eps=1e-6): weight + bias
    return r_q * H * d + D * d + layer_norm + D * H


def indexer_matmul_params(m: ModelConfig) -> int:
    """The indexer's matmul weights (wq_b, wk, weights_proj; its k_norm is no matmul); 0 without DSA."""
    return indexer_params(m) - 2 * (m.index_head_dim or 0) if m.is_dsa else 0


def sparse_keys(m: ModelConfig, S: int) -> int:
    """The keys a query of a full-attention layer attends with a windowed (sparse) kernel over S tokens: DSA's
    index_topk, the tokens its indexer picks (FlashMLA's sparse kernel; DeepSeek-V3.2 tech report §2.1), as a
    sliding layer of that window counts them; S (every earlier token) for a model without DSA."""
    return m.index_topk if m.index_topk is not None else S


def indexer_flops(m: ModelConfig, tokens: int, B: int, pairs: tuple[int, int]) -> int:
    """Forward FLOPs of one DSA lightning indexer (DeepseekV32Indexer.forward) over `tokens` tokens of B
    sequences: wq_b on the q_lora_rank latent, wk and weights_proj on the hidden states (2 per weight per
    token), then scores q·k for every query-key pair and head, 2·H_I·d_I, and the weighted sum over heads,
    2·H_I per pair; `pairs` (numerator, denominator) of S² per sequence, as flops.attended_pairs gives them.
    0 for a model without DSA."""
    if not m.is_dsa:
        return 0
    H, d, r_q, D = m.index_n_heads, m.index_head_dim, m.q_lora_rank, m.d_model
    assert H is not None and d is not None and r_q is not None  # checks._check_dsa
    num, den = pairs
    projections = FLOPS_PER_MAC * tokens * (r_q * H * d + D * d + D * H)  # wq_b, wk, weights_proj
    return projections + FLOPS_PER_MAC * B * H * (d + 1) * num // den  # scores (d) and head weighting (1) per pair
