"""Attention beside a sequence mixer in one layer (`mixer_beside_attention`, Falcon-H1's parallel hybrid)
under training: what the layer's attention adds to a mixer layer's Linear modules and stored input.

The block (transformers modeling_falcon_h1.py FalconH1DecoderLayer; Falcon-H1 tech report, "parallel
hybrid"): one norm's output feeds both the attention (self_attn) and the Mamba-2 mixer (FalconH1Mixer),
whose outputs are summed; the mixer's in_proj reads its own copy of that input scaled by
ssm_in_multiplier. Each function returns the base value (no modules, the layer's own input) for a model
whose mixer layers have no attention beside them, so the training estimators call it unconditionally.
"""
from __future__ import annotations

from collections.abc import Callable

from transformer_calc.estimators.attention import attention_block
from transformer_calc.estimators.mla import LinearSpec
from transformer_calc.estimators.mixers.base import INPUT
from transformer_calc.model.config import ModelConfig


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
