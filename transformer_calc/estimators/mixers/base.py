"""The interface every sequence-mixer kind implements (docs/adding-a-block.md).

A layer is a sequence mixer plus a channel mixer (the MLP or MoE of `estimators/params.py`). Softmax
attention (full, sliding, chunked, MLA) is the estimators' built-in mixer; every other kind - one
whose decode state is constant in the context instead of a KV cache that grows with it - is one
module of this package holding one `Mixer`, declared under its `LayerAttention` kind in
`model/mixer_blocks.py`, from which `MIXERS` (`__init__.py`) is built. The estimators sum over the model's layer pattern: for each kind, its layer
count (`ModelConfig.n_attention_layers(kind)`) times what its module returns for one layer.

Conventions (those of `estimators/flops.py` and `estimators/inference/roofline.py`):
- Parameters are counted as `sum(p.numel() for p in module.parameters())` counts them.
- FLOPs: 2 per multiply-add; one layer's forward over B sequences of S tokens; backward = 2 x
  forward (the estimators apply it). Element-wise work (gates, decays, activations, norms) is not
  counted; convolutions and matmuls are.
- Decode state: elements per sequence per layer on one of T tensor-parallel ranks, split into the
  conv state (held at the activation dtype) and the recurrent state (held at the state dtype, or
  at the activation dtype where the reference code keeps it so).
- Activations (training): bytes one layer keeps for backward over B sequences of S tokens on one
  of T ranks, beyond the layer's input (the block norm's output, which the estimators count as
  they do attention's). Two conventions, switched by the activation profile
  (docs/formulas.md §2.10): `fused=False` (the torch-eager profile) is what transformers' torch
  fallback saves, tensor by tensor, measured with saved_tensors_hooks
  (tools/crosscheck/activations_mixers.py); `fused=True` (the default profile) is what the fused
  kernels (fla, mamba_ssm, causal-conv1d) keep, read from their save_for_backward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from transformer_calc.model.config import LayerAttention, ModelConfig


@dataclass(frozen=True)
class MixerParams:
    """Parameters of one mixer layer, by part."""

    projections: int  # the matmul weights (input and output projections)
    conv: int  # the causal depthwise conv (weights + bias)
    other: int  # per-head scalars (A_log, dt_bias, D) and the mixer's own norms

    @property
    def total(self) -> int:
        return self.projections + self.conv + self.other


@dataclass(frozen=True)
class MixerFlops:
    """Forward FLOPs of one mixer layer over B sequences of S tokens.

    `core` is what torch's FlopCounterMode counts of the reference (torch) implementation's mixing
    (its matmuls); `hidden` are FLOPs of the same algorithm the counter does not see (e.g. the
    triangular solves of the chunked delta rule: `torch.linalg.solve_triangular` has no FLOP
    formula), counted here from their derivation."""

    projections: int  # 2·tokens·(projection weights)
    conv: int  # the depthwise conv as F.conv1d computes it
    core: int  # the mixing matmuls FlopCounterMode counts
    hidden: int  # the mixing work FlopCounterMode does not count

    @property
    def total(self) -> int:
        return self.projections + self.conv + self.core + self.hidden

    @property
    def counted(self) -> int:
        """What FlopCounterMode sees (tools/crosscheck/flops.py compares this)."""
        return self.projections + self.conv + self.core


@dataclass(frozen=True)
class MixerState:
    """Decode state of one sequence in one layer on one rank, in elements (constant in S)."""

    conv: int  # the last K_conv inputs of the depthwise conv
    recurrent: int  # the recurrent (delta-rule / SSM) state
    recurrent_at_activation_dtype: bool = False  # held at the activation dtype, not the state dtype (lightning)


# What a mixer Linear reads, as `activation_bytes` keeps it (adapters drop what a frozen module alone
# needed: a Linear's input is saved only for its weight gradient):
INPUT = "input"  # the layer's input (the block norm's output, counted beside `activation_bytes`)
WEIGHT = "weight"  # a tensor `activation_bytes` counts only for this module's weight gradient
WEIGHT_EAGER = "weight-eager"  # ... in the torch-eager profile only (the fused kernel keeps none: recomputed)
KEPT = "kept"  # a tensor the layer keeps for other operations too (kept, frozen or not)
KEPT_VIEW = "kept-view"  # ... read through a transposed view: an adapter's lora_A keeps its own contiguous copy


@dataclass(frozen=True)
class MixerLinear:
    """One nn.Linear module of a mixer layer, as one of T tensor-parallel ranks holds its weight
    (`d_in` x `d_out` as sharded): what PEFT's `all-linear` and a `target_modules` name reach, what
    bitsandbytes and the weight quantizers replace. `split`: 'col' (the output dimension cut T ways),
    'row' (the input dimension), 'rep' (every rank holds it whole). Its bias is not part of it."""

    name: str  # the module's name in the transformers modeling file (in_proj, out_proj, ...)
    d_in: int
    d_out: int
    split: str = "col"
    reads: str = INPUT  # what its input is, for the stored activations under adapters (above)
    per_head: bool = False  # one output per head (a gate's logits): left unquantized by the weight formats
    bypassed: bool = False  # the forward multiplies by its weight directly: an adapter on it never runs


class Mixer(Protocol):
    """One sequence-mixer kind: everything the estimators need from it (one layer each)."""

    kind: LayerAttention
    name: str  # a short display name ("Gated DeltaNet")
    source: str  # the modeling file / paper its formulas follow

    def check(self, m: ModelConfig, T: int) -> None:
        """Raise ValueError (field, value, fix) when T ranks cannot split the layer."""

    def params(self, m: ModelConfig) -> MixerParams:
        """Parameters of one layer."""

    def shard_params(self, m: ModelConfig, T: int) -> int:
        """Parameters one of T tensor-parallel ranks holds (T = 1: params(m).total)."""

    def matmul_params(self, m: ModelConfig, T: int) -> int:
        """Matmul weights one token multiplies on one of T ranks (the projections)."""

    def linears(self, m: ModelConfig, T: int) -> tuple[MixerLinear, ...]:
        """The layer's nn.Linear modules on one of T ranks, in the modeling file's order (their
        weights sum to `matmul_params(m, T)`; the conv is an nn.Conv1d and not one of them)."""

    def forward_flops(self, m: ModelConfig, B: int, S: int) -> MixerFlops:
        """Forward FLOPs of one layer over B sequences of S tokens (one GPU, no parallelism)."""

    def token_flops(self, m: ModelConfig, T: int) -> int:
        """Mixing FLOPs (conv + state update and read) of one decode token on one rank, beyond
        its projections (constant in the context)."""

    def prompt_token_flops(self, m: ModelConfig, T: int) -> int:
        """Mixing FLOPs per token when many tokens are mixed at once (a prompt: the chunked
        form), on one rank, beyond the projections; linear in the tokens (no padding)."""

    def state(self, m: ModelConfig, T: int) -> MixerState:
        """The decode state of one sequence in one layer on one of T ranks."""

    def activation_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """Bytes one layer keeps for backward over B sequences of S tokens on one of T ranks, beyond
        its input; p bytes per activation (see the module docstring)."""

    def frozen_parameter_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """Bytes of `activation_bytes` kept only for the gradients of the layer's own parameters that
        are not Linear weights (conv weight, A_log, dt_bias, D, norm weights), which a fine-tuning run
        that freezes them (PEFT freezes every base parameter) does not keep: autograd saves a tensor
        only for the gradients it will compute; a fused kernel's autograd Function saves its tensors
        regardless, so only what the layer computes in torch around it counts there."""

    def backward_transient_bytes(self, m: ModelConfig, B: int, S: int, p: int, T: int, fused: bool) -> int:
        """Bytes the layer's backward allocates beyond its stored activations and the gradients of its
        matmuls, at its largest (the step timeline's backward phases take the largest of attention's
        and the mixers'). 0 where the backward adds nothing that grows beyond a layer's activations."""


FP32 = 4  # bytes of the fp32 tensors the reference code computes in (scans, gates, norms)
BOOL = 1  # a torch.bool mask element


def chunks(S: int, chunk: int) -> tuple[int, int]:
    """(chunks, padded length) of a sequence of S tokens cut into chunks of `chunk` (the last padded)."""
    n = -(-S // chunk)
    return n, n * chunk


def rmsnorm_params(width: int) -> int:
    """A gated RMSNorm's weight (modeling_qwen3_next.py Qwen3NextRMSNormGated: weight only)."""
    return width
