"""Softmax attention's blocks behind one protocol: standard attention (MHA, GQA, MQA; Qwen3-Next's output
gate; a value width of its own) and multi-head latent attention (estimators/mla.py). The estimators ask
`attention_block(m)` for a layer's weights, biases, cached elements and q/k/v width, and never name MLA:
the pick is one lookup in `ATTENTION_BLOCKS`, keyed by the kind the model layer computes
(`ModelConfig.attention_block_kind`).

Standard attention (seed "Causal Attention", generalized): W_Q D x A·h_d (x 2 with attn_output_gate:
modeling_qwen3_next.py Qwen3NextAttention's q_proj emits the gate logits too), W_K D x n_kv·h_d, W_V
D x n_kv·h_v, W_O A·h_v x D, with h_v = v_dim (head_dim unless v_head_dim is given: modeling_mimo_v2_flash.py
MiMoV2FlashAttention).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from transformer_calc.estimators import mla
from transformer_calc.estimators.mla import LinearSpec, MatrixSpec
from transformer_calc.estimators.primitives import kv_heads_per_rank
from transformer_calc.model.config import AttentionBlockKind, LoraTarget, ModelConfig


@dataclass(frozen=True)
class AttentionBlock:
    """What the estimators ask of a softmax-attention block, for the heads one tensor-parallel rank holds."""

    name: str
    weights: Callable[[ModelConfig, int, int], tuple[int, int, int, int]]  # (m, q_heads, kv_heads): W_Q, W_K, W_V, W_O
    bias: Callable[[ModelConfig, int, int, bool], int]  # (m, q_heads, kv_heads, out_bias): q/k/v biases and the output's
    cached_elements: Callable[[ModelConfig, int, int, bool], int]  # (m, T, cached K/V heads, latent cache): per token, layer
    qkv_width: Callable[[ModelConfig, int, int], int]  # (m, q_heads, kv_heads): the q, k and v a rank's layer computes
    linears: Callable[[ModelConfig, int], list[LinearSpec]]  # (m, T): its nn.Linear modules on one rank (PEFT's view)
    matrices: Callable[[ModelConfig, int, int], list[MatrixSpec]]  # (m, q_heads, kv_heads): GGUF's tensors on one rank
    score_width: Callable[[ModelConfig, int, bool], int]  # (m, h_d + h_v, latent decode): a head's score + value width
    stored_qkv: Callable[[ModelConfig, int, int, int], tuple[int, int]]  # (m, h_d, A_t, kv_t): kept values per token,
    #   and the K/V heads the score shapes are per (training/activations.py)
    caches_kv_heads: bool  # its cache holds K/V heads (what --cache-kv-heads sets), not a latent
    op_recompute_priced: bool  # torchtitan's per-op recompute policy counts its matmuls (flops.op_recompute_refusal)


def weights(m: ModelConfig, q_heads: int, kv_heads: int) -> tuple[int, int, int, int]:
    """(W_Q, W_K, W_V, W_O) of standard attention for q_heads query and kv_heads K/V heads."""
    D, hd, hv = m.d_model, m.head_dim, m.v_dim
    q_out = q_heads * hd * (2 if m.attn_output_gate else 1)
    return D * q_out, D * kv_heads * hd, D * kv_heads * hv, q_heads * hv * D


def bias(m: ModelConfig, q_heads: int, kv_heads: int, out_bias: bool) -> int:
    """q/k/v biases (column-parallel, split with the heads) and the output bias."""
    q_out = q_heads * (2 if m.attn_output_gate else 1)  # the output gate's logits come from q_proj too
    qkv = (m.head_dim * (q_out + kv_heads) + m.v_dim * kv_heads) if m.qkv_bias else 0
    return qkv + (m.d_model if out_bias else 0)


def cached_elements(m: ModelConfig, T: int, cached_heads: int, latent: bool) -> int:
    """Cached values per token and layer on one rank: K of h_d and V of h_v per cached head."""
    return cached_heads * (m.head_dim + m.v_dim)


def qkv_width(m: ModelConfig, q_heads: int, kv_heads: int) -> int:
    """The q, k and v outputs of one layer on one rank: (q_heads + kv_heads)·h_d + kv_heads·h_v."""
    return (q_heads + kv_heads) * m.head_dim + kv_heads * m.v_dim


def linears(m: ModelConfig, T: int) -> list[LinearSpec]:
    """Its Linear modules on one of T ranks (modeling_llama.py LlamaAttention; a fused qkv for Phi-3 and the
    like): q_proj (with the output gate's logits), k_proj, v_proj column-parallel, o_proj row-parallel."""
    q, k, v, o = LoraTarget.q, LoraTarget.k, LoraTarget.v, LoraTarget.o
    D, hd, A = m.d_model, m.head_dim, m.n_heads
    kv_t = kv_heads_per_rank(m.n_kv_heads, T)
    gate = 2 if m.attn_output_gate else 1  # Qwen3NextAttention: q_proj emits the gate too, D -> 2·A·h_d
    if m.fused_qkv:
        out: list[LinearSpec] = [("qkv", frozenset({q, k, v}), D, (gate * (A // T) + 2 * kv_t) * hd, "col")]
    else:
        out = [("q_proj", frozenset({q}), D, gate * A * hd // T, "col"), ("k_proj", frozenset({k}), D, kv_t * hd, "col"),
               ("v_proj", frozenset({v}), D, kv_t * hd, "col")]
    return out + [("o_proj", frozenset({o}), A * hd // T, D, "row")]


def matrices(m: ModelConfig, q_heads: int, kv_heads: int) -> list[MatrixSpec]:
    """Its weight tensors as GGUF names them (attn_q, attn_k, attn_v, attn_output) on one rank."""
    q, k, v, o = weights(m, q_heads, kv_heads)
    D = m.d_model
    return [("attn_q", D, q), ("attn_k", D, k), ("attn_v", D, v), ("attn_output", q_heads * m.head_dim, o)]


def score_width(m: ModelConfig, width: int, latent_decode: bool) -> int:
    """The width a query head scores over plus the width of the values it re-weights: h_d + h_v, as cached."""
    return width


def stored_qkv(m: ModelConfig, hd: int, A_t: int, kv_t: int) -> tuple[int, int]:
    """(values kept per token for the backward, K/V heads per rank): q, k and v, (A_t + 2·kv_t)·h_d (Korthikanti
    et al. 2022, sec. 4.1)."""
    return (A_t + 2 * kv_t) * hd, kv_t


STANDARD = AttentionBlock("attention", weights, bias, cached_elements, qkv_width, linears, matrices, score_width, stored_qkv, True, True)
MLA = AttentionBlock("multi-head latent attention", mla.attention_weights, mla.attention_bias, mla.cached_elements,
                     mla.qkv_width, mla.linears, mla.matrices, mla.score_width, mla.stored_qkv, False, False)

# The implementation of each kind of softmax-attention block; a new block is one more entry
ATTENTION_BLOCKS: dict[AttentionBlockKind, AttentionBlock] = {AttentionBlockKind.standard: STANDARD,
                                                              AttentionBlockKind.mla: MLA}


def attention_block(m: ModelConfig) -> AttentionBlock:
    """The model's softmax-attention block (the one place that picks it: a lookup by the model's kind)."""
    return ATTENTION_BLOCKS[m.attention_block_kind]
