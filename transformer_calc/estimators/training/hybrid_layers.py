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
reads its own copy of that input scaled by ssm_in_multiplier. `mixer_layer_input` gives what that attention
adds to a mixer layer's stored input (the base value for a model whose mixer layers have no attention beside
them); what it adds to the adapters' Linear modules and stored input is attention_blocks.py's
(`beside_attention_linears`, `adapter_input_delta`: finetune.py reads them there, so it does not import this
module, whose FP8 casts read finetune's matrices).
"""

from __future__ import annotations

from collections.abc import Callable

from transformer_calc.model.config import ATTENTION_KINDS, ModelConfig, Parallelism, Training


def attention_layers(m: ModelConfig) -> int:
    """Layers that run softmax attention: the pattern's attention layers, and with a mixer beside attention
    (Falcon-H1) its mixer layers too; every layer of a model without mixers."""
    mixer_layers = sum(m.n_attention_layers(k) for k in m.mixer_kinds)
    beside = mixer_layers if m.mixer_beside_attention else 0
    return sum(m.n_attention_layers(k) for k in ATTENTION_KINDS) + beside


def cast_bytes_per_layer(m: ModelConfig, tr: Training, par: Parallelism) -> tuple[float, float]:
    """(activation bytes per token, weight bytes per step) an FP8/FP4 recipe's casts move in one layer on one GPU,
    averaged over the L layers (precision.py): a hybrid's layer by layer (attention, the mixers' linears, each
    MLP by its kind; Megatron-core's MambaMixer runs in_proj/out_proj as Transformer Engine linears), a model
    without mixers block by block (a MoE block's and a dense block's)."""
    from transformer_calc.estimators.training import precision
    from transformer_calc.estimators.training.fp8 import block_gemms

    T, ep, etp = par.tensor, par.expert, par.expert_tensor
    if m.is_hybrid or m.one_mixer_per_layer:
        from transformer_calc.estimators.training.finetune import layer_counts, layer_matrices, quantized

        q_act = precision.layer_quantize_bytes(m, tr, par) / m.n_layers
        elems = quantized(layer_matrices(m, layer_counts(m), T, ep, etp))[0]
        return q_act, precision.weight_quantize_bytes(elems, tr) / m.n_layers
    n_moe = m.n_moe_layers()
    blocks = [(moe, count) for moe, count in ((True, n_moe), (False, m.n_layers - n_moe)) if count]
    q_act = sum(count * precision.activation_quantize_bytes(m, tr, par, moe) for moe, count in blocks) / m.n_layers
    q_w = sum(count * precision.weight_quantize_bytes(block_gemms(m, moe, T, ep, etp)[0], tr)
              for moe, count in blocks) / m.n_layers
    return q_act, q_w

def mixer_layer_input(m: ModelConfig, attention_part: Callable[[], int], layer_input: int) -> int:
    """A mixer layer's stored bytes beside what the mixer keeps: the layer's input (`layer_input`, the norm's
    output), or with the attention beside the mixer the attention's part (`attention_part()`), which
    counts that shared input once."""
    if m.mixer_beside_attention:
        return attention_part()
    return layer_input
