"""Sub-sections of a ModelConfig: a multimodal model's towers and DeepSeek-V4's blocks.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from transformer_calc.errors import clip


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
