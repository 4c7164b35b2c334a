"""Mamba-2 (Dao & Gu 2024, "Transformers are SSMs: Generalized Models and Efficient Algorithms
Through Structured State Space Duality", arXiv:2405.21060): the state-space layers of Bamba and
Granite-4.0-H.

Source: transformers 5.23 `models/bamba/modeling_bamba.py` (BambaMixer, mamba2_chunk_scan,
mamba2_selective_state_update, causal_conv1d_fn) and `models/granitemoehybrid/
modeling_granitemoehybrid.py` (GraniteMoeHybridMambaLayer, the same layer). Letters
(docs/notation.md):

    D d_model   H ssm_heads   P ssm_head_dim   N ssm_state_size   G ssm_groups   K conv_kernel
    Q ssm_chunk_size (the chunk of the chunked scan)

    d_inner = H·P   conv_dim = d_inner + 2·G·N

Parameters of one layer:
    in_proj     D·(d_inner + conv_dim + H)   (z, x, B, C, dt), + the same bias with ssm_proj_bias
    conv1d      conv_dim·K                   (depthwise), + conv_dim with ssm_conv_bias
    dt_bias, A_log, D   3·H
    norm        d_inner                      (gated RMSNorm, MambaRMSNormGated; Falcon-H1: with ssm_norm)
    out_proj    d_inner·D                    + D with ssm_out_bias (default ssm_proj_bias)

Falcon-H1 (`models/falcon_h1/modeling_falcon_h1.py` FalconH1Mixer) is this layer with d_inner =
mamba_d_ssm, an optional norm and out_proj's bias from projectors_bias; its layers run attention
beside it (`mixer_beside_attention`), which the estimators add as a full-attention layer.

Decode state per sequence and layer (transformers' LinearAttentionLayer): conv_dim·K conv values at
the activation dtype, H·P·N recurrent values in fp32 (mamba2_chunk_scan runs in fp32 and returns
its final state so).

Tensor parallelism (Megatron-core's MambaMixer, vLLM's MambaMixer2): heads split T ways (z, x, dt,
the norm, out_proj's input, the per-head scalars), the B and C groups split when T divides G and
replicated when G = 1; out_proj's bias replicated.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.model.units import FLOPS_PER_MAC
from transformer_calc.estimators.mixers.base import BOOL, FP32, WEIGHT_EAGER, MixerFlops, MixerLinear, MixerParams, MixerState, chunks, rmsnorm_params

PER_HEAD_SCALARS = 3  # dt_bias, A_log, D
DECODE_STATE_MACS = 3  # per state element per token: dB·x, the decayed state + dBx, C·state


@dataclass(frozen=True)
class _Shape:
    D: int
    H: int
    P: int
    N: int
    G: int
    K: int
    Q: int
    proj_bias: bool
    conv_bias: bool
    out_bias: bool
    norm: bool

    @property
    def inner(self) -> int:
        return self.H * self.P

    @property
    def conv_dim(self) -> int:
        return self.inner + 2 * self.G * self.N

    @property
    def in_width(self) -> int:
        return self.inner + self.conv_dim + self.H  # z, x, B, C, dt


def _shape(m: ModelConfig) -> _Shape:
    H, P, N, G, K, Q = m.ssm_heads, m.ssm_head_dim, m.ssm_state_size, m.ssm_groups, m.conv_kernel, m.ssm_chunk_size
    assert H and P and N and G and K and Q, "checks._check_pattern requires the Mamba-2 widths"
    out_bias = m.ssm_proj_bias if m.ssm_out_bias is None else m.ssm_out_bias
    return _Shape(m.d_model, H, P, N, G, K, Q, m.ssm_proj_bias, m.ssm_conv_bias, out_bias, m.ssm_norm)


class Mamba2:
    kind = LayerAttention.mamba2
    name = "Mamba-2"
    source = "Dao & Gu 2024 (arXiv:2405.21060); transformers modeling_bamba.py BambaMixer"

    def check(self, m: ModelConfig, T: int) -> None:
        s = _shape(m)
        if s.H % T:
            raise ValueError(f"ssm_heads ({s.H}) must be divisible by T ({T}) to split the Mamba-2 heads; use a divisor of {s.H}")
        if s.G % T and s.G != 1:
            raise ValueError(
                f"ssm_groups ({s.G}) must be divisible by T ({T}) (or 1, replicated) to split the Mamba-2 B/C groups; "
                f"use a divisor of {s.G}"
            )

    def params(self, m: ModelConfig) -> MixerParams:
        s = _shape(m)
        in_proj = s.D * s.in_width + (s.in_width if s.proj_bias else 0)
        out_proj = s.inner * s.D + (s.D if s.out_bias else 0)  # Falcon-H1: bias=projectors_bias
        return MixerParams(
            projections=in_proj + out_proj,
            conv=s.conv_dim * s.K + (s.conv_dim if s.conv_bias else 0),
            other=PER_HEAD_SCALARS * s.H + (rmsnorm_params(s.inner) if s.norm else 0),
        )

    def _groups_per_rank(self, m: ModelConfig, T: int) -> int:
        s = _shape(m)
        return s.G // T if s.G % T == 0 else s.G  # G = 1 with T > 1: replicated

    def shard_params(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        s = _shape(m)
        g = self._groups_per_rank(m, T)
        inner, heads = s.inner // T, s.H // T
        conv_dim = inner + 2 * g * s.N
        in_width = inner + conv_dim + heads
        in_proj = s.D * in_width + (in_width if s.proj_bias else 0)
        out_proj = inner * s.D + (s.D if s.out_bias else 0)  # row-parallel; its bias replicated
        conv = conv_dim * s.K + (conv_dim if s.conv_bias else 0)
        return in_proj + out_proj + conv + PER_HEAD_SCALARS * heads + (rmsnorm_params(inner) if s.norm else 0)

    def matmul_params(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        s = _shape(m)
        g = self._groups_per_rank(m, T)
        inner = s.inner // T
        return s.D * (2 * inner + 2 * g * s.N + s.H // T) + inner * s.D

    def linears(self, m: ModelConfig, T: int) -> tuple[MixerLinear, ...]:
        """BambaMixer / GraniteMoeHybridMambaLayer / FalconH1Mixer / NemotronHMamba2Mixer: in_proj
        (D -> x, z, B, C and dt: 2·d_inner + 2·G·N + H; column-parallel, B and C replicated where T
        does not divide G) and out_proj (d_inner -> D, row-parallel)."""
        self.check(m, T)
        s = _shape(m)
        g, inner = self._groups_per_rank(m, T), s.inner // T
        return (MixerLinear("in_proj", s.D, 2 * inner + 2 * g * s.N + s.H // T),
                MixerLinear("out_proj", inner, s.D, "row", WEIGHT_EAGER))

    def forward_flops(self, m: ModelConfig, B: int, S: int) -> MixerFlops:
        """One layer's forward as mamba2_chunk_scan computes it (the torch path transformers takes for
        a prompt and in training without the mamba_ssm kernels).

        Per sequence and head (B and C repeated from G groups to H heads), over the sequence padded to
        S_p = n_c·Q (n_c = ceil(S/Q) chunks): C·B^T inside each chunk 2·S_p·Q·N, its product with x
        2·S_p·Q·P, the chunk states B^T·x 2·S_p·N·P, the states passed between chunks as one einsum
        over n_c + 1 chunks 2·(n_c + 1)²·P·N, and their read C·state 2·S_p·N·P. The conv: F.conv1d
        with padding K - 1 computes S + K - 1 outputs. Nothing is hidden from FlopCounterMode.
        """
        s = _shape(m)
        chunks = -(-S // s.Q)
        padded = chunks * s.Q
        per_head = FLOPS_PER_MAC * (padded * s.Q * (s.N + s.P) + 2 * padded * s.N * s.P + (chunks + 1) ** 2 * s.P * s.N)
        weights = s.D * s.in_width + s.inner * s.D
        return MixerFlops(
            projections=FLOPS_PER_MAC * B * S * weights,
            conv=FLOPS_PER_MAC * B * (S + s.K - 1) * s.conv_dim * s.K,
            core=B * s.H * per_head,
            hidden=0,
        )

    def token_flops(self, m: ModelConfig, T: int) -> int:
        """One decode token (mamba2_selective_state_update, causal_conv1d_update): the conv's K taps
        per channel and three multiply-adds per state element (dB·x, the decayed state + dB·x, the
        read C·state), on the rank's H/T heads."""
        self.check(m, T)
        s = _shape(m)
        g = self._groups_per_rank(m, T)
        conv_dim = s.inner // T + 2 * g * s.N
        return FLOPS_PER_MAC * (conv_dim * s.K + DECODE_STATE_MACS * (s.H // T) * s.P * s.N)

    def prompt_token_flops(self, m: ModelConfig, T: int) -> int:
        """Per prompt token on one rank, the chunked scan without padding: the conv, 2·Q·(N + P) and
        4·N·P per head; the states pass between chunks in a scan (mamba_ssm's kernels), n_c·P·N, a
        share below 1/Q of the rest, not counted."""
        self.check(m, T)
        s = _shape(m)
        g = self._groups_per_rank(m, T)
        conv_dim = s.inner // T + 2 * g * s.N
        per_head = FLOPS_PER_MAC * (s.Q * (s.N + s.P) + 2 * s.N * s.P)
        return FLOPS_PER_MAC * conv_dim * s.K + (s.H // T) * per_head

    def state(self, m: ModelConfig, T: int) -> MixerState:
        self.check(m, T)
        s = _shape(m)
        g = self._groups_per_rank(m, T)
        return MixerState(conv=(s.inner // T + 2 * g * s.N) * s.K, recurrent=(s.H // T) * s.P * s.N)

    def activation_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """Bytes one layer keeps for backward beyond its input, on one of T ranks (heads split, the
        B/C groups split or replicated as in `shard_params`).

        torch-eager (`fused=False`): what autograd saves running BambaMixer.torch_forward
        (modeling_bamba.py: causal_conv1d_fn's torch fallback, mamba2_chunk_scan in fp32 over the
        padded length S_p = n_c·Q, B and C repeated from G groups to H heads, the grouped gated
        RMSNorm), tensor by tensor. Measured: tools/crosscheck/activations_mixers.py.

        fused (`fused=True`): mamba_ssm's MambaSplitConv1dScanCombinedFn
        (mamba_ssm/ops/triton/ssd_combined.py, the path of mamba_split_conv1d_scan_combined that
        transformers' cuda_kernels_forward takes in training) saves the in_proj output zxbcdt, the
        scan output before the norm, and the norm's fp32 rstd per group; conv, scan, norm and
        out_proj are recomputed from them in backward.
        """
        self.check(m, T)
        s = _shape(m)
        f, tokens = FP32, B * S
        g = self._groups_per_rank(m, T)
        H, di = s.H // T, s.inner // T
        conv = di + 2 * g * s.N
        in_width = di + conv + H
        if fused:
            return p * tokens * in_width + p * tokens * di + f * tokens * g
        n_c, Sp = chunks(S, s.Q)
        Q, N, P = s.Q, s.N, s.P
        cast = f != p  # below fp32 the scan's .float() casts are new tensors (in fp32 views of others)
        b = 2 * f * H  # A = -exp(A_log): the exp and its negation
        b += p * tokens * in_width  # in_proj's output (the conv's input and the gate z are views of it)
        b += p * B * (S + s.K - 1) * conv  # the conv's output, SiLU's input (padding K - 1)
        b += 2 * p * tokens * H  # dt + dt_bias and softplus(dt) (clamp keeps it)
        if cast:
            b += 2 * f * tokens * H + f * tokens * H * P  # dt in fp32 twice, x in fp32
        else:
            b += f * tokens * H + f * tokens * conv  # the clamped dt; x is a view of the SiLU output
        b += f * B * Sp * H * P * 4  # D·x (padded), x·dt chunked twice (einsum operands), C·states
        b += f * B * Sp * H * N * 5  # C and B repeated, B·decay and its einsum copy, C again
        b += f * B * H * Sp * Q * 3  # L = exp(segsum(A)), G = C·B^T, M = G·L
        b += BOOL * (2 * Q * Q + 2 * (n_c + 1) ** 2)  # segsum's masks (within and across chunks)
        b += 2 * f * B * H * Sp + f * B * H * (n_c + 1) ** 2  # decay_states, state_decay_out; decay_chunk
        b += f * B * H * P * N * (2 * n_c + 1)  # the chunk states (cat with the initial one) and states[:, :-1]
        # MambaRMSNormGated (grouped): y (fp32, padded), SiLU(z) (and z in fp32 below fp32), y·SiLU(z),
        # rsqrt per group, the normalized y (fp32), out_proj's input
        if s.norm:
            b += f * B * Sp * di + f * tokens * di * (3 + (1 if cast else 0)) + f * tokens * g
        else:  # Falcon-H1 without mamba_rms_norm: y·SiLU(z) keeps y (fp32, padded) and SiLU(z)
            b += f * B * Sp * di + p * tokens * di
        if m.mixer_beside_attention:  # Falcon-H1's µP: the input scaled by ssm_in_multiplier, the mup_vector buffer
            b += p * tokens * s.D + p * in_width
        b += p * tokens * di
        return b

    def frozen_parameter_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """torch-eager: the padded fp32 x that D·x keeps for D's gradient, dt in fp32 that A·dt keeps for
        A's, exp(A_log), and the grouped norm's fp32 x̂ (weight·x̂). Fused: nothing (mamba_ssm's combined
        function saves its tensors regardless). Measured: tools/crosscheck/lora_activations_mixers.py."""
        if fused:
            return 0
        s = _shape(m)
        H, di, tokens = s.H // T, s.inner // T, B * S
        _, Sp = chunks(S, s.Q)
        return FP32 * B * Sp * di + FP32 * tokens * H + FP32 * H + (FP32 * tokens * di if s.norm else 0)

    def backward_transient_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """No transient beyond the layer's own gradients: measured whole-step peaks of Bamba, Falcon-H1 and
        Nemotron-H models within 10 % (tools/crosscheck/activations_mixers.py)."""
        return 0


MIXER = Mamba2()
