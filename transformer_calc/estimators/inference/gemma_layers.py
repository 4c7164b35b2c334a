"""Gemma 4's and Gemma 3n's layers that vary by kind and depth, on one inference rank (docs/formulas.md §5.14,
§5.15): what each layer class caches and multiplies, and Gemma 4's weight matrices layer by layer for the
quantized formats. The parameters, per-rank split and FLOPs of these layers are estimators/gemma_layers.py's.

Source: transformers 5.23 models/gemma4/modeling_gemma4.py (Gemma4TextAttention: a layer of `kind` caches its
keys and values, n_kv·h_d each per token, a full layer with global_head_dim and num_global_key_value_heads; with
k = v the value is the unrotated key, still a tensor of its own: `past_key_values.update(key_states,
value_states)`; a kv-shared layer, the last num_kv_shared_layers, caches nothing and attends over the K/V of
the last earlier layer of its kind, `shared_kv_states`), modeling_gemma3n.py, and vLLM's
model_executor/models/gemma4.py for the per-rank split (Gemma4Attention: num_kv_heads max(1, n_kv / T), the
rank's A/T query heads). For a model whose layers do not vary, every function returns the base value it is given.
"""

from __future__ import annotations

from collections.abc import Callable

from transformer_calc.estimators.gemma_layers import per_layer_table_rank, varied_attention
from transformer_calc.estimators.inference.rank_parts import KV_TENSORS, Matrix
from transformer_calc.estimators.params import check_tensor_parallel
from transformer_calc.estimators.primitives import kv_heads_per_rank
from transformer_calc.estimators.training.gemma4_layers import is_gemma4
from transformer_calc.model.config import ATTENTION_KINDS, LayerAttention, ModelConfig


def varies(m: ModelConfig) -> bool:
    """Layers whose cache and q/k/v differ by kind and depth (Gemma 4, Gemma 3n; not with MLA)."""
    return bool(m.irregular_layers) and not m.is_mla


def check_cache_heads(m: ModelConfig, cache_kv_heads: int | None) -> None:
    """ValueError when `cache_kv_heads` (one K/V head count for the cache) is given for varied layers."""
    if m.irregular_layers and cache_kv_heads is not None:
        raise ValueError(f"cache_kv_heads does not apply to a model whose layers cache unlike K/V heads "
                         f"({', '.join(m.irregular_layers)}); drop it")


def kind_cache(m: ModelConfig, T: int, kind: LayerAttention, base: int) -> tuple[int, int | None]:
    """(cached values per token, FLOPs/2 per attended key) of one softmax-attention layer of `kind` on one of T
    ranks. Varied layers: K and V of the kind's `kv_heads_per_rank` heads, 2·n_kv·h_d, and every query head
    scoring over h_d and re-weighting values of h_d, 2·(A/T)·h_d, with the kind's h_d (`kind_head_dim`; a
    kv-shared layer reads as much and holds none). Else (`base`, None): the attention block's elements and
    the rank's q heads x (h_d + h_v)."""
    if not varies(m):
        return base, None
    hd = m.kind_head_dim(kind)
    elements = KV_TENSORS * kv_heads_per_rank(m.kv_heads_of(kind), T, m.kv_heads_field(kind)) * hd
    return elements, m.n_heads // T * 2 * hd


def qkv_width(m: ModelConfig, T: int, base: int) -> int:
    """The widest q, k and v one layer computes on one of T ranks: varied layers, the widest kind's
    (A/T + 2·n_kv')·h_d over the kinds the pattern uses; else `base`, the attention block's."""
    if not varies(m):
        return base
    return max((m.n_heads // T + KV_TENSORS * kv_heads_per_rank(m.kv_heads_of(k), T)) * m.kind_head_dim(k)
               for k in ATTENTION_KINDS if k in m.attention_pattern)


def block_matrices(m: ModelConfig, T: int, ep: int, uniform: Callable[[ModelConfig, int, int], list[Matrix]]
                   ) -> list[Matrix]:
    """The weight matrices one rank holds, layer by layer: Gemma 4's layer classes' own (`gemma4_matrices`),
    or `uniform(m, T, ep)`, every layer from one layer's shapes (quant.py), for a model without them."""
    if not is_gemma4(m):
        return uniform(m, T, ep)
    return gemma4_matrices(m, T, ep)


def gemma4_matrices(m: ModelConfig, T: int = 1, ep: int = 1) -> list[Matrix]:
    """Gemma 4's matrices on one of T tensor-parallel ranks, layer by layer, each layer with its class's
    shapes (modeling_gemma4.py; the per-rank split of `gemma_layers.varied_attention(..., T)` and `gemma_layers.parts`,
    vLLM's gemma4.py): attn_q D x (A/T)·h_d, attn_k D x n_kv'·h_d (not on a kv-shared layer), attn_v as
    attn_k (not on a kv-shared layer, nor on a full layer with k = v), attn_output (A/T)·h_d x D, with
    h_d and n_kv the layer kind's (`kind_head_dim`, `kv_heads_of`: full layers their own); the dense MLP
    ffn_gate, ffn_up D x F/T and ffn_down F/T x D (F = d_ff, 2·d_ff on a double-wide kv-shared layer; in
    a MoE model the dense MLP beside the experts, tcalc's shared expert width); a MoE layer's experts
    ffn_gate_exps, ffn_up_exps (transformers' fused gate_up_proj, split as ggml stores gate and up) and
    ffn_down_exps, every one of the E experts' moe_d_ff split T ways; with per-layer inputs (P > 0) each
    layer's inp_gate D x P and proj P x D (per_layer_input_gate, per_layer_projection: replicated), and,
    outside the layers, per_layer_model_proj D x L·P/T and the table per_layer_token_embd (ceil(V_ple/T)
    rows of L·P). The ggml names are llama.cpp's (src/llama-arch.cpp LLM_ARCH_GEMMA3N / GEMMA4: blk.N.inp_gate,
    blk.N.proj, per_layer_model_proj, per_layer_token_embd). Not listed (non-matrix parameters, left at the
    format's rest_bits): norms, the router (ffn_gate_inp, its scale and per-expert scales), layer scalars."""
    check_tensor_parallel(m, T, ep)  # Gemma 4: every kind's K/V heads and T divide one another; ep 1 only
    D, P, L = m.d_model, m.per_layer_input_dim, m.n_layers
    A = m.n_heads // T
    pattern, first_shared = m.attention_pattern, m.first_kv_shared_layer
    dense = m.shared_expert_d_ff if m.is_moe else m.d_ff
    out: list[Matrix] = []
    for i in range(L):  # bounded by the model's layer count (MAX_LAYERS)
        kind, shared = pattern[i % len(pattern)], i >= first_shared
        att = varied_attention(m, kind, shared, T)
        hd = m.kind_head_dim(kind)
        out.append(Matrix("attn_q", D, att["attn_q"], i))
        out += [Matrix(name, D, att[name], i) for name in ("attn_k", "attn_v") if att[name]]
        out.append(Matrix("attn_output", A * hd, att["attn_o"], i))
        F = dense * (2 if shared and m.kv_shared_double_mlp else 1) // T
        out += [Matrix("ffn_gate", D, D * F, i), Matrix("ffn_up", D, D * F, i), Matrix("ffn_down", F, F * D, i)]
        if m.is_moe and m.n_moe_layers(i, i + 1):
            E, Fe = m.n_experts, m.moe_d_ff // T
            out += [Matrix("ffn_gate_exps", D, E * D * Fe, i, True), Matrix("ffn_up_exps", D, E * D * Fe, i, True),
                    Matrix("ffn_down_exps", Fe, E * Fe * D, i, True)]
        if P:
            out += [Matrix("inp_gate", D, D * P, i), Matrix("proj", P, P * D, i)]
    if P:
        out += [Matrix("per_layer_model_proj", D, D * L * P // T, None),
                Matrix("per_layer_token_embd", L * P, per_layer_table_rank(m, T), None)]
    rows = -(-m.vocab_size // T)
    out.append(Matrix("output", m.d_embedding, rows * m.d_embedding, None))
    if not m.tied_embeddings:
        out.append(Matrix("token_embd", m.d_embedding, rows * m.d_embedding, None))
    return out
