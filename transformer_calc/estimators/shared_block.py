"""Shared transformer blocks (Zamba2): an attention + MLP block whose weights are stored once and
run at several layers, each run ("application") with small weights of its own.

Source: Glorioso et al. 2024, "The Zamba2 Suite: Technical Report" (arXiv:2411.15242, Fig. 2) and
Zamba (arXiv:2405.16712, Fig. 2, eq. 6); transformers 5.23 `models/zamba2/modeling_zamba2.py`
(Zamba2Model.get_layers, Zamba2HybridLayer, Zamba2AttentionDecoderLayer, Zamba2Attention,
Zamba2MLP). Letters (docs/notation.md):

    D d_model   A n_heads   n_kv n_kv_heads   h_d head_dim (Zamba2: 2·D / A)   F d_ff
    r shared_block_adapter_rank   n_app applications (len(shared_block_layer_ids))
    n_blk distinct blocks = min(shared_blocks, n_app)

One application at layer l (Zamba2HybridLayer.forward): x = RMSNorm_2D([h; e]) (the hidden state
concatenated with the token embedding e, 2·D wide); attention with q_proj 2D x A·h_d, k_proj and
v_proj 2D x n_kv·h_d, o_proj A·h_d x D (no biases); RMSNorm_D; a gated MLP gate_up_proj D x 2F,
down_proj F x D (bias: mlp_bias); then the layer's own `linear` D x D (no bias), whose output is
added to the input of the layer's Mamba-2 mixer.

Parameters (`sum(p.numel())` of the model: the blocks are tied by `_tied_weights_keys`, so every
application after the first n_blk shares the weights of block i mod n_blk):
    blocks   n_blk x [2D·(A + 2·n_kv)·h_d + A·h_d·D + the MLP + norms 2D + D]
    adapters n_app x [D·r + r·2F]  (Zamba2MLP.gate_up_proj_adapter_list: block b holds one for each
             application i with i mod n_blk = b, n_app in all)
             + n_app x 3·[2D·r + r·2D] with shared_attention_adapters (q, k, v adapters of 2D)
    linears  n_app x D·D
Untied (`shared_blocks_tied` false: transformers 5.23 ties `_tied_weights_keys` only when
tie_word_embeddings is true, PreTrainedModel.get_expanded_tied_weights_keys), every application
builds its own block, n_blk = n_app, and the block of application a holds the adapters of every
application i with i ≡ a (mod shared_blocks): with n_app = q·shared_blocks + rem, rem residue classes
of q + 1 applications and the others of q, rem·(q + 1)² + (shared_blocks - rem)·q² adapter sets.

FLOPs, KV cache and the matmul weights one token multiplies are per application: the shared
weights are used n_app times per token. The decode roofline reads a stored block's weights once per
application (`shared_block_rereads`: a block of hundreds of MB does not stay in a GPU's cache between
the layers that reuse it), its adapters and linears once. Conventions are flops.py's (2 FLOPs per multiply-add; the
attention core S² per head as eager attention computes it, half when causal).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.model.config import GATED_MLPS, ModelConfig
from transformer_calc.model.units import FLOPS_PER_MAC

CONCAT = 2  # the block reads [hidden; embedding]: 2·D features (Zamba2Config.attention_hidden_size)
QKV_ADAPTERS = 3  # linear_q_adapter_list, linear_k_adapter_list, linear_v_adapter_list


@dataclass(frozen=True)
class SharedBlockParams:
    """The parameters of a model's shared blocks, each tensor once."""

    blocks: int  # the distinct blocks: attention, MLP, their two norms
    adapters: int  # every application's low-rank adapters
    linears: int  # every application's D x D output linear

    @property
    def total(self) -> int:
        return self.blocks + self.adapters + self.linears


def _norm(m: ModelConfig, width: int) -> int:
    """One norm over `width` features: scale (+ bias), as params.norm_params counts it."""
    if not m.norm_affine:
        return 0
    return width * (2 if m.norm_bias else 1)


def _mlp_in(m: ModelConfig) -> int:
    """Outputs of the MLP's input projection per unit of width: gate and up (2) or up alone (1)."""
    return 2 if m.mlp in GATED_MLPS else 1


def attention_weights(m: ModelConfig) -> int:
    """q, k, v (from the 2D-wide concatenation) and o (back to D) of one block."""
    D, A, kv, hd = m.d_model, m.n_heads, m.n_kv_heads, m.head_dim
    return CONCAT * D * (A + 2 * kv) * hd + A * hd * D


def mlp_weights(m: ModelConfig) -> int:
    """gate_up_proj (D x n_in·F) and down_proj (F x D) of one block."""
    D, F = m.d_model, m.d_ff
    return D * _mlp_in(m) * F + F * D


def adapter_weights(m: ModelConfig) -> int:
    """The low-rank adapters of one application: the MLP's (D x r, r x n_in·F) and, with
    shared_attention_adapters, q/k/v's (2D x r, r x 2D each)."""
    r = m.shared_block_adapter_rank
    if r is None:
        return 0
    D, F = m.d_model, m.d_ff
    mlp = D * r + r * _mlp_in(m) * F
    attention = QKV_ADAPTERS * (CONCAT * D * r + r * CONCAT * D) if m.shared_attention_adapters else 0
    return mlp + attention


def n_blocks(m: ModelConfig) -> int:
    """Distinct blocks transformers builds: the first min(shared_blocks, n_app) applications (every
    application's when untied)."""
    n_app = m.n_shared_block_applications
    return min(m.shared_blocks, n_app) if m.shared_blocks_tied else n_app


def n_adapter_sets(m: ModelConfig) -> int:
    """Adapter sets held: one per application when tied; untied, each application's block holds those
    of its whole residue class mod shared_blocks (module docstring), a sum of squares."""
    n_app = m.n_shared_block_applications
    if m.shared_blocks_tied:
        return n_app
    q, rem = divmod(n_app, m.shared_blocks)
    return rem * (q + 1) ** 2 + (m.shared_blocks - rem) * q * q


def shared_block_params(m: ModelConfig) -> SharedBlockParams:
    """Parameters of the shared blocks (module docstring); all zero without them."""
    n_app = m.n_shared_block_applications
    if not n_app:
        return SharedBlockParams(0, 0, 0)
    # a block: attention, MLP with the gate_up/down biases (add_bias_linear), input_layernorm (2D), pre_ff_layernorm (D)
    return SharedBlockParams(blocks=n_blocks(m) * block_params(m), adapters=n_adapter_sets(m) * adapter_weights(m),
                             linears=n_app * m.d_model * m.d_model)


def block_params(m: ModelConfig) -> int:
    """One stored block: attention, MLP (+ biases), its two norms."""
    D, F = m.d_model, m.d_ff
    mlp_bias = (_mlp_in(m) * F + D) if m.mlp_bias else 0
    return attention_weights(m) + mlp_weights(m) + mlp_bias + _norm(m, CONCAT * D) + _norm(m, D)


def shared_block_rereads(m: ModelConfig) -> int:
    """Parameters a decode step reads beyond the stored ones: each of the n_app - n_blk applications
    that reuse a stored block streams that block's weights again (the decode roofline's convention)."""
    return (m.n_shared_block_applications - n_blocks(m)) * block_params(m)


def matmul_weights_per_application(m: ModelConfig) -> int:
    """Weights one token multiplies in one application: the block's projections and MLP, its
    adapters, the layer's linear."""
    return attention_weights(m) + mlp_weights(m) + adapter_weights(m) + m.d_model * m.d_model


@dataclass(frozen=True)
class SharedBlockFlops:
    """Forward FLOPs of every application of the shared blocks over B sequences of S tokens."""

    projections: int  # q/k/v/o, the MLP, the adapters and the linears: 2 per weight per token
    core: int  # scores and re-weighting (what selective recomputation repeats)

    @property
    def total(self) -> int:
        return self.projections + self.core


def shared_block_flops(m: ModelConfig, B: int, S: int, pairs: tuple[int, int]) -> SharedBlockFlops:
    """Forward FLOPs of all n_app applications. `pairs` is the attended fraction of S² as
    (numerator, denominator) (flops.attended_pairs: S² in full, S²/2 causal): scores 2·A·h_d and
    re-weighting 2·A·h_d per pair and sequence (eager_attention_forward's two matmuls)."""
    n_app = m.n_shared_block_applications
    num, den = pairs
    projections = FLOPS_PER_MAC * B * S * matmul_weights_per_application(m)
    core = 2 * FLOPS_PER_MAC * B * m.n_heads * m.head_dim * num // den  # exact: FLOPS_PER_MAC is even
    return SharedBlockFlops(projections=n_app * projections, core=n_app * core)


def varied_labels(m: ModelConfig) -> list[str]:
    """This block by name when the model has it (its applications differ from the base block), else []."""
    return ["shared transformer block (Zamba2)"] if m.shared_block_layer_ids else []


def check_tensor_parallel(m: ModelConfig, T: int) -> None:
    """The shared blocks are not laid out over tensor-parallel ranks here: T = 1 only."""
    if m.n_shared_block_applications and T != 1:
        from transformer_calc.estimators.support_table import Unpriced, refusal

        raise refusal(m, f"tensor parallelism (T {T})", Unpriced.tensor)
