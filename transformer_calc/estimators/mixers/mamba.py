"""Mamba (Gu & Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective State Spaces",
arXiv:2312.00752), the selective-scan layers of Jamba (Lieber et al. 2024, arXiv:2403.19887).

Source: transformers 5.23 `models/jamba/modeling_jamba.py` (JambaMambaMixer, mamba_selective_scan,
mamba_selective_state_update, causal_conv1d_fn). Letters (docs/notation.md):

    D d_model   d_inner = ssm_inner (mamba_expand·D)   N ssm_state_size   R ssm_dt_rank   K conv_kernel

Parameters of one layer:
    in_proj     D·2·d_inner                  (x, z), + 2·d_inner with ssm_proj_bias
    conv1d      d_inner·K                    (depthwise), + d_inner with ssm_conv_bias
    x_proj      d_inner·(R + 2·N)            (dt, B, C; no bias)
    dt_proj     R·d_inner + d_inner          (always a bias)
    A_log, D    d_inner·N + d_inner
    out_proj    d_inner·D                    + D with ssm_proj_bias
    norms       R + 2·N                      (Jamba's dt, B and C RMSNorms)

Decode state per sequence and layer (transformers' LinearAttentionLayer): d_inner·K conv values at
the activation dtype and d_inner·N recurrent values in fp32 (the scan's state is promoted to fp32).
FLOPs: the four projections, the conv as F.conv1d with padding K - 1 computes it, and the scan's
read C·state per token, 2·d_inner·N (the recurrent loop's matmul; the state update is
element-wise). Tensor parallelism: d_inner split T ways (in_proj, conv, x_proj's input, dt_proj's
output, A_log, D, out_proj's input); x_proj's output, the norms and out_proj's bias replicated.
"""

from __future__ import annotations

from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.model.units import FLOPS_PER_MAC
from transformer_calc.estimators.mixers.base import FP32, KEPT_VIEW, WEIGHT, MixerFlops, MixerLinear, MixerParams, MixerState, rmsnorm_params

SELECT_BACKWARD_BUFFERS = 4  # two accumulated gradients and two select_backward buffers (see backward_transient_bytes)
SCAN_CHUNK = 2048  # selective_scan_cuda checkpoints its state every 2048 tokens (selective_scan_fwd_kernel kChunkSize)
DECODE_STATE_MACS = 2  # per state element per token: the decayed state + dB·x, and the read C·state


def _dims(m: ModelConfig) -> tuple[int, int, int, int, int]:
    di, N, R, K = m.ssm_inner, m.ssm_state_size, m.ssm_dt_rank, m.conv_kernel
    assert di and N and R and K, "checks._check_pattern requires the Mamba widths"
    return m.d_model, di, N, R, K


class Mamba:
    kind = LayerAttention.mamba
    name = "Mamba"
    source = "Gu & Dao 2023 (arXiv:2312.00752); transformers modeling_jamba.py JambaMambaMixer"

    def check(self, m: ModelConfig, T: int) -> None:
        _, di, _, _, _ = _dims(m)
        if di % T:
            raise ValueError(f"ssm_inner ({di}) must be divisible by T ({T}) to split the Mamba channels; "
                             f"use a divisor of {di}")

    def _split(self, m: ModelConfig) -> tuple[int, int]:
        """(parameters split with d_inner, replicated parameters)."""
        D, di, N, R, K = _dims(m)
        b, cb = m.ssm_proj_bias, m.ssm_conv_bias
        split = D * 2 * di + (2 * di if b else 0)  # in_proj
        split += di * K + (di if cb else 0)  # conv1d
        split += di * (R + 2 * N)  # x_proj (its input is split)
        split += R * di + di  # dt_proj with its bias
        split += di * N + di  # A_log, D
        split += di * D  # out_proj's weight
        replicated = (D if b else 0) + rmsnorm_params(R) + 2 * rmsnorm_params(N)
        return split, replicated

    def params(self, m: ModelConfig) -> MixerParams:
        D, di, N, R, K = _dims(m)
        b, cb = m.ssm_proj_bias, m.ssm_conv_bias
        projections = D * 2 * di + di * (R + 2 * N) + R * di + di * D
        projections += (2 * di + D if b else 0) + di  # in/out biases, dt_proj's bias
        conv = di * K + (di if cb else 0)
        return MixerParams(projections=projections, conv=conv,
                           other=di * N + di + rmsnorm_params(R) + 2 * rmsnorm_params(N))

    def shard_params(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        split, replicated = self._split(m)
        return split // T + replicated

    def matmul_params(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        D, di, N, R, _ = _dims(m)
        return (D * 2 * di + di * (R + 2 * N) + R * di + di * D) // T

    def linears(self, m: ModelConfig, T: int) -> tuple[MixerLinear, ...]:
        """JambaMambaMixer: in_proj (D -> 2·d_inner: x and z), x_proj (d_inner -> R + 2·N: dt, B, C;
        its input split T ways), dt_proj (R -> d_inner), out_proj (d_inner -> D). The forward computes
        `self.dt_proj.weight @ time_step` (modeling_jamba.py JambaMambaMixer, unquantized): an adapter on
        dt_proj is counted as PEFT counts it but never runs."""
        self.check(m, T)
        D, di, N, R, _ = _dims(m)
        d = di // T
        return (MixerLinear("in_proj", D, 2 * d), MixerLinear("x_proj", d, R + 2 * N, "row", KEPT_VIEW),
                MixerLinear("dt_proj", R, d, "col", WEIGHT, bypassed=True), MixerLinear("out_proj", d, D, "row", WEIGHT))

    def forward_flops(self, m: ModelConfig, B: int, S: int) -> MixerFlops:
        D, di, N, R, K = _dims(m)
        return MixerFlops(
            projections=FLOPS_PER_MAC * B * S * (D * 2 * di + di * (R + 2 * N) + R * di + di * D),
            conv=FLOPS_PER_MAC * B * (S + K - 1) * di * K,
            core=FLOPS_PER_MAC * B * S * di * N,  # C·state per token (matmul of the recurrent loop)
            hidden=0,
        )

    def token_flops(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        _, di, N, _, K = _dims(m)
        return FLOPS_PER_MAC * (di * K + DECODE_STATE_MACS * di * N) // T

    def prompt_token_flops(self, m: ModelConfig, T: int) -> int:
        return self.token_flops(m, T)  # the selective scan does the same work per token

    def state(self, m: ModelConfig, T: int) -> MixerState:
        self.check(m, T)
        _, di, N, _, K = _dims(m)
        return MixerState(conv=di * K // T, recurrent=di * N // T)


    def activation_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """Bytes one layer keeps for backward beyond its input, on one of T ranks (d_inner split;
        x_proj's output and the dt/B/C norms replicated).

        torch-eager (`fused=False`): JambaMambaMixer.slow_forward (modeling_jamba.py) runs the
        selective scan as a Python loop over the S tokens, and autograd keeps every step's state:
        the fp32 state each step multiplies (S - 1 of them, and the initial zeros at p) and its cast
        to p that the read C·state takes (S of them), d_inner·N each; besides, exp(A·dt) and dt·B,
        fp32 and d_inner·N per token, and the tensors around them (in_proj's output, the conv's
        padded output, SiLU(x), the three RMSNorms on dt, B and C, softplus, SiLU(z), y + D·x,
        out_proj's input). Measured: tools/crosscheck/activations_mixers.py.

        fused (`fused=True`): causal-conv1d keeps its input, mamba_ssm's SelectiveScanFn
        (mamba_ssm/ops/selective_scan_interface.py) u, delta, B, C, z, its output and the scan's
        fp32 checkpoints (d_inner·2N per 2048-token chunk), the norms and projections as above.
        """
        self.check(m, T)
        _, di_all, N, R, K = _dims(m)
        di, f, tokens = di_all // T, FP32, B * S
        norms = f * tokens * (R + 2 * N) + 3 * f * tokens + p * tokens * (R + 2 * N)  # fp32 input, rsqrt, x̂
        common = (
            p * tokens * 2 * di  # in_proj's output (x and the gate z are views of it)
            + p * tokens * di  # SiLU(conv(x)): x_proj's and the scan's input
            + norms + p * tokens * (R + N)  # dt_proj's input, C as the read takes it
            + p * tokens * di  # SiLU(z)
            + p * tokens * di  # out_proj's input
        )  # fmt: skip
        if fused:
            scan_chunks = -(-S // SCAN_CHUNK)
            return common + p * tokens * (di + N + di) + f * B * di * 2 * N * scan_chunks  # delta, B, y; checkpoints
        b = common
        b += 2 * f * di * N + (f * di if f != p else 0)  # A = -exp(A_log) (exp, negation); D cast to fp32
        b += p * B * (S + K - 1) * di  # the conv's padded output, SiLU's input
        b += 2 * p * tokens * di  # dt_proj's output (softplus's input) and softplus(dt)
        b += 2 * f * B * di * S * N  # exp(A·dt) and dt·B, fp32
        b += f * tokens * N + f * tokens * di  # B and x in fp32
        if f != p:  # the scan loop's states: S - 1 in fp32, their S casts to p, the zeros at p
            b += B * di * N * ((S - 1) * f + (S + 1) * p)
        else:  # in fp32 the casts are the states themselves: the zeros and S states
            b += B * di * N * (S + 1) * f
        if B > 1:  # out_proj's input: the transposed gated output, a copy when B > 1 (a view when B = 1)
            b += p * tokens * di
        b += f * tokens * di  # y + D·x (fp32)
        return b

    def frozen_parameter_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """The dt, B and C RMSNorms' x̂ at p and exp(A_log) (fp32, d_inner·N), in torch in both profiles;
        torch-eager also x in fp32, which D·x keeps for D's gradient. Measured:
        tools/crosscheck/lora_activations_mixers.py."""
        _, di_all, N, R, _ = _dims(m)
        di, tokens = di_all // T, B * S
        return p * tokens * (R + 2 * N) + FP32 * di * N + (0 if fused else FP32 * tokens * di)

    def backward_transient_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """torch-eager: the backward of slow_forward's loop over the tokens reads exp(A·dt) and dt·B·x
        one token at a time (`discrete_A[:, :, i, :]`, `deltaB_u[:, :, i, :]`), and autograd's
        select_backward writes each token's gradient into a zero tensor of the whole (B, d_inner, S, N)
        shape, then adds it to the accumulated gradient: two accumulated fp32 gradients and two
        select_backward buffers alive together, 4·4·B·d_inner·S·N bytes (derived; measured 4.1-4.2x
        f·B·d_inner·S·N at two shapes, tools/crosscheck/activations_mixers.py). fused: mamba_ssm's
        backward kernel writes the input gradients only (not modeled beyond them)."""
        if fused:
            return 0
        self.check(m, T)
        _, di, N, _, _ = _dims(m)
        return SELECT_BACKWARD_BUFFERS * FP32 * B * (di // T) * S * N


MIXER = Mamba()
