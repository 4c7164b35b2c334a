"""Cross-check cases for the multimodal wrappers (issue 22; tools/crosscheck/hf_params.py merges them):
random odd shapes of each wrapper's language model AND of its vision tower and projector keys (each
knob given with probability 1/2, so that the config classes' defaults are exercised too), edge
cases, and published configs (tools/crosscheck/published_configs). transformers builds each with
AutoModelForImageTextToText on the meta device; the whole count and the towers' part must equal
tcalc's."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import hf_cases_2024 as c24

Cfg = dict[str, Any]
R = random.Random


def _maybe(r: R, cfg: Cfg, **knobs: Any) -> Cfg:
    for key, value in knobs.items():
        if r.random() < 0.5:
            cfg[key] = value
    return cfg


def _heads(r: R) -> tuple[int, int]:
    """(hidden, heads) of a small vision encoder, hidden divisible by heads (every encoder checks)."""
    heads = r.choice([1, 2, 3, 4])
    return heads * r.choice([8, 16, 24]), heads


# ------------------------------------------------------------------ vision configs, one per tower family
def _depth_alias(r: R, v: Cfg) -> Cfg:
    """Sometimes write depth/num_heads under their attribute_map names (num_hidden_layers, num_attention_heads)."""
    if r.random() < 0.3:
        v["num_hidden_layers"] = v.pop("depth")
    if r.random() < 0.3:
        v["num_attention_heads"] = v.pop("num_heads")
    return v


def siglip(r: R) -> Cfg:
    h, a = _heads(r)
    patch = r.choice([2, 4, 7])
    v: Cfg = {"hidden_size": h, "num_attention_heads": a, "num_hidden_layers": r.randint(1, 3),
              "intermediate_size": r.randint(3, 90), "patch_size": patch, "image_size": patch * r.choice([2, 4, 6])}
    return _maybe(r, v, vision_use_head=r.random() < 0.5, num_channels=r.choice([1, 3]))


def llama4_vision(r: R) -> Cfg:
    h, a = _heads(r)
    patch = r.choice([2, 4])
    v: Cfg = {"hidden_size": h, "num_attention_heads": a, "num_hidden_layers": r.randint(1, 3),
              "intermediate_size": r.randint(3, 90), "patch_size": patch, "image_size": patch * r.choice([2, 4]),
              "vision_output_dim": r.randint(4, 90), "projector_input_dim": r.randint(4, 60)}
    v["projector_output_dim"] = v["projector_input_dim"]  # modeling_llama4.py: fc1's output feeds fc2
    return _maybe(r, v, num_channels=r.choice([1, 3]), pixel_shuffle_ratio=0.5)


def pixtral(r: R) -> Cfg:
    h, a = _heads(r)
    patch = r.choice([2, 4, 7])
    v: Cfg = {"model_type": "pixtral", "hidden_size": h, "num_attention_heads": a, "head_dim": h // a,
              "num_hidden_layers": r.randint(1, 3), "intermediate_size": r.randint(3, 90), "patch_size": patch,
              "image_size": patch * r.choice([4, 8])}
    return _maybe(r, v, num_channels=r.choice([1, 3]))


def qwen2_5_vision(r: R) -> Cfg:
    h, a = _heads(r)
    v: Cfg = {"depth": r.randint(1, 3), "hidden_size": h, "num_heads": a, "intermediate_size": r.randint(3, 90),
              "out_hidden_size": r.randint(4, 90), "fullatt_block_indexes": [0]}
    return _depth_alias(r, _maybe(r, v, patch_size=r.choice([2, 14]), temporal_patch_size=r.choice([1, 2]),
                                  spatial_merge_size=r.choice([1, 2, 3]), in_channels=r.choice([1, 3])))


def qwen3_vision(r: R) -> Cfg:
    h, a = _heads(r)
    depth = r.randint(1, 4)
    v: Cfg = {"depth": depth, "hidden_size": h, "num_heads": a, "intermediate_size": r.randint(3, 90),
              "out_hidden_size": r.randint(4, 90), "num_position_embeddings": r.choice([4, 16, 25, 30])}
    _maybe(r, v, patch_size=r.choice([2, 16]), temporal_patch_size=r.choice([1, 2]),
                  spatial_merge_size=r.choice([1, 2]), in_channels=r.choice([1, 3]),
                  deepstack_visual_indexes=sorted(r.sample(range(depth), r.randint(0, depth))))
    return _depth_alias(r, v)


def glm4v_vision(r: R) -> Cfg:
    h, a = _heads(r)
    patch = r.choice([2, 14])
    v: Cfg = {"depth": r.randint(1, 3), "hidden_size": h, "num_heads": a, "intermediate_size": r.randint(3, 90),
              "out_hidden_size": r.randint(4, 90), "patch_size": patch, "image_size": patch * r.choice([2, 4, 5])}
    return _depth_alias(r, _maybe(r, v, temporal_patch_size=r.choice([1, 2]), spatial_merge_size=r.choice([1, 2]),
                                  in_channels=r.choice([1, 3]), attention_bias=r.random() < 0.5))


def kimi_vision(r: R) -> Cfg:
    a = r.choice([1, 2, 4])
    v: Cfg = {"hidden_size": a * r.choice([8, 16]), "num_attention_heads": a, "num_hidden_layers": r.randint(1, 3),
              "intermediate_size": r.randint(3, 90), "pos_emb_height": r.randint(2, 9), "pos_emb_width": r.randint(2, 9)}
    return _maybe(r, v, patch_size=r.choice([2, 14]), merge_kernel_size=r.choice([[2, 2], [1, 2], [3, 1]]))


# ------------------------------------------------------------------ language models (the text readers' generators)
def _text(model_type: str, gen: Callable[[R], Cfg]) -> Callable[[R], Cfg]:
    def make(r: R) -> Cfg:
        cfg = gen(r)
        cfg["model_type"] = model_type
        return cfg

    return make


def voxtral_audio(r: R) -> Cfg:
    h, a = _heads(r)
    v: Cfg = {"num_hidden_layers": r.randint(1, 3), "hidden_size": h, "num_attention_heads": a,
              "intermediate_size": r.randint(3, 90), "num_mel_bins": r.choice([8, 80, 128]),
              "max_source_positions": r.choice([16, 100, 1500])}
    if r.random() < 0.3:  # Whisper's names (VoxtralEncoderConfig.attribute_map)
        v["d_model"], v["encoder_layers"] = v.pop("hidden_size"), v.pop("num_hidden_layers")
    return v


def _llama_text(r: R) -> Cfg:
    cfg = c24._base(r, "llama", head_dim=False)  # LlamaConfig validates hidden_size % heads
    _maybe(r, cfg, attention_bias=r.random() < 0.5, mlp_bias=r.random() < 0.5)
    return cfg


def _qwen2_5_text(r: R) -> Cfg:
    cfg = c24._base(r, "qwen2_5_vl_text", head_dim=False)  # head_dim = hidden // heads, exact
    _maybe(r, cfg, use_sliding_window=r.random() < 0.5, sliding_window=r.randint(4, 64), max_window_layers=r.randint(0, 4))
    return cfg


def _glm4v_text(r: R) -> Cfg:
    cfg = c24._base(r, "glm4v_text", head_dim=False)
    _maybe(r, cfg, head_dim=16)  # not a Glm4vTextConfig field: ignored (hidden // heads)
    return cfg


TEXT: dict[str, Callable[[R], Cfg]] = {
    "gemma3": c24.gen_dense("gemma3_text"),
    "llama4": c24.gen_llama4,
    "mistral3": c24.gen_mistral,
    "qwen2_5_vl": _qwen2_5_text,
    "qwen3_vl": _text("qwen3_vl_text", c24.gen_dense("qwen3")),
    "qwen3_vl_moe": _text("qwen3_vl_moe_text", c24.gen_qwen_moe("qwen3_moe")),
    "glm4v": _glm4v_text,
    "glm4v_moe": _text("glm4v_moe_text", c24.gen_deepseek_like("glm4_moe")),
    "kimi_k25": c24.gen_deepseek_like("deepseek_v3"),
    "voxtral": _llama_text,
}
VISION: dict[str, Callable[[R], Cfg]] = {
    "gemma3": siglip, "llama4": llama4_vision, "mistral3": pixtral, "qwen2_5_vl": qwen2_5_vision,
    "qwen3_vl": qwen3_vision, "qwen3_vl_moe": qwen3_vision, "glm4v": glm4v_vision, "glm4v_moe": glm4v_vision,
    "kimi_k25": kimi_vision, "voxtral": voxtral_audio,
}  # fmt: skip


def gen_multimodal(model_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        text = TEXT[model_type](r)
        if model_type == "kimi_k25" and r.random() < 0.5:
            text["model_type"] = "kimi_k2"  # Kimi K2.5's hub text_config (configuration_kimi_k25.py maps it)
        tower_key = "audio_config" if model_type == "voxtral" else "vision_config"
        cfg: Cfg = {"model_type": model_type, tower_key: VISION[model_type](r)}
        if model_type == "qwen2_5_vl" and r.random() < 0.5:  # a flat hub save: the text keys at the top
            cfg |= {k: v for k, v in text.items() if k != "model_type"}
        else:
            cfg["text_config"] = text
        _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5)
        if model_type == "gemma3":
            _maybe(r, cfg, mm_tokens_per_image=r.choice([1, 4]))
        if model_type == "mistral3":
            _maybe(r, cfg, spatial_merge_size=r.choice([1, 2]), multimodal_projector_bias=r.random() < 0.5,
                   vision_feature_layer=r.choice([-1, [-1, -2], [0, 1, 2]]))
        if model_type == "kimi_k25":
            _maybe(r, cfg, projection_hidden_size=cfg["vision_config"]["hidden_size"])
            cfg.setdefault("projection_hidden_size", cfg["vision_config"]["hidden_size"])  # pre_norm's width must match
        return cfg

    return gen


GENERATORS: dict[str, Callable[[R], Cfg]] = {t: gen_multimodal(t) for t in TEXT}

_T = {"vocab_size": 500, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 96,
      "num_key_value_heads": 2}  # fmt: skip
_TINY_SIGLIP = {"hidden_size": 32, "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 40,
                "patch_size": 4, "image_size": 16}  # fmt: skip
EDGE: list[tuple[str, Cfg]] = [
    # the published vision towers at their default shapes (no vision_config: the config class's own)
    ("vision-defaults", {"model_type": "qwen2_5_vl", "vocab_size": 500, "hidden_size": 64, "num_hidden_layers": 1,
                         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96}),
    ("vision-defaults", {"model_type": "qwen3_vl", "text_config": {**_T, "head_dim": 16}}),
    ("vision-defaults", {"model_type": "qwen3_vl_moe", "text_config": {**_T, "head_dim": 16, "num_experts": 4,
                                                                      "num_experts_per_tok": 2, "moe_intermediate_size": 16}}),
    ("vision-defaults", {"model_type": "glm4v", "text_config": _T}),
    ("vision-defaults", {"model_type": "glm4v_moe", "text_config": {**_T, "n_routed_experts": 4, "num_experts_per_tok": 2,
                                                                   "moe_intermediate_size": 16, "n_group": 1, "topk_group": 1}}),
    ("vision-defaults", {"model_type": "kimi_k25", "text_config": {"model_type": "kimi_k2", **_T, "num_key_value_heads": 4,
                                                                  "q_lora_rank": None, "kv_lora_rank": 16,
                                                                  "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
                                                                  "n_routed_experts": 4, "num_experts_per_tok": 2,
                                                                  "moe_intermediate_size": 16, "n_group": 1, "topk_group": 1}}),
    # the LM head: tied by the wrapper's flag, not text_config's (gemma3, mistral3, qwen3_vl), or by either
    ("tie-from-text-only", {"model_type": "gemma3", "tie_word_embeddings": False, "vision_config": _TINY_SIGLIP,
                            "text_config": {**_T, "head_dim": 16, "tie_word_embeddings": True}}),
    ("tie-forwarded", {"model_type": "glm4v", "text_config": {**_T, "tie_word_embeddings": True}}),
    ("untied-wrapper", {"model_type": "mistral3", "tie_word_embeddings": False,
                        "text_config": {"model_type": "mistral", **_T}}),
    ("siglip-head", {"model_type": "gemma3", "vision_config": {**_TINY_SIGLIP, "vision_use_head": True},
                     "text_config": {**_T, "head_dim": 16}}),
    # Gemma 3 4B as issue 22 reports it (3.88 B printed, 4.30 B built): the text values of the
    # gemma-3-4b preset (Megatron-Bridge Gemma3ModelProvider4B, tools/presets/from_hf.py EXTRA) and the
    # SigLIP-So400m tower of the Gemma 3 technical report (27 layers, 1152 wide, MLP 4304, 16 heads,
    # 896-pixel images in 14-pixel patches, no pooling head); no published config.json was found.
    ("gemma-3-4b-shape", {"model_type": "gemma3", "mm_tokens_per_image": 256,
                          "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 34, "hidden_size": 2560,
                                          "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                                          "intermediate_size": 10240, "sliding_window": 1024, "vocab_size": 262208,
                                          "max_position_embeddings": 131072, "query_pre_attn_scalar": 256},
                          "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                                            "intermediate_size": 4304, "num_hidden_layers": 27,
                                            "num_attention_heads": 16, "image_size": 896, "patch_size": 14,
                                            "vision_use_head": False}}),
]  # fmt: skip
