"""Lightning attention (Qin et al. 2024, "Lightning Attention-2", arXiv:2401.04658): the linear-attention
layers of MiniMax-01 (MiniMax 2025, arXiv:2501.08313).

Source: transformers 5.23 `models/minimax/modeling_minimax.py` (MiniMaxLightningAttention,
MiniMaxCache). Letters: D d_model, A n_heads, h head_dim, C lightning_block_size (the block of the
prompt's blockwise form).

Parameters of one layer: qkv_proj D·3·A·h, output_gate D·A·h, out_proj A·h·D, norm A·h (an RMSNorm
over the heads' outputs); the slopes and decays are buffers. Decode state per sequence and layer:
the running K^T·V, A·h·h values, kept at the activation dtype (MiniMaxCache.linear_cache). FLOPs,
as the reference code computes them: a prompt in blocks of C tokens (the last one shorter, no
padding), each block Q·K^T and (·decay)·V, 2·2·c²·h per head, and the inter-block read Q·KV and
update K^T·V, 2·2·c·h² per head; one cached token K^T·V and Q·KV, 2·2·h² per head.
Tensor parallelism: heads split T ways (every part, the norm's weight with them).
"""

from __future__ import annotations

from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.model.units import FLOPS_PER_MAC
from transformer_calc.estimators.mixers.base import FP32, WEIGHT, MixerFlops, MixerLinear, MixerParams, MixerState, rmsnorm_params

PROJECTIONS = 5  # q, k, v, the output gate and out_proj: each D x A·h
BLOCK_MATMULS = 2  # per block: Q·K^T and its product with V (c² terms); Q·KV and K^T·V (c·h terms)


class Lightning:
    kind = LayerAttention.lightning
    name = "lightning attention"
    source = "Qin et al. 2024 (arXiv:2401.04658); transformers modeling_minimax.py MiniMaxLightningAttention"

    def check(self, m: ModelConfig, T: int) -> None:
        if m.n_heads % T:
            raise ValueError(f"n_heads ({m.n_heads}) must be divisible by T ({T}); use a divisor of {m.n_heads}")

    def params(self, m: ModelConfig) -> MixerParams:
        width = m.n_heads * m.head_dim
        return MixerParams(projections=PROJECTIONS * m.d_model * width, conv=0, other=rmsnorm_params(width))

    def shard_params(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        return self.params(m).total // T

    def matmul_params(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        return self.params(m).projections // T

    def linears(self, m: ModelConfig, T: int) -> tuple[MixerLinear, ...]:
        """MiniMaxLightningAttention: qkv_proj (D -> 3·A·h), output_gate (D -> A·h), out_proj (A·h -> D)."""
        self.check(m, T)
        D, w = m.d_model, m.n_heads // T * m.head_dim
        return (MixerLinear("qkv_proj", D, 3 * w), MixerLinear("output_gate", D, w), MixerLinear("out_proj", w, D, "row", WEIGHT))

    def forward_flops(self, m: ModelConfig, B: int, S: int) -> MixerFlops:
        C = m.lightning_block_size
        assert C, "checks._check_pattern requires lightning_block_size"
        h = m.head_dim
        full, rest = divmod(S, C)
        squares = full * C * C + rest * rest  # Σ over blocks of c²
        per_head = FLOPS_PER_MAC * BLOCK_MATMULS * (squares * h + S * h * h)
        return MixerFlops(
            projections=FLOPS_PER_MAC * B * S * self.params(m).projections,
            conv=0,
            core=B * m.n_heads * per_head,
            hidden=0,
        )

    def token_flops(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        return FLOPS_PER_MAC * BLOCK_MATMULS * (m.n_heads // T) * m.head_dim * m.head_dim

    def prompt_token_flops(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        C, h = m.lightning_block_size or 1, m.head_dim
        return FLOPS_PER_MAC * BLOCK_MATMULS * (m.n_heads // T) * (C * h + h * h)

    def state(self, m: ModelConfig, T: int) -> MixerState:
        self.check(m, T)
        return MixerState(conv=0, recurrent=(m.n_heads // T) * m.head_dim * m.head_dim, recurrent_at_activation_dtype=True)


    def activation_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """Bytes one layer keeps for backward beyond its input, on one of T ranks (heads split).

        MiniMaxLightningAttention.forward (modeling_minimax.py) in blocks of C tokens (the last one
        c = S - (n_b - 1)·C), tensor by tensor: qkv_proj's output and its SiLU (q, k, v are views),
        the decay buffers (A·(C² + 2·C), at p), per block the decayed scores (Q·K^T)·decay, the
        decayed keys K·decay, the running K^T·V it starts from and the decayed queries Q·decay (for
        B = 1 not in the first block, whose state is zero; for B > 1 bmm's operand copies) and the block decay; then MiniMaxRMSNorm (fp32 input, rsqrt, x̂ at
        p), sigmoid(output_gate), the gated output and out_proj's input. transformers has no fused
        kernel for it: `fused` gives the same bytes. Measured: tools/crosscheck/activations_mixers.py.
        """
        del fused  # one implementation (no fused kernel in transformers)
        self.check(m, T)
        C = m.lightning_block_size
        assert C, "checks._check_pattern requires lightning_block_size"
        f, tokens, h, A = FP32, B * S, m.head_dim, m.n_heads // T
        width = A * h
        full, rest = divmod(S, C)
        n_b = full + (1 if rest else 0)
        first = min(S, C)  # the first block: its queries read a zero state
        squares = full * C * C + rest * rest  # Σ c² over the blocks
        b = 2 * p * tokens * 3 * width  # qkv_proj's output and SiLU's
        b += p * A * (C * C + 2 * C)  # diagonal_decay, query_decay, key_decay (buffers)
        b += p * B * A * (squares + 2 * S * h + n_b * h * h)  # per block: scores·decay, K·decay, Q·decay, K^T·V
        # B = 1: the first block's Q·decay is not kept (its state is zero); B > 1: matmul folds the batch
        # into bmm operands, copies it keeps: Q·decay of the first block too, and one more c·h copy per
        # later block (the copies of q, k and v replace the SiLU output: the same bytes)
        b += p * B * A * h * (S - first) if B > 1 else -p * B * A * h * first
        b += p * A * (n_b - 1)  # the block decays the state is scaled by
        b += f * tokens * width + f * tokens + p * tokens * width  # the norm: fp32 input, rsqrt, x̂
        b += 3 * p * tokens * width  # sigmoid(gate), the normed output it gates, out_proj's input
        return b

    def frozen_parameter_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """The norm's x̂ at p (weight·x̂, for the weight's gradient); one implementation for both profiles.
        Measured: tools/crosscheck/lora_activations_mixers.py."""
        del fused
        return p * B * S * (m.n_heads // T) * m.head_dim

    def backward_transient_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """No transient beyond the layer's own gradients: measured whole-step peaks of MiniMax models within
        2 % (tools/crosscheck/activations_mixers.py)."""
        return 0


MIXER = Lightning()
