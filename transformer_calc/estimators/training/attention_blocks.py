"""Softmax attention's blocks under training: what adapters and FP8 recipes ask of a layer's attention,
for each block of estimators/attention.py's protocol (STANDARD, MLA), picked by `attention_block(m)`.

- Standard attention (modeling_llama.py LlamaAttention; Korthikanti et al. 2022 sec. 4.1): q_proj, k_proj and
  v_proj read the layer's input (the norm's output, D per token), which the layer keeps for their weight
  gradients only: frozen q/k/v drop it (finetune.activation_delta), an FP8 recipe keeps it in FP8
  (fp8.activation_delta); the QKV GEMMs emit (A + 2·n_kv)·h_d values per token (precision's cast count).
- Multi-head latent attention (modeling_deepseek_v3.py DeepseekV3Attention; DeepSeek-V2 sec. 2.1): q_a_proj
  (or q_proj) and kv_a_proj_with_mqa read the input, replicated on every tensor-parallel rank. tcalc keeps
  that input at p bytes under adapters and FP8 alike (neither drops nor casts it: not measured, the
  adapter cross-checks have no MLA case), and approximates its low-rank projections' FP8 casts by a QKV
  of A·h_d outputs.
- Attention beside a mixer (Falcon-H1, hybrid_layers.py): its Linear modules in a mixer layer
  (`beside_attention_linears`) and what adapters change in that layer's stored input (`adapter_input_delta`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from transformer_calc.estimators.attention import MLA, STANDARD, AttentionBlock, attention_block
from transformer_calc.estimators.mixers.base import INPUT
from transformer_calc.estimators.mla import LinearSpec
from transformer_calc.model.config import ModelConfig


@dataclass(frozen=True)
class AttentionTraining:
    """What the training estimators ask of one attention block beyond estimators/attention.py's protocol."""

    qkv_input_width: Callable[[ModelConfig], int]  # the input values per token kept only for q/k/v's weight gradients
    qkv_out_heads: Callable[[ModelConfig], int]  # heads of h_d the QKV GEMMs emit, for the FP8 cast count


def _model_width(m: ModelConfig) -> int:
    """Standard attention: the layer's input, D per token."""
    return m.d_model


def _none(m: ModelConfig) -> int:
    """MLA: no input value tcalc drops or casts (kept at p)."""
    return 0


def _qkv_heads(m: ModelConfig) -> int:
    """Standard attention: A query heads, n_kv key and n_kv value heads."""
    return m.n_heads + 2 * m.n_kv_heads


def _query_heads(m: ModelConfig) -> int:
    """MLA: A heads of h_d (the low-rank projections approximated as one QKV GEMM)."""
    return m.n_heads


BLOCKS: dict[AttentionBlock, AttentionTraining] = {
    STANDARD: AttentionTraining(qkv_input_width=_model_width, qkv_out_heads=_qkv_heads),
    MLA: AttentionTraining(qkv_input_width=_none, qkv_out_heads=_query_heads),
}


def attention_training(m: ModelConfig) -> AttentionTraining:
    """The model's attention block's training answers (the pick is `attention_block`'s)."""
    return BLOCKS[attention_block(m)]


# Falcon-H1's attention beside the mixer, as adapters see it (the placement itself: hybrid_layers.py)
def beside_attention_linears(m: ModelConfig, T: int) -> list[LinearSpec]:
    """The attention's Linear modules in a mixer layer on one of T ranks (targets q, k, v, o): its block's
    (estimators/attention.py `linears`) with the attention beside the mixer, none without it."""
    if not m.mixer_beside_attention:
        return []
    return attention_block(m).linears(m, T)


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
