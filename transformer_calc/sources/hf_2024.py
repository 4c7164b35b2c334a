"""Hugging Face config.json import for the 2024-2026 families (issue 11).

Same contract as `transformer_calc.sources.hf`, whose reader these builders use: the spec's parameter
count equals what transformers 5.23 builds on the meta device (tools/crosscheck/hf_params.py),
and the layer pattern is what transformers' cache layers follow (tools/crosscheck/kv_cache.py).
Each builder cites the modeling file it mirrors; the defaults are those of
`models/<type>/configuration_<type>.py`.

Layer patterns: HF `layer_types` (given, or derived as the config class derives it in
__post_init__) becomes `attention_pattern`, reduced to its shortest period. MoE layer choice:
Qwen's `mlp_only_layers` + `decoder_sparse_step`, DeepSeek/GLM's `first_k_dense_replace`, Llama 4's
`moe_layers` (default every `interleave_moe_layer_step`-th layer).
"""

from __future__ import annotations

import math
from typing import Any

from transformer_calc.sources.hf_base import (
    LLAMA_DEFAULTS,
    mlp_attention_biases,
    Family,
    gated_mlp_kind,
    plain_mlp_kind,
    Reader,
    rotary_common,
)

_KIND = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked",
         "attention": "full"}  # "attention": the legacy name transformers reads as full_attention
MAX_DERIVED_LAYERS = 4096  # a derived per-layer list longer than this is refused (ModelConfig's MAX_PATTERN)


def shortest_period(items: list[Any]) -> list[Any]:
    """The shortest prefix p whose cyclic repetition gives `items` (items[i] == items[i % p]; p
    need not divide the length: Gemma 3's 62 layers are 5 sliding + 1 full, repeated)."""
    # n minus the longest proper border (KMP prefix function): O(n), so a 1 MiB layer_types list
    # costs milliseconds (trying every p costs O(n^2): minutes)
    n = len(items)
    if n == 0:
        return items
    border = [0] * n
    k = 0
    for i in range(1, n):
        while k and items[i] != items[k]:
            k = border[k - 1]
        if items[i] == items[k]:
            k += 1
        border[i] = k
    return items[: n - border[-1]]


def _pattern(c: Reader, layer_types: list[str], L: int, key: str = "layer_types") -> dict[str, Any]:
    """attention_pattern from a per-layer list of HF attention kinds (and the windows it needs);
    a derived periodic list may be cut at MAX_DERIVED_LAYERS (see `_periodic`)."""
    if not isinstance(layer_types, list) or not (len(layer_types) == L or len(layer_types) == MAX_DERIVED_LAYERS < L):
        raise c._bad(key, f"a list of {L} attention kinds (one per layer)")
    kinds = []
    for kind in layer_types:
        if not isinstance(kind, str) or kind not in _KIND:
            raise c._bad(key, "a list of full_attention / sliding_attention / chunked_attention")
        kinds.append(_KIND[kind])
    spec: dict[str, Any] = {}
    if "sliding" in kinds:
        window = c.opt_int("sliding_window")
        if not window:
            kinds = ["full" if k == "sliding" else k for k in kinds]  # no window: every token
        else:
            spec["sliding_window"] = window
    if "chunked" in kinds:
        chunk = c.opt_int("attention_chunk_size")
        if not chunk:
            kinds = ["full" if k == "chunked" else k for k in kinds]
        else:
            spec["attention_chunk_size"] = chunk
    period = shortest_period(kinds)
    if period != ["full"]:
        spec["attention_pattern"] = period
    return spec


def _given_or(c: Reader, derived: Any) -> list[str]:
    """The file's layer_types when it has them (transformers keeps them), else the derived list
    (`derived` is a function of the layer count, called only then)."""
    given = c.values.get("layer_types")
    return given if given is not None else derived()


def _periodic(L: int, period: list[str]) -> list[str]:
    """A per-layer list that repeats `period`, built for at most MAX_DERIVED_LAYERS layers: the
    pattern only needs one period, so a longer model gets the period's repetition cut there."""
    return [period[i % len(period)] for i in range(min(L, max(MAX_DERIVED_LAYERS, len(period))))]


def _too_many(c: Reader, L: int) -> None:
    if L > MAX_DERIVED_LAYERS:
        raise c._bad("num_hidden_layers", f"at most {MAX_DERIVED_LAYERS} layers for a non-repeating layer pattern")


# ---------------------------------------------------------------------------- dense families
def _qwen3(c: Reader) -> dict[str, Any]:
    """modeling_qwen3.py: q/k/v/o bias=attention_bias, per-head q_norm/k_norm (RMSNorm(head_dim)),
    SwiGLU without biases, head_dim explicit (default 128). Sliding layers (use_sliding_window)
    from max_window_layers on (configuration_qwen3.py)."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    spec |= {"qk_norm": True, "qk_norm_scope": "head"}
    return spec | qwen_pattern(c, spec["n_layers"])


def qwen_pattern(c: Reader, L: int) -> dict[str, Any]:
    window = c.opt_int("sliding_window") if c.flag("use_sliding_window") else None
    start = c.int("max_window_layers") if "max_window_layers" in c.values else 0
    if window is None and c.values.get("layer_types") is None:
        return {}
    c.values["sliding_window"] = window

    def derived() -> list[str]:  # sliding from max_window_layers on (configuration_qwen3.py)
        if window is None or start >= L:
            return _periodic(L, ["full_attention"])
        if start <= 0:
            return _periodic(L, ["sliding_attention"])
        _too_many(c, L)  # full layers first, then sliding: no shorter period
        return ["full_attention"] * start + ["sliding_attention"] * (L - start)

    return _pattern(c, _given_or(c, derived), L)


def _gemma2(c: Reader) -> dict[str, Any]:
    """modeling_gemma2.py: four RMSNorms per layer (input, post-attention, pre- and post-
    feedforward), q/k/v/o bias=attention_bias, GeGLU, tied head; soft-capping and the query scalar
    carry no parameters. Layers alternate sliding and full (configuration_gemma2.py)."""
    spec = _gemma2_block(c)
    L = spec["n_layers"]
    return spec | _pattern(c, _given_or(c, lambda: _periodic(L, ["sliding_attention", "full_attention"])), L)


def _no_bidirectional(c: Reader) -> None:
    if c.values.get("use_bidirectional_attention") is True:
        raise c._bad("use_bidirectional_attention", "false (bidirectional attention is not decoder-only)")


def _gemma3(c: Reader) -> dict[str, Any]:
    """modeling_gemma3.py (Gemma3ForCausalLM): Gemma 2's block plus per-head q_norm/k_norm
    (RMSNorm(head_dim)); layers: five sliding then one full (sliding_window_pattern = 6)."""
    spec = _gemma2_block(c)
    spec |= {"qk_norm": True, "qk_norm_scope": "head"}
    L = spec["n_layers"]
    every = c.int("sliding_window_pattern") if "sliding_window_pattern" in c.values else 6
    if every < 1:
        raise c._bad("sliding_window_pattern", "a whole number >= 1")
    if every > MAX_DERIVED_LAYERS:
        raise c._bad("sliding_window_pattern", f"at most {MAX_DERIVED_LAYERS}")
    period = ["sliding_attention"] * (every - 1) + ["full_attention"]
    return spec | _pattern(c, _given_or(c, lambda: _periodic(L, period)), L)


def _gemma2_block(c: Reader) -> dict[str, Any]:
    _no_bidirectional(c)
    bias = c.flag("attention_bias")
    return rotary_common(c, bias, bias, False) | {"mlp": gated_mlp_kind(c, "hidden_activation"), "norms_per_layer": 4}


def _olmo2(c: Reader) -> dict[str, Any]:
    """modeling_olmo2.py: post-attention and post-feedforward RMSNorms (two per layer), q_norm over
    A·h_d and k_norm over n_kv·h_d (full width), q/k/v/o bias=attention_bias, SwiGLU."""
    bias = c.flag("attention_bias")
    return rotary_common(c, bias, bias, False) | {
        "mlp": gated_mlp_kind(c, "hidden_act"), "qk_norm": True, "qk_norm_scope": "full",
    }


def _phi3(c: Reader) -> dict[str, Any]:
    """modeling_phi3.py: fused qkv_proj and gate_up_proj (the same counts as separate matrices),
    no biases, two RMSNorms, SwiGLU; a sliding window on every layer when the config sets one."""
    spec = rotary_common(c, False, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    return spec | _all_sliding(c, spec["n_layers"])


def _all_sliding(c: Reader, L: int) -> dict[str, Any]:
    if not c.opt_int("sliding_window"):
        return {}
    return _pattern(c, _periodic(L, ["sliding_attention"]), L)


def _granite(c: Reader) -> dict[str, Any]:
    """modeling_granite.py: Llama's layout (attention_bias, mlp_bias); its embedding, residual,
    attention and logits multipliers carry no parameters."""
    bias = c.flag("attention_bias")
    return rotary_common(c, bias, bias, c.flag("mlp_bias")) | {"mlp": gated_mlp_kind(c, "hidden_act")}


def _cohere(c: Reader) -> dict[str, Any]:
    """modeling_cohere.py: one CohereLayerNorm (weight only, no bias) feeding attention and MLP in
    parallel, a final one, q/k/v/o bias=attention_bias, SwiGLU, tied head; use_qk_norm adds
    CohereLayerNorm((A, h_d)) and ((n_kv, h_d)): full width, weight only."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {
        "mlp": gated_mlp_kind(c, "hidden_act"), "norm": "layernorm", "norm_bias": False,
        "norms_per_layer": 1, "parallel_attn": True,
    }
    if c.values.get("use_qk_norm") is not None and c.flag("use_qk_norm"):  # null: off, as transformers reads it
        spec |= {"qk_norm": True, "qk_norm_scope": "full"}
    return spec


def _starcoder2(c: Reader) -> dict[str, Any]:
    """modeling_starcoder2.py: q/k/v/o and c_fc/c_proj with bias=use_bias, two LayerNorms with bias
    per layer and a final one, a plain GELU MLP, tied head; a sliding window on every layer."""
    bias = c.flag("use_bias")
    spec = rotary_common(c, bias, bias, bias) | {"mlp": plain_mlp_kind(c, "hidden_act"), "norm": "layernorm"}
    return spec | _all_sliding(c, spec["n_layers"])


# ---------------------------------------------------------------------------- MoE families
def _qwen_moe_layers(c: Reader, spec: dict[str, Any], n_experts: int) -> dict[str, Any]:
    """modeling_qwen{2,3}_moe.py: layer i is MoE iff i not in mlp_only_layers and num_experts > 0
    and (i + 1) % decoder_sparse_step == 0; the others get a dense MLP of intermediate_size."""
    only = c.values.get("mlp_only_layers") or []
    if not isinstance(only, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in only):
        raise c._bad("mlp_only_layers", "a list of layer indices")
    out: dict[str, Any] = {"moe_layer_step": c.int("decoder_sparse_step")}
    if out["moe_layer_step"] < 1:
        raise c._bad("decoder_sparse_step", "a whole number >= 1")
    if only:
        out["dense_layer_ids"] = sorted({i for i in only if 0 <= i < spec["n_layers"]})
    if n_experts == 0:  # no experts at all: every layer dense, num_experts_per_tok unused
        spec.pop("experts_per_token", None)
        out = {"moe_layer_step": 1, "first_dense_layers": spec["n_layers"]}
    return out


qwen_moe_layers = _qwen_moe_layers  # public for the hybrid families (hf_hybrid.py: Qwen3-Next)


def _qwen2_moe(c: Reader) -> dict[str, Any]:
    """modeling_qwen2_moe.py: q/k/v bias=qkv_bias, o_proj without; routed experts of
    moe_intermediate_size, a shared expert of shared_expert_intermediate_size with its
    Linear(D, 1) gate, router (E, D) without bias."""
    qkv = c.flag("qkv_bias")
    spec = rotary_common(c, qkv, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    n = c.int("num_experts")  # configuration_qwen2_moe.py's field
    spec |= {
        "n_experts": max(n, 1), "experts_per_token": c.int("num_experts_per_tok"), "router": n > 0,
        "moe_d_ff": c.int("moe_intermediate_size"),
        "shared_expert_d_ff": c.int("shared_expert_intermediate_size"), "shared_expert_gate": True,
    }
    spec |= _qwen_moe_layers(c, spec, n)
    return spec | _qwen_pattern_moe(c, spec["n_layers"])


def _qwen_pattern_moe(c: Reader, L: int) -> dict[str, Any]:
    """configuration_qwen2_moe.py: sliding on odd... layers below max_window_layers when
    use_sliding_window; qwen3_moe ignores the window in its cache."""
    if not c.flag("use_sliding_window") and c.values.get("layer_types") is None:
        return {}
    start = c.int("max_window_layers") if "max_window_layers" in c.values else L
    sliding = c.flag("use_sliding_window")

    def derived() -> list[str]:  # even layers below max_window_layers slide (configuration_qwen2_moe.py)
        if not sliding or start <= 0:
            return _periodic(L, ["full_attention"])
        if start >= L:
            return _periodic(L, ["sliding_attention", "full_attention"])
        _too_many(c, L)
        return ["sliding_attention" if (i + 1) % 2 and i < start else "full_attention" for i in range(L)]

    return _pattern(c, _given_or(c, derived), L)


def _qwen3_moe(c: Reader) -> dict[str, Any]:
    """modeling_qwen3_moe.py: Qwen3's attention (per-head q/k norms, head_dim), routed experts of
    moe_intermediate_size, router (E, D) without bias, no shared expert."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    # configuration_qwen3_moe.py: the field is num_experts; attribute_map sends num_experts to
    # num_local_experts, so a num_local_experts in the file wins over num_experts
    n = c.int("num_experts")
    spec |= {
        "qk_norm": True, "qk_norm_scope": "head",
        "n_experts": max(n, 1), "experts_per_token": c.int("num_experts_per_tok"), "router": n > 0,
        "moe_d_ff": c.int("moe_intermediate_size"),
    }
    spec |= _qwen_moe_layers(c, spec, n)
    # sliding_window is None unless use_sliding_window; when set, every layer slides (the model's
    # mask and DynamicCache both read config.sliding_window; max_window_layers is not read)
    if c.flag("use_sliding_window") and c.opt_int("sliding_window") is not None:
        spec |= _pattern(c, ["sliding_attention"], 1)
    return spec


def _deepseek_v3(c: Reader) -> dict[str, Any]:
    """modeling_deepseek_v3.py: multi-head latent attention (q_a/q_b or q_proj, kv_a_proj_with_mqa,
    kv_b_proj, o_proj; q_a/kv_a RMSNorms; q_a, kv_a, o biases = attention_bias), the first
    first_k_dense_replace layers dense (intermediate_size), then MoE: n_routed_experts of
    moe_intermediate_size, n_shared_experts x moe_intermediate_size shared, router (E, D) without
    bias (e_score_correction_bias is a buffer). num_nextn_predict_layers: MTP modules, not built."""
    return mla_spec(c, c.flag("tie_word_embeddings")) | _shared_moe(c, "n_routed_experts") | _mtp(c)


def mla_spec(c: Reader, tied: bool) -> dict[str, Any]:
    """The shape of a DeepSeek-V2/V3-style multi-head latent attention model (modeling_deepseek_v3.py
    DeepseekV3Attention: q_a/q_b or q_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj; q_a/kv_a
    RMSNorms; q_a, kv_a, o biases = attention_bias; a gated MLP of intermediate_size), the LM head
    tied as `tied` says; the one MLA reader of deepseek_v3, glm4_moe_lite, deepseek_v32,
    glm_moe_dsa and kimi_linear."""
    bias = c.flag("attention_bias")
    spec = c.shape() | {
        "d_ff": c.int("intermediate_size"),
        "max_seq_len": c.int("max_position_embeddings"),
        "positional": "rotary", "norm": "rmsnorm",
        "tied_embeddings": tied,
        "mlp": gated_mlp_kind(c, "hidden_act"),
        "q_lora_rank": c.opt_int("q_lora_rank"),
        "kv_lora_rank": c.int("kv_lora_rank"),
        "qk_rope_head_dim": c.int("qk_rope_head_dim"),
        "qk_nope_head_dim": c.int("qk_nope_head_dim"),
        "v_head_dim": c.int("v_head_dim"),
    } | mlp_attention_biases(bias, bias, False)
    for key in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        if spec[key] is not None and spec[key] < 1:  # transformers builds empty projections
            raise c._bad(key, "a whole number >= 1 (tcalc's multi-head latent attention has no empty parts)")
    return spec


def _shared_moe(c: Reader, experts_key: str) -> dict[str, Any]:
    moe = c.int("moe_intermediate_size")
    if c.int(experts_key) < 1:  # transformers builds MoE blocks of the shared expert alone
        raise c._bad(experts_key, "a whole number >= 1 (tcalc has no MoE layer without routed experts)")
    return {
        "n_experts": c.int(experts_key), "experts_per_token": c.int("num_experts_per_tok"), "router": True,
        "moe_d_ff": moe, "shared_expert_d_ff": c.int("n_shared_experts") * moe,
        # layer_idx >= first_k_dense_replace is MoE: a negative value makes every layer MoE
        "first_dense_layers": max(0, c.int("first_k_dense_replace")),
    }


def _mtp(c: Reader) -> dict[str, Any]:
    n = c.opt_int("num_nextn_predict_layers")
    return {"mtp_layers": n} if n else {}


def _glm4_moe(c: Reader) -> dict[str, Any]:
    """modeling_glm4_moe.py: q/k/v bias=attention_bias, o_proj without; per-head q_norm/k_norm when
    use_qk_norm; partial rotary (no parameters); DeepSeek-style MoE (first_k_dense_replace dense
    layers, n_shared_experts x moe_intermediate_size shared, router (E, D))."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    if c.flag("use_qk_norm"):
        spec |= {"qk_norm": True, "qk_norm_scope": "head"}
    return spec | _shared_moe(c, "n_routed_experts") | _mtp(c)


def _gpt_oss(c: Reader) -> dict[str, Any]:
    """modeling_gpt_oss.py: q/k/v/o bias=attention_bias, a sink logit per head, experts with biases
    (gate_up_proj (E, D, 2F) + (E, 2F), down_proj (E, F, D) + (E, D)), router (E, D) with bias,
    two RMSNorms; layers alternate sliding and full (configuration_gpt_oss.py)."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, True) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    spec |= {
        "attention_sinks": True, "n_experts": c.int("num_local_experts"),
        "experts_per_token": c.int("num_experts_per_tok"), "router": True, "router_bias": True,
    }
    L = spec["n_layers"]
    return spec | _pattern(c, _given_or(c, lambda: _periodic(L, ["sliding_attention", "full_attention"])), L)


def _llama4_text(c: Reader) -> dict[str, Any]:
    """modeling_llama4.py (Llama4ForCausalLM): q/k/v/o bias=attention_bias, the qk L2 norm has no
    parameters; MoE layers (moe_layers, default every interleave_moe_layer_step-th) hold
    num_local_experts experts of intermediate_size (no biases), a shared expert of
    intermediate_size and a router (E, D) without bias; the other layers a dense MLP of
    intermediate_size_mlp. Chunked attention on the RoPE layers (no_rope_layers = 1), full on the
    NoPE ones (every no_rope_layer_interval-th)."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    L = spec["n_layers"]
    F = c.int("intermediate_size")
    spec |= {
        "d_ff": c.int("intermediate_size_mlp"), "moe_d_ff": F, "shared_expert_d_ff": F,
        "n_experts": c.int("num_local_experts"), "experts_per_token": c.int("num_experts_per_tok"),
        "router": True,
    }
    moe_layers = c.values.get("moe_layers")
    if moe_layers is None:
        step = c.int("interleave_moe_layer_step")
        if step < 1:
            raise c._bad("interleave_moe_layer_step", "a whole number >= 1")
        spec["moe_layer_step"] = step
    else:
        if not isinstance(moe_layers, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in moe_layers):
            raise c._bad("moe_layers", "a list of layer indices")
        chosen = sorted({i for i in moe_layers if 0 <= i < L})
        # The MoE layers lie on every step-th layer, step = gcd of their (i + 1) (a default list
        # gives interleave_moe_layer_step back); the other step-th layers are listed dense. No loop
        # over L: a list that leaves very many of them dense is refused.
        step = 0
        for i in chosen:
            step = math.gcd(step, i + 1)
        step = step or 1
        if L // step - len(chosen) > MAX_DERIVED_LAYERS:
            raise c._bad("moe_layers", f"a list leaving at most {MAX_DERIVED_LAYERS} of every {step}-th layer dense")
        spec["moe_layer_step"] = step
        if L // step > len(chosen):
            spec["dense_layer_ids"] = sorted(set(range(step - 1, L, step)) - set(chosen))
    interval = c.int("no_rope_layer_interval") if "no_rope_layer_interval" in c.values else 4
    if not 1 <= interval <= MAX_DERIVED_LAYERS:
        raise c._bad("no_rope_layer_interval", f"a whole number from 1 to {MAX_DERIVED_LAYERS}")
    no_rope = c.values.get("no_rope_layers")

    def derived() -> list[str]:
        if no_rope:
            if not isinstance(no_rope, list) or len(no_rope) != L:
                raise c._bad("no_rope_layers", f"a list of {L} flags")
            return ["chunked_attention" if flag else "full_attention" for flag in no_rope]
        period = ["chunked_attention" if (i + 1) % interval else "full_attention" for i in range(interval)]
        return _periodic(L, period)

    return spec | _pattern(c, _given_or(c, derived), L)


_QWEN3_DEFAULTS = LLAMA_DEFAULTS | {  # configuration_qwen3.py
    "vocab_size": 151936, "intermediate_size": 22016, "num_key_value_heads": 32, "head_dim": 128,
    "max_position_embeddings": 32768, "use_sliding_window": False, "sliding_window": 4096,
    "max_window_layers": 28, "layer_types": None,
}  # fmt: skip
_GEMMA2_DEFAULTS = LLAMA_DEFAULTS | {  # configuration_gemma2.py
    "vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192,
    "tie_word_embeddings": True, "sliding_window": 4096, "layer_types": None,
}  # fmt: skip

def _floor_head_dim(build: Any) -> Any:
    """transformers takes head_dim = hidden_size // num_attention_heads (floor) when the config
    gives none; tcalc's default D/A needs divisibility, so the floor is pinned explicitly."""

    def wrapped(c: Reader) -> dict[str, Any]:
        spec = build(c)
        D, A = spec.get("d_model"), spec.get("n_heads")
        if "head_dim" not in spec and "kv_lora_rank" not in spec and isinstance(D, int) and isinstance(A, int) and A and D % A:
            spec["head_dim"] = D // A
        return spec

    return wrapped


FAMILIES: dict[str, Family] = {
    "qwen3": Family(_qwen3, _QWEN3_DEFAULTS, ("attention_dropout",)),
    "gemma2": Family(_gemma2, _GEMMA2_DEFAULTS, ("attention_dropout",)),
    "gemma3_text": Family(
        _gemma3,
        _GEMMA2_DEFAULTS | {"vocab_size": 262208, "max_position_embeddings": 131072},  # configuration_gemma3.py
        ("attention_dropout",),
    ),
    "olmo2": Family(
        _olmo2,
        LLAMA_DEFAULTS | {"vocab_size": 50304},  # configuration_olmo2.py
        ("attention_dropout",),
    ),
    "phi3": Family(
        _phi3,
        LLAMA_DEFAULTS | {  # configuration_phi3.py
            "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192,
            "max_position_embeddings": 4096, "sliding_window": None, "resid_pdrop": 0.0,
            "embd_pdrop": 0.0,
        },
        ("attention_dropout", "resid_pdrop"),  # modeling_phi3.py never applies embd_pdrop
    ),
    "granite": Family(_granite, LLAMA_DEFAULTS, ("attention_dropout",)),  # configuration_granite.py
    "cohere": Family(
        _cohere,
        LLAMA_DEFAULTS | {  # configuration_cohere.py
            "vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528,
            "num_hidden_layers": 40, "num_attention_heads": 64, "max_position_embeddings": 8192,
            "tie_word_embeddings": True, "use_qk_norm": False,
        },
        ("attention_dropout",),
    ),
    "starcoder2": Family(
        _starcoder2,
        LLAMA_DEFAULTS | {  # configuration_starcoder2.py
            "vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288,
            "num_hidden_layers": 30, "num_attention_heads": 24, "num_key_value_heads": 2,
            "hidden_act": "gelu_pytorch_tanh", "max_position_embeddings": 4096,
            "tie_word_embeddings": True, "sliding_window": None, "use_bias": True,
            "residual_dropout": 0.0, "embedding_dropout": 0.0,
        },
        ("attention_dropout", "residual_dropout", "embedding_dropout"),
    ),
    "qwen2_moe": Family(
        _qwen2_moe,
        LLAMA_DEFAULTS | {  # configuration_qwen2_moe.py
            "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
            "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
            "max_position_embeddings": 32768, "use_sliding_window": False, "sliding_window": 4096,
            "max_window_layers": 28, "decoder_sparse_step": 1, "moe_intermediate_size": 1408,
            "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4, "num_experts": 60,
            "mlp_only_layers": None, "qkv_bias": True, "layer_types": None,
        },
        ("attention_dropout",),
    ),
    "qwen3_moe": Family(
        _qwen3_moe,
        _QWEN3_DEFAULTS | {  # configuration_qwen3_moe.py
            "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 24,
            "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": None,
            "decoder_sparse_step": 1, "moe_intermediate_size": 768, "num_experts_per_tok": 8,
            "num_experts": 128, "mlp_only_layers": None,
        },
        ("attention_dropout",),
        {"num_local_experts": "num_experts"},  # attribute_map name, applied last: it wins
        frozenset({"num_local_experts"}),
    ),
    "deepseek_v3": Family(
        _deepseek_v3,
        LLAMA_DEFAULTS | {  # configuration_deepseek_v3.py
            "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
            "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
            "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
            "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536,
            "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
            "max_position_embeddings": 4096, "num_nextn_predict_layers": 1,
        },
        ("attention_dropout",),
        {"num_local_experts": "n_routed_experts", "num_mtp_layers": "num_nextn_predict_layers"},
        frozenset({"num_local_experts", "num_mtp_layers"}),
    ),
    "glm4_moe": Family(
        _glm4_moe,
        LLAMA_DEFAULTS | {  # configuration_glm4_moe.py
            "vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 10944,
            "num_hidden_layers": 46, "num_attention_heads": 96, "num_key_value_heads": 8,
            "max_position_embeddings": 131072, "moe_intermediate_size": 1408,
            "num_experts_per_tok": 8, "n_shared_experts": 1, "n_routed_experts": 128,
            "first_k_dense_replace": 1, "use_qk_norm": False, "num_nextn_predict_layers": 1,
        },
        ("attention_dropout",),
        {"num_local_experts": "n_routed_experts", "num_mtp_layers": "num_nextn_predict_layers"},
        frozenset({"num_local_experts", "num_mtp_layers"}),
    ),
    "gpt_oss": Family(
        _gpt_oss,
        LLAMA_DEFAULTS | {  # configuration_gpt_oss.py
            "vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880,
            "num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8,
            "head_dim": 64, "num_local_experts": 128, "num_experts_per_tok": 4,
            "max_position_embeddings": 131072, "sliding_window": 128, "attention_bias": True,
            "layer_types": None,
        },
        ("attention_dropout",),
        {"num_experts": "num_local_experts"},  # attribute_map
        frozenset({"num_experts"}),
    ),
    "llama4_text": Family(
        _llama4_text,
        LLAMA_DEFAULTS | {  # configuration_llama4.py (Llama4TextConfig)
            "vocab_size": 202048, "hidden_size": 5120, "intermediate_size": 8192,
            "intermediate_size_mlp": 16384, "num_hidden_layers": 48, "num_attention_heads": 40,
            "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
            "num_experts_per_tok": 1, "num_local_experts": 16, "moe_layers": None,
            "interleave_moe_layer_step": 1, "attention_chunk_size": 8192, "no_rope_layers": None,
            "no_rope_layer_interval": 4, "layer_types": None,
        },
        ("attention_dropout",),
    ),
}



# ---------------------------------------------------------------------------- multimodal text parts
# The language models of the multimodal wrappers (sources.hf WRAPPERS; qwen2_5_vl_text, a Qwen2, is
# in sources.hf), read only inside their wrapper's config (transformers builds them as the wrapper's language_model, never alone).
def without_keys(keys: tuple[str, ...], build: Any) -> Any:
    """`build` with keys the text config class does not read removed (their defaults apply)."""

    def wrapped(c: Reader) -> dict[str, Any]:
        for key in keys:
            c.values.pop(key, None)
        return build(c)

    return wrapped


def _no_window(build: Any) -> Any:
    """`build` on a text model whose attention never slides (Qwen3-VL's text configs set
    sliding_window None: modeling_qwen3_vl.py builds full attention on every layer)."""

    def wrapped(c: Reader) -> dict[str, Any]:
        c.values.update({"use_sliding_window": False, "layer_types": None})
        return build(c)

    return wrapped


def _glm4v_text(c: Reader) -> dict[str, Any]:
    """modeling_glm4v.py Glm4vTextModel: q/k/v with bias, o_proj without (hard-coded), head_dim =
    hidden_size // num_attention_heads (config.head_dim is not read), fused gate_up_proj + down_proj
    without bias (the same count as three matrices), four RMSNorms per layer (input,
    post_self_attn, post_attention, post_mlp)."""
    c.values.pop("head_dim", None)
    spec = rotary_common(c, True, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act"), "norms_per_layer": 4}
    return spec


def _glm4v_moe_text(c: Reader) -> dict[str, Any]:
    """modeling_glm4v_moe.py Glm4vMoeTextModel: GLM-4-MoE's layers (q/k/v bias=attention_bias,
    o_proj without; head_dim = getattr(config, "head_dim", D // A); first_k_dense_replace dense
    layers, then routed + shared experts and a router), without q/k norms."""
    c.values["use_qk_norm"] = False
    return _glm4_moe(c)


TEXT_PARTS: dict[str, Family] = {
    "qwen3_vl_text": Family(
        _no_window(_qwen3),
        _QWEN3_DEFAULTS | {  # configuration_qwen3_vl.py Qwen3VLTextConfig
            "num_key_value_heads": 32, "max_position_embeddings": 128000,
        },
        ("attention_dropout",),
    ),
    "qwen3_vl_moe_text": Family(
        _no_window(_qwen3_moe),
        _QWEN3_DEFAULTS | {  # configuration_qwen3_vl_moe.py Qwen3VLMoeTextConfig
            "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24, "num_attention_heads": 16,
            "num_key_value_heads": 16, "max_position_embeddings": 128000, "tie_word_embeddings": True,
            "head_dim": None, "decoder_sparse_step": 1, "moe_intermediate_size": 1408, "num_experts_per_tok": 4,
            "num_experts": 60, "mlp_only_layers": None,
        },
        ("attention_dropout",),
        {"num_local_experts": "num_experts"},  # attribute_map name, applied last: it wins
        frozenset({"num_local_experts"}),
    ),
    "glm4v_text": Family(
        _glm4v_text,
        LLAMA_DEFAULTS | {  # configuration_glm4v.py Glm4vTextConfig
            "vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 13696, "num_hidden_layers": 40,
            "num_attention_heads": 32, "num_key_value_heads": 2, "max_position_embeddings": 32768,
        },
        ("attention_dropout",),
    ),
    "glm4v_moe_text": Family(
        _glm4v_moe_text,
        LLAMA_DEFAULTS | {  # configuration_glm4v_moe.py Glm4vMoeTextConfig
            "vocab_size": 151424, "hidden_size": 4096, "intermediate_size": 10944, "num_hidden_layers": 46,
            "num_attention_heads": 96, "num_key_value_heads": 8, "max_position_embeddings": 65536,
            "attention_bias": True, "moe_intermediate_size": 1408, "num_experts_per_tok": 8,
            "n_shared_experts": 1, "n_routed_experts": 128, "first_k_dense_replace": 1,
            "num_nextn_predict_layers": None,
        },
        ("attention_dropout",),
        {"num_local_experts": "n_routed_experts"},  # attribute_map
        frozenset({"num_local_experts"}),
    ),
}
FAMILIES.update(TEXT_PARTS)

for _name, _fam in list(FAMILIES.items()):
    FAMILIES[_name] = Family(_floor_head_dim(_fam.build), _fam.defaults, _fam.dropout_keys, _fam.aliases, _fam.late)

# The layer-pattern helpers under public names, for the 2025-26 families (hf_2025.py).
given_or, layer_pattern, periodic, refuse_long_layer_list, mtp_spec = _given_or, _pattern, _periodic, _too_many, _mtp
