"""Kimi Delta Attention (Kimi Team 2025, "Kimi Linear: An Expressive, Efficient Attention
Architecture", arXiv:2510.26692): the linear-attention layers of Kimi Linear. A Gated DeltaNet whose
decay is per channel (a d-vector per head and token, from a low-rank gate) instead of per head.

Source: transformers 5.23 `models/kimi_linear/modeling_kimi_linear.py` (KimiLinearDeltaAttention,
KimiLinearForgetGate, KimiLinearRMSNormGated, chunk_kimi_delta_attention,
recurrent_kimi_delta_attention, causal_conv1d_fn, causal_conv1d_update). Letters (docs/notation.md):

    D d_model   H linear_key_heads (= linear_value_heads)   d linear_key_head_dim (= linear_value_head_dim)
    K conv_kernel   C = 64, the chunk of chunk_kimi_delta_attention

    qkv_dim = H·d   conv_dim = 3·H·d

Parameters of one layer (KimiLinearDeltaAttention.__init__):
    q_proj, k_proj, v_proj      3·D·H·d
    b_proj (beta)               D·H
    forget_gate.f_a_proj/f_b    D·d + d·H·d     (the low-rank per-channel decay)
    g_a_proj, g_b_proj          D·d + d·H·d     (the low-rank output gate)
    o_proj                      H·d·D
    conv1d                      3·H·d·K         (depthwise, bias=False)
    forget_gate.dt_bias, A_log  H·d + H         (A_log is (1, 1, H, 1))
    o_norm (gated RMSNorm)      d               (one weight shared by the heads)

Decode state per sequence and layer (transformers' LinearAttentionLayer, as for Gated DeltaNet):
the conv state, 3·H·d·K values at the activation dtype, and the recurrent state H·d·d, which
the layer stores in fp32 (`update_recurrent_state(last_recurrent_state.to(torch.float32))`).

Tensor parallelism (vLLM's KimiDeltaAttention, `vllm/model_executor/layers/kda.py`): the heads split
T ways; q/k/v/b/f_b/g_b column-parallel, o_proj row-parallel, the conv's channels, dt_bias and A_log
split; the down-projections f_a_proj and g_a_proj (D x d) and o_norm are replicated. T must divide H.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.model.units import FLOPS_PER_MAC
from transformer_calc.estimators.mixers.base import BOOL, FP32, WEIGHT, MixerFlops, MixerLinear, MixerParams, MixerState, chunks, rmsnorm_params

CHUNK = 64  # chunk_kimi_delta_attention(chunk_size=64), FLA's chunk_kda BT = 64
DECODE_STATE_MACS = 3  # per state element per token: read k^T S, write k ⊗ delta, read q^T S
DECAY_PRODUCT_GRADIENTS = 3  # fp32 buffers of the broadcast decay product's backward (backward_transient_bytes)
QKV = 3  # q, k and v: three projections of width H·d, three conv groups


@dataclass(frozen=True)
class _Shape:
    D: int
    H: int
    d: int
    K: int

    @property
    def qkv_dim(self) -> int:
        return self.H * self.d

    @property
    def conv_dim(self) -> int:
        return QKV * self.qkv_dim

    @property
    def replicated(self) -> int:
        """f_a_proj and g_a_proj (D x d each): low-rank down-projections every rank holds whole."""
        return 2 * self.D * self.d


def _shape(m: ModelConfig) -> _Shape:
    h, d, k = m.linear_key_heads, m.linear_key_head_dim, m.conv_kernel
    assert h and d and k, "checks._check_pattern requires the kda widths"
    return _Shape(m.d_model, h, d, k)


def _chunk_hidden_flops(d: int) -> int:
    """FLOPs of one chunk and head that FlopCounterMode does not see (chunk_kimi_delta_attention):
    the two per-channel-decayed C x C score matrices, written as broadcast products summed over d
    (`(k_beta·k·decay).sum(-1)` and `(q·k·decay).sum(-1)`), C²·d multiply-adds each, and the
    forward substitution of the loop `attn[..., i, :i] += (row · sub).sum(-2)`, i² multiply-adds
    for row i = 1 .. C-1 (Σ i² = (C-1)·C·(2C-1)/6)."""
    scores = 2 * CHUNK * CHUNK * d
    substitution = (CHUNK - 1) * CHUNK * (2 * CHUNK - 1) // 6
    return FLOPS_PER_MAC * (scores + substitution)


class KimiDeltaAttention:
    kind = LayerAttention.kda
    name = "Kimi Delta Attention"
    source = "Kimi Team 2025 (arXiv:2510.26692); transformers modeling_kimi_linear.py KimiLinearDeltaAttention"

    def check(self, m: ModelConfig, T: int) -> None:
        s = _shape(m)
        if s.H % T:
            raise ValueError(
                f"linear_key_heads ({s.H}) must be divisible by T ({T}) to split the Kimi Delta Attention heads; "
                f"use a divisor of {s.H}"
            )

    def params(self, m: ModelConfig) -> MixerParams:
        s = _shape(m)
        D, H, d, HD = s.D, s.H, s.d, s.qkv_dim
        qkv = QKV * D * HD  # q_proj, k_proj, v_proj
        beta = D * H  # b_proj
        decay = D * d + d * HD  # forget_gate.f_a_proj, f_b_proj
        gate = D * d + d * HD  # g_a_proj, g_b_proj
        out = HD * D  # o_proj
        return MixerParams(
            projections=qkv + beta + decay + gate + out,
            conv=s.conv_dim * s.K,  # nn.Conv1d(conv_dim, conv_dim, K, groups=conv_dim, bias=False)
            other=HD + H + rmsnorm_params(d),  # forget_gate.dt_bias (H·d), A_log (1,1,H,1); o_norm(d)
        )

    def shard_params(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        s = _shape(m)
        p = self.params(m)
        split = p.projections - s.replicated + p.conv + s.qkv_dim + s.H  # every head-indexed part
        return split // T + s.replicated + rmsnorm_params(s.d)

    def matmul_params(self, m: ModelConfig, T: int) -> int:
        s = _shape(m)
        return (self.params(m).projections - s.replicated) // T + s.replicated

    def linears(self, m: ModelConfig, T: int) -> tuple[MixerLinear, ...]:
        """KimiDeltaAttention: q_proj, k_proj, v_proj (D -> H·d each), b_proj (D -> H), the low-rank
        decay forget_gate.f_a_proj (D -> d, replicated) and f_b_proj (d -> H·d), the output gate's
        g_a_proj (D -> d, replicated) and g_b_proj (d -> H·d), o_proj (H·d -> D)."""
        self.check(m, T)
        s = _shape(m)
        D, d, HD, H = s.D, s.d, s.qkv_dim // T, s.H // T
        return (MixerLinear("q_proj", D, HD), MixerLinear("k_proj", D, HD), MixerLinear("v_proj", D, HD),
                MixerLinear("b_proj", D, H, per_head=True), MixerLinear("f_a_proj", D, d, "rep"), MixerLinear("f_b_proj", d, HD, "col", WEIGHT),
                MixerLinear("g_a_proj", D, d, "rep"), MixerLinear("g_b_proj", d, HD, "col", WEIGHT), MixerLinear("o_proj", HD, D, "row", WEIGHT))

    def forward_flops(self, m: ModelConfig, B: int, S: int) -> MixerFlops:
        """One layer's forward, as chunk_kimi_delta_attention computes it (the path transformers
        takes for a prompt and in training).

        Per sequence and head, over the sequence padded to S_p = ceil(S/C)·C, the matmuls
        FlopCounterMode counts: per chunk `attn @ v_beta` and `attn @ (k_beta·exp g)` (the UT
        transform, C²·d each), the state reads `(q·exp g) @ S` and `k_cumdecay @ S` and the write
        `k^T @ v_new` (C·d² each), and the intra-chunk output `attn_intra @ v_new` (C²·d):
        2·S_p·(3·C·d + 3·d²). Hidden from it: `_chunk_hidden_flops` per chunk. The conv: F.conv1d
        with padding K-1 computes S + K - 1 outputs, K multiply-adds each per channel.
        """
        s = _shape(m)
        tokens = B * S
        chunks = -(-S // CHUNK)
        padded = chunks * CHUNK
        heads = B * s.H
        core = heads * FLOPS_PER_MAC * padded * (3 * CHUNK * s.d + 3 * s.d * s.d)
        return MixerFlops(
            projections=FLOPS_PER_MAC * tokens * self.params(m).projections,
            conv=FLOPS_PER_MAC * B * (S + s.K - 1) * s.conv_dim * s.K,
            core=core,
            hidden=heads * chunks * _chunk_hidden_flops(s.d),
        )

    def token_flops(self, m: ModelConfig, T: int) -> int:
        """One decode token (recurrent_kimi_delta_attention, causal_conv1d_update): the conv's K
        taps per channel and three multiply-adds per state element (read k^T·S, write k ⊗ δ,
        read q^T·S; the per-channel decay is element-wise), on the rank's H/T heads."""
        self.check(m, T)
        s = _shape(m)
        conv = FLOPS_PER_MAC * s.conv_dim * s.K
        state = FLOPS_PER_MAC * DECODE_STATE_MACS * s.H * s.d * s.d
        return (conv + state) // T

    def prompt_token_flops(self, m: ModelConfig, T: int) -> int:
        """Per prompt token on one rank, the chunked form of `forward_flops` without the last chunk's
        padding: the conv's K taps per channel, 2·(3·C·d + 3·d²) matmul FLOPs and the hidden
        per-chunk work divided over the chunk's C tokens, per head."""
        self.check(m, T)
        s = _shape(m)
        conv = FLOPS_PER_MAC * s.conv_dim * s.K
        per_head = FLOPS_PER_MAC * (3 * CHUNK * s.d + 3 * s.d * s.d) + _chunk_hidden_flops(s.d) // CHUNK
        return (conv + s.H * per_head) // T

    def state(self, m: ModelConfig, T: int) -> MixerState:
        self.check(m, T)
        s = _shape(m)
        return MixerState(conv=s.conv_dim * s.K // T, recurrent=s.H * s.d * s.d // T)


    def activation_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """Bytes one layer keeps for backward beyond its input, on one of T ranks (heads split; the
        low-rank gates' d-wide outputs replicated).

        torch-eager (`fused=False`): KimiLinearDeltaAttention.forward with causal_conv1d_fn's torch
        fallback and chunk_kimi_delta_attention (modeling_kimi_linear.py), tensor by tensor. Unlike
        Gated DeltaNet the decay is per channel, so the pairwise decays are C x C x d per chunk and
        head (fp32), and the UT transform is a Python loop over the C - 1 rows of each chunk, each
        keeping its row and block (Σ i² + i floats per chunk and head). Measured:
        tools/crosscheck/activations_mixers.py.

        fused (`fused=True`): fla's chunk_kda (fla/ops/kda/chunk.py) keeps q, k (with fp32 l2norm
        rstd), v, the fp32 per-channel gate g, beta and the solved C-wide matrix; causal-conv1d its
        input; the gated norm x, the gate and an fp32 rstd per head; o_proj its input.
        """
        self.check(m, T)
        s = _shape(m)
        f, tokens, d, H = FP32, B * S, s.d, s.H // T
        hd = H * d
        gate = f * tokens * 3 * hd + BOOL * tokens * hd + 2 * f * H  # softplus in/out and exp (fp32), its mask; exp(A_log), -exp
        low_rank = 2 * p * tokens * d  # f_a_proj's and g_a_proj's outputs (f_b_proj's, g_b_proj's inputs)
        if fused:
            return (
                2 * p * tokens * QKV * hd  # the conv's input, and q, k, v as the kernel keeps them
                + f * tokens * 2 * H + f * tokens * hd  # l2norm rstd of q and k; g in fp32
                + gate + low_rank + p * tokens * H  # beta
                + p * tokens * H * CHUNK  # the solved matrix, C wide per token and head
                + p * tokens * 2 * hd + f * tokens * H  # gated norm: x, gate, rstd
                + p * tokens * hd  # o_proj's input
            )  # fmt: skip
        n_c, Sp = chunks(S, CHUNK)
        C = CHUNK
        per_head = f * B * H  # one fp32 value per (sequence, head)
        b = p * tokens * QKV * hd  # F.conv1d's input (q, k, v concatenated)
        b += p * B * (S + s.K - 1) * QKV * hd  # its padded output, SiLU's input
        b += gate + low_rank + p * tokens * H  # the forget gate; sigmoid(b), beta
        b += 2 * f * tokens * (hd + H)  # l2norm of q and k: fp32 input and its norm
        b += per_head * Sp * (1 + 2 * d)  # padded beta, v, k
        b += 3 * BOOL * C * C  # the causal masks
        b += 2 * per_head * Sp * C * d  # exp of the per-channel pairwise decay, and k·decay products
        b += per_head * Sp * d  # k·beta broadcast for the decayed products
        b += per_head * n_c * ((C - 1) * C * (2 * C - 1) // 6 + (C - 1) * C // 2)  # the UT loop's rows
        b += per_head * Sp * (3 * d + C)  # after the loop: k·beta·exp(g), the solved A, exp(g), v·beta
        b += per_head * n_c * (C * C * d + C * C + d + d * d)  # per chunk: q·k·decay, the masked scores, exp(g_last), the state
        b += per_head * (5 * n_c - 1) * C * d  # per chunk: decayed q and k, v_new, ... (the state read from the 2nd chunk)
        b += per_head * Sp * d * (1 + (1 if n_c > 1 else 0))  # whole-storage views the chunk loop reads
        # KimiLinearRMSNormGated: fp32 input, rsqrt, x̂ (fp32), its weight in fp32, sigmoid(gate), the product
        b += f * tokens * hd + f * tokens * H + f * tokens * hd + f * d + 2 * f * tokens * hd
        b += p * tokens * hd  # o_proj's input
        return b

    def frozen_parameter_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """The per-channel gate -exp(A_log)·softplus(g + dt_bias), in torch in both profiles: softplus's
        fp32 output (H·d per token) and exp(A_log); torch-eager also the gated norm's fp32 x̂ (for the
        weight's gradient). Measured: tools/crosscheck/lora_activations_mixers.py."""
        s = _shape(m)
        H, hd, tokens = s.H // T, s.qkv_dim // T, B * S
        return FP32 * tokens * hd + FP32 * H + (0 if fused else FP32 * tokens * hd)

    def backward_transient_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """torch-eager: chunk_kimi_delta_attention forms (k_beta ⊙ k ⊙ decay).sum(-1) over a broadcast
        (B, H, S_p/C, C, C, d) product; its backward allocates that shape in fp32 for the gradient of
        each factor, grad·decay and grad·(k_beta ⊙ k), and for the next factor's (grad·k before its
        sum over the broadcast dimension): three such buffers alive together, 3·4·B·H·S_p·C·d bytes
        (derived; measured 3.4x at one shape, tools/crosscheck/activations_mixers.py). fused: fla's
        chunk_kda backward is not measured (not modeled)."""
        if fused:
            return 0
        self.check(m, T)
        s = _shape(m)
        _, Sp = chunks(S, CHUNK)
        return DECAY_PRODUCT_GRADIENTS * FP32 * B * (s.H // T) * Sp * CHUNK * s.d

MIXER = KimiDeltaAttention()
