"""Gated short convolution (LFM2's "conv" operator; Liquid AI 2025): the convolution layers of LFM2.

Source: transformers 5.23 `models/lfm2/modeling_lfm2.py` (Lfm2ShortConv, causal_conv1d_fn,
causal_conv1d_update). Letters: D d_model, K conv_kernel (`conv_L_cache`).

    B, C, x = in_proj(h) (D -> 3·D);  y = out_proj(C ⊙ conv(B ⊙ x))   (a depthwise causal conv of K taps)

Parameters of one layer: in_proj 3·D·D, conv D·K, out_proj D·D, and with short_conv_bias their
biases 3·D + D + D. Decode state per sequence and layer: the conv state, D·K values at the
activation dtype (transformers' LinearAttentionLayer keeps K inputs); no recurrent state.
FLOPs: the projections, and the conv as F.conv1d with padding K - 1 computes it (S + K - 1
outputs of K multiply-adds per channel); the gates are element-wise.

Tensor parallelism: channels split T ways (in_proj column-parallel, the conv's channels, out_proj
row-parallel with its bias replicated); T must divide D.
"""

from __future__ import annotations

from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.model.units import FLOPS_PER_MAC
from transformer_calc.estimators.mixers.base import WEIGHT, MixerFlops, MixerLinear, MixerParams, MixerState

IN_WIDTHS = 3  # B, C, x


class ShortConv:
    kind = LayerAttention.conv
    name = "short convolution"
    source = "transformers modeling_lfm2.py Lfm2ShortConv"

    def _K(self, m: ModelConfig) -> int:
        assert m.conv_kernel, "checks._check_pattern requires conv_kernel"
        return m.conv_kernel

    def check(self, m: ModelConfig, T: int) -> None:
        if m.d_model % T:
            raise ValueError(f"d_model ({m.d_model}) must be divisible by T ({T}) to split the short-conv channels; "
                             f"use a divisor of {m.d_model}")

    def params(self, m: ModelConfig) -> MixerParams:
        D, K, b = m.d_model, self._K(m), m.short_conv_bias
        return MixerParams(
            projections=IN_WIDTHS * D * D + D * D + ((IN_WIDTHS * D + D) if b else 0),
            conv=D * K + (D if b else 0),
            other=0,
        )

    def shard_params(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        D, K, b = m.d_model, self._K(m), m.short_conv_bias
        c = D // T
        in_proj = IN_WIDTHS * c * D + (IN_WIDTHS * c if b else 0)
        out_proj = c * D + (D if b else 0)  # row-parallel; its bias replicated
        return in_proj + c * K + (c if b else 0) + out_proj

    def matmul_params(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        return (IN_WIDTHS + 1) * (m.d_model // T) * m.d_model

    def linears(self, m: ModelConfig, T: int) -> tuple[MixerLinear, ...]:
        """Lfm2ShortConv: in_proj (D -> 3·D: B, C, x) and out_proj (D -> D)."""
        self.check(m, T)
        D = m.d_model
        return (MixerLinear("in_proj", D, IN_WIDTHS * (D // T)), MixerLinear("out_proj", D // T, D, "row", WEIGHT))

    def forward_flops(self, m: ModelConfig, B: int, S: int) -> MixerFlops:
        D, K = m.d_model, self._K(m)
        return MixerFlops(
            projections=FLOPS_PER_MAC * B * S * (IN_WIDTHS + 1) * D * D,
            conv=FLOPS_PER_MAC * B * (S + K - 1) * D * K,
            core=0,
            hidden=0,
        )

    def token_flops(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        return FLOPS_PER_MAC * (m.d_model // T) * self._K(m)

    def prompt_token_flops(self, m: ModelConfig, T: int) -> int:
        return self.token_flops(m, T)

    def state(self, m: ModelConfig, T: int) -> MixerState:
        self.check(m, T)
        return MixerState(conv=(m.d_model // T) * self._K(m), recurrent=0)

    def activation_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """Bytes one layer keeps for backward beyond its input, on one of T ranks (channels split).

        Lfm2ShortConv.slow_forward (modeling_lfm2.py) keeps in_proj's output (B, C and x are views
        of it: 3·D), B⊙x (the conv's input, D), the conv's output (C⊙ keeps it: F.conv1d with
        padding K - 1 computes S + K - 1 positions, torch-eager; causal-conv1d's kernel S, fused)
        and out_proj's input (D). Measured: tools/crosscheck/activations_mixers.py."""
        self.check(m, T)
        c, K = m.d_model // T, self._K(m)
        conv_out = B * S * c if fused else B * (S + K - 1) * c
        return p * (B * S * (IN_WIDTHS * c + c + c) + conv_out)

    def frozen_parameter_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """Nothing: the conv keeps its input for the input's gradient as well (measured:
        tools/crosscheck/lora_activations_mixers.py)."""
        del m, B, S, p, T, fused
        return 0

    def backward_transient_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """No transient beyond the layer's own gradients: measured whole-step peaks of LFM2 models within 5 %
        (tools/crosscheck/activations_mixers.py)."""
        return 0


MIXER = ShortConv()
