"""Hybrid layers in training: sequence mixers placed among softmax-attention layers, beside them or as a layer
of their own. Training memory, the timeline and the step time call these functions for every model; for a
model without mixers they give the attention-only answer (every layer an attention block).

The placements (docs/formulas.md §2.10), as transformers 5.23 builds them:
- among attention layers, one sequence mixer per layer by `attention_pattern` (models/qwen3_next/
  modeling_qwen3_next.py `layer_types`: linear_attention / full_attention; Jamba, Bamba, LFM2 likewise);
- beside attention, both on the same input (models/falcon_h1/modeling_falcon_h1.py FalconH1DecoderLayer:
  `mamba` and `self_attn`; `ModelConfig.mixer_beside_attention`);
- one mixer per layer, a layer being a mixer, an attention or an MLP/MoE block alone (models/nemotron_h/
  modeling_nemotron_h.py `hybrid_override_pattern`: M, *, -, E; Megatron-core megatron/core/ssm/mamba_block.py
  MambaStack; `ModelConfig.one_mixer_per_layer`).

Beside attention (Falcon-H1's parallel hybrid, Falcon-H1 tech report): one norm's output feeds both the
attention (self_attn) and the Mamba-2 mixer (FalconH1Mixer), whose outputs are summed; the mixer's in_proj
reads its own copy of that input scaled by ssm_in_multiplier. `beside_attention_linears`, `mixer_layer_input`
and `adapter_input_delta` give what that attention adds to a mixer layer's Linear modules and stored input
(the base value for a model whose mixer layers have no attention beside them).
"""

from __future__ import annotations

from collections.abc import Callable

from transformer_calc.estimators.attention import attention_block
from transformer_calc.estimators.mixers.base import INPUT
from transformer_calc.estimators.mla import LinearSpec
from transformer_calc.model.config import ATTENTION_KINDS, ModelConfig


def attention_layers(m: ModelConfig) -> int:
    """Layers that run softmax attention: the pattern's attention layers, and with a mixer beside attention
    (Falcon-H1) its mixer layers too; every layer of a model without mixers."""
    mixer_layers = sum(m.n_attention_layers(k) for k in m.mixer_kinds)
    beside = mixer_layers if m.mixer_beside_attention else 0
    return sum(m.n_attention_layers(k) for k in ATTENTION_KINDS) + beside


def cast_bytes_per_layer(m: ModelConfig, layer_by_layer: Callable[[], tuple[float, float]],
                         block_by_block: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    """(activation bytes per token, weight bytes per step) an FP8/FP4 recipe's casts move in one layer on one GPU,
    averaged over the L layers: a hybrid's layer by layer (attention, the mixers' linears, each MLP by its kind;
    Megatron-core's MambaMixer runs in_proj/out_proj as Transformer Engine linears), a model without mixers block
    by block (a MoE block's and a dense block's). The two prices are precision.py's (`layer_cast_bytes`,
    `block_cast_bytes`), passed in: precision.py reads finetune.py, which imports this module."""
    if m.is_hybrid or m.one_mixer_per_layer:
        return layer_by_layer()
    return block_by_block()


def beside_attention_linears(m: ModelConfig, T: int) -> list[LinearSpec]:
    """The attention's Linear modules in a mixer layer on one of T ranks (targets q, k, v, o): its block's
    (estimators/attention.py `linears`) with the attention beside the mixer, none without it."""
    if not m.mixer_beside_attention:
        return []
    return attention_block(m).linears(m, T)


def mixer_layer_input(m: ModelConfig, attention_part: Callable[[], int], layer_input: int) -> int:
    """A mixer layer's stored bytes beside what the mixer keeps: the layer's input (`layer_input`, the norm's
    output), or with the attention beside the mixer the attention's part (`attention_part()`), which
    counts that shared input once."""
    if m.mixer_beside_attention:
        return attention_part()
    return layer_input


def adapter_input_delta(m: ModelConfig, reads: dict[str, str], chosen: set[str], *, separate: bool, fused: bool,
                        p: int, B: int, S: int, S_rep: int) -> int:
    """The change of a mixer layer's stored input under adapters (finetune.mixer_activation_delta; p bytes per
    element). Alone, the layer's input (B·S_rep·D) goes unless an adapted module (`chosen`) reads that very
    tensor (`reads` INPUT, shared inputs: pure bf16/fp32). Beside attention, the attention part counts (and,
    frozen, drops) the shared input; in_proj's scaled copy, which the torch-eager profile counts
    (`fused` False), is kept for in_proj's weight gradient alone and goes with in_proj frozen (or reading its
    own copy in mixed precision)."""
    D = m.d_model
    if m.mixer_beside_attention:
        if not fused and any(reads[n] == INPUT and (n not in chosen or separate) for n in reads):
            return -p * B * S * D
        return 0
    if separate or not any(reads[n] == INPUT for n in chosen):
        return -p * B * S_rep * D  # no adapted module reads the layer's input itself
    return 0
