"""Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks: Improving Mamba2 with Delta
Rule", arXiv:2412.06464): the linear-attention layers of Qwen3-Next and Qwen3.5.

Source: transformers 5.23 `models/qwen3_next/modeling_qwen3_next.py` (Qwen3NextGatedDeltaNet,
torch_chunk_gated_delta_rule, torch_recurrent_gated_delta_rule, causal_conv1d_fn) and
`models/qwen3_5/modeling_qwen3_5.py` (Qwen3_5GatedDeltaNet: the same weights as four Linear
modules instead of two). Letters (docs/notation.md):

    D d_model   H_k linear_key_heads   H_v linear_value_heads   d_k, d_v their head widths
    K conv_kernel   C = 64, the chunk of the chunked delta rule

    key_dim = H_k·d_k   value_dim = H_v·d_v   conv_dim = 2·key_dim + value_dim

Parameters of one layer:
    in_proj_qkvz + in_proj_ba   D·(2·key_dim + 2·value_dim + 2·H_v)   (q, k, v, the gate z, beta, a)
    conv1d                      conv_dim·K     (depthwise, bias=False)
    dt_bias, A_log              2·H_v
    norm (gated RMSNorm)        d_v            (one weight shared by the heads)
    out_proj                    value_dim·D

Decode state per sequence and layer (transformers' LinearAttentionLayer): the conv state,
conv_dim·K values (the last K inputs of the conv, kept at the activation dtype), and the recurrent
state, H_v·d_k·d_v values (kept in fp32: the delta rule runs in fp32 and returns its state so).

Tensor parallelism (vLLM's Qwen3-Next layout; Megatron-core's GDN): heads split T ways, the
projections column-/row-parallel, the conv's channels and the per-head scalars split, the norm
weight replicated; T must divide H_k (then H_v, a multiple of it).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.model.units import FLOPS_PER_MAC
from transformer_calc.estimators.mixers.base import BOOL, FP32, WEIGHT, MixerFlops, MixerLinear, MixerParams, MixerState, chunks, rmsnorm_params

CHUNK = 64  # torch_chunk_gated_delta_rule(chunk_size=64), FLA's chunk_gated_delta_rule BT = 64
DECODE_STATE_MACS = 3  # per state element per token: read k^T S, write k ⊗ delta, read q^T S


@dataclass(frozen=True)
class _Shape:
    D: int
    Hk: int
    Hv: int
    dk: int
    dv: int
    K: int

    @property
    def key_dim(self) -> int:
        return self.Hk * self.dk

    @property
    def value_dim(self) -> int:
        return self.Hv * self.dv

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim


def _shape(m: ModelConfig) -> _Shape:
    hk, hv, dk, dv, k = m.linear_key_heads, m.linear_value_heads, m.linear_key_head_dim, m.linear_value_head_dim, m.conv_kernel
    assert hk and hv and dk and dv and k, "checks._check_pattern requires the Gated DeltaNet widths"
    return _Shape(m.d_model, hk, hv, dk, dv, k)


class GatedDeltaNet:
    kind = LayerAttention.deltanet
    name = "Gated DeltaNet"
    source = "Yang et al. 2024 (arXiv:2412.06464); transformers modeling_qwen3_next.py Qwen3NextGatedDeltaNet"

    def check(self, m: ModelConfig, T: int) -> None:
        s = _shape(m)
        if s.Hk % T:
            raise ValueError(
                f"linear_key_heads ({s.Hk}) must be divisible by T ({T}) to split the Gated DeltaNet heads; "
                f"use a divisor of {s.Hk}"
            )

    def params(self, m: ModelConfig) -> MixerParams:
        s = _shape(m)
        in_proj = s.D * (2 * s.key_dim + 2 * s.value_dim + 2 * s.Hv)  # in_proj_qkvz + in_proj_ba
        out_proj = s.value_dim * s.D
        return MixerParams(
            projections=in_proj + out_proj,
            conv=s.conv_dim * s.K,  # nn.Conv1d(conv_dim, conv_dim, K, groups=conv_dim, bias=False)
            other=2 * s.Hv + rmsnorm_params(s.dv),  # dt_bias, A_log; Qwen3NextRMSNormGated(d_v)
        )

    def shard_params(self, m: ModelConfig, T: int) -> int:
        self.check(m, T)
        s = _shape(m)
        p = self.params(m)
        return (p.projections + p.conv + 2 * s.Hv) // T + rmsnorm_params(s.dv)  # every part splits by heads

    def matmul_params(self, m: ModelConfig, T: int) -> int:
        return self.params(m).projections // T

    def linears(self, m: ModelConfig, T: int) -> tuple[MixerLinear, ...]:
        """Qwen3NextGatedDeltaNet: in_proj_qkvz (D -> 2·key_dim + 2·value_dim) and in_proj_ba
        (D -> 2·H_v); Qwen3_5GatedDeltaNet (`deltanet_split_in_proj`): in_proj_qkv (D -> conv_dim),
        in_proj_z (D -> value_dim), in_proj_b and in_proj_a (D -> H_v each); out_proj (value_dim -> D).
        Column-parallel inputs, row-parallel out_proj (heads split T ways)."""
        self.check(m, T)
        s = _shape(m)
        D, kd, vd, Hv = s.D, s.key_dim // T, s.value_dim // T, s.Hv // T
        ins: tuple[MixerLinear, ...]
        if m.deltanet_split_in_proj:
            ins = (MixerLinear("in_proj_qkv", D, 2 * kd + vd), MixerLinear("in_proj_z", D, vd),
                   MixerLinear("in_proj_b", D, Hv, per_head=True), MixerLinear("in_proj_a", D, Hv, per_head=True))
        else:
            ins = (MixerLinear("in_proj_qkvz", D, 2 * kd + 2 * vd), MixerLinear("in_proj_ba", D, 2 * Hv, per_head=True))
        return ins + (MixerLinear("out_proj", vd, D, "row", WEIGHT),)

    def forward_flops(self, m: ModelConfig, B: int, S: int) -> MixerFlops:
        """One layer's forward, as torch_chunk_gated_delta_rule computes it (the path transformers
        takes for a prompt and in training).

        Per sequence and value head (q and k repeated to H_v heads), over the sequence padded to
        S_p = ceil(S/C)·C: k_beta·k^T and q·k^T inside each chunk, 2·2·S_p·C·d_k; per chunk the
        state reads k_cumdecay·S and q·S and the write k^T·v_new, 3·2·C·d_k·d_v, and the
        intra-chunk output attn·v_new, 2·C²·d_v. Hidden from FlopCounterMode: the two unit-lower-
        triangular solves of the UT transform per chunk, C×C against d_v and d_k columns,
        C·(C-1)/2 multiply-adds per column each (forward substitution): C·(C-1)·(d_v + d_k) FLOPs.
        The conv: F.conv1d with padding K-1 computes S + K - 1 outputs (the causal part is the
        first S), K multiply-adds each per channel.
        """
        s = _shape(m)
        tokens = B * S
        chunks = -(-S // CHUNK)
        padded = chunks * CHUNK
        heads = B * s.Hv
        core = heads * FLOPS_PER_MAC * padded * (2 * CHUNK * s.dk + 3 * s.dk * s.dv + CHUNK * s.dv)
        hidden = heads * chunks * CHUNK * (CHUNK - 1) * (s.dv + s.dk)
        return MixerFlops(
            projections=FLOPS_PER_MAC * tokens * self.params(m).projections,
            conv=FLOPS_PER_MAC * B * (S + s.K - 1) * s.conv_dim * s.K,
            core=core,
            hidden=hidden,
        )

    def token_flops(self, m: ModelConfig, T: int) -> int:
        """One decode token (torch_recurrent_gated_delta_rule, causal_conv1d_update): the conv's
        K taps per channel and three multiply-adds per state element (read k^T·S, write k ⊗ δ,
        read q^T·S), on the rank's H_v/T heads and conv_dim/T channels."""
        self.check(m, T)
        s = _shape(m)
        conv = FLOPS_PER_MAC * s.conv_dim * s.K
        state = FLOPS_PER_MAC * DECODE_STATE_MACS * s.Hv * s.dk * s.dv
        return (conv + state) // T

    def prompt_token_flops(self, m: ModelConfig, T: int) -> int:
        """Per prompt token on one rank, the chunked form of `forward_flops` without the last chunk's
        padding: the conv's K taps per channel, 2·(2·C·d_k + 3·d_k·d_v + C·d_v) matmul FLOPs and
        (C - 1)·(d_k + d_v) for the triangular solves per value head (FLA's chunk kernels compute
        whole chunks of C = 64 tokens)."""
        self.check(m, T)
        s = _shape(m)
        conv = FLOPS_PER_MAC * s.conv_dim * s.K
        per_head = FLOPS_PER_MAC * (2 * CHUNK * s.dk + 3 * s.dk * s.dv + CHUNK * s.dv) + (CHUNK - 1) * (s.dk + s.dv)
        return (conv + s.Hv * per_head) // T

    def state(self, m: ModelConfig, T: int) -> MixerState:
        self.check(m, T)
        s = _shape(m)
        return MixerState(conv=s.conv_dim * s.K // T, recurrent=s.Hv * s.dk * s.dv // T)

    def activation_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """Bytes one layer keeps for backward beyond its input, on one of T ranks (heads split).

        torch-eager (`fused=False`): what autograd saves running Qwen3NextGatedDeltaNet.forward with
        causal_conv1d_fn's torch fallback and torch_chunk_gated_delta_rule (modeling_qwen3_next.py),
        tensor by tensor; q and k repeated to H_v heads and everything from the l2norm on in fp32,
        over the padded length S_p = n_c·C. Measured: tools/crosscheck/activations_mixers.py.

        fused (`fused=True`): fla's ChunkGatedDeltaRuleFunction (fla/ops/gated_delta_rule/chunk.py)
        saves q, k (with their fp32 l2norm rstd), v, g (fp32), beta and the solved C-wide matrix A
        (at the input dtype); causal-conv1d's CausalConv1dFn its input; fla's FusedRMSNormGated
        (fla/modules/fused_norm_gate.py) x, the gate z and an fp32 rstd per head; out_proj its
        input. The gate g = -exp(A_log)·softplus(a + dt_bias) is computed in torch (fp32) as above.
        """
        self.check(m, T)
        s = _shape(m)
        f, tokens = FP32, B * S
        Hk, Hv, vd, conv = s.Hk // T, s.Hv // T, s.value_dim // T, s.conv_dim // T
        gates = p * tokens * Hv + f * tokens * 2 * Hv + 2 * f * Hv  # sigmoid(b); softplus in/out; exp(A_log), -exp
        if fused:
            return (
                p * tokens * conv  # the conv's input (q, k, v concatenated)
                + p * tokens * conv  # its output: q, k, v as the chunk kernel keeps them
                + f * tokens * 2 * Hk  # the l2norm rstd of q and k
                + gates + f * tokens * Hv  # ... and g, fp32
                + p * tokens * Hv * CHUNK  # A, C wide per token and head
                + p * tokens * 2 * vd + f * tokens * Hv  # gated norm: x, z, rstd per head
                + p * tokens * vd  # out_proj input
            )  # fmt: skip
        n_c, Sp = chunks(S, CHUNK)
        C, dk, dv = CHUNK, s.dk, s.dv
        padded = f * B * Hv * Sp  # one fp32 value per padded token and value head
        b = p * tokens * conv  # F.conv1d's input: cat(q, k, v) transposed
        b += p * B * (S + s.K - 1) * conv  # its output, SiLU's input (padding K - 1 on both sides)
        b += gates
        if p == f and Hk == Hv:  # no repeat, no cast: q and k are views of the SiLU output (conv_dim wide)
            b += f * tokens * conv + 2 * f * tokens * Hv  # ... which l2norm keeps, and the two rsqrt
        else:
            b += 2 * f * tokens * Hv * (dk + 1)  # l2norm of q and k: the fp32 input and its rsqrt
        b += padded * (1 + dv + dk)  # padded beta, v and k (kept by v·beta, k·beta, k^T)
        b += BOOL * C * C  # the strictly upper mask (masked_fill)
        # exp(pairwise decay), k_beta·k^T, q·k^T, the UT system (solve_triangular), the masked intra-chunk attention
        b += 5 * padded * C
        # k_beta, the scaled q, k_cumdecay, the decayed k, the decayed q (read only from the 2nd chunk on)
        b += padded * dk * (4 + (1 if n_c > 1 else 0))
        b += 2 * padded * dv  # new_values (solve_triangular's output) and v_new of every chunk
        b += 3 * padded  # exp(cum_decay) twice, exp(last - cum_decay)
        b += f * B * Hv * n_c * (1 + dk * dv)  # per chunk: its decay and the state it starts from
        # Qwen3NextRMSNormGated: fp32 input, rsqrt, x̂ at p, gate z and SiLU(z) in fp32, weight·x̂
        b += f * tokens * vd + f * tokens * Hv + p * tokens * vd + 2 * f * tokens * vd + p * tokens * vd
        b += p * tokens * vd  # out_proj input
        return b

    def frozen_parameter_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """The gate g = -exp(A_log)·softplus(a + dt_bias), in torch in both profiles: softplus's fp32
        output (kept by the product for A_log's gradient) and exp(A_log); torch-eager also the gated
        norm's x̂ at p (weight·x̂, for the weight's gradient). Measured:
        tools/crosscheck/lora_activations_mixers.py."""
        s = _shape(m)
        Hv, vd, tokens = s.Hv // T, s.value_dim // T, B * S
        return FP32 * tokens * Hv + FP32 * Hv + (0 if fused else p * tokens * vd)

    def backward_transient_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """No transient beyond the layer's own gradients: measured whole-step peaks of Qwen3.5 models within 5 %
        (tools/crosscheck/activations_mixers.py)."""
        return 0


MIXER = GatedDeltaNet()
