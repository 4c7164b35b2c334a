"""Cross-check cases for Gemma 4 (`gemma4_text`, the `gemma4` wrapper with its vision and audio towers;
tools/crosscheck/hf_params.py merges them): random odd shapes with every Gemma 4 knob given with
probability 1/2 (so that configuration_gemma4.py's defaults are exercised: per-layer embeddings of 256
and global_head_dim 512 are on by default), edge cases, and the published configs
(tools/crosscheck/published_configs/gemma-4-*.json, listed in SOURCES.md)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

Cfg = dict[str, Any]
R = random.Random
PUBLISHED = Path(__file__).resolve().parent / "published_configs"


def _maybe(r: R, cfg: Cfg, **knobs: Any) -> Cfg:
    for key, value in knobs.items():
        if r.random() < 0.5:
            cfg[key] = value
    return cfg


def gen_text(r: R) -> Cfg:
    L = r.randint(1, 7)
    kv = r.choice([1, 2, 3])
    A = kv * r.choice([1, 2, 3])
    cfg: Cfg = {
        "model_type": "gemma4_text",
        "vocab_size": r.randint(50, 700),
        "hidden_size": r.choice([24, 40, 64, 72]),
        "num_hidden_layers": L,
        "num_attention_heads": A,
        "num_key_value_heads": kv,
        "intermediate_size": r.randint(5, 300),
        "head_dim": r.choice([8, 12, 16]),
        "global_head_dim": r.choice([8, 20, 32]),  # the default 512 is large for meta-built toys but fine
        "hidden_size_per_layer_input": r.choice([0, 4, 7]),
    }
    if r.random() < 0.5:
        cfg["layer_types"] = [r.choice(["sliding_attention", "full_attention"]) for _ in range(L)]
    _maybe(r, cfg, attention_k_eq_v=r.random() < 0.6, num_global_key_value_heads=r.choice([1, kv]),
           # at least vocab_size (as published): a smaller per-layer table cannot embed every token id, so a
           # forward (tools/crosscheck/flops.py) cannot run
           vocab_size_per_layer_input=cfg["vocab_size"] + r.randint(0, 300), attention_bias=r.random() < 0.5,
           tie_word_embeddings=r.random() < 0.5, sliding_window=r.choice([4, 64]),
           max_position_embeddings=r.choice([128, 4096]))
    if L > 2 and r.random() < 0.6:
        # shared layers must leave a producer of every kind before them (kv_sharing_modes)
        types = cfg.get("layer_types") or ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(L)]
        types = list(types)
        types[-1] = "full_attention"
        for n in range(L - 1, 0, -1):
            if set(types[: L - n]) == set(types):
                cfg["num_kv_shared_layers"] = r.randint(1, n)
                cfg["use_double_wide_mlp"] = r.random() < 0.5
                break
    if r.random() < 0.4:
        E = r.choice([1, 3, 4, 8])
        cfg |= {"enable_moe_block": True, "num_experts": E, "top_k_experts": r.randint(1, E),
                "moe_intermediate_size": r.randint(3, 40)}
    return cfg


def gen_vision(r: R) -> Cfg:
    kv = r.choice([1, 2])
    return _maybe(r, {"model_type": "gemma4_vision", "hidden_size": r.choice([16, 24, 40]),
                      "num_hidden_layers": r.randint(1, 3)},
                  num_attention_heads=kv * r.choice([1, 2]), num_key_value_heads=kv, head_dim=r.choice([4, 8]),
                  intermediate_size=r.randint(5, 80), patch_size=r.choice([2, 4]),
                  position_embedding_size=r.randint(8, 300), pooling_kernel_size=r.choice([2, 3]),
                  standardize=r.random() < 0.5, use_clipped_linears=r.random() < 0.5)


def gen_audio(r: R) -> Cfg:
    H = r.choice([1, 2, 4])
    return _maybe(r, {"model_type": "gemma4_audio", "hidden_size": H * r.choice([6, 8, 10]),
                      "num_hidden_layers": r.randint(1, 2), "num_attention_heads": H},
                  subsampling_conv_channels=[r.choice([8, 13, 16]), r.choice([4, 6])],
                  conv_kernel_size=r.choice([3, 5]), output_proj_dims=r.choice([12, 48]),
                  use_clipped_linears=r.random() < 0.5)


def gen_wrapper(r: R) -> Cfg:
    text = gen_text(r)
    text.pop("model_type")
    cfg: Cfg = {"model_type": "gemma4", "text_config": text}
    if r.random() < 0.7:
        cfg["vision_config"] = gen_vision(r)
    if r.random() < 0.5:
        cfg["audio_config"] = gen_audio(r)
    return _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5)


def gen_3n_audio(r: R) -> Cfg:
    """gemma3n_audio: Gemma 3n's USM audio encoder (modeling_gemma3n.py Gemma3nAudioEncoder), odd shapes:
    the subsampling kernels and strides, the mel bins and the heads (h // H need not divide h)."""
    H = r.choice([1, 2, 3, 4])
    return {"model_type": "gemma3n_audio", "hidden_size": r.choice([6, 8, 10, 13]) * H + r.choice([0, 0, 1]),
            "conf_num_attention_heads": H, "conf_num_hidden_layers": r.randint(1, 2),
            "conf_conv_kernel_size": r.choice([3, 5]), "input_feat_size": r.randint(6, 40),
            "vocab_size": r.randint(3, 140),
            "sscp_conv_channel_size": [r.choice([4, 8, 13]), r.choice([3, 6])],
            "sscp_conv_kernel_size": [[r.choice([3, 5]), r.choice([2, 3])], [r.choice([1, 3]), r.choice([3, 4])]],
            "sscp_conv_stride_size": [[r.choice([1, 2]), r.choice([1, 2])], [r.choice([1, 2]), r.choice([2, 3])]]}


def gen_3n_wrapper(r: R) -> Cfg:
    """gemma3n: the whole multimodal model (needs timm for its MobileNetV5: tools/crosscheck/gemma3n_timm.py)."""
    text = gen_3n_text(r)
    text.pop("model_type")
    audio = gen_3n_audio(r)
    audio.pop("model_type")
    cfg: Cfg = {"model_type": "gemma3n", "text_config": text, "audio_config": audio,
                "vision_config": {"hidden_size": r.choice([16, 24, 2048]), "vocab_size": r.randint(3, 140)}}
    return _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, vision_soft_tokens_per_image=r.choice([64, 256]))


def gen_3n_text(r: R) -> Cfg:
    """gemma3n_text: Gemma 3n's language model."""
    L = r.randint(1, 12)
    kv = r.choice([1, 2])
    A = kv * r.choice([1, 2, 3])
    F = r.randint(5, 200)
    cfg: Cfg = {"model_type": "gemma3n_text", "vocab_size": r.randint(50, 700), "hidden_size": A * r.choice([6, 8, 12]),
                "num_hidden_layers": L, "num_attention_heads": A, "num_key_value_heads": kv,
                "intermediate_size": F if r.random() < 0.5 else [F] * L, "head_dim": r.choice([4, 8, 12]),
                "hidden_size_per_layer_input": r.choice([1, 3, 4]), "num_kv_shared_layers": 0}
    cfg["vocab_size_per_layer_input"] = cfg["vocab_size"] + r.randint(0, 50)
    if r.random() < 0.5:
        cfg["layer_types"] = [r.choice(["sliding_attention", "full_attention"]) for _ in range(L)]
    types = cfg.get("layer_types") or ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(L)]
    for n in range(L - 1, 0, -1):
        if r.random() < 0.6 and set(types[: L - n]) == set(types):
            cfg["num_kv_shared_layers"] = r.randint(1, n)
            break
    return _maybe(r, cfg, altup_num_inputs=r.choice([1, 2, 4]), laurel_rank=r.randint(1, 9),
                  attention_bias=r.random() < 0.5, tie_word_embeddings=r.random() < 0.5, sliding_window=r.choice([4, 64]),
                  activation_sparsity_pattern=[r.choice([0.0, 0.95]) for _ in range(L)])


GENERATORS: dict[str, Callable[[R], Cfg]] = {"gemma4_text": gen_text, "gemma4": gen_wrapper, "gemma3n_text": gen_3n_text}

_T = {"vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
      "intermediate_size": 48, "head_dim": 8, "global_head_dim": 16, "vocab_size_per_layer_input": 300}
EDGE: list[tuple[str, Cfg]] = [
    ("minimal", {"model_type": "gemma4_text", "vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 2,
                 "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 40, "head_dim": 8,
                 "global_head_dim": 16, "vocab_size_per_layer_input": 400}),
    ("all-full", {"model_type": "gemma4_text", **_T, "layer_types": ["full_attention"] * 6, "attention_k_eq_v": True,
                  "num_global_key_value_heads": 1}),
    # the last layer is forced to full_attention whatever layer_types says (configuration_gemma4.py)
    ("last-forced-full", {"model_type": "gemma4_text", **_T, "layer_types": ["sliding_attention"] * 6}),
    ("shared-kv-double-mlp", {"model_type": "gemma4_text", **_T, "num_kv_shared_layers": 4, "use_double_wide_mlp": True,
                              "layer_types": ["sliding_attention", "full_attention"] * 3}),
    ("moe-shared-kv-double", {"model_type": "gemma4_text", **_T, "enable_moe_block": True, "num_experts": 4,
                              "top_k_experts": 2, "moe_intermediate_size": 12, "num_kv_shared_layers": 2,
                              "use_double_wide_mlp": True, "layer_types": ["sliding_attention", "full_attention"] * 3,
                              "attention_k_eq_v": True, "num_global_key_value_heads": 1}),
    ("no-ple", {"model_type": "gemma4_text", **_T, "hidden_size_per_layer_input": 0}),
    ("wrapper-no-towers", {"model_type": "gemma4", "text_config": {**_T, "hidden_size_per_layer_input": 0}}),
    # gemma3n_text on its defaults except the sizes (altup 4, laurel 64, 15 of 35 layers kv-shared, PLE 256)
    ("minimal", {"model_type": "gemma3n_text", "vocab_size": 300, "hidden_size": 32, "intermediate_size": 40,
                 "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "vocab_size_per_layer_input": 300}),
    ("wrapper-default-towers", {"model_type": "gemma4", "text_config": {**_T, "hidden_size_per_layer_input": 0},
                                "vision_config": {}, "audio_config": {}}),
]

REAL: list[tuple[str, Cfg, int | None]] = [
    (path.stem, json.loads(path.read_text()), None) for path in sorted(PUBLISHED.glob("gemma-4-*.json"))
]
