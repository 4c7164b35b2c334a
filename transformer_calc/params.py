"""Exact parameter count of a decoder-only transformer, per component.

Source: seed notes 003, Part "Architecture" (embedding V*D, positions K*D, attention 4*D^2 weights,
MLP 2*E*D^2, two norms of D scale (+ D bias) each, LM head tied to the embedding), generalized to
what real model families build: GQA/MQA K/V widths, head_dim != D/A, gated MLPs (3 matrices),
fine-grained biases, RMSNorm (scale only), MoE experts and router, OPT's embedding projections and
position offset, BLOOM's embedding norm, per-head q/k norms, untied or biased LM heads.

Conventions: every parameter tensor is counted once (tied embeddings are one tensor, as
`sum(p.numel() for p in model.parameters())` counts them in PyTorch); buffers (rotary
frequencies, causal masks) are not parameters. The result must equal what PyTorch builds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from transformer_calc.config import ModelConfig, Positional

GATED_MATRICES = 3  # gate, up, down (SwiGLU/GeGLU; Shazeer 2020)
PLAIN_MATRICES = 2  # up, down (seed, "MLP": W0 D x ED, W1 ED x D)
ATTN_MATRICES = 4  # Q, K, V, O (seed, "Causal Attention": 4*D^2)


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one transformer block."""

    attn_q: int  # W_Q: D x (A*head_dim)
    attn_k: int  # W_K: D x (n_kv*head_dim)
    attn_v: int  # W_V: D x (n_kv*head_dim)
    attn_o: int  # W_O: (A*head_dim) x D
    attn_bias: int  # q/k/v biases and the output bias, as configured
    qk_norm: int  # per-head norms on q and k
    mlp_weights: int  # all experts' matrices
    mlp_bias: int
    router: int  # MoE gate: D x n_experts (+ bias)
    norms: int  # the block's norms (scale + bias)

    @property
    def attention(self) -> int:
        return self.attn_q + self.attn_k + self.attn_v + self.attn_o + self.attn_bias + self.qk_norm

    @property
    def mlp(self) -> int:
        return self.mlp_weights + self.mlp_bias + self.router

    @property
    def total(self) -> int:
        return self.attention + self.mlp + self.norms


@dataclass(frozen=True)
class ModelParams:
    """Whole-model parameter count: the non-repeated parts plus n_layers identical blocks."""

    n_layers: int
    embedding: int  # token embedding V x d_embed
    position: int  # learned position table (K + offset) x D
    embedding_projection: int  # OPT project_in / project_out when d_embed != D
    embedding_norm: int  # BLOOM's word_embeddings_layernorm
    layer: LayerParams
    final_norm: int
    lm_head: int  # 0 when tied to the embedding
    lm_head_bias: int
    active_mlp_per_layer: int  # MLP parameters one token uses (top-k experts of a MoE)

    @property
    def layers(self) -> int:
        return self.n_layers * self.layer.total

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.position
            + self.embedding_projection
            + self.embedding_norm
            + self.layers
            + self.final_norm
            + self.lm_head
            + self.lm_head_bias
        )

    @property
    def non_embedding(self) -> int:
        """Kaplan et al. 2020's N: everything but the token/position tables and an untied head."""
        return self.total - self.embedding - self.position - self.lm_head

    @property
    def active(self) -> int:
        """Parameters a single token's forward pass touches (== total for dense models)."""
        inactive = self.n_layers * (self.layer.mlp_weights + self.layer.mlp_bias - self.active_mlp_per_layer)
        return self.total - inactive

    def as_dict(self) -> dict[str, int]:
        """Flat breakdown in JSON order; every value an exact int."""
        out: dict[str, int] = {"total": self.total, "non_embedding": self.non_embedding}
        out["active"] = self.active
        for f in fields(self):
            if f.name != "layer":
                out[f.name] = getattr(self, f.name)
        out["per_layer"] = self.layer.total
        for f in fields(self.layer):
            out[f"per_layer_{f.name}"] = getattr(self.layer, f.name)
        out["layers"] = self.layers
        return out


def norm_params(m: ModelConfig, width: int) -> int:
    """One LayerNorm (scale + bias) or RMSNorm (scale) over `width` features; 0 if not affine."""
    if not m.norm_affine:
        return 0
    return width * (2 if m.norm_bias else 1)


def mlp_params_per_expert(m: ModelConfig) -> tuple[int, int]:
    """(weights, biases) of one MLP (one expert of a MoE).

    Seed "MLP": W0 (D x E*D) and W1 (E*D x D), 2*E*D^2; gated MLPs add W_gate (D x d_ff).
    Biases: d_ff on each input-side matrix, D on the output.
    """
    D, F = m.d_model, m.d_ff
    n_in = GATED_MATRICES - 1 if m.gated_mlp else PLAIN_MATRICES - 1  # matrices D -> F
    weights = (n_in + 1) * D * F
    biases = (n_in * F + D) if m.mlp_bias else 0
    return weights, biases


def layer_params(m: ModelConfig) -> LayerParams:
    """Parameters of one block (seed "Causal Attention", "MLP", "Layer Norm")."""
    D, A, kv, hd = m.d_model, m.n_heads, m.n_kv_heads, m.head_dim
    q_width, kv_width = A * hd, kv * hd  # = D and D for MHA with head_dim = D/A
    attn_bias = (q_width + 2 * kv_width if m.qkv_bias else 0) + (D if m.attn_out_bias else 0)
    w_expert, b_expert = mlp_params_per_expert(m)
    router = (D * m.n_experts + (m.n_experts if m.router_bias else 0)) if m.router else 0
    return LayerParams(
        attn_q=D * q_width,
        attn_k=D * kv_width,
        attn_v=D * kv_width,
        attn_o=q_width * D,
        attn_bias=attn_bias,
        qk_norm=2 * norm_params(m, hd) if m.qk_norm else 0,
        mlp_weights=m.n_experts * w_expert,
        mlp_bias=m.n_experts * b_expert,
        router=router,
        norms=m.norms_per_layer * norm_params(m, D),
    )


def count_params(m: ModelConfig) -> ModelParams:
    """Exact parameter count, per component (see the module docstring for conventions)."""
    L, D, V = m.n_layers, m.d_model, m.vocab_size
    d_emb = m.d_embedding
    w_expert, b_expert = mlp_params_per_expert(m)
    n_positions = m.max_seq_len + m.position_offset
    return ModelParams(
        n_layers=L,
        embedding=V * d_emb,
        position=n_positions * D if m.positional is Positional.learned else 0,
        embedding_projection=2 * d_emb * D if d_emb != D else 0,  # project_in + project_out
        embedding_norm=norm_params(m, D) if m.embedding_norm else 0,
        layer=layer_params(m),
        final_norm=norm_params(m, D) if m.final_norm else 0,
        lm_head=0 if m.tied_embeddings else V * d_emb,
        lm_head_bias=V if m.lm_head_bias else 0,
        active_mlp_per_layer=m.experts_per_token * (w_expert + b_expert),
    )


def seed_block_approx(m: ModelConfig) -> int:
    """Seed eq. (approx_params_no_sharding): N ~ (4 + 2E) * L * D^2, block weights only.

    With E = d_ff / D this is L * (4*D^2 + 2*D*d_ff), exact in integers; it ignores GQA, gating,
    biases, norms and embeddings (the O(V/DL) and O(1/D) corrections the seed drops).
    """
    L, D, F = m.n_layers, m.d_model, m.d_ff
    return L * (ATTN_MATRICES * D * D + PLAIN_MATRICES * D * F)


def seed_total_approx(m: ModelConfig) -> int:
    """Seed 004 "Model size": 12 * D^2 * L + D * V (E = 4 blocks plus the tied embedding)."""
    L, D, V = m.n_layers, m.d_model, m.vocab_size
    return 12 * D * D * L + D * V


def check_tensor_parallel(m: ModelConfig, T: int) -> None:
    """Megatron-LM splits the query heads and the MLP width T ways: T must divide both."""
    if T < 1:
        raise ValueError(f"tensor parallel size T ({T}) must be >= 1")
    if m.n_heads % T:
        raise ValueError(f"n_heads ({m.n_heads}) must be divisible by T ({T}); use a divisor of {m.n_heads}")
    if m.d_ff % T:
        raise ValueError(f"d_ff ({m.d_ff}) must be divisible by T ({T}); use a divisor of {m.d_ff}")


def kv_heads_per_rank(n_kv: int, T: int, what: str = "n_kv_heads") -> int:
    """K/V heads one of T ranks holds: split when T divides n_kv, one replicated head when n_kv
    divides T (Megatron-LM's GQA/MQA layout); other pairs cannot be laid out."""
    if n_kv % T and T % n_kv:
        raise ValueError(
            f"{what} ({n_kv}) and T ({T}) must divide one another to shard or replicate K/V heads; "
            f"use a T that divides {n_kv} or a multiple of it"
        )
    return max(n_kv // T, 1)


@dataclass(frozen=True)
class ShardParams:
    """Parameters held by one tensor-parallel rank, split by where they live in a pipeline.

    The embedding part sits on the first pipeline stage; the head part (final norm, LM head) on
    the last; with tied embeddings and more than one stage the last stage keeps its own copy of
    the embedding table for the head (Megatron-LM does this), given as `tied_head_copy`.
    """

    embedding: int  # token table shard + positions + projections + embedding norm
    layer: int  # one block's shard
    final_norm: int
    lm_head: int  # untied head shard (+ bias); 0 when tied
    tied_head_copy: int  # the embedding shard a separate last stage needs when tied

    def total(self, n_layers: int) -> int:
        return self.embedding + n_layers * self.layer + self.final_norm + self.lm_head


def shard_params(m: ModelConfig, T: int = 1) -> ShardParams:
    """Parameters of one of T tensor-parallel ranks (Megatron-LM layout), by component.

    Source: Shoeybi et al. 2019 (Megatron-LM) sec. 3 and the seed's "Tensor Parallelism": Q/K/V and
    the MLP input matrices are column-parallel (weights and biases split T ways), the attention
    output and MLP output matrices are row-parallel (weights split, their biases replicated), the
    token embedding and an untied LM head are vocabulary-parallel (ceil(V/T) rows per rank).
    Replicated on every rank: norms, learned positions, the MoE router, q/k norms, OPT projections.
    K/V heads are split when T divides n_kv_heads; when n_kv_heads < T each rank keeps one K/V head
    (replication, as Megatron does for GQA/MQA). Requires T to divide n_heads and d_ff.
    """
    check_tensor_parallel(m, T)
    D, A, hd, F = m.d_model, m.n_heads, m.head_dim, m.d_ff
    full = count_params(m)
    kv_rank, q_rank = kv_heads_per_rank(m.n_kv_heads, T), A // T
    attn = D * hd * (q_rank + 2 * kv_rank) + q_rank * hd * D
    attn += hd * (q_rank + 2 * kv_rank) if m.qkv_bias else 0
    attn += D if m.attn_out_bias else 0  # row-parallel bias: replicated
    attn += full.layer.qk_norm
    n_in = GATED_MATRICES - 1 if m.gated_mlp else PLAIN_MATRICES - 1
    mlp = (n_in + 1) * D * (F // T) + ((n_in * F // T + D) if m.mlp_bias else 0)
    layer = attn + m.n_experts * mlp + full.layer.router + full.layer.norms
    table = -(-m.vocab_size // T) * m.d_embedding  # vocabulary-parallel rows
    head_bias = -(-m.vocab_size // T) if m.lm_head_bias else 0
    return ShardParams(
        embedding=table + full.position + full.embedding_projection + full.embedding_norm,
        layer=layer,
        final_norm=full.final_norm,
        lm_head=(0 if m.tied_embeddings else table) + head_bias,
        tied_head_copy=table if m.tied_embeddings else 0,
    )


def tensor_parallel_params(m: ModelConfig, T: int) -> int:
    """Parameters held by one of T tensor-parallel ranks (see `shard_params`); T=1: the total."""
    if T == 1:
        return count_params(m).total
    return shard_params(m, T).total(m.n_layers)
