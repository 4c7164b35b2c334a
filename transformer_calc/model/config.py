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

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from transformer_calc.errors import TcalcError, clip, did_you_mean
from transformer_calc.model.checks import (  # noqa: F401  (re-exported)
    DELTANET_FIELDS,
    MAMBA2_FIELDS,
    MAX_BLOCK_LAYERS,
    MAX_PATTERN,
    MAX_SHARED_BLOCK_LAYERS,
    fill_defaults,
)
from transformer_calc.model.jobfile import (  # noqa: F401  (re-exported)
    CHECK_KEYS,
    INFERENCE_KEYS,
    SECTION_ALIASES,
    TRAINING_KEYS,
    canonical_section,
    resolve,
    split_training,
)
from transformer_calc.model.kinds import (  # noqa: F401  (re-exported)
    ACTIVATION_PARAMS,
    ATTENTION_KINDS,
    AttentionBlockKind,
    DEFAULT_EXPANSION,
    DEFAULT_NORMS_PER_LAYER,
    GATED_MLPS,
    LayerAttention,
    LayerStructureKind,
    MLPKind,
    ModelStructure,
    NormKind,
    Positional,
    QKNormScope,
    sequence_mixer_kinds,
)
from transformer_calc.model.mixer_blocks import shown_when_set as mixer_shown_when_set
from transformer_calc.model.parse import (  # noqa: F401  (re-exported)
    MAX_EXPONENT,
    StrictInputs,
    parse_bytes,
    parse_count,
    parse_whole,
    reject_bool_numbers,
)
from transformer_calc.model.sections import DeepseekV4Blocks, Towers  # noqa: F401  (re-exported)
from transformer_calc.model.settings import (  # noqa: F401  (re-exported)
    ActivationProfile,
    CPCommType,
    CrossEntropy,
    FP8Recipe,
    Finetune,
    Framework,
    LoraTarget,
    MASTER_COPY_BYTES,
    Offload,
    OffloadDevice,
    Optimizer,
    Parallelism,
    PipelineSchedule,
    Precision,
    Recompute,
    Training,
    Workload,
)

# ModelConfig's kinds, sections, parsers and checks, the run settings and the job-file keys live in
# sibling modules (model/kinds.py, sections.py, parse.py, checks.py, settings.py, jobfile.py); they are
# re-exported here, the public import path.


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
        model = handler(fill_defaults(given))
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
    def attention_block_kind(self) -> AttentionBlockKind:
        """The softmax-attention block its layers use: MLA when the config gives a KV latent rank
        (kv_lora_rank, DeepseekV3Config), else standard attention (estimators/attention.py's table)."""
        return AttentionBlockKind.mla if self.is_mla else AttentionBlockKind.standard

    @property
    def structure(self) -> ModelStructure:
        """How its layers are priced as a whole: DeepSeek-V4's blocks (the `deepseek_v4` section) by their own
        module, every other model as a stack of layer kinds (the key of the estimators' whole-model tables)."""
        return ModelStructure.layers if self.deepseek_v4 is None else ModelStructure.deepseek_v4

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

    def kv_heads_field(self, kind: LayerAttention) -> str:
        """The field `kv_heads_of(kind)` reads, named in an error about that head count."""
        if kind is LayerAttention.sliding and self.sliding_kv_heads is not None:
            return "sliding_kv_heads"
        return "full_kv_heads" if kind is LayerAttention.full and self.full_kv_heads is not None else "n_kv_heads"

    @property
    def attention_kv_heads(self) -> int:
        """K/V heads the attention core computes with: n_kv_heads, or with MLA n_heads (kv_b_proj expands the
        latent into one K and one V per query head, modeling_deepseek_v3.py DeepseekV3Attention)."""
        return self.n_heads if self.is_mla else self.n_kv_heads

    @property
    def per_kind_attention(self) -> bool:
        """Sliding layers shaped apart from the full ones (their own K/V heads or sinks: MiMo-V2-Flash)."""
        return self.sliding_kv_heads is not None or self.sliding_sinks

    @property
    def layer_structure_kind(self) -> LayerStructureKind:
        """How training prices the layers: Gemma 4's layer classes (its varied layers, with no Gemma 3n,
        DeepSeek-V4, MLA, mixer, shared or per-kind block), attention shaped by its kind (MiMo-V2-Flash: per-kind
        attention, or values narrower than h_d), else every layer from one layer's shapes."""
        if (self.irregular_layers and not self.unpriced_blocks and self.deepseek_v4 is None and not self.is_mla
                and not self.is_hybrid and not self.shared_block_layer_ids and not self.per_kind_attention):
            return LayerStructureKind.gemma4
        if self.per_kind_attention or (not self.is_mla and self.v_dim != self.head_dim):
            return LayerStructureKind.kind_attention
        return LayerStructureKind.uniform

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

    def n_softmax_layers_of(self, kind: LayerAttention) -> int:
        """Layers that run softmax attention of `kind` (full, sliding or chunked): the pattern's, and with
        `mixer_beside_attention` the mixer layers' full attention (their sum over kinds: `n_softmax_layers`)."""
        n = self.n_attention_layers(kind)
        if kind is LayerAttention.full and self.mixer_beside_attention:
            n += sum(self.n_attention_layers(k) for k in self.mixer_kinds)
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
        return sequence_mixer_kinds(self.attention_pattern)

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


# Fields a result's model section lists only when the model sets them (the widths of the mixers other
# than attention, declared with their kinds in model/mixer_blocks.py): the JSON of every attention-only
# model stays as it was.
SHOWN_WHEN_SET = mixer_shown_when_set() | frozenset({
    "train_seq_len",
    "attn_output_gate", "mixer_beside_attention", "one_mixer_per_layer",
    "shared_block_layer_ids", "shared_blocks", "shared_blocks_tied", "shared_block_adapter_rank",
    "shared_attention_adapters", "sliding_kv_heads", "sliding_sinks", "moe_latent_dim",
    # Gemma 4 and Gemma 3n (docs/formulas.md §5.14, §5.15)
    "full_head_dim", "full_kv_heads", "full_k_eq_v", "kv_shared_layers", "kv_shared_double_mlp", "per_layer_input_dim",
    "per_layer_vocab_size", "router_scales", "altup_inputs", "laurel_rank",
    "deepseek_v4",  # DeepSeek-V4 (docs/formulas.md §5.16)
})


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
