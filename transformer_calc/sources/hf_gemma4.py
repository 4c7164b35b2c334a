"""Gemma 4 (`gemma4`, its language model `gemma4_text`) and Gemma 3n's language model (`gemma3n_text`)
from a Hugging Face config.json.

The ground truth is transformers 5.23's models/gemma4/: configuration_gemma4.py (defaults,
`per_layer_config`, `kv_sharing_modes`) and modeling_gemma4.py (what is built). A Gemma 4 decoder
is Gemma 3's block (four RMSNorms, per-head q/k norms, GeGLU, sliding and full layers) with:

- full-attention layers of their own head width and K/V heads (`global_head_dim`,
  `num_global_key_value_heads`; ModelConfig `full_head_dim`, `full_kv_heads`),
- k-equals-v attention on the full layers (`attention_k_eq_v`: no v_proj; `full_k_eq_v`),
- shared-KV layers (`num_kv_shared_layers`: the last N layers have no k_proj/v_proj/k_norm and
  read the K/V of the last earlier layer of their kind; `kv_shared_layers`), whose MLP may be
  twice as wide (`use_double_wide_mlp`; `kv_shared_double_mlp`),
- per-layer embeddings (`hidden_size_per_layer_input` P, `vocab_size_per_layer_input`: a
  V_ple x L·P table, a D x L·P projection and a gated P-wide input per layer; `per_layer_input_dim`),
- a parallel MoE block (`enable_moe_block`): the dense MLP runs beside the routed experts
  in every layer, each branch with its own norms. tcalc counts the dense MLP as the shared expert
  (it sees every token, as DeepSeek's shared expert does), the router with its two learned
  scales (`router_scales`), and the three extra RMSNorms in `norms_per_layer` (7).

The towers (`gemma4_vision`, `gemma4_audio`, the two `Gemma4MultimodalEmbedder` projectors) are
counted here too (`gemma4_towers`, called by `sources.hf_towers.wrapper_towers`).

Gemma 3n's language model (models/gemma3n/, `_gemma3n_text`) shares the per-layer embeddings and
shared-KV layers and adds AltUp and LAuReL to every layer (docs/formulas.md §5.15); the `gemma3n`
wrapper is refused in `sources.hf` (its vision tower is a timm MobileNetV5).
"""

from __future__ import annotations

from typing import Any

from transformer_calc.errors import TcalcError
from transformer_calc.sources.hf_base import Family, Reader, gated_mlp_kind, rotary_common

GEMMA4_TEXT_DEFAULTS: dict[str, Any] = {  # configuration_gemma4.py Gemma4TextConfig
    "vocab_size": 262_144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131_072, "tie_word_embeddings": True, "attention_bias": False,
    "attention_dropout": 0.0, "sliding_window": 512, "layer_types": None, "use_bidirectional_attention": None,
    "vocab_size_per_layer_input": 262_144, "hidden_size_per_layer_input": 256, "attention_k_eq_v": False,
    "num_kv_shared_layers": 0, "enable_moe_block": False, "use_double_wide_mlp": False, "num_experts": None,
    "top_k_experts": None, "moe_intermediate_size": None,
    # __post_init__ keywords (not fields): kwargs.pop("global_head_dim", 512), ("num_global_key_value_heads", None)
    "global_head_dim": 512, "num_global_key_value_heads": None, "per_layer_config": None,
}  # fmt: skip

SLIDING_WINDOW_PATTERN = 6  # configuration_gemma4.py: layer i slides unless (i + 1) % 6 == 0 (5:1)
MAX_LAYERS = 4096  # the per-layer list is built; longer models are refused (ModelConfig's MAX_PATTERN)
_KINDS = {"sliding_attention": "sliding", "full_attention": "full"}


def _layer_types(c: Reader, L: int) -> list[str]:
    """configuration_gemma4.py __post_init__: the file's layer_types or the 5:1 default, with the last
    layer forced to full_attention (transformers warns and overrides it)."""
    if L > MAX_LAYERS:
        raise c._bad("num_hidden_layers", f"at most {MAX_LAYERS} layers")
    given = c.values.get("layer_types")
    if given is None:
        types = ["sliding_attention" if (i + 1) % SLIDING_WINDOW_PATTERN else "full_attention" for i in range(L)]
    elif isinstance(given, list) and len(given) == L and all(t in _KINDS for t in given):
        types = list(given)
    else:
        raise c._bad("layer_types", f"a list of {L} sliding_attention / full_attention entries")
    if types:
        types[-1] = "full_attention"
    return types


def _full_layer_overrides(c: Reader, types: list[str]) -> tuple[int | None, int | None]:
    """(head_dim, num_key_value_heads) of the full layers when they differ, from `per_layer_config`
    (a full save) or from global_head_dim / num_global_key_value_heads (configuration_gemma4.py:
    the kv override only with attention_k_eq_v). Overrides tcalc cannot express (on a sliding layer,
    or unequal across the full layers) are refused."""
    plc = c.values.get("per_layer_config")
    if plc is None:
        kv = c.opt_int("num_global_key_value_heads") if c.flag("attention_k_eq_v") else None
        return c.int("global_head_dim"), kv
    if not isinstance(plc, dict):
        raise c._bad("per_layer_config", "a mapping of layer index to head_dim / num_key_value_heads")
    seen: set[tuple[int | None, int | None]] = set()
    given: dict[int, tuple[int | None, int | None]] = {}
    for key, value in plc.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else key
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(types) or not isinstance(value, dict) \
                or set(value) - {"head_dim", "num_key_value_heads"} \
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value.values()):
            raise c._bad("per_layer_config", "layer indices mapped to whole head_dim / num_key_value_heads values")
        given[index] = (value.get("head_dim"), value.get("num_key_value_heads"))
    for i, kind in enumerate(types):
        override = given.get(i, (None, None))
        if kind == "sliding_attention" and override != (None, None):
            raise c._bad("per_layer_config", "overrides of the full_attention layers only (tcalc gives sliding "
                                             "layers one head_dim and num_key_value_heads)")
        if kind == "full_attention":
            seen.add(override)
    if len(seen) > 1:
        raise c._bad("per_layer_config", "one override shared by every full_attention layer")
    return next(iter(seen), (None, None))


def _kv_shared_layers(c: Reader, types: list[str], L: int) -> int:
    """`num_kv_shared_layers` (0: none), checked as transformers checks it (configuration_gemma4.py
    kv_sharing_modes, Gemma 3n alike): every layer type has a producer before the shared layers."""
    shared = c.int("num_kv_shared_layers")
    if shared and (not 0 < shared < L or set(types[: L - shared]) != set(types)):
        raise c._bad("num_kv_shared_layers", "below num_hidden_layers, leaving a layer of every type before the "
                                             "shared ones (transformers raises otherwise)")
    return shared or 0


def _gemma4_text(c: Reader) -> dict[str, Any]:
    """modeling_gemma4.py Gemma4ForCausalLM (the module docstring lists what differs from Gemma 3)."""
    if c.values.get("use_bidirectional_attention") == "all":
        raise c._bad("use_bidirectional_attention", "null or \"vision\" (bidirectional text attention is not decoder-only)")
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {
        "mlp": gated_mlp_kind(c, "hidden_activation"), "norms_per_layer": 4, "qk_norm": True, "qk_norm_scope": "head",
    }
    L = spec["n_layers"]
    types = _layer_types(c, L)
    if "sliding_attention" in types:
        spec["sliding_window"] = c.int("sliding_window")
    from transformer_calc.sources.hf_2024 import shortest_period

    spec["attention_pattern"] = [_KINDS[t] for t in shortest_period(types)]
    head_dim, kv = _full_layer_overrides(c, types)
    if head_dim is not None and "full_attention" in types:
        spec["full_head_dim"] = head_dim
    if kv is not None and "full_attention" in types:
        spec["full_kv_heads"] = kv
    if c.flag("attention_k_eq_v") and "full_attention" in types:
        spec["full_k_eq_v"] = True
    if shared := _kv_shared_layers(c, types, L):
        spec["kv_shared_layers"] = shared
        if c.flag("use_double_wide_mlp"):
            spec["kv_shared_double_mlp"] = True
    if (P := c.int("hidden_size_per_layer_input")) < 0:
        raise c._bad("hidden_size_per_layer_input", "a whole number >= 0")
    if P:
        spec["per_layer_input_dim"] = P
        spec["per_layer_vocab_size"] = c.int("vocab_size_per_layer_input")
    if c.flag("enable_moe_block"):
        spec |= {
            "n_experts": c.int("num_experts"), "experts_per_token": c.int("top_k_experts"),
            "moe_d_ff": c.int("moe_intermediate_size"), "router": True, "router_scales": True,
            "shared_expert_d_ff": spec["d_ff"],  # the dense MLP beside the experts
            "norms_per_layer": 7,  # + post_feedforward_layernorm_1/_2, pre_feedforward_layernorm_2
        }
    return spec


GEMMA3N_TEXT_DEFAULTS: dict[str, Any] = {  # configuration_gemma3n.py Gemma3nTextConfig
    "vocab_size": 262_400, "hidden_size": 2048, "intermediate_size": 16_384, "num_hidden_layers": 35,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 32_768, "tie_word_embeddings": True, "attention_bias": False, "attention_dropout": 0.0,
    "sliding_window": 512, "layer_types": None, "vocab_size_per_layer_input": 262_144,
    "hidden_size_per_layer_input": 256, "altup_num_inputs": 4, "num_kv_shared_layers": 15, "laurel_rank": 64,
}  # fmt: skip
GEMMA3N_FULL_EVERY = 5  # configuration_gemma3n.py: layer i is full_attention when (i + 1) % 5 == 0


def _gemma3n_text(c: Reader) -> dict[str, Any]:
    """modeling_gemma3n.py Gemma3nForCausalLM: Gemma 3's block (four RMSNorms, q/k norms of h_d, v_norm
    without scale, GeGLU) with per-layer embeddings and shared-KV layers as Gemma 4's (this module's
    docstring), and in every layer an AltUp (Gemma3nTextAltUp) and a LAuReL residual
    (Gemma3nTextLaurelBlock); the model adds 2·(altup_num_inputs - 1) D x D AltUp projections.
    intermediate_size may be a list (one width per layer): tcalc takes one width for all layers."""
    L = c.int("num_hidden_layers")
    widths = c.values.get("intermediate_size")
    if isinstance(widths, list):
        if len(widths) != L or not widths or any(isinstance(w, bool) or not isinstance(w, int) for w in widths):
            raise c._bad("intermediate_size", f"a whole number or a list of {L} (one per layer)")
        if len(set(widths)) > 1:
            raise c._bad("intermediate_size", "one width for every layer (tcalc's layers share one d_ff)")
        c.values["intermediate_size"] = widths[0]
    D, A = c.int("hidden_size"), c.int("num_attention_heads")
    if A < 1 or D % A:
        raise c._bad("num_attention_heads", f"a divisor of hidden_size ({D}) (Gemma3nTextConfig.validate_architecture)")
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {
        "mlp": gated_mlp_kind(c, "hidden_activation"), "norms_per_layer": 4, "qk_norm": True, "qk_norm_scope": "head",
    }
    if L > MAX_LAYERS:
        raise c._bad("num_hidden_layers", f"at most {MAX_LAYERS} layers")
    given = c.values.get("layer_types")
    if given is None:
        types = ["full_attention" if (i + 1) % GEMMA3N_FULL_EVERY == 0 else "sliding_attention" for i in range(L)]
    elif isinstance(given, list) and len(given) == L and all(t in _KINDS for t in given):
        types = list(given)
    else:
        raise c._bad("layer_types", f"a list of {L} sliding_attention / full_attention entries")
    if "sliding_attention" in types:
        spec["sliding_window"] = c.int("sliding_window")
    from transformer_calc.sources.hf_2024 import shortest_period

    spec["attention_pattern"] = [_KINDS[t] for t in shortest_period(types)]
    if shared := _kv_shared_layers(c, types, L):
        spec["kv_shared_layers"] = shared
    # Gemma3nTextDecoderLayer builds its per-layer input modules whatever P is (with P = 0 an RMSNorm(D) per
    # layer remains, which tcalc's per_layer_input_dim 0, "none", cannot express): P must be >= 1
    if c.int("hidden_size_per_layer_input") < 1:
        raise c._bad("hidden_size_per_layer_input", "a whole number >= 1 (Gemma 3n's per-layer inputs)")
    spec["per_layer_input_dim"] = c.int("hidden_size_per_layer_input")
    spec["per_layer_vocab_size"] = c.int("vocab_size_per_layer_input")
    for key, field in (("altup_num_inputs", "altup_inputs"), ("laurel_rank", "laurel_rank")):
        if (value := c.int(key)) < 1:
            raise c._bad(key, "a whole number >= 1")
        spec[field] = value
    return spec


FAMILIES: dict[str, Family] = {
    "gemma4_text": Family(_gemma4_text, GEMMA4_TEXT_DEFAULTS, ("attention_dropout",)),
    "gemma3n_text": Family(_gemma3n_text, GEMMA3N_TEXT_DEFAULTS, ("attention_dropout",)),
}


# ============================================================================ towers
GEMMA4_VISION_DEFAULTS = {  # configuration_gemma4.py Gemma4VisionConfig
    "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 16, "num_attention_heads": 12,
    "num_key_value_heads": 12, "head_dim": 64, "pooling_kernel_size": 3, "patch_size": 16,
    "position_embedding_size": 10 * 1024,
}  # fmt: skip
GEMMA4_AUDIO_DEFAULTS = {  # configuration_gemma4.py Gemma4AudioConfig
    "hidden_size": 1024, "num_hidden_layers": 12, "num_attention_heads": 8, "subsampling_conv_channels": [128, 32],
    "conv_kernel_size": 5, "output_proj_dims": 1536,
}  # fmt: skip
IMAGE_SOFT_TOKENS = 280  # processing_gemma4.py Gemma4Processor image_seq_length (max_soft_tokens) default
RGB = 3  # Gemma4VisionPatchEmbedder.input_proj reads 3·patch² pixels


def _sub(kind: str, cfg: Any, defaults: dict[str, Any]) -> Reader:
    if not isinstance(cfg, dict):
        raise TcalcError(f"config.json (gemma4): {kind} must be a JSON object")
    return Reader(kind, cfg, Family(lambda c: {}, defaults, ()))



def gemma4_vision(cfg: Any) -> tuple[int, int, int]:
    """(parameters, hidden size, patches per image) of modeling_gemma4.py Gemma4VisionModel:
    Gemma4VisionPatchEmbedder (input_proj 3·p² x h, no bias; position_embedding_table 2 x P_pos x h),
    num_hidden_layers Gemma4VisionEncoderLayer (q/k/v/o of A·h_d and n_kv·h_d, no biases; q_norm and
    k_norm RMSNorm(h_d), v_norm without scale; four RMSNorm(h); a gated MLP h x I x 3), a pooler
    without parameters; `standardize` adds buffers only. Patches per image: the processor's 280 soft
    tokens, each the average of pooling_kernel_size² patches."""
    v = _sub("gemma4_vision", cfg, GEMMA4_VISION_DEFAULTS)
    v.positive("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
               "patch_size", "position_embedding_size", "pooling_kernel_size")
    h, F, A, kv, hd = (v.int(k) for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                          "num_key_value_heads", "head_dim"))
    p, n_pos = v.int("patch_size"), v.int("position_embedding_size")
    layer = h * A * hd + 2 * h * kv * hd + A * hd * h + 2 * hd + 4 * h + 3 * h * F
    params = RGB * p * p * h + 2 * n_pos * h + v.int("num_hidden_layers") * layer
    return params, h, IMAGE_SOFT_TOKENS * v.int("pooling_kernel_size") ** 2


def gemma4_audio(cfg: Any) -> tuple[int, int]:
    """(parameters, output width) of modeling_gemma4.py Gemma4AudioModel (a USM conformer):
    subsample_conv_projection (two Conv2d 3x3 without bias, 1 -> c0 -> c1, each with a LayerNorm
    without bias; input_proj_linear (c0//4)·c1 x h), num_hidden_layers Gemma4AudioLayer (two
    feed-forward modules h x 4h x h with pre/post RMSNorms; attention q/k/v of H·h_d, post h x h,
    relative_k_proj h x H·h_d, per_dim_scale h_d, with h_d = h // H; a light conv: linear_start
    h x 2h, depthwise conv h x K, linear_end h x h and two RMSNorms; three RMSNorms), output_proj
    h x O with bias; the relative position encoding has no parameters."""
    a = _sub("gemma4_audio", cfg, GEMMA4_AUDIO_DEFAULTS)
    a.positive("hidden_size", "num_attention_heads", "conv_kernel_size", "output_proj_dims")
    h, H, K, O = a.int("hidden_size"), a.int("num_attention_heads"), a.int("conv_kernel_size"), a.int("output_proj_dims")
    ch = a.values.get("subsampling_conv_channels")
    if not (isinstance(ch, list) and len(ch) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in ch)):
        raise a._bad("subsampling_conv_channels", "two whole numbers >= 1")
    c0, c1 = ch
    hd = h // H
    W = H * hd
    subsample = 9 * c0 + c0 + 9 * c0 * c1 + c1 + (c0 // 4) * c1 * h
    feed_forward = 2 * (h * 4 * h) + 2 * h
    attention = 3 * h * W + h * h + h * W + hd
    light_conv = 2 * h * h + h * K + h * h + 2 * h
    layer = 2 * feed_forward + attention + light_conv + 3 * h
    return subsample + a.int("num_hidden_layers") * layer + h * O + O, O


def gemma4_towers(cfg: dict[str, Any], text_hidden: int) -> dict[str, int]:
    """modeling_gemma4.py Gemma4Model: vision_tower and embed_vision only when vision_config is given,
    audio_tower and embed_audio only when audio_config is (both optional: configuration_gemma4.py).
    Each Gemma4MultimodalEmbedder is embedding_projection (width x D, no bias) after a norm without scale."""
    out = {"vision": 0, "audio": 0, "projector": 0, "image_tokens": 0, "image_patches": 0}
    if cfg.get("vision_config") is not None:
        params, h, patches = gemma4_vision(cfg["vision_config"])
        out |= {"vision": params, "image_tokens": IMAGE_SOFT_TOKENS, "image_patches": patches}
        out["projector"] += h * text_hidden
    if cfg.get("audio_config") is not None:
        params, width = gemma4_audio(cfg["audio_config"])
        out["audio"] = params
        out["projector"] += width * text_hidden
    return out
