"""Model configuration: the shape of a decoder-only transformer.

Descriptive names are the canonical keys (YAML, JSON, Python); the seed's letters are accepted as
aliases (seed notes, App. "Conventions and Notation"):

    L n_layers   D d_model   A n_heads   E d_ff / d_model   V vocab_size   K max_seq_len

A ModelConfig is frozen and fully resolved: defaults that depend on other fields (n_kv_heads = A,
head_dim = D/A, d_ff = E*D, norm_bias from the norm kind, ...) are filled in at validation time, so
estimators read plain integers. The keys the user actually gave are remembered, so that overrides
re-derive the defaults (`with_overrides`): `--D 1024` on gpt2 gives d_ff = 4096, not 3072.
"""

from __future__ import annotations

import functools

import re

import math
from enum import Enum
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from transformer_calc.errors import TcalcError, clip, did_you_mean, known_list


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
def _mixer_kinds(pattern: tuple[LayerAttention, ...]) -> tuple[LayerAttention, ...]:
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
    state instead of a KV cache (transformer_calc/estimators/mixers/, one module per kind;
    docs/adding-a-block.md)."""

    full = "full"  # every earlier token (causal)
    sliding = "sliding"  # the last `sliding_window` tokens (Mistral, Gemma 2/3, gpt-oss)
    chunked = "chunked"  # tokens of the same `attention_chunk_size` block (Llama 4 local layers)
    deltanet = "deltanet"  # Gated DeltaNet (Yang et al. 2024; Qwen3-Next, Qwen3.5): conv + delta-rule state
    mamba2 = "mamba2"  # Mamba-2 (Dao & Gu 2024; Bamba, Granite-4.0-H): conv + SSM state
    conv = "conv"  # gated short convolution (LFM2): conv state only
    mamba = "mamba"  # Mamba(-1) selective scan (Gu & Dao 2023; Jamba): conv + SSM state
    lightning = "lightning"  # lightning attention (MiniMax-01): a running K^T·V per head
    kda = "kda"  # Kimi Delta Attention (Kimi Linear): Gated DeltaNet with a per-channel decay
    none = "none"  # no sequence mixer: with one_mixer_per_layer, the layer is its MLP or MoE alone (Nemotron-H)


# The kinds that are softmax attention (Q, K, V, O and a KV cache); the others are `mixers` kinds.
ATTENTION_KINDS = frozenset({LayerAttention.full, LayerAttention.sliding, LayerAttention.chunked})


class QKNormScope(str, Enum):
    """Width of the q/k norms when `qk_norm` is on."""

    head = "head"  # one norm of head_dim, shared by all heads (Qwen3, Gemma 3, Phi)
    full = "full"  # q over n_heads*head_dim, k over n_kv_heads*head_dim (OLMo-2, Cohere)


class Towers(BaseModel):
    """The parts of a multimodal model that are not the decoder: its vision and audio encoders and the
    projectors that map their outputs into the language model's width (docs/formulas.md "Towers").

    Each count is the exact number of parameters transformers builds for that part (computed from the
    config's vision_config/audio_config by `transformer_calc.sources.hf_towers`, one function per
    tower family citing its modeling file); `image_tokens` is how many language-model tokens one image
    becomes, `image_patches` how many patches the vision encoder runs per image (its forward FLOPs).
    `image_flops`, when given, is the encoder's forward FLOPs per image counted by layer (a
    convolutional encoder, whose FLOPs are not 2·N·patches).
    `text_only` drops the towers from every count (the language model alone); results say so.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    vision: int = Field(default=0, ge=0, description="vision encoder parameters")
    audio: int = Field(default=0, ge=0, description="audio encoder parameters")
    projector: int = Field(default=0, ge=0, description="multimodal projector parameters (into the LM width)")
    image_tokens: int = Field(default=0, ge=0, description="language-model tokens one image becomes")
    image_patches: int = Field(default=0, ge=0, description="patches the vision encoder processes per image")
    image_flops: int = Field(
        default=0, ge=0,
        description="forward FLOPs of the vision encoder for one image, counted layer by layer where it is not a "
                    "transformer over patches (Gemma 3n's convolutional MobileNetV5); 0: 2·vision·image_patches",
    )
    text_only: bool = Field(default=False, description="the towers are dropped: every count is the language model's")

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                if key != "text_only" and isinstance(value, bool):
                    raise ValueError(f"towers.{key} ({value}) is a boolean, not a number; give a number")
        return data

    @property
    def params(self) -> int:
        """Every tower parameter, counted or not (vision + audio + projector)."""
        return self.vision + self.audio + self.projector

    @property
    def vision_flops(self) -> int:
        """Forward FLOPs of the vision encoder for one image: `image_flops` where counted by layer, else
        the first-order 2·vision·image_patches (docs/formulas.md "Towers")."""
        return self.image_flops or 2 * self.vision * self.image_patches

    @property
    def counted(self) -> int:
        """The tower parameters the model's counts include (0 when text_only)."""
        return 0 if self.text_only else self.params


class DeepseekV4Blocks(BaseModel):
    """DeepSeek-V4's parts beyond a plain MoE decoder (modeling_deepseek_v4.py, transformers 5.23;
    DeepSeek-V4 technical report §2; docs/formulas.md §5.16): manifold-constrained hyper-connections
    (hc_mult residual streams, two DeepseekV4HyperConnection mixers per layer and a DeepseekV4HyperHead),
    a shared-KV query/key attention with a low-rank query (q_a_proj, q_b_proj) and a grouped low-rank
    output projection (o_a_proj: o_groups blocks to o_lora_rank each, then o_b_proj), a sliding window
    on every layer, a compressor on the compressed sparse attention (CSA) and heavily compressed
    attention (HCA) layers, a lightning indexer on the CSA layers, and hash-routed MoE layers.

    The model's other fields carry what is plain: n_heads, head_dim (K = V, one head), the MoE
    (n_experts, experts_per_token, moe_d_ff; the shared expert is one MLP of moe_d_ff), the sliding
    window and the per-head attention sinks. The estimators that do not price these parts refuse the
    model by name (`ModelConfig.irregular_layers`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hc_mult: int = Field(gt=0, description="n_hc, residual streams of the hyper-connections (hc_mult)")
    q_lora_rank: int = Field(gt=0, description="r_q, the query low rank (q_a_proj D x r_q, q_b_proj r_q x A·h_d)")
    o_groups: int = Field(gt=0, description="g, head groups of the grouped output projection (o_groups)")
    o_lora_rank: int = Field(gt=0, description="d_g, each group's output width in o_a_proj (o_lora_rank)")
    csa_layer_ids: tuple[int, ...] = Field(default=(), description="layers with compressed sparse attention (CSA)")
    hca_layer_ids: tuple[int, ...] = Field(default=(), description="layers with heavily compressed attention (HCA)")
    csa_compress_rate: int = Field(gt=0, description="m, source tokens per CSA compressed entry")
    hca_compress_rate: int = Field(gt=0, description="m', source tokens per HCA compressed entry")
    index_n_heads: int = Field(gt=0, description="H_I, indexer query heads of a CSA layer")
    index_head_dim: int = Field(gt=0, description="d_I, indexer head width (its compressed key)")
    index_topk: int = Field(gt=0, description="k_I, compressed entries each query of a CSA layer attends")
    hash_moe_layer_ids: tuple[int, ...] = Field(
        default=(), description="MoE layers whose experts a frozen token-id table picks (hash routing)"
    )

    @model_validator(mode="after")
    def _check(self) -> DeepseekV4Blocks:
        csa, hca = set(self.csa_layer_ids), set(self.hca_layer_ids)
        if csa & hca:
            raise ValueError(f"deepseek_v4: layers {clip(sorted(csa & hca))} are both CSA and HCA; give each layer one kind")
        for key in ("csa_layer_ids", "hca_layer_ids", "hash_moe_layer_ids"):
            ids = getattr(self, key)
            if any(i < 0 for i in ids) or list(ids) != sorted(set(ids)):
                raise ValueError(f"deepseek_v4.{key} ({clip(list(ids))}) must be distinct, increasing layer indices")
        return self


GATED_MLPS = frozenset({MLPKind.swiglu, MLPKind.geglu, MLPKind.relu2_glu})
# learned scalars of one MLP's activation (modeling_apertus.py XIELUActivation: alpha_p, alpha_n)
ACTIVATION_PARAMS = {MLPKind.xielu: 2}
DEFAULT_EXPANSION = 4  # E: the seed's (and GPT-2/3's) MLP width d_ff = 4 * D
DEFAULT_NORMS_PER_LAYER = 2  # pre-attention and pre-MLP norm (seed, "Layer Norm")

# Seed letters (and a few common spellings) -> canonical field names.
ALIASES: dict[str, str] = {
    "L": "n_layers",
    "D": "d_model",
    "A": "n_heads",
    "V": "vocab_size",
    "K": "max_seq_len",
    "E": "expansion",
    "kv_heads": "n_kv_heads",
}

MAX_PATTERN = 4096  # longest attention pattern accepted (it repeats over the layers)

# Pairs where giving one makes the other a derived value.
_EXCLUSIVE = {"d_ff": "expansion", "expansion": "d_ff"}


# S for training when a model documents no pre-training length: the common 2024-26 length (Llama 3
# pre-trains at 8K, arXiv:2407.21783 §3.4.1), never a 128K+ context window (requests/defaults.py).
FALLBACK_TRAIN_SEQ_LEN = 8192


class ModelConfig(BaseModel):
    """The architecture of one decoder-only model (everything that sets its parameter count)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    name: str | None = Field(default=None, description="display name, e.g. the preset")
    n_layers: int = Field(gt=0, description="L, transformer blocks")
    d_model: int = Field(gt=0, description="D, hidden size")
    n_heads: int = Field(gt=0, description="A, attention (query) heads")
    n_kv_heads: int = Field(gt=0, description="key/value heads (A: MHA, 1: MQA, else GQA)")
    head_dim: int = Field(gt=0, description="per-head width (default D/A)")
    d_ff: int = Field(gt=0, description="MLP inner width (default E*D)")
    expansion: float | None = Field(default=None, gt=0, description="E = d_ff / D")
    mlp: MLPKind = MLPKind.gelu
    vocab_size: int = Field(gt=0, description="V")
    max_seq_len: int = Field(default=2048, gt=0, description="K, block size")
    train_seq_len: int | None = Field(
        default=None, gt=0,
        description="the documented pre-training sequence length (the training commands' default S; None: "
        "min(max_seq_len, 8192))",
    )
    positional: Positional = Positional.learned
    position_offset: int = Field(default=0, ge=0, description="extra learned positions (OPT: 2)")
    norm: NormKind = NormKind.layernorm
    norm_bias: bool = Field(description="norms carry a bias (LayerNorm yes, RMSNorm no)")
    norm_affine: bool = Field(default=True, description="norms carry a learned scale (false: parameter-free)")
    norms_per_layer: int = Field(default=DEFAULT_NORMS_PER_LAYER, ge=0)
    final_norm: bool = True
    embedding_norm: bool = Field(default=False, description="norm after the embedding (BLOOM)")
    qk_norm: bool = Field(default=False, description="norms on q and k (see qk_norm_scope)")
    qk_norm_scope: QKNormScope = Field(
        default=QKNormScope.head, description="q/k norm width: head (head_dim) or full (all heads)"
    )
    attention_sinks: bool = Field(default=False, description="a learned sink logit per head (gpt-oss)")
    # --- per-layer attention kinds (HF layer_types); the pattern repeats over the layers
    attention_pattern: tuple[LayerAttention, ...] = Field(
        default=(LayerAttention.full,),
        description="attention kind of layers 0, 1, ...; repeated cyclically over n_layers",
    )
    sliding_window: int | None = Field(default=None, gt=0, description="W, tokens a sliding layer sees")
    sliding_kv_heads: int | None = Field(
        default=None, gt=0, description="K/V heads of the sliding layers when they differ from n_kv_heads (MiMo-V2-Flash: 2·n_kv)"
    )
    sliding_sinks: bool = Field(
        default=False, description="a learned sink logit per head on the sliding layers only (MiMo-V2-Flash)"
    )
    attention_chunk_size: int | None = Field(default=None, gt=0, description="chunk of a chunked layer")
    attn_output_gate: bool = Field(
        default=False, description="a sigmoid gate on the attention output: q_proj also emits A*h_d gate values (Qwen3-Next)"
    )
    # --- Gated DeltaNet layers (attention_pattern `deltanet`; estimators/mixers/deltanet.py)
    linear_key_heads: int | None = Field(default=None, gt=0, description="H_k, Gated DeltaNet query/key heads")
    linear_value_heads: int | None = Field(default=None, gt=0, description="H_v, Gated DeltaNet value heads (state heads)")
    linear_key_head_dim: int | None = Field(default=None, gt=0, description="d_k, Gated DeltaNet key head width")
    linear_value_head_dim: int | None = Field(default=None, gt=0, description="d_v, Gated DeltaNet value head width")
    conv_kernel: int | None = Field(default=None, gt=0, description="K_conv, taps of a mixer's causal depthwise conv")
    deltanet_split_in_proj: bool = Field(
        default=False,
        description="Gated DeltaNet's input projection as four Linear modules, in_proj_qkv, in_proj_z, in_proj_b, "
        "in_proj_a (Qwen3.5), instead of two, in_proj_qkvz and in_proj_ba (Qwen3-Next): the same weights; "
        "adapters, one A and B per module, differ",
    )
    # --- Mamba-2 layers (attention_pattern `mamba2`; estimators/mixers/mamba2.py)
    ssm_heads: int | None = Field(default=None, gt=0, description="H, Mamba-2 heads")
    ssm_head_dim: int | None = Field(default=None, gt=0, description="P, Mamba-2 head width (d_inner = H·P)")
    ssm_state_size: int | None = Field(default=None, gt=0, description="N, Mamba-2 state size per head")
    ssm_groups: int | None = Field(default=None, gt=0, description="G, Mamba-2 B/C groups")
    ssm_chunk_size: int | None = Field(default=None, gt=0, description="Q, chunk of the chunked SSM scan")
    ssm_proj_bias: bool = Field(default=False, description="biases on the Mamba-2 in/out projections")
    ssm_conv_bias: bool = Field(default=True, description="a bias on the Mamba-2 conv")
    ssm_inner: int | None = Field(default=None, gt=0, description="d_inner, Mamba(-1) channels (mamba_expand·D)")
    ssm_dt_rank: int | None = Field(default=None, gt=0, description="R, Mamba(-1) rank of the dt projection")
    lightning_block_size: int | None = Field(default=None, gt=0, description="C, the block of lightning attention's prompt form")
    short_conv_bias: bool = Field(default=False, description="biases on a short-conv layer's projections and conv (LFM2)")
    ssm_out_bias: bool | None = Field(default=None, description="a bias on the Mamba-2 out_proj (default: ssm_proj_bias)")
    ssm_norm: bool = Field(default=True, description="the Mamba-2 gated RMSNorm before out_proj (Falcon-H1: optional)")
    one_mixer_per_layer: bool = Field(
        default=False,
        description="each layer is one block: a sequence mixer without MLP, or (pattern kind none) an MLP/MoE alone "
        "(Nemotron-H's M, *, -, E blocks)",
    )
    mixer_beside_attention: bool = Field(
        default=False,
        description="the pattern's mixer layers also run full attention beside the mixer (Falcon-H1's parallel hybrid)",
    )
    # --- shared transformer blocks (Zamba2; estimators/shared_block.py): on when shared_block_layer_ids is set
    shared_block_layer_ids: tuple[int, ...] = Field(
        default=(),
        description="layers at which a shared attention+MLP block runs before the layer's mixer, on the hidden state "
        "concatenated with the token embedding (2·D wide); its output, through a D x D linear of that layer, is "
        "added to the mixer's input (Zamba2's hybrid layers)",
    )
    shared_blocks: int = Field(
        default=1, gt=0, description="distinct shared blocks; application i uses block i mod shared_blocks (Zamba2 num_mem_blocks)"
    )
    shared_blocks_tied: bool = Field(
        default=True,
        description="the applications share the blocks' weights (false: each application builds its own copy, as "
        "transformers 5.23 does for Zamba2 when tie_word_embeddings is false: it ties nothing then)",
    )
    shared_block_adapter_rank: int | None = Field(
        default=None, gt=0,
        description="rank of the low-rank adapter each application of a shared block adds to its MLP's gate/up "
        "projection (Zamba2 adapter_rank; none: no adapters)",
    )
    shared_attention_adapters: bool = Field(
        default=False,
        description="each application also adds low-rank adapters to the shared block's q, k and v projections "
        "(Zamba2 use_shared_attention_adapter)",
    )
    # --- multi-head latent attention (DeepSeek-V2/V3, Kimi K2): on when kv_lora_rank is set
    q_lora_rank: int | None = Field(default=None, gt=0, description="MLA query low rank (none: full q_proj)")
    kv_lora_rank: int | None = Field(default=None, gt=0, description="MLA latent width (cached)")
    qk_rope_head_dim: int | None = Field(default=None, gt=0, description="MLA rotary part of q/k heads")
    qk_nope_head_dim: int | None = Field(default=None, gt=0, description="MLA non-rotary part of q/k heads")
    v_head_dim: int | None = Field(
        default=None, gt=0,
        description="value head width: MLA's, or softmax attention whose value heads differ from head_dim "
        "(MiMo-V2-Flash; default head_dim)",
    )
    # --- DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): MLA plus a lightning indexer; on when index_topk is set
    index_topk: int | None = Field(default=None, gt=0, description="k_I, latent-cache tokens each query attends (DSA)")
    index_n_heads: int | None = Field(default=None, gt=0, description="H_I, indexer heads (DSA)")
    index_head_dim: int | None = Field(default=None, gt=0, description="d_I, indexer head width = its cached key (DSA)")
    index_shared_layer_ids: tuple[int, ...] = Field(
        default=(), description="layers without an indexer, reusing the previous layer's top-k (GLM-5 indexer_types 'shared')"
    )
    sub_norms: bool = Field(
        default=False, description="an RMSNorm of D before W_O and of d_ff before W_down in every block (BitNet)"
    )
    bias: bool = Field(default=True, description="default for every linear bias below")
    qkv_bias: bool = Field(description="bias on q, k, v projections")
    attn_out_bias: bool = Field(description="bias on the attention output projection")
    mlp_bias: bool = Field(description="bias on the MLP matrices")
    lm_head_bias: bool = Field(default=False, description="bias on the LM head (GPT-J, Phi)")
    tied_embeddings: bool = True
    d_embed: int | None = Field(
        default=None, gt=0, description="embedding width if != D, with in/out projections (OPT)"
    )
    parallel_attn: bool = Field(default=False, description="attention and MLP read the same input")
    fused_qkv: bool = Field(
        default=False, description="q, k, v are one Linear module (GPT-2 c_attn, GPT-NeoX/Falcon/BLOOM query_key_value, Phi-3 qkv_proj)"
    )
    fused_gate_up: bool = Field(default=False, description="gate and up are one Linear module (Phi-3 gate_up_proj)")
    all_linear_experts: bool = Field(
        default=False,
        description="PEFT's all-linear adapts the routed experts (gate_up at rank 2r) and the router, not the dense "
        "MLPs or shared experts (its transformers-4 target conversion: Mixtral, Qwen3-MoE, GLM-4-MoE, DeepSeek-V3)",
    )
    n_experts: int = Field(default=1, gt=0, description="MoE experts per layer (1 = dense MLP)")
    experts_per_token: int = Field(default=1, gt=0, description="top-k experts a token uses")
    router: bool = Field(description="a MoE router (gate) D x n_experts; default: n_experts > 1")
    router_bias: bool = False
    moe_d_ff: int = Field(gt=0, description="width of one routed expert (default d_ff)")
    shared_expert_d_ff: int = Field(default=0, ge=0, description="width of the shared expert(s), 0: none")
    shared_expert_gate: bool = Field(default=False, description="a D x 1 sigmoid gate on the shared expert")
    moe_latent_dim: int | None = Field(
        default=None, gt=0,
        description="ℓ, the width routed experts read and write: a D x ℓ projection before them and ℓ x D after "
        "(LatentMoE, Nemotron 3 Super's moe_latent_size; none: the experts work in D)",
    )
    first_dense_layers: int = Field(default=0, ge=0, description="leading layers with a dense MLP (d_ff)")
    moe_layer_step: int = Field(default=1, gt=0, description="layer i is MoE when (i+1) % step == 0")
    dense_layer_ids: tuple[int, ...] = Field(default=(), description="other layers with a dense MLP")
    mtp_layers: int = Field(
        default=0, ge=0, description="multi-token-prediction modules the checkpoint carries (not in total)"
    )
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="dropout probability")
    activation_impl: str | None = Field(
        default=None,
        description="the activation as the reference code names it (HF hidden_act / activation_function, "
        "e.g. gelu_new); only the torch-eager activation profile reads it",
    )
    weight_format: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9_.-]{1,32}$",
        description="how the published checkpoint stores its weights (e.g. mxfp4: gpt-oss's routed experts in "
        "MXFP4, the rest bf16); inference's default weight dtype (quant.FORMATS)",
    )
    # --- Gemma 4 (modeling_gemma4.py; docs/formulas.md §5.14): layers that differ by kind and depth
    full_head_dim: int | None = Field(
        default=None, gt=0, description="h_d of the full-attention layers when it differs from head_dim (Gemma 4 global_head_dim)"
    )
    full_kv_heads: int | None = Field(
        default=None, gt=0, description="K/V heads of the full-attention layers when they differ from n_kv_heads "
        "(Gemma 4 num_global_key_value_heads)"
    )
    full_k_eq_v: bool = Field(
        default=False, description="the full-attention layers have no W_V: their values are their key projection "
        "(Gemma 4 attention_k_eq_v)"
    )
    kv_shared_layers: int = Field(
        default=0, ge=0, description="the last N layers compute no K/V (no W_K, W_V, k_norm) and cache none: they "
        "read the K/V of the last earlier layer of their kind (Gemma 4 num_kv_shared_layers)"
    )
    kv_shared_double_mlp: bool = Field(
        default=False, description="the kv-shared layers' dense MLP is 2·d_ff wide (Gemma 4 use_double_wide_mlp)"
    )
    per_layer_input_dim: int = Field(
        default=0, ge=0, description="P, width of each layer's per-layer input (Gemma 4 per-layer embeddings; 0: none)"
    )
    per_layer_vocab_size: int | None = Field(
        default=None, gt=0, description="rows of the per-layer embedding table (default vocab_size)"
    )
    router_scales: bool = Field(
        default=False, description="the MoE router has a learned D-wide input scale and a per-expert output scale "
        "(Gemma 4 Gemma4TextRouter)"
    )
    # --- Gemma 3n (modeling_gemma3n.py; docs/formulas.md §5.15)
    altup_inputs: int | None = Field(
        default=None, gt=0, description="n, AltUp's parallel copies of the residual stream (Gemma 3n altup_num_inputs; "
        "None: no AltUp)"
    )
    laurel_rank: int | None = Field(
        default=None, gt=0, description="r, the rank of each layer's LAuReL residual D x r x D (Gemma 3n; None: none)"
    )
    # --- DeepSeek-V4 (modeling_deepseek_v4.py; docs/formulas.md §5.16)
    deepseek_v4: DeepseekV4Blocks | None = Field(
        default=None, description="DeepSeek-V4's hyper-connections, compressed attention, indexers, grouped output "
        "projection and hash routing (None: not a DeepSeek-V4 model)",
    )
    towers: Towers | None = Field(
        default=None,
        description="vision/audio encoders and projectors of a multimodal model (None: a text-only decoder)",
    )
    source: str | None = Field(default=None, description="where the numbers come from")

    _given: frozenset[str] = PrivateAttr(default=frozenset())

    @model_validator(mode="wrap")
    @classmethod
    def _resolve(cls, data: Any, handler: Any) -> ModelConfig:
        if isinstance(data, ModelConfig):
            return data
        if not isinstance(data, dict):
            raise ValueError(f"a model must be a mapping of fields, got {type(data).__name__}")
        given = canonical_keys(data)
        reject_bool_numbers(cls, given)
        model = handler(_fill_defaults(given))
        model._given = frozenset(given)
        return model

    def __eq__(self, other: object) -> bool:
        """Equal when every resolved field is equal (how the spec was written does not matter)."""
        return isinstance(other, ModelConfig) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__.values()))

    # ------------------------------------------------------------------ derived, read-only
    @property
    def training_seq_len(self) -> int:
        """S for training when none is given: the documented pre-training length (train_seq_len),
        else FALLBACK_TRAIN_SEQ_LEN, within the context window (max_seq_len, which an override may
        shrink below it); never a 128K+ window unasked."""
        wanted = self.train_seq_len if self.train_seq_len is not None else FALLBACK_TRAIN_SEQ_LEN
        return min(wanted, self.max_seq_len)

    @property
    def gated_mlp(self) -> bool:
        return self.mlp in GATED_MLPS

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1 or self.router

    @property
    def expert_d(self) -> int:
        """The width a routed expert reads and writes: ℓ with a latent MoE, else D."""
        return self.moe_latent_dim if self.moe_latent_dim is not None else self.d_model

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def is_dsa(self) -> bool:
        """DeepSeek Sparse Attention: MLA whose queries attend the top index_topk tokens an indexer picks."""
        return self.index_topk is not None

    @property
    def n_indexer_layers(self) -> int:
        """Layers that run their own indexer (the others reuse the previous layer's top-k)."""
        if not self.is_dsa:
            return 0
        return self.n_layers - len({i for i in self.index_shared_layer_ids if 0 <= i < self.n_layers})

    @property
    def n_shared_block_applications(self) -> int:
        """Layers at which a shared transformer block runs (Zamba2's hybrid layers; 0: none)."""
        return len(self.shared_block_layer_ids)

    @property
    def first_kv_shared_layer(self) -> int:
        """Index of the first layer that reads another layer's K/V (n_layers when none do)."""
        return self.n_layers - self.kv_shared_layers

    def kind_head_dim(self, kind: LayerAttention) -> int:
        """h_d of a softmax-attention layer of `kind` (Gemma 4's full layers: full_head_dim)."""
        if kind is LayerAttention.full and self.full_head_dim is not None:
            return self.full_head_dim
        return self.head_dim

    @property
    def irregular_layers(self) -> tuple[str, ...]:
        """The Gemma 4 features that make layers differ by kind or depth (or add per-layer inputs):
        the estimators that do not model them yet refuse the model by these names."""
        out = []
        if self.full_head_dim is not None or self.full_kv_heads is not None:
            out.append("full-attention layers of another head width or K/V heads")
        if self.full_k_eq_v:
            out.append("k-equals-v attention")
        if self.kv_shared_layers:
            out.append("shared-KV layers")
        if self.per_layer_input_dim:
            out.append("per-layer embeddings")
        if self.router_scales:
            out.append("a scaled MoE router")
        return tuple(out) + self.unpriced_blocks + self.deepseek_v4_parts

    @property
    def deepseek_v4_parts(self) -> tuple[str, ...]:
        """DeepSeek-V4's blocks, by name: priced in params, FLOPs and inference on one GPU (tcalc params, flops, mfu,
        inference, serve, sweep); every other estimate refuses them."""
        if self.deepseek_v4 is None:
            return ()
        return ("DeepSeek-V4's hyper-connections, compressed attention (CSA/HCA compressors, indexers), grouped output "
                "projection and hash-routed MoE",)

    @property
    def unpriced_blocks(self) -> tuple[str, ...]:
        """Gemma 3n's blocks (AltUp, LAuReL): priced in params, FLOPs and inference, refused with the other
        varied layers where those are not modeled (`irregular_layers`)."""
        return (("AltUp",) if self.altup_inputs is not None else ()) + (("LAuReL",) if self.laurel_rank is not None else ())

    @property
    def v_dim(self) -> int:
        """Width of one value head (v_head_dim when given: MLA's, or MiMo-V2-Flash's; else head_dim)."""
        return self.v_head_dim if self.v_head_dim is not None else self.head_dim

    def kv_heads_of(self, kind: LayerAttention) -> int:
        """K/V heads of a layer of softmax-attention `kind` (sliding layers: sliding_kv_heads, full layers:
        full_kv_heads, when set)."""
        if kind is LayerAttention.sliding and self.sliding_kv_heads is not None:
            return self.sliding_kv_heads
        if kind is LayerAttention.full and self.full_kv_heads is not None:  # Gemma 4's full layers
            return self.full_kv_heads
        return self.n_kv_heads

    @property
    def per_kind_attention(self) -> bool:
        """Sliding layers shaped apart from the full ones (their own K/V heads or sinks: MiMo-V2-Flash)."""
        return self.sliding_kv_heads is not None or self.sliding_sinks

    @property
    def has_dense_mlp_layers(self) -> bool:
        return not self.is_moe or self.n_moe_layers() < self.n_layers - self.n_channel_free_layers()

    def n_channel_free_layers(self, start: int = 0, stop: int | None = None) -> int:
        """Layers without an MLP among [start, stop): with one_mixer_per_layer, the sequence-mixer
        blocks (every kind but none); 0 otherwise."""
        if not self.one_mixer_per_layer:
            return 0
        stop = self.n_layers if stop is None else stop
        return (stop - start) - self.n_attention_layers(LayerAttention.none, start, stop)

    def n_moe_layers(self, start: int = 0, stop: int | None = None) -> int:
        """MoE layers among layers [start, stop): closed form (no loop over layers).

        Layer i is MoE when i >= first_dense_layers, (i+1) % moe_layer_step == 0 and i is not in
        dense_layer_ids (DeepSeek first_k_dense_replace, Qwen decoder_sparse_step and
        mlp_only_layers, Llama 4 interleave_moe_layer_step).
        """
        stop = self.n_layers if stop is None else stop
        if not self.is_moe:
            return 0
        if self.one_mixer_per_layer:  # only the layers that are an MLP block (kind none) have one
            pat, dense = self.attention_pattern, set(self.dense_layer_ids)
            return sum(1 for i in range(start, stop)
                       if pat[i % len(pat)] is LayerAttention.none and i >= self.first_dense_layers
                       and (i + 1) % self.moe_layer_step == 0 and i not in dense)
        lo = max(start, self.first_dense_layers)
        if lo >= stop:
            return 0
        step = self.moe_layer_step
        n = stop // step - lo // step  # i+1 in (lo, stop] divisible by step
        n -= sum(1 for i in set(self.dense_layer_ids) if lo <= i < stop and (i + 1) % step == 0)
        return n

    def n_attention_layers(self, kind: LayerAttention, start: int = 0, stop: int | None = None) -> int:
        """Layers of one attention kind among [start, stop) (the pattern repeats; closed form)."""
        stop = self.n_layers if stop is None else stop
        pat = self.attention_pattern

        def upto(n: int) -> int:
            full, rest = divmod(n, len(pat))
            return full * pat.count(kind) + pat[:rest].count(kind)

        return upto(stop) - upto(start)

    def n_softmax_layers(self, start: int = 0, stop: int | None = None) -> int:
        """Layers with softmax attention (full, sliding or chunked) among [start, stop); with
        `mixer_beside_attention`, the mixer layers too (their attention is full)."""
        n = sum(self.n_attention_layers(k, start, stop) for k in ATTENTION_KINDS)
        if self.mixer_beside_attention:
            n += sum(self.n_attention_layers(k, start, stop) for k in self.mixer_kinds)
        return n

    def n_kv_layers(self, kind: LayerAttention) -> int:
        """Layers that cache K/V for attention of `kind` (a full/sliding/chunked kind): the pattern's
        (Gemma's kv-shared layers, which cache none, left out), and with `mixer_beside_attention` the
        mixer layers' full attention."""
        n = self.n_attention_layers(kind, 0, self.first_kv_shared_layer)
        if kind is LayerAttention.full and self.mixer_beside_attention:
            n += sum(self.n_attention_layers(k) for k in self.mixer_kinds)
        return n

    @property
    def mixer_kinds(self) -> tuple[LayerAttention, ...]:
        """The non-attention mixer kinds the pattern uses (Gated DeltaNet, ...), in enum order."""
        return _mixer_kinds(self.attention_pattern)

    @property
    def is_hybrid(self) -> bool:
        """Some layers mix with a constant-state mixer instead of softmax attention."""
        return bool(self.mixer_kinds)

    @property
    def d_embedding(self) -> int:
        """Width of the token-embedding table (D unless OPT-style projections)."""
        return self.d_embed if self.d_embed is not None else self.d_model

    @property
    def given(self) -> dict[str, Any]:
        """The fields as the user gave them (defaults left to be derived)."""
        dump = self.model_dump(mode="json")
        return {k: dump[k] for k in self._given}

    @property
    def tower_params(self) -> int:
        """Tower parameters the model's counts include (vision, audio, projector; 0 if text_only or none)."""
        return 0 if self.towers is None else self.towers.counted

    def text_only(self) -> ModelConfig:
        """The same model with its towers dropped from every count (the language model alone)."""
        if self.towers is None or self.towers.text_only:
            return self
        return self.with_overrides({"towers": {**self.towers.model_dump(), "text_only": True}})

    def with_overrides(self, overrides: dict[str, Any]) -> ModelConfig:
        """A new, re-validated config; derived defaults are recomputed from the new values."""
        return ModelConfig.model_validate(merge_spec(self.given, overrides))


def _is_number_field(annotation: Any) -> bool:
    """int, float, or one of them | None (the fields a boolean must never fill)."""
    import types
    import typing

    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union else (annotation,)
    return any(a in (int, float) for a in args)


def reject_bool_numbers(cls: Any, data: Any) -> None:
    """YAML's yes/on/true and --set n_layers=true are booleans: never a number (True is not 1)."""
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        field = cls.model_fields.get(key)
        if field is not None and isinstance(value, bool) and _is_number_field(field.annotation):
            raise ValueError(f"{key} ({clip(value)}) is a boolean, not a number; give a number")


class StrictInputs(BaseModel):
    """Config models whose numeric fields never take a boolean."""

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        reject_bool_numbers(cls, data)
        return data


def build_model(spec: dict[str, Any], where: str = "model") -> ModelConfig:
    """Validate a model spec; any problem becomes one TcalcError line naming field, value, fix."""
    return build(ModelConfig, spec, where)


def build(cls: Any, spec: dict[str, Any], where: str) -> Any:
    """Validate any of the config models; errors become one TcalcError line."""
    from pydantic import ValidationError

    try:
        return cls.model_validate(spec)
    except ValidationError as exc:
        raise TcalcError(describe_validation_error(exc, where, cls)) from None
    except TcalcError:
        raise
    except ValueError as exc:  # raised by canonical_keys before pydantic sees the data
        raise TcalcError(f"{where}: {exc}") from None


def describe_validation_error(exc: Any, where: str = "model", cls: Any = None) -> str:
    """First pydantic error as one line: '<where>: <field> (<value>): <problem>; <fix>'."""
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(part) for part in err.get("loc", ()))
    msg = str(err.get("msg", "invalid value"))
    kind = err.get("type", "")
    value = err.get("input")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind == "extra_forbidden":
        known = [*(cls or ModelConfig).model_fields, *(ALIASES if cls in (None, ModelConfig) else ())]
        hint = did_you_mean(loc, known) or "see `tcalc params --help` or docs/notation.md"
        return f"{where}: unknown field {clip(loc)}; {hint}"
    if kind == "missing":
        return f"{where}: {loc} is required; give it in the file or with its CLI flag"
    if not loc:  # cross-field checks already name their fields, values and fixes
        return f"{where}: {msg}"
    fix = _FIXES.get(kind, "")
    return f"{where}: {clip(loc, 60)[1:-1]} ({clip(value)}): {msg[:1].lower() + msg[1:]}{'; ' + fix if fix else ''}"


_FIXES = {
    "greater_than": "use a positive number",
    "greater_than_equal": "use a number >= the bound",
    "less_than": "use a smaller number",
    "int_parsing": "use a whole number",
    "int_from_float": "use a whole number",
    "int_type": "use a whole number",
    "float_parsing": "use a number",
    "bool_parsing": "use true or false",
    "bool_type": "use true or false",
    "enum": "use one of the listed values",
    "string_type": "use a string",
}


def canonical_keys(data: dict[str, Any]) -> dict[str, Any]:
    """Map seed letters to field names; a field given twice under two names is an error."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = ALIASES.get(key, key) if isinstance(key, str) else key
        if name in out:
            raise ValueError(f"{name} is given twice (as {name!r} and an alias); keep one")
        out[name] = value
    return out


def merge_spec(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides win; an override of d_ff drops the base's E and vice versa."""
    over = canonical_keys(overrides)
    merged = {k: v for k, v in base.items() if _EXCLUSIVE.get(k) not in over}
    merged.update(over)
    return merged


def _fill_defaults(d: dict[str, Any]) -> dict[str, Any]:
    """Fill the defaults that depend on other fields; validate cross-field constraints.

    Raises ValueError with the value and the fix; the single-field checks (positivity, types)
    are pydantic's and run afterwards.
    """
    d = dict(d)
    D, A = _int_or_none(d.get("d_model")), _int_or_none(d.get("n_heads"))
    _check_mla(d)  # MLA fixes head_dim (d_nope + d_rope) before the D/A default applies
    if d.get("head_dim") is None and D is not None and A is not None and A > 0:
        if D % A != 0:
            raise ValueError(
                f"d_model ({D}) must be divisible by n_heads ({A}); "
                "choose another n_heads or give head_dim explicitly"
            )
        d["head_dim"] = D // A
    if d.get("n_kv_heads") is None and A is not None:
        d["n_kv_heads"] = A
    kv = _int_or_none(d.get("n_kv_heads"))
    if A is not None and kv is not None and kv > 0 and A % kv != 0:
        raise ValueError(
            f"n_heads ({A}) must be divisible by n_kv_heads ({kv}); use a divisor of {A}"
        )
    E = d.get("expansion")
    if E is not None and (
        isinstance(E, bool) or not isinstance(E, (int, float)) or not math.isfinite(E) or E <= 0
    ):
        raise ValueError(f"expansion E ({clip(E)}) must be a positive finite number, e.g. 4 or 3.5")
    if d.get("d_ff") is None and D is not None:
        if E is None:
            d["d_ff"] = DEFAULT_EXPANSION * D
        else:
            width = Fraction(str(E)) * D
            if width.denominator != 1:
                raise ValueError(
                    f"expansion E ({E}) times d_model ({D}) is {float(width)}, not an integer; "
                    "give d_ff explicitly"
                )
            d["d_ff"] = int(width)
    elif E is not None and D is not None and _int_or_none(d.get("d_ff")) is not None:
        if isinstance(E, (int, float)) and Fraction(str(E)) * D != d["d_ff"]:
            raise ValueError(
                f"d_ff ({d['d_ff']}) disagrees with expansion E ({E}) x d_model ({D}); give one"
            )
    if d.get("norm_bias") is None:
        norm = d.get("norm", NormKind.layernorm)
        d["norm_bias"] = (norm.value if isinstance(norm, NormKind) else norm) == "layernorm"
    bias = d.get("bias", True)
    for key in ("qkv_bias", "attn_out_bias", "mlp_bias"):
        if d.get(key) is None:
            d[key] = bias
    if d.get("moe_d_ff") is None and d.get("d_ff") is not None:
        d["moe_d_ff"] = d["d_ff"]
    _check_pattern(d)
    _check_dsa(d)
    _check_shared_blocks(d)
    n_exp, k_exp = _int_or_none(d.get("n_experts")), _int_or_none(d.get("experts_per_token"))
    if d.get("moe_latent_dim") is not None and not ((n_exp or 1) > 1 or d.get("router")):
        raise ValueError(f"moe_latent_dim ({clip(d['moe_latent_dim'])}) needs a mixture of experts; "
                         "set n_experts too (or drop it)")
    if d.get("router") is None:
        d["router"] = n_exp is not None and n_exp > 1
    _check_gemma4(d)
    _check_deepseek_v4(d)
    experts = 1 if n_exp is None else n_exp  # a dense model is one expert
    if k_exp is not None and k_exp > experts > 0:
        raise ValueError(
            f"experts_per_token ({k_exp}) exceeds n_experts ({experts}); use at most {experts}"
            + (" (the model is dense: set n_experts for a mixture of experts)" if experts == 1 else "")
        )
    return d


def _check_deepseek_v4(d: dict[str, Any]) -> None:
    """DeepSeek-V4's layer lists name layers of the model."""
    v4, L = d.get("deepseek_v4"), _int_or_none(d.get("n_layers"))
    if v4 is None or L is None:
        return
    get = v4.get if isinstance(v4, dict) else (lambda key, default=None: getattr(v4, key, default))
    for key in ("csa_layer_ids", "hca_layer_ids", "hash_moe_layer_ids"):
        ids = get(key, ()) or ()
        if isinstance(ids, (list, tuple)) and any(isinstance(i, int) and not 0 <= i < L for i in ids):
            raise ValueError(f"deepseek_v4.{key} ({clip(list(ids))}) holds a layer outside 0 .. n_layers - 1 ({L - 1}); "
                             "drop it or raise n_layers")
    n_exp = _int_or_none(d.get("n_experts"))
    if n_exp is None or n_exp < 2:
        raise ValueError("deepseek_v4 needs its mixture of experts: give n_experts (> 1), experts_per_token and moe_d_ff")


def _check_gemma4(d: dict[str, Any]) -> None:
    """Gemma 4's layer variants name what they vary."""
    L, shared = _int_or_none(d.get("n_layers")), _int_or_none(d.get("kv_shared_layers"))
    if L is not None and shared is not None and shared >= L > 0:
        raise ValueError(f"kv_shared_layers ({shared}) must be below n_layers ({L}): the first layer computes "
                         f"its own K/V; use at most {L - 1}")
    if d.get("kv_shared_double_mlp") is True and not shared:
        raise ValueError("kv_shared_double_mlp widens the MLP of the kv-shared layers: give kv_shared_layers too (or drop it)")
    if d.get("per_layer_vocab_size") is not None and not _int_or_none(d.get("per_layer_input_dim")):
        raise ValueError("per_layer_vocab_size sizes the per-layer embedding table: give per_layer_input_dim too (or drop it)")
    kv, A = _int_or_none(d.get("full_kv_heads")), _int_or_none(d.get("n_heads"))
    if kv is not None and A is not None and kv > 0 and A % kv:
        raise ValueError(f"n_heads ({A}) must be divisible by full_kv_heads ({kv}); use a divisor of {A}")
    if d.get("router_scales") is True and d.get("router") is not True:
        raise ValueError("router_scales scales a MoE router: give n_experts > 1 or router true too (or drop it)")
    if (d.get("kv_lora_rank") is not None and (d.get("full_head_dim") is not None or d.get("full_kv_heads") is not None
                                               or d.get("full_k_eq_v") is True or shared)):
        raise ValueError("full_head_dim, full_kv_heads, full_k_eq_v and kv_shared_layers vary standard attention; "
                         "they do not apply to multi-head latent attention (kv_lora_rank): drop them")


_MLA_KEYS = ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


def _check_mla(d: dict[str, Any]) -> None:
    """MLA: kv_lora_rank with its three head widths; head_dim is the q/k head (nope + rope)."""
    if d.get("kv_lora_rank") is None:
        # v_head_dim alone is a plain attention's value head width (MiMo-V2-Flash)
        extra = [k for k in ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim") if d.get(k) is not None]
        if extra:
            raise ValueError(
                f"{extra[0]} ({clip(d[extra[0]])}) is a multi-head latent attention width; "
                "give kv_lora_rank too (or drop it)"
            )
        return
    missing = [k for k in _MLA_KEYS if d.get(k) is None]
    if missing:
        raise ValueError(f"multi-head latent attention (kv_lora_rank) needs {', '.join(missing)}; give them")
    nope, rope = _int_or_none(d["qk_nope_head_dim"]), _int_or_none(d["qk_rope_head_dim"])
    if nope is not None and rope is not None:
        hd = _int_or_none(d.get("head_dim"))
        if d.get("head_dim") is not None and hd is not None and hd != nope + rope:
            raise ValueError(
                f"head_dim ({hd}) must equal qk_nope_head_dim + qk_rope_head_dim ({nope + rope}) "
                "under multi-head latent attention; drop head_dim"
            )
        d["head_dim"] = nope + rope
    if d.get("n_kv_heads") is not None and d.get("n_kv_heads") != d.get("n_heads"):
        raise ValueError(
            f"n_kv_heads ({clip(d['n_kv_heads'])}) does not apply to multi-head latent attention "
            "(every head reads the shared latent); drop n_kv_heads"
        )


_DSA_KEYS = ("index_topk", "index_n_heads", "index_head_dim")


def _check_dsa(d: dict[str, Any]) -> None:
    """DSA (modeling_deepseek_v32.py DeepseekV32Indexer): the indexer's query comes from MLA's
    q_lora_rank latent (wq_b), so it needs MLA with a query low rank, and all three widths."""
    given = [k for k in _DSA_KEYS if d.get(k) is not None]
    if not given:
        if d.get("index_shared_layer_ids"):
            raise ValueError("index_shared_layer_ids needs DeepSeek Sparse Attention; give index_topk too (or drop it)")
        return
    missing = [k for k in _DSA_KEYS if d.get(k) is None]
    if missing:
        raise ValueError(f"DeepSeek Sparse Attention ({given[0]}) needs {', '.join(missing)}; give them")
    if d.get("kv_lora_rank") is None or d.get("q_lora_rank") is None:
        raise ValueError(
            "DeepSeek Sparse Attention (index_topk) is built on multi-head latent attention with a query low rank: "
            "give kv_lora_rank and q_lora_rank (the indexer's wq_b reads the q_lora_rank latent)"
        )
    rope = _int_or_none(d.get("qk_rope_head_dim"))
    width = _int_or_none(d.get("index_head_dim"))
    if rope is not None and width is not None and width < rope:
        raise ValueError(
            f"index_head_dim ({width}) must be >= qk_rope_head_dim ({rope}): the indexer rotates that many of its dims"
        )


MAX_SHARED_BLOCK_LAYERS = 65536  # most applications of a shared block (its layer list is read one by one)


def _check_shared_blocks(d: dict[str, Any]) -> None:
    """Shared transformer blocks (Zamba2, estimators/shared_block.py): the layers they run at are
    distinct layer indices in increasing order; the adapter fields need them."""
    ids = d.get("shared_block_layer_ids")
    if not ids:
        for key in ("shared_block_adapter_rank", "shared_attention_adapters"):  # (shared_blocks_tied: a default True)
            if d.get(key):
                raise ValueError(f"{key} ({clip(d[key])}) needs shared blocks; give shared_block_layer_ids too (or drop it)")
        return
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)):
        raise ValueError(f"shared_block_layer_ids ({clip(ids)}) must be a list of layer indices, e.g. [5, 11]")
    if len(ids) > MAX_SHARED_BLOCK_LAYERS:
        raise ValueError(f"shared_block_layer_ids has {len(ids)} entries; give at most {MAX_SHARED_BLOCK_LAYERS}")
    L = _int_or_none(d.get("n_layers"))
    bad = next((i for i in ids if isinstance(i, bool) or not isinstance(i, int) or i < 0
                or (L is not None and i >= L)), None)
    if bad is not None:
        raise ValueError(
            f"shared_block_layer_ids holds {clip(bad)}; each entry is a layer index from 0 to n_layers - 1 ({clip(L)})"
        )
    if any(b <= a for a, b in zip(ids, ids[1:])):
        raise ValueError(f"shared_block_layer_ids ({clip(list(ids))}) must be distinct and increasing; sort it")
    if d.get("shared_attention_adapters") and d.get("shared_block_adapter_rank") is None:
        raise ValueError("shared_attention_adapters needs shared_block_adapter_rank (the adapters' rank); give it")


def _check_pattern(d: dict[str, Any]) -> None:
    """The attention pattern names the window sizes it needs."""
    pat = d.get("attention_pattern")
    if pat is None:
        for key in ("sliding_kv_heads", "sliding_sinks"):
            if d.get(key):
                raise ValueError(f"{key} ({clip(d[key])}) needs sliding layers in attention_pattern; drop it or add them")
        return
    if isinstance(pat, (str, bytes)) or not isinstance(pat, (list, tuple)):
        raise ValueError(
            f"attention_pattern ({clip(pat)}) must be a list of full/sliding/chunked/deltanet/mamba2/mamba/conv/lightning/kda/none, e.g. [sliding, full]"
        )
    if not pat or len(pat) > MAX_PATTERN:
        raise ValueError(
            f"attention_pattern has {len(pat)} entries; give 1 to {MAX_PATTERN} (it repeats over the layers)"
        )
    bad = next((k for k in pat if not isinstance(k, (str, LayerAttention))), None)
    if bad is not None:
        raise ValueError(f"attention_pattern holds {clip(bad)}; each entry is full, sliding or chunked")
    kinds = {k.value if isinstance(k, LayerAttention) else k for k in pat}
    if "deltanet" in kinds:
        missing = [k for k in DELTANET_FIELDS if d.get(k) is None]
        if missing:
            raise ValueError(f"attention_pattern has deltanet layers but {', '.join(missing)} is not given; give it")
        hk, hv = _int_or_none(d.get("linear_key_heads")), _int_or_none(d.get("linear_value_heads"))
        if hk and hv and hv % hk:
            raise ValueError(
                f"linear_value_heads ({hv}) must be a multiple of linear_key_heads ({hk}) "
                "(each key head serves H_v/H_k value heads); use a multiple of it"
            )
    if "kda" in kinds:
        missing = [k for k in DELTANET_FIELDS if d.get(k) is None]
        if missing:
            raise ValueError(f"attention_pattern has kda layers but {', '.join(missing)} is not given; give it")
        for key, value in (("linear_value_heads", "linear_key_heads"), ("linear_value_head_dim", "linear_key_head_dim")):
            if _int_or_none(d.get(key)) != _int_or_none(d.get(value)):
                raise ValueError(
                    f"{key} ({clip(d.get(key))}) must equal {value} ({clip(d.get(value))}) in a model with kda layers "
                    f"(Kimi Delta Attention's q, k and v share heads and width); set it to {clip(d.get(value))}"
                )
    if "none" in kinds and d.get("one_mixer_per_layer") is not True:
        raise ValueError("attention_pattern has none layers (no sequence mixer) but one_mixer_per_layer is not set; set it")
    if d.get("one_mixer_per_layer") is True:
        L = _int_or_none(d.get("n_layers"))
        if L is not None and L > MAX_BLOCK_LAYERS:
            raise ValueError(f"n_layers ({L}) is above {MAX_BLOCK_LAYERS}, the most a one_mixer_per_layer model takes")
    if "mamba" in kinds:
        missing = [k for k in ("ssm_inner", "ssm_state_size", "ssm_dt_rank", "conv_kernel") if d.get(k) is None]
        if missing:
            raise ValueError(f"attention_pattern has mamba layers but {', '.join(missing)} is not given; give it")
    if "lightning" in kinds and d.get("lightning_block_size") is None:
        raise ValueError("attention_pattern has lightning layers but lightning_block_size is not given; give it")
    if "conv" in kinds and d.get("conv_kernel") is None:
        raise ValueError("attention_pattern has conv layers but conv_kernel is not given; give it")
    if "mamba2" in kinds:
        missing = [k for k in MAMBA2_FIELDS if d.get(k) is None]
        if missing:
            raise ValueError(f"attention_pattern has mamba2 layers but {', '.join(missing)} is not given; give it")
        heads, groups = _int_or_none(d.get("ssm_heads")), _int_or_none(d.get("ssm_groups"))
        if heads and groups and heads % groups:
            raise ValueError(f"ssm_heads ({heads}) must be a multiple of ssm_groups ({groups}); use a multiple of it")
    for key in ("sliding_kv_heads", "sliding_sinks"):
        if d.get(key) and "sliding" not in kinds:
            raise ValueError(f"{key} ({clip(d[key])}) needs sliding layers in attention_pattern; drop it or add them")
    skv, A = _int_or_none(d.get("sliding_kv_heads")), _int_or_none(d.get("n_heads"))
    if skv and A and A % skv:
        raise ValueError(f"n_heads ({A}) must be divisible by sliding_kv_heads ({skv}); use a divisor of {A}")
    if d.get("sliding_sinks") and d.get("attention_sinks"):
        raise ValueError("sliding_sinks (sinks on the sliding layers only) and attention_sinks (every layer) "
                         "exclude one another; keep one")
    if "sliding" in kinds and d.get("sliding_window") is None:
        raise ValueError("attention_pattern has sliding layers but sliding_window is not given; give it")
    if "chunked" in kinds and d.get("attention_chunk_size") is None:
        raise ValueError("attention_pattern has chunked layers but attention_chunk_size is not given; give it")


# Fields a result's model section lists only when the model sets them (the widths of the mixers other
# than attention): the JSON of every attention-only model stays as it was.
SHOWN_WHEN_SET = frozenset({
    "train_seq_len",
    "attn_output_gate", "linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "conv_kernel", "ssm_heads", "ssm_head_dim", "ssm_state_size", "ssm_groups", "ssm_chunk_size", "ssm_proj_bias",
    "ssm_conv_bias", "ssm_out_bias", "ssm_norm", "mixer_beside_attention", "one_mixer_per_layer", "short_conv_bias",
    "ssm_inner", "ssm_dt_rank", "lightning_block_size", "deltanet_split_in_proj",
    "shared_block_layer_ids", "shared_blocks", "shared_blocks_tied", "shared_block_adapter_rank",
    "shared_attention_adapters", "sliding_kv_heads", "sliding_sinks", "moe_latent_dim",
    # Gemma 4 and Gemma 3n (docs/formulas.md §5.14, §5.15)
    "full_head_dim", "full_kv_heads", "full_k_eq_v", "kv_shared_layers", "kv_shared_double_mlp", "per_layer_input_dim",
    "per_layer_vocab_size", "router_scales", "altup_inputs", "laurel_rank",
    "deepseek_v4",  # DeepSeek-V4 (docs/formulas.md §5.16)
})
MAX_BLOCK_LAYERS = 65536  # most layers of a one_mixer_per_layer model (its MoE layers are counted one by one)
MAMBA2_FIELDS = ("ssm_heads", "ssm_head_dim", "ssm_state_size", "ssm_groups", "ssm_chunk_size", "conv_kernel")
DELTANET_FIELDS = ("linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim", "conv_kernel")


def _int_or_none(value: Any) -> int | None:
    """The value if it is a usable int (pydantic reports the others with their field name)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("+").isdigit():
        return int(value)
    return None


# ============================================================================ workload, training
class Workload(StrictInputs):
    """What one step processes: S tokens per sequence, B sequences per micro-batch (per GPU)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq_len: int = Field(gt=0, description="S, tokens per sequence")
    batch_size: int = Field(default=1, gt=0, description="B, micro-batch size (sequences per GPU)")


class PipelineSchedule(str, Enum):
    """The pipeline schedule (estimators/training/schedules.py: bubbles and in-flight activations)."""

    one_f_one_b = "1f1b"  # Narayanan et al. 2021 §2.2.1 (PipeDream-Flush)
    interleaved = "interleaved"  # interleaved 1F1B over v model chunks per stage (§2.2.2)
    zb_h1 = "zb-h1"  # zero-bubble H1: backward split into input (B) and weight (W) passes (Qi et al. 2023)
    zb_v = "zb-v"  # zero-bubble V: two chunks per stage in a V (Qi et al. 2024)
    dualpipe = "dualpipe"  # DeepSeek-V3's bidirectional schedule (two chunks per stage, 2x parameters)


class CPCommType(str, Enum):
    """How context parallelism exchanges K/V (Transformer Engine / Megatron-core `cp_comm_type`)."""

    p2p = "p2p"  # ring: K/V blocks passed rank to rank under the attention kernels (Liu et al. 2023)
    all_gather = "all_gather"  # K/V all-gathered, then attention on the local Q chunk (Llama 3 §3.3.2)


MAX_PIPELINE_STAGES = 1024  # P and v: stages are listed one by one; published runs use at most 64


class Parallelism(StrictInputs):
    """How the model and the batch are split over GPUs (Megatron-LM / ZeRO conventions)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor: int = Field(default=1, gt=0, description="T, tensor-parallel ranks")
    sequence_parallel: bool = Field(default=False, description="Korthikanti et al. 2022 sequence parallelism")
    # at most MAX_PIPELINE_STAGES: a pipeline's stages are listed one by one (published runs use <= 64)
    pipeline: int = Field(default=1, gt=0, le=MAX_PIPELINE_STAGES, description="P, pipeline stages")
    data: int = Field(default=1, gt=0, description="data-parallel replicas")
    zero: int = Field(default=0, ge=0, le=3, description="ZeRO stage: 1 optimizer, 2 +gradients, 3 +weights")
    expert: int = Field(default=1, gt=0, description="ep, expert-parallel ranks (routed experts split)")
    context: int = Field(default=1, gt=0, description="cp, context-parallel ranks (the sequence split)")
    virtual_stages: int = Field(default=1, gt=0, le=MAX_PIPELINE_STAGES, description="v, interleaved 1F1B model chunks per stage")
    expert_tensor: int | None = Field(
        default=None, gt=0, description="etp, tensor-parallel ranks of one expert (default T, Megatron-core)"
    )
    # Uneven pipelines as Megatron-core builds them (estimators/training/memory.py pipeline_layout)
    first_stage_layers: int | None = Field(
        default=None, gt=0, description="blocks on the first pipeline stage (Megatron --decoder-first-pipeline-num-layers)"
    )
    last_stage_layers: int | None = Field(
        default=None, gt=0, description="blocks on the last pipeline stage (Megatron --decoder-last-pipeline-num-layers)"
    )
    embedding_in_split: bool = Field(
        default=False, description="the embedding counts as one layer of the split (--account-for-embedding-in-pipeline-split)"
    )
    loss_in_split: bool = Field(
        default=False, description="the head and loss count as one layer of the split (--account-for-loss-in-pipeline-split)"
    )
    pipeline_schedule: PipelineSchedule | None = Field(
        default=None, description="pipeline schedule (default: 1f1b, interleaved with virtual_stages > 1)"
    )
    microbatch_group: int | None = Field(
        default=None, gt=0,
        description="N, contiguous micro-batches per model chunk of the interleaved schedule (Llama 3; default P)"
    )
    cp_comm_type: CPCommType = Field(
        default=CPCommType.p2p, description="context-parallel K/V exchange: p2p (ring, overlapped) or all_gather (exposed)"
    )

    @model_validator(mode="after")
    def _schedule_fits_the_chunks(self) -> Parallelism:
        sched, v = self.pipeline_schedule, self.virtual_stages
        if sched is None:
            return self
        if sched in (PipelineSchedule.one_f_one_b, PipelineSchedule.zb_h1) and v > 1:
            raise ValueError(f"pipeline_schedule {sched.value} runs one model chunk per stage, not virtual_stages {v}; "
                             "drop --virtual-stages or use --pipeline-schedule interleaved")
        if sched is PipelineSchedule.interleaved and v < 2:
            raise ValueError("pipeline_schedule interleaved needs two or more model chunks per stage; give "
                             "--virtual-stages 2 (or more, or auto)")
        if sched in (PipelineSchedule.zb_v, PipelineSchedule.dualpipe) and v != 2:
            raise ValueError(f"pipeline_schedule {sched.value} runs two model chunks per stage; give --virtual-stages 2 "
                             f"(not {v})")
        if sched is PipelineSchedule.dualpipe and self.pipeline % 2:
            raise ValueError(f"pipeline_schedule dualpipe pairs the stages from both ends: P ({self.pipeline}) must be even")
        return self

    @property
    def schedule(self) -> PipelineSchedule:
        """The schedule in effect: the given one, else 1F1B (interleaved with v > 1)."""
        if self.pipeline_schedule is not None:
            return self.pipeline_schedule
        return PipelineSchedule.interleaved if self.virtual_stages > 1 else PipelineSchedule.one_f_one_b

    @property
    def expert_tensor_size(self) -> int:
        return self.tensor if self.expert_tensor is None else self.expert_tensor

    @property
    def gpus(self) -> int:
        return self.tensor * self.context * self.pipeline * self.data


class Precision(str, Enum):
    """Training precision scheme (seed "Parameters, Gradients, Optimizer States, and Mixed Precision")."""

    mixed = "mixed"  # 16-bit compute copy + fp32 master copy and states (Micikevicius et al. 2018)
    fp32 = "fp32"  # everything in 4 bytes
    bf16 = "bf16"  # pure bf16: weights, gradients and optimizer states in 2 bytes, no master copy


class Optimizer(str, Enum):
    adamw = "adamw"
    adam = "adam"
    sgd = "sgd"
    sgd_momentum = "sgd-momentum"
    lion = "lion"
    adam_8bit = "adam-8bit"  # = adamw-8bit's bytes (bitsandbytes Adam8bit)
    adamw_8bit = "adamw-8bit"  # bitsandbytes AdamW8bit: uint8 moments, fp32 absmax per 256
    paged_adamw_8bit = "paged-adamw-8bit"  # the same in CUDA unified memory (paged to the host)
    adafactor = "adafactor"  # factored second moments for matrices (Shazeer & Stern 2018)
    muon = "muon"  # momentum for hidden matrices, AdamW for the rest (KellerJordan/Muon)


class Finetune(str, Enum):
    """What is trained (docs/formulas.md "Fine-tuning")."""

    full = "full"  # every parameter
    lora = "lora"  # frozen base at the compute dtype + low-rank adapters (Hu et al. 2021)
    qlora = "qlora"  # frozen base in NF4 with double quantization + LoRA adapters (Dettmers et al. 2023)
    dora = "dora"  # LoRA + a magnitude vector per output feature (Liu et al. 2024)


class LoraTarget(str, Enum):
    """Modules adapters go on, by tcalc component; each family's module names map onto them
    (docs/formulas.md "Fine-tuning": the table of module names)."""

    q = "q"
    k = "k"
    v = "v"
    o = "o"
    gate = "gate"
    up = "up"
    down = "down"
    all_linear = "all-linear"  # PEFT's shorthand: every nn.Linear/Conv1D but the output layer
    experts = "experts"  # MoE routed experts' stacked projections (PEFT target_parameters); never in all-linear
    router = "router"  # the MoE router's weight (PEFT target_parameters); never in all-linear
    mixer = "mixer"  # every Linear of the sequence mixers other than softmax attention (in_proj, out_proj, ...)


class Offload(str, Enum):
    """What ZeRO-Offload / ZeRO-Infinity moves off the GPU (Ren et al. 2021; Rajbhandari et al. 2021)."""

    none = "none"
    optimizer = "optimizer"  # optimizer states, fp32 master and the gradient partition
    optimizer_params = "optimizer+params"  # ... and the (ZeRO-3 partitioned) 16-bit parameters


class FP8Recipe(str, Enum):
    """FP8 training recipe (Transformer Engine; Megatron-core's --fp8-recipe names)."""

    none = "none"
    delayed = "delayed"  # per-tensor scales from a 1024-step amax history (Hopper, Ada, Blackwell)
    tensorwise = "tensorwise"  # per-tensor scales from the current amax ("current scaling")
    mxfp8 = "mxfp8"  # one E8M0 scale per 32 values (Blackwell)
    rowwise = "rowwise"  # one fp32 scale per row (torchao Float8 "rowwise"), current scaling
    blockwise = "blockwise"  # DeepSeek-V3: 1x128 activation tiles, 128x128 weight blocks (Megatron --fp8-recipe blockwise)
    nvfp4 = "nvfp4"  # FP4 (E2M1) with an E4M3 scale per 16 values and an fp32 tensor scale (Blackwell; Megatron --fp4-recipe nvfp4)


class OffloadDevice(str, Enum):
    cpu = "cpu"  # host memory (ZeRO-Offload)
    nvme = "nvme"  # NVMe (ZeRO-Infinity)


class Recompute(str, Enum):
    """Activation recomputation (Korthikanti et al. 2022, sec. 5)."""

    none = "none"
    selective = "selective"  # recompute the attention core (QK^T, softmax, dropout, x V)
    full = "full"  # keep only each layer's input; recompute the whole layer in backward
    # torchtitan's per-op selective AC (activation_checkpoint.mode "selective", selective_ac_option
    # "op"; torchtitan/parallelisms/parallelize_llama.py _save_list/_custom_policy): save the output
    # of every odd-numbered mm of a block (forward order), SDPA's outputs and reduce-scatters;
    # recompute every second mm and every other op (norms, RoPE, SwiGLU, all-gathers)
    op = "op"


class ActivationProfile(str, Enum):
    """Which activation accounting to use (docs/formulas.md, "Activations")."""

    default = "default"  # the seed's accounting generalized: GQA, gated MLPs, MoE, head and loss terms
    seed = "seed"  # exactly the seed's per-layer equations (MHA, 2-matrix MLP, masks), nothing else
    torch_eager = "torch-eager"  # what eager PyTorch (HF transformers code) saves for backward, by tensor


class Framework(str, Enum):
    """Whose memory conventions the peak timeline follows (docs/formulas.md §2.5)."""

    pytorch = "pytorch"  # eager PyTorch / HF Trainer / FSDP2: grads live from backward to zero_grad
    megatron = "megatron"  # Megatron-core: persistent grad buffer, fused SwiGLU and cross-entropy
    deepspeed = "deepspeed"  # DeepSpeed ZeRO: its bucket defaults and ZeRO-3 live-parameter budget
    torchtitan = "torchtitan"  # PyTorch's torchtitan: FSDP2 whose sharded parameters are the fp32 master copy


class CrossEntropy(str, Enum):
    """How the loss is computed over the vocabulary."""

    eager = "eager"  # log_softmax + nll_loss on materialized fp32 logits (PyTorch, HF)
    fused = "fused"  # Megatron's vocab-parallel CE: keeps the fp32 softmax, gradient in place
    chunked = "chunked"  # fused linear + CE over token chunks (Liger-style): no B·S·V tensor kept


MASTER_COPY_BYTES = 4  # fp32 master weights in mixed precision (Micikevicius et al. 2018)
_ELEMENT_BYTES = {Precision.mixed: 2, Precision.fp32: 4, Precision.bf16: 2}
_GRAD_BYTES = {Precision.mixed: 4, Precision.fp32: 4, Precision.bf16: 2}  # seed: 4 in mixed


class Training(StrictInputs):
    """How a model is trained: precision, optimizer, recomputation, attention kernel.

    `p` is the seed's p: bytes per element of the compute copy of the weights and of activations
    (2 in mixed and pure bf16, 4 in fp32). Gradient bytes default to the seed's 4 in mixed
    precision ("they have to be converted to p=4"); many stacks keep 2 (`grad_bytes: 2`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    precision: Precision = Precision.mixed
    p: int = Field(gt=0, description="bytes per activation / compute-weight element")
    grad_bytes: int = Field(gt=0, le=8, description="bytes per gradient element")
    optimizer: Optimizer = Optimizer.adamw
    recompute: Recompute = Recompute.none
    flash: bool = Field(default=False, description="FlashAttention: no S x S scores stored")
    dropout: bool | None = Field(default=None, description="dropout masks stored (default: model.dropout > 0)")
    activations: ActivationProfile = ActivationProfile.default
    head_activations: bool = Field(default=True, description="count embedding, final norm, head, loss")
    framework: Framework = Framework.pytorch
    cross_entropy: CrossEntropy | None = Field(
        default=None, description="loss kernel (default: fused for megatron, eager otherwise)"
    )
    micro_batches: int | None = Field(
        default=None, gt=0, description="micro-batches per optimizer step (default: P; 1 without a pipeline)"
    )
    fused_optimizer: bool | None = Field(
        default=None, description="fused optimizer step, no temporaries (default: false for pytorch's foreach)"
    )
    finetune: Finetune = Field(default=Finetune.full, description="full training, or LoRA / QLoRA / DoRA adapters")
    lora_rank: int = Field(default=16, gt=0, le=65536, description="r, the adapters' rank")
    lora_alpha: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="alpha: scales the adapter output by alpha/r; no effect on memory"
    )
    lora_targets: tuple[LoraTarget, ...] = Field(
        default=(LoraTarget.all_linear,), min_length=1, description="modules that get adapters"
    )
    train_embeddings: bool = Field(default=False, description="the token embedding is trained too (PEFT modules_to_save)")
    fp32_unquantized: bool = Field(
        default=False,
        description="QLoRA: the parameters bitsandbytes leaves unquantized are upcast to fp32 (PEFT prepare_model_for_kbit_training)",
    )
    train_head: bool = Field(default=False, description="the LM head is trained too (PEFT modules_to_save)")
    offload: Offload = Field(default=Offload.none, description="ZeRO-Offload: what lives off the GPU")
    offload_device: OffloadDevice = Field(default=OffloadDevice.cpu, description="cpu (ZeRO-Offload) or nvme (ZeRO-Infinity)")
    fp8_recipe: FP8Recipe = Field(
        default=FP8Recipe.none, description="low-precision (FP8, NVFP4) GEMMs with their weight copies and saved GEMM inputs (Transformer Engine)"
    )
    compile: bool = Field(
        default=False, description="torch.compile: elementwise chains fused (the torchtitan time profile; eager otherwise)"
    )
    frozen_weights: tuple[int, int] | None = Field(
        default=None, exclude=True,
        description="LoRA/DoRA over a checkpoint (set from MODEL, not a job-file key): (stored bytes, parameters) of its "
        "language model; frozen weights are held at that ratio instead of p bytes, as transformers loads a "
        "quantized checkpoint (FP8, GPTQ, AWQ) without dequantizing it",
    )

    @model_validator(mode="after")
    def _fp8_compatible(self) -> Training:
        if self.fp32_unquantized and self.finetune is not Finetune.qlora:
            raise ValueError("fp32_unquantized upcasts what QLoRA leaves unquantized: it needs --finetune qlora")
        if self.finetune is Finetune.full:  # an adapter setting given for full training is an orphan, never silence
            orphans = sorted(self.model_fields_set & {"lora_rank", "lora_alpha", "lora_targets", "train_embeddings",
                                                       "train_head"})
            if orphans:
                raise ValueError(f"{', '.join(orphans)} {'sets' if len(orphans) == 1 else 'set'} the adapters of "
                                 "--finetune lora|qlora|dora; "
                                 f"with full training (finetune: full) drop {'it' if len(orphans) == 1 else 'them'} "
                                 "or give --finetune")
        if self.compile and self.framework is not Framework.torchtitan:
            raise ValueError("compile fuses the eager elementwise kernels of the torchtitan profile; the "
                             f"{self.framework.value} profile already prices fused kernels: drop compile or give "
                             "--framework torchtitan")
        if "offload_device" in self.model_fields_set and self.offload is Offload.none:
            raise ValueError("offload_device says where --offload puts the states; give --offload optimizer "
                             "(or optimizer+params) or drop it")
        if self.fp8_recipe is FP8Recipe.none:
            return self
        if self.precision is Precision.fp32 or self.p != 2:
            raise ValueError(
                f"fp8_recipe {self.fp8_recipe.value} keeps 16-bit weights and activations beside the FP8 copies: "
                f"use precision mixed or bf16 with p 2 (not precision {self.precision.value}, p {self.p})"
            )
        if self.finetune is not Finetune.full:
            raise ValueError(f"fp8_recipe {self.fp8_recipe.value} is modeled for full training; drop it or use --finetune full")
        return self

    @property
    def adapters(self) -> bool:
        return self.finetune is not Finetune.full

    @property
    def loss_kernel(self) -> CrossEntropy:
        if self.cross_entropy is not None:
            return self.cross_entropy
        return CrossEntropy.fused if self.framework is Framework.megatron else CrossEntropy.eager

    @property
    def optimizer_fused(self) -> bool:
        if self.fused_optimizer is not None:
            return self.fused_optimizer
        return self.framework not in (Framework.pytorch, Framework.torchtitan)

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        d = dict(data)
        precision, p = d.get("precision"), d.get("p")
        if precision is None and p is not None:  # the seed: p=4 is plain fp32 training
            d["precision"] = Precision.fp32 if p == 4 else Precision.mixed
        try:
            prec = Precision(d.get("precision") or Precision.mixed)
        except TcalcError:
            raise
        except ValueError:
            return d  # pydantic reports the bad precision with its name
        expected = _ELEMENT_BYTES[prec]
        allowed = (1, 2) if prec is Precision.mixed else (expected,)  # mixed: 16-bit or fp8 compute
        if p is None:
            d["p"] = expected
        elif isinstance(p, int) and not isinstance(p, bool) and p not in allowed:
            raise ValueError(
                f"p ({p}) does not match precision {prec.value} "
                f"({' or '.join(map(str, allowed))}-byte elements); drop p or choose the matching precision"
            )
        if d.get("grad_bytes") is None:
            d["grad_bytes"] = _GRAD_BYTES[prec]
        targets = d.get("lora_targets")
        if isinstance(targets, str):  # "q,v" as typed on the command line
            d["lora_targets"] = [t.strip() for t in targets.split(",") if t.strip()]
        return d


# ============================================================================ job-file sections
# A job file (`--config FILE.yaml`) has `model:` and optional `training:`, `inference:` and
# `checks:` sections. Section keys use descriptive names; the seed's letters and the CLI's short
# flag names are accepted as aliases. Command-line flags override the file.
TRAINING_KEYS: dict[str, str] = {  # canonical key -> which config it belongs to
    "seq_len": "workload",
    "batch_size": "workload",
    "precision": "training",
    "p": "training",
    "grad_bytes": "training",
    "optimizer": "training",
    "recompute": "training",
    "flash": "training",
    "dropout": "training",
    "activations": "training",
    "head_activations": "training",
    "framework": "training",
    "cross_entropy": "training",
    "micro_batches": "training",
    "fused_optimizer": "training",
    "finetune": "training",
    "lora_rank": "training",
    "lora_alpha": "training",
    "lora_targets": "training",
    "train_embeddings": "training",
    "train_head": "training",
    "fp32_unquantized": "training",
    "offload": "training",
    "offload_device": "training",
    "fp8_recipe": "training",
    "compile": "training",
    "tensor": "parallelism",
    "sequence_parallel": "parallelism",
    "pipeline": "parallelism",
    "data": "parallelism",
    "zero": "parallelism",
    "expert": "parallelism",
    "expert_tensor": "parallelism",
    "context": "parallelism",
    "virtual_stages": "parallelism",
    "first_stage_layers": "parallelism",
    "last_stage_layers": "parallelism",
    "embedding_in_split": "parallelism",
    "loss_in_split": "parallelism",
    "pipeline_schedule": "parallelism",
    "cp_comm_type": "parallelism",
    "microbatch_group": "parallelism",
    "gpu": "gpu",
}
INFERENCE_KEYS = {"batch_size", "seq_len", "new_tokens", "tensor", "expert", "dtype", "p", "weight_dtype", "kv_dtype", "cache_kv_heads", "kv_cache", "mla_cache", "gpu", "images", "state_dtype",
                  "matmul_efficiency", "memory_efficiency", "cuda_graphs", "kernel_launch_s", "sequence_overhead_s",
                  "block_size", "memory_utilization", "max_num_batched_tokens", "max_num_seqs", "cuda_context",
                  "activation_peak", "engine_workspace", "ttft_s", "tpot_s", "request_rate", "gpus",
                  "engine", "chunked_prefill", "bench_batch_limits", "request_overhead_s",
                  "redundant_experts", "moe_a2a_overlap", "dispatch_dtype"}
CHECK_KEYS = {"gpu", "max_memory", "min_tokens_per_s", "max_ttft_s", "max_tpot_s"}
SECTION_ALIASES: dict[str, str] = {
    "S": "seq_len",
    "B": "batch_size",
    "T": "tensor",
    "sp": "sequence_parallel",
    "P": "pipeline",
    "dp": "data",
    "ep": "expert",
    "etp": "expert_tensor",
    "cp": "context",
    "head": "head_activations",
}


def canonical_section(name: str, data: Any, allowed: dict[str, str] | set[str] | list[str]) -> dict[str, Any]:
    """A job-file section with aliases resolved; unknown keys are errors with did-you-mean."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TcalcError(f"{name}: must be a mapping of settings, got {type(data).__name__}")
    out: dict[str, Any] = {}
    for key, value in data.items():
        canon = SECTION_ALIASES.get(str(key), str(key))
        if canon not in allowed:
            hint = did_you_mean(key, [*allowed, *SECTION_ALIASES]) or known_list(key, sorted(allowed))
            raise TcalcError(f"{name}: unknown key {clip(key)}; {hint}")
        if canon in out:
            raise TcalcError(f"{name}: {canon} is given twice (as {canon!r} and an alias); keep one")
        out[canon] = value
    return out


def split_training(section: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Canonical training settings -> {'workload': {...}, 'training': {...}, 'parallelism': {...},
    'gpu': {'gpu': name}} (each ready for model_validate)."""
    parts: dict[str, dict[str, Any]] = {"workload": {}, "training": {}, "parallelism": {}, "gpu": {}}
    for key, value in section.items():
        parts[TRAINING_KEYS[key]][key] = value
    return parts


_BYTE_UNITS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def parse_bytes(text: str | int, what: str = "size") -> int:
    """'70GiB' -> 75161927680, '80GB' -> 80000000000, '1.5TiB', '4096' (bytes). GB = 10^9 and
    GiB = 2^30, both explicit; units are case-insensitive. Exact for decimal inputs."""
    import re
    from decimal import Decimal, InvalidOperation

    if isinstance(text, int) and not isinstance(text, bool):
        value, unit = Decimal(text), "b"
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        if not match or match.group(2).lower() not in {"", *_BYTE_UNITS}:
            raise ValueError(f"{what} ({clip(text)}) is not a size; write e.g. 70GiB, 80GB or 1.5TiB")
        digits, _, exponent = match.group(1).lower().partition("e")
        if len(digits.split(".")[0].lstrip("0")) + int(exponent or 0) > MAX_EXPONENT:
            raise ValueError(f"{what} ({clip(text)}) is too large; use a size below 1e{MAX_EXPONENT} bytes")
        try:
            value = Decimal(match.group(1))
        except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
            raise ValueError(f"{what} ({clip(text)}) is not a number") from None
        unit = match.group(2).lower() or "b"
    total = value * _BYTE_UNITS[unit]
    if total <= 0:
        raise ValueError(f"{what} ({clip(text)}) must be positive")
    return int(total)


def resolve(flags: dict[str, Any], section: dict[str, Any] | None = None,
            defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one precedence rule of every command: a flag that was given (not None), then the job
    file's section, then the default."""
    return {**(defaults or {}), **(section or {}), **{k: v for k, v in flags.items() if v is not None}}


def training_configs(
    model: ModelConfig, section: dict[str, Any], flags: dict[str, Any]
) -> tuple[Workload, Training, Parallelism, str | None]:
    """(Workload, Training, Parallelism, gpu name) from a job file's training: section (canonical
    keys) with the command-line flags that are not None overriding it; S defaults to the model's
    max_seq_len."""
    parts = split_training(resolve(flags, section, {"seq_len": model.max_seq_len}))
    gpu = parts["gpu"].get("gpu")
    par = build(Parallelism, parts["parallelism"], "training")
    check_expert_layout(model, par)
    return (
        build(Workload, parts["workload"], "training"),
        build(Training, parts["training"], "training"),
        par,
        None if gpu is None else str(gpu),
    )


def check_expert_layout(model: ModelConfig, par: Parallelism) -> None:
    """Expert parallelism (ep) and expert tensor parallelism (etp) split a mixture-of-experts
    model's routed experts: on a dense model they are an error, never silently ignored."""

    if model.n_experts > 1:
        return
    if par.expert != 1:
        raise TcalcError(f"expert parallelism ep ({par.expert}) needs a mixture-of-experts model "
                         f"({model.name or 'this model'} is dense); use ep 1")
    if par.expert_tensor is not None and par.expert_tensor != par.tensor:
        raise TcalcError(f"expert tensor parallelism etp ({par.expert_tensor}) needs a mixture-of-experts model "
                         f"({model.name or 'this model'} is dense); drop --etp")


# The one parser of whole numbers as people type them (flags, job-file counts, API strings).
_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9, "t": 10**12, "p": 10**15}
_BINARY = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
MAX_EXPONENT = 30  # 1e30 is beyond any count tcalc takes (tokens, FLOPs, lengths): refused before computing


def parse_whole(text: str | int, what: str = "value", low: int = 1, high: int | None = None,
                binary: bool = False) -> int:
    """'8192', '8k', '4M', '1.4T', '70B', '1e3', '1_000' -> an exact int in [low, high]: suffixes
    decimal (k = 10^3, M = 10^6, G/B = 10^9, T = 10^12, P = 10^15), or binary with `binary`
    (sequence lengths: 8k = 8192). A fraction, a number out of range, or an exponent past
    MAX_EXPONENT is a ValueError naming the value (never a Decimal overflow or a 10^6-digit int)."""
    from decimal import Decimal, InvalidOperation

    if isinstance(text, bool):
        raise ValueError(f"{text} is a boolean, not a number; give a whole number")
    if isinstance(text, int):
        value = text
    else:
        raw = str(text).strip().replace("_", "")
        match = re.fullmatch(r"([+-]?)([0-9]*\.?[0-9]+)(?:[eE]([+-]?[0-9]{1,12}))?\s*([a-zA-Z]?)", raw)
        suffixes = _BINARY if binary else _DECIMAL
        if not match or match.group(4).lower() not in suffixes:
            raise ValueError(f"{clip(text, 40)} is not a whole number (write e.g. 8192, 8k, 4M or 1e3)")
        digits, exponent = match.group(2), int(match.group(3) or 0)
        magnitude = len(digits.split(".")[0].lstrip("0")) + exponent
        if magnitude > MAX_EXPONENT:
            raise ValueError(f"{clip(text, 40)} is too large; use a whole number below 1e{MAX_EXPONENT}")
        try:
            number = Decimal(digits) * (Decimal(10) ** exponent) * suffixes[match.group(4).lower()]
        except InvalidOperation:  # pragma: no cover - the pattern admits only finite decimals
            raise ValueError(f"{clip(text, 40)} is not a number") from None
        if number != number.to_integral_value():
            raise ValueError(f"{clip(text, 40)} is not a whole number")
        value = int(number) * (-1 if match.group(1) == "-" else 1)
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ValueError(f"{clip(value, 40)} is out of range; use a whole number {bound}")
    return value


def parse_count(text: str | int, what: str = "count") -> int:
    """'300e9' -> 300000000000, '1.4T' / '70B' / '7M' / '2k' (decimal suffixes), '4096': an exact
    positive integer (a token budget, a FLOP budget, a parameter count); `parse_whole`'s rules."""
    try:
        return parse_whole(text, what)
    except TcalcError:
        raise
    except ValueError as exc:
        reason = str(exc).split(" (write e.g.")[0]
        if "is not a whole number" in reason and not any(ch.isdigit() for ch in str(text)):
            raise ValueError(f"{what} ({clip(text)}) is not a number; write e.g. 300e9, 1.4T or 70B") from None
        raise ValueError(f"{what} ({clip(text)}): {reason}; write e.g. 300e9, 1.4T or 70B") from None
