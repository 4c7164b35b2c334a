"""The primitives every block's count is built of: a norm's and an MLP's parameters, the K/V heads one
tensor-parallel rank holds. Below params.py and the block modules (estimators/gemma_layers.py, ...), which
all price their tensors with them; params.py re-exports them (its public path)."""
from __future__ import annotations

from transformer_calc.model.config import ModelConfig

GATED_MATRICES = 3  # gate, up, down (SwiGLU/GeGLU; Shazeer 2020)
PLAIN_MATRICES = 2  # up, down (seed, "MLP": W0 D x ED, W1 ED x D)


def norm_params(m: ModelConfig, width: int) -> int:
    """One LayerNorm (scale + bias) or RMSNorm (scale) over `width` features; 0 if not affine."""
    if not m.norm_affine:
        return 0
    return width * (2 if m.norm_bias else 1)


def mlp_params(m: ModelConfig, width: int, bias: bool | None = None, d_in: int | None = None) -> tuple[int, int]:
    """(weights, biases) of one MLP of inner width `width` (one expert of a MoE: moe_d_ff) that reads
    and writes `d_in` features (default D; a latent MoE's experts: moe_latent_dim).

    Seed "MLP": W0 (D x E*D) and W1 (E*D x D), 2*E*D^2; gated MLPs add W_gate (D x width).
    Biases: width on each input-side matrix, D on the output.
    """
    D = m.d_model if d_in is None else d_in
    n_in = GATED_MATRICES - 1 if m.gated_mlp else PLAIN_MATRICES - 1  # matrices D -> width
    weights = (n_in + 1) * D * width
    use_bias = m.mlp_bias if bias is None else bias
    biases = (n_in * width + D) if use_bias else 0
    return weights, biases


def kv_heads_per_rank(n_kv: int, T: int, what: str = "n_kv_heads") -> int:
    """K/V heads one of T ranks holds: split when T divides n_kv, one replicated head when n_kv
    divides T (Megatron-LM's GQA/MQA layout); other pairs cannot be laid out."""
    if n_kv % T and T % n_kv:
        raise ValueError(
            f"{what} ({n_kv}) and T ({T}) must divide one another to shard or replicate K/V heads; "
            f"use a T that divides {n_kv} or a multiple of it"
        )
    return max(n_kv // T, 1)
