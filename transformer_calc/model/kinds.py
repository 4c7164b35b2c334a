"""The kinds a ModelConfig names: MLP, positional encoding, norm, a layer's sequence mixer
(`LayerAttention`, also the `attention_pattern` entry) and the QK-norm scope, with the defaults that
follow from a kind.
"""

from __future__ import annotations

import functools
from enum import Enum


class MLPKind(str, Enum):
    """MLP non-linearity; the gated kinds (GLU variants) have three matrices (gate, up, down)."""

    gelu = "gelu"
    relu = "relu"
    swiglu = "swiglu"
    geglu = "geglu"
    relu2 = "relu2"  # squared ReLU, plain (up, down): So et al. 2021 (Primer); Arcee AFM (hidden_act relu2)
    relu2_glu = "relu2_glu"  # squared ReLU gating the up projection (gate, up, down): BitNet b1.58 (hidden_act relu2)
    xielu = "xielu"  # xIELU, plain (up, down), two learned scalars per MLP: Huang et al. 2025; Apertus


@functools.lru_cache(maxsize=256)
def sequence_mixer_kinds(pattern: tuple[LayerAttention, ...]) -> tuple[LayerAttention, ...]:
    """ModelConfig.mixer_kinds of an attention pattern (cached: the planner asks it ~10^5 times)."""
    return tuple(k for k in LayerAttention if k not in ATTENTION_KINDS and k is not LayerAttention.none and k in pattern)


class Positional(str, Enum):
    """Positional encoding; only `learned` carries parameters (a K x D table)."""

    learned = "learned"
    rotary = "rotary"
    alibi = "alibi"
    sinusoidal = "sinusoidal"
    none = "none"


class NormKind(str, Enum):
    layernorm = "layernorm"
    rmsnorm = "rmsnorm"


class LayerAttention(str, Enum):
    """A layer's sequence mixer (HF `layer_types`): softmax attention that sees every earlier token,
    a window or a chunk of them (docs/formulas.md "Sliding window"), or a mixer with a constant
    state instead of a KV cache (transformer_calc/estimators/mixers/, one module per kind, declared
    in model/mixer_blocks.py; docs/adding-a-block.md)."""

    full = "full"  # every earlier token (causal)
    sliding = "sliding"  # the last `sliding_window` tokens (Mistral, Gemma 2/3, gpt-oss)
    chunked = "chunked"  # tokens of the same `attention_chunk_size` block (Llama 4 local layers)
    deltanet = "deltanet"  # Gated DeltaNet (Yang et al. 2024; Qwen3-Next, Qwen3.5): conv + delta-rule state
    mamba2 = "mamba2"  # Mamba-2 (Dao & Gu 2024; Bamba, Granite-4.0-H): conv + SSM state
    conv = "conv"  # gated short convolution (LFM2): conv state only
    mamba = "mamba"  # Mamba(-1) selective scan (Gu & Dao 2023; Jamba): conv + SSM state
    lightning = "lightning"  # lightning attention (MiniMax-01): a running K^T·V per head
    kda = "kda"  # Kimi Delta Attention (Kimi Linear): Gated DeltaNet with a per-channel decay
    olmo_gdn = "olmo_gdn"  # OLMo Hybrid's Gated DeltaNet: separate q/k/v/a/b/g projections, no q/k repeat
    none = "none"  # no sequence mixer: with one_mixer_per_layer, the layer is its MLP or MoE alone (Nemotron-H)


# The kinds that are softmax attention (Q, K, V, O and a KV cache); the others are `mixers` kinds.
ATTENTION_KINDS = frozenset({LayerAttention.full, LayerAttention.sliding, LayerAttention.chunked})


class AttentionBlockKind(str, Enum):
    """A model's softmax-attention block: which implementation of estimators/attention.py's protocol
    (`AttentionBlock`) prices its layers' attention (`ModelConfig.attention_block_kind`)."""

    standard = "standard"  # q/k/v/o projections, K and V cached per head (MHA, GQA, MQA; modeling_llama.py)
    mla = "mla"  # multi-head latent attention (DeepSeek-V2/V3, modeling_deepseek_v3.py): low-rank latents cached


class ModelStructure(str, Enum):
    """How the estimators price a model's layers as a whole (`ModelConfig.structure`): the one key of their
    whole-model tables (params.count_params, flops.count_flops)."""

    layers = "layers"  # a stack of layer kinds (attention kinds, mixers; MoE or dense MLP), each priced and summed
    deepseek_v4 = "deepseek_v4"  # DeepSeek-V4's blocks (modeling_deepseek_v4.py), priced whole: estimators/deepseek_v4.py


class QKNormScope(str, Enum):
    """Width of the q/k norms when `qk_norm` is on."""

    head = "head"  # one norm of head_dim, shared by all heads (Qwen3, Gemma 3, Phi)
    full = "full"  # q over n_heads*head_dim, k over n_kv_heads*head_dim (OLMo-2, Cohere)


GATED_MLPS = frozenset({MLPKind.swiglu, MLPKind.geglu, MLPKind.relu2_glu})


# learned scalars of one MLP's activation (modeling_apertus.py XIELUActivation: alpha_p, alpha_n)
ACTIVATION_PARAMS = {MLPKind.xielu: 2}


DEFAULT_EXPANSION = 4  # E: the seed's (and GPT-2/3's) MLP width d_ff = 4 * D


DEFAULT_NORMS_PER_LAYER = 2  # pre-attention and pre-MLP norm (seed, "Layer Norm")


class LayerStructureKind(str, Enum):
    """How training prices a model's layers (`ModelConfig.layer_structure_kind`; estimators/training/
    layer_structure.py holds one implementation per kind and looks it up by this key)."""

    uniform = "uniform"  # every layer from one layer's shapes per kind (attention kinds, mixers, MoE or dense)
    kind_attention = "kind_attention"  # attention shaped by its kind (MiMo-V2-Flash: training/kind_attention.py)
    gemma4 = "gemma4"  # Gemma 4's layer classes (training/gemma4.py)
