"""The towers of a multimodal Hugging Face config: vision (and audio) encoders and projectors.

A multimodal wrapper config (gemma3, llama4, mistral3, qwen2_5_vl, qwen3_vl, qwen3_vl_moe, glm4v,
glm4v_moe, kimi_k25; voxtral with an audio tower) describes its language model in `text_config`
(read by the text readers of `sources.hf` / `sources.hf_2024`) and its towers in `vision_config`
(`audio_config`) and its own keys. This module
counts the towers: one function per tower family, each mirroring the `__init__` of the modeling
file it cites, each count exact (transformers 5.23 on the meta device;
tools/crosscheck/hf_params.py checks the whole model, tools/crosscheck/hf_towers.py each vision
model class alone). The result is the `towers` field of the model spec (`model.config.Towers`).

Conventions:
- `vision` is the vision encoder as its modeling file builds it (patch embedding, positions,
  blocks, its own norms and adapters); `projector` is what maps the encoder's output into the
  language model's width (a wrapper's multi_modal_projector / mm_projector, Qwen's and GLM's
  patch mergers inside `visual`, Qwen3-VL's DeepStack mergers).
- Tokens per image, for a square image at the tower's native grid (one tile, one temporal patch):
  Gemma 3 `mm_tokens_per_image`; Llama 4 one tile of image_size, (image_size/patch)^2 patches
  + the class token, pixel-shuffled by pixel_shuffle_ratio^2; Pixtral image_size (its largest),
  merged spatial_merge_size^2 to one token, plus one [IMG_BREAK]/[IMG_END] token per row;
  Qwen3-VL / Qwen3.5 the position grid (num_position_embeddings patches), Kimi K2.5 its
  pos_emb_height x pos_emb_width grid, GLM-4V image_size/patch_size per side, each merged
  spatial_merge_size^2 (Kimi merge_kernel_size) to one token; Qwen2.5-VL has no native size (its
  processor resizes between min_pixels and max_pixels): tcalc takes a 448 x 448 image,
  (448/patch_size)^2 patches. Begin/end-of-image marker tokens are not counted (Pixtral's row
  breaks are: one per row of merged tokens).
"""

from __future__ import annotations

from typing import Any

from transformer_calc.errors import TcalcError
from transformer_calc.sources.hf_base import Family, Reader

REFERENCE_IMAGE_PX = 448  # Qwen2.5-VL (dynamic resolution, no native size): the image tcalc prices


# configuration_{qwen2_5_vl,qwen3_vl,glm4v,glm4v_moe,qwen3_5}.py vision configs: attribute_map names,
# applied after the fields (they win)
DEPTH_ALIASES = {"num_hidden_layers": "depth", "num_attention_heads": "num_heads"}


def _read(kind: str, cfg: Any, defaults: dict[str, Any], aliases: dict[str, str] | None = None) -> Reader:
    """The sub-config's values over its config class's field defaults (None: every default)."""
    if cfg is None:
        cfg = {}
    if not isinstance(cfg, dict):
        raise TcalcError(f"config.json ({kind}): vision_config must be a JSON object")
    aliases = aliases or {}
    # errors read "config.json (vision_config: <its model_type>): <key> (<value>) must be ..."
    return Reader(f"vision_config: {kind}", cfg, Family(lambda c: {}, defaults, (), aliases, frozenset(aliases)))



def _grid(c: Reader, image: str = "image_size", patch: str = "patch_size") -> int:
    """Patches per side: image_size // patch_size (the position table's side, as the modeling
    files compute it)."""
    c.positive(image, patch)
    return c.int(image) // c.int(patch)


def linear(n_in: int, n_out: int, bias: bool) -> int:
    """nn.Linear(n_in, n_out, bias): weight n_out x n_in (+ bias n_out)."""
    return n_in * n_out + (n_out if bias else 0)


def layernorm(width: int) -> int:
    """nn.LayerNorm(width): weight + bias."""
    return 2 * width


def rmsnorm(width: int) -> int:
    """An RMSNorm: weight only."""
    return width


# ============================================================================ SigLIP + Gemma 3
SIGLIP_DEFAULTS = {  # configuration_siglip.py SiglipVisionConfig
    "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
    "num_channels": 3, "image_size": 224, "patch_size": 16, "vision_use_head": True,
}  # fmt: skip


def siglip_vision(cfg: Any) -> int:
    """modeling_siglip.py SiglipVisionModel: SiglipVisionEmbeddings (patch_embedding Conv2d
    C->h, kernel p, with bias; position_embedding (image_size//p)^2 x h), SiglipEncoder of
    num_hidden_layers SiglipEncoderLayer (layer_norm1/2, q/k/v/out_proj h x h with bias, fc1/fc2
    h <-> F with bias), post_layernorm, and with vision_use_head the
    SiglipMultiheadAttentionPoolingHead (probe h, nn.MultiheadAttention: in_proj 3h x h + 3h,
    out_proj h x h + h; layernorm; a SiglipMLP)."""
    c = _read("siglip_vision_model", cfg, SIGLIP_DEFAULTS)
    c.positive("hidden_size", "num_hidden_layers", "num_channels", "intermediate_size")
    h, F, p, C = c.int("hidden_size"), c.int("intermediate_size"), c.int("patch_size"), c.int("num_channels")
    embeddings = C * h * p * p + h + _grid(c) ** 2 * h
    mlp = linear(h, F, True) + linear(F, h, True)
    layer = 2 * layernorm(h) + 4 * linear(h, h, True) + mlp
    head = h + (3 * h * h + 3 * h) + linear(h, h, True) + layernorm(h) + mlp if c.flag("vision_use_head") else 0
    return embeddings + c.int("num_hidden_layers") * layer + layernorm(h) + head


def gemma3_projector(vision_hidden: int, text_hidden: int) -> int:
    """modeling_gemma3.py Gemma3MultiModalProjector: mm_input_projection_weight (h_vision x D) and
    mm_soft_emb_norm (Gemma3RMSNorm(h_vision)); the average pool has no parameters."""
    return vision_hidden * text_hidden + rmsnorm(vision_hidden)


# ============================================================================ Llama 4
LLAMA4_VISION_DEFAULTS = {  # configuration_llama4.py Llama4VisionConfig
    "hidden_size": 768, "num_hidden_layers": 34, "num_attention_heads": 16, "num_channels": 3,
    "intermediate_size": 5632, "vision_output_dim": 7680, "image_size": 448, "patch_size": 14,
    "pixel_shuffle_ratio": 0.5, "projector_input_dim": 4096, "projector_output_dim": 4096,
}  # fmt: skip


def llama4_vision(cfg: Any) -> int:
    """modeling_llama4.py Llama4VisionModel: Llama4UnfoldConvolution (Linear C·p·p -> h, no bias),
    class_embedding h, positional_embedding_vlm ((image_size//p)^2 + 1) x h, layernorm_pre/post,
    num_hidden_layers Llama4VisionEncoderLayer (q/k/v/o h x h with bias, Llama4VisionMLP fc1/fc2
    h <-> F with bias, two LayerNorms), and the vision_adapter Llama4VisionMLP2 (fc1
    F -> projector_input_dim, fc2 projector_output_dim^2, no biases)."""
    c = _read("llama4_vision_model", cfg, LLAMA4_VISION_DEFAULTS)
    c.positive("hidden_size", "num_hidden_layers", "num_channels", "intermediate_size")
    h, F, p, C = c.int("hidden_size"), c.int("intermediate_size"), c.int("patch_size"), c.int("num_channels")
    n_pos = _grid(c) ** 2 + 1  # + the class token
    layer = 4 * linear(h, h, True) + linear(h, F, True) + linear(F, h, True) + 2 * layernorm(h)
    adapter = linear(F, c.int("projector_input_dim"), False) + linear(c.int("projector_output_dim"), c.int("projector_output_dim"), False)
    return C * p * p * h + h + n_pos * h + 2 * layernorm(h) + c.int("num_hidden_layers") * layer + adapter


def llama4_projector(cfg: Any, text_hidden: int) -> int:
    """modeling_llama4.py Llama4MultiModalProjector: linear_1 vision_output_dim -> D, no bias."""
    c = _read("llama4_vision_model", cfg, LLAMA4_VISION_DEFAULTS)
    return linear(c.int("vision_output_dim"), text_hidden, False)


def _llama4_tokens(cfg: Any) -> tuple[int, int]:
    """(LM tokens, encoder patches) of one tile: pixel_shuffle (modeling_llama4.py) keeps
    ratio^2 of the (image_size//p)^2 patch tokens; the encoder also runs the class token."""
    from fractions import Fraction

    c = _read("llama4_vision_model", cfg, LLAMA4_VISION_DEFAULTS)
    n = _grid(c) ** 2
    ratio = c.values.get("pixel_shuffle_ratio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise c._bad("pixel_shuffle_ratio", "a number in (0, 1]")
    return int(n * Fraction(str(ratio)) ** 2), n + 1


# ============================================================================ Pixtral + Mistral 3
PIXTRAL_DEFAULTS = {  # configuration_pixtral.py PixtralVisionConfig
    "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
    "num_channels": 3, "image_size": 1024, "patch_size": 16,
}  # fmt: skip
# configuration_mistral3.py: without a vision_config, Mistral3Config builds this PixtralVisionConfig
MISTRAL3_VISION_DEFAULTS = PIXTRAL_DEFAULTS | {
    "intermediate_size": 4096, "hidden_size": 1024, "patch_size": 14, "image_size": 1540, "num_hidden_layers": 24,
    "num_attention_heads": 16,
}  # fmt: skip


def pixtral_vision(cfg: Any, defaults: dict[str, Any] = PIXTRAL_DEFAULTS) -> int:
    """modeling_pixtral.py PixtralVisionModel: patch_conv (Conv2d C -> h, kernel p, no bias),
    ln_pre (PixtralRMSNorm(h)), num_hidden_layers PixtralAttentionLayer (attention_norm, ffn_norm
    RMSNorms; q/k/v/o h x h, no bias; gated PixtralMLP gate/up/down h <-> F, no bias); the 2-D
    rotary embedding has no parameters."""
    c = _read("pixtral", cfg, defaults)
    c.positive("hidden_size", "num_hidden_layers", "num_channels", "intermediate_size", "patch_size")
    h, F, p, C = c.int("hidden_size"), c.int("intermediate_size"), c.int("patch_size"), c.int("num_channels")
    layer = 2 * rmsnorm(h) + 4 * h * h + 3 * h * F
    return C * p * p * h + rmsnorm(h) + c.int("num_hidden_layers") * layer


def mistral3_projector(top: Reader, vision: Any, text_hidden: int) -> int:
    """modeling_mistral3.py Mistral3MultiModalProjector: norm (Mistral3RMSNorm(h_vision)),
    patch_merger.merging_layer (h·s^2 -> h, no bias), linear_1 (h·n_layers -> D) and linear_2
    (D -> D), with bias = multimodal_projector_bias; n_layers = len(vision_feature_layer) for a
    list, else 1."""
    h = _read("pixtral", vision, MISTRAL3_VISION_DEFAULTS if vision is None else PIXTRAL_DEFAULTS).int("hidden_size")
    s = top.int("spatial_merge_size")
    layers = top.values.get("vision_feature_layer")
    n_layers = len(layers) if isinstance(layers, list) else 1
    bias = top.flag("multimodal_projector_bias")
    return rmsnorm(h) + linear(h * s * s, h, False) + linear(h * n_layers, text_hidden, bias) + linear(text_hidden, text_hidden, bias)


# ============================================================================ Qwen2.5-VL
QWEN2_5_VISION_DEFAULTS = {  # configuration_qwen2_5_vl.py Qwen2_5_VLVisionConfig
    "depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "num_heads": 16, "in_channels": 3,
    "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 3584,
}  # fmt: skip


def qwen2_5_vl_vision(cfg: Any) -> tuple[int, int]:
    """(encoder, merger) of modeling_qwen2_5_vl.py Qwen2_5_VisionTransformerPretrainedModel:
    patch_embed (Conv3d C -> h, kernel t x p x p, no bias), depth Qwen2_5_VLVisionBlock (norm1/2
    RMSNorm(h); attn qkv h -> 3h with bias, proj h x h with bias; gated Qwen2_5_VLMLP gate/up/down
    h <-> F with bias), and the merger Qwen2_5_VLPatchMerger (ln_q RMSNorm(h), mlp Linear(h·s^2,
    h·s^2) + Linear(h·s^2, out_hidden_size), with biases)."""
    c = _read("qwen2_5_vl_vision", cfg, QWEN2_5_VISION_DEFAULTS, DEPTH_ALIASES)
    c.positive("depth", "hidden_size", "intermediate_size", "in_channels", "patch_size", "temporal_patch_size")
    h, F, s = c.int("hidden_size"), c.int("intermediate_size"), c.int("spatial_merge_size")
    p, t, C = c.int("patch_size"), c.int("temporal_patch_size"), c.int("in_channels")
    block = 2 * rmsnorm(h) + linear(h, 3 * h, True) + linear(h, h, True) + 2 * linear(h, F, True) + linear(F, h, True)
    merged = h * s * s
    merger = rmsnorm(h) + linear(merged, merged, True) + linear(merged, c.int("out_hidden_size"), True)
    return C * t * p * p * h + c.int("depth") * block, merger


# ============================================================================ Qwen3-VL, Qwen3.5
QWEN3_VL_VISION_DEFAULTS = {  # configuration_qwen3_vl.py Qwen3VLVisionConfig (= Qwen3VLMoe's, Qwen3_5's)
    "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3,
    "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 3584,
    "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24],
}  # fmt: skip


def qwen3_vl_vision(cfg: Any, deepstack: bool = True) -> tuple[int, int]:
    """(encoder, mergers) of modeling_qwen3_vl.py Qwen3VLVisionModel: patch_embed (Conv3d C -> h,
    kernel t x p x p, with bias), pos_embed (num_position_embeddings x h), depth Qwen3VLVisionBlock
    (norm1/2 LayerNorm(h); attn qkv h -> 3h and proj h x h with biases; Qwen3VLVisionMLP
    linear_fc1/fc2 h <-> F with biases); the merger Qwen3VLVisionPatchMerger (norm LayerNorm(h),
    linear_fc1 h·s^2 -> h·s^2, linear_fc2 -> out_hidden_size, biases) and, with `deepstack`, one
    more merger per deepstack_visual_indexes entry whose norm is LayerNorm(h·s^2)
    (use_postshuffle_norm). Qwen3.5's Qwen3_5VisionModel (modeling_qwen3_5.py) is the same
    without the DeepStack mergers: `qwen3_5_vision`."""
    c = _read("qwen3_vl_vision", cfg, QWEN3_VL_VISION_DEFAULTS, DEPTH_ALIASES)
    c.positive("depth", "hidden_size", "intermediate_size", "in_channels", "patch_size", "temporal_patch_size")
    h, F, s = c.int("hidden_size"), c.int("intermediate_size"), c.int("spatial_merge_size")
    p, t, C = c.int("patch_size"), c.int("temporal_patch_size"), c.int("in_channels")
    block = 2 * layernorm(h) + linear(h, 3 * h, True) + linear(h, h, True) + linear(h, F, True) + linear(F, h, True)
    encoder = C * t * p * p * h + h + c.int("num_position_embeddings") * h + c.int("depth") * block
    merged = h * s * s
    mlp = linear(merged, merged, True) + linear(merged, c.int("out_hidden_size"), True)
    mergers = layernorm(h) + mlp
    if deepstack:
        indexes = c.values.get("deepstack_visual_indexes")
        if not isinstance(indexes, list):
            raise c._bad("deepstack_visual_indexes", "a list of block indices")
        mergers += len(indexes) * (layernorm(merged) + mlp)
    return encoder, mergers


def qwen3_5_vision(cfg: Any) -> tuple[int, int]:
    """(encoder, merger) of modeling_qwen3_5.py Qwen3_5VisionModel (Qwen3-VL's, no DeepStack)."""
    return qwen3_vl_vision(cfg, deepstack=False)


def _qwen3_vl_grid(cfg: Any) -> int:
    """Patches per side of the learned position grid: int(num_position_embeddings ** 0.5)
    (Qwen3VLVisionModel.num_grid_per_side)."""
    import math

    c = _read("qwen3_vl_vision", cfg, QWEN3_VL_VISION_DEFAULTS, DEPTH_ALIASES)
    c.positive("num_position_embeddings")
    return math.isqrt(c.int("num_position_embeddings"))


# ============================================================================ GLM-4V
GLM4V_VISION_DEFAULTS = {  # configuration_glm4v.py Glm4vVisionConfig (= Glm4vMoeVisionConfig)
    "depth": 24, "hidden_size": 1536, "attention_bias": False, "num_heads": 12, "in_channels": 3,
    "image_size": 336, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
    "out_hidden_size": 4096, "intermediate_size": 13696,
}  # fmt: skip


def glm4v_vision(cfg: Any) -> tuple[int, int]:
    """(encoder, merger) of modeling_glm4v.py Glm4vVisionModel: embeddings.position_embedding
    ((image_size//p)^2 x h), patch_embed (Conv3d C -> h, kernel t x p x p, with bias), depth
    Glm4vVisionBlock (norm1/2 RMSNorm(h); attn qkv h -> 3h with bias=attention_bias, proj h x h
    without; Glm4VisionMlp gate/up/down h <-> out_hidden_size, no bias), post_conv_layernorm and
    post_layernorm (RMSNorm(h)), downsample (Conv2d h -> out_hidden_size, kernel s, with bias); the
    merger Glm4vVisionPatchMerger (proj out x out, post_projection_norm LayerNorm(out), gate/up/down
    out <-> intermediate_size, no biases)."""
    c = _read("glm4v_vision", cfg, GLM4V_VISION_DEFAULTS, DEPTH_ALIASES)
    c.positive("depth", "hidden_size", "intermediate_size", "in_channels", "temporal_patch_size", "spatial_merge_size")
    h, out, F = c.int("hidden_size"), c.int("out_hidden_size"), c.int("intermediate_size")
    p, t, C, s = c.int("patch_size"), c.int("temporal_patch_size"), c.int("in_channels"), c.int("spatial_merge_size")
    block = 2 * rmsnorm(h) + linear(h, 3 * h, c.flag("attention_bias")) + h * h + 3 * h * out
    encoder = _grid(c) ** 2 * h + C * t * p * p * h + h + c.int("depth") * block + 2 * rmsnorm(h)
    encoder += h * out * s * s + out  # downsample
    merger = out * out + layernorm(out) + 3 * out * F
    return encoder, merger


# ============================================================================ Kimi K2.5 (MoonViT)
KIMI_K25_VISION_DEFAULTS = {  # configuration_kimi_k25.py Kimi_K25VisionConfig
    "patch_size": 14, "pos_emb_height": 64, "pos_emb_width": 64, "pos_emb_time": 4, "num_attention_heads": 16,
    "num_hidden_layers": 27, "hidden_size": 1152, "intermediate_size": 4304, "merge_kernel_size": [2, 2],
}  # fmt: skip


def _pair(c: Reader, name: str) -> tuple[int, int]:
    value = c.values.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value, value]
    if (not isinstance(value, list) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value)):
        raise c._bad(name, "a whole number >= 1 or a pair of them")
    return value[0], value[1]


def kimi_k25_vision(cfg: Any) -> int:
    """modeling_kimi_k25.py Kimi_K25VisionModel: patch_embed.proj (Conv2d 3 -> h, kernel p, with
    bias), pos_emb.position_embeddings (pos_emb_height x pos_emb_width x h), num_hidden_layers
    Kimi_K25VisionEncoderLayer (norm1/2 LayerNorm(h); q/k/v/proj h x h with biases;
    Kimi_K25VisionMLP fc1/fc2 h <-> F with biases), final_layernorm LayerNorm(h)."""
    c = _read("kimi_k25_vision", cfg, KIMI_K25_VISION_DEFAULTS)
    c.positive("hidden_size", "num_hidden_layers", "intermediate_size", "pos_emb_height", "pos_emb_width")
    h, F = c.int("hidden_size"), c.int("intermediate_size")
    ph, pw = _pair(c, "patch_size")
    layer = 2 * layernorm(h) + 4 * linear(h, h, True) + linear(h, F, True) + linear(F, h, True)
    embed = 3 * ph * pw * h + h + c.int("pos_emb_height") * c.int("pos_emb_width") * h
    return embed + c.int("num_hidden_layers") * layer + layernorm(h)


def kimi_k25_projector(top: Reader, vision: Any, text_hidden: int) -> int:
    """modeling_kimi_k25.py Kimi_K25MultimodalProjection: pre_norm LayerNorm(projection_hidden_size),
    in_proj (h·k_h·k_w)^2 and out_proj (h·k_h·k_w -> D), with biases."""
    c = _read("kimi_k25_vision", vision, KIMI_K25_VISION_DEFAULTS)
    kh, kw = _pair(c, "merge_kernel_size")
    merged = c.int("hidden_size") * kh * kw
    return layernorm(top.int("projection_hidden_size")) + linear(merged, merged, True) + linear(merged, text_hidden, True)


# ============================================================================ Voxtral (an audio tower)
VOXTRAL_AUDIO_DEFAULTS = {  # configuration_voxtral.py VoxtralEncoderConfig
    "hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_attention_heads": 20,
    "num_mel_bins": 128, "max_source_positions": 1500,
}  # fmt: skip
# VoxtralEncoderConfig.attribute_map (Whisper's names), applied after the fields
WHISPER_ALIASES = {"d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
                   "encoder_attention_heads": "num_attention_heads", "encoder_ffn_dim": "intermediate_size"}


def voxtral_audio(cfg: Any) -> int:
    """modeling_voxtral.py VoxtralEncoder (Whisper's encoder): conv1 (Conv1d n_mel -> h, kernel 3,
    with bias), conv2 (Conv1d h -> h, kernel 3, with bias), embed_positions (max_source_positions x
    h, a parameter even though frozen), num_hidden_layers VoxtralEncoderLayer (self_attn_layer_norm
    and final_layer_norm LayerNorm(h); q/v/out_proj h x h with bias, k_proj without; fc1/fc2
    h <-> F with biases), layer_norm LayerNorm(h); the average pool has no parameters."""
    c = _read("voxtral_encoder", cfg, VOXTRAL_AUDIO_DEFAULTS, WHISPER_ALIASES)
    c.positive("hidden_size", "intermediate_size", "num_hidden_layers", "num_mel_bins", "max_source_positions")
    h, F = c.int("hidden_size"), c.int("intermediate_size")
    convs = (c.int("num_mel_bins") * h * 3 + h) + (h * h * 3 + h)
    layer = 2 * layernorm(h) + 3 * linear(h, h, True) + h * h + linear(h, F, True) + linear(F, h, True)
    return convs + c.int("max_source_positions") * h + c.int("num_hidden_layers") * layer + layernorm(h)


def voxtral_projector(audio: Any, text_hidden: int) -> int:
    """modeling_voxtral.py VoxtralMultiModalProjector: linear_1 (the audio config's intermediate_size
    -> D: four encoder frames stacked) and linear_2 (D -> D), no biases."""
    c = _read("voxtral_encoder", audio, VOXTRAL_AUDIO_DEFAULTS, WHISPER_ALIASES)
    return linear(c.int("intermediate_size"), text_hidden, False) + linear(text_hidden, text_hidden, False)


# ============================================================================ per wrapper
def wrapper_towers(model_type: str, cfg: dict[str, Any], top: Reader, text_hidden: int) -> dict[str, int]:
    """The `towers` spec (model.config.Towers fields) of a wrapper config; `top` reads the wrapper's
    own keys over its config class's defaults, `text_hidden` is the language model's D."""
    vision = cfg.get("vision_config")
    if model_type == "gemma3":
        v = _read("siglip_vision_model", vision, SIGLIP_DEFAULTS)
        tokens = top.int("mm_tokens_per_image")
        return {"vision": siglip_vision(vision), "projector": gemma3_projector(v.int("hidden_size"), text_hidden),
                "image_tokens": tokens, "image_patches": _grid(v) ** 2}
    if model_type == "llama4":
        tokens, patches = _llama4_tokens(vision)
        return {"vision": llama4_vision(vision), "projector": llama4_projector(vision, text_hidden),
                "image_tokens": tokens, "image_patches": patches}
    if model_type == "mistral3":
        defaults = MISTRAL3_VISION_DEFAULTS if vision is None else PIXTRAL_DEFAULTS
        v = _read("pixtral", vision, defaults)
        side, s = _grid(v), top.int("spatial_merge_size")
        top.positive("spatial_merge_size")
        rows = side // s  # PixtralProcessor: one [IMG_BREAK]/[IMG_END] token after each row of merged tokens
        return {"vision": pixtral_vision(vision, defaults), "projector": mistral3_projector(top, vision, text_hidden),
                "image_tokens": rows * (rows + 1), "image_patches": side * side}
    if model_type == "qwen2_5_vl":
        encoder, merger = qwen2_5_vl_vision(vision)
        v = _read("qwen2_5_vl_vision", vision, QWEN2_5_VISION_DEFAULTS, DEPTH_ALIASES)
        side = REFERENCE_IMAGE_PX // v.int("patch_size")
        return {"vision": encoder, "projector": merger, "image_patches": side * side,
                "image_tokens": (side // v.int("spatial_merge_size")) ** 2}
    if model_type in ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"):
        # Qwen3.5 (modeling_qwen3_5.py): Qwen3-VL's tower without DeepStack. sources.hf wires qwen3_5 only
        # once its Gated DeltaNet text model has a reader (a WRAPPERS entry: text qwen3_5_text, tie "top").
        encoder, mergers = qwen3_vl_vision(vision) if model_type.startswith("qwen3_vl") else qwen3_5_vision(vision)
        v = _read("qwen3_vl_vision", vision, QWEN3_VL_VISION_DEFAULTS, DEPTH_ALIASES)
        side = _qwen3_vl_grid(vision)
        return {"vision": encoder, "projector": mergers, "image_patches": side * side,
                "image_tokens": (side // v.int("spatial_merge_size")) ** 2}
    if model_type in ("glm4v", "glm4v_moe"):
        encoder, merger = glm4v_vision(vision)
        v = _read("glm4v_vision", vision, GLM4V_VISION_DEFAULTS, DEPTH_ALIASES)
        side = _grid(v)
        return {"vision": encoder, "projector": merger, "image_patches": side * side,
                "image_tokens": (side // v.int("spatial_merge_size")) ** 2}
    if model_type == "kimi_k25":
        v = _read("kimi_k25_vision", vision, KIMI_K25_VISION_DEFAULTS)
        kh, kw = _pair(v, "merge_kernel_size")
        H, W = v.int("pos_emb_height"), v.int("pos_emb_width")
        return {"vision": kimi_k25_vision(vision), "projector": kimi_k25_projector(top, vision, text_hidden),
                "image_patches": H * W, "image_tokens": (H // kh) * (W // kw)}
    if model_type == "gemma4":  # modeling_gemma4.py: vision and audio towers, each optional
        from transformer_calc.sources.hf_gemma4 import gemma4_towers

        return gemma4_towers(cfg, text_hidden)
    if model_type == "gemma3n":  # modeling_gemma3n.py: timm's MobileNetV5, the USM audio encoder, two embedders
        from transformer_calc.sources.hf_gemma3n import gemma3n_towers

        return gemma3n_towers(cfg, top, text_hidden)
    if model_type == "voxtral":  # an audio tower only: no image tokens
        audio = cfg.get("audio_config")
        return {"audio": voxtral_audio(audio), "projector": voxtral_projector(audio, text_hidden),
                "image_tokens": 0, "image_patches": 0}
    raise TcalcError(f"model_type {model_type!r} has no tower reader")  # pragma: no cover - WRAPPERS lists them
