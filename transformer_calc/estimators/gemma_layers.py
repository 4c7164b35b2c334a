"""Gemma 4's and Gemma 3n's layers that vary by kind and depth: their own module, which the estimators ask
without naming the family (docs/formulas.md §5.14, §5.15).

Full layers of their own width and K/V heads (global_head_dim, num_global_key_value_heads), k = v full
layers, kv-shared layers (no k/v projection), the kv-shared layers' double-wide MLP, per-layer embeddings
and inputs, and Gemma 3n's AltUp and LAuReL: their parameters (`parts`, all 0 for a model without them),
one attention layer's parts (`varied_attention`), one tensor-parallel rank's share, the layout check
(`check_tensor_parallel`) and their forward FLOPs (`layer_flops`). Sources: modeling_gemma4.py,
modeling_gemma3n.py (transformers), vLLM's model_executor/models/gemma4.py for the per-rank split.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from transformer_calc.model.config import ATTENTION_KINDS, LayerAttention, ModelConfig, QKNormScope
from transformer_calc.model.units import FLOPS_PER_MAC
from transformer_calc.estimators.primitives import GATED_MATRICES, PLAIN_MATRICES, kv_heads_per_rank, mlp_params, norm_params


def per_layer_table_rank(m: ModelConfig, T: int) -> int:
    """Gemma 4's per-layer embedding table on one of T ranks: ceil(V_ple/T) rows of L·P (vLLM gemma4.py:
    embed_tokens_per_layer is a VocabParallelEmbedding); 0 without per-layer inputs."""
    return -(-(m.per_layer_vocab_size or m.vocab_size) // T) * m.n_layers * m.per_layer_input_dim


def varied_attention(m: ModelConfig, kind: LayerAttention, kv_shared: bool, T: int = 1) -> dict[str, int]:
    """The attention parts of one softmax-attention layer of `kind`, when layers vary (Gemma 4), on one of T
    tensor-parallel ranks (`shard_params`' convention: the rank's A/T query heads and `kv_heads_per_rank` K/V
    heads, the output bias and the q/k norms replicated; T = 1: the whole layer).

    modeling_gemma4.py Gemma4TextAttention: q_proj D x A·h_d, o_proj A·h_d x D, q_norm RMSNorm(h_d);
    unless the layer is kv-shared (`config.kv_sharing_modes` "reuse": the last num_kv_shared_layers
    layers), k_proj D x n_kv·h_d, k_norm RMSNorm(h_d), v_norm (no scale: no parameters) and, unless
    the layer is not sliding and attention_k_eq_v is set (values = the key projection), v_proj
    D x n_kv·h_d; every projection biased by attention_bias. Full layers take h_d = global_head_dim
    and n_kv = num_global_key_value_heads (`per_layer_config`, configuration_gemma4.py).
    """
    D, A = m.d_model, m.n_heads // T
    hd = m.kind_head_dim(kind)
    what = m.kv_heads_field(kind)
    kv = kv_heads_per_rank(m.kv_heads_of(kind), T, what)
    q_out = A * hd * (2 if m.attn_output_gate else 1)
    has_k = not kv_shared
    has_v = has_k and not (m.full_k_eq_v and kind is not LayerAttention.sliding)
    k_out, v_out = kv * hd * has_k, kv * hd * has_v
    bias = (q_out + k_out + v_out if m.qkv_bias else 0) + (D if m.attn_out_bias else 0)
    if not m.qk_norm:
        qk = 0
    elif m.qk_norm_scope is QKNormScope.full:  # replicated at their full width, as `shard_params` keeps them
        qk = norm_params(m, m.n_heads * hd) + (norm_params(m, m.kv_heads_of(kind) * hd) if has_k else 0)
    else:
        qk = norm_params(m, hd) + (norm_params(m, hd) if has_k else 0)
    return {"attn_q": D * q_out, "attn_k": D * k_out, "attn_v": D * v_out, "attn_o": A * hd * D,
            "attn_bias": bias, "qk_norm": qk}


@dataclass(frozen=True)
class VariedParts:
    """ModelParams' Gemma 4 / Gemma 3n counts (all 0 for a model whose layers do not vary)."""

    counts: tuple[tuple[str, int], ...]
    attention_by_field: tuple[tuple[str, int], ...]

    def fields(self) -> dict[str, int]:
        return dict(self.counts)


VARIED_FIELDS = ("attn_q", "attn_k", "attn_v", "attn_o", "attn_bias", "qk_norm")


def parts(m: ModelConfig, layer: object, T: int = 1, base_attention: int | None = None) -> VariedParts:
    """ModelParams' Gemma 4 and Gemma 3n fields (all 0 for a model whose layers do not vary), or one of T
    tensor-parallel ranks' share of them (`shard_params`; `base_attention`: the rank's share of `layer`'s
    q, k, v, o, biases and q/k norms, what `attention_variants` is counted against).

    Per rank (vLLM's model_executor/models/gemma4.py, vllm-project/vllm@001cabc1, which follows Megatron-LM's
    column/row-parallel split): every layer's attention as `varied_attention(..., T)`, its MLP (the kv-shared
    layers' 2·d_ff one too, MergedColumnParallelLinear + RowParallelLinear) split T ways; the per-layer
    embedding table embed_tokens_per_layer a VocabParallelEmbedding (ceil(V_ple/T) rows of L·P),
    per_layer_model_projection a ColumnParallelLinear (D x L·P/T); per_layer_input_gate and
    per_layer_projection ReplicatedLinear, every norm replicated. Gemma 3n's AltUp and LAuReL: T = 1 only
    (check_tensor_parallel)."""
    L, D, P = m.n_layers, m.d_model, m.per_layer_input_dim
    out: dict[str, int] = {"per_layer_embedding": 0, "per_layer_inputs": 0, "attention_variants": 0,
                           "mlp_variants": 0, "altup": 0, "laurel": 0}
    by_field: tuple[tuple[str, int], ...] = ()
    if (n := m.altup_inputs) is not None:
        # modeling_gemma3n.py Gemma3nTextAltUp: correct_output_scale (D), correction_coefs n x n,
        # prediction_coefs n x n², modality_router D x n (no biases), router_norm RMSNorm(D); Gemma3nTextModel:
        # altup_projections and altup_unembed_projections, n - 1 Linear(D, D) each
        out["altup"] = L * (D + n * n + n ** 3 + D * n + norm_params(m, D)) + 2 * (n - 1) * D * D
    if (r := m.laurel_rank) is not None:
        # modeling_gemma3n.py Gemma3nTextLaurelBlock: linear_left D x r, linear_right r x D, post_laurel_norm RMSNorm(D)
        out["laurel"] = L * (2 * D * r + norm_params(m, D))
    if P:
        # modeling_gemma4.py Gemma4TextModel: embed_tokens_per_layer (V_ple x L·P), per_layer_model_projection
        # (D x L·P, no bias), per_layer_projection_norm RMSNorm(P); Gemma4TextDecoderLayer: per_layer_input_gate
        # D x P, per_layer_projection P x D (no biases), post_per_layer_input_norm RMSNorm(D)
        out["per_layer_embedding"] = per_layer_table_rank(m, T)
        out["per_layer_inputs"] = D * L * P // T + norm_params(m, P) + L * (2 * D * P + norm_params(m, D))
    if not m.irregular_layers or m.is_mla:
        return VariedParts(tuple(out.items()), by_field)
    first_shared = m.first_kv_shared_layer
    sums = dict.fromkeys(VARIED_FIELDS, 0)
    for kind in (k for k in LayerAttention if k in ATTENTION_KINDS):
        for shared, (lo, hi) in ((False, (0, first_shared)), (True, (first_shared, L))):
            n = m.n_attention_layers(kind, lo, hi)
            if n:
                for key, value in varied_attention(m, kind, shared, T).items():
                    sums[key] += n * value
    if base_attention is None:
        base_attention = sum(getattr(layer, key) for key in sums)
    base = m.n_softmax_layers() * base_attention
    out["attention_variants"] = sum(sums.values()) - base
    by_field = tuple(sums.items())
    if m.kv_shared_double_mlp:
        # modeling_gemma4.py Gemma4TextMLP: intermediate_size x 2 on a kv-shared layer (use_double_wide_mlp);
        # in a MoE model that is the dense MLP beside the experts (tcalc's shared expert)
        width, bias = (m.shared_expert_d_ff, False) if m.is_moe else (m.d_ff, None)
        extra = sum(mlp_params(m, 2 * width // T, bias)) - sum(mlp_params(m, width // T, bias))
        out["mlp_variants"] = m.kv_shared_layers * extra
    return VariedParts(tuple(out.items()), by_field)


def check_layout(m: ModelConfig, T: int, ep: int) -> None:
    """These layers over T tensor- and ep expert-parallel ranks: Gemma 3n's AltUp and LAuReL at T 1 and ep 1 only,
    Gemma 4's experts at ep 1 only (not modeled yet), Gemma 4 over T ranks as `check_tensor_parallel` lays it out.
    Nothing to check for a model without these layers."""
    if not m.irregular_layers:
        return
    if (T > 1 or ep > 1) and m.unpriced_blocks:
        from transformer_calc.estimators.support_table import Unpriced, refusal
        raise refusal(m, f"tensor and expert parallelism (T {T}, ep {ep})", Unpriced.tensor if T > 1 else Unpriced.expert)
    if ep > 1:
        from transformer_calc.estimators.support_table import Unpriced, refusal
        raise refusal(m, f"expert parallelism (ep {ep})", Unpriced.expert)
    if T > 1:
        check_tensor_parallel(m, T)


def check_tensor_parallel(m: ModelConfig, T: int) -> None:
    """Gemma 4 over T ranks (vLLM gemma4.py Gemma4Attention asserts the same): every kind's K/V heads and T
    divide one another (`kv_heads_per_rank`), T divides L·P (per_layer_model_projection, column-parallel).
    The MLP widths (d_ff, 2·d_ff, moe_d_ff) are checked by `check_tensor_parallel`."""
    for kind in (k for k in ATTENTION_KINDS if k in m.attention_pattern):
        what = m.kv_heads_field(kind)
        kv_heads_per_rank(m.kv_heads_of(kind), T, what)
    if (width := m.n_layers * m.per_layer_input_dim) % T:
        raise ValueError(f"n_layers x per_layer_input_dim ({width}, the per-layer input projection's width) must be "
                         f"divisible by T ({T}); use a divisor of {width}")


def varied_labels(m: ModelConfig) -> list[str]:
    """The model's varied layers by name (`ModelConfig.irregular_layers`; [] when its layers do not vary)."""
    return list(m.irregular_layers)


def layer_flops(m: ModelConfig, tokens: int, core: Callable[[LayerAttention], int], attention: int,
                cores: int) -> tuple[int, int, int, int]:
    """Gemma 4's and Gemma 3n's blocks (modeling_gemma4.py, modeling_gemma3n.py; docs/formulas.md §5.14,
    §5.15) over `tokens` tokens, forward, given one layer's attention core of each kind (`core(kind)`: scores
    and re-weighting, from flops.py): (attention of all layers, their attention cores, the blocks' other
    matmuls beyond the base blocks' MLPs, the projections outside the blocks). For a model whose layers do
    not vary (`parts`' test): the base blocks' `attention` and `cores` as given, and 0, 0.

    Attention per (kind, kv-shared) group: 2 per weight per token for that layer's q/k/v/o
    (`varied_attention`: a kv-shared layer has no k/v projection, a k=v full layer no v), and
    the core over its own h_d: scores and re-weighting 2·B·A·h_d·pairs each (values are h_d wide),
    kv-shared layers included (they attend over the K/V they read). The kv-shared layers' double-width
    MLP adds one more d_ff of matmuls; each layer's per-layer input adds its gate D x P and projection
    P x D (in the MLP sum), and the model projection D x L·P runs once per token, before the blocks
    (counted with the embedding projections, outside what full recomputation repeats).
    """
    if not m.irregular_layers or m.is_mla:
        return attention, cores, 0, 0
    D, L, P = m.d_model, m.n_layers, m.per_layer_input_dim
    attention = cores = 0
    first_shared = m.first_kv_shared_layer
    for kind in (k for k in LayerAttention if k in ATTENTION_KINDS):
        for shared, (lo, hi) in ((False, (0, first_shared)), (True, (first_shared, L))):
            if n := m.n_attention_layers(kind, lo, hi):
                p = varied_attention(m, kind, shared)
                attention += n * (FLOPS_PER_MAC * tokens * (p["attn_q"] + p["attn_k"] + p["attn_v"] + p["attn_o"]) + core(kind))
                cores += n * core(kind)
    n_matrices = GATED_MATRICES if m.gated_mlp else PLAIN_MATRICES
    width = m.shared_expert_d_ff if m.is_moe else m.d_ff
    mlp = m.kv_shared_layers * FLOPS_PER_MAC * tokens * D * width * n_matrices if m.kv_shared_double_mlp else 0
    mlp += L * FLOPS_PER_MAC * tokens * 2 * D * P  # per_layer_input_gate, per_layer_projection
    outside = FLOPS_PER_MAC * tokens * D * L * P  # per_layer_model_projection
    if (streams := m.altup_inputs) is not None:
        # Gemma 3n, modeling_gemma3n.py Gemma3nTextAltUp: predict runs modality_router (D x n) and
        # prediction_coefs (n x n²) on the active stream and mixes the n streams with the token's n x n
        # coefficients (a batched matmul, D·n² multiply-adds per token); correct runs modality_router again
        # and correction_coefs (n x n); the model's altup_projections and altup_unembed_projections
        # (n - 1 of D x D each) run before and after the blocks
        n = streams
        mlp += L * FLOPS_PER_MAC * tokens * (2 * D * n + n ** 3 + D * n * n + n * n)
        outside += 2 * (n - 1) * FLOPS_PER_MAC * tokens * D * D
    if (r := m.laurel_rank) is not None:  # Gemma3nTextLaurelBlock: linear_left D x r, linear_right r x D
        mlp += L * FLOPS_PER_MAC * tokens * 2 * D * r
    return attention, cores, mlp, outside


def matmul_params(m: ModelConfig, T: int, attention: int, n_matrices: int) -> int:
    """The weights one token multiplies on one of T ranks in these layers (shard.matmul_params' part beside the
    mixers, the base MLPs, the head and the projections; `attention`: one base layer's q, k, v, o on the rank).

    Every layer's own q, k, v, o; the kv-shared layers' wider MLP; the per-layer input matmuls (the model
    projection D x L·P, each layer's gate and projection). Per rank (`parts`, vLLM gemma4.py): q, o and the
    MLP T ways, K/V heads `kv_heads_per_rank`, the model projection column-parallel (D x L·P/T), the gate
    and projection replicated (2·L·D·P)."""
    D = m.d_model
    attention_all = _attention_matmuls(m, T) if m.attention_pattern and not m.is_mla else 0
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
    return attention_all + wide + ple + altup + laurel


def _attention_matmuls(m: ModelConfig, T: int) -> int:
    """Gemma 4's q, k, v, o weights over every layer on one of T ranks (`varied_attention`); 0 when
    the layers do not vary by kind (Gemma 3n: its base shape; `parts` leaves `attention_by_field` empty)."""
    if not m.irregular_layers or m.is_mla:
        return 0
    first_shared, total = m.first_kv_shared_layer, 0
    for kind in (k for k in LayerAttention if k in ATTENTION_KINDS):
        for shared, (lo, hi) in ((False, (0, first_shared)), (True, (first_shared, m.n_layers))):
            if n := m.n_attention_layers(kind, lo, hi):
                parts = varied_attention(m, kind, shared, T)
                total += n * (parts["attn_q"] + parts["attn_k"] + parts["attn_v"] + parts["attn_o"])
    return total
