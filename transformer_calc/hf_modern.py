"""Hugging Face config.json import for the dense 2024-2026 families: qwen3, gemma2, gemma3_text, phi3, olmo2, granite, cohere, starcoder2.

Same contract as `transformer_calc.hf` (whose reader these builders use): the spec's parameter
count equals what transformers 5.23 builds on the meta device (tools/crosscheck/hf_params.py).
Each family's defaults are the field defaults of `models/<type>/configuration_<type>.py`; each
builder mirrors `models/<type>/modeling_<type>.py`. The wrappers gemma3 (-> gemma3_text) and
mistral3 (-> mistral) are unwrapped by `transformer_calc.hf.from_hf_config` (WRAPPERS).

Attention pattern: HF `layer_types` (one 'full_attention' / 'sliding_attention' per layer, given
in the file or derived by the config's __post_init__) becomes `attention_pattern`, the list's
shortest period (repeated cyclically over the layers by tcalc), with `sliding_window`. A sliding
layer whose window is null attends to everything (modeling_*.py passes sliding_window=None), so a
model without a window is all 'full' and the spec pins neither key.
"""

from __future__ import annotations

from typing import Any

from transformer_calc.config import MAX_PATTERN
from transformer_calc.hf import (
    _LLAMA_DEFAULTS,
    _Family,
    _gated_mlp,
    _plain_mlp,
    _Reader,
    _rotary_common,
)

# configuration_utils.py _LEGACY_LAYER_TYPE_REMAP (applied at the end of __post_init__)
_LAYER_KINDS = {"full_attention": "full", "attention": "full", "sliding_attention": "sliding"}


# ------------------------------------------------------------------ layer_types -> pattern
def _shortest_period(kinds: list[str]) -> list[str]:
    """The shortest prefix p with kinds[i] == p[i % len(p)] for every i (prefix function, O(n))."""
    border = [0] * len(kinds)
    k = 0
    for i in range(1, len(kinds)):
        while k and kinds[i] != kinds[k]:
            k = border[k - 1]
        if kinds[i] == kinds[k]:
            k += 1
        border[i] = k
    return kinds[: len(kinds) - border[-1]]


def _window(c: _Reader, key: str = "sliding_window") -> int | None:
    """The sliding window (null: none); transformers' masks need a positive one."""
    window = c.opt_int(key)
    if window is not None and window <= 0:
        raise c._bad(key, "a positive whole number of tokens or null (no window)")
    return window


def _file_layer_types(c: _Reader) -> list[str] | None:
    """`layer_types` as written ('full'/'sliding' per layer), or None when the file has none."""
    given = c.values.get("layer_types")
    if given is None:
        return None
    n_layers = c.int("num_hidden_layers")
    if not isinstance(given, list) or len(given) != n_layers:
        # configuration_utils.py validate_layer_type: one entry per layer
        raise c._bad("layer_types", f"a list of {n_layers} layer types, one per layer (num_hidden_layers)")
    kinds = [_LAYER_KINDS.get(t) if isinstance(t, str) else None for t in given]
    if None in kinds:
        # the mask mappings of these families have full_attention and sliding_attention only
        raise c._bad("layer_types", "a list of 'full_attention' / 'sliding_attention' entries")
    return kinds  # type: ignore[return-value]


def _pattern(c: _Reader, kinds: list[str], window: int | None) -> dict[str, Any]:
    """attention_pattern (shortest period of the per-layer kinds) and sliding_window."""
    if window is None or "sliding" not in kinds:
        return {}  # every layer attends to all earlier tokens: tcalc's default pattern
    pattern = _shortest_period(kinds)
    if len(pattern) > MAX_PATTERN:
        raise c._bad("layer_types", f"a layer pattern tcalc can hold (period at most {MAX_PATTERN} layers)")
    return {"attention_pattern": pattern, "sliding_window": window}


def _periodic(c: _Reader, every: int, window: int | None) -> dict[str, Any]:
    """Gemma 2/3 without layer_types: layer i is full when (i + 1) % every == 0, else sliding."""
    kinds = _file_layer_types(c)
    if kinds is None:
        # A prefix of 2 * every layers has the period of the whole list (Fine-Wilf), so the pattern
        # is found without one entry per layer.
        n = min(c.int("num_hidden_layers"), 2 * every)
        kinds = ["sliding" if (i + 1) % every else "full" for i in range(n)]
    return _pattern(c, kinds, window)


def _all_layers_window(c: _Reader) -> dict[str, Any]:
    """modeling_{phi3,starcoder2}.py: sliding_window (when set) applies to every layer."""
    window = _window(c)
    return {} if window is None else {"attention_pattern": ["sliding"], "sliding_window": window}


def _causal_only(c: _Reader) -> None:
    """Gemma 2/3 use_bidirectional_attention (EmbeddingGemma) makes every layer non-causal."""
    if c.values.get("use_bidirectional_attention") is not None and c.flag("use_bidirectional_attention"):
        raise c._bad("use_bidirectional_attention", "false (bidirectional attention is not a decoder-only LM)")


# ------------------------------------------------------------------ builders
def _qwen3(c: _Reader) -> dict[str, Any]:
    """modeling_qwen3.py: q/k/v/o bias=config.attention_bias, MLP bias=False, q_norm/k_norm
    RMSNorm(head_dim) ("unlike olmo, only on the head dim"), head_dim a field (default 128, not
    D/A). configuration_qwen3.py: sliding_window is None unless use_sliding_window; layer_types
    default: sliding for layers i >= max_window_layers (when there is a window)."""
    bias = c.flag("attention_bias")
    spec = _rotary_common(c, bias, bias, False) | {"mlp": _gated_mlp(c, "hidden_act"), "qk_norm": True}
    window = _window(c) if c.flag("use_sliding_window") else None
    kinds = _file_layer_types(c)
    if kinds is None and window is not None:
        n_layers, first = c.int("num_hidden_layers"), c.int("max_window_layers")
        if first <= 0 or first >= n_layers:  # one kind on every layer
            kinds = ["sliding" if first <= 0 else "full"]
        elif n_layers > MAX_PATTERN:
            raise c._bad("max_window_layers", f"0 or >= num_hidden_layers for more than {MAX_PATTERN} layers")
        else:
            kinds = ["sliding" if i >= first else "full" for i in range(n_layers)]
    return spec | _pattern(c, kinds or ["full"], window)


def _gemma2(c: _Reader) -> dict[str, Any]:
    """modeling_gemma2.py: q/k/v/o bias=config.attention_bias, MLP bias=False with
    ACT2FN[hidden_activation] (hidden_act in a file is not read), four RMSNorms per layer
    (input, post_attention, pre_feedforward, post_feedforward) and a final one, tied lm_head by
    default. configuration_gemma2.py: layer_types default alternates sliding, full."""
    _causal_only(c)
    bias = c.flag("attention_bias")
    spec = _rotary_common(c, bias, bias, False) | {
        "mlp": _gated_mlp(c, "hidden_activation"),
        "norms_per_layer": 4,
    }
    return spec | _periodic(c, 2, _window(c))


def _gemma3_text(c: _Reader) -> dict[str, Any]:
    """modeling_gemma3.py: Gemma 2's layer plus q_norm/k_norm Gemma3RMSNorm(head_dim).
    configuration_gemma3.py: layer_types default from the legacy key sliding_window_pattern
    (default 6: five sliding layers, then a full one)."""
    _causal_only(c)
    every = c.int("sliding_window_pattern")
    if every <= 0:
        raise c._bad("sliding_window_pattern", "a positive whole number (every n-th layer is full)")
    bias = c.flag("attention_bias")
    spec = _rotary_common(c, bias, bias, False) | {
        "mlp": _gated_mlp(c, "hidden_activation"),
        "norms_per_layer": 4,
        "qk_norm": True,
    }
    return spec | _periodic(c, every, _window(c))


def _phi3(c: _Reader) -> dict[str, Any]:
    """modeling_phi3.py: fused qkv_proj (D -> (A + 2*kv)*head_dim) and o_proj, fused gate_up_proj
    (D -> 2*intermediate_size) and down_proj, none with a bias (the same counts as separate
    q/k/v and gate/up), two RMSNorms per layer, untied lm_head by default; head_dim read if the
    file has it (not a config field); sliding_window on every layer when set."""
    spec = _rotary_common(c, False, False, False) | {"mlp": _gated_mlp(c, "hidden_act")}
    return spec | _all_layers_window(c)


def _olmo2(c: _Reader) -> dict[str, Any]:
    """modeling_olmo2.py: q/k/v/o bias=config.attention_bias, MLP bias=False, q_norm
    RMSNorm(A*head_dim) and k_norm RMSNorm(kv*head_dim) over the whole projections, no
    input_layernorm: post_attention_layernorm and post_feedforward_layernorm on the block outputs
    (two per layer, as counted), a final norm."""
    bias = c.flag("attention_bias")
    return _rotary_common(c, bias, bias, False) | {
        "mlp": _gated_mlp(c, "hidden_act"),
        "qk_norm": True,
        "qk_norm_scope": "full",
    }


def _granite(c: _Reader) -> dict[str, Any]:
    """modeling_granite.py: llama's layer (q/k/v/o bias=config.attention_bias, gate/up/down
    bias=config.mlp_bias); embedding_multiplier, residual_multiplier, attention_multiplier and
    logits_scaling are scalars, not parameters."""
    bias = c.flag("attention_bias")
    return _rotary_common(c, bias, bias, c.flag("mlp_bias")) | {"mlp": _gated_mlp(c, "hidden_act")}


def _cohere(c: _Reader) -> dict[str, Any]:
    """modeling_cohere.py: CohereLayerNorm (weight, no bias), one input_layernorm feeding attention
    and MLP in parallel, q/k/v/o bias=config.attention_bias, MLP bias=False, tied lm_head by
    default (logit_scale is a scalar). use_qk_norm: q_norm CohereLayerNorm((A, head_dim)) and
    k_norm ((kv, head_dim)), one weight per head and channel: A*head_dim and kv*head_dim."""
    bias = c.flag("attention_bias")
    spec = _rotary_common(c, bias, bias, False) | {
        "mlp": _gated_mlp(c, "hidden_act"),
        "norm": "layernorm",
        "norm_bias": False,
        "norms_per_layer": 1,
        "parallel_attn": True,
    }
    if c.values.get("use_qk_norm") is not None and c.flag("use_qk_norm"):
        spec |= {"qk_norm": True, "qk_norm_scope": "full"}
    return spec


def _starcoder2(c: _Reader) -> dict[str, Any]:
    """modeling_starcoder2.py: q/k/v/o and c_fc/c_proj (plain MLP) bias=config.use_bias,
    nn.LayerNorm (with bias, whatever use_bias says) input/post_attention and final, tied lm_head
    by default, head_dim `getattr(config, "head_dim", None) or D // A`; sliding_window on every
    layer when set."""
    bias = c.flag("use_bias")
    spec = _rotary_common(c, bias, bias, bias) | {
        "mlp": _plain_mlp(c, "hidden_act"),
        "norm": "layernorm",
    }
    return spec | _all_layers_window(c)


# ------------------------------------------------------------------ defaults
_GEMMA2_DEFAULTS = _LLAMA_DEFAULTS | {  # configuration_gemma2.py
    "vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192,
    "tie_word_embeddings": True, "sliding_window": 4096, "layer_types": None,
    "use_bidirectional_attention": None,
}  # fmt: skip

FAMILIES: dict[str, _Family] = {
    "qwen3": _Family(
        _qwen3,
        _LLAMA_DEFAULTS | {  # configuration_qwen3.py
            "vocab_size": 151936, "intermediate_size": 22016, "num_key_value_heads": 32,
            "head_dim": 128, "max_position_embeddings": 32768, "use_sliding_window": False,
            "sliding_window": 4096, "max_window_layers": 28, "layer_types": None,
        },
        ("attention_dropout",),
    ),
    "gemma2": _Family(_gemma2, _GEMMA2_DEFAULTS, ("attention_dropout",)),
    "gemma3_text": _Family(
        _gemma3_text,
        _GEMMA2_DEFAULTS | {  # configuration_gemma3.py (Gemma3TextConfig)
            "vocab_size": 262_208, "max_position_embeddings": 131_072,
            "use_bidirectional_attention": False, "sliding_window_pattern": 6,
        },
        ("attention_dropout",),
    ),
    "phi3": _Family(
        _phi3,
        _LLAMA_DEFAULTS | {  # configuration_phi3.py (no head_dim field: read if the file has it)
            "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192,
            "max_position_embeddings": 4096, "resid_pdrop": 0.0, "sliding_window": None,
        },
        # embd_pdrop is a config field that modeling_phi3.py never applies
        ("resid_pdrop", "attention_dropout"),
    ),
    "olmo2": _Family(
        _olmo2,
        _LLAMA_DEFAULTS | {"vocab_size": 50304},  # configuration_olmo2.py (no head_dim field)
        ("attention_dropout",),
    ),
    "granite": _Family(_granite, _LLAMA_DEFAULTS, ("attention_dropout",)),  # configuration_granite.py
    "cohere": _Family(
        _cohere,
        _LLAMA_DEFAULTS | {  # configuration_cohere.py (no head_dim field: read if the file has it)
            "vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528,
            "num_hidden_layers": 40, "num_attention_heads": 64, "max_position_embeddings": 8192,
            "tie_word_embeddings": True, "use_qk_norm": False,
        },
        ("attention_dropout",),
    ),
    "starcoder2": _Family(
        _starcoder2,
        {  # configuration_starcoder2.py (no head_dim field: read if the file has it)
            "vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288,
            "num_hidden_layers": 30, "num_attention_heads": 24, "num_key_value_heads": 2,
            "head_dim": None, "hidden_act": "gelu_pytorch_tanh", "max_position_embeddings": 4096,
            "sliding_window": None, "attention_dropout": 0.0, "residual_dropout": 0.0,
            "embedding_dropout": 0.0, "use_bias": True, "tie_word_embeddings": True,
        },
        ("attention_dropout", "residual_dropout", "embedding_dropout"),
    ),
}  # fmt: skip
