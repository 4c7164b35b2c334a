"""Hugging Face `config.json` -> tcalc model spec, offline.

`from_hf_config(cfg)` takes the parsed JSON (the CLI reads the file) and returns a raw ModelConfig
spec: plain values keyed by ModelConfig field names. The ground truth is transformers 5.23: each
family's defaults are the field defaults of `models/<type>/configuration_<type>.py`, and each
mapping below mirrors what `models/<type>/modeling_<type>.py` builds, so that
`count_params(ModelConfig.model_validate(from_hf_config(cfg)))` equals
`sum(p.numel() for p in AutoModelForCausalLM.from_config(cfg).parameters())` exactly; for a
multimodal wrapper (WRAPPERS) the language model is read from text_config and its towers are
counted by `sources.hf_towers`, so that `total_params(...)` equals what
`AutoModelForImageTextToText` (voxtral: `AutoModelForSpeechSeq2Seq`) builds
(tools/crosscheck/hf_params.py checks this against transformers; tests/data/hf holds its fixtures).

Conventions:
- A key missing from the file takes the transformers default for that model_type.
- Aliases apply as transformers applies them: the dataclass field first, then the `attribute_map`
  names and backward-compatible keywords (`n_embed`), so an alias given with its field wins.
- Only what the file pins is pinned in the spec: values transformers derives (head_dim = D/A,
  n_kv_heads = A, d_ff = 4*D) are left for ModelConfig to derive, so `--D` overrides re-derive them.
- `dropout` is the largest of the family's dropout probabilities (attention, residual, embedding);
  tcalc has one rate. OPT's `layerdrop` (skipping whole layers) is not a dropout rate.
- Activations: gated MLPs (llama-like) map silu/swish -> swiglu and gelu* -> geglu; plain MLPs map
  gelu* -> gelu and relu -> relu. Other activations have no tcalc MLP kind and are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from transformer_calc.errors import TcalcError, clip, known_list
from transformer_calc.sources.hf_fused import FUSED_LINEARS  # noqa: F401  (re-exported)
from transformer_calc.sources.hf_base import Family, LLAMA_DEFAULTS, Reader, GPT2_NAMES, llama_like, mlp_attention_biases, plain_mlp_kind, rotary_common

def _llama(c: Reader) -> dict[str, Any]:
    # modeling_llama.py: q/k/v/o bias=config.attention_bias; gate/up/down bias=config.mlp_bias
    bias = c.flag("attention_bias")
    return llama_like(c, bias, bias, c.flag("mlp_bias"))


def _mistral(c: Reader) -> dict[str, Any]:
    # modeling_mistral.py, modeling_mixtral.py: every projection bias=False, whatever the file says;
    # a sliding window on every layer when the config sets one (its cache keeps W - 1 tokens)
    spec = llama_like(c, False, False, False)
    window = c.opt_int("sliding_window")
    if window:
        spec |= {"attention_pattern": ["sliding"], "sliding_window": window}
    return spec


def _mixtral(c: Reader) -> dict[str, Any]:
    # modeling_mixtral.py: MixtralExperts gate_up_proj (E, 2F, D) + down_proj (E, D, F), no biases;
    # MixtralTopKRouter weight (E, D), no bias.
    # A 1-expert Mixtral still builds its D-wide router, hence router: true.
    return _mistral(c) | {
        "n_experts": c.int("num_local_experts"),
        "experts_per_token": c.int("num_experts_per_tok"),
        "router": True,
    }


def _qwen2(c: Reader) -> dict[str, Any]:
    # modeling_qwen2.py: q/k/v bias=True, o_proj bias=False, MLP bias=False (hard-coded); sliding
    # layers from max_window_layers on when use_sliding_window (configuration_qwen2.py layer_types)
    spec = llama_like(c, True, False, False)
    if c.values.get("use_sliding_window") is True:
        from transformer_calc.sources.hf_2024 import qwen_pattern

        spec |= qwen_pattern(c, spec["n_layers"])
    return spec


def _gemma(c: Reader) -> dict[str, Any]:
    # modeling_gemma.py: q/k/v/o bias=config.attention_bias, MLP bias=False; hidden_act "gelu" is
    # rewritten to gelu_pytorch_tanh (configuration_gemma.py): geglu either way.
    bias = c.flag("attention_bias")
    return llama_like(c, bias, bias, False)


# ---------------------------------------------------------------- GPT-2 style (learned positions)
def _gpt2(c: Reader) -> dict[str, Any]:
    """modeling_gpt2.py: Conv1D c_attn (D -> 3D) and c_proj with biases, c_fc/c_proj of n_inner
    (None -> 4*D, tcalc's default E = 4), ln_1/ln_2, ln_f, wpe of n_positions, tied lm_head."""
    if c.flag("add_cross_attention"):
        raise c._bad("add_cross_attention", "false (cross-attention blocks are not decoder-only)")
    spec = c.shape() | {
        "mlp": plain_mlp_kind(c, "activation_function"),
        "max_seq_len": c.int("max_position_embeddings"),  # n_positions: the wpe table
        "positional": "learned",
        "norm": "layernorm",
        "bias": True,
        "tied_embeddings": c.flag("tie_word_embeddings"),
    }
    if (n_inner := c.opt_int("n_inner")) is not None:
        spec["d_ff"] = n_inner
    return spec


def _gpt_bigcode(c: Reader) -> dict[str, Any]:
    # modeling_gpt_bigcode.py: GPT-2 with nn.Linear; multi_query: 1 kv head (c_attn D -> D + 2*hd)
    spec = _gpt2(c)
    if c.flag("multi_query"):
        spec["n_kv_heads"] = 1
    return spec


def _gptj(c: Reader) -> dict[str, Any]:
    """modeling_gptj.py: q/k/v/out_proj bias=False, fc_in/fc_out with bias, one ln_1 feeding
    attention and MLP in parallel, rotary (no parameters), lm_head with bias (untied by default)."""
    spec = c.shape() | {
        "mlp": plain_mlp_kind(c, "activation_function"),
        "max_seq_len": c.int("max_position_embeddings"),  # n_positions
        "positional": "rotary",
        "norm": "layernorm",
        "norms_per_layer": 1,
        "parallel_attn": True,
        "lm_head_bias": True,
        "tied_embeddings": c.flag("tie_word_embeddings"),
    } | mlp_attention_biases(False, False, True)
    if (n_inner := c.opt_int("n_inner")) is not None:
        spec["d_ff"] = n_inner
    return spec


def _gpt_neox(c: Reader) -> dict[str, Any]:
    """modeling_gpt_neox.py: fused query_key_value and dense with bias=config.attention_bias, MLP
    with bias, input/post_attention LayerNorms (both kept in parallel residual), partial RoPE."""
    bias = c.flag("attention_bias")
    return c.shape() | {
        "d_ff": c.int("intermediate_size"),
        "mlp": plain_mlp_kind(c, "hidden_act"),
        "max_seq_len": c.int("max_position_embeddings"),
        "positional": "rotary",
        "norm": "layernorm",
        "parallel_attn": c.flag("use_parallel_residual"),
        "tied_embeddings": c.flag("tie_word_embeddings"),
    } | mlp_attention_biases(bias, bias, True)


def _phi(c: Reader) -> dict[str, Any]:
    """modeling_phi.py: q/k/v/dense and fc1/fc2 with bias, one input_layernorm feeding attention and
    MLP in parallel, final_layernorm, partial RoPE, lm_head bias=True, optional q/k LayerNorms."""
    spec = rotary_common(c, True, True, True) | {
        "mlp": plain_mlp_kind(c, "hidden_act"),
        "norm": "layernorm",
        "norms_per_layer": 1,
        "parallel_attn": True,
        "lm_head_bias": True,
    }
    if c.flag("qk_layernorm"):
        # q_layernorm/k_layernorm are LayerNorm(hidden_size // num_attention_heads), not head_dim
        # wide; tcalc's q/k norms are head_dim wide, so the two must agree.
        d, a = spec["d_model"], spec["n_heads"]
        if spec.get("head_dim", d // a) != d // a or d % a:
            need = f"hidden_size / num_attention_heads ({d}/{a}) with qk_layernorm"
            raise c._bad("head_dim", need)
        spec["qk_norm"] = True
    return spec


# ---------------------------------------------------------------- Falcon, OPT, BLOOM
def _falcon(c: Reader) -> dict[str, Any]:
    """modeling_falcon.py (FalconAttention, FalconDecoderLayer)."""
    new_arch, parallel = c.flag("new_decoder_architecture"), c.flag("parallel_attn")
    spec = c.shape() | {
        "mlp": plain_mlp_kind(c, "activation"),
        "max_seq_len": c.int("max_position_embeddings"),
        "positional": "alibi" if c.flag("alibi") else "rotary",
        "norm": "layernorm",  # nn.LayerNorm with bias even when config.bias is False
        "bias": c.flag("bias"),  # query_key_value, dense, dense_h_to_4h, dense_4h_to_h
        "parallel_attn": parallel,
        "tied_embeddings": c.flag("tie_word_embeddings"),
    }
    # qkv_out_dim: new arch (2*num_kv_heads + A)*head_dim; old multi_query D + 2*head_dim (1 kv
    # head); old without multi_query 3*D (num_kv_heads is then ignored).
    if new_arch:
        if (kv := c.opt_int("num_kv_heads")) is not None:  # None -> num_attention_heads
            spec["n_kv_heads"] = kv
    elif c.flag("multi_query"):
        spec["n_kv_heads"] = 1
    # Norms: sequential -> input_layernorm + post_attention_layernorm; parallel -> ln_attn + ln_mlp
    # when num_ln_in_parallel_attn == 2 (None: 2 in the new architecture), else input_layernorm.
    n_ln = c.opt_int("num_ln_in_parallel_attn")
    if n_ln is None and new_arch:
        n_ln = 2
    spec["norms_per_layer"] = 2 if not parallel or n_ln == 2 else 1
    if (ffn := c.opt_int("ffn_hidden_size")) is not None:  # None -> 4 * hidden_size
        spec["d_ff"] = ffn
    return spec


def _opt(c: Reader) -> dict[str, Any]:
    """modeling_opt.py: q/k/v/out_proj and fc1/fc2 bias=config.enable_bias, self_attn_layer_norm and
    final_layer_norm per layer, learned positions with offset 2, embeddings of word_embed_proj_dim
    with bias-free project_in/project_out when it differs from hidden_size."""
    spec = c.shape() | {
        # elementwise_affine=False: nn.LayerNorm without weight or bias
        "norm_affine": c.flag("layer_norm_elementwise_affine"),
        "d_ff": c.int("ffn_dim"),
        "mlp": plain_mlp_kind(c, "activation_function"),
        "max_seq_len": c.int("max_position_embeddings"),
        "positional": "learned",
        "position_offset": 2,  # OPTLearnedPositionalEmbedding: num_embeddings + 2
        "norm": "layernorm",
        "bias": c.flag("enable_bias"),
        "tied_embeddings": c.flag("tie_word_embeddings"),
        # OPTDecoder: final_layer_norm only if do_layer_norm_before and not _remove_final_layer_norm
        "final_norm": c.flag("do_layer_norm_before") and not c.flag("_remove_final_layer_norm"),
    }
    d_embed = c.opt_int("word_embed_proj_dim")  # None -> hidden_size
    if d_embed is not None and d_embed != spec["d_model"]:
        spec["d_embed"] = d_embed
    return spec


def _bloom(c: Reader) -> dict[str, Any]:
    """modeling_bloom.py: fused query_key_value and dense with bias, MLP 4*D with bias (hard-coded),
    two LayerNorms per layer, word_embeddings_layernorm, ln_f, ALiBi. The config has no context
    length (ALiBi has no table), so max_seq_len stays tcalc's default."""
    return c.shape() | {
        "positional": "alibi",
        "norm": "layernorm",
        "embedding_norm": True,
        "bias": True,
        "mlp": "gelu",  # BloomGelu (tanh approximation), not configurable
        "tied_embeddings": c.flag("tie_word_embeddings"),
    }


_MISTRAL_DEFAULTS = LLAMA_DEFAULTS | {  # configuration_mistral.py
    "intermediate_size": 14336, "num_key_value_heads": 8, "max_position_embeddings": 131072,
    "sliding_window": 4096,
}  # fmt: skip
_GPT2_DEFAULTS = {  # configuration_gpt2.py
    "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
    "n_inner": None, "activation_function": "gelu_new", "resid_pdrop": 0.1, "embd_pdrop": 0.1,
    "attn_pdrop": 0.1, "add_cross_attention": False, "tie_word_embeddings": True,
}  # fmt: skip
_GPT_PDROP = ("resid_pdrop", "embd_pdrop", "attn_pdrop")

# GPT-2-style families read their fields (n_embd, ...) under the standard names; the standard
# names themselves are their attribute_map keys, applied after the fields.
_GPT2_ALIASES = {field_: std for std, field_ in GPT2_NAMES.items()}
_GPT2_LATE = frozenset(GPT2_NAMES)


def _std(defaults: dict[str, Any]) -> dict[str, Any]:
    """GPT-2-style defaults under the standard names Reader.shape reads."""
    return {_GPT2_ALIASES.get(k, k): v for k, v in defaults.items()}


FAMILIES: dict[str, Family] = {
    "llama": Family(_llama, LLAMA_DEFAULTS, ("attention_dropout",)),
    "mistral": Family(_mistral, _MISTRAL_DEFAULTS, ("attention_dropout",)),
    "mixtral": Family(
        _mixtral,
        # configuration_mixtral.py
        _MISTRAL_DEFAULTS | {"num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": None},
        ("attention_dropout",),
        {"num_experts": "num_local_experts"},  # attribute_map
        frozenset({"num_experts"}),
    ),
    "qwen2": Family(
        _qwen2,
        LLAMA_DEFAULTS | {  # configuration_qwen2.py (no head_dim field: read if the file has it)
            "vocab_size": 151936, "intermediate_size": 22016, "num_key_value_heads": 32,
            "max_position_embeddings": 32768, "use_sliding_window": False, "sliding_window": 4096,
            "max_window_layers": 28,
        },
        ("attention_dropout",),
    ),  # fmt: skip
    "gemma": Family(
        _gemma,
        LLAMA_DEFAULTS | {  # configuration_gemma.py
            "vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576,
            "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
            "head_dim": 256, "hidden_act": "gelu_pytorch_tanh", "max_position_embeddings": 8192,
            "tie_word_embeddings": True,
        },
        ("attention_dropout",),
    ),  # fmt: skip
    "phi": Family(
        _phi,
        LLAMA_DEFAULTS | {  # configuration_phi.py (no head_dim field: read if the file has it)
            "vocab_size": 51200, "hidden_size": 2048, "intermediate_size": 8192,
            "num_hidden_layers": 24, "hidden_act": "gelu_new", "resid_pdrop": 0.0,
            "embd_pdrop": 0.0, "qk_layernorm": False,
        },
        ("resid_pdrop", "embd_pdrop", "attention_dropout"),
    ),  # fmt: skip
    "gpt_neox": Family(
        _gpt_neox,
        {  # configuration_gpt_neox.py
            "vocab_size": 50432, "hidden_size": 6144, "num_hidden_layers": 44,
            "num_attention_heads": 64, "intermediate_size": 24576, "hidden_act": "gelu",
            "attention_dropout": 0.0, "hidden_dropout": 0.0, "max_position_embeddings": 2048,
            "tie_word_embeddings": False, "use_parallel_residual": True, "attention_bias": True,
        },
        ("attention_dropout", "hidden_dropout"),
    ),  # fmt: skip
    "gpt2": Family(_gpt2, _std(_GPT2_DEFAULTS), _GPT_PDROP, _GPT2_ALIASES, _GPT2_LATE),
    "gpt_bigcode": Family(
        _gpt_bigcode,
        _std(_GPT2_DEFAULTS | {"activation_function": "gelu_pytorch_tanh", "multi_query": True}),
        _GPT_PDROP,
        _GPT2_ALIASES,
        _GPT2_LATE,
    ),  # configuration_gpt_bigcode.py
    "gptj": Family(
        _gptj,
        _std({  # configuration_gptj.py
            "vocab_size": 50400, "n_positions": 2048, "n_embd": 4096, "n_layer": 28, "n_head": 16,
            "n_inner": None, "activation_function": "gelu_new", "resid_pdrop": 0.0,
            "embd_pdrop": 0.0, "attn_pdrop": 0.0, "tie_word_embeddings": False,
        }),
        _GPT_PDROP,
        _GPT2_ALIASES,
        _GPT2_LATE,
    ),  # fmt: skip
    "falcon": Family(
        _falcon,
        {  # configuration_falcon.py
            "vocab_size": 65024, "hidden_size": 4544, "num_hidden_layers": 32,
            "num_attention_heads": 71, "num_ln_in_parallel_attn": None, "hidden_dropout": 0.0,
            "attention_dropout": 0.0, "num_kv_heads": None, "alibi": False,
            "new_decoder_architecture": False, "multi_query": True, "parallel_attn": True,
            "bias": False, "max_position_embeddings": 2048, "ffn_hidden_size": None,
            "activation": "gelu", "tie_word_embeddings": True,
        },
        ("hidden_dropout", "attention_dropout"),
        {"n_embed": "hidden_size"},  # backward-compatible keyword, wins over hidden_size
        frozenset({"n_embed"}),
    ),  # fmt: skip
    "opt": Family(
        _opt,
        {  # configuration_opt.py
            "vocab_size": 50272, "hidden_size": 768, "num_hidden_layers": 12, "ffn_dim": 3072,
            "max_position_embeddings": 2048, "do_layer_norm_before": True,
            "_remove_final_layer_norm": False, "word_embed_proj_dim": None, "dropout": 0.1,
            "attention_dropout": 0.0, "num_attention_heads": 12, "activation_function": "relu",
            "enable_bias": True, "layer_norm_elementwise_affine": True, "tie_word_embeddings": True,
        },
        ("dropout", "attention_dropout"),
    ),  # fmt: skip
    "bloom": Family(
        _bloom,
        {  # configuration_bloom.py (n_layer/n_head are its fields; num_* the attribute_map names)
            "vocab_size": 250880, "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 8, "hidden_dropout": 0.0, "attention_dropout": 0.0,
            "tie_word_embeddings": True,
        },
        ("hidden_dropout", "attention_dropout"),
        {"n_layer": "num_hidden_layers", "n_head": "num_attention_heads", "n_embed": "hidden_size"},
        frozenset({"num_hidden_layers", "num_attention_heads", "n_embed"}),
    ),  # fmt: skip
}

# The 2024-2026 families live beside this module and use its reader (imported here, after the
# reader and the classic families are defined).
from transformer_calc.sources.hf_2024 import FAMILIES as _FAMILIES_2024  # noqa: E402

FAMILIES.update(_FAMILIES_2024)
from transformer_calc.sources.hf_2025 import FAMILIES as _FAMILIES_2025  # noqa: E402  (issue 22)

FAMILIES.update(_FAMILIES_2025)
from transformer_calc.sources.hf_hybrid import FAMILIES as _FAMILIES_HYBRID  # noqa: E402

FAMILIES.update(_FAMILIES_HYBRID)
from transformer_calc.sources.hf_gemma4 import FAMILIES as _FAMILIES_GEMMA4  # noqa: E402  (issue 22: Gemma 4)

FAMILIES.update(_FAMILIES_GEMMA4)
from transformer_calc.sources.hf_deepseek_v4 import FAMILIES as _FAMILIES_DEEPSEEK_V4  # noqa: E402  (issue 22)

FAMILIES.update(_FAMILIES_DEEPSEEK_V4)

# Multimodal wrapper configs (issue 22): the language model is `text_config` (read by the text
# readers; transformers builds it inside the wrapper), the towers are `vision_config` and the
# wrapper's own keys (`sources.hf_towers`). The parameter count is the whole model transformers
# builds (AutoModelForImageTextToText: the *ForConditionalGeneration class), towers included.
@dataclass(frozen=True)
class Wrapper:
    text_type: str  # the text model_type when text_config names none
    defaults: dict[str, Any]  # the wrapper config class's own field defaults that are read
    # whose tie_word_embeddings ties the LM head: "top" (the wrapper's lm_head, the wrapper's flag),
    # "text" (a text *ForCausalLM submodel, its own flag), "either" (the wrapper's, or text_config's
    # forwarded to it: the BC rule of configuration_{qwen2_5_vl,glm4v,glm4v_moe}.py __post_init__),
    # "never" (a class with no tied weights)
    tie: str
    text_defaults: dict[str, Any] | None = None  # the text config built when text_config is absent
    flat_text: bool = False  # without text_config, the text keys sit at the top level (hub saves)
    merge_text: bool = False  # a given text_config is read over text_defaults (configuration_voxtral.py BC)


WRAPPERS: dict[str, Wrapper] = {
    # configuration_gemma3.py Gemma3Config; modeling_gemma3.py Gemma3ForConditionalGeneration (lm_head tied)
    "gemma3": Wrapper("gemma3_text", {"mm_tokens_per_image": 256, "tie_word_embeddings": True}, "top"),
    # configuration_llama4.py Llama4Config; modeling_llama4.py: language_model is a Llama4ForCausalLM
    "llama4": Wrapper("llama4_text", {"tie_word_embeddings": False}, "text"),
    # configuration_mistral3.py Mistral3Config (text_config None: its MistralConfig init_kwargs)
    "mistral3": Wrapper(
        "mistral",
        {"spatial_merge_size": 2, "multimodal_projector_bias": False, "vision_feature_layer": -1,
         "tie_word_embeddings": True},
        "top",
        {"hidden_size": 5120, "head_dim": 128, "intermediate_size": 32768, "num_hidden_layers": 40,
         "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 131072,
         "max_position_embeddings": 131072, "sliding_window": None},
    ),  # fmt: skip
    # configuration_qwen2_5_vl.py Qwen2_5_VLConfig: hub configs are flat (text keys at the top)
    "qwen2_5_vl": Wrapper("qwen2_5_vl_text", {"tie_word_embeddings": False}, "either", flat_text=True),
    "qwen3_vl": Wrapper("qwen3_vl_text", {"tie_word_embeddings": False}, "top"),  # configuration_qwen3_vl.py
    "qwen3_vl_moe": Wrapper("qwen3_vl_moe_text", {"tie_word_embeddings": False}, "top"),  # configuration_qwen3_vl_moe.py
    "glm4v": Wrapper("glm4v_text", {"tie_word_embeddings": False}, "either"),  # configuration_glm4v.py
    "glm4v_moe": Wrapper("glm4v_moe_text", {"tie_word_embeddings": False}, "either"),  # configuration_glm4v_moe.py
    # configuration_kimi_k25.py Kimi_K25Config: a DeepSeek-V3 language model (text_config "kimi_k2")
    "kimi_k25": Wrapper("deepseek_v3", {"projection_hidden_size": 1152, "tie_word_embeddings": True}, "top"),
    # configuration_qwen3_5.py Qwen3_5Config / configuration_qwen3_5_moe.py: a Gated DeltaNet language model
    # (sources.hf_hybrid) and Qwen3-VL's vision tower without DeepStack; modeling_qwen3_5.py's
    # Qwen3_5ForConditionalGeneration ties its lm_head by the top-level flag
    "qwen3_5": Wrapper("qwen3_5_text", {"tie_word_embeddings": False}, "top"),
    "qwen3_5_moe": Wrapper("qwen3_5_moe_text", {"tie_word_embeddings": False}, "top"),
    # configuration_voxtral.py VoxtralConfig: a Llama language model and an audio tower;
    # modeling_voxtral.py's VoxtralForConditionalGeneration declares no tied weights: its lm_head never is
    "voxtral": Wrapper(
        "llama", {}, "never",
        {"vocab_size": 131072, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 30,
         "num_key_value_heads": 8, "max_position_embeddings": 131072, "head_dim": 128},
        merge_text=True,
    ),  # fmt: skip
    # configuration_gemma4.py Gemma4Config (vision_config and audio_config optional: no tower when absent);
    # modeling_gemma4.py Gemma4ForConditionalGeneration ties its lm_head by the top-level flag
    "gemma4": Wrapper("gemma4_text", {"tie_word_embeddings": True}, "top"),
    # configuration_gemma3n.py Gemma3nConfig (vision_config and audio_config always built: their defaults
    # when absent); modeling_gemma3n.py Gemma3nForConditionalGeneration ties its lm_head by the top flag.
    # The vision tower is timm's MobileNetV5 (sources.hf_gemma3n).
    "gemma3n": Wrapper("gemma3n_text", {"tie_word_embeddings": True, "vision_soft_tokens_per_image": 256}, "top"),
}

# Model types whose published checkpoints are another family's architecture (remote code), read as
# that family: Kimi K2's config.json names kimi_k2 for DeepseekV3ForCausalLM.
SAME_AS: dict[str, str] = {"kimi_k2": "deepseek_v3"}

# Model types transformers has that tcalc cannot represent, with what is missing.
UNREPRESENTABLE: dict[str, str] = {
    "falcon_mamba": "its Mamba state-space layers",
    "mamba": "its state-space layers",
    "mamba2": "its state-space layers",
    "zamba": "its Mamba layers",
    "recurrent_gemma": "its recurrent (RG-LRU) blocks",
    "rwkv": "its RWKV time-mixing layers",
    "xlstm": "its xLSTM blocks",
}

# transformers model types one typo away from a supported type but of another architecture: named here
# so that the did-you-mean (`type_hint`) can never send them to the wrong count.
OTHER_ARCHITECTURES: dict[str, str] = {
    "gpt_neo": "GPT-Neo's local-attention blocks are not read yet",
    "glm4": "GLM-4's dense blocks (post-attention and post-MLP norms) are not read yet; glm4v is its vision wrapper",
    "llava": "a vision-language wrapper (vision tower and projector) around another model_type",
    "mllama": "Llama 3.2 Vision: cross-attention layers and a vision tower",
    "pixtral": "a vision encoder, not a language model",
    "molmo2": "a vision-language model (vision tower and connector)",
    # one letter from nemotron_h (a hybrid tcalc reads): Nemotron-4 is another architecture
    "nemotron": "Nemotron-4's layer norms (LayerNorm1P) and squared-ReLU MLP are not read yet (nemotron_h is Nemotron-H)",
}

from transformer_calc.sources.hf_2024 import TEXT_PARTS as _TEXT_PARTS_2024, without_keys  # noqa: E402

FAMILIES["qwen2_5_vl_text"] = Family(
    without_keys(("head_dim",), _qwen2),  # modeling_qwen2_5_vl.py: head_dim = hidden_size // num_heads, no field
    LLAMA_DEFAULTS | {  # configuration_qwen2_5_vl.py Qwen2_5_VLTextConfig
        "vocab_size": 152064, "hidden_size": 8192, "intermediate_size": 29568, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "max_position_embeddings": 32768,
        "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 80,
    },
    ("attention_dropout",),
)  # fmt: skip
# The language models of the wrappers: read only inside their wrapper's config.
TEXT_PARTS: frozenset[str] = frozenset({*_TEXT_PARTS_2024, "qwen2_5_vl_text"})

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted({*FAMILIES, *WRAPPERS, *SAME_AS} - set(TEXT_PARTS)))

# FUSED_LINEARS (sources/hf_fused.py): the families whose modeling code fuses q, k, v (gate, up) in one module


def from_hf_config(cfg: dict[str, Any], text_only: bool = False, _inside: bool = False) -> dict[str, Any]:
    """A raw ModelConfig spec from a parsed Hugging Face config.json (see the module docstring);
    `text_only` keeps a multimodal model's towers out of every count (`Towers.text_only`)."""
    if not isinstance(cfg, dict):
        raise TcalcError(f"config.json must be a JSON object, got {type(cfg).__name__}")
    model_type = cfg.get("model_type")
    if model_type is None:
        raise TcalcError(f"config.json has no model_type; {known_list('', SUPPORTED_MODEL_TYPES, lead='add one of: ')}")
    if isinstance(model_type, str) and model_type in WRAPPERS:
        return _wrapper(model_type, cfg, text_only)
    if isinstance(model_type, str) and model_type in TEXT_PARTS and not _inside:
        owner = next(k for k, w in WRAPPERS.items() if w.text_type == model_type)
        raise TcalcError(
            f"model_type {model_type!r} is the language model inside a {owner} config; give the whole "
            f"{owner} config.json (its towers are counted too, or left out with text_only)"
        )
    if isinstance(model_type, str) and model_type in SAME_AS:
        return from_hf_config({**cfg, "model_type": SAME_AS[model_type]})
    if isinstance(model_type, str) and model_type in UNREPRESENTABLE:
        raise TcalcError(
            f"model_type {model_type!r} is not a plain transformer: tcalc cannot represent "
            f"{UNREPRESENTABLE[model_type]}, so it gives no number for it"
        )
    if isinstance(model_type, str) and model_type in OTHER_ARCHITECTURES:
        raise TcalcError(
            f"model_type {model_type!r} is not read by tcalc: {OTHER_ARCHITECTURES[model_type]}; "
            f"{known_list(model_type, SUPPORTED_MODEL_TYPES, lead='supported: ')}"
        )
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        near = type_hint(model_type)
        hint = f" (did you mean {near!r}?)" if near else ""
        raise TcalcError(f"unsupported model_type {clip(model_type)}{hint}; "
                         f"{known_list(model_type, SUPPORTED_MODEL_TYPES, lead='supported: ')}")
    family = FAMILIES[model_type]
    c = Reader(model_type, cfg, family)
    spec = family.build(c)
    spec["dropout"] = max((c.prob(key) for key in family.dropout_keys), default=0.0)  # lfm2: no dropout at all
    if c.activation is not None:
        spec["activation_impl"] = c.activation  # e.g. gelu_new: unfused in eager PyTorch
    name = cfg.get("_name_or_path")
    if isinstance(name, str) and name:
        spec["name"] = name
    fmt = weight_format(cfg.get("quantization_config"))
    if fmt is not None:
        spec["weight_format"] = fmt
    spec["source"] = f"Hugging Face config.json (model_type {model_type})"
    spec.update(FUSED_LINEARS.get(model_type, {}))
    return spec


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _one_letter_apart(a: str, b: str) -> bool:
    """One letter inserted, deleted, replaced, or two neighbours swapped (digits never: a digit
    is a version, and qwen3_5 or deepseek_v32 is not a typo of qwen3 or deepseek_v3)."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 2 and diff[1] == diff[0] + 1 and (a[diff[0]], a[diff[1]]) == (b[diff[1]], b[diff[0]]):
            return True
        return len(diff) == 1 and not (a[diff[0]].isdigit() or b[diff[0]].isdigit())
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1:] == short and not long_[i].isdigit() for i in range(len(long_)))


def type_hint(model_type: object) -> str | None:
    """The supported model_type an unknown one is a spelling of, or None (issue 22: a hint must
    never send a config to another architecture's count). Only two kinds of slip are taken: case
    and separators (`Qwen2-MoE`, `deepseekv3`), and one letter wrong in a name of 4+ letters
    whose version digits agree (`lama`, `mixtrl`). A longer or shorter name is another model
    (`qwen3_5`, `gemma4`, `glm4_moe_lite`, `granitemoe`), and so are the transformers types one
    letter from a supported one (OTHER_ARCHITECTURES, UNREPRESENTABLE are refused by name first);
    tests/test_hf_2025.py checks every model_type transformers 5.23 knows."""
    if not isinstance(model_type, str) or model_type in OTHER_ARCHITECTURES or model_type in UNREPRESENTABLE:
        return None
    name = _squash(model_type)
    exact = [t for t in SUPPORTED_MODEL_TYPES if _squash(t) == name]
    if exact:
        return exact[0]
    if len(name) < 4:
        return None
    near = [t for t in SUPPORTED_MODEL_TYPES
            if re.findall(r"\d+", t) == re.findall(r"\d+", model_type) and _one_letter_apart(name, _squash(t))]
    return near[0] if len(near) == 1 else None


def _wrapper(model_type: str, cfg: dict[str, Any], text_only: bool) -> dict[str, Any]:
    """A multimodal wrapper: its language model's spec (text_config through the text readers) with
    the LM head tied as the wrapper ties it, and its towers (`sources.hf_towers`)."""
    from transformer_calc.sources.hf_towers import wrapper_towers

    w = WRAPPERS[model_type]
    text = cfg.get("text_config")
    if text is None and w.flat_text:  # configuration_qwen2_5_vl.py: the text keys of a flat save
        text = {k: v for k, v in cfg.items() if k not in ("model_type", "vision_config", "tie_word_embeddings")}
    elif text is None:  # the wrapper's own default text model (configuration_<wrapper>.py)
        text = dict(w.text_defaults or {})
    if not isinstance(text, dict):
        raise TcalcError(f"config.json ({model_type}): text_config must be a JSON object")
    if w.merge_text:
        text = {**(w.text_defaults or {}), **text}
    text = {"model_type": w.text_type, **text}
    if "_name_or_path" in cfg and "_name_or_path" not in text:
        text["_name_or_path"] = cfg["_name_or_path"]
    if text.get("model_type") in WRAPPERS:
        raise TcalcError(f"config.json ({model_type}): text_config names a wrapper type again")
    spec = from_hf_config(text, _inside=True)
    top = Reader(model_type, cfg, Family(lambda c: {}, w.defaults, ()))
    if w.tie == "never":
        spec["tied_embeddings"] = False
    elif w.tie != "text":  # the wrapper's lm_head, tied by the wrapper's flag (modeling_utils.py tie_weights)
        tied = top.flag("tie_word_embeddings")
        if w.tie == "either":
            tied = tied or text.get("tie_word_embeddings") is True
        spec["tied_embeddings"] = tied
    spec["towers"] = {"audio": 0, **wrapper_towers(model_type, cfg, top, spec["d_model"]), "text_only": text_only}
    spec["source"] = f"Hugging Face config.json (model_type {model_type}: {spec['source'].split('model_type ')[-1]}"
    return spec


def weight_format(q: Any) -> str | None:
    """The storage format a checkpoint's `quantization_config` names, as tcalc's weight dtype
    (inference.py, quant.py): mxfp4 (gpt-oss), fp8 (DeepSeek-V3's block-scaled e4m3: its fp32 scale
    per 128x128 block, 0.002 bits per weight, is not counted), gptq-int4 and awq-int4 with 4 bits in
    groups of 128 (transformers' GPTQConfig `bits`/`group_size`, AwqConfig `bits`/`group_size`).
    Anything else (other bit widths or groups, other methods): None, the model's dtype."""
    if not isinstance(q, dict):
        return None
    method = q.get("quant_method")
    if method in ("mxfp4", "fp8"):
        return str(method)
    if method in ("gptq", "awq") and q.get("bits") == 4 and q.get("group_size") == 128:
        return f"{method}-int4"
    return None
