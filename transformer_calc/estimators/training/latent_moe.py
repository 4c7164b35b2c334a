"""LatentMoE under training (Nemotron 3 Super): what its two latent projections add to a MoE block's
stored activations, quantized matrices and FP8 casts.

The block (transformers modeling_nemotron_h.py NemotronHMoE; NVIDIA, "Nemotron 3 Super" tech report,
LatentMoE): the router and the shared expert read the layer's D-wide input; the routed experts read and
write ℓ = moe_latent_dim (`ModelConfig.expert_d`): fc1_latent_proj (D -> ℓ) before them and
fc2_latent_proj (ℓ -> D) after the combine, both whole on every rank (not split by tensor or expert
parallelism). Each function returns the base value (0, [], the D-wide width) for a model without it, so
the training estimators add it unconditionally.
"""
from __future__ import annotations

from transformer_calc.model.config import ModelConfig

LATENT_PROJECTIONS = 2  # fc1_latent_proj (D -> ℓ) and fc2_latent_proj (ℓ -> D)


def latent_matrices(m: ModelConfig) -> list[tuple[int, int]]:
    """(elements, count) of the latent projections' weights, D·ℓ each, two per MoE block (whole on every
    rank): what bitsandbytes quantizes and an FP8 recipe casts beside the experts; none without LatentMoE."""
    if m.moe_latent_dim is None:
        return []
    return [(m.d_model * m.moe_latent_dim, LATENT_PROJECTIONS)]


def combine_input_elements(m: ModelConfig, B: int, S: int) -> int:
    """Elements fc2_latent_proj keeps for its weight gradient: its ℓ-wide input (the experts' combined
    output), B·S·ℓ per MoE block; 0 without LatentMoE."""
    if m.moe_latent_dim is None:
        return 0
    return B * S * m.moe_latent_dim


def expert_io_width(m: ModelConfig, d: float) -> float:
    """The width a routed expert's fc1 reads and fc2's output gradient has, per token, for the FP8 cast
    count (precision.activation_quantize_bytes): ℓ (whole) with LatentMoE, else `d` (D per rank)."""
    if m.moe_latent_dim is None:
        return d
    return m.moe_latent_dim


def projection_quantize_values(m: ModelConfig, d: float) -> float:
    """Values one token casts in the two latent projections, forward + backward: fc1_latent_proj's input (D,
    `d` per rank) and fc2_latent_proj's (ℓ) in fprop, their output gradients (ℓ and D) in dgrad,
    2·(d + ℓ); 0 without LatentMoE."""
    if m.moe_latent_dim is None:
        return 0
    return LATENT_PROJECTIONS * (d + m.moe_latent_dim)
